//! The search engine's executor over SPI (`pg_corpus_core::engine::Executor`).
//!
//! Settings: the engine says which settings each subplan needs; [`SpiExecutor`] changes only
//! what differs from what the previous subplan left (`engine::settings::Applied`), inside the
//! nest level the entry point opened ([`super::pinned_search_path`]), which restores them all
//! when the search ends. Planning facts that only change with ANALYZE or DDL (reltuples, slice
//! estimates) are memoised with the cached corpus definition ([`super::catalog::cached_fact`]).

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Arc;

use pg_corpus_core::engine::settings::Applied;
use pg_corpus_core::engine::{
    ChampionList, ChampionRequest, Executor, FeedbackDoc, FetchedRow, ItemKeysQuery, ItemsQuery, NeighboursQuery,
    SeedItem, SeedQuery, Setting, SliceQuery, SlotModels, TermStats,
};
use pg_corpus_core::lexical::QueryKey;
use pg_corpus_core::model::{Corpus, Hit};
use pg_corpus_core::plan::{self, Subplan};
use pg_corpus_core::sql::Param;
use pg_corpus_core::{CoreError, SqlState};
use pgrx::datum::DatumWithOid;
use pgrx::pg_sys;

use crate::jsonb::JsonbText;

use super::{access, catalog, datums, get_option, select_saved, set_option};

/// Runs one search's queries; created per call, inside [`super::pinned_search_path`].
pub struct SpiExecutor {
    corpus: String,
    applied: Applied,
    /// The corpus' definition, as the search loaded it (read once per call).
    definition: Option<Arc<Corpus>>,
}

impl SpiExecutor {
    pub fn new(corpus: &str) -> SpiExecutor {
        SpiExecutor { corpus: corpus.to_string(), applied: Applied::default(), definition: None }
    }

    /// Use the definition the caller loaded for this search.
    pub fn with_definition(&mut self, definition: Arc<Corpus>) {
        self.definition = Some(definition);
    }

    /// The corpus' definition: the one given, else loaded (once) from the backend's cache.
    fn definition(&mut self) -> Result<Arc<Corpus>, CoreError> {
        if let Some(d) = &self.definition {
            return Ok(d.clone());
        }
        let d = catalog::load_corpus(&self.corpus)?;
        self.definition = Some(d.clone());
        Ok(d)
    }

    /// Make `wanted` hold (and put back what the previous subplan changed and this one does
    /// not want).
    fn settle(&mut self, wanted: &[Setting]) {
        for s in self.applied.transition(wanted, get_option) {
            set_option(s.name, &s.value);
        }
    }

    /// [`Self::settle`] for a statement whose plan must follow its values: its saved plan is
    /// always a custom plan. The corpus predicate's values are parameters, and a plan shared
    /// by corpora of different sizes (after five runs PostgreSQL may switch a saved statement
    /// to a generic plan) read every item of a large table for an empty corpus: 1.7 → 40 ms
    /// in a session that had searched another corpus first (bench/scale.py).
    fn settle_custom(&mut self, wanted: &[Setting]) {
        self.settle_for(wanted, false);
    }

    /// [`Self::settle`] for a statement whose one plan serves every value of its parameters
    /// (`generic`, kept and not planned again: its saved plan is the generic one), else for one
    /// whose plan must follow its values ([`Self::settle_custom`]).
    fn settle_for(&mut self, wanted: &[Setting], generic: bool) {
        let mode = if generic { "force_generic_plan" } else { "force_custom_plan" };
        let mut all = wanted.to_vec();
        all.push(Setting { name: "plan_cache_mode", value: mode.to_string() });
        self.settle(&all);
    }

    /// [`Self::settle`] for a lookup of pg_corpus' own side tables by key (statistics, champion
    /// lists, query analysis): one plan serves every value, so its saved plan is always the
    /// generic one. Under `auto` PostgreSQL kept re-planning the statistics lookup (its
    /// `= ANY($2)` costs differently per array): a third of an empty corpus' search.
    fn settle_generic(&mut self) {
        self.settle(&[Setting { name: "plan_cache_mode", value: "force_generic_plan".to_string() }]);
    }
}

impl Executor for SpiExecutor {
    fn branch_hits(&mut self, plan: &Subplan, settings: &[Setting]) -> Result<Vec<Hit>, CoreError> {
        self.settle_for(settings, plan.generic);
        let source = plan.source;
        select_saved(&plan.sql, &datums(&plan.params), |table| {
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
    }

    fn estimate_rows(&mut self, q: &SliceQuery) -> Result<f64, CoreError> {
        let (sql, params) = (q.sql.as_str(), q.params.as_slice());
        self.settle(&[]);
        let key = fact_key("estimate", sql, params);
        if let Some(v) = catalog::cached_fact(&self.corpus, &key) {
            return Ok(v);
        }
        let v = estimated_rows(sql, params)?;
        catalog::remember_fact(&self.corpus, key, v);
        Ok(v)
    }

    fn count_rows(&mut self, q: &SliceQuery) -> Result<f64, CoreError> {
        let (sql, params) = (q.sql.as_str(), q.params.as_slice());
        // memoised like an estimate (it only chooses the semantic strategy of a distributed
        // source, and a stale count only keeps the previous choice)
        let key = fact_key("count", sql, params);
        if let Some(v) = catalog::cached_fact(&self.corpus, &key) {
            return Ok(v);
        }
        self.settle_custom(&[]);
        let v = select_saved(sql, &datums(params), |table| Ok(table.first().get_one::<f64>()?.unwrap_or(0.0)))?;
        catalog::remember_fact(&self.corpus, key, v);
        Ok(v)
    }

    fn served_by_partial_index(&mut self, plan: &Subplan, settings: &[Setting]) -> Result<bool, CoreError> {
        let key = fact_key("partial", &plan.sql, &plan.params);
        if let Some(v) = catalog::cached_fact(&self.corpus, &key) {
            return Ok(v > 0.0);
        }
        self.settle(settings);
        let v = uses_partial_hnsw(&plan.sql, &plan.params)?;
        catalog::remember_fact(&self.corpus, key, if v { 1.0 } else { 0.0 });
        Ok(v)
    }

    fn any_row(&mut self, q: &SliceQuery) -> Result<bool, CoreError> {
        self.settle_custom(&[]);
        select_saved(&q.sql, &datums(&q.params), |table| Ok(!table.is_empty()))
    }

    fn table_rows(&mut self, tables: &[i64]) -> Result<Vec<f64>, CoreError> {
        let key = |t: i64| format!("reltuples:{t}");
        let cached: Option<Vec<f64>> = tables.iter().map(|&t| catalog::cached_fact(&self.corpus, &key(t))).collect();
        if let Some(rows) = cached {
            return Ok(rows);
        }
        self.settle(&[]);
        let rows = reltuples(tables)?;
        for (&t, &n) in tables.iter().zip(&rows) {
            catalog::remember_fact(&self.corpus, key(t), n);
        }
        Ok(rows)
    }

    fn term_stats(&mut self, corpus: &str, terms: &[String]) -> Result<TermStats, CoreError> {
        self.settle_generic();
        access::check_may_read_statistics(&*self.definition()?)?;
        access::as_side_table_owner(|| super::stats::term_stats(corpus, terms))
    }

    fn champion_heads(
        &mut self,
        corpus: &str,
        requests: &[ChampionRequest],
    ) -> Result<Vec<Vec<ChampionList>>, CoreError> {
        self.settle_generic();
        // A list names items that hold a word: none for a source row-level security hides
        // rows of (its item or parent table) from the caller, whose own query then finds its
        // candidates through the index.
        let def = self.definition()?;
        let readable: Vec<bool> = requests
            .iter()
            .map(|r| {
                def.sources.iter().find(|s| s.name == r.source).is_some_and(|s| {
                    let tables: Vec<i64> =
                        std::iter::once(s.item.oid).chain(s.parent.as_ref().map(|p| p.oid)).collect();
                    !access::row_security_active(&tables)
                })
            })
            .collect();
        let asked: Vec<ChampionRequest> =
            requests.iter().zip(&readable).filter(|(_, &ok)| ok).map(|(r, _)| r.clone()).collect();
        let mut answers = if asked.is_empty() {
            Vec::new()
        } else {
            access::as_side_table_owner(|| super::stats::champion_heads(corpus, &asked))?
        }
        .into_iter();
        Ok(readable.iter().map(|&ok| if ok { answers.next().unwrap_or_default() } else { Vec::new() }).collect())
    }

    fn ts_query_keys(&mut self, ts_config: i64, text: &str) -> Result<Vec<QueryKey>, CoreError> {
        self.settle_generic();
        select_saved(
            "SELECT t.lexeme, coalesce(array_length(t.positions, 1), 1)::float8
               FROM unnest(to_tsvector($1::int8::oid::regconfig, $2)) AS t",
            &[DatumWithOid::from(ts_config), DatumWithOid::from(text)],
            |table| {
                let mut out = Vec::new();
                for row in table {
                    if let (Some(key), Some(weight)) = (row.get::<String>(1)?, row.get::<f64>(2)?) {
                        out.push(QueryKey { key, weight });
                    }
                }
                Ok(out)
            },
        )
    }

    fn seed_item(&mut self, q: &SeedQuery) -> Result<Option<SeedItem>, CoreError> {
        self.settle_custom(&[]);
        select_saved(&q.sql, &datums(&q.params), |table| {
            let Some(row) = table.into_iter().next() else { return Ok(None) };
            Ok(Some(SeedItem {
                item_id: row.get::<String>(1)?.unwrap_or_default(),
                parent_id: row.get::<String>(2)?,
                embedding: row.get::<Vec<f32>>(3)?,
                content: row.get::<String>(4)?,
            }))
        })
    }

    fn embedding_models(&mut self, columns: &[(i64, String)]) -> Result<Vec<SlotModels>, CoreError> {
        let tables: Vec<i64> = columns.iter().map(|c| c.0).collect();
        let names: Vec<String> = columns.iter().map(|c| c.1.clone()).collect();
        let rows = select_saved(EMBEDDING_MODELS, &[DatumWithOid::from(tables), DatumWithOid::from(names)], |table| {
            let mut out = Vec::new();
            for row in table {
                out.push((row.get::<String>(1)?, row.get::<JsonbText>(2)?));
            }
            Ok(out)
        })?;
        let mut out = Vec::with_capacity(rows.len());
        for (model, others) in rows {
            let others = match others {
                Some(j) => j.parse("embedding columns")?,
                None => serde_json::Value::Null,
            };
            let others = others
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|o| {
                    Some((o.get(0)?.as_str()?.to_string(), o.get(1).and_then(|m| m.as_str()).map(str::to_string)))
                })
                .collect();
            out.push(SlotModels { model, others });
        }
        Ok(out)
    }

    fn item_keys(&mut self, q: &ItemKeysQuery) -> Result<HashMap<String, Vec<String>>, CoreError> {
        self.settle_custom(&[]);
        select_saved(&q.sql, &datums(&q.params), |table| {
            let mut out = HashMap::new();
            for row in table {
                let Some(id) = row.get::<String>(1)? else { continue };
                let keys: Vec<String> =
                    row.get::<Vec<Option<String>>>(2)?.unwrap_or_default().into_iter().flatten().collect();
                out.insert(id, keys);
            }
            Ok(out)
        })
    }

    fn neighbours(&mut self, q: &NeighboursQuery) -> Result<Vec<(String, String, String)>, CoreError> {
        self.settle_custom(&[]);
        select_saved(&q.sql, &datums(&q.params), |table| {
            let mut out = Vec::new();
            for row in table {
                let (Some(seed), Some(id)) = (row.get::<String>(1)?, row.get::<String>(2)?) else { continue };
                out.push((seed, id, row.get::<String>(3)?.unwrap_or_default()));
            }
            Ok(out)
        })
    }

    fn feedback_docs(&mut self, q: &ItemsQuery) -> Result<HashMap<String, FeedbackDoc>, CoreError> {
        self.settle_for(&[], q.generic);
        let raw = select_saved(&q.sql, &datums(&q.params), |table| {
            let mut out = Vec::new();
            for row in table {
                let Some(id) = row.get::<String>(1)? else { continue };
                out.push((id, row.get::<Vec<f32>>(2)?, row.get::<JsonbText>(3)?));
            }
            Ok(out)
        })?;
        let mut out = HashMap::new();
        for (id, embedding, tf) in raw {
            let tf = match tf {
                Some(t) => t.parse("a feedback document's term counts")?,
                None => serde_json::Value::Null,
            };
            let tf = tf
                .as_object()
                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(0.0))).collect())
                .unwrap_or_default();
            out.insert(id, FeedbackDoc { embedding, tf });
        }
        Ok(out)
    }

    fn fetch_rows(&mut self, q: &ItemsQuery) -> Result<Vec<FetchedRow>, CoreError> {
        self.settle_for(&[], q.generic);
        let raw = select_saved(&q.sql, &datums(&q.params), |table| {
            let mut rows = Vec::with_capacity(table.len());
            for row in table {
                let Some(item_id) = row.get::<String>(1)? else {
                    continue;
                };
                rows.push((item_id, row.get::<String>(2)?, row.get::<JsonbText>(3)?, row.get::<JsonbText>(4)?));
            }
            Ok(rows)
        })?;
        let json = |j: Option<JsonbText>, what: &str| j.map_or(Ok(serde_json::Value::Null), |j| j.parse(what));
        raw.into_iter()
            .map(|(item_id, content, locator, metadata)| {
                Ok(FetchedRow {
                    locator: json(locator, &format!("the locator of item {item_id}"))?,
                    metadata: json(metadata, &format!("the metadata of item {item_id}"))?,
                    item_id,
                    content,
                })
            })
            .collect()
    }

    fn queued_items(&mut self, lookup: &plan::QueueLookup) -> Result<Vec<(usize, String)>, CoreError> {
        self.settle(&[]);
        let run = || {
            select_saved(&lookup.sql, &datums(&lookup.params), |table| {
                let mut out = Vec::new();
                for row in table {
                    if let (Some(source), Some(id)) = (row.get::<i32>(1)?, row.get::<String>(2)?) {
                        out.push((source.max(0) as usize, id));
                    }
                }
                Ok(out)
            })
        };
        if lookup.through_items {
            // (it reads the caller's item table: with the caller's rights, and on the shards
            // corpus._item_queued answers that caller)
            run()
        } else {
            // the ids are the caller's own hits: their queue state, whatever the caller may
            // read of the queue itself
            access::as_side_table_owner(run)
        }
    }
}

/// The key of a memoised planning fact: its kind, SQL text and parameters, less vectors (a
/// probe vector is constant per dimension and would only make every key 1024 floats long).
fn fact_key(kind: &str, sql: &str, params: &[Param]) -> String {
    let values: Vec<&Param> = params.iter().filter(|p| !matches!(p, Param::Floats(_))).collect();
    format!("{kind}:{sql}\u{0}{}", serde_json::to_string(&values).unwrap_or_default())
}

/// `pg_class.reltuples` of tables, in order (negative when never analysed): one round trip.
pub fn reltuples(tables: &[i64]) -> Result<Vec<f64>, CoreError> {
    let found: HashMap<i64, f64> = select_saved(
        "SELECT c.oid::int8, c.reltuples::float8 FROM pg_catalog.pg_class c WHERE c.oid = ANY($1::int8[]::oid[])",
        &[DatumWithOid::from(tables.to_vec())],
        |table| {
            let mut out = HashMap::new();
            for row in table {
                if let (Some(oid), Some(n)) = (row.get::<i64>(1)?, row.get::<f64>(2)?) {
                    out.insert(oid, n);
                }
            }
            Ok(out)
        },
    )?;
    Ok(tables.iter().map(|t| found.get(t).copied().unwrap_or(-1.0)).collect())
}

/// The planner's plan of a query pg_corpus built, planned with its parameter values (a custom
/// plan) but not executed. This is what EXPLAIN does; EXPLAIN itself is refused inside a STABLE
/// function, so we call the parser and planner directly.
fn plan_query(sql: &str, params: &[Param]) -> Result<*mut pg_sys::PlannedStmt, CoreError> {
    let csql = CString::new(sql).map_err(|_| {
        CoreError::new(
            SqlState::ObjectNotInPrerequisiteState,
            "pg_corpus planned a query containing a NUL byte",
            "This is a bug in pg_corpus; please report it.",
        )
    })?;
    let datums = datums(params);
    let types: Vec<pg_sys::Oid> = datums.iter().map(|d| d.oid()).collect();
    // SAFETY: the parser, analyser and planner on a query pg_corpus built; errors are
    // PostgreSQL errors and unwind through pg_guard. The plan lives in the current memory
    // context, which outlives the caller's use of it.
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
        Ok(pg_sys::pg_plan_query(query, csql.as_ptr(), 0, bound))
    }
}

/// The planner's row estimate of a query (planned, not run).
pub fn estimated_rows(sql: &str, params: &[Param]) -> Result<f64, CoreError> {
    let stmt = plan_query(sql, params)?;
    // SAFETY: a plan the planner just returned.
    Ok(unsafe { (*(*stmt).planTree).plan_rows })
}

/// The indexes a plan scans (index and index-only scans, through subquery scans).
///
/// # Safety
/// `plan` must be null or a plan tree the planner returned.
unsafe fn scanned_indexes(plan: *mut pg_sys::Plan, out: &mut Vec<i64>) {
    if plan.is_null() {
        return;
    }
    unsafe {
        match (*plan).type_ {
            pg_sys::NodeTag::T_IndexScan => out.push(i64::from((*plan.cast::<pg_sys::IndexScan>()).indexid.to_u32())),
            pg_sys::NodeTag::T_IndexOnlyScan => {
                out.push(i64::from((*plan.cast::<pg_sys::IndexOnlyScan>()).indexid.to_u32()))
            }
            pg_sys::NodeTag::T_SubqueryScan => scanned_indexes((*plan.cast::<pg_sys::SubqueryScan>()).subplan, out),
            _ => {}
        }
        scanned_indexes((*plan).lefttree, out);
        scanned_indexes((*plan).righttree, out);
    }
}

/// Whether the planner serves a subplan with a partial HNSW index (planned under its settings).
pub fn uses_partial_hnsw(sql: &str, params: &[Param]) -> Result<bool, CoreError> {
    let stmt = plan_query(sql, params)?;
    let mut indexes = Vec::new();
    // SAFETY: a plan the planner just returned.
    unsafe { scanned_indexes((*stmt).planTree, &mut indexes) };
    if indexes.is_empty() {
        return Ok(false);
    }
    select_saved(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_index x
                          JOIN pg_catalog.pg_class c ON c.oid = x.indexrelid
                          JOIN pg_catalog.pg_am a ON a.oid = c.relam
                         WHERE x.indexrelid = ANY($1::int8[]::oid[]) AND x.indpred IS NOT NULL
                           AND a.amname = 'hnsw')",
        &[DatumWithOid::from(indexes)],
        |table| Ok(table.first().get_one::<bool>()?.unwrap_or(false)),
    )
}

/// The model of each (table OID, current column name)'s embedding slot, and the table's other
/// slots as [current column name, model] pairs, in the order asked.
const EMBEDDING_MODELS: &str = r#"
SELECT s.model,
       COALESCE((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_array(
                            COALESCE((SELECT a.attname::text FROM pg_catalog.pg_attribute a
                                       WHERE a.attrelid = o.item_table
                                         AND a.attnum = (corpus._slot_attnums(o)).embedding_attnum),
                                     o.embedding_column::text), o.model) ORDER BY o.embedding_column)
                   FROM corpus.embedding_slots o
                  WHERE o.item_table = x.t::oid
                    AND o.embedding_column IS DISTINCT FROM s.embedding_column), '[]'::jsonb)
  FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::text[])) WITH ORDINALITY AS x(t, col, n)
  LEFT JOIN LATERAL (
       SELECT e.embedding_column, e.model FROM corpus.embedding_slots e
        WHERE e.item_table = x.t::oid
          AND (corpus._slot_attnums(e)).embedding_attnum =
              (SELECT a.attnum FROM pg_catalog.pg_attribute a
                WHERE a.attrelid = x.t::oid AND a.attname = x.col AND a.attnum > 0 AND NOT a.attisdropped)
        LIMIT 1) s ON true
 ORDER BY x.n"#;
