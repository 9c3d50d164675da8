//! Every `pg_corpus.*` setting. The prefix is reserved: a misspelt `pg_corpus.x` is an error.

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

/// Largest `k` a search accepts.
pub static MAX_K: GucSetting<i32> = GucSetting::<i32>::new(1000);
/// Slices whose estimated size is at most this are searched exactly (see docs/filtered-ann.md).
pub static EXACT_SEARCH_MAX_ROWS: GucSetting<i32> = GucSetting::<i32>::new(20_000);
/// Upper bound of the per-branch candidate window when the search widens it to fill `k` rows.
pub static MAX_CANDIDATES: GucSetting<i32> = GucSetting::<i32>::new(10_000);
/// Upper bound of hnsw.max_scan_tuples the semantic branch sets for an iterative index scan.
pub static ANN_MAX_SCAN_TUPLES: GucSetting<i32> = GucSetting::<i32>::new(1_000_000);

/// Bulk loads: skip the re-embed trigger's per-row work (enqueue afterwards in one statement).
pub static DEFER_EMBEDDING_QUEUE: GucSetting<bool> = GucSetting::<bool>::new(false);

pub fn init() {
    GucRegistry::define_bool_guc(
        c"pg_corpus.defer_embedding_queue",
        c"Skip the re-embed trigger's per-row work in this session (bulk loads).",
        c"Afterwards queue the loaded items in one statement with corpus.corpus_embedding_enqueue(...).",
        &DEFER_EMBEDDING_QUEUE,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_corpus.max_k",
        c"Largest k corpus_hybrid_search accepts.",
        c"Searches asking for more rows fail with 22023.",
        &MAX_K,
        1,
        100_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_corpus.exact_search_max_rows",
        c"Corpus slices estimated at or below this many items are searched exactly.",
        c"Above it the semantic branch uses the HNSW index with an iterative scan. 0 always uses the index.",
        &EXACT_SEARCH_MAX_ROWS,
        0,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_corpus.max_candidates",
        c"Largest per-branch candidate window a search widens to.",
        c"The window starts at candidates (default max(20, 4*k)) and grows until k rows survive the per-parent cap.",
        &MAX_CANDIDATES,
        1,
        1_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_corpus.ann_max_scan_tuples",
        c"Upper bound of hnsw.max_scan_tuples for filtered index scans.",
        c"The semantic branch sets hnsw.max_scan_tuples from the corpus slice's selectivity, at most this.",
        &ANN_MAX_SCAN_TUPLES,
        1_000,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(c"pg_corpus".as_ptr()) };
}
