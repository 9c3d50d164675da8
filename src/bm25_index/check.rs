//! `corpus.bm25_index_check(index, heapallindexed)`: the index read whole and checked, as
//! amcheck checks a B-tree: every page chain, term order, block, posting and document list
//! decodes and agrees with itself; with `heapallindexed`, every live row of the table with index
//! terms is in the index with exactly the postings its BM25 column gives (the table is locked
//! against writes meanwhile). Damage raises XX002 with what was found.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use pg_corpus_core::bm25_index::{damaged, decode_pending, read_pending, Kind, PendingDoc, Segment};
use pg_corpus_core::postings::{decode_block, Staircase};
use pg_corpus_core::{CoreError, SqlState};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::pages::{IndexPages, Locked, META_BLOCK};
use super::{doc_of, row_doc};
use crate::error::OrRaise;
use crate::regtypes::RegClass;

/// One posting's share of its document's fingerprint.
fn posting_hash(term: &[u8], tf: u32, len: u32) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    term.hash(&mut h);
    tf.hash(&mut h);
    len.hash(&mut h);
    h.finish()
}

fn row_fingerprint(row: &PendingDoc) -> u64 {
    row.terms.iter().fold(0u64, |acc, (t, tf)| acc.wrapping_add(posting_hash(t, *tf, row.len)))
}

#[derive(Default)]
struct Found {
    segments: i32,
    terms: i64,
    postings: i64,
    pending_rows: i64,
    /// per document: the sum of its postings' hashes
    docs: HashMap<u64, u64>,
}

fn check_structure(index: pg_sys::Relation) -> Result<Found, CoreError> {
    let mut f = Found::default();
    // SAFETY: block 0 of this index, held shared while what it points to is read.
    let meta_buf = unsafe { Locked::new(index, META_BLOCK, false) };
    let meta = meta_buf.meta()?;
    let mut src = IndexPages::new(index);
    let mut seen_pages: HashSet<u32> = HashSet::new();
    for re in &meta.segments {
        f.segments += 1;
        let seg = Segment::open(&mut src, *re)?;
        for p in seg.pages(&mut src)? {
            if !seen_pages.insert(p) {
                return Err(damaged(format!("page {p} belongs to two chains")));
            }
        }
        let docs = seg.docs(&mut src)?;
        if docs.windows(2).any(|w| w[0] >= w[1]) {
            return Err(damaged("a segment's documents are not in increasing order"));
        }
        let mine: HashSet<u64> = docs.iter().copied().collect();
        for d in &docs {
            if f.docs.insert(*d, 0).is_some() {
                return Err(damaged(format!("row {} is in two segments", tid_text(*d))));
            }
        }
        let mut prev: Option<Vec<u8>> = None;
        let mut terms = 0u64;
        seg.for_each_term(&mut src, |term, p| {
            if prev.as_deref().is_some_and(|q| q >= term) {
                return Err(damaged("a segment's terms are not in increasing order"));
            }
            prev = Some(term.to_vec());
            terms += 1;
            let mut last: Option<u64> = None;
            for (m, bytes) in p.iter_blocks() {
                let ps = decode_block(m, bytes).ok_or_else(|| damaged("a block of postings does not decode"))?;
                if Staircase::of(&ps) != m.staircase {
                    return Err(damaged("a block's bounds do not match its postings"));
                }
                for q in ps {
                    if last.is_some_and(|l| l >= q.doc) || q.tf == 0 || !mine.contains(&q.doc) {
                        return Err(damaged(format!(
                            "a posting of row {} is out of order, empty or of a row the segment does not list",
                            tid_text(q.doc)
                        )));
                    }
                    last = Some(q.doc);
                    f.postings += 1;
                    let fp = f.docs.get_mut(&q.doc).expect("listed above");
                    *fp = fp.wrapping_add(posting_hash(term, q.tf, q.len));
                }
            }
            Ok(())
        })?;
        if terms != re.terms {
            return Err(damaged(format!("a segment holds {terms} terms, its header says {}", re.terms)));
        }
        f.terms += terms as i64;
    }
    if meta.pending_docs > 0 {
        let (bytes, _) = read_pending(&mut src, &meta)?;
        let rows = decode_pending(&bytes)?;
        if rows.len() as u64 != meta.pending_docs {
            return Err(damaged(format!(
                "the pending list holds {} rows, the metapage says {}",
                rows.len(),
                meta.pending_docs
            )));
        }
        for row in rows {
            f.pending_rows += 1;
            f.postings += row.terms.len() as i64;
            if f.docs.insert(row.doc, row_fingerprint(&row)).is_some() {
                return Err(damaged(format!("row {} is in the pending list and elsewhere", tid_text(row.doc))));
            }
        }
    }
    Ok(f)
}

fn tid_text(doc: u64) -> String {
    format!("({},{})", doc >> 16, doc & 0xFFFF)
}

struct HeapCheck<'a> {
    found: &'a HashMap<u64, u64>,
    rows: i64,
    missing: i64,
    first: Option<u64>,
}

#[pg_guard]
unsafe extern "C-unwind" fn heap_callback(
    index: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    alive: bool,
    state: *mut std::ffi::c_void,
) {
    // SAFETY: the state bm25_index_check passed; the row's indexed values.
    unsafe {
        let st = &mut *(state as *mut HeapCheck<'_>);
        if !alive || *isnull {
            return;
        }
        let doc = doc_of(&*tid);
        let Some(row) = row_doc(index, doc, values, isnull) else { return };
        st.rows += 1;
        if st.found.get(&doc) != Some(&row_fingerprint(&row)) {
            st.missing += 1;
            st.first.get_or_insert(doc);
        }
    }
}

/// The access method of a relation, from the catalog cache (no lock taken).
///
/// # Safety
/// Inside a transaction.
unsafe fn relation_am(oid: pg_sys::Oid) -> pg_sys::Oid {
    unsafe {
        let tuple =
            pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::RELOID as i32, oid.into_datum().expect("an oid datum"));
        if tuple.is_null() {
            return pg_sys::InvalidOid;
        }
        let am = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_class>(tuple)).relam;
        pg_sys::ReleaseSysCache(tuple);
        am
    }
}

/// Whether the current role owns a relation (is a member of its owner's role, or a superuser).
///
/// # Safety
/// Inside a transaction.
unsafe fn owns_relation(oid: pg_sys::Oid) -> bool {
    unsafe {
        #[cfg(feature = "pg15")]
        {
            pg_sys::pg_class_ownercheck(oid, pg_sys::GetUserId())
        }
        #[cfg(not(feature = "pg15"))]
        {
            pg_sys::object_ownercheck(pg_sys::RelationRelationId, oid, pg_sys::GetUserId())
        }
    }
}

/// A relation's schema-qualified, quoted name for a message (empty parts for a relation that
/// went meanwhile).
///
/// # Safety
/// Inside a transaction.
unsafe fn qualified_name(oid: pg_sys::Oid) -> String {
    let text = |p: *const std::ffi::c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: a NUL-terminated name from the catalog cache
            unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    unsafe {
        pg_corpus_core::sql::qualified(
            &text(pg_sys::get_namespace_name(pg_sys::get_rel_namespace(oid))),
            &text(pg_sys::get_rel_name(oid)),
        )
    }
}

/// Check a corpus_bm25 index (see the module's description).
#[pg_extern(volatile, parallel_unsafe)]
fn bm25_index_check(
    index: RegClass,
    heapallindexed: default!(bool, true),
) -> TableIterator<
    'static,
    (
        name!(segments, i32),
        name!(documents, i64),
        name!(terms, i64),
        name!(postings, i64),
        name!(pending_rows, i64),
        name!(pages, i64),
        name!(free_pages, i64),
        name!(heap_rows, Option<i64>),
    ),
> {
    let oid = index.0;
    // SAFETY: catalog lookups and relation opens with locks released at the end.
    unsafe {
        let heap_oid = pg_sys::IndexGetRelation(oid, true);
        if heap_oid == pg_sys::InvalidOid {
            crate::error::raise(CoreError::new(
                SqlState::WrongObjectType,
                format!("relation with OID {} is not an index", oid.to_u32()),
                "Pass a corpus_bm25 index, e.g. 'my_table_body_bm25_idx'::regclass.",
            ));
        }
        // (before any lock: the check locks the table against writes, which its owner may do)
        let am = relation_am(oid);
        let ours = am != pg_sys::InvalidOid && {
            let name = pg_sys::get_am_name(am);
            !name.is_null() && std::ffi::CStr::from_ptr(name).to_bytes() == b"corpus_bm25"
        };
        if !ours {
            crate::error::raise(CoreError::new(
                SqlState::WrongObjectType,
                "the index is not a corpus_bm25 index",
                "Pass an index created USING corpus_bm25.",
            ));
        }
        if !owns_relation(heap_oid) {
            crate::error::raise(
                CoreError::new(
                    SqlState::InsufficientPrivilege,
                    format!(
                        "permission denied to check the index: only the owner of table {} may",
                        qualified_name(heap_oid)
                    ),
                    "Run the check as the table's owner (or a member of its role) or as a superuser.",
                )
                .with_detail(
                    "The check counts every row of the table, whatever row-level security shows the caller, and locks it against writes.",
                ),
            );
        }
        let heap_lock = if heapallindexed { pg_sys::ShareLock } else { pg_sys::AccessShareLock } as i32;
        let heap = pg_sys::table_open(heap_oid, heap_lock);
        let rel = pg_sys::index_open(oid, pg_sys::AccessShareLock as i32);
        // (the index may have been dropped and its number reused before the locks were taken)
        if pg_sys::IndexGetRelation(oid, true) != heap_oid {
            crate::error::raise(CoreError::new(
                SqlState::UndefinedTable,
                "the index was dropped or moved while the check started",
                "Run the check again.",
            ));
        }
        if (*(*rel).rd_rel).relkind as u8 == pg_sys::RELKIND_PARTITIONED_INDEX {
            let qualified = qualified_name(oid);
            crate::error::raise(
                CoreError::new(
                    SqlState::WrongObjectType,
                    format!("index {qualified} is partitioned: its partitions' indexes hold the postings"),
                    format!(
                        "Check each partition's index: SELECT t.relid, c.* FROM pg_catalog.pg_partition_tree({}) AS t, \
                         corpus.bm25_index_check(t.relid) AS c WHERE t.isleaf;",
                        pg_corpus_core::sql::literal(&qualified)
                    ),
                )
                .with_detail("A partitioned index has no pages of its own."),
            );
        }
        if !(*(*rel).rd_index).indisvalid {
            // (a build that failed or is still running: its pages need not exist yet)
            let qualified = qualified_name(oid);
            crate::error::raise(
                CoreError::new(
                    SqlState::ObjectNotInPrerequisiteState,
                    format!("index {qualified} is not valid: there is nothing to check"),
                    format!(
                        "An invalid index is left by a failed or running CREATE INDEX CONCURRENTLY or REINDEX CONCURRENTLY; once no build runs, drop it (DROP INDEX CONCURRENTLY {qualified};) and build it again."
                    ),
                )
                .with_detail("Queries do not use an invalid index."),
            );
        }
        if heapallindexed
            && (!pg_sys::RelationGetIndexExpressions(rel).is_null()
                || !pg_sys::RelationGetIndexPredicate(rel).is_null())
        {
            // computing an expression or a predicate runs the table owner's code as the caller
            crate::error::raise(
                CoreError::new(
                    SqlState::FeatureNotSupported,
                    "the heap comparison checks corpus_bm25 indexes on a plain column only",
                    "Run it with heapallindexed => false, or index the column itself.",
                )
                .with_detail("This index is on an expression or partial."),
            );
        }
        let found = check_structure(rel).or_raise();
        let pages = IndexPages::new(rel);
        let blocks = pages.blocks();
        let mut free = 0i64;
        for blk in 1..blocks {
            let b = Locked::new(rel, blk, false);
            if b.page().is_some_and(|p| p.kind == Kind::Free) {
                free += 1;
            }
        }
        let heap_rows = if heapallindexed {
            let mut st = HeapCheck { found: &found.docs, rows: 0, missing: 0, first: None };
            pg_sys::table_index_build_scan(
                heap,
                rel,
                pg_sys::BuildIndexInfo(rel),
                true,
                false,
                Some(heap_callback),
                &mut st as *mut HeapCheck<'_> as *mut std::ffi::c_void,
                std::ptr::null_mut(),
            );
            if st.missing > 0 {
                crate::error::raise(
                    damaged(format!(
                        "{} of {} rows of the table are missing from the index or indexed with other terms",
                        st.missing, st.rows
                    ))
                    .with_detail(format!("The first is row {}.", tid_text(st.first.unwrap_or(0)))),
                );
            }
            Some(st.rows)
        } else {
            None
        };
        pg_sys::index_close(rel, pg_sys::AccessShareLock as i32);
        pg_sys::table_close(heap, heap_lock);
        TableIterator::once((
            found.segments,
            found.docs.len() as i64,
            found.terms,
            found.postings,
            found.pending_rows,
            i64::from(blocks),
            free,
            heap_rows,
        ))
    }
}
