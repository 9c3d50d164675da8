//! Block postings of one term, the storage unit of a BM25 index: a term's postings (document,
//! term frequency, document length) sorted by document, cut into blocks of at most
//! [`BLOCK_SIZE`] postings. A block is stored as bytes (document ids delta-encoded, then the
//! frequency and the length, each an unsigned LEB128 varint) with a small header kept apart:
//! its first and last document, its count, and what an upper bound of the term's score over the
//! block needs under *any* statistics — the block's staircase: the (frequency, length) pairs no
//! other posting of the block beats in both (a higher frequency and a shorter document), at
//! most [`STEPS`] of them. BM25's term score grows with the frequency and falls with the length
//! for every k1 ≥ 0 and b ∈ [0, 1], so the best score over the staircase is the block's best
//! posting's score whatever a corpus's idf, average length, k1 and b are, and still an upper
//! bound when the staircase is coarsened to fit ([`BlockMeta::bound`]).

use std::collections::BTreeMap;

use crate::bm25::{tf_norm, Bm25Params};
use crate::tsvector::TsVector;

/// Postings per block: small enough that a block's bound stays close to its postings' scores,
/// large enough that its header is a small share of its bytes.
pub const BLOCK_SIZE: usize = 128;

/// One posting: a document (an increasing id: in an index, the row's physical position), the
/// term's count in it and the document's length in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posting {
    pub doc: u64,
    pub tf: u32,
    pub len: u32,
}

/// At most this many steps of a block's staircase are kept.
pub const STEPS: usize = 4;

/// A block's staircase: (frequency, length) pairs, both increasing, such that every posting
/// of the block has a frequency at most and a length at least those of one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Staircase {
    n: u8,
    steps: [(u32, u32); STEPS],
}

impl Staircase {
    /// The postings' staircase: the pairs no posting dominates, merged neighbour by neighbour
    /// (a merge keeps the higher frequency and the shorter length, which dominates both) while
    /// there are more than [`STEPS`]; the merge chosen is the one that loosens least.
    pub fn of(postings: &[Posting]) -> Staircase {
        let mut pairs: Vec<(u32, u32)> = postings.iter().map(|p| (p.tf, p.len)).collect();
        // by frequency descending, then length ascending: a pair is a step when it is shorter
        // than every pair of a higher frequency
        pairs.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut steps: Vec<(u32, u32)> = Vec::new();
        for (tf, len) in pairs {
            if steps.last().is_none_or(|&(_, l)| len < l) {
                steps.push((tf, len));
            }
        }
        steps.reverse();
        while steps.len() > STEPS {
            let loss = |i: usize| {
                let (a, b) = (steps[i], steps[i + 1]);
                f64::from(b.0 - a.0) / f64::from(b.0.max(1)) + f64::from(b.1 - a.1) / f64::from(b.1.max(1))
            };
            let i = (0..steps.len() - 1).min_by(|&x, &y| loss(x).total_cmp(&loss(y))).unwrap_or(0);
            steps[i] = (steps[i + 1].0, steps[i].1);
            steps.remove(i + 1);
        }
        Staircase::from_steps(&steps).unwrap_or_default()
    }

    /// Steps as stored; None unless there are 1 to [`STEPS`] of them, both components strictly
    /// increasing.
    pub fn from_steps(steps: &[(u32, u32)]) -> Option<Staircase> {
        if steps.is_empty() || steps.len() > STEPS || steps.windows(2).any(|w| w[0].0 >= w[1].0 || w[0].1 >= w[1].1) {
            return None;
        }
        let mut s = Staircase { n: steps.len() as u8, steps: [(0, 0); STEPS] };
        s.steps[..steps.len()].copy_from_slice(steps);
        Some(s)
    }

    pub fn steps(&self) -> &[(u32, u32)] {
        &self.steps[..usize::from(self.n)]
    }

    /// The largest frequency of the block.
    pub fn max_tf(&self) -> u32 {
        self.steps().last().map_or(0, |s| s.0)
    }

    /// The smallest document length of the block.
    pub fn min_len(&self) -> u32 {
        self.steps().first().map_or(0, |s| s.1)
    }
}

/// What a block's header holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockMeta {
    pub first_doc: u64,
    pub last_doc: u64,
    pub count: u32,
    pub staircase: Staircase,
}

/// Relative and absolute slack added to every bound: the bound and the score it bounds are
/// computed by different floating-point paths (one term's best case against a sum over
/// terms), and a bound must never fall below the score by a rounding.
const SLACK: f64 = 1e-9;

impl BlockMeta {
    /// An upper bound of `factor · tfn(tf, len)` over the block's postings (`factor`: the
    /// term's query weight × query count × idf, never negative).
    pub fn bound(&self, factor: f64, avg_doc_len: f64, p: Bm25Params) -> f64 {
        let best = self
            .staircase
            .steps()
            .iter()
            .map(|&(tf, len)| tf_norm(f64::from(tf), f64::from(len), avg_doc_len, p))
            .fold(0.0, f64::max);
        inflate(factor * best)
    }
}

/// A computed bound made safe against rounding.
pub fn inflate(bound: f64) -> f64 {
    bound + bound.abs() * SLACK + SLACK * 1e-3
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline(always)]
pub(crate) fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    // most numbers of a block (gaps, frequencies) fit in one byte
    let b = *bytes.get(*at)?;
    *at += 1;
    if b & 0x80 == 0 {
        return Some(u64::from(b));
    }
    let mut v = u64::from(b & 0x7F);
    let mut shift = 7;
    loop {
        let b = *bytes.get(*at)?;
        *at += 1;
        if shift >= 64 {
            return None;
        }
        v |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
    }
}

/// Encode postings (sorted by document, no repeats, at most [`BLOCK_SIZE`]) as one block.
pub fn encode_block(postings: &[Posting]) -> (BlockMeta, Vec<u8>) {
    let mut out = Vec::with_capacity(postings.len() * 4);
    let mut prev = postings.first().map_or(0, |p| p.doc);
    for (i, p) in postings.iter().enumerate() {
        put_varint(&mut out, if i == 0 { 0 } else { p.doc - prev });
        put_varint(&mut out, u64::from(p.tf));
        put_varint(&mut out, u64::from(p.len));
        prev = p.doc;
    }
    let meta = BlockMeta {
        first_doc: postings.first().map_or(0, |p| p.doc),
        last_doc: postings.last().map_or(0, |p| p.doc),
        count: postings.len() as u32,
        staircase: Staircase::of(postings),
    };
    (meta, out)
}

/// Decode a block written by [`encode_block`]; None when the bytes do not hold `meta.count`
/// postings (a damaged block).
pub fn decode_block(meta: &BlockMeta, bytes: &[u8]) -> Option<Vec<Posting>> {
    let mut out = Vec::with_capacity(meta.count as usize);
    decode_block_into(meta, bytes, &mut out).then_some(out)
}

/// [`decode_block`] into a buffer (cleared first); false for a damaged block.
pub fn decode_block_into(meta: &BlockMeta, bytes: &[u8], out: &mut Vec<Posting>) -> bool {
    out.clear();
    out.reserve(meta.count as usize);
    let mut at = 0;
    let mut doc = meta.first_doc;
    for _ in 0..meta.count {
        // most postings are a one-byte gap and frequency and a length of one or two bytes
        if let Some(&[gap, tf, l0]) = bytes.get(at..at + 3) {
            if (gap | tf) & 0x80 == 0 {
                let len = if l0 & 0x80 == 0 {
                    at += 3;
                    Some(u32::from(l0))
                } else {
                    match bytes.get(at + 3) {
                        Some(&l1) if l1 & 0x80 == 0 => {
                            at += 4;
                            Some(u32::from(l0 & 0x7F) | u32::from(l1) << 7)
                        }
                        _ => None,
                    }
                };
                if let Some(len) = len {
                    let Some(d) = doc.checked_add(u64::from(gap)) else { return false };
                    doc = d;
                    out.push(Posting { doc, tf: u32::from(tf), len });
                    continue;
                }
            }
        }
        let (Some(gap), Some(tf), Some(len)) =
            (get_varint(bytes, &mut at), get_varint(bytes, &mut at), get_varint(bytes, &mut at))
        else {
            return false;
        };
        let (Some(d), Ok(tf), Ok(len)) = (doc.checked_add(gap), u32::try_from(tf), u32::try_from(len)) else {
            return false;
        };
        doc = d;
        out.push(Posting { doc, tf, len });
    }
    at == bytes.len() && out.last().map(|p| p.doc) == Some(meta.last_doc)
}

/// Buffers of dropped [`TermPostings`] kept for the next ones this thread reads (a backend is
/// one thread). A buffer of a common word's postings runs to megabytes; allocated afresh on
/// every search, each 4 kB of it cost a page fault when first written, more than filling it.
mod pool {
    use std::cell::{Cell, RefCell};
    use std::thread::LocalKey;

    /// Buffers smaller than this are left to the allocator (they come from its own free lists).
    const MIN_BYTES: usize = 64 * 1024;
    /// The most a thread keeps, all kinds of buffer together.
    pub(super) const MAX_BYTES: usize = 16 * 1024 * 1024;

    pub struct Pool<T> {
        pub(super) free: Vec<Vec<T>>,
    }

    impl<T> Pool<T> {
        pub const fn new() -> Pool<T> {
            Pool { free: Vec::new() }
        }
    }

    fn size<T>(v: &Vec<T>) -> usize {
        v.capacity() * std::mem::size_of::<T>()
    }

    /// An empty buffer, with room from an earlier one when the pool has one.
    pub fn take<T: 'static>(pool: &'static LocalKey<RefCell<Pool<T>>>) -> Vec<T> {
        pool.try_with(|p| {
            let v = p.borrow_mut().free.pop()?;
            let _ = KEPT.try_with(|k| k.set(k.get().saturating_sub(size(&v))));
            Some(v)
        })
        .ok()
        .flatten()
        .unwrap_or_default()
    }

    /// Keep a buffer's room for a later [`take`] (within the thread's limit).
    pub fn give<T: 'static>(pool: &'static LocalKey<RefCell<Pool<T>>>, mut v: Vec<T>) {
        let size = size(&v);
        if size < MIN_BYTES {
            return;
        }
        v.clear();
        let _ = KEPT.try_with(|k| {
            if k.get() + size <= MAX_BYTES && pool.try_with(|p| p.borrow_mut().free.push(v)).is_ok() {
                k.set(k.get() + size);
            }
        });
    }

    /// The bytes the pools hold.
    #[cfg(test)]
    pub fn kept() -> usize {
        KEPT.try_with(Cell::get).unwrap_or(0)
    }

    thread_local! {
        static KEPT: Cell<usize> = const { Cell::new(0) };
        pub static BYTES: RefCell<Pool<u8>> = const { RefCell::new(Pool::new()) };
        pub static METAS: RefCell<Pool<super::BlockMeta>> = const { RefCell::new(Pool::new()) };
        pub static RANGES: RefCell<Pool<(usize, usize)>> = const { RefCell::new(Pool::new()) };
    }
}

/// A term's postings as blocks, in memory: what a scan of an index reads, and the reference
/// the index's tests compare with.
#[derive(Debug, Clone, Default)]
pub struct TermPostings {
    pub blocks: Vec<BlockMeta>,
    /// Every block's encoded postings, in order (with whatever bytes lie between them when read
    /// from an index's pages).
    data: Vec<u8>,
    /// Where each block's bytes lie in `data`.
    ranges: Vec<(usize, usize)>,
}

impl Drop for TermPostings {
    fn drop(&mut self) {
        pool::give(&pool::BYTES, std::mem::take(&mut self.data));
        pool::give(&pool::METAS, std::mem::take(&mut self.blocks));
        pool::give(&pool::RANGES, std::mem::take(&mut self.ranges));
    }
}

impl TermPostings {
    /// Room for `blocks` blocks.
    pub fn with_capacity(blocks: usize) -> TermPostings {
        let mut t = TermPostings {
            blocks: pool::take(&pool::METAS),
            data: pool::take(&pool::BYTES),
            ranges: pool::take(&pool::RANGES),
        };
        t.blocks.reserve(blocks);
        t.ranges.reserve(blocks);
        t
    }

    /// From postings sorted by document.
    pub fn build(postings: &[Posting]) -> TermPostings {
        let mut t = TermPostings::with_capacity(postings.len().div_ceil(BLOCK_SIZE));
        for chunk in postings.chunks(BLOCK_SIZE) {
            let (meta, bytes) = encode_block(chunk);
            t.push(meta, &bytes);
        }
        t
    }

    /// Add a block after the others.
    pub fn push(&mut self, meta: BlockMeta, bytes: &[u8]) {
        self.data.extend_from_slice(bytes);
        self.push_written(meta);
    }

    /// Add a block whose bytes the caller has appended to [`Self::data_mut`] since the last
    /// block's.
    pub fn push_written(&mut self, meta: BlockMeta) {
        let start = self.ranges.last().map_or(0, |r| r.1);
        self.push_at(meta, start..self.data.len());
    }

    /// Add a block whose bytes lie at `range` of [`Self::data_mut`] (a reader that copies a
    /// chain's pages whole leaves the blocks' headers between them).
    pub fn push_at(&mut self, meta: BlockMeta, range: std::ops::Range<usize>) {
        self.blocks.push(meta);
        self.ranges.push((range.start, range.end));
    }

    /// The buffer blocks' bytes are written to before [`Self::push_written`] or
    /// [`Self::push_at`].
    pub fn data_mut(&mut self) -> &mut Vec<u8> {
        &mut self.data
    }

    /// What [`Self::data_mut`] holds.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Block `i`'s encoded postings (none when its range lies outside the bytes written: a
    /// block that then does not decode).
    pub fn block_bytes(&self, i: usize) -> &[u8] {
        let (start, end) = self.ranges[i];
        self.data.get(start..end).unwrap_or(&[])
    }

    /// Each block with its encoded postings, in order.
    pub fn iter_blocks(&self) -> impl Iterator<Item = (&BlockMeta, &[u8])> {
        self.blocks.iter().enumerate().map(|(i, m)| (m, self.block_bytes(i)))
    }

    /// The term's bound over all its postings (the largest block bound).
    pub fn bound(&self, factor: f64, avg_doc_len: f64, p: Bm25Params) -> f64 {
        self.blocks.iter().map(|b| b.bound(factor, avg_doc_len, p)).fold(0.0, f64::max)
    }

    pub fn postings(&self) -> usize {
        self.blocks.iter().map(|b| b.count as usize).sum()
    }

    /// Every posting, in document order (a damaged block is left out).
    pub fn decode_all(&self) -> Vec<Posting> {
        self.iter_blocks().flat_map(|(m, b)| decode_block(m, b).unwrap_or_default()).collect()
    }

    /// The postings without those of documents `dead` names (a vacuum's dead rows), blocks
    /// rebuilt; None when no posting goes (nothing to write).
    pub fn without(&self, mut dead: impl FnMut(u64) -> bool) -> Option<TermPostings> {
        let all = self.decode_all();
        let kept: Vec<Posting> = all.iter().copied().filter(|p| !dead(p.doc)).collect();
        (kept.len() < all.len()).then(|| TermPostings::build(&kept))
    }

    /// One term's postings from parts whose documents do not overlap (a segment and the rows
    /// added since), in document order.
    pub fn merge(parts: &[&TermPostings]) -> TermPostings {
        let mut all: Vec<Posting> = parts.iter().flat_map(|p| p.decode_all()).collect();
        all.sort_unstable_by_key(|p| p.doc);
        all.dedup_by_key(|p| p.doc);
        TermPostings::build(&all)
    }
}

/// Postings of every key of documents given in increasing document order (an index build's
/// heap scan): each document's BM25 column value, a tsvector, contributes (document, the key's
/// positions, the document's surface length) to each of its keys — what the lexical scorer
/// reads of the same value (`crate::lexical::score_tsvector`).
#[derive(Debug, Default)]
pub struct Builder {
    terms: BTreeMap<Vec<u8>, Vec<Posting>>,
    last: Option<u64>,
    postings: usize,
}

/// A document given out of order to a [`Builder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfOrder {
    pub doc: u64,
    pub after: u64,
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Add one document's keys.
    pub fn add(&mut self, doc: u64, value: &TsVector<'_>) -> Result<(), OutOfOrder> {
        if let Some(after) = self.last.filter(|&l| doc <= l) {
            return Err(OutOfOrder { doc, after });
        }
        self.last = Some(doc);
        let len = value.surface_length();
        for i in 0..value.len() {
            let Some(e) = value.entry(i) else { continue };
            self.terms.entry(e.lexeme.to_vec()).or_default().push(Posting { doc, tf: e.npos, len });
            self.postings += 1;
        }
        Ok(())
    }

    /// Add one document given as its keys with their frequencies and its length (an index's
    /// pending rows).
    pub fn add_terms<'t>(
        &mut self,
        doc: u64,
        len: u32,
        terms: impl IntoIterator<Item = (&'t [u8], u32)>,
    ) -> Result<(), OutOfOrder> {
        if let Some(after) = self.last.filter(|&l| doc <= l) {
            return Err(OutOfOrder { doc, after });
        }
        self.last = Some(doc);
        for (t, tf) in terms {
            self.terms.entry(t.to_vec()).or_default().push(Posting { doc, tf, len });
            self.postings += 1;
        }
        Ok(())
    }

    /// Postings held so far (a build bounded in memory finishes a part and starts another).
    pub fn postings(&self) -> usize {
        self.postings
    }

    /// Every key's block postings, keys in byte order.
    pub fn finish(self) -> BTreeMap<Vec<u8>, TermPostings> {
        self.terms.into_iter().map(|(k, ps)| (k, TermPostings::build(&ps))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_dropped_terms_buffers_serve_the_next_read_within_the_threads_limit() {
        // long enough that each of its buffers (bytes, block headers, block ranges) is pooled
        let postings: Vec<Posting> =
            (0..600_000u64).map(|d| Posting { doc: d * 3, tf: 1 + (d % 5) as u32, len: 40 }).collect();
        let t = TermPostings::build(&postings);
        let (bytes, metas, ranges) = (t.data.capacity(), t.blocks.capacity(), t.ranges.capacity());
        assert!(bytes * size_of::<u8>() >= 64 * 1024, "{bytes}");
        assert!(metas * size_of::<BlockMeta>() >= 64 * 1024, "{metas}");
        assert!(ranges * size_of::<(usize, usize)>() >= 64 * 1024, "{ranges}");
        drop(t);
        let again = TermPostings::with_capacity(1);
        assert!(again.data.capacity() >= bytes, "bytes not reused");
        assert!(again.blocks.capacity() >= metas, "block headers not reused");
        assert!(again.ranges.capacity() >= ranges, "block ranges not reused");
        assert!(again.data.is_empty() && again.blocks.is_empty() && again.ranges.is_empty());
        assert_eq!(TermPostings::build(&postings).decode_all(), postings, "a reused buffer holds only its own bytes");
        drop(again);
        for _ in 0..30 {
            pool::give(&pool::BYTES, Vec::<u8>::with_capacity(1 << 20));
            pool::give(&pool::RANGES, Vec::<(usize, usize)>::with_capacity(1 << 16));
        }
        let kept = pool::kept();
        assert!(kept <= pool::MAX_BYTES && kept > pool::MAX_BYTES - (1 << 20), "{kept}");
        let held = pool::BYTES.with(|p| p.borrow().free.iter().map(|v| v.capacity()).sum::<usize>())
            + pool::RANGES.with(|p| p.borrow().free.iter().map(|v| v.capacity() * 16).sum::<usize>())
            + pool::METAS
                .with(|p| p.borrow().free.iter().map(|v| v.capacity() * size_of::<BlockMeta>()).sum::<usize>());
        assert_eq!(held, kept, "the limit counts every kind of buffer together");
    }

    fn postings(raw: &[(u64, u32, u32)]) -> Vec<Posting> {
        let mut doc = 0;
        raw.iter()
            .map(|&(gap, tf, len)| {
                doc += gap + 1;
                Posting { doc, tf: tf + 1, len }
            })
            .collect()
    }

    proptest! {
        #[test]
        fn blocks_round_trip(raw in proptest::collection::vec((0u64..1 << 40, 0u32..1000, 0u32..100_000), 1..400)) {
            let ps = postings(&raw);
            let t = TermPostings::build(&ps);
            let mut back = Vec::new();
            for (meta, bytes) in t.iter_blocks() {
                prop_assert!(meta.count as usize <= BLOCK_SIZE);
                back.extend(decode_block(meta, bytes).unwrap());
            }
            prop_assert_eq!(back, ps);
        }

        #[test]
        fn a_block_bound_is_at_least_every_postings_score(
            raw in proptest::collection::vec((0u64..1000, 0u32..50, 0u32..5000), 1..300),
            k1 in 0.0f64..3.0, b in 0.0f64..=1.0, avg in 1.0f64..2000.0, factor in 0.0f64..30.0,
        ) {
            let p = Bm25Params::new(k1, b).unwrap();
            let ps = postings(&raw);
            let t = TermPostings::build(&ps);
            for (meta, bytes) in t.iter_blocks() {
                let bound = meta.bound(factor, avg, p);
                for q in decode_block(meta, bytes).unwrap() {
                    let s = factor * tf_norm(f64::from(q.tf), f64::from(q.len), avg, p);
                    prop_assert!(s <= bound, "{} > {}", s, bound);
                }
            }
        }
    }

    proptest! {
        #[test]
        fn a_staircase_of_few_steps_bounds_a_block_by_its_best_posting(
            raw in proptest::collection::vec((0u64..1000, 0u32..50, 0u32..5000), 1..128),
            k1 in 0.0f64..3.0, b in 0.0f64..=1.0, avg in 1.0f64..2000.0,
        ) {
            let p = Bm25Params::new(k1, b).unwrap();
            let ps = postings(&raw);
            let meta = encode_block(&ps).0;
            let steps = meta.staircase.steps();
            prop_assert!(!steps.is_empty() && steps.len() <= STEPS);
            prop_assert_eq!(meta.staircase.max_tf(), ps.iter().map(|q| q.tf).max().unwrap());
            prop_assert_eq!(meta.staircase.min_len(), ps.iter().map(|q| q.len).min().unwrap());
            // every step is a posting's pair or dominates some: coarsening only merges
            let best = ps.iter().map(|q| tf_norm(f64::from(q.tf), f64::from(q.len), avg, p)).fold(0.0, f64::max);
            let bound = meta.bound(1.0, avg, p);
            prop_assert!(best <= bound);
            let exact = Staircase::of(&ps).steps().iter().all(|s| ps.iter().any(|q| (q.tf, q.len) == *s));
            if exact {
                prop_assert!(bound <= inflate(best), "{} > {}", bound, best);
            }
        }
    }

    #[test]
    fn a_staircase_keeps_the_undominated_pairs_and_merges_the_closest() {
        let ps = |pairs: &[(u32, u32)]| -> Vec<Posting> {
            pairs.iter().enumerate().map(|(i, &(tf, len))| Posting { doc: i as u64, tf, len }).collect()
        };
        // (2, 40) is dominated by (3, 30); (1, 50) by (1, 10)
        let s = Staircase::of(&ps(&[(1, 10), (2, 40), (3, 30), (1, 50), (5, 60)]));
        assert_eq!(s.steps(), &[(1, 10), (3, 30), (5, 60)]);
        // six steps become four: the closest neighbours, (10, 100) and (11, 101), then
        // (20, 200) and (21, 202), merge into pairs that dominate both
        let s = Staircase::of(&ps(&[(1, 10), (10, 100), (11, 101), (20, 200), (21, 202), (40, 400)]));
        assert_eq!(s.steps(), &[(1, 10), (11, 100), (21, 200), (40, 400)]);
        assert_eq!(Staircase::from_steps(&[(2, 5), (2, 6)]), None);
        assert_eq!(Staircase::from_steps(&[]), None);
    }

    #[test]
    fn a_damaged_block_is_refused_not_misread() {
        let ps = postings(&[(0, 1, 10), (3, 2, 20), (1, 0, 5)]);
        let (meta, bytes) = encode_block(&ps);
        assert!(decode_block(&meta, &bytes[..bytes.len() - 1]).is_none());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_block(&meta, &longer).is_none());
        assert!(decode_block(&BlockMeta { last_doc: meta.last_doc + 1, ..meta }, &bytes).is_none());
        let staircase = Staircase::from_steps(&[(1, 5), (2, 10), (3, 20)]).unwrap();
        assert_eq!(meta, BlockMeta { first_doc: 1, last_doc: 7, count: 3, staircase });
        assert_eq!((staircase.max_tf(), staircase.min_len()), (3, 5));
    }

    #[test]
    fn a_build_from_tsvectors_scores_as_the_lexical_scorer() {
        use crate::lexical::{score_tsvector, ScoredKey};
        use crate::topk::{block_max_wand, QueryTerm, Scoring};
        use crate::tsvector::tests::encode;
        // documents of keys "a".."h" with positions labelled surface (0) or extra (1)
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let keys = ["a", "b", "c", "d", "e", "f", "g", "h"];
        let mut values = Vec::new();
        for _ in 0..600 {
            let mut entries: Vec<(&str, Vec<(u16, u8)>)> = Vec::new();
            for k in keys {
                let n = (next() % 4) as u16 * u16::from(next() % 3 == 0);
                if n > 0 {
                    entries.push((k, (1..=n).map(|p| (p, (next() % 4 == 0) as u8)).collect()));
                }
            }
            let refs: Vec<(&str, &[(u16, u8)])> = entries.iter().map(|(k, p)| (*k, p.as_slice())).collect();
            values.push(encode(&refs));
        }
        let mut b = Builder::new();
        for (i, v) in values.iter().enumerate() {
            b.add(10 + 3 * i as u64, &TsVector::parse(v).unwrap()).unwrap();
        }
        assert_eq!(b.add(5, &TsVector::parse(&values[0]).unwrap()), Err(OutOfOrder { doc: 5, after: 10 + 3 * 599 }));
        let index = b.finish();
        let p = Bm25Params::default();
        let avg = values.iter().map(|v| f64::from(TsVector::parse(v).unwrap().surface_length())).sum::<f64>() / 600.0;
        for query in [&["a"][..], &["b", "g"], &["h", "a", "c", "e"], &["zz", "d"]] {
            let scored: Vec<ScoredKey> = query
                .iter()
                .enumerate()
                .map(|(i, k)| ScoredKey { key: k.to_string(), weight_idf: 0.7 + i as f64 })
                .collect();
            let empty = TermPostings::default();
            let terms: Vec<QueryTerm<'_>> = scored
                .iter()
                .map(|k| QueryTerm { factor: k.weight_idf, postings: index.get(k.key.as_bytes()).unwrap_or(&empty) })
                .collect();
            let (hits, _) = block_max_wand(&terms, &Scoring { avg_doc_len: avg, params: p }, 15, |_| true, |d| d);
            // the lexical scorer over every document holding a key, best first, ties by document
            let mut want: Vec<(u64, f64)> = values
                .iter()
                .enumerate()
                .map(|(i, v)| (10 + 3 * i as u64, TsVector::parse(v).unwrap()))
                .filter(|(_, t)| query.iter().any(|k| t.find(k.as_bytes()).is_some()))
                .map(|(d, t)| (d, score_tsvector(&t, &scored, avg, p)))
                .collect();
            want.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            want.truncate(15);
            assert_eq!(hits.iter().map(|h| (h.doc, h.score)).collect::<Vec<_>>(), want, "{query:?}");
        }
    }

    proptest! {
        #[test]
        fn removing_dead_documents_and_merging_parts_keep_the_rest_in_order(
            raw in proptest::collection::vec((0u64..50, 0u32..9, 0u32..300), 0..700), dead_every in 2u64..9, parts in 1u64..4,
        ) {
            let ps = postings(&raw);
            let t = TermPostings::build(&ps);
            let alive: Vec<Posting> = ps.iter().copied().filter(|p| p.doc % dead_every != 0).collect();
            match t.without(|d| d % dead_every == 0) {
                Some(v) => {
                    prop_assert_eq!(v.decode_all(), alive.clone());
                    prop_assert!(v.blocks.iter().all(|b| b.count as usize <= BLOCK_SIZE && b.count > 0));
                }
                None => prop_assert_eq!(alive.len(), ps.len()),
            }
            let split: Vec<TermPostings> = (0..parts)
                .map(|k| TermPostings::build(&ps.iter().copied().filter(|p| p.doc % parts == k).collect::<Vec<_>>()))
                .collect();
            let refs: Vec<&TermPostings> = split.iter().collect();
            let merged = TermPostings::merge(&refs);
            prop_assert_eq!(merged.decode_all(), ps);
            prop_assert_eq!(&merged.blocks, &t.blocks);
        }
    }
}
