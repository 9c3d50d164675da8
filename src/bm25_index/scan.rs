//! The index scan: the query terms' postings read once (every segment and the pending list,
//! under the metapage's shared lock), then the ranking returned page by page
//! (`topk::next_page`), each page as exact as the first, for as long as the executor asks:
//! rows the executor's conditions refuse (another corpus, a row the caller may not read, a
//! dead row) never starve the scan.

use std::collections::VecDeque;

use pg_corpus_core::bm25_index::{decode_pending, pending_postings, read_pending, Segment};
use pg_corpus_core::postings::TermPostings;
use pg_corpus_core::topk::{next_page, Hit, QueryTerm, Scoring};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::pages::{IndexPages, Locked, META_BLOCK};
use super::{tid_of, ScoringArg};
use crate::error::OrRaise;

/// The largest page of the ranking one step computes.
const MAX_PAGE: usize = 1 << 16;

#[derive(Default)]
struct ScanState {
    arg: Option<ScoringArg>,
    /// Per query key (by its position), its parts' postings.
    parts: Vec<(usize, TermPostings)>,
    loaded: bool,
    queue: VecDeque<Hit>,
    last: Option<Hit>,
    page: usize,
    done: bool,
}

impl ScanState {
    fn load(&mut self, index: pg_sys::Relation) {
        self.loaded = true;
        let Some(arg) = &self.arg else { return };
        // SAFETY: block 0 of this index, held shared while the pages it points to are read.
        let meta_buf = unsafe { Locked::new(index, META_BLOCK, false) };
        let meta = meta_buf.meta().or_raise();
        let mut src = IndexPages::new(index);
        for re in &meta.segments {
            let seg = Segment::open(&mut src, *re).or_raise();
            for (i, key) in arg.keys.iter().enumerate() {
                let p = seg.postings(&mut src, key.as_bytes()).or_raise();
                if !p.blocks.is_empty() {
                    self.parts.push((i, p));
                }
            }
        }
        if meta.pending_docs > 0 {
            let (bytes, _) = read_pending(&mut src, &meta).or_raise();
            let rows = decode_pending(&bytes).or_raise();
            let keys: Vec<&[u8]> = arg.keys.iter().map(|k| k.as_bytes()).collect();
            for (i, p) in pending_postings(&rows, &keys).into_iter().enumerate() {
                if !p.blocks.is_empty() {
                    self.parts.push((i, p));
                }
            }
        }
        drop(meta_buf);
        // every part of a key together, keys in query order (the order scores are summed in)
        self.parts.sort_by_key(|(i, _)| *i);
        self.page = arg.page.clamp(1, MAX_PAGE);
    }

    fn next(&mut self) -> Option<Hit> {
        if self.queue.is_empty() && !self.done {
            let arg = self.arg.as_ref()?;
            let terms: Vec<QueryTerm<'_>> =
                self.parts.iter().map(|(i, p)| QueryTerm { factor: arg.weights[*i], postings: p }).collect();
            let scoring = Scoring { avg_doc_len: arg.avg_doc_len, params: arg.params };
            let (hits, _) = next_page(&terms, &scoring, self.page, self.last);
            self.done = hits.len() < self.page;
            self.last = hits.last().copied().or(self.last);
            self.queue.extend(hits);
            self.page = (self.page * 4).min(MAX_PAGE);
        }
        self.queue.pop_front()
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
    _keys: pg_sys::ScanKey,
    _nkeys: std::ffi::c_int,
    orderbys: pg_sys::ScanKey,
    norderbys: std::ffi::c_int,
) {
    // SAFETY: the scan ambeginscan made; the ordering keys PostgreSQL passes.
    unsafe {
        let st = &mut *((*scan).opaque as *mut ScanState);
        *st = ScanState::default();
        if norderbys > 0 && !orderbys.is_null() && !(*scan).orderByData.is_null() {
            std::ptr::copy(orderbys, (*scan).orderByData, (*scan).numberOfOrderBys as usize);
        }
        if (*scan).numberOfOrderBys < 1 {
            return;
        }
        let key = &*(*scan).orderByData;
        if key.sk_flags & pg_sys::SK_ISNULL as i32 != 0 {
            return;
        }
        st.arg = Some(ScoringArg::from_datum(key.sk_argument).or_raise());
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn amgettuple(scan: pg_sys::IndexScanDesc, _dir: pg_sys::ScanDirection::Type) -> bool {
    // SAFETY: the scan ambeginscan made.
    unsafe {
        let st = &mut *((*scan).opaque as *mut ScanState);
        if !st.loaded {
            st.load((*scan).indexRelation);
        }
        let Some(hit) = st.next() else { return false };
        (*scan).xs_heaptid = tid_of(hit.doc);
        (*scan).xs_recheck = false;
        (*scan).xs_recheckorderby = false;
        if (*scan).numberOfOrderBys > 0 {
            *(*scan).xs_orderbyvals = (-hit.score).into_datum().expect("a float8 datum");
            *(*scan).xs_orderbynulls = false;
        }
        true
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn amendscan(_scan: pg_sys::IndexScanDesc) {}
