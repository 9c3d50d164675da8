//! Block postings of one term, the storage unit of a BM25 index: a term's postings (document,
//! term frequency, document length) sorted by document, cut into blocks of at most
//! [`BLOCK_SIZE`] postings. A block is stored as bytes (document ids delta-encoded, then the
//! frequency and the length, each an unsigned LEB128 varint) with a small header kept apart:
//! its first and last document, its count, and what an upper bound of the term's score over the
//! block needs under *any* statistics — the block's largest frequency and smallest length.
//! BM25's term score grows with the frequency and falls with the length for every k1 ≥ 0 and
//! b ∈ [0, 1], so `score(max_tf, min_len)` bounds every posting of the block whatever a
//! corpus's idf, average length, k1 and b are ([`BlockMeta::bound`]).

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

/// What a block's header holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockMeta {
    pub first_doc: u64,
    pub last_doc: u64,
    pub count: u32,
    pub max_tf: u32,
    pub min_len: u32,
}

/// Relative and absolute slack added to every bound: the bound and the score it bounds are
/// computed by different floating-point paths (one term's best case against a sum over
/// terms), and a bound must never fall below the score by a rounding.
const SLACK: f64 = 1e-9;

impl BlockMeta {
    /// An upper bound of `factor · tfn(tf, len)` over the block's postings (`factor`: the
    /// term's query weight × query count × idf, never negative).
    pub fn bound(&self, factor: f64, avg_doc_len: f64, p: Bm25Params) -> f64 {
        inflate(factor * tf_norm(f64::from(self.max_tf), f64::from(self.min_len), avg_doc_len, p))
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

#[inline]
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
        max_tf: postings.iter().map(|p| p.tf).max().unwrap_or(0),
        min_len: postings.iter().map(|p| p.len).min().unwrap_or(0),
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
    let mut at = 0;
    let mut doc = meta.first_doc;
    for _ in 0..meta.count {
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

/// A term's postings as blocks, in memory: what a scan of an index reads, and the reference
/// the index's tests compare with.
#[derive(Debug, Clone, Default)]
pub struct TermPostings {
    pub blocks: Vec<BlockMeta>,
    pub bytes: Vec<Vec<u8>>,
}

impl TermPostings {
    /// From postings sorted by document.
    pub fn build(postings: &[Posting]) -> TermPostings {
        let mut t = TermPostings::default();
        for chunk in postings.chunks(BLOCK_SIZE) {
            let (meta, bytes) = encode_block(chunk);
            t.blocks.push(meta);
            t.bytes.push(bytes);
        }
        t
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
        self.blocks.iter().zip(&self.bytes).flat_map(|(m, b)| decode_block(m, b).unwrap_or_default()).collect()
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
            for (meta, bytes) in t.blocks.iter().zip(&t.bytes) {
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
            for (meta, bytes) in t.blocks.iter().zip(&t.bytes) {
                let bound = meta.bound(factor, avg, p);
                for q in decode_block(meta, bytes).unwrap() {
                    let s = factor * tf_norm(f64::from(q.tf), f64::from(q.len), avg, p);
                    prop_assert!(s <= bound, "{} > {}", s, bound);
                }
            }
        }
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
        assert_eq!(meta, BlockMeta { first_doc: 1, last_doc: 7, count: 3, max_tf: 3, min_len: 5 });
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
            prop_assert_eq!(merged.blocks, t.blocks);
        }
    }
}
