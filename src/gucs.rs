//! Every `pg_corpus.*` setting. The prefix is reserved: a misspelt `pg_corpus.x` is an error.

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

/// Largest `k` a search accepts.
pub static MAX_K: GucSetting<i32> = GucSetting::<i32>::new(1000);
/// Slices whose estimated size is at most this are searched exactly: on 100k × 1024-d, exact search
/// over a slice beats the filtered HNSW scan up to about 4,000 rows (docs/filtered-ann.md).
pub static EXACT_SEARCH_MAX_ROWS: GucSetting<i32> = GucSetting::<i32>::new(4_000);
/// Upper bound of the per-branch candidate window when the search widens it to fill `k` rows.
pub static MAX_CANDIDATES: GucSetting<i32> = GucSetting::<i32>::new(10_000);
/// Upper bound of hnsw.max_scan_tuples the semantic branch sets for an iterative index scan.
pub static ANN_MAX_SCAN_TUPLES: GucSetting<i32> = GucSetting::<i32>::new(1_000_000);

/// The lexical branch's scorer.
#[derive(pgrx::PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum LexicalScorer {
    /// BM25 with per-corpus statistics (the default).
    #[name = c"bm25"]
    Bm25,
    /// PostgreSQL's ts_rank_cd over an OR of the query's lexemes, kept for comparison.
    #[name = c"ts_rank_cd"]
    TsRankCd,
}

pub static LEXICAL_SCORER: GucSetting<LexicalScorer> = GucSetting::<LexicalScorer>::new(LexicalScorer::Bm25);
/// BM25 term-frequency saturation.
pub static BM25_K1: GucSetting<f64> = GucSetting::<f64>::new(1.2);
/// BM25 length normalisation.
pub static BM25_B: GucSetting<f64> = GucSetting::<f64>::new(0.75);
/// About how many documents the lexical branch may take from the GIN index per source: query
/// keys are used rarest first until their document frequencies reach it; commoner keys only
/// score those candidates (Lucene's common-terms idea), so common words never make the lexical
/// branch read most of a table.
pub static BM25_CANDIDATE_BUDGET: GucSetting<i32> = GucSetting::<i32>::new(-1);

/// Hybrid searches run a second, pseudo-relevance feedback round unless the call says otherwise.
pub static HYBRID_FEEDBACK: GucSetting<bool> = GucSetting::<bool>::new(false);
pub static BM25_INDEX: GucSetting<bool> = GucSetting::<bool>::new(true);

/// Bulk loads: skip the re-embed trigger's per-row work (enqueue afterwards in one statement).
pub static DEFER_EMBEDDING_QUEUE: GucSetting<bool> = GucSetting::<bool>::new(false);

pub fn init() {
    GucRegistry::define_enum_guc(
        c"pg_corpus.lexical_scorer",
        c"Scorer of the lexical branch: bm25 or ts_rank_cd.",
        c"bm25 uses per-corpus statistics (corpus.corpus_refresh_lexical_stats); ts_rank_cd is PostgreSQL's, kept for comparison.",
        &LEXICAL_SCORER,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"pg_corpus.bm25_k1",
        c"BM25 k1 (term-frequency saturation).",
        c"Typical values 0.9 to 2.0.",
        &BM25_K1,
        0.0,
        100.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"pg_corpus.bm25_b",
        c"BM25 b (length normalisation), 0 to 1.",
        c"0 disables length normalisation.",
        &BM25_B,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_corpus.bm25_candidate_budget",
        c"About how many documents the lexical branch takes from the index per source; -1: 2% of the corpus' documents, at least 2000.",
        c"Query keys are used rarest first while their document frequencies add up to at most this; commoner keys only score those candidates. Values below 1 mean automatic.",
        &BM25_CANDIDATE_BUDGET,
        -1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pg_corpus.bm25_index",
        c"Rank the lexical branch through a source's corpus_bm25 index where its BM25 column has one.",
        c"Off: the branch scores the candidates its GIN index finds, as without the index (like enable_indexscan, for comparisons and diagnosis).",
        &BM25_INDEX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pg_corpus.hybrid_feedback",
        c"Default of corpus_hybrid_search's feedback argument: a second, pseudo-relevance feedback round.",
        c"It moves the query vector towards the first fusion's best items and expands the BM25 query with their terms (RM3); it doubles the subplans.",
        &HYBRID_FEEDBACK,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pg_corpus.defer_embedding_queue",
        c"Skip the re-embed trigger's per-row work in this session (bulk loads); superusers and roles granted SET on it.",
        c"Afterwards queue the loaded items in one statement with corpus.corpus_embedding_enqueue(...). It switches off an invariant (changed text is queued), so PUBLIC may not set it: GRANT SET ON PARAMETER pg_corpus.defer_embedding_queue TO loader.",
        &DEFER_EMBEDDING_QUEUE,
        GucContext::Suset,
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
        c"The window starts at candidates (default max(100, 4*k)) and grows until k rows survive the per-parent cap.",
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

/// Whether this session defers the re-embed queue (the re-embed trigger's first question). The
/// trigger is the library's, so the library is loaded when it asks, and PostgreSQL has checked a
/// value set before (a placeholder, which any role can set) against the setting's privilege: a
/// role that may not set it got a WARNING and the trigger queues as usual.
pub fn embedding_queue_deferred() -> bool {
    DEFER_EMBEDDING_QUEUE.get()
}
