//! Evaluation storage: gold sets, runs and their per-query results.

use std::collections::HashMap;

use pg_corpus_core::{CoreError, SqlState};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::JsonB;

use crate::jsonb::JsonbText;

use super::spi_failure;

pub struct GoldQuery {
    pub id: String,
    pub text: Option<String>,
    pub vector: Option<Vec<f32>>,
    pub filters: serde_json::Value,
    /// Its stored `extra_queries` (Null: none), the search argument's format.
    pub extra_queries: serde_json::Value,
}

/// A gold query as read, its filters and extra queries not parsed yet (their nesting is
/// bounded when they are).
struct GoldQueryRow {
    query: GoldQuery,
    filters: Option<JsonbText>,
    extra_queries: Option<JsonbText>,
}

pub struct GoldSet {
    pub name: String,
    pub corpus: String,
    pub level: String,
    pub queries: Vec<GoldQuery>,
    /// query id → target → grade
    pub judgments: HashMap<String, HashMap<String, i32>>,
}

/// A gold set with its queries and judgments; the queries' stored extra queries only when
/// `with_extra_queries` (the column is new in 0.3.0: a database still at 0.2.0 calling this
/// library through its old `corpus_evaluate` has none).
pub fn load_gold_set(name: &str, with_extra_queries: bool) -> Result<GoldSet, CoreError> {
    let found = Spi::connect(|client| {
        let head = client
            .select(
                // one row even when the set does not exist
                "SELECT (SELECT corpus FROM corpus.gold_sets WHERE name = $1), \
                        (SELECT level FROM corpus.gold_sets WHERE name = $1)",
                None,
                &[DatumWithOid::from(name)],
            )?
            .first()
            .get_two::<String, String>()?;
        let (Some(corpus), Some(level)) = head else {
            return Ok(None);
        };
        let mut queries = Vec::new();
        for row in client.select(
            if with_extra_queries {
                "SELECT query_id, query_text, query_vec::real[], filters, extra_queries FROM corpus.gold_queries \
                 WHERE gold_set = $1 ORDER BY query_id"
            } else {
                "SELECT query_id, query_text, query_vec::real[], filters, NULL::jsonb FROM corpus.gold_queries \
                 WHERE gold_set = $1 ORDER BY query_id"
            },
            None,
            &[DatumWithOid::from(name)],
        )? {
            queries.push(GoldQueryRow {
                query: GoldQuery {
                    id: row.get::<String>(1)?.unwrap_or_default(),
                    text: row.get::<String>(2)?,
                    vector: row.get::<Vec<f32>>(3)?,
                    filters: serde_json::json!({}),
                    extra_queries: serde_json::Value::Null,
                },
                filters: row.get::<JsonbText>(4)?,
                extra_queries: row.get::<JsonbText>(5)?,
            });
        }
        let mut judgments: HashMap<String, HashMap<String, i32>> = HashMap::new();
        for row in client.select(
            "SELECT query_id, target, grade FROM corpus.gold_judgments WHERE gold_set = $1",
            None,
            &[DatumWithOid::from(name)],
        )? {
            if let (Some(q), Some(t), Some(g)) = (row.get::<String>(1)?, row.get::<String>(2)?, row.get::<i32>(3)?) {
                judgments.entry(q).or_default().insert(t, g);
            }
        }
        Ok(Some((corpus, level, queries, judgments)))
    })
    .map_err(spi_failure)?;
    let Some((corpus, level, rows, judgments)) = found else {
        return Err(CoreError::new(
            SqlState::UndefinedObject,
            format!("gold set \"{name}\" does not exist"),
            "Create it with corpus.corpus_gold_set_create, or see SELECT name FROM corpus.gold_sets.",
        ));
    };
    let mut queries = Vec::with_capacity(rows.len());
    for GoldQueryRow { mut query, filters, extra_queries } in rows {
        if let Some(f) = filters {
            query.filters = f.parse(&format!("the filters of gold query {}", query.id))?;
        }
        if let Some(e) = extra_queries {
            query.extra_queries = e.parse(&format!("the extra queries of gold query {}", query.id))?;
        }
        queries.push(query);
    }
    Ok(GoldSet { name: name.to_string(), corpus, level, queries, judgments })
}

/// The current time as text (kept as text: it only goes back into a timestamptz column).
pub fn clock_timestamp() -> Result<String, CoreError> {
    Spi::connect(|client| client.select("SELECT clock_timestamp()::text", None, &[])?.first().get_one::<String>())
        .map(Option::unwrap_or_default)
        .map_err(spi_failure)
}

pub fn store_run(
    gold: &GoldSet,
    mode: &str,
    k: i32,
    params: serde_json::Value,
    started: &str,
    agg: &pg_corpus_core::metrics::QueryMetrics,
    per_query: &[(String, pg_corpus_core::metrics::QueryMetrics, Vec<String>)],
) -> Result<i64, CoreError> {
    let rows: Vec<serde_json::Value> = per_query
        .iter()
        .map(|(q, m, ranking)| {
            serde_json::json!({
                "query_id": q, "hits": m.hits, "relevant": m.relevant, "precision_at_k": m.precision,
                "recall_at_k": m.recall, "mrr": m.mrr, "ndcg_at_k": m.ndcg, "ranking": ranking,
            })
        })
        .collect();
    let version = format!("{} (library {})", extension_version()?, env!("CARGO_PKG_VERSION"));
    Spi::connect_mut(|client| {
        let id = client
            .update(
                "INSERT INTO corpus.eval_runs (gold_set, corpus, mode, k, params, extension_version, started_at, \
                 queries, precision_at_k, recall_at_k, mrr, ndcg_at_k) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7::timestamptz, $8, $9, $10, $11, $12) RETURNING id",
                None,
                &[
                    DatumWithOid::from(gold.name.as_str()),
                    DatumWithOid::from(gold.corpus.as_str()),
                    DatumWithOid::from(mode),
                    DatumWithOid::from(k),
                    DatumWithOid::from(JsonB(params)),
                    DatumWithOid::from(version.as_str()),
                    DatumWithOid::from(started),
                    DatumWithOid::from(per_query.len() as i32),
                    DatumWithOid::from(agg.precision),
                    DatumWithOid::from(agg.recall),
                    DatumWithOid::from(agg.mrr),
                    DatumWithOid::from(agg.ndcg),
                ],
            )?
            .first()
            .get_one::<i64>()?
            .unwrap_or_default();
        client.update(
            "INSERT INTO corpus.eval_query_results (run_id, query_id, hits, relevant, precision_at_k, \
             recall_at_k, mrr, ndcg_at_k, ranking) \
             SELECT $1, r.query_id, r.hits, r.relevant, r.precision_at_k, r.recall_at_k, r.mrr, r.ndcg_at_k, r.ranking \
               FROM jsonb_to_recordset($2) AS r(query_id text, hits int, relevant int, precision_at_k float8, \
                    recall_at_k float8, mrr float8, ndcg_at_k float8, ranking text[])",
            None,
            &[DatumWithOid::from(id), DatumWithOid::from(JsonB(serde_json::Value::Array(rows)))],
        )?;
        Ok(id)
    })
    .map_err(spi_failure)
}

fn extension_version() -> Result<String, CoreError> {
    Spi::connect(|client| {
        client
            .select("SELECT extversion::text FROM pg_catalog.pg_extension WHERE extname = 'pg_corpus'", None, &[])?
            .first()
            .get_one::<String>()
    })
    .map(Option::unwrap_or_default)
    .map_err(spi_failure)
}

pub struct Run {
    pub gold_set: String,
    pub per_query: HashMap<String, pg_corpus_core::metrics::QueryMetrics>,
}

pub fn load_run(id: i64) -> Result<Run, CoreError> {
    let found = Spi::connect(|client| {
        let gold_set = client
            .select("SELECT (SELECT gold_set FROM corpus.eval_runs WHERE id = $1)", None, &[DatumWithOid::from(id)])?
            .first()
            .get_one::<String>()?;
        let Some(gold_set) = gold_set else {
            return Ok(None);
        };
        let mut per_query = HashMap::new();
        for row in client.select(
            "SELECT query_id, hits, relevant, precision_at_k, recall_at_k, mrr, ndcg_at_k \
             FROM corpus.eval_query_results WHERE run_id = $1",
            None,
            &[DatumWithOid::from(id)],
        )? {
            let q = row.get::<String>(1)?.unwrap_or_default();
            per_query.insert(
                q,
                pg_corpus_core::metrics::QueryMetrics {
                    hits: row.get::<i32>(2)?.unwrap_or(0) as usize,
                    relevant: row.get::<i32>(3)?.unwrap_or(0) as usize,
                    precision: row.get::<f64>(4)?.unwrap_or(0.0),
                    recall: row.get::<f64>(5)?.unwrap_or(0.0),
                    mrr: row.get::<f64>(6)?.unwrap_or(0.0),
                    ndcg: row.get::<f64>(7)?.unwrap_or(0.0),
                },
            );
        }
        Ok(Some(Run { gold_set, per_query }))
    })
    .map_err(spi_failure)?;
    found.ok_or_else(|| {
        CoreError::new(
            SqlState::UndefinedObject,
            format!("evaluation run {id} does not exist"),
            "See SELECT id, gold_set, mode, ndcg_at_k FROM corpus.eval_runs ORDER BY id.",
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Generic reads (health checks)
// ---------------------------------------------------------------------------------------------

/// The settings that change rankings, as the session has them now.
pub fn ranking_settings() -> Result<serde_json::Value, CoreError> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT jsonb_object_agg(name, setting) FROM pg_catalog.pg_settings
                  WHERE name LIKE 'pg\\_corpus.%' OR name IN ('hnsw.ef_search', 'hnsw.iterative_scan')",
                None,
                &[],
            )?
            .first()
            .get_one::<JsonbText>()
    })
    .map_err(spi_failure)?
    .map_or(Ok(serde_json::Value::Null), |j| j.parse("the ranking settings"))
}

/// The catalog's definition of a corpus, as stored (for evaluation runs).
pub fn corpus_definition_json(corpus: &str) -> Result<serde_json::Value, CoreError> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT to_jsonb(l) FROM corpus.corpus_list() l WHERE l.name = $1",
                None,
                &[DatumWithOid::from(corpus)],
            )?
            .first()
            .get_one::<JsonbText>()
    })
    .map_err(spi_failure)?
    .map_or(Ok(serde_json::Value::Null), |j| j.parse("the corpus definition"))
}

/// Store calibrated vector thresholds of one embedding space in a corpus' evidence settings,
/// through corpus_alter (its privileges and its validation).
pub fn store_vector_thresholds(
    corpus: &str,
    space: &str,
    t: &pg_corpus_core::model::VectorThresholds,
) -> Result<(), CoreError> {
    Spi::connect_mut(|client| {
        let current = client
            .select("SELECT evidence FROM corpus.corpora WHERE name = $1", None, &[DatumWithOid::from(corpus)])?
            .first()
            .get_one::<JsonbText>()?;
        Ok::<_, pgrx::spi::SpiError>(current)
    })
    .map_err(spi_failure)
    .and_then(|current| {
        let current = match current {
            Some(j) => j.parse("the corpus' evidence settings")?,
            None => serde_json::Value::Null,
        };
        let next = pg_corpus_core::evidence::with_thresholds(&current, space, t);
        Spi::connect_mut(|client| {
            client.update(
                "SELECT corpus.corpus_alter($1, evidence => $2::text::jsonb)",
                None,
                &[DatumWithOid::from(corpus), DatumWithOid::from(next.to_string().as_str())],
            )?;
            Ok::<_, pgrx::spi::SpiError>(())
        })
        .map_err(spi_failure)
    })
}

// ---------------------------------------------------------------------------------------------
// Gold sets and per-query comparisons
// ---------------------------------------------------------------------------------------------

pub fn gold_set_exists(name: &str) -> bool {
    super::select_bool(
        "SELECT EXISTS (SELECT 1 FROM corpus.gold_sets g WHERE g.name = $1)",
        &[DatumWithOid::from(name)],
    )
}

pub fn insert_gold_set(name: &str, corpus: &str, level: &str, description: Option<&str>) -> Result<(), CoreError> {
    Spi::connect_mut(|client| {
        client
            .update(
                "INSERT INTO corpus.gold_sets (name, corpus, level, description) VALUES ($1, $2, $3, $4)",
                None,
                &[
                    DatumWithOid::from(name),
                    DatumWithOid::from(corpus),
                    DatumWithOid::from(level),
                    DatumWithOid::from(description),
                ],
            )
            .map(drop)
    })
    .map_err(spi_failure)
}

/// Per query of both runs: (query id, value in A, value in B, B - A) of one metric, in order of
/// the difference, then query id.
pub fn compare_queries(
    run_a: i64,
    run_b: i64,
    metric: pg_corpus_core::metrics::Metric,
) -> Result<Vec<(Option<String>, Option<f64>, Option<f64>, Option<f64>)>, CoreError> {
    let col = metric.column();
    let sql = format!(
        "SELECT a.query_id, a.{col}, b.{col}, b.{col} - a.{col}
           FROM corpus.eval_query_results a
           JOIN corpus.eval_query_results b ON b.query_id = a.query_id AND b.run_id = $2
          WHERE a.run_id = $1
          ORDER BY b.{col} - a.{col}, a.query_id"
    );
    Spi::connect(|client| {
        let mut out = Vec::new();
        for row in client.select(&sql, None, &[DatumWithOid::from(run_a), DatumWithOid::from(run_b)])? {
            out.push((row.get::<String>(1)?, row.get::<f64>(2)?, row.get::<f64>(3)?, row.get::<f64>(4)?));
        }
        Ok(out)
    })
    .map_err(spi_failure)
}

/// Store ranking settings (`corpus_alter`'s `ranking` shape) through `corpus_alter`, so that only
/// a role that may change the corpus can and the definition is checked as for any change.
pub fn apply_ranking(corpus: &str, settings: &serde_json::Value) -> Result<(), CoreError> {
    let text = settings.to_string();
    Spi::connect_mut(|client| {
        client.update(
            "SELECT corpus.corpus_alter($1, ranking => $2::text::jsonb)",
            None,
            &[DatumWithOid::from(corpus), DatumWithOid::from(text.as_str())],
        )?;
        Ok::<_, pgrx::spi::SpiError>(())
    })
    .map_err(spi_failure)
}

/// One `corpus_tune` run as corpus.tune_runs keeps it.
pub struct TuneRun<'a> {
    pub gold_set: &'a str,
    pub corpus: &'a str,
    pub started_at: &'a str,
    pub queries: i32,
    pub folds: i32,
    pub seed: i64,
    pub baseline: f64,
    pub tuned: f64,
    pub p_value: f64,
    pub settings: &'a serde_json::Value,
    pub previous: &'a serde_json::Value,
    pub fold_settings: &'a serde_json::Value,
    pub applied: bool,
}

pub fn store_tune_run(r: &TuneRun<'_>) -> Result<i64, CoreError> {
    let (settings, previous, folds) = (r.settings.to_string(), r.previous.to_string(), r.fold_settings.to_string());
    Spi::connect_mut(|client| {
        client
            .update(
                "INSERT INTO corpus.tune_runs (gold_set, corpus, started_at, queries, folds, seed, baseline_ndcg, \
                 tuned_ndcg, p_value, settings, previous, fold_settings, applied) \
                 VALUES ($1, $2, $3::timestamptz, $4, $5, $6, $7, $8, $9, $10::text::jsonb, $11::text::jsonb, \
                 $12::text::jsonb, $13) RETURNING id",
                None,
                &[
                    DatumWithOid::from(r.gold_set),
                    DatumWithOid::from(r.corpus),
                    DatumWithOid::from(r.started_at),
                    DatumWithOid::from(r.queries),
                    DatumWithOid::from(r.folds),
                    DatumWithOid::from(r.seed),
                    DatumWithOid::from(r.baseline),
                    DatumWithOid::from(r.tuned),
                    DatumWithOid::from(r.p_value),
                    DatumWithOid::from(settings.as_str()),
                    DatumWithOid::from(previous.as_str()),
                    DatumWithOid::from(folds.as_str()),
                    DatumWithOid::from(r.applied),
                ],
            )?
            .first()
            .get_one::<i64>()
    })
    .map_err(spi_failure)
    .map(Option::unwrap_or_default)
}

/// The latest applied, not reverted tuning of a corpus: its id and the settings it replaced.
pub fn last_applied_tuning(corpus: &str) -> Result<Option<(i64, serde_json::Value)>, CoreError> {
    let row = Spi::connect(|client| {
        let t = client.select(
            "SELECT id, previous::text FROM corpus.tune_runs \
              WHERE corpus = $1 AND applied AND reverted_at IS NULL ORDER BY id DESC LIMIT 1",
            None,
            &[DatumWithOid::from(corpus)],
        )?;
        if t.is_empty() {
            return Ok(None);
        }
        let row = t.first();
        Ok::<_, pgrx::spi::SpiError>(Some((row.get::<i64>(1)?, row.get::<String>(2)?)))
    })
    .map_err(spi_failure)?;
    match row {
        Some((Some(id), Some(previous))) => {
            Ok(Some((id, pg_corpus_core::json::parse(&previous, "the settings a tuning replaced")?)))
        }
        _ => Ok(None),
    }
}

pub fn mark_reverted(run_id: i64) -> Result<(), CoreError> {
    Spi::connect_mut(|client| {
        client.update(
            "UPDATE corpus.tune_runs SET reverted_at = clock_timestamp() WHERE id = $1",
            None,
            &[DatumWithOid::from(run_id)],
        )?;
        Ok::<_, pgrx::spi::SpiError>(())
    })
    .map_err(spi_failure)
}
