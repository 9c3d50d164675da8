//! The index scan: the query terms' postings read once (every segment and the pending list,
//! under the metapage's shared lock), then the ranking returned page by page
//! (`topk::next_page`), each page as exact as the first, for as long as the executor asks:
//! rows the executor's conditions refuse (another corpus, a row the caller may not read, a
//! dead row) never starve the scan.
//!
//! A scan returns exactly the rows its conditions `tsv OPERATOR(corpus.|||) scoring` hold for
//! (the index serves no scan without one): when each condition's keys are the ordering's, the
//! ranking's documents are those rows; otherwise the rows are found from the conditions' keys
//! and each is scored under the ordering's.

use std::collections::VecDeque;

use pg_corpus_core::bm25_index::{
    column_key, column_value_digested, decode_pending, pending_postings, read_pending, Segment,
};
use pg_corpus_core::postings::TermPostings;
use pg_corpus_core::topk::{documents_in_all, next_page, rank_all, Hit, QueryTerm, Scoring};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::pages::{IndexPages, Locked, META_BLOCK};
use super::{tid_of, ScoringArg};
use crate::error::OrRaise;

/// The largest page of the ranking one step computes.
const MAX_PAGE: usize = 1 << 16;

#[derive(Default)]
struct ScanState {
    /// The ordering's scoring (None for an ordering by a NULL scoring: every value NULL).
    arg: Option<ScoringArg>,
    /// The conditions' scorings (`tsv OPERATOR(corpus.|||) scoring`, all of them to hold).
    conds: Vec<ScoringArg>,
    /// Per condition on a further key column (`col = v`, `col = ANY(array)`), the keys its
    /// values are held under ([`column_key`]): the ranking is restricted to rows holding one of
    /// each condition's.
    filters: Vec<Vec<Vec<u8>>>,
    /// A condition with a NULL scoring or value holds for no row.
    none: bool,
    /// A condition names a value held under a digest ([`column_key`]), which other values
    /// may share: the executor rechecks the conditions on each row.
    recheck: bool,
    /// Per further column's condition, whether every document the index holds (dead ones not
    /// yet vacuumed included) holds one of its keys: it restricts nothing.
    everywhere: Vec<bool>,
    /// Per query key (by its position in the ordering, then in each condition), its parts'
    /// postings.
    parts: Vec<(usize, TermPostings)>,
    loaded: bool,
    queue: VecDeque<Hit>,
    last: Option<Hit>,
    page: usize,
    done: bool,
}

/// Whether two scorings name the same keys (a document holds one of either's or of neither's).
fn same_keys(a: &ScoringArg, b: &ScoringArg) -> bool {
    fn set(s: &ScoringArg) -> std::collections::BTreeSet<&str> {
        s.keys.iter().map(String::as_str).collect()
    }
    set(a) == set(b)
}

impl ScanState {
    /// Whether the ranking's own documents are the rows the conditions hold for.
    fn ranked_alone(&self) -> bool {
        match &self.arg {
            Some(arg) => self.conds.iter().all(|c| same_keys(c, arg)),
            None => false,
        }
    }

    fn load(&mut self, index: pg_sys::Relation) {
        self.loaded = true;
        if self.none || (self.conds.is_empty() && self.arg.is_none()) {
            self.done = true;
            return;
        }
        let ranked_alone = self.ranked_alone();
        // every key read: the ordering's (its positions first), then each condition's, then
        // each further column's condition's
        let mut keys: Vec<&[u8]> = self.arg.iter().flat_map(|a| a.keys.iter().map(String::as_bytes)).collect();
        if !ranked_alone {
            keys.extend(self.conds.iter().flat_map(|c| c.keys.iter().map(String::as_bytes)));
        }
        let ranked = keys.len();
        // the further columns' keys, each with its condition
        let group: Vec<usize> = self.filters.iter().enumerate().flat_map(|(g, f)| f.iter().map(move |_| g)).collect();
        keys.extend(self.filters.iter().flatten().map(Vec::as_slice));
        // SAFETY: block 0 of this index, held shared while the pages it points to are read.
        let meta_buf = unsafe { Locked::new(index, META_BLOCK, false) };
        let meta = meta_buf.meta().or_raise();
        let mut src = IndexPages::new(index);
        // a further column's keys are first found in the dictionaries: a condition whose keys
        // every document holds restricts nothing, and its postings (as long as the table) are
        // not read
        let mut held = vec![0u64; self.filters.len()];
        let mut found = Vec::new();
        for re in &meta.segments {
            let seg = Segment::open(&mut src, *re).or_raise();
            for (i, key) in keys.iter().enumerate() {
                if i < ranked {
                    let p = seg.postings(&mut src, key).or_raise();
                    if !p.blocks.is_empty() {
                        self.parts.push((i, p));
                    }
                } else if let Some(e) = seg.entry(&mut src, key).or_raise() {
                    held[group[i - ranked]] += e.df;
                    found.push((i, seg.clone(), e));
                }
            }
        }
        let mut pending = Vec::new();
        if meta.pending_docs > 0 {
            let (bytes, _) = read_pending(&mut src, &meta).or_raise();
            let rows = decode_pending(&bytes).or_raise();
            for (i, p) in pending_postings(&rows, &keys).into_iter().enumerate() {
                if i >= ranked {
                    held[group[i - ranked]] += p.postings() as u64;
                }
                if !p.blocks.is_empty() {
                    pending.push((i, p));
                }
            }
        }
        self.everywhere = held.iter().map(|&n| n >= meta.docs()).collect();
        for (i, seg, e) in found {
            if !self.everywhere[group[i - ranked]] {
                let p = seg.read(&mut src, &e).or_raise();
                if !p.blocks.is_empty() {
                    self.parts.push((i, p));
                }
            }
        }
        self.parts.extend(pending.into_iter().filter(|(i, _)| *i < ranked || !self.everywhere[group[*i - ranked]]));
        drop(meta_buf);
        // every part of a key together, keys in query order (the order scores are summed in)
        self.parts.sort_by_key(|(i, _)| *i);
        self.page = self.arg.as_ref().map_or(1, |a| a.page).clamp(1, MAX_PAGE);
        if !ranked_alone {
            self.rank_conditions();
        }
    }

    /// The ordering's keys' parts with their factors, in query order.
    fn terms(&self, arg: &ScoringArg) -> Vec<QueryTerm<'_>> {
        let n_order = arg.keys.len();
        self.parts
            .iter()
            .filter(|(i, _)| *i < n_order)
            .map(|(i, p)| QueryTerm { factor: arg.weights[*i], postings: p })
            .collect()
    }

    /// The parts of the keys at positions `range`.
    fn lists(&self, range: std::ops::Range<usize>) -> Vec<&TermPostings> {
        self.parts.iter().filter(|(i, _)| range.contains(i)).map(|(_, p)| p).collect()
    }

    /// Per further column's condition, the parts of its keys (read after the ordering's keys
    /// and, from `first`, the conditions' read); a condition every document holds (a row holds
    /// one value of a column: its values' documents add up to the index's) restricts nothing
    /// and is left out.
    fn filter_lists(&self, mut first: usize) -> Vec<Vec<&TermPostings>> {
        let mut groups = Vec::with_capacity(self.filters.len());
        for (f, &everywhere) in self.filters.iter().zip(&self.everywhere) {
            if !everywhere {
                groups.push(self.lists(first..first + f.len()));
            }
            first += f.len();
        }
        groups
    }

    /// The rows every condition holds for, each scored under the ordering (0 when it holds
    /// none of its keys, NULL for a NULL ordering), best first then by document: all of them
    /// at once.
    fn rank_conditions(&mut self) {
        let n_order = self.arg.as_ref().map_or(0, |a| a.keys.len());
        let mut lists = Vec::new();
        let mut first = n_order;
        for c in &self.conds {
            lists.push(self.lists(first..first + c.keys.len()));
            first += c.keys.len();
        }
        lists.extend(self.filter_lists(first));
        let docs = documents_in_all(&lists);
        let hits = match &self.arg {
            Some(arg) => {
                rank_all(&self.terms(arg), &Scoring { avg_doc_len: arg.avg_doc_len, params: arg.params }, &docs)
            }
            None => docs.into_iter().map(|doc| Hit { doc, score: 0.0 }).collect(),
        };
        self.queue.extend(hits);
        self.done = true;
    }

    fn next(&mut self) -> Option<Hit> {
        if self.queue.is_empty() && !self.done {
            let arg = self.arg.as_ref()?;
            let filter = self.filter_lists(arg.keys.len());
            let scoring = Scoring { avg_doc_len: arg.avg_doc_len, params: arg.params };
            let (hits, _) = next_page(&self.terms(arg), &filter, &scoring, self.page, self.last);
            self.done = hits.len() < self.page;
            self.last = hits.last().copied().or(self.last);
            self.queue.extend(hits);
            self.page = (self.page * 4).min(MAX_PAGE);
        }
        self.queue.pop_front()
    }
}

/// One more scan of the index in its statistics (`pg_stat_user_indexes.idx_scan`), as
/// PostgreSQL's `pgstat_count_index_scan` counts it: an access method counts its own scans.
///
/// # Safety
/// `rel` must be an open relation.
unsafe fn count_index_scan(rel: pg_sys::Relation) {
    unsafe {
        if (*rel).pgstat_info.is_null() && (*rel).pgstat_enabled {
            pg_sys::pgstat_assoc_relation(rel);
        }
        let info = (*rel).pgstat_info;
        if info.is_null() {
            return;
        }
        #[cfg(feature = "pg15")]
        {
            (*info).t_counts.t_numscans += 1;
        }
        #[cfg(not(feature = "pg15"))]
        {
            (*info).counts.numscans += 1;
        }
    }
}

/// The keys a condition on a further key column names: its value, or each distinct non-NULL
/// element of its array (`col = ANY(array)`).
///
/// # Safety
/// `key` must be a non-NULL scan key on a text column of a corpus_bm25 index.
unsafe fn column_keys(key: &pg_sys::ScanKeyData, digested: &mut bool) -> Vec<Vec<u8>> {
    unsafe {
        let column = u8::try_from(key.sk_attno).unwrap_or(u8::MAX);
        let mut text = |d: pg_sys::Datum| {
            let value = super::varlena(d);
            *digested |= column_value_digested(value);
            column_key(column, value)
        };
        if key.sk_flags & pg_sys::SK_SEARCHARRAY as i32 == 0 {
            return vec![text(key.sk_argument)];
        }
        let array = pg_sys::pg_detoast_datum(key.sk_argument.cast_mut_ptr()) as *mut pg_sys::ArrayType;
        let (mut elems, mut nulls, mut n) = (std::ptr::null_mut(), std::ptr::null_mut(), 0);
        // text: a varlena, passed by reference, int-aligned
        pg_sys::deconstruct_array(
            array,
            pg_sys::TEXTOID,
            -1,
            false,
            b'i' as std::ffi::c_char,
            &mut elems,
            &mut nulls,
            &mut n,
        );
        // each value once: a condition's documents are counted as the sum of its values'
        let mut keys: Vec<Vec<u8>> =
            (0..usize::try_from(n).unwrap_or(0)).filter(|&i| !*nulls.add(i)).map(|i| text(*elems.add(i))).collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn ambeginscan(
    index: pg_sys::Relation,
    nkeys: std::ffi::c_int,
    norderbys: std::ffi::c_int,
) -> pg_sys::IndexScanDesc {
    // SAFETY: PostgreSQL's scan descriptor; the state lives in the scan's memory context.
    unsafe {
        let scan = pg_sys::RelationGetIndexScan(index, nkeys, norderbys);
        // the access method provides the ordering values' arrays (the descriptor is not zeroed)
        let n = norderbys.max(1) as usize;
        (*scan).xs_orderbyvals = pg_sys::palloc0(n * std::mem::size_of::<pg_sys::Datum>()) as *mut pg_sys::Datum;
        (*scan).xs_orderbynulls = pg_sys::palloc(n * std::mem::size_of::<bool>()) as *mut bool;
        std::ptr::write_bytes((*scan).xs_orderbynulls, 1, n);
        let state = pgrx::PgMemoryContexts::CurrentMemoryContext.leak_and_drop_on_delete(ScanState::default());
        (*scan).opaque = state as *mut std::ffi::c_void;
        scan
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn amrescan(
    scan: pg_sys::IndexScanDesc,
    keys: pg_sys::ScanKey,
    nkeys: std::ffi::c_int,
    orderbys: pg_sys::ScanKey,
    norderbys: std::ffi::c_int,
) {
    // SAFETY: the scan ambeginscan made; the condition and ordering keys PostgreSQL passes.
    unsafe {
        let st = &mut *((*scan).opaque as *mut ScanState);
        *st = ScanState::default();
        if nkeys > 0 && !keys.is_null() && !(*scan).keyData.is_null() {
            std::ptr::copy(keys, (*scan).keyData, (*scan).numberOfKeys as usize);
        }
        if norderbys > 0 && !orderbys.is_null() && !(*scan).orderByData.is_null() {
            std::ptr::copy(orderbys, (*scan).orderByData, (*scan).numberOfOrderBys as usize);
        }
        for i in 0..(*scan).numberOfKeys.max(0) as usize {
            let key = &*(*scan).keyData.add(i);
            if key.sk_flags & pg_sys::SK_ISNULL as i32 != 0 {
                st.none = true;
            } else if key.sk_attno > 1 {
                st.filters.push(column_keys(key, &mut st.recheck));
            } else {
                st.conds.push(ScoringArg::from_datum(key.sk_argument).or_raise());
            }
        }
        if (*scan).numberOfOrderBys > 0 {
            let key = &*(*scan).orderByData;
            if key.sk_flags & pg_sys::SK_ISNULL as i32 == 0 {
                st.arg = Some(ScoringArg::from_datum(key.sk_argument).or_raise());
            }
        } else {
            // no ordering: the first condition's ranking serves
            st.arg = st.conds.first().cloned();
        }
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn amgettuple(scan: pg_sys::IndexScanDesc, _dir: pg_sys::ScanDirection::Type) -> bool {
    // SAFETY: the scan ambeginscan made.
    unsafe {
        let st = &mut *((*scan).opaque as *mut ScanState);
        if !st.loaded {
            count_index_scan((*scan).indexRelation);
            st.load((*scan).indexRelation);
        }
        let Some(hit) = st.next() else { return false };
        (*scan).xs_heaptid = tid_of(hit.doc);
        (*scan).xs_recheck = st.recheck;
        // The ranking is by the first ordering alone. Further orderings (ORDER BY tsv <@> s1,
        // tsv <@> s2) get their lower bound, −∞, and the executor computes them and reorders
        // the rows the first one ties.
        let orderings = (*scan).numberOfOrderBys.max(0) as usize;
        (*scan).xs_recheckorderby = orderings > 1;
        if orderings > 0 {
            *(*scan).xs_orderbyvals = (-hit.score).into_datum().expect("a float8 datum");
            *(*scan).xs_orderbynulls = st.arg.is_none();
            for i in 1..orderings {
                *(*scan).xs_orderbyvals.add(i) = f64::NEG_INFINITY.into_datum().expect("a float8 datum");
                *(*scan).xs_orderbynulls.add(i) = false;
            }
        }
        true
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn amendscan(_scan: pg_sys::IndexScanDesc) {}
