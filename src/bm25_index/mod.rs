//! `corpus_bm25`: an index access method over a BM25 tsvector column (the documents pg_corpus'
//! analysers produce) that returns rows by descending BM25 score for
//! `WHERE tsv OPERATOR(corpus.|||) scoring ORDER BY tsv OPERATOR(corpus.<@>) scoring`, reading
//! only what the top of the ranking needs. It holds no row without terms, so it serves no scan
//! without a `|||` condition (`amoptionalkey` false): an ordering alone wants every row.
//! The page format, merges and the top-k executor are in `pg_corpus_core::{bm25_index, topk}`;
//! this module holds PostgreSQL's side: buffers and WAL (`pages`), the access method's
//! callbacks and the scoring argument.

mod check;
mod pages;
mod scan;

use std::collections::HashSet;

use pg_corpus_core::bm25::Bm25Params;
use pg_corpus_core::bm25_index::{
    column_key, merge_plan, merge_segments, pending_segment, read_pending, write_segment, Kind, Meta, Page, PendingDoc,
    Segment, SegmentRef, NO_PAGE,
};
use pg_corpus_core::postings::Builder;
use pg_corpus_core::tsvector::TsVector;
use pg_corpus_core::{CoreError, SqlState};
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::error::OrRaise;
use crate::lexical::varlena_bytes as varlena;
use pages::{log_pages, IndexPages, Locked, TempPages, CAPACITY, META_BLOCK};

/// Bytes of pending rows beyond which an insert moves them into a segment: a scan reads the
/// whole pending list, so it stays a few pages long.
const PENDING_LIMIT: u64 = 96 * 1024;

/// A row's document number: its heap position, block then offset, so that document order is
/// table order.
fn doc_of(tid: &pg_sys::ItemPointerData) -> u64 {
    let blk = (u64::from(tid.ip_blkid.bi_hi) << 16) | u64::from(tid.ip_blkid.bi_lo);
    (blk << 16) | u64::from(tid.ip_posid)
}

fn tid_of(doc: u64) -> pg_sys::ItemPointerData {
    let blk = (doc >> 16) as u32;
    pg_sys::ItemPointerData {
        ip_blkid: pg_sys::BlockIdData { bi_hi: (blk >> 16) as u16, bi_lo: (blk & 0xFFFF) as u16 },
        ip_posid: (doc & 0xFFFF) as u16,
    }
}

/// The tsvector's whole varlena (header included), as `TsVector::parse` reads it.
///
/// # Safety
/// `d` must be a non-NULL tsvector datum.
unsafe fn tsvector_bytes<'a>(d: pg_sys::Datum) -> &'a [u8] {
    unsafe {
        let ptr = pg_sys::pg_detoast_datum(d.cast_mut_ptr());
        let len = pgrx::varlena::varsize(ptr);
        std::slice::from_raw_parts(ptr as *const u8, len)
    }
}

/// A row's document from its indexed values (`values`, `isnull`: one per index column): the
/// BM25 column's terms with their frequencies and its length, and each further key column's
/// value, when not NULL, as a key of its own ([`column_key`]). None when the BM25 column is
/// NULL or holds no term.
///
/// # Safety
/// `values` and `isnull` hold one entry per column of `index`: a tsvector, then texts.
unsafe fn row_doc(
    index: pg_sys::Relation,
    doc: u64,
    values: *const pg_sys::Datum,
    isnull: *const bool,
) -> Option<PendingDoc> {
    unsafe {
        if *isnull {
            return None;
        }
        let value = TsVector::parse(tsvector_bytes(*values))?;
        let mut terms: Vec<(Vec<u8>, u32)> =
            (0..value.len()).filter_map(|i| value.entry(i)).map(|e| (e.lexeme.to_vec(), e.npos)).collect();
        if terms.is_empty() {
            return None;
        }
        let columns = usize::try_from((*(*index).rd_att).natts).unwrap_or(1);
        for c in 1..columns {
            if !*isnull.add(c) {
                terms.push((column_key(c as u8 + 1, varlena(*values.add(c))), 1));
            }
        }
        Some(PendingDoc { doc, len: value.surface_length(), terms })
    }
}

/// Refuse an index whose columns this access method cannot hold: the first must be a BM25
/// tsvector, each further one a text compared byte by byte (a deterministic collation).
///
/// # Safety
/// `index` must be an open corpus_bm25 index.
unsafe fn check_columns(index: pg_sys::Relation) {
    unsafe {
        let columns = usize::try_from((*(*index).rd_att).natts).unwrap_or(0);
        let name = pgrx::name_data_to_str(&(*(*index).rd_rel).relname).to_string();
        for c in 0..columns {
            let ty = *(*index).rd_opcintype.add(c);
            let wanted = if c == 0 { pg_sys::TSVECTOROID } else { pg_sys::TEXTOID };
            if ty != wanted {
                raise(
                    CoreError::new(
                        SqlState::FeatureNotSupported,
                        format!("corpus_bm25 index \"{name}\": column {} must be a {}", c + 1, if c == 0 { "tsvector" } else { "text" }),
                        "Index the BM25 column first (corpus.bm25_document's tsvector), then text columns whose values searches filter on, e.g. USING corpus_bm25 (body_bm25, kind).",
                    )
                    .with_detail("The first column is ranked; each further column's values restrict the ranking to rows holding them."),
                );
            }
            let coll = *(*index).rd_indcollation.add(c);
            if c > 0 && coll != pg_sys::InvalidOid && !pg_sys::get_collation_isdeterministic(coll) {
                raise(
                    CoreError::new(
                        SqlState::FeatureNotSupported,
                        format!("corpus_bm25 index \"{name}\": column {} has a nondeterministic collation", c + 1),
                        "Index the column with a deterministic collation, e.g. COLLATE \"C\".",
                    )
                    .with_detail("The index holds each value's bytes: it finds only values equal byte by byte."),
                );
            }
        }
    }
}

fn raise(e: CoreError) -> ! {
    crate::error::raise(e)
}

// ---------------------------------------------------------------------------------------------
// The handler

#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn _bm25_index_handler(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: a node of PostgreSQL's own type, allocated in the current memory context.
    unsafe {
        let r = pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexAmRoutine>()) as *mut pg_sys::IndexAmRoutine;
        (*r).type_ = pg_sys::NodeTag::T_IndexAmRoutine;
        (*r).amstrategies = 3;
        (*r).amsupport = 0;
        (*r).amoptsprocnum = 0;
        (*r).amcanorder = false;
        (*r).amcanorderbyop = true;
        (*r).amcanbackward = false;
        (*r).amcanunique = false;
        (*r).amcanmulticol = true;
        (*r).amoptionalkey = false;
        (*r).amsearcharray = true;
        (*r).amsearchnulls = false;
        (*r).amstorage = false;
        (*r).amclusterable = false;
        (*r).ampredlocks = false;
        (*r).amcanparallel = false;
        (*r).amcaninclude = false;
        (*r).amusemaintenanceworkmem = true;
        (*r).amparallelvacuumoptions = 0;
        (*r).amkeytype = pg_sys::InvalidOid;
        (*r).ambuild = Some(ambuild);
        (*r).ambuildempty = Some(ambuildempty);
        (*r).aminsert = Some(aminsert);
        (*r).ambulkdelete = Some(ambulkdelete);
        (*r).amvacuumcleanup = Some(amvacuumcleanup);
        (*r).amcostestimate = Some(amcostestimate);
        (*r).amoptions = Some(amoptions);
        (*r).amvalidate = Some(amvalidate);
        (*r).ambeginscan = Some(scan::ambeginscan);
        (*r).amrescan = Some(scan::amrescan);
        (*r).amgettuple = Some(scan::amgettuple);
        (*r).amendscan = Some(scan::amendscan);
        pg_sys::Datum::from(r)
    }
}

#[no_mangle]
pub extern "C" fn pg_finfo__bm25_index_handler() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

#[pg_guard]
unsafe extern "C-unwind" fn amoptions(reloptions: pg_sys::Datum, validate: bool) -> *mut pg_sys::bytea {
    if !reloptions.is_null() && validate {
        raise(
            CoreError::new(
                SqlState::InvalidParameterValue,
                "a corpus_bm25 index takes no storage parameters",
                "Create it without WITH (...).",
            )
            .with_detail("Its postings, blocks and pending list are sized by the access method."),
        );
    }
    std::ptr::null_mut()
}

#[pg_guard]
unsafe extern "C-unwind" fn amvalidate(_opclassoid: pg_sys::Oid) -> bool {
    true
}

#[allow(clippy::too_many_arguments)]
#[pg_guard]
unsafe extern "C-unwind" fn amcostestimate(
    root: *mut pg_sys::PlannerInfo,
    path: *mut pg_sys::IndexPath,
    _loop_count: f64,
    startup: *mut pg_sys::Cost,
    total: *mut pg_sys::Cost,
    selectivity: *mut pg_sys::Selectivity,
    correlation: *mut f64,
    pages: *mut f64,
) {
    // SAFETY: the planner's own path and output pointers.
    unsafe {
        let info = (*path).indexinfo;
        let tuples = (*info).tuples.max(1.0);
        // conditions on further key columns leave out the rows without their values
        let mut kept = 1.0;
        for clause in pgrx::PgList::<pg_sys::IndexClause>::from_pg((*path).indexclauses).iter_ptr() {
            if (*clause).indexcol > 0 {
                kept *= pg_sys::clauselist_selectivity(
                    root,
                    (*clause).indexquals,
                    (*(*info).rel).relid as std::ffi::c_int,
                    pg_sys::JoinType::JOIN_INNER,
                    std::ptr::null_mut(),
                );
            }
        }
        *selectivity = kept;
        *correlation = 0.0;
        *pages = (*info).pages as f64;
        // The ranking's first rows cost a few pages of the terms' postings; every further row
        // a heap fetch. A sort of the whole table scored row by row is never cheaper. (A scan
        // for the condition alone reads the same postings and returns the same rows.)
        *startup = pg_sys::random_page_cost * 4.0;
        *total = *startup + tuples * kept * pg_sys::cpu_index_tuple_cost;
    }
}

// ---------------------------------------------------------------------------------------------
// Build

struct BuildState {
    builder: Builder,
    /// Rows of the heap block being read (a HOT chain's root may come after later offsets).
    block: Vec<(u64, PendingDoc)>,
    block_no: u64,
    /// sorted runs spilled to a temporary file when the rows do not fit in the budget
    runs: Vec<SegmentRef>,
    spill: Option<TempPages>,
    docs: Vec<u64>,
    rows: f64,
    budget: usize,
}

impl BuildState {
    fn flush_block(&mut self) {
        self.block.sort_by_key(|(d, _)| *d);
        for (doc, row) in self.block.drain(..) {
            if let Err(e) = self.builder.add_terms(doc, row.len, row.terms.iter().map(|(t, f)| (t.as_slice(), *f))) {
                raise(CoreError::new(
                    SqlState::ObjectNotInPrerequisiteState,
                    format!("the table scan of a corpus_bm25 build gave row {} after row {}", e.doc, e.after),
                    "Build the index again; a table scan must read blocks in order.",
                ));
            }
            self.docs.push(doc);
        }
        if self.builder.postings() * 24 > self.budget {
            self.spill_run();
        }
    }

    /// Move the rows read so far into a sorted run of the temporary file.
    fn spill_run(&mut self) {
        if self.docs.is_empty() {
            return;
        }
        let builder = std::mem::take(&mut self.builder);
        let docs = std::mem::take(&mut self.docs);
        let spill = self.spill.get_or_insert_with(TempPages::new);
        let run = write_segment(spill, &builder.finish(), &docs).or_raise();
        self.runs.push(run);
    }

    /// The index's one segment: the rows in memory written directly, or every run merged from
    /// the temporary file.
    fn finish(mut self, index: pg_sys::Relation) -> Option<SegmentRef> {
        let mut pages = IndexPages::new(index);
        if self.runs.is_empty() {
            if self.docs.is_empty() {
                return None;
            }
            let docs = std::mem::take(&mut self.docs);
            return Some(write_segment(&mut pages, &std::mem::take(&mut self.builder).finish(), &docs).or_raise());
        }
        self.spill_run();
        let mut spill = self.spill.take().expect("runs were spilled");
        let opened: Vec<Segment> = self.runs.iter().map(|r| Segment::open(&mut spill, *r).or_raise()).collect();
        Some(merge_segments(&mut spill, &mut pages, &opened, |_| false).or_raise())
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn build_callback(
    index: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    _alive: bool,
    state: *mut std::ffi::c_void,
) {
    // SAFETY: the state ambuild passed; the row's indexed values.
    unsafe {
        let st = &mut *(state as *mut BuildState);
        st.rows += 1.0;
        if *isnull {
            return;
        }
        let doc = doc_of(&*tid);
        if doc >> 16 != st.block_no {
            st.flush_block();
            st.block_no = doc >> 16;
        }
        if let Some(row) = row_doc(index, doc, values, isnull) {
            st.block.push((doc, row));
        }
    }
}

/// Write the metapage of an empty index into block 0 (allocated first).
fn init_meta(rel: pg_sys::Relation) {
    let mut p = IndexPages::new(rel);
    let blk = pg_corpus_core::bm25_index::PageSink::alloc(&mut p).or_raise();
    if blk != META_BLOCK {
        raise(pg_corpus_core::bm25_index::damaged("the metapage is not the index's first block"));
    }
    write_meta_page(rel, &Meta::default());
}

fn write_meta_page(rel: pg_sys::Relation, meta: &Meta) {
    // SAFETY: block 0 of this index.
    unsafe {
        let b = Locked::new(rel, META_BLOCK, true);
        log_pages(rel, &[(&b, &meta_page(meta))]);
    }
}

fn meta_page(meta: &Meta) -> Page {
    Page { kind: Kind::Meta, next: NO_PAGE, data: meta.encode() }
}

#[pg_guard]
unsafe extern "C-unwind" fn ambuild(
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    info: *mut pg_sys::IndexInfo,
) -> *mut pg_sys::IndexBuildResult {
    // SAFETY: PostgreSQL's relations and index info for this build.
    unsafe {
        if pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM) != 0 {
            raise(CoreError::new(
                SqlState::ObjectNotInPrerequisiteState,
                "a corpus_bm25 index being built already has pages",
                "Drop and create the index again.",
            ));
        }
        check_columns(index);
        init_meta(index);
        let budget = (pg_sys::maintenance_work_mem.max(1024) as usize) * 1024;
        let mut st = BuildState {
            builder: Builder::new(),
            block: Vec::new(),
            block_no: 0,
            runs: Vec::new(),
            spill: None,
            docs: Vec::new(),
            rows: 0.0,
            budget,
        };
        pg_sys::table_index_build_scan(
            heap,
            index,
            info,
            false,
            true,
            Some(build_callback),
            &mut st as *mut BuildState as *mut std::ffi::c_void,
            std::ptr::null_mut(),
        );
        st.flush_block();
        let rows = st.rows;
        let meta = Meta { segments: st.finish(index).into_iter().collect(), ..Meta::default() };
        let docs = meta.docs() as f64;
        write_meta_page(index, &meta);
        let r = pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexBuildResult>()) as *mut pg_sys::IndexBuildResult;
        (*r).heap_tuples = rows;
        (*r).index_tuples = docs;
        r
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn ambuildempty(index: pg_sys::Relation) {
    // SAFETY: the index's init fork, empty; written and WAL-logged whole.
    unsafe {
        check_columns(index);
        pg_sys::LockRelationForExtension(index, pg_sys::ExclusiveLock as i32);
        let buf = pg_sys::ReadBufferExtended(
            index,
            pg_sys::ForkNumber::INIT_FORKNUM,
            pg_sys::InvalidBlockNumber,
            pg_sys::ReadBufferMode::RBM_NORMAL,
            std::ptr::null_mut(),
        );
        pg_sys::UnlockRelationForExtension(index, pg_sys::ExclusiveLock as i32);
        pg_sys::LockBuffer(buf, pg_sys::BUFFER_LOCK_EXCLUSIVE as i32);
        pages::fill_buffer(buf, &meta_page(&Meta::default()));
        pg_sys::MarkBufferDirty(buf);
        pg_sys::log_newpage_buffer(buf, true);
        pg_sys::UnlockReleaseBuffer(buf);
    }
}

// ---------------------------------------------------------------------------------------------
// Insert

#[allow(clippy::too_many_arguments)]
#[pg_guard]
unsafe extern "C-unwind" fn aminsert(
    index: pg_sys::Relation,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    tid: pg_sys::ItemPointer,
    _heap: pg_sys::Relation,
    _unique: pg_sys::IndexUniqueCheck::Type,
    _unchanged: bool,
    _info: *mut pg_sys::IndexInfo,
) -> bool {
    // SAFETY: the row's indexed values and position.
    unsafe {
        let Some(row) = row_doc(index, doc_of(&*tid), values, isnull) else { return false };
        let flushed = append_pending(index, &row.encode());
        if flushed {
            merge_if_due(index, false);
        }
        false
    }
}

/// Append a record to the pending list; when the list outgrows [`PENDING_LIMIT`], move it into
/// a new segment. True when it did.
fn append_pending(index: pg_sys::Relation, record: &[u8]) -> bool {
    let mut pages = IndexPages::new(index);
    // SAFETY: block 0 of this index.
    let meta_buf = unsafe { Locked::new(index, META_BLOCK, true) };
    let mut meta = meta_buf.meta().or_raise();
    // the record's bytes: first into the tail page's room, the rest onto new pages
    let mut rest = record;
    let tail = if meta.pending_tail != NO_PAGE && meta.pending_bytes > 0 {
        // SAFETY: the tail page of the pending list, reached under the metapage's lock.
        let b = unsafe { Locked::new(index, meta.pending_tail, true) };
        let mut page = b.page().filter(|p| p.kind == Kind::Pending).unwrap_or_else(|| {
            raise(pg_corpus_core::bm25_index::damaged("the pending list's last page is not a pending page"))
        });
        page.data.truncate(meta.pending_tail_used as usize);
        let n = (CAPACITY - page.data.len()).min(rest.len());
        page.data.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        Some((b, page))
    } else {
        None
    };
    // new pages, each linked to the next, written before anything points to them
    let mut new_pages: Vec<(u32, Vec<u8>)> = Vec::new();
    for chunk in rest.chunks(CAPACITY) {
        let blk = pg_corpus_core::bm25_index::PageSink::alloc(&mut pages).or_raise();
        new_pages.push((blk, chunk.to_vec()));
    }
    for i in (0..new_pages.len()).rev() {
        let next = new_pages.get(i + 1).map_or(NO_PAGE, |p| p.0);
        let (blk, data) = &new_pages[i];
        let page = Page { kind: Kind::Pending, next, data: data.clone() };
        pg_corpus_core::bm25_index::PageSink::write(&mut pages, *blk, &page).or_raise();
    }
    let first_new = new_pages.first().map(|p| p.0);
    match (&tail, new_pages.last()) {
        (Some((_, page)), None) => meta.pending_tail_used = page.data.len() as u32,
        (_, Some((blk, data))) => {
            meta.pending_tail = *blk;
            meta.pending_tail_used = data.len() as u32;
        }
        (None, None) => {}
    }
    if tail.is_none() {
        meta.pending_head = first_new.unwrap_or(NO_PAGE);
    }
    meta.pending_docs += 1;
    meta.pending_bytes += record.len() as u64;
    let full = meta.pending_bytes >= PENDING_LIMIT;
    // SAFETY: both buffers are locked exclusively by this backend.
    unsafe {
        let mp = meta_page(&meta);
        match tail {
            Some((b, mut page)) => {
                if let Some(first) = first_new {
                    page.next = first;
                }
                log_pages(index, &[(&meta_buf, &mp), (&b, &page)]);
            }
            None => log_pages(index, &[(&meta_buf, &mp)]),
        }
    }
    if full {
        flush_pending(index, &meta_buf, &mut meta);
    }
    full
}

/// Move the pending rows into a new segment (the metapage locked exclusively by the caller).
fn flush_pending(index: pg_sys::Relation, meta_buf: &Locked, meta: &mut Meta) {
    if meta.pending_docs == 0 {
        return;
    }
    let mut pages = IndexPages::new(index);
    let (bytes, old) = read_pending(&mut pages, meta).or_raise();
    let rows = pg_corpus_core::bm25_index::decode_pending(&bytes).or_raise();
    let (terms, docs) = pending_segment(&rows);
    let seg = write_segment(&mut pages, &terms, &docs).or_raise();
    meta.segments.push(seg);
    meta.pending_head = NO_PAGE;
    meta.pending_tail = NO_PAGE;
    meta.pending_tail_used = 0;
    meta.pending_docs = 0;
    meta.pending_bytes = 0;
    // SAFETY: the metapage is locked exclusively by the caller.
    unsafe { log_pages(index, &[(meta_buf, &meta_page(meta))]) };
    pages.free(&old);
}

/// Merge segments as [`merge_plan`] says, holding the index's merge lock (waiting for it when
/// `wait`, else only if it is free: an insert never waits for VACUUM).
fn merge_if_due(index: pg_sys::Relation, wait: bool) {
    // SAFETY: a heavyweight lock on the index's block 0, released below.
    unsafe {
        if wait {
            pg_sys::LockPage(index, META_BLOCK, pg_sys::ExclusiveLock as i32);
        } else if !pg_sys::ConditionalLockPage(index, META_BLOCK, pg_sys::ExclusiveLock as i32) {
            return;
        }
    }
    merge_locked(index, None);
    // SAFETY: taken above.
    unsafe { pg_sys::UnlockPage(index, META_BLOCK, pg_sys::ExclusiveLock as i32) };
}

/// Merge what [`merge_plan`] says (and, with `dead`, first rewrite every segment holding dead
/// rows without them); the merge lock held by the caller. Returns the rows removed.
fn merge_locked(index: pg_sys::Relation, mut dead: Option<&mut dyn FnMut(u64) -> bool>) -> u64 {
    let mut removed = 0u64;
    let mut src = IndexPages::new(index);
    if let Some(dead) = dead.as_mut() {
        let segments = read_meta(index).segments;
        for re in segments {
            let seg = Segment::open(&mut src, re).or_raise();
            let gone: HashSet<u64> = seg.docs(&mut src).or_raise().into_iter().filter(|&d| dead(d)).collect();
            vacuum_delay();
            if gone.is_empty() {
                continue;
            }
            removed += gone.len() as u64;
            let mut sink = IndexPages::new(index);
            let new = merge_segments(&mut src, &mut sink, std::slice::from_ref(&seg), |d| gone.contains(&d)).or_raise();
            swap_segments(index, &[re], new);
            let old = seg.pages(&mut src).or_raise();
            sink.free(&old);
        }
    }
    loop {
        let meta = read_meta(index);
        let sizes: Vec<u64> = meta.segments.iter().map(|s| s.docs).collect();
        let Some(range) = merge_plan(&sizes) else { break };
        let chosen: Vec<SegmentRef> = meta.segments[range].to_vec();
        let opened: Vec<Segment> = chosen.iter().map(|r| Segment::open(&mut src, *r).or_raise()).collect();
        let mut sink = IndexPages::new(index);
        let merged = merge_segments(&mut src, &mut sink, &opened, |_| false).or_raise();
        swap_segments(index, &chosen, merged);
        let mut old = Vec::new();
        for s in &opened {
            old.extend(s.pages(&mut src).or_raise());
        }
        sink.free(&old);
        vacuum_delay();
    }
    removed
}

fn vacuum_delay() {
    // SAFETY: a plain call; it may sleep and checks for interrupts.
    #[cfg(feature = "pg18")]
    unsafe {
        pg_sys::vacuum_delay_point(false)
    };
    #[cfg(not(feature = "pg18"))]
    unsafe {
        pg_sys::vacuum_delay_point()
    };
}

/// Replace `old` segments (consecutive in the metapage's list) by `new`; segments added
/// meanwhile by flushes stay.
fn swap_segments(index: pg_sys::Relation, old: &[SegmentRef], new: SegmentRef) {
    // SAFETY: block 0 of this index.
    let meta_buf = unsafe { Locked::new(index, META_BLOCK, true) };
    let mut meta = meta_buf.meta().or_raise();
    let Some(at) = meta.segments.iter().position(|s| *s == old[0]) else {
        raise(pg_corpus_core::bm25_index::damaged("a merged segment left the metapage during the merge"))
    };
    if meta.segments.get(at..at + old.len()) != Some(old) {
        raise(pg_corpus_core::bm25_index::damaged("merged segments changed during the merge"));
    }
    meta.segments.splice(at..at + old.len(), [new]);
    // SAFETY: locked exclusively above.
    unsafe { log_pages(index, &[(&meta_buf, &meta_page(&meta))]) };
}

pub(crate) fn read_meta(index: pg_sys::Relation) -> Meta {
    // SAFETY: block 0 of this index.
    let b = unsafe { Locked::new(index, META_BLOCK, false) };
    b.meta().or_raise()
}

// ---------------------------------------------------------------------------------------------
// VACUUM

struct Reaper {
    callback: pg_sys::IndexBulkDeleteCallback,
    state: *mut std::ffi::c_void,
}

impl Reaper {
    fn dead(&self, doc: u64) -> bool {
        let mut tid = tid_of(doc);
        // SAFETY: VACUUM's callback and its state, for the duration of ambulkdelete.
        unsafe { self.callback.is_some_and(|f| f(&mut tid, self.state)) }
    }
}

/// Flush the pending list (under the metapage's exclusive lock).
fn flush(index: pg_sys::Relation) {
    // SAFETY: block 0 of this index.
    let meta_buf = unsafe { Locked::new(index, META_BLOCK, true) };
    let mut meta = meta_buf.meta().or_raise();
    flush_pending(index, &meta_buf, &mut meta);
}

unsafe fn stats_or_new(stats: *mut pg_sys::IndexBulkDeleteResult) -> *mut pg_sys::IndexBulkDeleteResult {
    if stats.is_null() {
        // SAFETY: a zeroed result in the vacuum's memory context.
        unsafe { pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexBulkDeleteResult>()) as *mut _ }
    } else {
        stats
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn ambulkdelete(
    info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
    callback: pg_sys::IndexBulkDeleteCallback,
    callback_state: *mut std::ffi::c_void,
) -> *mut pg_sys::IndexBulkDeleteResult {
    // SAFETY: VACUUM's arguments; the merge lock is taken and released here.
    unsafe {
        let index = (*info).index;
        let stats = stats_or_new(stats);
        pg_sys::LockPage(index, META_BLOCK, pg_sys::ExclusiveLock as i32);
        flush(index);
        let reaper = Reaper { callback, state: callback_state };
        let mut dead = |d: u64| reaper.dead(d);
        let removed = merge_locked(index, Some(&mut dead));
        pg_sys::UnlockPage(index, META_BLOCK, pg_sys::ExclusiveLock as i32);
        (*stats).tuples_removed += removed as f64;
        let meta = read_meta(index);
        (*stats).num_index_tuples = meta.docs() as f64;
        (*stats).estimated_count = false;
        (*stats).num_pages = IndexPages::new(index).blocks();
        stats
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn amvacuumcleanup(
    info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
) -> *mut pg_sys::IndexBulkDeleteResult {
    // SAFETY: VACUUM's arguments; both locks of the free-space pass are released here.
    unsafe {
        if (*info).analyze_only {
            return stats;
        }
        let index = (*info).index;
        let stats = stats_or_new(stats);
        pg_sys::LockPage(index, META_BLOCK, pg_sys::ExclusiveLock as i32);
        flush(index);
        merge_locked(index, None);
        // freed pages back to the free space map: every allocator is excluded (module rules
        // of `pages`), so a page marked free is not in use
        let pages = IndexPages::new(index);
        let n = pages.blocks();
        let mut free = 0;
        {
            let _meta = Locked::new(index, META_BLOCK, true);
            for blk in 1..n {
                let b = Locked::new(index, blk, false);
                if b.page().is_some_and(|p| p.kind == Kind::Free) {
                    pg_sys::RecordFreeIndexPage(index, blk);
                    free += 1;
                }
            }
        }
        pg_sys::UnlockPage(index, META_BLOCK, pg_sys::ExclusiveLock as i32);
        pg_sys::IndexFreeSpaceMapVacuum(index);
        let meta = read_meta(index);
        (*stats).num_index_tuples = meta.docs() as f64;
        (*stats).estimated_count = false;
        (*stats).num_pages = n;
        (*stats).pages_free = free;
        stats
    }
}

/// [`read_back`] in a subtransaction of its own: any error reading the index (a damaged chain,
/// or PostgreSQL's own, as a page failing its checksum) is the answer, not the caller's error.
pub(crate) fn verify_pages(index_oid: i64) -> Result<(), CoreError> {
    crate::spi::subtransaction(|| read_back(index_oid)).unwrap_or_else(|e| {
        let report = crate::spi::caught_report(&e);
        // damage (class XX: data corrupted, index corrupted) is the answer; anything else,
        // a cancel or a lock timeout, is the caller's
        if !matches!(
            report.sql_error_code(),
            pgrx::PgSqlErrorCode::ERRCODE_DATA_CORRUPTED | pgrx::PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED
        ) {
            (*e).rethrow();
        }
        Err(pg_corpus_core::bm25_index::damaged(report.message().to_string()))
    })
}

/// The light check of the health check: the metapage, every segment's directory and document
/// list, and the pending list read back (the full check is `corpus.bm25_index_check`).
fn read_back(index_oid: i64) -> Result<(), CoreError> {
    // SAFETY: the index is opened and closed here with a lock that only excludes DROP.
    unsafe {
        let rel = pg_sys::index_open(pg_sys::Oid::from(index_oid as u32), pg_sys::AccessShareLock as i32);
        let result = (|| {
            let meta_buf = Locked::new(rel, META_BLOCK, false);
            let meta = meta_buf.meta()?;
            let mut src = IndexPages::new(rel);
            for re in &meta.segments {
                let seg = Segment::open(&mut src, *re)?;
                if seg.docs(&mut src)?.len() as u64 != re.docs {
                    return Err(pg_corpus_core::bm25_index::damaged("a segment's document list is short"));
                }
            }
            if meta.pending_docs > 0 {
                let (bytes, _) = read_pending(&mut src, &meta)?;
                pg_corpus_core::bm25_index::decode_pending(&bytes)?;
            }
            Ok(())
        })();
        pg_sys::index_close(rel, pg_sys::AccessShareLock as i32);
        result
    }
}

// ---------------------------------------------------------------------------------------------
// The scoring argument and the ordering operator

/// What `corpus.bm25_scoring` holds: the query's keys with their weights (weight × count ×
/// idf under the corpus' statistics), the corpus' mean document length, k1, b, and how many
/// rows the first page of an index scan ranks.
#[derive(Debug, Clone)]
pub(crate) struct ScoringArg {
    pub keys: Vec<String>,
    pub weights: Vec<f64>,
    pub avg_doc_len: f64,
    pub params: Bm25Params,
    pub page: usize,
}

impl ScoringArg {
    /// # Safety
    /// `d` must be a non-NULL `corpus.bm25_scoring` datum.
    pub(crate) unsafe fn from_datum(d: pg_sys::Datum) -> Result<ScoringArg, CoreError> {
        unsafe {
            let tup = pg_sys::pg_detoast_datum(d.cast_mut_ptr()) as pg_sys::HeapTupleHeader;
            let field = |n: i16| {
                let mut isnull = false;
                let v = pg_sys::GetAttributeByNum(tup, n, &mut isnull);
                (v, isnull)
            };
            let bad = |what: &str, detail: String| {
                CoreError::new(
                    SqlState::InvalidParameterValue,
                    format!("corpus.bm25_scoring: {what}"),
                    "Build it as ROW(keys, weights, avg_doc_len, k1, b, page_size)::corpus.bm25_scoring with one weight >= 0 per key.",
                )
                .with_detail(detail)
            };
            let (v, n) = field(1);
            let keys: Vec<Option<String>> = if n { Vec::new() } else { Vec::from_datum(v, false).unwrap_or_default() };
            let (v, n) = field(2);
            let weights: Vec<Option<f64>> = if n { Vec::new() } else { Vec::from_datum(v, false).unwrap_or_default() };
            let float = |i: i16, default: f64| {
                let (v, n) = field(i);
                if n {
                    default
                } else {
                    f64::from_datum(v, false).unwrap_or(default)
                }
            };
            let avg_doc_len = float(3, 1.0);
            let k1 = float(4, Bm25Params::default().k1);
            let b = float(5, Bm25Params::default().b);
            let (v, n) = field(6);
            let page = if n { 0 } else { i32::from_datum(v, false).unwrap_or(0) };
            let params = Bm25Params::new(k1, b).map_err(|e| e.with_detail(format!("k1 is {k1}, b is {b}.")))?;
            if keys.len() != weights.len() {
                return Err(bad(
                    "keys and weights differ in length",
                    format!(
                        "{} key{} and {} weight{}.",
                        keys.len(),
                        if keys.len() == 1 { "" } else { "s" },
                        weights.len(),
                        if weights.len() == 1 { "" } else { "s" }
                    ),
                ));
            }
            let mut out =
                ScoringArg { keys: Vec::new(), weights: Vec::new(), avg_doc_len, params, page: page.max(1) as usize };
            let n_keys = keys.len();
            for (i, (k, w)) in keys.into_iter().zip(weights).enumerate() {
                let Some(k) = k else {
                    return Err(bad("keys must not be NULL", format!("Key {} of {n_keys} is NULL.", i + 1)));
                };
                let Some(w) = w else {
                    return Err(bad(
                        "weights must be finite and not negative",
                        format!("Key \"{k}\" has a NULL weight."),
                    ));
                };
                if !w.is_finite() || w < 0.0 {
                    return Err(bad("weights must be finite and not negative", format!("Key \"{k}\" has weight {w}.")));
                }
                out.keys.push(k);
                out.weights.push(w);
            }
            if !avg_doc_len.is_finite() || avg_doc_len < 0.0 {
                return Err(bad(
                    "avg_doc_len must be finite and not negative",
                    format!("avg_doc_len is {avg_doc_len}."),
                ));
            }
            Ok(out)
        }
    }

    pub(crate) fn scored_keys(&self) -> Vec<pg_corpus_core::lexical::ScoredKey> {
        self.keys
            .iter()
            .zip(&self.weights)
            .map(|(k, w)| pg_corpus_core::lexical::ScoredKey { key: k.clone(), weight_idf: *w })
            .collect()
    }
}

/// A call site's scoring: the argument's bytes it was read from, its keys, mean length, k1 and b.
type CachedScoring = (Vec<u8>, Vec<pg_corpus_core::lexical::ScoredKey>, f64, Bm25Params);

/// The scoring of a call site's second argument, parsed once per distinct argument and kept
/// in the call site's `fn_extra`.
///
/// # Safety
/// `fcinfo` must be a call of a strict function whose second argument is a
/// `corpus.bm25_scoring`.
unsafe fn call_scoring<'a>(fcinfo: pg_sys::FunctionCallInfo) -> &'a CachedScoring {
    unsafe { read_call_scoring(fcinfo).or_raise() }
}

/// [`call_scoring`], a scoring that cannot be read being the error it would raise.
///
/// # Safety
/// As [`call_scoring`].
unsafe fn read_call_scoring<'a>(fcinfo: pg_sys::FunctionCallInfo) -> Result<&'a CachedScoring, CoreError> {
    unsafe {
        let args = (*fcinfo).args.as_slice(2);
        let raw = varlena(args[1].value);
        let flinfo = (*fcinfo).flinfo;
        let cached = (*flinfo).fn_extra as *mut CachedScoring;
        let hit = !cached.is_null() && (*cached).0.as_slice() == raw;
        if !hit {
            let arg = ScoringArg::from_datum(args[1].value)?;
            let entry = (raw.to_vec(), arg.scored_keys(), arg.avg_doc_len, arg.params);
            let mut mcx = pgrx::PgMemoryContexts::For((*flinfo).fn_mcxt);
            if cached.is_null() {
                (*flinfo).fn_extra = mcx.leak_and_drop_on_delete(entry) as *mut std::ffi::c_void;
            } else {
                *cached = entry;
            }
        }
        Ok(&*((*flinfo).fn_extra as *const CachedScoring))
    }
}

/// The distance the index orders by: minus the BM25 score of a document under a scoring
/// (`tsvector OPERATOR(corpus.<@>) corpus.bm25_scoring`); 0 for a document without any key.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn _bm25_distance(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: a strict function of (tsvector, corpus.bm25_scoring): neither argument is NULL.
    unsafe {
        let c = call_scoring(fcinfo);
        let args = (*fcinfo).args.as_slice(2);
        let score = match TsVector::parse(tsvector_bytes(args[0].value)) {
            Some(doc) => pg_corpus_core::lexical::score_tsvector(&doc, &c.1, c.2, c.3),
            None => 0.0,
        };
        (-score).into_datum().expect("a float8 datum")
    }
}

/// Whether a document holds at least one of a scoring's keys, whatever its weight
/// (`tsvector OPERATOR(corpus.|||) corpus.bm25_scoring`): the rows an index scan ranks. It is
/// leakproof, so it never raises: a scoring it cannot read holds no row (the index scan and
/// `<@>` report it).
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn _bm25_match(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: a strict function of (tsvector, corpus.bm25_scoring): neither argument is NULL.
    unsafe {
        let Ok(c) = read_call_scoring(fcinfo) else {
            return false.into_datum().expect("a bool datum");
        };
        let args = (*fcinfo).args.as_slice(2);
        let found = match TsVector::parse(tsvector_bytes(args[0].value)) {
            Some(doc) => c.1.iter().any(|k| doc.find(k.key.as_bytes()).is_some()),
            None => false,
        };
        found.into_datum().expect("a bool datum")
    }
}

#[no_mangle]
pub extern "C" fn pg_finfo__bm25_match() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

#[no_mangle]
pub extern "C" fn pg_finfo__bm25_distance() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}
