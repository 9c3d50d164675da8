//! Top-k BM25 over block postings ([`crate::postings`]) without scoring every posting:
//! Block-Max WAND (Ding & Suel, SIGIR 2011). Cursors over the query terms' postings advance in
//! document order; a document is scored only when the sum of its terms' global bounds, then of
//! the bounds of the blocks that hold it, can reach the k-th best score so far, and whole runs
//! of blocks are skipped otherwise. The result is exactly the exhaustive one: scores are summed
//! in the query's term order as [`crate::bm25::score`] sums them, candidates whose bound equals
//! the k-th score are still scored (one may win its tie), and ties are broken by a key the
//! caller gives (an item's id: `ORDER BY score DESC, id`).
//!
//! A term's postings may come in several parts (an index's segments, its list of recent rows):
//! each part is a [`QueryTerm`] of its own with the term's factor, every part of a term listed
//! together and terms in query order; a document must be in one part of a term only. The sum is
//! then the same as over one part (the other parts add 0.0).
//!
//! Four ways to the same answer: [`block_max_wand`] (and [`max_score`], better when a query
//! mixes very common terms with rare ones) for a query over a large share of the
//! postings, with an eligibility check per candidate (a corpus that is a slice of shared
//! tables); [`over_docs`] for a small slice, scoring its documents only; [`exhaustive`], the
//! reference both are tested against.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};

use crate::bm25::{length_norm, tf_norm, Bm25Params};
use crate::postings::{decode_block_into, inflate, Posting, TermPostings};

/// One query term: its postings and its factor (query weight × query count × idf, ≥ 0).
#[derive(Debug, Clone, Copy)]
pub struct QueryTerm<'a> {
    pub factor: f64,
    pub postings: &'a TermPostings,
}

/// A scored document.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub doc: u64,
    pub score: f64,
}

/// What a search read: blocks decoded, documents scored, eligibility checks made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    pub blocks_decoded: usize,
    pub docs_scored: usize,
    pub checks: usize,
}

/// The scoring context of one query.
#[derive(Debug, Clone, Copy)]
pub struct Scoring {
    pub avg_doc_len: f64,
    pub params: Bm25Params,
}

impl Scoring {
    fn term(&self, factor: f64, p: &Posting) -> f64 {
        factor * tf_norm(f64::from(p.tf), f64::from(p.len), self.avg_doc_len, self.params)
    }
}

/// Lengths below this have their [`length_norm`] computed once per search.
const NORMS: usize = 1024;

/// A search's scoring with the length part of each term score's denominator computed once
/// per length: the same operations on the same values as [`Scoring::term`], so the same bits.
struct Scorer {
    scoring: Scoring,
    norms: Vec<f64>,
}

impl Scorer {
    fn new(s: &Scoring) -> Scorer {
        Scorer { scoring: *s, norms: (0..NORMS).map(|len| length_norm(len as f64, s.avg_doc_len, s.params)).collect() }
    }

    #[inline]
    fn term(&self, factor: f64, p: &Posting) -> f64 {
        if p.tf == 0 {
            return 0.0;
        }
        let norm = match self.norms.get(p.len as usize) {
            Some(n) => *n,
            None => length_norm(f64::from(p.len), self.scoring.avg_doc_len, self.scoring.params),
        };
        let tf = f64::from(p.tf);
        factor * (tf / (tf + norm))
    }
}

/// The k best so far; its top is the worst of them.
struct TopK<K> {
    k: usize,
    heap: BinaryHeap<Entry<K>>,
    /// Only documents ranked after this (score, key) are wanted (the next page of a ranking).
    after: Option<(f64, K)>,
    /// A score k wanted documents are known to reach: none below it can enter.
    floor: f64,
}

struct Entry<K> {
    score: f64,
    tie: K,
    doc: u64,
}

impl<K: Ord> Entry<K> {
    /// Greater = worse: a lower score, or the same score and a greater tie key.
    fn worse(&self, other: &Self) -> Ordering {
        other.score.total_cmp(&self.score).then_with(|| self.tie.cmp(&other.tie))
    }
}

impl<K: Ord> PartialEq for Entry<K> {
    fn eq(&self, other: &Self) -> bool {
        self.worse(other) == Ordering::Equal
    }
}
impl<K: Ord> Eq for Entry<K> {}
impl<K: Ord> PartialOrd for Entry<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<K: Ord> Ord for Entry<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.worse(other)
    }
}

impl<K: Ord> TopK<K> {
    fn new(k: usize) -> TopK<K> {
        TopK { k, heap: BinaryHeap::with_capacity(k.min(1024) + 1), after: None, floor: f64::NEG_INFINITY }
    }

    /// Whether a document ranks after the page's start.
    fn wanted(&self, score: f64, tie: &K) -> bool {
        match &self.after {
            None => true,
            Some((s, t)) => s.total_cmp(&score).then_with(|| tie.cmp(t)) == Ordering::Greater,
        }
    }

    /// The score a document must reach to be considered: the floor until k documents are held,
    /// then the worst of them (or the floor when higher).
    fn threshold(&self) -> f64 {
        if self.heap.len() < self.k {
            self.floor
        } else {
            self.heap.peek().map_or(f64::NEG_INFINITY, |e| e.score).max(self.floor)
        }
    }

    /// A scored document: counted, and offered when it could enter and `accept` takes it
    /// (asked only then: a slice's check costs a row lookup).
    fn consider(
        &mut self,
        doc: u64,
        score: f64,
        work: &mut Work,
        accept: &mut impl FnMut(u64) -> bool,
        tie: &impl Fn(u64) -> K,
    ) {
        work.docs_scored += 1;
        if self.k > 0 && score >= self.threshold() {
            let key = tie(doc);
            if !self.wanted(score, &key) {
                return;
            }
            work.checks += 1;
            if accept(doc) {
                self.offer(doc, score, key);
            }
        }
    }

    fn offer(&mut self, doc: u64, score: f64, tie: K) {
        if self.k == 0 {
            return;
        }
        let e = Entry { score, tie, doc };
        if self.heap.len() < self.k {
            self.heap.push(e);
        } else if let Some(mut worst) = self.heap.peek_mut() {
            // replaced in place: one sift down instead of a pop and a push
            if e.worse(&worst) == Ordering::Less {
                *worst = e;
            }
        }
    }

    fn into_hits(self) -> Vec<Hit> {
        let mut v = self.heap.into_vec();
        v.sort_by(|a, b| a.worse(b));
        v.into_iter().map(|e| Hit { doc: e.doc, score: e.score }).collect()
    }
}

/// A cursor over one term's postings. Seeking moves by block headers only; a block is decoded
/// when one of its postings is needed, so a skip over blocks that cannot reach the threshold
/// decodes nothing.
struct Cursor<'a> {
    term: usize,
    factor: f64,
    postings: &'a TermPostings,
    /// the block bounds under this query's scoring, and the term's largest
    bounds: Vec<f64>,
    max: f64,
    block: usize,
    /// the current block's postings once decoded (`has_block`), in a buffer kept across blocks
    decoded: Vec<Posting>,
    has_block: bool,
    pos: usize,
    /// no posting before this document is wanted
    target: u64,
}

impl<'a> Cursor<'a> {
    fn new(term: usize, q: &QueryTerm<'a>, s: &Scoring) -> Cursor<'a> {
        let bounds: Vec<f64> = q.postings.blocks.iter().map(|b| b.bound(q.factor, s.avg_doc_len, s.params)).collect();
        let max = bounds.iter().copied().fold(0.0, f64::max);
        Cursor {
            term,
            factor: q.factor,
            postings: q.postings,
            bounds,
            max,
            block: 0,
            decoded: Vec::with_capacity(crate::postings::BLOCK_SIZE),
            has_block: false,
            pos: 0,
            target: 0,
        }
    }

    /// A cursor that only finds documents (a filter's list: no score, no bounds).
    fn plain(postings: &'a TermPostings) -> Cursor<'a> {
        Cursor {
            term: 0,
            factor: 0.0,
            postings,
            bounds: Vec::new(),
            max: 0.0,
            block: 0,
            decoded: Vec::with_capacity(crate::postings::BLOCK_SIZE),
            has_block: false,
            pos: 0,
            target: 0,
        }
    }

    fn exhausted(&self) -> bool {
        self.block >= self.postings.blocks.len()
    }

    fn next_block(&mut self) {
        self.block += 1;
        self.has_block = false;
        self.pos = 0;
    }

    /// The first posting at or after the target, decoding blocks as needed.
    fn current(&mut self, work: &mut Work) -> Option<Posting> {
        loop {
            if self.exhausted() {
                return None;
            }
            if !self.has_block {
                let meta = &self.postings.blocks[self.block];
                // (a block that does not decode is read as empty: its postings are skipped)
                if !decode_block_into(meta, self.postings.block_bytes(self.block), &mut self.decoded) {
                    self.decoded.clear();
                }
                self.has_block = true;
                work.blocks_decoded += 1;
            }
            let d = &self.decoded;
            while self.pos < d.len() && d[self.pos].doc < self.target {
                self.pos += 1;
            }
            match d.get(self.pos) {
                Some(p) => return Some(*p),
                None => self.next_block(),
            }
        }
    }

    /// A lower bound of the current document (exact once its block is decoded; u64::MAX once
    /// exhausted).
    fn doc(&mut self, work: &mut Work) -> u64 {
        if self.has_block {
            return self.current(work).map_or(u64::MAX, |p| p.doc);
        }
        match self.postings.blocks.get(self.block) {
            Some(meta) => self.target.max(meta.first_doc),
            None => u64::MAX,
        }
    }

    /// The first block that may hold `target` or a later document (by headers only).
    fn block_for(&self, target: u64) -> usize {
        let blocks = &self.postings.blocks[self.block..];
        // most moves stay in the current block or go to the next: no search for them
        match blocks {
            [b, ..] if target <= b.last_doc => self.block,
            [_, b, ..] if target <= b.last_doc => self.block + 1,
            _ => self.block + blocks.partition_point(|b| b.last_doc < target),
        }
    }

    /// Want no posting before `target` (moves by block headers; decodes nothing).
    fn seek(&mut self, target: u64) {
        if self.exhausted() || target <= self.target {
            return;
        }
        let b = self.block_for(target);
        if b != self.block {
            self.block = b;
            self.has_block = false;
            self.pos = 0;
        }
        self.target = target;
    }

    /// The bound of the block that would hold `target`, and that block's last document.
    fn block_bound_at(&self, target: u64) -> (f64, u64) {
        let b = self.block_for(target);
        match self.postings.blocks.get(b) {
            Some(meta) => (self.bounds[b], meta.last_doc),
            None => (0.0, u64::MAX),
        }
    }
}

/// A cursor per query term that has postings.
fn cursors<'a>(terms: &[QueryTerm<'a>], scoring: &Scoring) -> Vec<Cursor<'a>> {
    terms
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.postings.blocks.is_empty())
        .map(|(i, t)| Cursor::new(i, t, scoring))
        .collect()
}

/// The documents a ranking is restricted to: those holding a posting of at least one list of
/// each group (for each condition "holds one of these keys", one of its keys), found by moving
/// through the lists in document order, block headers first: a ranking asks it of increasing
/// documents only, and it decodes a block only where a candidate lies.
pub struct Filter<'a> {
    groups: Vec<Vec<Cursor<'a>>>,
    /// The last answer: no document before it, from the last one asked on, is held.
    held: Option<u64>,
}

impl<'a> Filter<'a> {
    /// None without groups (no restriction).
    pub fn new(groups: &[Vec<&'a TermPostings>]) -> Option<Filter<'a>> {
        (!groups.is_empty()).then(|| Filter {
            groups: groups.iter().map(|g| g.iter().map(|p| Cursor::plain(p)).collect()).collect(),
            held: None,
        })
    }

    /// The first document at or after `d` that every group holds (u64::MAX when none). Asked of
    /// increasing documents only: up to the last answer, it is the answer again.
    fn next(&mut self, d: u64, work: &mut Work) -> u64 {
        if let Some(h) = self.held.filter(|&h| d <= h) {
            return h;
        }
        let h = self.find(d, work);
        self.held = Some(h);
        h
    }

    fn find(&mut self, mut d: u64, work: &mut Work) -> u64 {
        loop {
            let mut agreed = true;
            for g in &mut self.groups {
                let mut first = u64::MAX;
                for cur in g.iter_mut() {
                    cur.seek(d);
                    if let Some(p) = cur.current(work) {
                        first = first.min(p.doc);
                    }
                }
                if first == u64::MAX {
                    return u64::MAX;
                }
                if first != d {
                    agreed = false;
                    d = d.max(first);
                }
            }
            if agreed {
                return d;
            }
        }
    }
}

/// Scores summed in the query's term order (absent terms add 0.0, as in the exhaustive sum).
fn sum_in_term_order(contributions: &[f64]) -> f64 {
    contributions.iter().sum()
}

/// How a top k over one table's postings serves a corpus that is a slice of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// [`max_score`] over the table's postings, each candidate that could enter checked
    /// against the slice
    Checked,
    /// [`over_docs`] over the slice's documents
    SliceScan,
}

/// At most this share of the table's documents, a slice is scanned rather than checked per
/// candidate: a checked search must pass over the candidates of the whole table to find k in
/// the slice, and the work grows as the slice shrinks (examples/topk_speed.rs, 200,000
/// documents: at 5% the check was faster for 1–8 terms, at 1% the scan by 2–4×).
pub const SLICE_SCAN_SHARE: f64 = 0.02;

/// The path for a slice of `slice_docs` of the table's `table_docs` documents (estimates).
pub fn path(slice_docs: f64, table_docs: f64) -> Path {
    if table_docs > 0.0 && slice_docs <= table_docs * SLICE_SCAN_SHARE {
        Path::SliceScan
    } else {
        Path::Checked
    }
}

/// The exhaustive top k: every posting of every term scored, documents `accept` refuses left
/// out, ordered by score (descending) then `tie` (ascending).
pub fn exhaustive<K: Ord>(
    terms: &[QueryTerm<'_>],
    scoring: &Scoring,
    k: usize,
    mut accept: impl FnMut(u64) -> bool,
    tie: impl Fn(u64) -> K,
) -> Vec<Hit> {
    let mut docs: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for (i, t) in terms.iter().enumerate() {
        for p in t.postings.decode_all() {
            docs.entry(p.doc).or_insert_with(|| vec![0.0; terms.len()])[i] = scoring.term(t.factor, &p);
        }
    }
    let mut top = TopK::new(k);
    for (doc, c) in docs {
        if accept(doc) {
            top.offer(doc, sum_in_term_order(&c), tie(doc));
        }
    }
    top.into_hits()
}

/// The top k by Block-Max WAND; `accept` is asked only of documents that could enter the top k.
pub fn block_max_wand<K: Ord>(
    terms: &[QueryTerm<'_>],
    scoring: &Scoring,
    k: usize,
    mut accept: impl FnMut(u64) -> bool,
    tie: impl Fn(u64) -> K,
) -> (Vec<Hit>, Work) {
    let (mut work, mut top) = (Work::default(), TopK::new(k));
    let mut cursors = cursors(terms, scoring);
    if k == 0 {
        return (Vec::new(), work);
    }
    let mut docs: Vec<(u64, usize)> = Vec::with_capacity(cursors.len());
    let mut c = vec![0.0; terms.len()];
    loop {
        docs.clear();
        for (i, c) in cursors.iter_mut().enumerate() {
            docs.push((c.doc(&mut work), i));
        }
        docs.retain(|&(d, _)| d != u64::MAX);
        if docs.is_empty() {
            break;
        }
        docs.sort_unstable();
        let threshold = top.threshold();
        // the pivot: the first cursor at which the global bounds so far can reach the threshold
        let mut acc = 0.0;
        let mut pivot = None;
        for (n, &(_, i)) in docs.iter().enumerate() {
            acc += cursors[i].max;
            if inflate(acc) >= threshold {
                pivot = Some(n);
                break;
            }
        }
        let Some(mut pivot) = pivot else { break };
        let d = docs[pivot].0;
        while pivot + 1 < docs.len() && docs[pivot + 1].0 == d {
            pivot += 1;
        }
        // the bounds of the blocks holding d
        let mut block_sum = 0.0;
        let mut next = docs.get(pivot + 1).map_or(u64::MAX, |x| x.0);
        for &(_, i) in &docs[..=pivot] {
            let (bound, last) = cursors[i].block_bound_at(d);
            block_sum += bound;
            next = next.min(last.saturating_add(1));
        }
        if inflate(block_sum) < threshold {
            // no document before `next` can reach the threshold in these blocks
            for &(_, i) in &docs[..=pivot] {
                cursors[i].seek(next);
            }
            continue;
        }
        if docs[0].0 == d {
            // (positions were lower bounds until decoded: score only when every one is exact)
            let mut exact = true;
            for &(_, i) in &docs[..=pivot] {
                exact &= cursors[i].current(&mut work).is_some_and(|p| p.doc == d);
            }
            if !exact {
                continue;
            }
            c.fill(0.0);
            for &(_, i) in &docs[..=pivot] {
                if let Some(p) = cursors[i].current(&mut work) {
                    c[cursors[i].term] = scoring.term(cursors[i].factor, &p);
                }
            }
            top.consider(d, sum_in_term_order(&c), &mut work, &mut accept, &tie);
            for &(_, i) in &docs[..=pivot] {
                cursors[i].seek(d.saturating_add(1));
            }
        } else {
            for &(doc, i) in &docs[..pivot] {
                if doc < d {
                    cursors[i].seek(d);
                }
            }
        }
    }
    (top.into_hits(), work)
}

/// The top k by MaxScore (Turtle & Flood, 1995): terms ordered by their bound; the cheapest
/// terms whose bounds together cannot reach the threshold are *non-essential*, and only the
/// others' postings propose documents; a proposed document's non-essential terms are looked up
/// (most valuable first) only while the document can still reach the threshold. Better than
/// [`block_max_wand`] when a query mixes very common terms with rare ones. `accept` is asked
/// only of documents that could enter.
pub fn max_score<K: Ord>(
    terms: &[QueryTerm<'_>],
    scoring: &Scoring,
    k: usize,
    accept: impl FnMut(u64) -> bool,
    tie: impl Fn(u64) -> K,
) -> (Vec<Hit>, Work) {
    max_score_into(terms, &[], scoring, TopK::new(k), false, accept, tie)
}

/// The next `k` documents of the ranking by score (descending) then document (ascending)
/// after `after` (from the start when None), by [`max_score`], among the documents `filter`'s
/// groups all hold (every document without groups, [`Filter`]): an index scan returns its
/// ranking page by page, each page as exact as the first.
pub fn next_page(
    terms: &[QueryTerm<'_>],
    filter: &[Vec<&TermPostings>],
    scoring: &Scoring,
    k: usize,
    after: Option<Hit>,
) -> (Vec<Hit>, Work) {
    let mut top = TopK::new(k);
    top.after = after.map(|h| (h.score, h.doc));
    max_score_into(terms, filter, scoring, top, after.is_none(), |_| true, |d| d)
}

/// MaxScore into `top`, among the documents `filter` holds. With `floored` (every document
/// wanted and accepted), the top-k starts from a floor that k documents of the filter are
/// known to reach ([`alone_floor`]).
#[allow(clippy::too_many_arguments)]
fn max_score_into<K: Ord>(
    terms: &[QueryTerm<'_>],
    filter: &[Vec<&TermPostings>],
    scoring: &Scoring,
    mut top: TopK<K>,
    floored: bool,
    mut accept: impl FnMut(u64) -> bool,
    tie: impl Fn(u64) -> K,
) -> (Vec<Hit>, Work) {
    let k = top.k;
    let mut work = Work::default();
    let scorer = Scorer::new(scoring);
    let mut cursors = cursors(terms, scoring);
    if k == 0 || cursors.is_empty() {
        return (Vec::new(), work);
    }
    cursors.sort_by(|a, b| a.max.total_cmp(&b.max));
    if floored && cursors.len() > 1 {
        top.floor = alone_floor(&cursors, filter, &scorer, k, &mut work);
    }
    let mut filter = Filter::new(filter);
    // before[i]: the bounds of cursors 0..i together
    let mut before = vec![0.0; cursors.len() + 1];
    for i in 0..cursors.len() {
        before[i + 1] = before[i] + cursors[i].max;
    }
    let mut c = vec![0.0; terms.len()];
    loop {
        let threshold = top.threshold();
        let essential = (0..=cursors.len()).take_while(|&e| inflate(before[e]) < threshold).last().unwrap_or(0);
        if essential >= cursors.len() {
            break;
        }
        if essential + 1 == cursors.len() {
            if !one_list_block(
                &mut cursors,
                essential,
                &before,
                &scorer,
                &mut top,
                &mut c,
                &mut work,
                filter.as_mut(),
                &mut accept,
                &tie,
            ) {
                break;
            }
            continue;
        }
        let mut d = u64::MAX;
        for cur in &mut cursors[essential..] {
            d = d.min(cur.doc(&mut work));
        }
        // block-max skipping: while the essential lists' blocks holding d, with every
        // non-essential list at its best, cannot reach the threshold, no document up to the
        // first of those blocks' ends can; the lists move past it by their headers alone. A
        // list whose next posting lies beyond d adds nothing before that posting.
        while d != u64::MAX && threshold > f64::NEG_INFINITY {
            let (mut upper, mut end) = (before[essential], u64::MAX);
            for cur in &mut cursors[essential..] {
                let next = cur.doc(&mut work);
                if next > d {
                    end = end.min(next - 1);
                    continue;
                }
                let (bound, last) = cur.block_bound_at(d);
                upper += bound;
                end = end.min(last);
            }
            if inflate(upper) >= threshold || end == u64::MAX {
                break;
            }
            d = u64::MAX;
            for cur in &mut cursors[essential..] {
                cur.seek(end + 1);
                d = d.min(cur.doc(&mut work));
            }
        }
        if d == u64::MAX {
            break;
        }
        // a document the filter does not hold is passed: the lists move to the next it holds
        if let Some(f) = filter.as_mut() {
            let held = f.next(d, &mut work);
            if held == u64::MAX {
                break;
            }
            if held != d {
                for cur in &mut cursors[essential..] {
                    cur.seek(held);
                }
                continue;
            }
        }
        c.fill(0.0);
        let (mut found, mut matched) = (0.0, false);
        for cur in &mut cursors[essential..] {
            // (positions are lower bounds until decoded: the posting may lie past d)
            if cur.doc(&mut work) == d {
                if let Some(p) = cur.current(&mut work).filter(|p| p.doc == d) {
                    let v = scorer.term(cur.factor, &p);
                    c[cur.term] = v;
                    found += v;
                    matched = true;
                }
            }
        }
        // a document only non-essential terms hold cannot reach the threshold
        if matched {
            let upper = found + before[essential];
            if complete(&mut cursors[..essential], d, upper, threshold, &scorer, &mut c, &mut work) {
                top.consider(d, sum_in_term_order(&c), &mut work, &mut accept, &tie);
            }
        }
        for cur in &mut cursors[essential..] {
            if cur.doc(&mut work) <= d {
                cur.seek(d.saturating_add(1));
            }
        }
    }
    (top.into_hits(), work)
}

/// A score k documents of the filter reach: the best over the lists of the k-th best score, by
/// its term alone, of the filter's documents in a few of a list's blocks (those of highest
/// bound), since every other term adds a score ≥ 0 to theirs (rounded sums of scores ≥ 0 never
/// decrease); −∞ when none gives k. A handful of blocks per list: the floor only starts the
/// threshold, which the ranking raises as it goes.
fn alone_floor(
    cursors: &[Cursor<'_>],
    filter: &[Vec<&TermPostings>],
    scorer: &Scorer,
    k: usize,
    work: &mut Work,
) -> f64 {
    let per_list = 8 * k.div_ceil(crate::postings::BLOCK_SIZE) + 8;
    let mut floor = f64::NEG_INFINITY;
    let mut decoded = Vec::with_capacity(crate::postings::BLOCK_SIZE);
    let mut order: Vec<usize> = Vec::new();
    for cur in cursors.iter().rev() {
        if k == 0 || inflate(cur.max) <= floor {
            continue;
        }
        order.clear();
        order.extend(0..cur.postings.blocks.len());
        if order.len() > per_list {
            order.select_nth_unstable_by(per_list - 1, |&a, &b| cur.bounds[b].total_cmp(&cur.bounds[a]));
            order.truncate(per_list);
        }
        // in document order, as a filter is asked
        order.sort_unstable();
        let mut held = Filter::new(filter);
        let mut best: TopK<u64> = TopK::new(k);
        for &b in &order {
            let meta = &cur.postings.blocks[b];
            if inflate(cur.bounds[b]) <= floor || !decode_block_into(meta, cur.postings.block_bytes(b), &mut decoded) {
                continue;
            }
            work.blocks_decoded += 1;
            for p in &decoded {
                if held.as_mut().is_none_or(|f| f.next(p.doc, work) == p.doc) {
                    best.offer(p.doc, scorer.term(cur.factor, p), p.doc);
                }
            }
        }
        floor = floor.max(best.threshold());
    }
    floor
}

/// A proposed document's scores from the non-essential lists (`others`, ordered by bound),
/// most valuable first, while it can still reach the threshold (each list at its best, then
/// at the best of the block that would hold the document): `upper` is its essential lists'
/// scores plus every non-essential list at its best. False once it cannot.
fn complete(
    others: &mut [Cursor<'_>],
    d: u64,
    mut upper: f64,
    threshold: f64,
    scorer: &Scorer,
    c: &mut [f64],
    work: &mut Work,
) -> bool {
    for cur in others.iter_mut().rev() {
        if inflate(upper) < threshold {
            return false;
        }
        upper -= cur.max;
        cur.seek(d);
        // the block that would hold d bounds it tighter than the list's best, without decoding
        if inflate(upper + cur.block_bound_at(d).0) < threshold {
            return false;
        }
        if let Some(p) = cur.current(work).filter(|p| p.doc == d) {
            let v = scorer.term(cur.factor, &p);
            c[cur.term] = v;
            upper += v;
        }
    }
    true
}

/// MaxScore's step when one list proposes every document: the rest of its current block in
/// one pass, each posting scored and, when it can reach the threshold with the other lists at
/// their best, completed from them (most valuable first) as the general step does. False
/// once the list is exhausted.
#[allow(clippy::too_many_arguments)]
fn one_list_block<K: Ord>(
    cursors: &mut [Cursor<'_>],
    essential: usize,
    before: &[f64],
    scorer: &Scorer,
    top: &mut TopK<K>,
    c: &mut [f64],
    work: &mut Work,
    mut filter: Option<&mut Filter<'_>>,
    accept: &mut impl FnMut(u64) -> bool,
    tie: &impl Fn(u64) -> K,
) -> bool {
    let (others, rest) = cursors.split_at_mut(essential);
    let cur = &mut rest[0];
    if cur.exhausted() {
        return false;
    }
    let rest_max = before[essential];
    // a block that cannot reach the threshold is passed by its header alone
    if inflate(cur.bounds[cur.block] + rest_max) < top.threshold() {
        cur.next_block();
        return true;
    }
    // so is a block in which the filter holds no document
    if let Some(f) = filter.as_mut() {
        let meta = &cur.postings.blocks[cur.block];
        let held = f.next(cur.target.max(meta.first_doc), work);
        if held == u64::MAX {
            cur.block = cur.postings.blocks.len();
            return false;
        }
        if held > meta.last_doc {
            cur.seek(held);
            return true;
        }
    }
    if cur.current(work).is_none() {
        return false;
    }
    let mut threshold = top.threshold();
    for i in cur.pos..cur.decoded.len() {
        let p = cur.decoded[i];
        let v = scorer.term(cur.factor, &p);
        if inflate(v + rest_max) < threshold {
            continue;
        }
        if let Some(f) = filter.as_mut() {
            if f.next(p.doc, work) != p.doc {
                continue;
            }
        }
        c.fill(0.0);
        c[cur.term] = v;
        if complete(others, p.doc, v + rest_max, threshold, scorer, c, work) {
            top.consider(p.doc, sum_in_term_order(c), work, accept, tie);
            threshold = top.threshold();
        }
    }
    cur.next_block();
    true
}

/// The top k among `docs` (sorted, no repeats): each document scored by seeking every term's
/// cursor to it. For a slice small against the postings it reads.
pub fn over_docs<K: Ord>(
    terms: &[QueryTerm<'_>],
    scoring: &Scoring,
    k: usize,
    docs: &[u64],
    tie: impl Fn(u64) -> K,
) -> (Vec<Hit>, Work) {
    let mut work = Work::default();
    let mut top = TopK::new(k);
    let mut cursors: Vec<Cursor<'_>> = terms.iter().enumerate().map(|(i, t)| Cursor::new(i, t, scoring)).collect();
    for &d in docs {
        let mut c = vec![0.0; terms.len()];
        let mut matched = false;
        for cur in cursors.iter_mut() {
            cur.seek(d);
            if let Some(p) = cur.current(&mut work).filter(|p| p.doc == d) {
                c[cur.term] = scoring.term(cur.factor, &p);
                matched = true;
            }
        }
        if matched {
            work.docs_scored += 1;
            top.offer(d, sum_in_term_order(&c), tie(d));
        }
    }
    (top.into_hits(), work)
}

/// The documents holding a posting of at least one list of each group (the rows for which
/// every condition "holds one of these keys" is true), in increasing order without repeats.
pub fn documents_in_all(groups: &[Vec<&TermPostings>]) -> Vec<u64> {
    let mut out: Option<Vec<u64>> = None;
    for lists in groups {
        let mut docs: Vec<u64> = lists.iter().flat_map(|l| l.decode_all()).map(|p| p.doc).collect();
        docs.sort_unstable();
        docs.dedup();
        out = Some(match out {
            None => docs,
            Some(prev) => {
                let mut kept = Vec::with_capacity(prev.len().min(docs.len()));
                let (mut i, mut j) = (0, 0);
                while i < prev.len() && j < docs.len() {
                    match prev[i].cmp(&docs[j]) {
                        std::cmp::Ordering::Less => i += 1,
                        std::cmp::Ordering::Greater => j += 1,
                        std::cmp::Ordering::Equal => {
                            kept.push(prev[i]);
                            i += 1;
                            j += 1;
                        }
                    }
                }
                kept
            }
        });
    }
    out.unwrap_or_default()
}

/// Every one of `docs` (sorted, no repeats) with its score under `terms` (0 when it holds none
/// of them), by score (descending) then document: a ranking of given rows, whichever terms they
/// hold.
pub fn rank_all(terms: &[QueryTerm<'_>], scoring: &Scoring, docs: &[u64]) -> Vec<Hit> {
    let (scored, _) = over_docs(terms, scoring, docs.len(), docs, |d| d);
    let held: std::collections::HashSet<u64> = scored.iter().map(|h| h.doc).collect();
    let mut all = scored;
    all.extend(docs.iter().filter(|d| !held.contains(d)).map(|&doc| Hit { doc, score: 0.0 }));
    all.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bm25::idf;
    use proptest::prelude::*;

    /// A random corpus: per document its length and its term counts over a Zipf-like
    /// vocabulary of `vocab` terms.
    fn corpus(seed: u64, n_docs: usize, vocab: usize) -> Vec<(u32, BTreeMap<usize, u32>)> {
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        (0..n_docs)
            .map(|_| {
                let len = 1 + (next() % 40) as u32;
                let mut tf = BTreeMap::new();
                for _ in 0..len {
                    // Zipf-like: small term numbers far more often
                    let r = (next() % 1_000_000) as f64 / 1_000_000.0;
                    let t = ((vocab as f64).powf(r) as usize).saturating_sub(1).min(vocab - 1);
                    *tf.entry(t).or_insert(0) += 1;
                }
                (len, tf)
            })
            .collect()
    }

    /// Postings per term, documents numbered with gaps (as row positions are).
    fn index(docs: &[(u32, BTreeMap<usize, u32>)], vocab: usize, gap: u64) -> (Vec<TermPostings>, Vec<u64>, f64) {
        let ids: Vec<u64> = (0..docs.len() as u64).map(|i| 1 + i * gap).collect();
        let mut per: Vec<Vec<Posting>> = vec![Vec::new(); vocab];
        for (i, (len, tf)) in docs.iter().enumerate() {
            for (&t, &f) in tf {
                per[t].push(Posting { doc: ids[i], tf: f, len: *len });
            }
        }
        let avg = docs.iter().map(|d| f64::from(d.0)).sum::<f64>() / docs.len().max(1) as f64;
        (per.iter().map(|p| TermPostings::build(p)).collect(), ids, avg)
    }

    fn query<'a>(index: &'a [TermPostings], n_docs: usize, picks: &[(usize, bool, u32)]) -> Vec<QueryTerm<'a>> {
        picks
            .iter()
            .map(|&(t, half, count)| {
                let t = t % index.len();
                let weight = if half { 0.5 } else { 1.0 };
                let df = index[t].postings() as u64;
                QueryTerm { factor: weight * f64::from(count) * idf(n_docs as u64, df), postings: &index[t] }
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]
        #[test]
        fn block_max_wand_and_the_slice_scan_return_the_exhaustive_top_k(
            seed in any::<u64>(), n_docs in 1usize..700, vocab in 2usize..60, gap in 1u64..5,
            picks in proptest::collection::vec((0usize..60, any::<bool>(), 1u32..3), 1..9),
            k in 0usize..25, modulus in 1u64..6, k1 in 0.0f64..2.5, b in 0.0f64..=1.0,
            tie_by_doc in any::<bool>(),
        ) {
            let docs = corpus(seed, n_docs, vocab);
            let (idx, ids, avg) = index(&docs, vocab, gap);
            let terms = query(&idx, n_docs, &picks);
            let scoring = Scoring { avg_doc_len: avg, params: Bm25Params::new(k1, b).unwrap() };
            // a slice: every `modulus`-th document; ties by the id or by a key that reverses it
            let accept = |d: u64| (d / gap).is_multiple_of(modulus);
            let tie = |d: u64| if tie_by_doc { d } else { u64::MAX - d };
            let want = exhaustive(&terms, &scoring, k, accept, tie);
            let (got, _) = block_max_wand(&terms, &scoring, k, accept, tie);
            prop_assert_eq!(&got, &want);
            let (got, _) = max_score(&terms, &scoring, k, accept, tie);
            prop_assert_eq!(&got, &want);
            let slice: Vec<u64> = ids.iter().copied().filter(|&d| accept(d)).collect();
            let (got, _) = over_docs(&terms, &scoring, k, &slice, tie);
            prop_assert_eq!(&got, &want);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
        #[test]
        fn a_term_split_over_parts_scores_as_one_when_listed_in_term_order(
            seed in any::<u64>(), n_docs in 1usize..500, vocab in 2usize..40, parts in 1u64..4,
            picks in proptest::collection::vec((0usize..40, any::<bool>(), 1u32..3), 1..6), k in 1usize..15,
        ) {
            // postings split over parts (an index's segments and its list of recent rows): each
            // document in one part only; every part of a term listed together, terms in order
            let docs = corpus(seed, n_docs, vocab);
            let (idx, _, avg) = index(&docs, vocab, 1);
            let whole = query(&idx, n_docs, &picks);
            let split: Vec<Vec<TermPostings>> = whole
                .iter()
                .map(|t| {
                    let all = t.postings.decode_all();
                    (0..parts).map(|p| {
                        let mine: Vec<Posting> = all.iter().copied().filter(|q| (q.doc ^ seed) % parts == p).collect();
                        TermPostings::build(&mine)
                    }).collect()
                })
                .collect();
            let parted: Vec<QueryTerm<'_>> = whole
                .iter()
                .zip(&split)
                .flat_map(|(t, ps)| ps.iter().map(move |p| QueryTerm { factor: t.factor, postings: p }))
                .collect();
            let s = Scoring { avg_doc_len: avg, params: Bm25Params::default() };
            let want = exhaustive(&whole, &s, k, |_| true, |d| d);
            prop_assert_eq!(&block_max_wand(&parted, &s, k, |_| true, |d| d).0, &want);
            prop_assert_eq!(&max_score(&parted, &s, k, |_| true, |d| d).0, &want);
            prop_assert_eq!(&exhaustive(&parted, &s, k, |_| true, |d| d), &want);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
        #[test]
        fn rows_found_by_some_keys_are_ranked_under_others_as_scoring_each_would(
            seed in any::<u64>(), n_docs in 1usize..400, vocab in 2usize..40, gap in 1u64..4,
            ranking in proptest::collection::vec((0usize..40, any::<bool>(), 1u32..3), 0..5),
            conditions in proptest::collection::vec(proptest::collection::vec(0usize..40, 1..4), 1..3),
        ) {
            let docs = corpus(seed, n_docs, vocab);
            let (idx, ids, avg) = index(&docs, vocab, gap);
            let terms = query(&idx, n_docs, &ranking);
            let s = Scoring { avg_doc_len: avg, params: Bm25Params::default() };
            // a document holds a condition when it holds one of its terms
            let groups: Vec<Vec<&TermPostings>> =
                conditions.iter().map(|c| c.iter().map(|t| &idx[t % vocab]).collect()).collect();
            let want_docs: Vec<u64> = ids
                .iter()
                .enumerate()
                .filter(|(i, _)| conditions.iter().all(|c| c.iter().any(|t| docs[*i].1.contains_key(&(t % vocab)))))
                .map(|(_, &d)| d)
                .collect();
            let got_docs = documents_in_all(&groups);
            prop_assert_eq!(&got_docs, &want_docs);
            // each scored from its own counts, in term order; a document without the terms scores 0
            let mut want: Vec<Hit> = want_docs
                .iter()
                .map(|&d| {
                    let i = ((d - 1) / gap) as usize;
                    let c: Vec<f64> = ranking
                        .iter()
                        .zip(&terms)
                        .map(|(&(t, _, _), q)| {
                            docs[i].1.get(&(t % vocab)).map_or(0.0, |&tf| {
                                s.term(q.factor, &Posting { doc: d, tf, len: docs[i].0 })
                            })
                        })
                        .collect();
                    Hit { doc: d, score: sum_in_term_order(&c) }
                })
                .collect();
            want.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
            prop_assert_eq!(rank_all(&terms, &s, &got_docs), want);
        }
    }

    #[test]
    fn ties_are_broken_by_the_key_and_a_bound_equal_to_the_threshold_is_still_scored() {
        // ten identical documents: every score ties, the key decides which k come back
        let ps: Vec<Posting> = (1..=10).map(|d| Posting { doc: d, tf: 1, len: 5 }).collect();
        let t = TermPostings::build(&ps);
        let terms = [QueryTerm { factor: 1.0, postings: &t }];
        let s = Scoring { avg_doc_len: 5.0, params: Bm25Params::default() };
        let (hits, _) = block_max_wand(&terms, &s, 3, |_| true, |d| u64::MAX - d);
        assert_eq!(hits.iter().map(|h| h.doc).collect::<Vec<_>>(), vec![10, 9, 8]);
        let (hits, _) = block_max_wand(&terms, &s, 3, |d| !d.is_multiple_of(2), |d| d);
        assert_eq!(hits.iter().map(|h| h.doc).collect::<Vec<_>>(), vec![1, 3, 5]);
    }

    #[test]
    fn most_postings_of_a_zipf_corpus_are_never_scored() {
        // 50,000 documents over a Zipf vocabulary; queries mixing a very common term with
        // rarer ones: most postings are never scored (the common term's blocks still decode
        // where a rarer term's candidate lies)
        let n = 50_000;
        let docs = corpus(7, n, 5_000);
        let (idx, ids, avg) = index(&docs, 5_000, 1);
        let s = Scoring { avg_doc_len: avg, params: Bm25Params::default() };
        for picks in [[(0, false, 1), (40, false, 1), (400, false, 1)], [(1, false, 1), (2, false, 1), (90, true, 1)]] {
            let terms = query(&idx, n, &picks);
            let (hits, work) = block_max_wand(&terms, &s, 10, |_| true, |d| d);
            assert_eq!(hits, exhaustive(&terms, &s, 10, |_| true, |d| d));
            let (by_max_score, ms_work) = max_score(&terms, &s, 10, |_| true, |d| d);
            assert_eq!(by_max_score, hits);
            let postings: usize = terms.iter().map(|t| t.postings.postings()).sum();
            assert!(ms_work.docs_scored * 4 < postings, "MaxScore scored {} of {postings}", ms_work.docs_scored);
            let blocks: usize = terms.iter().map(|t| t.postings.blocks.len()).sum();
            assert!(work.docs_scored * 4 < postings, "{} documents scored of {postings} postings", work.docs_scored);
            assert!(work.blocks_decoded < blocks, "{} of {blocks} blocks decoded", work.blocks_decoded);
            // a 1% slice still gets k rows when k eligible rows match
            let (hits, _) = block_max_wand(&terms, &s, 10, |d| d.is_multiple_of(100), |d| d);
            let eligible = exhaustive(&terms, &s, usize::MAX, |d| d.is_multiple_of(100), |d| d).len();
            assert_eq!(hits.len(), eligible.min(10));
            assert!(hits.len() == 10 && hits.iter().all(|h| h.doc.is_multiple_of(100)));
            let slice: Vec<u64> = ids.iter().copied().filter(|d| d.is_multiple_of(100)).collect();
            assert_eq!(over_docs(&terms, &s, 10, &slice, |d| d).0, hits);
        }
    }

    #[test]
    fn a_rare_term_beside_a_common_one_leaves_the_common_list_partly_undecoded() {
        // the first page of an index scan (48 rows) for a term in most documents and one in
        // fewer documents than the page, then in more
        let n = 50_000;
        let docs = corpus(11, n, 5_000);
        let (idx, _, avg) = index(&docs, 5_000, 1);
        let s = Scoring { avg_doc_len: avg, params: Bm25Params::default() };
        let df = |t: usize| idx[t].postings();
        let common = idx[0].blocks.len();
        assert!(df(0) > n / 4 && common > 100, "{} postings", df(0));
        let rare = (100..5_000).find(|&t| (5..40).contains(&df(t))).expect("a term in 5 to 39 documents");
        let less_rare = (100..5_000).find(|&t| (100..400).contains(&df(t))).expect("a term in 100 to 399 documents");
        // between the rare term's documents the common list's blocks are passed by their
        // headers where they cannot reach the threshold alone
        let terms = query(&idx, n, &[(0, false, 1), (rare, false, 1)]);
        let (hits, work) = next_page(&terms, &[], &s, 48, None);
        assert_eq!(hits, exhaustive(&terms, &s, 48, |_| true, |d| d));
        assert!(
            work.blocks_decoded * 3 < common * 2,
            "{} blocks decoded, {common} in the common list",
            work.blocks_decoded
        );
        // the floor from the lists' best blocks starts the threshold above the first 48
        // documents' scores: fewer blocks decoded than without it
        let terms = query(&idx, n, &[(0, false, 1), (less_rare, false, 1)]);
        let (hits, work) = next_page(&terms, &[], &s, 48, None);
        let (unfloored, plain) = max_score(&terms, &s, 48, |_| true, |d| d);
        assert_eq!(hits, exhaustive(&terms, &s, 48, |_| true, |d| d));
        assert_eq!(unfloored, hits);
        assert!(work.blocks_decoded < plain.blocks_decoded, "{} against {}", work.blocks_decoded, plain.blocks_decoded);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]
        #[test]
        fn a_first_page_over_lists_of_many_blocks_is_the_exhaustive_one(
            seed in any::<u64>(), n_docs in 2000usize..6000, vocab in 2usize..200, page in 1usize..300,
            picks in proptest::collection::vec((0usize..200, any::<bool>(), 1u32..3), 2..6),
        ) {
            // lists longer than the floor's few blocks each, pages below and above a block
            let docs = corpus(seed, n_docs, vocab);
            let (idx, _, avg) = index(&docs, vocab, 2);
            let terms = query(&idx, n_docs, &picks);
            let s = Scoring { avg_doc_len: avg, params: Bm25Params::default() };
            prop_assert_eq!(next_page(&terms, &[], &s, page, None).0, exhaustive(&terms, &s, page, |_| true, |d| d));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
        #[test]
        fn pages_of_the_ranking_concatenate_to_the_exhaustive_ranking(
            seed in any::<u64>(), n_docs in 1usize..400, vocab in 2usize..30, page in 1usize..12,
            picks in proptest::collection::vec((0usize..30, any::<bool>(), 1u32..3), 1..6),
        ) {
            // few distinct lengths: many ties across page boundaries
            let docs = corpus(seed, n_docs, vocab);
            let (idx, _, avg) = index(&docs, vocab, 3);
            let terms = query(&idx, n_docs, &picks);
            let s = Scoring { avg_doc_len: avg, params: Bm25Params::default() };
            let want = exhaustive(&terms, &s, usize::MAX, |_| true, |d| d);
            let mut got = Vec::new();
            let mut after = None;
            loop {
                let (hits, _) = next_page(&terms, &[], &s, page, after);
                got.extend(hits.iter().copied());
                if hits.len() < page {
                    break;
                }
                after = hits.last().copied();
            }
            prop_assert_eq!(got, want);
        }
    }

    /// Filter lists of a random key column: `values` distinct values, each document holding
    /// one (or none, when the value drawn is `values`), as an index holds a further column.
    fn key_column(ids: &[u64], seed: u64, values: usize) -> Vec<TermPostings> {
        let mut per: Vec<Vec<Posting>> = vec![Vec::new(); values];
        let mut x = seed | 1;
        for &doc in ids {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // skewed: value 0 is rare, the last ones common
            let v = ((x % 1000) as f64 / 1000.0).sqrt() * (values + 1) as f64;
            if let Some(list) = per.get_mut(v as usize) {
                list.push(Posting { doc, tf: 1, len: 1 });
            }
        }
        per.iter().map(|p| TermPostings::build(p)).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
        #[test]
        fn a_filtered_ranking_is_the_exhaustive_ranking_of_the_documents_it_holds(
            seed in any::<u64>(), n_docs in 1usize..3000, vocab in 2usize..80, page in 1usize..60,
            picks in proptest::collection::vec((0usize..80, any::<bool>(), 1u32..3), 1..7),
            columns in proptest::collection::vec((any::<u64>(), 1usize..6, proptest::collection::vec(0usize..6, 1..4)), 1..3),
        ) {
            let docs = corpus(seed, n_docs, vocab);
            let (idx, ids, avg) = index(&docs, vocab, 2);
            let terms = query(&idx, n_docs, &picks);
            let s = Scoring { avg_doc_len: avg, params: Bm25Params::default() };
            // per column, the lists of the values wanted (a value without documents: no list)
            let lists: Vec<Vec<TermPostings>> = columns.iter().map(|(cs, n, _)| key_column(&ids, *cs, *n)).collect();
            let groups: Vec<Vec<&TermPostings>> = columns
                .iter()
                .zip(&lists)
                .map(|((_, n, wanted), l)| wanted.iter().filter(|&&v| v < *n).map(|&v| &l[v]).filter(|p| !p.blocks.is_empty()).collect())
                .collect();
            let held: std::collections::HashSet<u64> = documents_in_all(&groups).into_iter().collect();
            let want = exhaustive(&terms, &s, usize::MAX, |d| held.contains(&d), |d| d);
            let mut got = Vec::new();
            let mut after = None;
            loop {
                let (hits, _) = next_page(&terms, &groups, &s, page, after);
                got.extend(hits.iter().copied());
                if hits.len() < page {
                    break;
                }
                after = hits.last().copied();
            }
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn a_filter_of_few_documents_leaves_most_blocks_of_common_terms_undecoded() {
        let docs = corpus(11, 20_000, 50);
        let (idx, ids, avg) = index(&docs, 50, 1);
        let terms = query(&idx, 20_000, &[(0, false, 1), (1, false, 1), (2, false, 1)]);
        let s = Scoring { avg_doc_len: avg, params: Bm25Params::default() };
        // one document in 100 (a 1% slice), spread over the table
        let slice: Vec<Posting> = ids.iter().step_by(100).map(|&doc| Posting { doc, tf: 1, len: 1 }).collect();
        let slice = TermPostings::build(&slice);
        let groups = vec![vec![&slice]];
        let held: std::collections::HashSet<u64> = slice.decode_all().iter().map(|p| p.doc).collect();
        let (hits, work) = next_page(&terms, &groups, &s, 10, None);
        assert_eq!(hits, exhaustive(&terms, &s, 10, |d| held.contains(&d), |d| d));
        let (_, whole) = next_page(&terms, &[], &s, 1000, None);
        let blocks: usize = terms.iter().map(|t| t.postings.blocks.len()).sum();
        assert!(work.docs_scored <= held.len(), "{} scored of {} held", work.docs_scored, held.len());
        assert!(work.blocks_decoded < whole.blocks_decoded, "{} against {}", work.blocks_decoded, whole.blocks_decoded);
        assert!(work.blocks_decoded < blocks + slice.blocks.len(), "{} of {}", work.blocks_decoded, blocks);
    }

    #[test]
    fn a_damaged_block_is_skipped_not_misread() {
        let ps: Vec<Posting> = (1..=300).map(|d| Posting { doc: d, tf: 1, len: 5 }).collect();
        let whole = TermPostings::build(&ps);
        let mut t = TermPostings::default();
        for (i, (meta, bytes)) in whole.iter_blocks().enumerate() {
            t.push(*meta, if i == 1 { &bytes[..3] } else { bytes });
        }
        let terms = [QueryTerm { factor: 1.0, postings: &t }];
        let s = Scoring { avg_doc_len: 5.0, params: Bm25Params::default() };
        let (hits, _) = block_max_wand(&terms, &s, 500, |_| true, |d| d);
        assert_eq!(hits.len(), 300 - t.blocks[1].count as usize);
    }

    #[test]
    fn a_small_slice_is_scanned_and_a_large_one_checked() {
        assert_eq!(path(1_000.0, 1_000_000.0), Path::SliceScan);
        assert_eq!(path(20_000.0, 1_000_000.0), Path::SliceScan);
        assert_eq!(path(20_001.0, 1_000_000.0), Path::Checked);
        assert_eq!(path(500_000.0, 1_000_000.0), Path::Checked);
        // nothing known of the table: the search that needs no slice list
        assert_eq!(path(10.0, 0.0), Path::Checked);
    }
}
