//! The only module that talks to SPI. Every query it runs was planned by the core
//! (`pg_corpus_core::plan`) or is a fixed catalog query; values always travel as parameters.

use std::collections::HashMap;
use std::ffi::CString;

use pg_corpus_core::fusion::Hit;
use pg_corpus_core::resolve::{self, Corpus};
use pg_corpus_core::sql::Param;
use pg_corpus_core::{CoreError, SqlState};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::{pg_sys, JsonB};

fn datums(params: &[Param]) -> Vec<DatumWithOid<'static>> {
    params
        .iter()
        .map(|p| match p {
            Param::Text(s) => DatumWithOid::from(s.clone()),
            Param::TextArray(v) => DatumWithOid::from(v.clone()),
            Param::Floats(v) => DatumWithOid::from(v.clone()),
            Param::Int(n) => DatumWithOid::from(*n),
            Param::Float(x) => DatumWithOid::from(*x),
        })
        .collect()
}

/// SPI failures that are not PostgreSQL errors (those propagate as themselves) are bugs of
/// ours; report them with a SQLSTATE that says so instead of a panic.
fn spi_failure(e: pgrx::spi::SpiError) -> CoreError {
    CoreError::new(
        SqlState::ObjectNotInPrerequisiteState,
        format!("pg_corpus internal query failed: {e}"),
        "This is a bug in pg_corpus; please report it with the statement that caused it.",
    )
}

/// Load and resolve a corpus definition from the catalog.
pub fn load_corpus(name: &str) -> Result<Corpus, CoreError> {
    let json: Option<JsonB> = Spi::connect(|client| {
        client
            .select("SELECT corpus._corpus_definition($1)", None, &[DatumWithOid::from(name)])?
            .first()
            .get_one::<JsonB>()
    })
    .map_err(spi_failure)?;
    let Some(JsonB(value)) = json else {
        return Err(CoreError::new(
            SqlState::UndefinedObject,
            format!("corpus \"{name}\" does not exist"),
            "See corpus.corpus_list() for the defined corpora.",
        ));
    };
    let def: resolve::CorpusDef = serde_json::from_value(value).map_err(|e| {
        CoreError::new(
            SqlState::ObjectNotInPrerequisiteState,
            format!("the definition of corpus \"{name}\" could not be read: {e}"),
            "The pg_corpus catalog and library versions may differ; run ALTER EXTENSION pg_corpus UPDATE.",
        )
    })?;
    resolve::resolve(&def)
}

/// Run a branch subplan of source number `source`: rows of (item_id, parent_id, raw score).
pub fn branch_hits(source: usize, sql: &str, params: &[Param]) -> Result<Vec<Hit>, CoreError> {
    Spi::connect(|client| {
        let table = client.select(sql, None, &datums(params))?;
        let mut hits = Vec::with_capacity(table.len());
        for row in table {
            let item_id: Option<String> = row.get(1)?;
            let parent_id: Option<String> = row.get(2)?;
            let raw: Option<f64> = row.get(3)?;
            if let (Some(item_id), Some(raw)) = (item_id, raw) {
                hits.push(Hit { source, item_id, parent_id: parent_id.unwrap_or_default(), raw });
            }
        }
        Ok(hits)
    })
    .map_err(spi_failure)
}

/// The planner's row estimate of a query, planned with its parameter values (a custom plan)
/// but not executed. This is what EXPLAIN does; EXPLAIN itself is refused inside a STABLE
/// function, so we call the parser and planner directly.
pub fn estimated_rows(sql: &str, params: &[Param]) -> Result<f64, CoreError> {
    let csql = CString::new(sql).map_err(|_| {
        CoreError::new(
            SqlState::ObjectNotInPrerequisiteState,
            "pg_corpus planned a query containing a NUL byte",
            "This is a bug in pg_corpus; please report it.",
        )
    })?;
    let datums = datums(params);
    let types: Vec<pg_sys::Oid> = datums.iter().map(|d| d.oid()).collect();
    unsafe {
        let raw_list = pg_sys::pg_parse_query(csql.as_ptr());
        let raw = pg_sys::list_nth(raw_list, 0).cast::<pg_sys::RawStmt>();
        let queries = pg_sys::pg_analyze_and_rewrite_fixedparams(
            raw,
            csql.as_ptr(),
            types.as_ptr(),
            types.len() as i32,
            std::ptr::null_mut(),
        );
        let query = pg_sys::list_nth(queries, 0).cast::<pg_sys::Query>();
        let bound = pg_sys::makeParamList(datums.len() as i32);
        let slots = (*bound).params.as_mut_slice(datums.len());
        for (slot, d) in slots.iter_mut().zip(&datums) {
            let value = d.datum().map(|v| v.sans_lifetime());
            *slot = pg_sys::ParamExternData {
                value: value.unwrap_or(pg_sys::Datum::from(0)),
                isnull: value.is_none(),
                pflags: pg_sys::PARAM_FLAG_CONST as u16,
                ptype: d.oid(),
            };
        }
        let stmt = pg_sys::pg_plan_query(query, csql.as_ptr(), 0, bound);
        Ok((*(*stmt).planTree).plan_rows)
    }
}

/// `pg_class.reltuples` of a table (negative when never analysed).
pub fn reltuples(oid: i64) -> Result<f64, CoreError> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT reltuples::float8 FROM pg_catalog.pg_class WHERE oid = $1::oid",
                None,
                &[DatumWithOid::from(oid)],
            )?
            .first()
            .get_one::<f64>()
    })
    .map(|v| v.unwrap_or(-1.0))
    .map_err(spi_failure)
}

pub struct FetchedRow {
    pub item_id: String,
    pub content: Option<String>,
    pub locator: serde_json::Value,
    pub metadata: serde_json::Value,
    /// The item is queued for re-embedding (its embedding is missing or stale).
    pub stale: bool,
}

/// Fetch the final rows of one source.
pub fn fetch_rows(sql: &str, params: &[Param]) -> Result<Vec<FetchedRow>, CoreError> {
    Spi::connect(|client| {
        let table = client.select(sql, None, &datums(params))?;
        let mut rows = Vec::with_capacity(table.len());
        for row in table {
            let Some(item_id) = row.get::<String>(1)? else {
                continue;
            };
            rows.push(FetchedRow {
                item_id,
                content: row.get::<String>(2)?,
                locator: row.get::<JsonB>(3)?.map_or(serde_json::Value::Null, |j| j.0),
                metadata: row.get::<JsonB>(4)?.map_or(serde_json::Value::Null, |j| j.0),
                stale: row.get::<bool>(5)?.unwrap_or(false),
            });
        }
        Ok(rows)
    })
    .map_err(spi_failure)
}

/// An item feedback learns from: its embedding (if any) and its index terms' frequencies.
pub struct FeedbackDoc {
    pub embedding: Option<Vec<f32>>,
    pub tf: std::collections::BTreeMap<String, f64>,
}

/// Run a plan::feedback_fetch query: item id → what feedback learns from it.
pub fn feedback_docs(sql: &str, params: &[Param]) -> Result<HashMap<String, FeedbackDoc>, CoreError> {
    let mut out = HashMap::new();
    for row in query_json(sql, params)? {
        let Some(id) = row.get("item_id").and_then(serde_json::Value::as_str) else { continue };
        let embedding = row
            .get("embedding")
            .and_then(serde_json::Value::as_array)
            .map(|a| a.iter().map(|x| x.as_f64().unwrap_or(0.0) as f32).collect());
        let tf = row
            .get("tf")
            .and_then(serde_json::Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(0.0))).collect())
            .unwrap_or_default();
        out.insert(id.to_string(), FeedbackDoc { embedding, tf });
    }
    Ok(out)
}

/// Run `f` with `search_path = pg_catalog, pg_temp`: the SQL pg_corpus generates names its own
/// and pgvector's objects schema-qualified and relies on built-in operators (`=`, `@@`, casts),
/// which a caller's search_path must not be able to replace (a hostile `public.=` could
/// otherwise widen the corpus predicate). Every SQL-visible entry point runs under it.
pub fn pinned_search_path<T>(f: impl FnOnce() -> T) -> T {
    with_settings(&[("search_path", "pg_catalog, pg_temp".to_string())], f)
}

/// Run `f` with configuration settings changed, and restore them afterwards — the mechanism
/// PostgreSQL itself uses for a function's `SET` clause, so nothing leaks into the caller's
/// session or transaction (an error rolls the nest level back with the transaction).
pub fn with_settings<T>(settings: &[(&str, String)], f: impl FnOnce() -> T) -> T {
    let nest = unsafe { pg_sys::NewGUCNestLevel() };
    for (name, value) in settings {
        let (Ok(name), Ok(value)) = (CString::new(*name), CString::new(value.as_str())) else {
            continue;
        };
        unsafe {
            pg_sys::set_config_option(
                name.as_ptr(),
                value.as_ptr(),
                pg_sys::GucContext::PGC_USERSET,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_SAVE,
                true,
                0,
                false,
            );
        }
    }
    let out = f();
    unsafe { pg_sys::AtEOXact_GUC(true, nest) };
    out
}

// ---------------------------------------------------------------------------------------------
// Evaluation harness
// ---------------------------------------------------------------------------------------------

pub struct GoldQuery {
    pub id: String,
    pub text: Option<String>,
    pub vector: Option<Vec<f32>>,
    pub filters: serde_json::Value,
}

pub struct GoldSet {
    pub name: String,
    pub corpus: String,
    pub level: String,
    pub queries: Vec<GoldQuery>,
    /// query id → target → grade
    pub judgments: HashMap<String, HashMap<String, i32>>,
}

pub fn load_gold_set(name: &str) -> Result<GoldSet, CoreError> {
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
            "SELECT query_id, query_text, query_vec::real[], filters FROM corpus.gold_queries \
             WHERE gold_set = $1 ORDER BY query_id",
            None,
            &[DatumWithOid::from(name)],
        )? {
            queries.push(GoldQuery {
                id: row.get::<String>(1)?.unwrap_or_default(),
                text: row.get::<String>(2)?,
                vector: row.get::<Vec<f32>>(3)?,
                filters: row.get::<JsonB>(4)?.map_or(serde_json::json!({}), |j| j.0),
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
        Ok(Some(GoldSet { name: name.to_string(), corpus, level, queries, judgments }))
    })
    .map_err(spi_failure)?;
    found.ok_or_else(|| {
        CoreError::new(
            SqlState::UndefinedObject,
            format!("gold set \"{name}\" does not exist"),
            "Create it with corpus.corpus_gold_set_create, or see SELECT name FROM corpus.gold_sets.",
        )
    })
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

/// Run a read-only query and return its rows as JSON objects (column name → value).
pub fn query_json(sql: &str, params: &[Param]) -> Result<Vec<serde_json::Value>, CoreError> {
    Spi::connect(|client| {
        let wrapped = format!("SELECT to_jsonb(q) FROM ({sql}) AS q");
        let mut rows = Vec::new();
        for row in client.select(&wrapped, None, &datums(params))? {
            if let Some(JsonB(v)) = row.get::<JsonB>(1)? {
                rows.push(v);
            }
        }
        Ok(rows)
    })
    .map_err(spi_failure)
}

/// Names of all corpora, or of the one named (42704 when it does not exist).
pub fn load_corpus_names(only: Option<&str>) -> Result<Vec<String>, CoreError> {
    let names: Vec<String> = Spi::connect(|client| {
        let mut names = Vec::new();
        for row in client.select(
            "SELECT name FROM corpus.corpora WHERE $1::text IS NULL OR name = $1 ORDER BY name",
            None,
            &[DatumWithOid::from(only)],
        )? {
            if let Some(n) = row.get::<String>(1)? {
                names.push(n);
            }
        }
        Ok(names)
    })
    .map_err(spi_failure)?;
    match only {
        Some(name) if names.is_empty() => Err(CoreError::new(
            SqlState::UndefinedObject,
            format!("corpus \"{name}\" does not exist"),
            "See corpus.corpus_list() for the defined corpora, or call corpus_health_check() without an argument.",
        )),
        _ => Ok(names),
    }
}

// ---------------------------------------------------------------------------------------------
// Lexical statistics
// ---------------------------------------------------------------------------------------------

/// Where a corpus' lexical statistics stand.
pub struct LexicalState {
    pub refreshed: bool,
    pub documents: i64,
    pub terms: i64,
    pub total_length: i64,
    pub changes_at_refresh: i64,
    /// Inserted + updated + deleted rows of the corpus' tables now (pg_stat_all_tables).
    pub changes_now: i64,
    /// The database's statistics were reset since the refresh.
    pub reset_since: bool,
}

impl LexicalState {
    /// Stale when never refreshed, or when more rows changed since than `fraction` of the
    /// documents (at least one).
    pub fn is_stale(&self, fraction: f64) -> bool {
        !self.refreshed
            || self.counters_reset()
            || (self.changes_now - self.changes_at_refresh) as f64 > (fraction * self.documents as f64).max(0.5)
    }

    /// The statistics counters went backwards (reset, crash recovery, restored backup): the
    /// changes since the refresh cannot be known.
    pub fn counters_reset(&self) -> bool {
        self.refreshed && (self.reset_since || self.changes_now < self.changes_at_refresh)
    }
}

pub fn lexical_state(corpus: &str, tables: &[i64]) -> Result<LexicalState, CoreError> {
    let rows = query_json(
        "SELECT (SELECT to_jsonb(t) FROM corpus.lexical_totals t WHERE t.corpus = $1) AS totals,
                (SELECT t.stats_reset_at IS DISTINCT FROM pg_catalog.pg_stat_get_db_stat_reset_time(
                            (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database()))
                   FROM corpus.lexical_totals t WHERE t.corpus = $1) AS reset_since,
                -- flushed counters, plus this transaction's own changes (flushed at its commit)
                (SELECT coalesce(sum(s.n_tup_ins + s.n_tup_upd + s.n_tup_del
                                     + pg_catalog.pg_stat_get_xact_tuples_inserted(s.relid)
                                     + pg_catalog.pg_stat_get_xact_tuples_updated(s.relid)
                                     + pg_catalog.pg_stat_get_xact_tuples_deleted(s.relid)), 0)::int8
                   FROM pg_catalog.pg_stat_all_tables s WHERE s.relid = ANY($2::int8[]::oid[])) AS changes_now",
        &[Param::Text(corpus.to_string()), Param::TextArray(tables.iter().map(|t| t.to_string()).collect())],
    )?;
    let row = rows.into_iter().next().unwrap_or(serde_json::Value::Null);
    let totals = row.get("totals").filter(|t| !t.is_null());
    let num = |k: &str| totals.and_then(|t| t.get(k)).and_then(serde_json::Value::as_i64).unwrap_or(0);
    Ok(LexicalState {
        refreshed: totals.is_some(),
        documents: num("documents"),
        terms: num("terms"),
        total_length: num("total_length"),
        changes_at_refresh: num("changes_at_refresh"),
        changes_now: row.get("changes_now").and_then(serde_json::Value::as_i64).unwrap_or(0),
        reset_since: row.get("reset_since").and_then(serde_json::Value::as_bool).unwrap_or(false),
    })
}

/// Replace a corpus' statistics with the result of `stats_sql` (plan::lexical_stats_sql), then
/// its champion lists with the results of `champions` (source name, plan::lexical_champions_sql),
/// which read the statistics just written.
pub fn refresh_lexical_stats(
    corpus: &str,
    stats_sql: &str,
    params: &[Param],
    changes: i64,
    champions: &[(String, String, Vec<Param>)],
) -> Result<(i64, i64), CoreError> {
    let n = params.len();
    let mut all = params.to_vec();
    all.push(Param::Text(corpus.to_string()));
    all.push(Param::Int(changes));
    let name = format!("${}", n + 1);
    let changes_p = format!("${}", n + 2);
    Spi::connect_mut(|client| {
        client.update("DELETE FROM corpus.lexical_stats WHERE corpus = $1", None, &[DatumWithOid::from(corpus)])?;
        let row = client
            .update(
                &format!(
                    "WITH s AS MATERIALIZED ({stats_sql}),
                          ins AS (INSERT INTO corpus.lexical_stats (corpus, term, df)
                                  SELECT {name}::text, term, df FROM s WHERE term IS NOT NULL RETURNING 1),
                          tot AS (INSERT INTO corpus.lexical_totals AS t
                                      (corpus, documents, total_length, terms, refreshed_at, changes_at_refresh,
                                       stats_reset_at)
                                  SELECT {name}::text, s.df, s.total_len, (SELECT count(*) FROM ins), now(), {changes_p}::int8,
                                         pg_catalog.pg_stat_get_db_stat_reset_time(
                                             (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database()))
                                    FROM s WHERE s.term IS NULL
                                  ON CONFLICT (corpus) DO UPDATE
                                     SET documents = EXCLUDED.documents, total_length = EXCLUDED.total_length,
                                         terms = EXCLUDED.terms, refreshed_at = EXCLUDED.refreshed_at,
                                         changes_at_refresh = EXCLUDED.changes_at_refresh,
                                         stats_reset_at = EXCLUDED.stats_reset_at
                                  RETURNING documents, terms)
                     SELECT documents, terms FROM tot"
                ),
                None,
                &datums(&all),
            )?
            .first()
            .get_two::<i64, i64>()?;
        client.update("DELETE FROM corpus.lexical_champions WHERE corpus = $1", None, &[DatumWithOid::from(corpus)])?;
        for (source, sql, params) in champions {
            let mut all = params.to_vec();
            all.push(Param::Text(corpus.to_string()));
            all.push(Param::Text(source.clone()));
            client.update(
                &format!(
                    "INSERT INTO corpus.lexical_champions (corpus, source, term, items, impacts)
                     SELECT ${}::text, ${}::text, c.term, c.items, c.impacts FROM ({sql}) AS c",
                    params.len() + 1,
                    params.len() + 2
                ),
                None,
                &datums(&all),
            )?;
        }
        Ok((row.0.unwrap_or(0), row.1.unwrap_or(0)))
    })
    .map_err(spi_failure)
}

/// Forget a corpus' statistics (it has no source left).
pub fn clear_lexical_stats(corpus: &str) -> Result<(), CoreError> {
    Spi::connect_mut(|client| {
        client.update("DELETE FROM corpus.lexical_stats WHERE corpus = $1", None, &[DatumWithOid::from(corpus)])?;
        client.update("DELETE FROM corpus.lexical_totals WHERE corpus = $1", None, &[DatumWithOid::from(corpus)])?;
        client.update("DELETE FROM corpus.lexical_champions WHERE corpus = $1", None, &[DatumWithOid::from(corpus)])?;
        Ok(())
    })
    .map_err(spi_failure)
}

/// Document frequencies of `terms` in a corpus' statistics, with its totals.
pub fn lexical_stats(corpus: &str, terms: &[String]) -> Result<(HashMap<String, u64>, i64, i64), CoreError> {
    let rows = query_json(
        "SELECT term, df FROM corpus.lexical_stats WHERE corpus = $1 AND term = ANY($2::text[])
         UNION ALL
         SELECT NULL, documents FROM corpus.lexical_totals WHERE corpus = $1
         UNION ALL
         SELECT '', total_length FROM corpus.lexical_totals WHERE corpus = $1",
        &[Param::Text(corpus.to_string()), Param::TextArray(terms.to_vec())],
    )?;
    let mut df = HashMap::new();
    let (mut documents, mut total) = (0, 0);
    for r in rows {
        let n = r.get("df").and_then(serde_json::Value::as_i64).unwrap_or(0);
        match r.get("term").and_then(serde_json::Value::as_str) {
            None => documents = n,
            Some("") => total = n,
            Some(t) => {
                df.insert(t.to_string(), n.max(0) as u64);
            }
        }
    }
    Ok((df, documents, total))
}

/// The first `n` items and impacts of a source's champion lists for `terms` (those the caller
/// may read: row-level security), as (term, items, impacts).
pub fn champion_heads(
    corpus: &str,
    source: &str,
    terms: &[String],
    n: u64,
) -> Result<Vec<(String, Vec<String>, Vec<f64>)>, CoreError> {
    Spi::connect(|client| {
        let rows = client.select(
            "SELECT term, items[1:$4], impacts[1:$4] FROM corpus.lexical_champions
              WHERE corpus = $1 AND source = $2 AND term = ANY($3)",
            None,
            &[
                DatumWithOid::from(corpus),
                DatumWithOid::from(source),
                DatumWithOid::from(terms.to_vec()),
                DatumWithOid::from(n.min(i32::MAX as u64) as i32),
            ],
        )?;
        let mut out = Vec::new();
        for row in rows {
            let term = row.get::<String>(1)?.unwrap_or_default();
            let items: Vec<String> =
                row.get::<Vec<Option<String>>>(2)?.unwrap_or_default().into_iter().flatten().collect();
            let impacts: Vec<f64> =
                row.get::<Vec<Option<f64>>>(3)?.unwrap_or_default().into_iter().map(|x| x.unwrap_or(0.0)).collect();
            out.push((term, items, impacts));
        }
        Ok(out)
    })
    .map_err(spi_failure)
}

/// PostgreSQL's analysis of a query with a text search configuration: (lexeme, count).
pub fn ts_query_keys(ts_config: i64, text: &str) -> Result<Vec<(String, f64)>, CoreError> {
    Ok(query_json(
        "SELECT t.lexeme AS key, coalesce(array_length(t.positions, 1), 1)::float8 AS weight
           FROM unnest(to_tsvector($1::int8::oid::regconfig, $2)) AS t",
        &[Param::Int(ts_config), Param::Text(text.to_string())],
    )?
    .into_iter()
    .filter_map(|r| Some((r.get("key")?.as_str()?.to_string(), r.get("weight")?.as_f64()?)))
    .collect())
}

/// The settings that change rankings, as the session has them now.
pub fn ranking_settings() -> Result<serde_json::Value, CoreError> {
    Ok(query_json(
        "SELECT jsonb_object_agg(name, setting) AS settings FROM pg_catalog.pg_settings
          WHERE name LIKE 'pg\\_corpus.%' OR name IN ('hnsw.ef_search', 'hnsw.iterative_scan')",
        &[],
    )?
    .into_iter()
    .next()
    .and_then(|r| r.get("settings").cloned())
    .unwrap_or(serde_json::Value::Null))
}

/// The catalog's definition of a corpus, as stored (for evaluation runs).
pub fn corpus_definition_json(corpus: &str) -> Result<serde_json::Value, CoreError> {
    Ok(query_json(
        "SELECT to_jsonb(l) AS def FROM corpus.corpus_list() l WHERE l.name = $1",
        &[Param::Text(corpus.to_string())],
    )?
    .into_iter()
    .next()
    .and_then(|r| r.get("def").cloned())
    .unwrap_or(serde_json::Value::Null))
}
