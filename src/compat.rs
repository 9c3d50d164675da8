//! Shims for the SQL definitions of earlier releases: a database whose library is newer than
//! its extension (until `ALTER EXTENSION pg_corpus UPDATE`) calls these C symbols with the
//! arguments those releases declared. They declare no SQL of their own and forward to the
//! current functions with the defaults of the arguments added since.

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::{AnyElement, JsonB};

use crate::error::OrRaise;
use crate::jsonb::JsonbText;
use crate::spi;
use crate::vector::Vector;

/// `corpus_hybrid_search` as the SQL definitions of releases 0.1.0 and 0.2.0 declare it (11
/// arguments, 14 columns), for a database whose library is newer than its extension until
/// `ALTER EXTENSION pg_corpus UPDATE`: no SQL of its own.
#[allow(clippy::too_many_arguments)]
#[pg_extern(stable, parallel_restricted, sql = false)]
fn corpus_hybrid_search(
    corpus: Option<&str>,
    query_vec: Option<Vector>,
    query_text: Option<&str>,
    k: Option<i32>,
    filters: Option<JsonbText>,
    mode: Option<&str>,
    max_per_parent: Option<i32>,
    candidates: Option<i32>,
    rrf_k: Option<i32>,
    include_stale: Option<bool>,
    feedback: Option<bool>,
) -> TableIterator<
    'static,
    (
        name!(rank, i32),
        name!(corpus, String),
        name!(source, String),
        name!(item_id, String),
        name!(parent_id, String),
        name!(score, f64),
        name!(semantic_rank, Option<i32>),
        name!(semantic_distance, Option<f64>),
        name!(lexical_rank, Option<i32>),
        name!(lexical_score, Option<f64>),
        name!(content, Option<String>),
        name!(locator, JsonB),
        name!(metadata, JsonB),
        name!(embedding_stale, bool),
    ),
> {
    let rows = crate::search::search_rows(
        corpus,
        query_vec,
        query_text,
        k,
        filters,
        mode,
        max_per_parent,
        candidates,
        rrf_k,
        include_stale,
        feedback,
        None,
        Some("strict"),
        None,
        Some(false),
        Some(false),
        Some(0),
        None,
    );
    TableIterator::new(rows.map(|r| (r.0, r.1, r.2, r.3, r.4, r.5, r.6, r.7, r.8, r.9, r.10, r.11, r.12, r.13)))
}

/// `corpus_explain` as releases 0.1.0 and 0.2.0 declare it (8 arguments, 5 columns); see
/// [`corpus_hybrid_search`].
#[allow(clippy::too_many_arguments)]
#[pg_extern(stable, parallel_restricted, sql = false)]
fn corpus_explain(
    corpus: Option<&str>,
    query_vec: Option<Vector>,
    query_text: Option<&str>,
    k: Option<i32>,
    filters: Option<JsonbText>,
    mode: Option<&str>,
    candidates: Option<i32>,
    include_stale: Option<bool>,
) -> TableIterator<
    'static,
    (name!(source, String), name!(branch, String), name!(strategy, String), name!(sql, String), name!(params, JsonB)),
> {
    let rows = crate::search::explain(
        corpus,
        query_vec,
        query_text,
        k,
        filters,
        mode,
        candidates,
        include_stale,
        None,
        Some("strict"),
        None,
        Some(false),
    );
    TableIterator::new(rows.map(|r| (r.0, r.1, r.2, r.3, r.4)))
}

/// `corpus_evaluate` as releases 0.1.0 and 0.2.0 declare it (7 arguments), for a database whose
/// library is newer than its extension until `ALTER EXTENSION pg_corpus UPDATE`: no SQL of
/// its own.
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn corpus_evaluate(
    gold_set: Option<&str>,
    modes: Option<Vec<Option<String>>>,
    k: Option<i32>,
    max_per_parent: Option<i32>,
    rrf_k: Option<i32>,
    candidates: Option<i32>,
    store: Option<bool>,
) -> TableIterator<
    'static,
    (
        name!(run_id, Option<i64>),
        name!(mode, String),
        name!(queries, i32),
        name!(precision_at_k, f64),
        name!(recall_at_k, f64),
        name!(mrr, f64),
        name!(ndcg_at_k, f64),
    ),
> {
    crate::eval::evaluate(
        gold_set,
        modes,
        k,
        max_per_parent,
        rrf_k,
        candidates,
        store,
        Some(false),
        Some(false),
        Some(false),
    )
}

// Release 0.3.0's PL/pgSQL worker API and generated re-embed triggers call the functions
// below; the current worker API calls `spi::items` itself, and the current trigger reads the
// setting in the library. Columns come as attribute numbers; the statements run as the
// table's owner once the worker's own privileges are checked (src/spi/items.rs).

/// The re-embed trigger's question of release 0.3.0: is the queue deferred in this session?
#[pg_extern(stable, parallel_safe, sql = false)]
fn _embedding_queue_deferred() -> bool {
    crate::gucs::embedding_queue_deferred()
}

/// The text to embed for one queued item, NULL when the item is gone.
#[pg_extern(volatile, strict, parallel_unsafe, sql = false)]
fn _embedding_item_text(
    item_table: pg_sys::Oid,
    id_attnum: i16,
    input_attnums: Vec<i16>,
    item_id: &str,
) -> Option<String> {
    spi::pinned_search_path(|| {
        spi::items::require_worker()?;
        spi::items::item_text(item_table, id_attnum, &input_attnums, item_id)
    })
    .or_raise()
}

/// Lock a queued item's row before its queue row (false: the item is gone).
#[pg_extern(volatile, strict, parallel_unsafe, sql = false)]
fn _embedding_item_lock(item_table: pg_sys::Oid, id_attnum: i16, embedding_attnum: i16, item_id: &str) -> bool {
    spi::pinned_search_path(|| {
        spi::items::require_worker()?;
        spi::items::lock_item(item_table, id_attnum, embedding_attnum, item_id)
    })
    .or_raise()
}

/// Store a worker's embedding for a queued item (false: no row has that id).
#[pg_extern(volatile, strict, parallel_unsafe, sql = false)]
fn _embedding_item_store(
    item_table: pg_sys::Oid,
    id_attnum: i16,
    embedding_attnum: i16,
    item_id: &str,
    embedding: AnyElement,
) -> bool {
    // SAFETY: the argument's own datum and type, used within this call.
    let value = unsafe { DatumWithOid::new(embedding.datum(), embedding.oid()) };
    spi::pinned_search_path(|| {
        spi::items::require_worker()?;
        spi::items::store_embedding(item_table, id_attnum, embedding_attnum, item_id, value)
    })
    .or_raise()
}

/// `corpus_hybrid_search` as release 0.3.0 declares it (16 arguments: no `offset`, no
/// `query_model`).
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn hybrid_search(
    corpus: Option<&str>,
    query_vec: Option<Vector>,
    query_text: Option<&str>,
    k: default!(Option<i32>, 10),
    filters: default!(Option<JsonbText>, "'{}'"),
    mode: default!(Option<&str>, "'hybrid'"),
    max_per_parent: default!(Option<i32>, 3),
    candidates: default!(Option<i32>, "NULL"),
    rrf_k: default!(Option<i32>, "NULL"),
    include_stale: default!(Option<bool>, false),
    feedback: default!(Option<bool>, "NULL"),
    extra_queries: default!(Option<JsonbText>, "NULL"),
    filter_mode: default!(Option<&str>, "'strict'"),
    query_vectors: default!(Option<JsonbText>, "NULL"),
    evidence: default!(Option<bool>, "NULL"),
    expand: default!(Option<bool>, false),
) -> TableIterator<
    'static,
    (
        name!(rank, i32),
        name!(corpus, String),
        name!(source, String),
        name!(item_id, String),
        name!(parent_id, String),
        name!(score, f64),
        name!(semantic_rank, Option<i32>),
        name!(semantic_distance, Option<f64>),
        name!(lexical_rank, Option<i32>),
        name!(lexical_score, Option<f64>),
        name!(content, Option<String>),
        name!(locator, JsonB),
        name!(metadata, JsonB),
        name!(embedding_stale, bool),
        name!(query_ranks, JsonB),
        name!(evidence, Option<JsonB>),
        name!(origin, Option<JsonB>),
    ),
> {
    TableIterator::new(crate::search::search_rows(
        corpus,
        query_vec,
        query_text,
        k,
        filters,
        mode,
        max_per_parent,
        candidates,
        rrf_k,
        include_stale,
        feedback,
        extra_queries,
        filter_mode,
        query_vectors,
        evidence,
        expand,
        Some(0),
        None,
    ))
}

/// `corpus_add_source` as releases up to 0.3.0 declare it (returning nothing).
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn corpus_add_source(
    corpus: Option<&str>,
    source: Option<&str>,
    item_table: Option<crate::regtypes::RegClass>,
    text_column: Option<&str>,
    embedding_column: Option<&str>,
    tsv_column: Option<&str>,
    id_column: Option<&str>,
    parent_table: Option<crate::regtypes::RegClass>,
    parent_fk: Option<&str>,
    parent_key: Option<&str>,
    parent_required: Option<Vec<Option<String>>>,
    rule: Option<JsonbText>,
    locator: Option<JsonbText>,
    metadata: Option<JsonbText>,
    min_length: Option<i32>,
    ts_config: Option<crate::regtypes::RegConfig>,
    distance: Option<&str>,
    semantic_weight: Option<f64>,
    lexical_weight: Option<f64>,
    embedding_inputs: Option<Vec<Option<String>>>,
    embedding_model: Option<&str>,
    language: Option<&str>,
    space: Option<&str>,
) {
    let _ = crate::registry::add_source(
        corpus,
        source,
        item_table,
        text_column,
        embedding_column,
        tsv_column,
        id_column,
        parent_table,
        parent_fk,
        parent_key,
        parent_required,
        rule,
        locator,
        metadata,
        min_length,
        ts_config,
        distance,
        semantic_weight,
        lexical_weight,
        embedding_inputs,
        embedding_model,
        language,
        space,
    );
}
