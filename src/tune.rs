//! `corpus_tune`: a corpus' fusion settings chosen on its own gold set by cross-validation
//! (`pg_corpus_core::tune`), measured by the real search path, applied only when asked and
//! only when the gain is significant; `corpus_tune_revert` puts back what a tuning replaced.

use std::time::{Duration, Instant};

use pg_corpus_core::engine::{Args, Call};
use pg_corpus_core::metrics;
use pg_corpus_core::ranking::{FeedbackParams, WINDOW_PER_K};
use pg_corpus_core::tune::{self, Capture, Grid, Problem, Setting};
use pg_corpus_core::{CoreError, SqlState};
use pgrx::prelude::*;
use pgrx::JsonB;
use serde_json::json;

use crate::error::{notice, OrRaise};
use crate::search::{self, required};
use crate::spi;
use crate::spi::eval::{GoldQuery, GoldSet};

/// Items per source and branch captured per query: the deepest window the tuner replays.
const CAPTURE: usize = 200;
/// Coordinate-ascent rounds per tuning.
const MAX_ROUNDS: usize = 4;
/// Shares of the budget: capturing the lists, then replaying settings; the searches that
/// measure the result (each about as costly as a capture: twice the capture share, and the
/// feedback check only when it fits) take the rest.
const CAPTURE_SHARE: f64 = 0.2;
const TUNING_SHARE: f64 = 0.25;
/// Trials of the paired randomisation test.
const TRIALS: usize = 10_000;

fn bad(msg: String, hint: &str) -> CoreError {
    CoreError::new(SqlState::InvalidParameterValue, msg, hint)
}

/// The arguments checked.
struct Plan {
    folds: usize,
    budget: Duration,
    alpha: f64,
    seed: u64,
    k: i32,
}

fn check(folds: i32, budget_seconds: f64, alpha: f64, k: i32, max_k: i32) -> Result<(usize, Duration), CoreError> {
    if !(2..=20).contains(&folds) {
        return Err(bad(format!("folds must be between 2 and 20, got {folds}"), "5 folds is the usual choice."));
    }
    if !(budget_seconds.is_finite() && budget_seconds > 0.0 && budget_seconds <= 86_400.0) {
        return Err(bad(
            format!("budget_seconds must be a number of seconds in (0, 86400], got {budget_seconds}"),
            "The default, 600, tunes a set of about 1,000 queries.",
        ));
    }
    if !(alpha.is_finite() && alpha > 0.0 && alpha < 1.0) {
        return Err(bad(format!("alpha must be in (0, 1), got {alpha}"), "0.05 is the usual significance level."));
    }
    if k < 1 || k > max_k.min(100) {
        return Err(bad(
            format!("k must be between 1 and {}, got {k}", max_k.min(100)),
            "Tune for the k your searches use.",
        ));
    }
    Ok((folds as usize, Duration::from_secs_f64(budget_seconds)))
}

/// The search arguments of a gold query with every fusion setting left to `setting`.
fn args(q: &GoldQuery, k: i32, max_per_parent: i32) -> Args {
    Args {
        query_vec: q.vector.clone(),
        query_text: q.text.clone(),
        k,
        filters: q.filters.clone(),
        mode: "hybrid".into(),
        max_per_parent: Some(max_per_parent),
        evidence: Some(false),
        expand: Some(false),
        must_include: false,
        ..Args::default()
    }
}

/// nDCG@k of one real search of `q`.
fn measure(gold: &GoldSet, q: &GoldQuery, a: Args, k: i32) -> Result<f64, CoreError> {
    let rows = search::run(&gold.corpus, Call::Search(a))
        .map_err(|e| CoreError { message: format!("gold query \"{}\": {}", q.id, e.message), ..e })?
        .rows;
    let judgments = gold.judgments.get(&q.id);
    let hits = rows.iter().map(|r| (r.source.as_str(), r.item_id.as_str(), r.parent_id.as_str()));
    let ranking = metrics::ranking(gold.level == "parent", judgments, hits);
    let empty = Default::default();
    Ok(metrics::evaluate(&ranking, judgments.unwrap_or(&empty), k as usize).ndcg)
}

fn progress(phase: &str, detail: serde_json::Value) {
    notice(
        format!("corpus_tune: {phase}"),
        detail.to_string(),
        "Progress of corpus_tune; it ends with one result row.",
    );
}

/// A setting in the catalog's shape (what `corpus_alter(ranking => ...)` takes).
fn settings_json(s: &Setting, feedback: bool, p: FeedbackParams, sources: &[String]) -> serde_json::Value {
    let weights: serde_json::Map<String, serde_json::Value> = sources
        .iter()
        .zip(&s.weights)
        .map(|(name, (sem, lex))| (name.clone(), json!({"semantic": sem, "lexical": lex})))
        .collect();
    json!({"rrf_k": s.rrf_k, "window": s.window, "feedback": feedback, "feedback_beta": p.beta,
           "feedback_alpha": p.alpha, "feedback_terms": p.terms, "weights": weights})
}

type TuneRow = (i64, i32, i32, f64, f64, f64, f64, bool, bool, JsonB, JsonB);

fn run(corpus: &str, gold_set: &str, plan: Plan, apply: bool) -> Result<TuneRow, CoreError> {
    let started = Instant::now();
    let started_at = spi::eval::clock_timestamp()?;
    if apply {
        spi::require_writable("corpus_tune")?;
    }
    let gold = spi::eval::load_gold_set(gold_set, false)?;
    if gold.corpus != corpus {
        return Err(CoreError::new(
            SqlState::InvalidParameterValue,
            format!("gold set \"{gold_set}\" evaluates corpus \"{}\", not \"{corpus}\"", gold.corpus),
            "Tune a corpus on one of its own gold sets; see corpus.gold_sets.",
        ));
    }
    let definition = spi::catalog::load_corpus(corpus)?;
    let previous = spi::registry::ranking_settings(corpus)?.ok_or_else(|| {
        pg_corpus_core::registry::no_corpus(corpus, "See corpus.corpus_list() for the defined corpora.")
    })?;
    let config = search::config();
    let max_per_parent = if gold.level == "parent" { 1 } else { 3 };
    let usable: Vec<&GoldQuery> = gold
        .queries
        .iter()
        .filter(|q| q.vector.is_some() && q.text.as_deref().is_some_and(|t| !t.trim().is_empty()))
        .collect();
    if usable.len() < plan.folds {
        return Err(CoreError::new(
            SqlState::ObjectNotInPrerequisiteState,
            format!(
                "gold set \"{gold_set}\" has {} queries with both a vector and text; {} folds need at least {}",
                usable.len(),
                plan.folds,
                plan.folds
            ),
            "Hybrid settings are tuned on queries that have query_vec and query_text; add queries or use fewer folds.",
        ));
    }
    let sources: Vec<String> = definition.sources.iter().map(|s| s.name.clone()).collect();
    let current_feedback = definition.ranking.feedback.unwrap_or(config.hybrid_feedback);
    let start = Setting {
        rrf_k: definition.ranking.rrf_k(),
        window: definition.ranking.window.unwrap_or(pg_corpus_core::ranking::DEFAULT_WINDOW),
        weights: definition.sources.iter().map(|s| (s.semantic_weight, s.lexical_weight)).collect(),
    };
    let capture = CAPTURE.max(WINDOW_PER_K * plan.k as usize).min(config.max_candidates.max(1) as usize);

    // 1. capture each query's branch lists, in a seeded order, within the capture share
    let order = tune::folds(usable.len(), usable.len(), plan.seed);
    let mut by_position: Vec<usize> = (0..usable.len()).collect();
    by_position.sort_by_key(|&i| order[i]);
    let mut queries: Vec<&GoldQuery> = Vec::new();
    let mut captures = Vec::new();
    for &i in &by_position {
        if started.elapsed().as_secs_f64() > plan.budget.as_secs_f64() * CAPTURE_SHARE && queries.len() >= plan.folds {
            break;
        }
        let q = usable[i];
        let a = Args { candidates: Some(capture as i32), feedback: Some(false), ..args(q, plan.k, max_per_parent) };
        let lists = search::branch_lists(corpus, definition.clone(), a)
            .map_err(|e| CoreError { message: format!("gold query \"{}\": {}", q.id, e.message), ..e })?;
        captures.push(Capture { lists, judgments: gold.judgments.get(&q.id).cloned().unwrap_or_default() });
        queries.push(q);
    }
    progress(
        "captured the branch lists",
        json!({"queries": queries.len(), "of": usable.len(), "capture": capture, "seconds": started.elapsed().as_secs_f64()}),
    );

    // 2. tune per fold on the other folds' queries, then on all, within the tuning share
    let problem = Problem {
        captures,
        sources: definition.sources.iter().map(|s| (s.name.clone(), s.parent_scope.clone())).collect(),
        k: plan.k as usize,
        max_per_parent: Some(max_per_parent as usize),
        parent_level: gold.level == "parent",
        capture,
    };
    let grid = Grid::standard(plan.k as usize, capture);
    let tune_start = started.elapsed().as_secs_f64();
    let slice =
        (plan.budget.as_secs_f64() * (CAPTURE_SHARE + TUNING_SHARE) - tune_start).max(0.0) / (plan.folds + 1) as f64;
    let mut score = |q: usize, s: &Setting| problem.score(q, s);
    let mut out_of_time = |part: usize| {
        pgrx::check_for_interrupts!();
        started.elapsed().as_secs_f64() > tune_start + slice * (part + 1) as f64
    };
    let fold_of = tune::folds(queries.len(), plan.folds, plan.seed);
    let cv = tune::cross_validate(fold_of, &start, &grid, MAX_ROUNDS, &mut score, &mut out_of_time);
    let all: Vec<usize> = (0..queries.len()).collect();
    let (chosen, _) = tune::ascend(&all, &start, &grid, MAX_ROUNDS, &mut score, &mut || out_of_time(plan.folds));
    progress(
        "chose the settings of each fold",
        json!({"folds": plan.folds, "seconds": started.elapsed().as_secs_f64()}),
    );

    // 3. measure with real searches: the current settings, feedback flipped, each fold's choice
    let base_start = started.elapsed().as_secs_f64();
    let base: Vec<f64> =
        queries.iter().map(|q| measure(&gold, q, args(q, plan.k, max_per_parent), plan.k)).collect::<Result<_, _>>()?;
    let base_seconds = started.elapsed().as_secs_f64() - base_start;
    let can_feed_back = config.scorer == pg_corpus_core::engine::Scorer::Bm25;
    let remaining = plan.budget.as_secs_f64() - started.elapsed().as_secs_f64();
    // a feedback search costs about three plain ones; leave time for the tuned pass
    let flipped: Option<Vec<f64>> = if can_feed_back && remaining > base_seconds * 5.0 {
        let v = queries
            .iter()
            .map(|q| {
                measure(&gold, q, Args { feedback: Some(!current_feedback), ..args(q, plan.k, max_per_parent) }, plan.k)
            })
            .collect::<Result<Vec<f64>, _>>()?;
        Some(v)
    } else {
        None
    };
    let feedback_for = |train: &[usize]| match &flipped {
        Some(f) => current_feedback ^ tune::flip_feedback(train, &base, f),
        None => current_feedback,
    };
    let fold_feedback: Vec<bool> = (0..plan.folds).map(|f| feedback_for(&cv.training(f))).collect();
    let chosen_feedback = feedback_for(&all);
    // the feedback round's parameters: each alternative measured with feedback on (and the
    // current fusion settings) while the time left also covers the tuned pass
    let current_params = definition.ranking.feedback_params();
    let mut params: Vec<FeedbackParams> = Vec::new();
    let mut param_scores: Vec<Vec<f64>> = Vec::new();
    if let Some(on) = if current_feedback { Some(&base) } else { flipped.as_ref() } {
        params.push(current_params);
        param_scores.push(on.clone());
        let pass = (started.elapsed().as_secs_f64() - base_start - base_seconds).max(base_seconds);
        for p in tune::feedback_alternatives(current_params) {
            if plan.budget.as_secs_f64() - started.elapsed().as_secs_f64() < pass * 3.0 {
                break;
            }
            let scores = queries
                .iter()
                .map(|q| {
                    let a = Args { feedback: Some(true), feedback_params: Some(p), ..args(q, plan.k, max_per_parent) };
                    measure(&gold, q, a, plan.k)
                })
                .collect::<Result<Vec<f64>, _>>()?;
            params.push(p);
            param_scores.push(scores);
        }
    }
    let params_for = |train: &[usize], on: bool| {
        if on && !params.is_empty() {
            params[tune::best_option(train, &param_scores)]
        } else {
            current_params
        }
    };
    let fold_params: Vec<FeedbackParams> =
        (0..plan.folds).map(|f| params_for(&cv.training(f), fold_feedback[f])).collect();
    let chosen_params = params_for(&all, chosen_feedback);
    let tuned: Vec<f64> = queries
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let s = cv.setting_of(i);
            let window =
                (s.window.max(1) as usize).max(WINDOW_PER_K * plan.k as usize).min(config.max_candidates as usize);
            let a = Args {
                rrf_k: Some(s.rrf_k),
                candidates: Some(window as i32),
                source_weights: Some(s.weights.clone()),
                feedback: Some(fold_feedback[cv.fold_of[i]]),
                feedback_params: Some(fold_params[cv.fold_of[i]]),
                ..args(q, plan.k, max_per_parent)
            };
            measure(&gold, q, a, plan.k)
        })
        .collect::<Result<_, _>>()?;
    let cmp = metrics::compare(&base, &tuned, TRIALS, plan.seed);
    let gain = cmp.mean_b - cmp.mean_a;
    let significant = gain > 0.0 && cmp.p_value < plan.alpha;
    progress(
        "measured",
        json!({"baseline": cmp.mean_a, "tuned": cmp.mean_b, "p_value": cmp.p_value,
               "feedback_measured": flipped.is_some(), "feedback_parameters_measured": params.len(),
               "seconds": started.elapsed().as_secs_f64()}),
    );

    // 4. record, and apply when asked and significant
    let settings = settings_json(&chosen, chosen_feedback, chosen_params, &sources);
    let folds_json: Vec<serde_json::Value> = (0..plan.folds)
        .map(|f| {
            let ids: Vec<&str> =
                (0..queries.len()).filter(|&i| cv.fold_of[i] == f).map(|i| queries[i].id.as_str()).collect();
            json!({"fold": f, "queries": ids, "settings": settings_json(&cv.settings[f], fold_feedback[f], fold_params[f], &sources)})
        })
        .collect();
    let applied = apply && significant;
    if applied {
        spi::eval::apply_ranking(corpus, &settings)?;
    }
    let run_id = spi::eval::store_tune_run(&spi::eval::TuneRun {
        gold_set,
        corpus,
        started_at: &started_at,
        queries: queries.len() as i32,
        folds: plan.folds as i32,
        seed: plan.seed as i64,
        baseline: cmp.mean_a,
        tuned: cmp.mean_b,
        p_value: cmp.p_value,
        settings: &settings,
        previous: &previous,
        fold_settings: &json!(folds_json),
        applied,
    })?;
    Ok((
        run_id,
        queries.len() as i32,
        plan.folds as i32,
        cmp.mean_a,
        cmp.mean_b,
        gain,
        cmp.p_value,
        significant,
        applied,
        JsonB(settings),
        JsonB(previous),
    ))
}

/// Tune a corpus' fusion settings (rrf_k, the candidate window, feedback, each source's
/// branch weights) on one of its gold sets by k-fold cross-validation over queries, within
/// `budget_seconds`. `tuned_ndcg` is the cross-validated figure: each query measured by a real
/// search with the settings chosen without it; `p_value` compares it with the current
/// settings query by query. With `apply`, the settings chosen on every query are stored with
/// `corpus_alter` when the gain is significant at `alpha`; every run is kept in corpus.tune_runs.
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_tune(
    corpus: Option<&str>,
    gold_set: Option<&str>,
    folds: default!(Option<i32>, 5),
    budget_seconds: default!(Option<f64>, 600),
    apply: default!(Option<bool>, false),
    alpha: default!(Option<f64>, 0.05),
    seed: default!(Option<i64>, 0),
    k: default!(Option<i32>, 10),
) -> TableIterator<
    'static,
    (
        name!(run_id, i64),
        name!(queries, i32),
        name!(folds, i32),
        name!(baseline_ndcg, f64),
        name!(tuned_ndcg, f64),
        name!(gain, f64),
        name!(p_value, f64),
        name!(significant, bool),
        name!(applied, bool),
        name!(settings, JsonB),
        name!(previous, JsonB),
    ),
> {
    const F: &str = "corpus_tune";
    let row = spi::pinned_search_path(|| {
        let corpus = required(corpus, F, "corpus")?;
        let gold_set = required(gold_set, F, "gold_set")?;
        let (folds, budget) = check(
            required(folds, F, "folds")?,
            required(budget_seconds, F, "budget_seconds")?,
            required(alpha, F, "alpha")?,
            required(k, F, "k")?,
            crate::gucs::MAX_K.get(),
        )?;
        let plan = Plan {
            folds,
            budget,
            alpha: required(alpha, F, "alpha")?,
            seed: required(seed, F, "seed")? as u64,
            k: required(k, F, "k")?,
        };
        run(corpus, gold_set, plan, required(apply, F, "apply")?)
    })
    .or_raise();
    TableIterator::new(std::iter::once(row))
}

/// Put back the settings the latest applied, not yet reverted tuning of `corpus` replaced
/// (through `corpus_alter`); returns that run's id.
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_tune_revert(corpus: Option<&str>) -> i64 {
    spi::pinned_search_path(|| {
        let corpus = required(corpus, "corpus_tune_revert", "corpus")?;
        spi::require_writable("corpus_tune_revert")?;
        let Some((run_id, previous)) = spi::eval::last_applied_tuning(corpus)? else {
            return Err(CoreError::new(
                SqlState::ObjectNotInPrerequisiteState,
                format!("corpus \"{corpus}\" has no applied tuning to revert"),
                "See SELECT id, applied, reverted_at FROM corpus.tune_runs WHERE corpus = ... ORDER BY id.",
            ));
        };
        spi::eval::apply_ranking(corpus, &previous)?;
        spi::eval::mark_reverted(run_id)?;
        Ok(run_id)
    })
    .or_raise()
}
