//! The evaluation harness: `corpus_evaluate` runs a gold set through the real search path
//! (`search::run`, the code behind corpus_hybrid_search) and stores the
//! figures; `corpus_compare_runs` compares two runs query by query. Metrics are in the core.

use std::collections::HashMap;

use pg_corpus_core::evidence;
use pg_corpus_core::metrics::{self, QueryMetrics};
use pg_corpus_core::{CoreError, SqlState};
use pgrx::prelude::*;

use pg_corpus_core::engine::{Args, Call};

use pg_corpus_core::model::SearchRow;

use crate::error::OrRaise;
use crate::search::{self, required};
use crate::spi;
use crate::spi::eval::GoldSet;

const MODES: [&str; 3] = ["semantic", "lexical", "hybrid"];

/// The ranking of a search's rows that judgments are matched against ([`metrics::ranking`]).
fn ranking(gold: &GoldSet, judgments: Option<&HashMap<String, i32>>, rows: &[SearchRow]) -> Vec<String> {
    let hits = rows.iter().map(|r| (r.source.as_str(), r.item_id.as_str(), r.parent_id.as_str()));
    metrics::ranking(gold.level == "parent", judgments, hits)
}

/// A gold query's stored extra queries as a search in `mode` takes them: a semantic run keeps
/// those with a vector, a lexical run those with text (the search refuses a query that gives
/// its mode nothing); anything malformed is left for the search to refuse.
fn for_mode(extra: &serde_json::Value, mode: &str) -> serde_json::Value {
    let needs = match mode {
        "semantic" => "vector",
        "lexical" => "text",
        _ => return extra.clone(),
    };
    match extra {
        serde_json::Value::Array(items) => serde_json::Value::Array(
            items.iter().filter(|q| q.get(needs).is_some_and(|v| !v.is_null())).cloned().collect(),
        ),
        other => other.clone(),
    }
}

#[allow(clippy::too_many_arguments)]
fn evaluate_mode(
    gold: &GoldSet,
    mode: &str,
    k: i32,
    max_per_parent: Option<i32>,
    rrf_k: Option<i32>,
    candidates: Option<i32>,
    extra_queries: bool,
    evidence: bool,
    expand: bool,
) -> Result<Vec<(String, QueryMetrics, Vec<String>)>, CoreError> {
    let empty = HashMap::new();
    gold.queries
        .iter()
        .map(|q| {
            if mode == "semantic" && q.vector.is_none() {
                return Err(CoreError::new(
                    SqlState::NullValueNotAllowed,
                    format!("gold query \"{}\" of gold set \"{}\" has no query vector", q.id, gold.name),
                    "Store a query_vec for every query, or evaluate only the lexical mode.",
                )
                .with_kind("bad_vector", None));
            }
            let args = Args {
                query_vec: q.vector.clone(),
                query_text: q.text.clone(),
                k,
                offset: 0,
                filters: q.filters.clone(),
                mode: mode.to_string(),
                max_per_parent,
                candidates,
                rrf_k,
                source_weights: None,
                query_model: None,
                feedback_params: None,
                include_stale: false,
                feedback: None,
                extra_queries: if extra_queries { for_mode(&q.extra_queries, mode) } else { serde_json::Value::Null },
                filter_mode: "strict".into(),
                query_vectors: serde_json::Value::Null,
                evidence: Some(evidence),
                expand: Some(expand),
                must_include: true,
            };
            let rows = search::run(&gold.corpus, Call::Search(args)).map(|o| o.rows).map_err(|e| {
                let msg = format!("gold query \"{}\": {}", q.id, e.message);
                CoreError { message: msg, ..e }
            })?;
            let judgments = gold.judgments.get(&q.id);
            let ranked = ranking(gold, judgments, &rows);
            let m = metrics::evaluate(&ranked, judgments.unwrap_or(&empty), k as usize);
            Ok((q.id.clone(), m, ranked))
        })
        .collect()
}

/// Run every query of a gold set in each mode, store the runs, return their aggregates.
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe, name = "corpus_evaluate")]
pub(crate) fn evaluate(
    gold_set: Option<&str>,
    modes: default!(Option<Vec<Option<String>>>, "ARRAY['semantic', 'lexical', 'hybrid']"),
    k: default!(Option<i32>, 10),
    max_per_parent: default!(Option<i32>, "NULL"),
    rrf_k: default!(Option<i32>, "NULL"),
    candidates: default!(Option<i32>, "NULL"),
    store: default!(Option<bool>, true),
    extra_queries: default!(Option<bool>, false),
    evidence: default!(Option<bool>, false),
    expand: default!(Option<bool>, false),
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
    const F: &str = "corpus_evaluate";
    spi::pinned_search_path(|| {
        let gold_set = required(gold_set, F, "gold_set").or_raise();
        let modes: Vec<String> = required(modes, F, "modes")
            .and_then(|m| m.into_iter().map(|m| required(m, F, "an element of modes")).collect())
            .or_raise();
        let k = required(k, F, "k").or_raise();
        let store = required(store, F, "store").or_raise();
        let extra_queries = required(extra_queries, F, "extra_queries").or_raise();
        let evidence = required(evidence, F, "evidence").or_raise();
        let expand = required(expand, F, "expand").or_raise();
        run_evaluation(gold_set, modes, k, max_per_parent, rrf_k, candidates, store, [extra_queries, evidence, expand])
    })
}

#[allow(clippy::too_many_arguments)]
fn run_evaluation(
    gold_set: &str,
    modes: Vec<String>,
    k: i32,
    max_per_parent: Option<i32>,
    rrf_k: Option<i32>,
    candidates: Option<i32>,
    store: bool,
    [extra_queries, evidence, expand]: [bool; 3],
) -> TableIterator<'static, (Option<i64>, String, i32, f64, f64, f64, f64)> {
    let gold = spi::eval::load_gold_set(gold_set, extra_queries).or_raise();
    if gold.queries.is_empty() {
        crate::error::raise(CoreError::new(
            SqlState::ObjectNotInPrerequisiteState,
            format!("gold set \"{gold_set}\" has no queries"),
            "Insert queries into corpus.gold_queries and judgments into corpus.gold_judgments.",
        ));
    }
    // NULL: the search's default cap (3) for item-level sets; 1 for parent-level sets, where
    // several items of one parent would fill k rows but count once.
    let max_per_parent = max_per_parent.or(Some(if gold.level == "parent" { 1 } else { 3 }));
    let mut out = Vec::new();
    for mode in &modes {
        if !MODES.contains(&mode.as_str()) {
            crate::error::raise(CoreError::new(
                SqlState::InvalidParameterValue,
                format!("unknown search mode \"{mode}\""),
                "modes are semantic, lexical and hybrid.",
            ));
        }
        let started = spi::eval::clock_timestamp().or_raise();
        let per_query =
            evaluate_mode(&gold, mode, k, max_per_parent, rrf_k, candidates, extra_queries, evidence, expand)
                .or_raise();
        let figures: Vec<QueryMetrics> = per_query.iter().map(|(_, m, _)| *m).collect();
        let agg = metrics::mean(&figures);
        let run_id = if store {
            // Everything that changes a ranking, so that two runs show what differed.
            let params = serde_json::json!({
                "k": k, "max_per_parent": max_per_parent, "rrf_k": rrf_k, "candidates": candidates,
                "extra_queries": extra_queries, "evidence": evidence, "expand": expand,
                "settings": spi::eval::ranking_settings().unwrap_or_default(),
                "corpus_definition": spi::eval::corpus_definition_json(&gold.corpus).unwrap_or_default(),
                "analyzer_version": pg_corpus_core::analysis::ANALYZER_VERSION,
            });
            Some(spi::eval::store_run(&gold, mode, k, params, &started, &agg, &per_query).or_raise())
        } else {
            None
        };
        out.push((run_id, mode.clone(), figures.len() as i32, agg.precision, agg.recall, agg.mrr, agg.ndcg));
    }
    TableIterator::new(out)
}

/// Compare run B against run A (same gold set): per metric, the means, per-query wins, losses
/// and ties, and the two-sided p-value of a paired randomisation test (fixed seed: repeatable).
#[pg_extern(stable, parallel_restricted)]
fn corpus_compare_runs(
    run_a: Option<i64>,
    run_b: Option<i64>,
    trials: default!(Option<i32>, 10000),
) -> TableIterator<
    'static,
    (
        name!(metric, String),
        name!(queries, i32),
        name!(mean_a, f64),
        name!(mean_b, f64),
        name!(delta, f64),
        name!(wins, i32),
        name!(losses, i32),
        name!(ties, i32),
        name!(p_value, f64),
    ),
> {
    const F: &str = "corpus_compare_runs";
    let run_a = required(run_a, F, "run_a").or_raise();
    let run_b = required(run_b, F, "run_b").or_raise();
    let trials = required(trials, F, "trials").or_raise();
    if !(100..=1_000_000).contains(&trials) {
        crate::error::raise(CoreError::new(
            SqlState::InvalidParameterValue,
            format!("trials must be between 100 and 1000000, got {trials}"),
            "10000 random sign assignments give p-values to about ±0.005.",
        ));
    }
    let (a, b) =
        spi::pinned_search_path(|| Ok::<_, CoreError>((spi::eval::load_run(run_a)?, spi::eval::load_run(run_b)?)))
            .or_raise();
    if a.gold_set != b.gold_set {
        crate::error::raise(CoreError::new(
            SqlState::InvalidParameterValue,
            format!("run {run_a} evaluates gold set \"{}\" but run {run_b} evaluates \"{}\"", a.gold_set, b.gold_set),
            "Compare two runs of the same gold set.",
        ));
    }
    // Paired in query-id order: the random signs are drawn by position, so a fixed order makes
    // the p-value repeatable.
    let mut queries: Vec<&String> = a.per_query.keys().filter(|q| b.per_query.contains_key(*q)).collect();
    queries.sort();
    let paired: Vec<(&QueryMetrics, &QueryMetrics)> =
        queries.iter().map(|q| (&a.per_query[*q], &b.per_query[*q])).collect();
    let metric_fns: [(&str, fn(&QueryMetrics) -> f64); 4] =
        [("precision", |m| m.precision), ("recall", |m| m.recall), ("mrr", |m| m.mrr), ("ndcg", |m| m.ndcg)];
    let rows: Vec<_> = metric_fns
        .iter()
        .map(|(name, f)| {
            let va: Vec<f64> = paired.iter().map(|(x, _)| f(x)).collect();
            let vb: Vec<f64> = paired.iter().map(|(_, y)| f(y)).collect();
            let c = metrics::compare(&va, &vb, trials as usize, 0x5eed);
            (
                name.to_string(),
                c.queries as i32,
                c.mean_a,
                c.mean_b,
                c.mean_b - c.mean_a,
                c.wins as i32,
                c.losses as i32,
                c.ties as i32,
                c.p_value,
            )
        })
        .collect();
    TableIterator::new(rows)
}

/// Calibrate the evidence filter's vector thresholds on a gold set: each query's
/// semantic search (its first `candidates` hits under its filters) gives the best candidate's
/// distance and its nearest relevant item's; `max_distance` and `max_gap` are the `quantile`
/// of those over the answerable queries (pg_corpus_core::evidence::calibrate). Queries without
/// a relevant judgment are the unanswerable ones: `rejected` is the share whose best candidate
/// the thresholds refuse. With `apply`, the thresholds are stored through corpus_alter (so
/// only a role that may change the corpus can).
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_calibrate_evidence(
    gold_set: Option<&str>,
    quantile: default!(Option<f64>, 0.95),
    apply: default!(Option<bool>, false),
    candidates: default!(Option<i32>, 100),
) -> TableIterator<
    'static,
    (
        name!(space, String),
        name!(model, Option<String>),
        name!(max_distance, f64),
        name!(max_gap, f64),
        name!(answerable, i32),
        name!(kept, f64),
        name!(unanswerable, i32),
        name!(rejected, f64),
        name!(applied, bool),
    ),
> {
    const F: &str = "corpus_calibrate_evidence";
    let row = spi::pinned_search_path(|| {
        let gold_set = required(gold_set, F, "gold_set")?;
        let q = required(quantile, F, "quantile")?;
        let apply = required(apply, F, "apply")?;
        let candidates = required(candidates, F, "candidates")?;
        evidence::check_calibration_args(q, candidates, crate::gucs::MAX_K.get())?;
        let gold = spi::eval::load_gold_set(gold_set, false)?;
        let corpus = spi::catalog::load_corpus(&gold.corpus)?;
        let mut samples = Vec::new();
        for query in gold.queries.iter().filter(|q| q.vector.is_some()) {
            let args = Args {
                query_vec: query.vector.clone(),
                k: candidates,
                filters: query.filters.clone(),
                mode: "semantic".into(),
                max_per_parent: Some(0),
                evidence: Some(false),
                // the search's own ranking: no class hits in place of its candidates
                must_include: false,
                ..Args::default()
            };
            let rows = search::run(&gold.corpus, Call::Search(args))
                .map(|o| o.rows)
                .map_err(|e| evidence::in_gold_query(&query.id, e))?;
            let judgments = gold.judgments.get(&query.id);
            samples.extend(evidence::sample(&rows, judgments, gold.level == "parent"));
        }
        let c = evidence::calibrate(&samples, q).ok_or_else(|| evidence::nothing_to_calibrate(gold_set, candidates))?;
        let space = &corpus.spaces[0];
        if apply {
            spi::eval::store_vector_thresholds(&gold.corpus, &space.name, &c.thresholds(space.model.clone()))?;
        }
        Ok((
            space.name.clone(),
            space.model.clone(),
            c.max_distance,
            c.max_gap,
            c.answerable as i32,
            c.kept,
            c.unanswerable as i32,
            c.rejected,
            apply,
        ))
    })
    .or_raise();
    TableIterator::new(std::iter::once(row))
}

/// Define a gold set of a corpus: its queries and judgments go into corpus.gold_queries and
/// corpus.gold_judgments; `level` says whether judgments name items or parents.
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_gold_set_create(
    name: Option<&str>,
    corpus: Option<&str>,
    level: default!(Option<&str>, "'item'"),
    description: default!(Option<&str>, "NULL"),
) {
    spi::pinned_search_path(|| -> Result<(), CoreError> {
        spi::require_writable("corpus_gold_set_create")?;
        let corpus = corpus.unwrap_or("");
        if !spi::registry::corpus_exists(corpus) {
            return Err(pg_corpus_core::registry::no_corpus(
                corpus,
                "A gold set evaluates one corpus; see corpus.corpus_list().",
            ));
        }
        let level = pg_corpus_core::registry::check_level(level)?;
        let name = pg_corpus_core::registry::check_gold_set_name(name)?;
        if spi::eval::gold_set_exists(name) {
            return Err(CoreError::new(
                SqlState::DuplicateObject,
                format!("gold set \"{name}\" already exists"),
                "Drop it first: DELETE FROM corpus.gold_sets WHERE name = ...",
            ));
        }
        spi::eval::insert_gold_set(name, corpus, level, description)
    })
    .or_raise()
}

/// Per-query comparison of two runs of the same gold set (the wins and losses behind
/// corpus_compare_runs): each query's value of `metric` in both runs and their difference.
#[pg_extern(stable, parallel_safe)]
fn corpus_compare_queries(
    run_a: Option<i64>,
    run_b: Option<i64>,
    metric: default!(Option<&str>, "'ndcg'"),
) -> TableIterator<
    'static,
    (
        name!(query_id, Option<String>),
        name!(value_a, Option<f64>),
        name!(value_b, Option<f64>),
        name!(delta, Option<f64>),
    ),
> {
    let rows = spi::pinned_search_path(|| {
        let metric = metrics::Metric::parse(metric)?;
        let missing = |id: Option<i64>| {
            CoreError::new(
                SqlState::UndefinedObject,
                format!("evaluation run {} does not exist", id.map_or(String::new(), |i| i.to_string())),
                "See SELECT id, gold_set, mode, ndcg_at_k FROM corpus.eval_runs ORDER BY id.",
            )
        };
        let (Some(a), Some(b)) = (run_a, run_b) else {
            return Err(missing(if run_a.is_some() { run_b } else { run_a }));
        };
        let (ra, rb) = (spi::eval::load_run(a)?, spi::eval::load_run(b)?);
        if ra.gold_set != rb.gold_set {
            return Err(CoreError::new(
                SqlState::InvalidParameterValue,
                format!("runs {a} and {b} evaluate different gold sets"),
                "Compare two runs of the same gold set.",
            ));
        }
        spi::eval::compare_queries(a, b, metric)
    })
    .or_raise();
    TableIterator::new(rows)
}
