//! The SQL-visible search functions: `corpus_hybrid_search`, `corpus_explain` and the catalog's
//! validation hook. Argument conversion only: the search itself is `pg_corpus_core::engine`,
//! run through `crate::spi::search::SpiExecutor`.

use pg_corpus_core::engine::{self, validate, Args, Call, Config, Outcome, Request, Scorer};

use pg_corpus_core::model::SearchRow;
use pg_corpus_core::{CoreError, SqlState};
use pgrx::prelude::*;
use pgrx::{AnyElement, JsonB};

use crate::jsonb::JsonbText;

use crate::error::OrRaise;
use crate::gucs;
use crate::spi;
use crate::spi::search::SpiExecutor;
use crate::vector::Vector;

/// The settings a search reads, once per call.
pub(crate) fn config() -> Config {
    Config {
        max_k: gucs::MAX_K.get(),
        max_candidates: gucs::MAX_CANDIDATES.get(),
        exact_search_max_rows: gucs::EXACT_SEARCH_MAX_ROWS.get(),
        ann_max_scan_tuples: gucs::ANN_MAX_SCAN_TUPLES.get(),
        scorer: match gucs::LEXICAL_SCORER.get() {
            gucs::LexicalScorer::Bm25 => Scorer::Bm25,
            gucs::LexicalScorer::TsRankCd => Scorer::TsRankCd,
        },
        bm25_k1: gucs::BM25_K1.get(),
        bm25_b: gucs::BM25_B.get(),
        bm25_candidate_budget: gucs::BM25_CANDIDATE_BUDGET.get(),
        bm25_index: gucs::BM25_INDEX.get(),
        hybrid_feedback: gucs::HYBRID_FEEDBACK.get(),
        // SAFETY: a plain GUC variable, read in the backend's only thread.
        random_page_cost: unsafe { pgrx::pg_sys::random_page_cost },
    }
}

/// A NULL where the function needs a value: 22004 naming the argument.
pub(crate) fn required<T>(value: Option<T>, function: &str, argument: &str) -> Result<T, CoreError> {
    value.ok_or_else(|| {
        CoreError::new(
            SqlState::NullValueNotAllowed,
            format!("{function}: {argument} must not be NULL"),
            format!("Pass a value for {argument}, or leave it out to use its default."),
        )
    })
}

/// The arguments both SQL functions share, with NULLs refused (22004) where a value is needed.
#[allow(clippy::too_many_arguments)]
fn common_args(
    function: &str,
    query_vec: Option<Vector>,
    query_text: Option<&str>,
    k: Option<i32>,
    filters: Option<JsonbText>,
    mode: Option<&str>,
    candidates: Option<i32>,
    include_stale: Option<bool>,
    extra_queries: Option<JsonbText>,
    filter_mode: Option<&str>,
    query_vectors: Option<JsonbText>,
) -> Result<Args, CoreError> {
    Ok(Args {
        query_vec: query_vec.map(|v| v.0),
        query_text: query_text.map(str::to_string),
        k: required(k, function, "k")?,
        filters: filters.map_or(Ok(serde_json::Value::Null), |j| j.parse("filters"))?,
        mode: required(mode, function, "mode")?.to_string(),
        candidates,
        include_stale: required(include_stale, function, "include_stale")?,
        extra_queries: extra_queries.map_or(Ok(serde_json::Value::Null), |j| j.parse("extra_queries"))?,
        filter_mode: required(filter_mode, function, "filter_mode")?.to_string(),
        query_vectors: query_vectors.map_or(Ok(serde_json::Value::Null), |j| j.parse("query_vectors"))?,
        ..Args::default()
    })
}

/// Validate a search of `corpus` (its definition from the backend's cache) and plan its lexical
/// side.
pub(crate) fn request(corpus: &str, args: Args, exec: &mut SpiExecutor) -> Result<Request, CoreError> {
    request_of(spi::catalog::load_corpus(corpus)?, args, exec)
}

/// [`request`] for a definition the caller has loaded.
fn request_of(
    corpus: std::sync::Arc<pg_corpus_core::model::Corpus>,
    args: Args,
    exec: &mut SpiExecutor,
) -> Result<Request, CoreError> {
    let config = config();
    let checked = args.check(&config)?;
    exec.with_definition(corpus.clone());
    Request::prepare(validate(corpus, args, checked, config)?, exec)
}

/// Run a call of `corpus` (evaluation and the health check's probes call it too). JIT is off
/// for its statements: each reads a bounded number of rows, yet a plan with a node disabled by
/// a planner setting (enable_sort = off adds 10^10 to its cost) crosses jit_above_cost and
/// spends hundreds of milliseconds compiling (352 ms for an exact subplan of 1,566 rows).
pub(crate) fn run(corpus: &str, call: Call) -> Result<Outcome, CoreError> {
    run_of(corpus, spi::catalog::load_corpus(corpus)?, call)
}

/// [`run`] for a definition the caller has loaded (one load per call: a definition rebuilt
/// after an invalidation is rebuilt once).
pub(crate) fn run_of(
    corpus: &str,
    definition: std::sync::Arc<pg_corpus_core::model::Corpus>,
    call: Call,
) -> Result<Outcome, CoreError> {
    spi::with_settings(&[("jit", "off".to_string())], || {
        let mut exec = SpiExecutor::new(corpus);
        exec.with_definition(definition.clone());
        let out = engine::run(definition, call, config(), &mut exec)?;
        report_dropped_filters(corpus, &out.rejected_filters);
        Ok(out)
    })
}

/// The unfused branch lists of one round of a search (a tuner's capture), with JIT off as
/// for [`run_of`].
pub(crate) fn branch_lists(
    corpus: &str,
    definition: std::sync::Arc<pg_corpus_core::model::Corpus>,
    args: Args,
) -> Result<Vec<pg_corpus_core::fusion::RankedList>, CoreError> {
    spi::with_settings(&[("jit", "off".to_string())], || {
        let mut exec = SpiExecutor::new(corpus);
        let req = request_of(definition, args, &mut exec)?;
        engine::branch_lists(&req, &mut exec)
    })
}

/// Log a finished search (when its corpus logs searches) with its latency.
fn record_audit(row: Option<pg_corpus_core::audit::AuditRow>, started: std::time::Instant) -> Result<(), CoreError> {
    if let Some(mut row) = row {
        row.latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        spi::audit::record(&row)?;
    }
    Ok(())
}

/// A lenient search's dropped filter conditions, as a NOTICE whose detail is their JSON.
fn report_dropped_filters(corpus: &str, rejected: &[pg_corpus_core::filters::Rejected]) {
    if rejected.is_empty() {
        return;
    }
    crate::error::notice(
        format!("the lenient search of corpus \"{corpus}\" dropped {} filter condition(s)", rejected.len()),
        pg_corpus_core::filters::rejected_json(rejected).to_string(),
        "corpus.corpus_check_filters(corpus, filters) says what a lenient search keeps and drops, and why.",
    );
}

/// One hit as a row of `corpus_hybrid_search` (and `corpus_find_similar`).
pub(crate) type HitRow = (
    i32,
    String,
    String,
    String,
    String,
    f64,
    Option<i32>,
    Option<f64>,
    Option<i32>,
    Option<f64>,
    Option<String>,
    JsonB,
    JsonB,
    bool,
    JsonB,
    Option<JsonB>,
    Option<JsonB>,
);

fn hit_row(corpus: &str, r: SearchRow) -> HitRow {
    (
        r.rank,
        corpus.to_string(),
        r.source,
        r.item_id,
        r.parent_id,
        r.score,
        r.semantic_rank,
        r.semantic_distance,
        r.lexical_rank,
        r.lexical_score,
        r.content,
        JsonB(r.locator),
        JsonB(r.metadata),
        r.embedding_stale,
        JsonB(r.query_ranks),
        r.evidence.map(JsonB),
        r.origin.map(JsonB),
    )
}

/// Hybrid (semantic + lexical) search of one corpus, fused by RRF, capped per parent; `offset`
/// skips that many rows of the ranking (pages are slices of one ranking). The C symbols the
/// SQL definitions of earlier releases call are shims (`crate::compat`).
#[allow(clippy::too_many_arguments)]
///
/// Volatile and parallel unsafe: a search of a corpus that keeps an audit log writes its row.
#[pg_extern(volatile, parallel_unsafe, name = "corpus_hybrid_search")]
pub(crate) fn hybrid_search_page(
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
    offset: default!(Option<i32>, 0),
    query_model: default!(Option<&str>, "NULL"),
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
    TableIterator::new(search_rows(
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
        offset,
        query_model,
    ))
}

/// `corpus_hybrid_search` with each `item_id` in the type of `id_type` (any value of it,
/// `NULL::bigint`): the base type of every source's key, built into PostgreSQL. The ids are
/// read back with that type's own input function.
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe, name = "corpus_hybrid_search_typed")]
pub(crate) fn hybrid_search_typed(
    id_type: Option<AnyElement>,
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
    offset: default!(Option<i32>, 0),
    query_model: default!(Option<&str>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<
    'static,
    (
        name!(rank, i32),
        name!(corpus, String),
        name!(source, String),
        name!(item_id, Option<AnyElement>),
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
    // the argument's type says what the ids become; its value (usually NULL) does not
    let _ = id_type;
    // SAFETY: this call's own fcinfo; `id_type` is its first argument.
    let requested = unsafe { pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 0) };
    let rows: Vec<HitRow> = search_rows(
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
        offset,
        query_model,
    )
    .collect();
    let key = spi::pinned_search_path(|| {
        let definition = spi::catalog::load_corpus(required(corpus, "corpus_hybrid_search_typed", "corpus")?)?;
        let key = crate::regtypes::KeyType::of(requested);
        engine::check_key_type(&definition, &key.base_name, key.builtin)?;
        Ok::<_, CoreError>(key)
    })
    .or_raise();
    TableIterator::new(rows.into_iter().map(move |r| {
        let id = key.read(&r.3);
        (r.0, r.1, r.2, id, r.4, r.5, r.6, r.7, r.8, r.9, r.10, r.11, r.12, r.13, r.14, r.15, r.16)
    }))
}

/// The rows of a search with `corpus_hybrid_search`'s arguments.
#[allow(clippy::too_many_arguments)]
pub(crate) fn search_rows(
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
    extra_queries: Option<JsonbText>,
    filter_mode: Option<&str>,
    query_vectors: Option<JsonbText>,
    evidence: Option<bool>,
    expand: Option<bool>,
    offset: Option<i32>,
    query_model: Option<&str>,
) -> impl Iterator<Item = HitRow> {
    const F: &str = "corpus_hybrid_search";
    let started = std::time::Instant::now();
    let rows = spi::pinned_search_path(|| {
        let corpus = required(corpus, F, "corpus")?;
        let args = Args {
            max_per_parent,
            rrf_k,
            feedback,
            evidence,
            expand: Some(required(expand, F, "expand")?),
            offset: required(offset, F, "offset")?,
            query_model: query_model.map(str::to_string),
            ..common_args(
                F,
                query_vec,
                query_text,
                k,
                filters,
                mode,
                candidates,
                include_stale,
                extra_queries,
                filter_mode,
                query_vectors,
            )?
        };
        let out = run(corpus, Call::Search(args))?;
        record_audit(out.audit, started)?;
        if let Some((message, detail, hint)) = engine::unembedded_notice(corpus, out.unembedded_hits, out.rows.len()) {
            crate::error::notice(message, detail, &hint);
        }
        Ok::<_, CoreError>((corpus.to_string(), out.rows))
    })
    .or_raise();
    let (name, rows) = rows;
    rows.into_iter().map(move |r| hit_row(&name, r))
}

/// The exact SQL and parameters of every subplan a search with these arguments would run first
/// (the search may repeat them with a wider window to fill k rows after capping).
#[allow(clippy::too_many_arguments)]
#[pg_extern(stable, parallel_restricted, name = "corpus_explain")]
pub(crate) fn explain(
    corpus: Option<&str>,
    query_vec: default!(Option<Vector>, "NULL"),
    query_text: default!(Option<&str>, "NULL"),
    k: default!(Option<i32>, 10),
    filters: default!(Option<JsonbText>, "'{}'"),
    mode: default!(Option<&str>, "'hybrid'"),
    candidates: default!(Option<i32>, "NULL"),
    include_stale: default!(Option<bool>, false),
    extra_queries: default!(Option<JsonbText>, "NULL"),
    filter_mode: default!(Option<&str>, "'strict'"),
    query_vectors: default!(Option<JsonbText>, "NULL"),
    evidence: default!(Option<bool>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(source, String),
        name!(branch, String),
        name!(strategy, String),
        name!(sql, String),
        name!(params, JsonB),
        name!(query, String),
    ),
> {
    const F: &str = "corpus_explain";
    let rows = spi::pinned_search_path(|| {
        let corpus = required(corpus, F, "corpus")?;
        // (the default per-parent cap, Args' as the searches': the window is a default search's)
        let args = Args {
            feedback: Some(false),
            evidence,
            ..common_args(
                F,
                query_vec,
                query_text,
                k,
                filters,
                mode,
                candidates,
                include_stale,
                extra_queries,
                filter_mode,
                query_vectors,
            )?
        };
        let mut exec = SpiExecutor::new(corpus);
        let req = request(corpus, args, &mut exec)?;
        report_dropped_filters(corpus, &req.rejected_filters);
        engine::explain(&req, &mut exec)
    })
    .or_raise();
    TableIterator::new(
        rows.into_iter()
            .map(|r| (r.source, r.branch.to_string(), r.strategy.to_string(), r.sql, JsonB(r.params), r.query)),
    )
}

/// Items of a corpus similar to one of its own items: a search by
/// the item's stored vector and its text, under the corpus predicate, that never returns the
/// item itself (nor, with `exclude_parent`, its parent's other items).
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_find_similar(
    corpus: Option<&str>,
    source: Option<&str>,
    item_id: Option<&str>,
    k: default!(Option<i32>, 10),
    filters: default!(Option<JsonbText>, "'{}'"),
    mode: default!(Option<&str>, "'hybrid'"),
    max_per_parent: default!(Option<i32>, 3),
    exclude_parent: default!(Option<bool>, false),
    candidates: default!(Option<i32>, "NULL"),
    rrf_k: default!(Option<i32>, "NULL"),
    include_stale: default!(Option<bool>, false),
    filter_mode: default!(Option<&str>, "'strict'"),
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
    const F: &str = "corpus_find_similar";
    let started = std::time::Instant::now();
    let rows = spi::pinned_search_path(|| {
        let corpus = required(corpus, F, "corpus")?;
        let sim = engine::SimilarArgs {
            source: required(source, F, "source")?.to_string(),
            item_id: required(item_id, F, "item_id")?.to_string(),
            exclude_parent: required(exclude_parent, F, "exclude_parent")?,
            args: Args {
                max_per_parent,
                rrf_k,
                ..common_args(F, None, None, k, filters, mode, candidates, include_stale, None, filter_mode, None)?
            },
        };
        let out = run(corpus, Call::Similar(sim))?;
        record_audit(out.audit, started)?;
        let rows = out.rows;
        Ok::<_, CoreError>((corpus.to_string(), rows))
    })
    .or_raise();
    let (name, rows) = rows;
    TableIterator::new(rows.into_iter().map(move |r| hit_row(&name, r)))
}

/// One item of a corpus by its id, with its full text and provenance, read under the corpus
/// predicate and `filters` as a search's hits are: what a caller cites after a search.
/// 42704 alike for an item that does not exist, is another corpus' or is not searchable.
#[pg_extern(stable, parallel_restricted)]
fn corpus_fetch(
    corpus: Option<&str>,
    source: Option<&str>,
    item_id: Option<&str>,
    filters: default!(Option<JsonbText>, "'{}'"),
) -> TableIterator<
    'static,
    (
        name!(corpus, String),
        name!(source, String),
        name!(item_id, String),
        name!(parent_id, String),
        name!(content, Option<String>),
        name!(locator, JsonB),
        name!(metadata, JsonB),
        name!(embedding_stale, bool),
    ),
> {
    const F: &str = "corpus_fetch";
    let row = spi::pinned_search_path(|| {
        let corpus = required(corpus, F, "corpus")?;
        let a = engine::FetchArgs {
            source: required(source, F, "source")?.to_string(),
            item_id: required(item_id, F, "item_id")?.to_string(),
            filters: filters.map_or(Ok(serde_json::Value::Null), |j| j.parse("filters"))?,
        };
        let definition = spi::catalog::load_corpus(corpus)?;
        spi::with_settings(&[("jit", "off".to_string())], || {
            let mut exec = SpiExecutor::new(corpus);
            exec.with_definition(definition.clone());
            engine::fetch_item(definition, a, &mut exec)
        })
        .map(|r| (corpus.to_string(), r))
    })
    .or_raise();
    let (corpus, r) = row;
    TableIterator::new(std::iter::once((
        corpus,
        r.source,
        r.item_id,
        r.parent_id,
        r.content,
        JsonB(r.locator),
        JsonB(r.metadata),
        r.embedding_stale,
    )))
}

/// Why a search of `corpus` with these arguments does not return item `item_id` of `source`:
/// one row per finding, in the order a search applies its rules (outside the corpus — the same
/// answer for an item that does not exist —, the filters, the searchable contract, a missing or
/// stale embedding, then its rank beyond k, the evidence filter, the per-parent cap, or no
/// branch ranking it), or `returned` with its rank. Reads the item as a search would.
#[allow(clippy::too_many_arguments)]
#[pg_extern(stable, parallel_restricted)]
fn corpus_why_not(
    corpus: Option<&str>,
    source: Option<&str>,
    item_id: Option<&str>,
    query_vec: default!(Option<Vector>, "NULL"),
    query_text: default!(Option<&str>, "NULL"),
    k: default!(Option<i32>, 10),
    filters: default!(Option<JsonbText>, "'{}'"),
    mode: default!(Option<&str>, "'hybrid'"),
    max_per_parent: default!(Option<i32>, 3),
    evidence: default!(Option<bool>, "NULL"),
    include_stale: default!(Option<bool>, false),
) -> TableIterator<'static, (name!(reason, String), name!(detail, JsonB), name!(hint, String))> {
    const F: &str = "corpus_why_not";
    let rows = spi::pinned_search_path(|| {
        let corpus = required(corpus, F, "corpus")?;
        let source = required(source, F, "source")?;
        let item_id = required(item_id, F, "item_id")?;
        let args = Args {
            max_per_parent,
            evidence,
            ..common_args(F, query_vec, query_text, k, filters, mode, None, include_stale, None, Some("strict"), None)?
        };
        let definition = spi::catalog::load_corpus(corpus)?;
        spi::with_settings(&[("jit", "off".to_string())], || {
            let mut exec = SpiExecutor::new(corpus);
            exec.with_definition(definition.clone());
            engine::why_not(definition, source, item_id, args, config(), &mut exec)
        })
    })
    .or_raise();
    TableIterator::new(rows.into_iter().map(|w| (w.reason.to_string(), JsonB(w.detail), w.hint)))
}

/// A search hit's snippet: the passage of `content` holding the most words of `query_text`,
/// marked, analysed as source `source` of `corpus` analyses its BM25 column.
#[pg_extern(stable, parallel_restricted)]
fn corpus_snippet(
    corpus: Option<&str>,
    source: Option<&str>,
    content: Option<&str>,
    query_text: Option<&str>,
    max_chars: default!(Option<i32>, 240),
    start_mark: default!(Option<&str>, "'<b>'"),
    stop_mark: default!(Option<&str>, "'</b>'"),
) -> Option<String> {
    const F: &str = "corpus_snippet";
    spi::pinned_search_path(|| {
        let corpus = required(corpus, F, "corpus")?;
        let source = required(source, F, "source")?;
        let opts = pg_corpus_core::snippet::SnippetOptions::new(
            required(max_chars, F, "max_chars")?,
            required(start_mark, F, "start_mark")?,
            required(stop_mark, F, "stop_mark")?,
        )?;
        let definition = spi::catalog::load_corpus(corpus)?;
        match content {
            None => Ok(None),
            Some(text) => {
                pg_corpus_core::snippet::for_source(&definition, source, text, query_text.unwrap_or(""), &opts)
                    .map(Some)
            }
        }
    })
    .or_raise()
}

/// What a search of `corpus` in `filter_mode` does with each piece of `filters` (a range's
/// operators one by one): accepted, or dropped with the reason and the SQLSTATE a strict search
/// raises for it. Errors are the search's own (the isolation column; a missing or invalid
/// required scope filter; in strict mode, the first invalid piece).
#[pg_extern(stable, parallel_restricted)]
fn corpus_check_filters(
    corpus: Option<&str>,
    filters: Option<JsonbText>,
    filter_mode: default!(Option<&str>, "'lenient'"),
) -> TableIterator<
    'static,
    (
        name!(field, String),
        name!(accepted, bool),
        name!(condition, JsonB),
        name!(reason, Option<String>),
        name!(sqlstate, Option<String>),
    ),
> {
    const F: &str = "corpus_check_filters";
    let rows = spi::pinned_search_path(|| {
        let corpus = required(corpus, F, "corpus")?;
        let filters = required(filters, F, "filters")?.parse("filters")?;
        let mode = pg_corpus_core::filters::FilterMode::parse(required(filter_mode, F, "filter_mode")?)?;
        let definition = spi::catalog::load_corpus(corpus)?;
        pg_corpus_core::filters::check(&definition, &filters, mode)
    })
    .or_raise();
    TableIterator::new(
        rows.into_iter()
            .map(|r| (r.field, r.accepted, JsonB(r.condition), r.reason, r.sqlstate.map(|s| s.code().to_string()))),
    )
}

/// Validate a corpus definition against the live tables (called by the catalog functions).
#[pg_extern(stable, parallel_safe)]
fn _validate_corpus(name: &str) -> bool {
    spi::pinned_search_path(|| spi::catalog::validate_corpus(name)).or_raise();
    true
}
