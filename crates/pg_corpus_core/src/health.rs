//! `corpus_health_check`: the SQL of each check and the rules that turn its figures into
//! `ok` / `warn` / `fail` rows. The corpus predicate's parts come from `plan::scope_parts`
//! (still the one place they are written); the extension runs the SQL and the probe searches.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{json, Value};

use crate::error::CoreError;
use crate::model::{Corpus, Side, Source, Strategy};
use crate::plan::{self, all};
use crate::sql::{ident, qualified, Param, Params};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CheckRow {
    pub check: &'static str,
    pub corpus: Option<String>,
    pub source: Option<String>,
    pub status: Status,
    pub count: i64,
    pub detail: Value,
    pub hint: String,
}

impl CheckRow {
    pub fn new(check: &'static str, corpus: Option<&str>, source: Option<&str>) -> Self {
        CheckRow {
            check,
            corpus: corpus.map(str::to_string),
            source: source.map(str::to_string),
            status: Status::Ok,
            count: 0,
            detail: json!({}),
            hint: String::new(),
        }
    }

    /// Raise the status to `status` (never lower it) and add the finding's fix to the hint: a
    /// row with several findings lists every fix, one line each, in the order they were found.
    pub fn flag(&mut self, status: Status, hint: impl Into<String>) {
        if status > self.status {
            self.status = status;
        }
        let hint = hint.into();
        if hint.is_empty() || self.hint.lines().any(|l| l == hint) {
            return;
        }
        if !self.hint.is_empty() {
            self.hint.push('\n');
        }
        self.hint.push_str(&hint);
    }
}

/// Tables above this many rows are sampled rather than counted (and `detail` says so).
pub const EXACT_COUNT_MAX_ROWS: f64 = 200_000.0;
/// Rows a sample aims at.
pub const SAMPLE_ROWS: f64 = 50_000.0;

/// The TABLESAMPLE percentage for a table of `reltuples` rows, or None to count exactly.
pub fn sample_percent(reltuples: f64) -> Option<f64> {
    if reltuples > EXACT_COUNT_MAX_ROWS {
        Some((100.0 * SAMPLE_ROWS / reltuples).clamp(0.01, 100.0))
    } else {
        None
    }
}

fn coalesce_false(cond: String) -> String {
    format!("COALESCE({cond}, false)")
}

/// A read-only query of the health check, built here and only here: the extension runs it and
/// reads its rows as JSON objects (column name → value), so no health SQL is written outside
/// the core (the type has no public constructor).
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    sql: String,
    params: Vec<Param>,
}

impl Query {
    fn new(sql: String, params: Vec<Param>) -> Query {
        Query { sql, params }
    }

    pub fn sql(&self) -> &str {
        &self.sql
    }

    pub fn params(&self) -> &[Param] {
        &self.params
    }
}

/// The installed pg_corpus and pgvector versions. Columns: installed, pgvector.
pub fn version_query() -> Query {
    Query::new(
        "SELECT (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'pg_corpus') AS installed,
                (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'vector') AS pgvector"
            .to_string(),
        Vec::new(),
    )
}

/// Whether PUBLIC may create in schema corpus, and the write grants on the extension's tables
/// that matter: to PUBLIC anywhere (the queue and statistics decide what is served), to other
/// non-superuser roles on the definitions (corpora, sources, embedding_slots).
/// Columns: public_create, writers (jsonb array of {table, column, grantee, privilege}).
pub fn privileges_query() -> Query {
    Query::new(
        "WITH grants AS (
             SELECT c.relname::text AS tbl, NULL::text AS col, c.relowner, a.grantee, a.privilege_type
               FROM pg_catalog.pg_class c
               JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
              WHERE n.nspname = 'corpus' AND c.relkind = 'r'
             UNION ALL
             SELECT c.relname::text, att.attname::text, c.relowner, a.grantee, a.privilege_type
               FROM pg_catalog.pg_attribute att
               JOIN pg_catalog.pg_class c ON c.oid = att.attrelid
               JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              CROSS JOIN LATERAL pg_catalog.aclexplode(att.attacl) a
              WHERE n.nspname = 'corpus' AND c.relkind = 'r' AND att.attacl IS NOT NULL)
         SELECT pg_catalog.has_schema_privilege('public', 'corpus', 'CREATE') AS public_create,
                (SELECT coalesce(jsonb_agg(DISTINCT jsonb_build_object(
                            'table', g.tbl, 'column', g.col,
                            'grantee', CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END,
                            'privilege', g.privilege_type)), '[]')
                   FROM grants g
                  WHERE g.privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE')
                    AND g.grantee <> g.relowner
                    AND NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid = g.grantee), false)
                    -- the queue, statistics and evaluation tables are written by workers and
                    -- evaluators by design; PUBLIC must not write any of them
                    AND (g.grantee = 0 OR g.tbl IN ('corpora', 'sources', 'embedding_slots'))
                ) AS writers"
            .to_string(),
        Vec::new(),
    )
}

/// On a Citus coordinator, what every node says of itself (`corpus._citus_health()`): columns
/// database, coordinator, nodes (each node's pg_corpus version, pgvector's iterative-scan
/// setting, its copies of the distributed tables' slots).
pub fn citus_query() -> Query {
    Query::new(
        "SELECT pg_catalog.current_database()::text AS database, h.coordinator, h.nodes FROM corpus._citus_health() AS h"
            .to_string(),
        Vec::new(),
    )
}

/// The `citus` row from [`citus_query`]'s answer: a node whose pg_corpus version differs from
/// the coordinator's, or whose copies of the slots are not the coordinator's, fails (its
/// queue would not be kept or claimed right); a node where pgvector's iterative scan is off
/// warns (filtered approximate searches on its shards return fewer rows than asked).
pub fn judge_citus(v: &Value) -> CheckRow {
    let mut row = CheckRow::new("citus", None, None);
    let coordinator = &v["coordinator"];
    let nodes = v["nodes"].as_array().cloned().unwrap_or_default();
    let database = v["database"].as_str().unwrap_or("");
    let mut version_differs = Vec::new();
    let mut slots_differ = Vec::new();
    let mut scan_off = Vec::new();
    let mut unreachable = Vec::new();
    for n in &nodes {
        let name = format!("{}:{}", n["host"].as_str().unwrap_or("?"), n["port"].as_str().unwrap_or("?"));
        if let Some(error) = n["unreachable"].as_str() {
            unreachable.push(json!({"node": name, "error": error}));
            continue;
        }
        if n["pg_corpus"] != coordinator["pg_corpus"] {
            version_differs.push(name.clone());
        }
        if n["slots"] != coordinator["slots"] {
            slots_differ.push(name.clone());
        }
        if !matches!(n["iterative_scan"].as_str(), Some("relaxed_order" | "strict_order")) {
            scan_off.push(name);
        }
    }
    row.count = (unreachable.len() + version_differs.len() + slots_differ.len() + scan_off.len()) as i64;
    if !unreachable.is_empty() {
        row.flag(
            Status::Fail,
            "A node could not be asked (see detail): searches of distributed tables fail until it answers; \
             check that it runs, has pg_corpus, and accepts the coordinator's connections as this role.",
        );
    }
    if !version_differs.is_empty() {
        row.flag(
            Status::Fail,
            "Install the coordinator's pg_corpus version on every node and update it there \
             (SELECT run_command_on_all_nodes('ALTER EXTENSION pg_corpus UPDATE');).",
        );
    }
    if !slots_differ.is_empty() {
        row.flag(
            Status::Fail,
            "A node's copies of the embedding slots are not the coordinator's (a registration was rolled back, or a \
             node was added later): drop and add the sources of those tables again on the coordinator.",
        );
    }
    if !scan_off.is_empty() {
        row.flag(
            Status::Warn,
            format!(
                "pgvector's settings are read on the shards: ALTER DATABASE {} SET hnsw.iterative_scan = relaxed_order; \
                 (Citus sends it to the workers; new sessions take it).",
                ident(database)
            ),
        );
    }
    row.detail = json!({
        "nodes": nodes.len(),
        "unreachable": unreachable,
        "version_differs": version_differs,
        "slots_differ": slots_differ,
        "iterative_scan_off": scan_off,
        "coordinator": coordinator,
    });
    row
}

/// One value of a required filter field from the corpus' own searchable items of `src` (so
/// that probe searches of corpora with required scope filters can run). Columns: v (jsonb).
pub fn required_value_query(src: &Source, field: &str) -> Option<Query> {
    let column = src.filter_columns.get(field)?;
    let mut params = Params::default();
    let fw = plan::from_where(src, &[], false, &[], &mut params);
    Some(Query::new(format!("SELECT to_jsonb({}) AS v {fw} LIMIT 1", plan::col(column)), params.values))
}

/// The re-embed queue of one source's table and embedding column: its oldest entry's age, the
/// expired leases (`corpus._queue_figures`: on a Citus coordinator, over every node's queue),
/// the registered slots and their enabled triggers. Columns:
/// table_oldest_seconds, table_expired_leases, slots, enabled_triggers, trigger_name.
pub fn queue_query(src: &Source, figures_function: bool) -> Query {
    // (a database still at a release before corpus._queue_figures: this node's queue only)
    let figures = if figures_function {
        "corpus._queue_figures($1::int8::oid::regclass, $2::name) AS f"
    } else {
        "(SELECT coalesce(extract(epoch FROM now() - min(q.enqueued_at) FILTER (WHERE q.state <> 'dead')), 0)::bigint
                     AS oldest_seconds,
                 count(*) FILTER (WHERE q.state = 'claimed' AND q.lease_until < now()) AS expired_leases
            FROM corpus.embedding_queue q
           WHERE q.item_table = $1::int8::oid AND q.embedding_column = $2::name) AS f"
    };
    Query::new(
        format!(
            "SELECT f.oldest_seconds AS table_oldest_seconds, f.expired_leases AS table_expired_leases,
                (SELECT count(*) FROM corpus.embedding_slots s
                  WHERE s.item_table = $1::int8::oid AND s.embedding_column = $2::name) AS slots,
                (SELECT count(*) FROM corpus.embedding_slots s
                   JOIN pg_catalog.pg_trigger t ON t.tgrelid = s.item_table AND t.tgname = s.trigger_name
                  WHERE s.item_table = $1::int8::oid AND s.embedding_column = $2::name
                    AND t.tgenabled IN ('O', 'A')) AS enabled_triggers,
                (SELECT s.trigger_name FROM corpus.embedding_slots s
                  WHERE s.item_table = $1::int8::oid AND s.embedding_column = $2::name) AS trigger_name
           FROM {figures}"
        ),
        vec![Param::Int(src.item.oid), Param::Text(src.embedding.column.clone())],
    )
}

/// Figures of the searchable contract and the embeddings of one source's corpus slice.
/// Columns: slice_items, short_text, incomplete_parent_items (items only the parent hides),
/// incomplete_parents, rule_excluded, searchable, missing_embedding, stale_embedding, queued,
/// dead_letters, zero_vectors, non_finite, unresolved_locators.
pub fn contract_sql(corpus: &Corpus, idx: usize, sample: Option<f64>) -> Query {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    let c = ContractConds::of(corpus, src, &mut params);
    let sql = format!(
        "SELECT count(*) AS slice_items,
       count(*) FILTER (WHERE {short}) AS short_text,
       count(*) FILTER (WHERE {incomplete}) AS incomplete_parent_items,
       count(DISTINCT {fk}) FILTER (WHERE NOT {complete}) AS incomplete_parents,
       count(*) FILTER (WHERE {excluded}) AS rule_excluded,
       count(*) FILTER (WHERE {searchable}) AS searchable,
       count(*) FILTER (WHERE {missing}) AS missing_embedding,
       count(*) FILTER (WHERE {stale}) AS stale_embedding,
       count(*) FILTER (WHERE {searchable} AND {queued}) AS queued,
       count(*) FILTER (WHERE {dead}) AS dead_letters,
       count(*) FILTER (WHERE {zero}) AS zero_vectors,
       count(*) FILTER (WHERE {non_finite}) AS non_finite,
       count(*) FILTER (WHERE {unresolved}) AS unresolved_locators
{from}
WHERE {isolation}",
        short = c.cond(Finding::BelowMinLength),
        incomplete = c.cond(Finding::HiddenByIncompleteParents),
        excluded = c.cond(Finding::ExcludedBySourceRule),
        missing = c.cond(Finding::MissingEmbedding),
        stale = c.cond(Finding::StaleEmbedding),
        dead = c.cond(Finding::DeadLetters),
        zero = c.cond(Finding::ZeroVectors),
        non_finite = c.cond(Finding::NonFinite),
        unresolved = c.cond(Finding::UnresolvedLocators),
        searchable = c.searchable,
        complete = c.complete,
        queued = c.queued,
        fk = plan::col(&src.parent_fk),
        from = plan::from_clause_sampled(src, sample),
        isolation = c.isolation,
    );
    Query::new(sql, params.values)
}

/// A kind of item the health check counts and names some of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    BelowMinLength,
    HiddenByIncompleteParents,
    ExcludedBySourceRule,
    MissingEmbedding,
    StaleEmbedding,
    DeadLetters,
    ZeroVectors,
    NonFinite,
    UnresolvedLocators,
}

impl Finding {
    /// The findings a fix is asked for, with their names in the rows' `sample_ids` (the
    /// source rule's exclusions are the definition's intent, not a fault).
    pub const FIXABLE: [(Finding, &'static str); 8] = [
        (Finding::BelowMinLength, "below_min_length"),
        (Finding::HiddenByIncompleteParents, "items_hidden_by_incomplete_parents"),
        (Finding::MissingEmbedding, "missing_embedding"),
        (Finding::StaleEmbedding, "stale_embedding"),
        (Finding::DeadLetters, "dead_letters"),
        (Finding::ZeroVectors, "zero_vectors"),
        (Finding::NonFinite, "non_finite"),
        (Finding::UnresolvedLocators, "unresolved_locators"),
    ];
}

/// The conditions of a source's searchable contract over its items (`i`) and parents (`p`).
/// An item that is not searchable is counted once, by the first rule it fails: the source
/// rule, then its parent's required columns, then min_length; so the slice's items are the
/// searchable ones plus those three counts.
struct ContractConds {
    isolation: String,
    text: String,
    complete: String,
    rule: String,
    searchable: String,
    emb: String,
    queued: String,
    dead: String,
    unresolved: String,
    vector_schema: String,
}

impl ContractConds {
    fn of(corpus: &Corpus, src: &Source, params: &mut Params) -> ContractConds {
        let parts = plan::scope_parts(src, params);
        let text = coalesce_false(all(&parts.text));
        let complete = coalesce_false(all(&parts.parent_complete));
        let rule = coalesce_false(all(&parts.rule));
        let searchable = format!("({text} AND {complete} AND {rule})");
        let locators: Vec<String> = src.locator.iter().map(|(_, c)| format!("{} IS NULL", plan::col(c))).collect();
        ContractConds {
            isolation: all(&parts.isolation),
            queued: plan::queued(src, params),
            dead: plan::queued_in_state(src, params, Some("dead")),
            unresolved: if locators.is_empty() { "false".to_string() } else { locators.join(" OR ") },
            emb: plan::col(&src.embedding),
            vector_schema: ident(&corpus.vector_schema),
            text,
            complete,
            rule,
            searchable,
        }
    }

    fn cond(&self, f: Finding) -> String {
        let (text, complete, rule, searchable, emb) =
            (&self.text, &self.complete, &self.rule, &self.searchable, &self.emb);
        match f {
            Finding::ExcludedBySourceRule => format!("NOT {rule}"),
            Finding::HiddenByIncompleteParents => format!("({rule} AND NOT {complete})"),
            Finding::BelowMinLength => format!("({rule} AND {complete} AND NOT {text})"),
            Finding::MissingEmbedding => format!("({searchable} AND {emb} IS NULL)"),
            Finding::StaleEmbedding => format!("({searchable} AND {emb} IS NOT NULL AND {})", self.queued),
            Finding::DeadLetters => format!("({searchable} AND {})", self.dead),
            Finding::ZeroVectors => format!("({emb} IS NOT NULL AND {}.vector_norm({emb}) = 0)", self.vector_schema),
            Finding::NonFinite => {
                format!("({emb} IS NOT NULL AND {emb}::real[] && '{{NaN,Infinity,-Infinity}}'::real[])")
            }
            Finding::UnresolvedLocators => format!("({searchable} AND ({}))", self.unresolved),
        }
    }
}

/// Up to `limit` ids of the source's items in the corpus with finding `f`, lowest first,
/// read as the caller reads them (only rows and columns the caller may read are seen).
pub fn sample_ids_sql(corpus: &Corpus, idx: usize, f: Finding, limit: i64) -> Query {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    let c = ContractConds::of(corpus, src, &mut params);
    let lim = params.push(Param::Int(limit));
    let sql = format!(
        "SELECT {id}::text AS item_id {from} WHERE {isolation} AND {cond} ORDER BY {id} LIMIT {lim}",
        id = plan::col(&src.id),
        from = plan::from_clause_sampled(src, None),
        isolation = c.isolation,
        cond = c.cond(f),
    );
    Query::new(sql, params.values)
}

/// The row a finding is reported in: `embeddings` for the vectors' faults, else
/// `searchable_contract`.
pub fn finding_row(f: Finding) -> &'static str {
    match f {
        Finding::MissingEmbedding
        | Finding::StaleEmbedding
        | Finding::DeadLetters
        | Finding::ZeroVectors
        | Finding::NonFinite => "embeddings",
        _ => "searchable_contract",
    }
}

/// Add the sample ids of a row's findings to its detail (`sample_ids`: finding name → ids)
/// and say so in its hint.
pub fn add_sample_ids(row: &mut CheckRow, samples: &[(&str, Vec<String>)]) {
    let found: serde_json::Map<String, Value> =
        samples.iter().filter(|(_, ids)| !ids.is_empty()).map(|(name, ids)| (name.to_string(), json!(ids))).collect();
    if found.is_empty() {
        return;
    }
    if let Value::Object(m) = &mut row.detail {
        m.insert("sample_ids".into(), Value::Object(found));
    }
    let status = row.status;
    row.flag(status, "Some of the items to fix (the lowest ids you may read): detail.sample_ids.");
}

/// Items whose parent row is gone (only for sources with a parent table).
pub fn orphans_sql(src: &Source, sample: Option<f64>) -> Option<Query> {
    let (parent, key) = (src.parent.as_ref()?, src.parent_key.as_ref()?);
    let mut from = format!("FROM {} AS i", qualified(&src.item.schema, &src.item.name));
    if let Some(pct) = sample {
        from.push_str(&format!(" TABLESAMPLE SYSTEM ({pct})"));
    }
    let sql = format!(
        "SELECT count(*) AS orphans {from} WHERE {fk} IS NOT NULL AND NOT EXISTS \
         (SELECT 1 FROM {parent} AS p WHERE {key} = {fk})",
        fk = plan::col(&src.parent_fk),
        parent = qualified(&parent.schema, &parent.name),
        key = plan::col(key),
    );
    Some(Query::new(sql, Vec::new()))
}

/// A sample of items of the same tables that are NOT in the corpus (failing its isolation
/// predicate), with an embedding: the likeliest leaks, used as probe queries.
/// Columns: item_id, embedding (real[]), content.
pub fn foreign_probes_sql(corpus: &Corpus, idx: usize, limit: i64) -> Option<Query> {
    let src = &corpus.sources[idx];
    if src.isolation.is_empty() {
        return None;
    }
    let mut params = Params::default();
    let parts = plan::scope_parts(src, &mut params);
    let lim = params.push(Param::Int(limit));
    let sql = format!(
        "SELECT {id}::text AS item_id, {emb}::real[] AS embedding, left({text}, 2000) AS content
{from}
WHERE NOT {isolation} AND {emb} IS NOT NULL
LIMIT {lim}",
        id = plan::col(&src.id),
        emb = plan::col(&src.embedding),
        text = plan::col(&src.text),
        from = plan::from_clause_sampled(src, None),
        isolation = coalesce_false(all(&parts.isolation)),
    );
    Some(Query::new(sql, params.values))
}

/// The isolation columns' values of the parents of the given items, as text, read without the
/// planner's predicate: an independent check of what the searches returned.
/// Columns: item_id, then one column per isolation condition (in `src.isolation` order).
pub fn isolation_values_sql(src: &Source, ids: Vec<String>) -> Query {
    let mut params = Params::default();
    let p = params.push(Param::TextArray(ids));
    let cols: Vec<String> =
        src.isolation.iter().enumerate().map(|(n, c)| format!("{}::text AS iso_{n}", plan::col(&c.col))).collect();
    let mut select = vec![format!("{}::text AS item_id", plan::col(&src.id))];
    select.extend(cols);
    // (found through the id's index: one lookup per hit, whatever the table's size)
    let sql = format!(
        "SELECT {} {} WHERE {} = ANY({p}::text[]::{}[])",
        select.join(", "),
        plan::from_clause_sampled(src, None),
        plan::col(&src.id),
        src.id.cast_type
    );
    Query::new(sql, params.values)
}

/// Every index of the item table with its access method, validity, key columns and operator
/// classes. Columns: name, am, valid, columns (text[]), opclasses (text[]).
pub fn indexes_sql(oid: i64) -> Query {
    Query::new(
        "SELECT ci.relname::text AS name, am.amname::text AS am, x.indisvalid AS valid,
       array(SELECT a.attname::text FROM unnest(x.indkey) WITH ORDINALITY k(attnum, n)
               JOIN pg_catalog.pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
              ORDER BY k.n) AS columns,
       array(SELECT oc.opcname::text FROM unnest(x.indclass) WITH ORDINALITY k(opc, n)
               JOIN pg_catalog.pg_opclass oc ON oc.oid = k.opc ORDER BY k.n) AS opclasses,
       x.indpred IS NOT NULL AS partial,
       pg_catalog.format('%I.%I', ns.nspname, ci.relname) AS qualified,
       pg_catalog.pg_get_indexdef(x.indexrelid) AS definition,
       x.indexrelid::int8 AS oid
  FROM pg_catalog.pg_index x
  JOIN pg_catalog.pg_class ci ON ci.oid = x.indexrelid
  JOIN pg_catalog.pg_am am ON am.oid = ci.relam
  JOIN pg_catalog.pg_namespace ns ON ns.oid = ci.relnamespace
 WHERE x.indrelid = $1::int8::oid
 ORDER BY 1"
            .to_string(),
        vec![Param::Int(oid)],
    )
}

/// The leaf partitions' indexes of a partitioned index (`oid`, `name`), which hold its pages;
/// no rows for an index that is not partitioned.
pub fn index_partitions_sql(oid: i64) -> Query {
    Query::new(
        "SELECT t.relid::oid::int8 AS oid, c.relname::text AS name
  FROM pg_catalog.pg_partition_tree($1::int8::oid::regclass) AS t
  JOIN pg_catalog.pg_class c ON c.oid = t.relid
 WHERE t.isleaf
 ORDER BY 2"
            .to_string(),
        vec![Param::Int(oid)],
    )
}

#[derive(Debug, Clone, serde::Deserialize)]
pub struct IndexInfo {
    pub name: String,
    pub am: String,
    pub valid: bool,
    pub columns: Vec<String>,
    pub opclasses: Vec<String>,
    /// A partial index (WHERE ...) does not cover the whole corpus.
    #[serde(default)]
    pub partial: bool,
    #[serde(default)]
    pub qualified: String,
    #[serde(default)]
    pub definition: String,
    #[serde(default)]
    pub oid: i64,
}

/// A `corpus_bm25` index whose pages do not read back (`damage`: what its check found): searches
/// through it fail with XX002 until it is rebuilt.
pub fn judge_bm25_damage(row: &mut CheckRow, index: &IndexInfo, damage: &str) {
    row.count += 1;
    let fix = format!("The BM25 index is damaged ({damage}): REINDEX INDEX CONCURRENTLY {};", index_name(index));
    // the failure's fix first
    row.hint = if row.hint.is_empty() { fix } else { format!("{fix}\n{}", row.hint) };
    row.status = Status::Fail;
    if let Some(d) = row.detail.as_object_mut() {
        d.insert("bm25_index_damage".to_string(), json!(damage));
    }
}

/// The isolation audit of a corpus whose searches read a damaged BM25 index (`damage`: the
/// index and what its check found): it cannot search, and the `indexes` row names the REINDEX.
/// The `isolation_audit` row of a corpus whose definition does not resolve (`error`): its
/// searches cannot run, so nothing is vouched for.
pub fn judge_audit_unloadable(corpus: &str, error: &str) -> CheckRow {
    let mut row = CheckRow::new("isolation_audit", Some(corpus), None);
    row.count = 1;
    row.flag(
        Status::Fail,
        "The audit's searches cannot run while the corpus' definition does not resolve: fix it as the catalog_drift row says, then check again.",
    );
    row.detail = json!({ "blocked_by": error });
    row
}

pub fn judge_audit_blocked(corpus: &str, damage: &str) -> CheckRow {
    let mut row = CheckRow::new("isolation_audit", Some(corpus), None);
    row.count = 1;
    row.flag(
        Status::Fail,
        format!("The audit's searches read a damaged BM25 index ({damage}); rebuild it as the indexes row says, then check again."),
    );
    row.detail = json!({ "blocked_by": damage });
    row
}

fn index_name(x: &IndexInfo) -> String {
    if x.qualified.is_empty() {
        ident(&x.name)
    } else {
        x.qualified.clone()
    }
}

/// What to run so that a source's lexical branch ranks through a `corpus_bm25` index instead of
/// scoring its candidates one by one.
pub fn bm25_index_hint(src: &Source) -> String {
    format!(
        "The lexical branch scores every candidate row without a BM25 index: CREATE INDEX CONCURRENTLY ON {} USING corpus_bm25 ({});",
        qualified(&src.item.schema, &src.item.name),
        bm25_index_columns(src)
    )
}

/// The columns of the `corpus_bm25` index a source wants: its BM25 column, then the isolation
/// columns the index can hold (its ranking is then of the corpus' rows alone), quoted.
pub fn bm25_index_columns(src: &Source) -> String {
    std::iter::once(src.tsv.column.as_str()).chain(src.isolation_index_keys()).map(ident).collect::<Vec<_>>().join(", ")
}

/// Judge a source's indexes: an ANN index on the embedding with the operator class of the
/// search's distance, a GIN index on the tsvector, a corpus_bm25 index on it when pg_corpus'
/// analyser makes it, an index leading with the parent key (the
/// exact strategy reaches small slices through it), all valid.
pub fn judge_indexes(corpus: &str, src: &Source, indexes: &[IndexInfo]) -> CheckRow {
    let mut row = CheckRow::new("indexes", Some(corpus), Some(&src.name));
    // Only valid, non-partial indexes cover a corpus.
    fn lead<'a>(indexes: &'a [IndexInfo], col: &'a str) -> impl Iterator<Item = &'a IndexInfo> + 'a {
        indexes.iter().filter(move |x| x.valid && !x.partial && x.columns.first().is_some_and(|c| c == col))
    }
    let ann: Vec<&IndexInfo> =
        lead(indexes, &src.embedding.column).filter(|x| x.am == "hnsw" || x.am == "ivfflat").collect();
    let ann_ok: Vec<&&IndexInfo> =
        ann.iter().filter(|x| x.opclasses.first().is_some_and(|o| o == src.distance.opclass())).collect();
    let gin = lead(indexes, &src.tsv.column).any(|x| x.am == "gin");
    let bm25 = lead(indexes, &src.tsv.column).any(|x| x.am == "corpus_bm25");
    // (as searches see it: the catalog's key columns of the source's usable indexes)
    let bm25_isolation = src.index_holds_isolation();
    let fk = lead(indexes, &src.parent_fk.column).next().is_some();
    // the lexical branch looks champion-list items up by id (and the final fetch, every hit)
    let id = lead(indexes, &src.id.column).next().is_some();
    let invalid: Vec<&IndexInfo> = indexes.iter().filter(|x| !x.valid).collect();
    let table = qualified(&src.item.schema, &src.item.name);
    if !invalid.is_empty() {
        row.count += invalid.len() as i64;
        // An invalid index is left by a failed CREATE INDEX CONCURRENTLY (e.g. a duplicate for a
        // unique index): REINDEX would fail again; drop it, fix the cause, create it again.
        let fixes: Vec<String> = invalid
            .iter()
            .map(|x| {
                let q = if x.qualified.is_empty() { ident(&x.name) } else { x.qualified.clone() };
                format!(
                    "DROP INDEX CONCURRENTLY {q}; {};",
                    x.definition.replacen("CREATE INDEX", "CREATE INDEX CONCURRENTLY", 1).replacen(
                        "CREATE UNIQUE INDEX",
                        "CREATE UNIQUE INDEX CONCURRENTLY",
                        1
                    )
                )
            })
            .collect();
        row.flag(Status::Fail, format!("Invalid indexes (a failed concurrent build) are ignored by queries: fix what made the build fail (duplicates, for a unique index), then {}", fixes.join(" ")));
    }
    // an invalid index's fix above builds it again: no second index for the same finding
    let rebuilt =
        |am: &str, col: &str| invalid.iter().any(|x| x.am == am && x.columns.first().is_some_and(|c| c == col));
    if ann_ok.is_empty() && (rebuilt("hnsw", &src.embedding.column) || rebuilt("ivfflat", &src.embedding.column)) {
        row.count += 1;
    } else if ann_ok.is_empty() {
        row.count += 1;
        let hint = if ann.is_empty() {
            format!(
                "SET max_parallel_maintenance_workers = 0; CREATE INDEX ON {table} USING hnsw ({} {});",
                ident(&src.embedding.column),
                src.distance.opclass()
            )
        } else {
            format!(
                "The ANN index {} uses {} but the source searches with {}: DROP INDEX CONCURRENTLY {}; SET max_parallel_maintenance_workers = 0; CREATE INDEX CONCURRENTLY ON {table} USING hnsw ({} {});",
                ident(&ann[0].name),
                ann[0].opclasses.first().map_or("?", String::as_str),
                src.distance.opclass(),
                if ann[0].qualified.is_empty() { ident(&ann[0].name) } else { ann[0].qualified.clone() },
                ident(&src.embedding.column),
                src.distance.opclass()
            )
        };
        row.flag(if ann.is_empty() { Status::Warn } else { Status::Fail }, hint);
    }
    if !gin {
        row.count += 1;
        if !rebuilt("gin", &src.tsv.column) {
            row.flag(Status::Warn, format!("CREATE INDEX ON {table} USING gin ({});", ident(&src.tsv.column)));
        }
    }
    if !fk {
        row.count += 1;
        row.flag(Status::Warn, format!("CREATE INDEX ON {table} ({});", ident(&src.parent_fk.column)));
    }
    if !id {
        row.count += 1;
        row.flag(
            Status::Warn,
            format!(
                "Hits and champion-list candidates are looked up by item id: CREATE UNIQUE INDEX ON {table} ({}); (or a plain index when ids repeat)",
                ident(&src.id.column)
            ),
        );
    }
    if !bm25 && src.language.is_some() {
        row.count += 1;
        row.flag(Status::Warn, bm25_index_hint(src));
    }
    row.detail = json!({
        "ann_index": ann.first().map(|x| &x.name),
        "lexical_bm25_index": bm25,
        "lexical_bm25_index_holds_isolation": bm25_isolation,
        "ann_opclass_expected": src.distance.opclass(),
        "lexical_gin_index": gin,
        "parent_key_index": fk,
        "item_id_index": id,
        "invalid_indexes": invalid.iter().map(|x| &x.name).collect::<Vec<_>>(),
        "partial_indexes": indexes.iter().filter(|x| x.partial).map(|x| &x.name).collect::<Vec<_>>(),
        "indexes": indexes.iter().map(|x| &x.name).collect::<Vec<_>>(),
    });
    row
}

/// A corpus at most this share of its item table's rows (and at least
/// [`PARTIAL_INDEX_MIN_ITEMS`] items) is a small slice: its semantic branch either searches
/// every item exactly or filters an HNSW scan of the whole table, and a partial HNSW index over
/// the corpus makes it about as fast as an unfiltered search (docs/filtered-ann.md).
pub const PARTIAL_INDEX_MAX_SHARE: f64 = 0.1;
/// Below this many searchable items exact search is cheap enough (about 1 ms at 1024-d).
pub const PARTIAL_INDEX_MIN_ITEMS: i64 = 1000;

/// The advice for a small slice without a partial HNSW index serving it: the SQL that builds
/// one (with the isolation column copied into the item table when it lives on the parent; the
/// search then filters on both copies). None when the corpus is no small slice, has no
/// isolation predicate, or a partial index already serves it. Every identifier and value is
/// quoted.
pub fn partial_index_advice(src: &Source, searchable: i64, table_rows: f64, served_by_partial: bool) -> Option<String> {
    if served_by_partial
        || src.isolation.is_empty()
        || searchable < PARTIAL_INDEX_MIN_ITEMS
        || table_rows <= 0.0
        || searchable as f64 / table_rows > PARTIAL_INDEX_MAX_SHARE
    {
        return None;
    }
    let table = qualified(&src.item.schema, &src.item.name);
    let mut steps = Vec::new();
    let mut preds = Vec::new();
    for c in &src.isolation {
        let column = ident(&c.col.column);
        let copied = src.isolation.iter().any(|o| o.col.side == Side::Item && o.col.column == c.col.column);
        if c.col.side == Side::Parent && !copied {
            if let (Some(parent), Some(key)) = (&src.parent, &src.parent_key) {
                steps.push(format!(
                    "ALTER TABLE {table} ADD COLUMN {column} {}; UPDATE {table} AS i SET {column} = p.{column} FROM {} AS p WHERE p.{} = i.{};",
                    c.col.sql_type,
                    qualified(&parent.schema, &parent.name),
                    ident(&key.column),
                    ident(&src.parent_fk.column),
                ));
            }
        }
        if c.col.side == Side::Parent && copied {
            continue; // its item-side copy carries the condition
        }
        let values: Vec<String> = c.values.iter().map(|v| crate::sql::literal(v)).collect();
        preds.push(if values.len() == 1 {
            format!("{column} = {}", values[0])
        } else {
            format!("{column} IN ({})", values.join(", "))
        });
    }
    let copy_note = if steps.is_empty() {
        String::new()
    } else {
        " (keep the copy equal to the parent's, e.g. with a trigger; pg_corpus then filters on both copies)".to_string()
    };
    Some(format!(
        "The corpus is {:.1}% of {table} ({searchable} searchable items): a partial HNSW index over it makes its semantic branch about as fast as an unfiltered search{copy_note}: {}SET max_parallel_maintenance_workers = 0; CREATE INDEX CONCURRENTLY ON {table} USING hnsw ({} {}) WHERE {};",
        100.0 * searchable as f64 / table_rows,
        steps.iter().map(|s| format!("{s} ")).collect::<String>(),
        ident(&src.embedding.column),
        src.distance.opclass(),
        preds.join(" AND "),
    ))
}

/// True when `sql` carries every isolation condition of `src` with its values among `params`:
/// the static half of the isolation audit, run over every subplan the search would generate.
pub fn carries_isolation(src: &Source, sql: &str, params: &[Param]) -> bool {
    src.isolation.iter().all(|c| {
        let column = format!("{}.{} ", c.col.side.alias(), ident(&c.col.column));
        let in_sql = sql.contains(&format!("{column}= $")) || sql.contains(&format!("{column}= ANY($"));
        let bound = if c.values.len() == 1 {
            params.contains(&Param::Text(c.values[0].clone()))
        } else {
            params.contains(&Param::TextArray(c.values.clone()))
        };
        in_sql && bound && (c.col.side == Side::Item || sql.contains(" AS p ON "))
    })
}

fn int(v: &Value, key: &str) -> i64 {
    v.get(key).and_then(Value::as_i64).unwrap_or(0)
}

/// pgvector releases before this one carry CVE-2026-3172 (parallel HNSW build).
pub const PGVECTOR_FIXED: (u32, u32, u32) = (0, 8, 2);

/// Whether a pgvector version (`major.minor[.patch]`) predates [`PGVECTOR_FIXED`]; an unknown
/// or unreadable version is not judged.
pub fn pgvector_vulnerable(version: &str) -> bool {
    let parts: Vec<u32> = version.split('.').filter_map(|p| p.parse().ok()).collect();
    parts.len() >= 2 && (parts[0], parts[1], parts.get(2).copied().unwrap_or(0)) < PGVECTOR_FIXED
}

/// The `version` row: the installed extension version must be the loaded library's (`library`),
/// and pgvector should not be a known-vulnerable version.
pub fn judge_version(installed: &str, library: &str, pgvector: &str) -> CheckRow {
    let mut row = CheckRow::new("version", None, None);
    if installed != library {
        row.count += 1;
        row.flag(
            Status::Fail,
            format!("The loaded library is {library}: run ALTER EXTENSION pg_corpus UPDATE TO '{library}'; (or reinstall the {installed} library)."),
        );
    }
    if pgvector_vulnerable(pgvector) {
        row.count += 1;
        row.flag(
            Status::Warn,
            "pgvector < 0.8.2 carries CVE-2026-3172 (parallel HNSW build): build HNSW indexes with SET max_parallel_maintenance_workers = 0, and upgrade pgvector (ALTER EXTENSION vector UPDATE) when a newer package is available.",
        );
    }
    row.detail = json!({"installed": installed, "library": library, "pgvector": pgvector});
    row
}

/// The `privileges` row from [`privileges_query`]'s answer: PUBLIC must not create in the
/// extension's schema nor write its tables (each fails); other roles that can write the
/// definitions warn (they can redefine corpora, isolation predicates included). `writers` is
/// the query's array of {table, column, grantee, privilege}.
pub fn judge_privileges(public_create: bool, writers: Value) -> CheckRow {
    let mut row = CheckRow::new("privileges", None, None);
    let public_writes = writers.as_array().map_or(0, |w| w.iter().filter(|x| x["grantee"] == "PUBLIC").count());
    if public_create {
        row.count += 1;
        row.flag(Status::Fail, "REVOKE CREATE ON SCHEMA corpus FROM PUBLIC;");
    }
    if public_writes > 0 {
        row.count += public_writes as i64;
        // (a table-level REVOKE also revokes the column-level grants of the same privilege)
        row.flag(Status::Fail, "REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA corpus FROM PUBLIC;");
    }
    let others = writers.as_array().map_or(0, |w| w.len()) - public_writes;
    if others > 0 {
        row.count += others as i64;
        row.flag(
            Status::Warn,
            "These roles can redefine corpora (isolation predicates included) or their re-embed triggers; REVOKE what was not intended, e.g. REVOKE INSERT, UPDATE, DELETE ON corpus.corpora, corpus.sources, corpus.embedding_slots FROM role; (column grants: REVOKE UPDATE (column) ON ...)",
        );
    }
    row.detail = json!({"public_can_create": public_create, "catalog_writers": writers});
    row
}

/// The `catalog_drift` row of a corpus whose definition no longer loads: the loading error,
/// whose hint is the row's.
pub fn judge_unloadable(corpus: &str, e: &CoreError) -> CheckRow {
    let mut row = CheckRow::new("catalog_drift", Some(corpus), None);
    row.count = 1;
    row.detail = json!({"error": e.message, "sqlstate": e.state.code(), "detail": e.detail});
    row.flag(Status::Fail, e.hint.clone());
    row
}

/// The `catalog_drift` row of a loaded corpus: every registered column whose type changed
/// since the definition fails (locators and filters change with it).
pub fn judge_drift(corpus: &Corpus) -> CheckRow {
    let mut row = CheckRow::new("catalog_drift", Some(&corpus.name), None);
    let retyped: Vec<Value> = corpus
        .sources
        .iter()
        .flat_map(|s| {
            s.retyped_columns().into_iter().map(move |(side, col, then, now)| {
                json!({"source": s.name, "table": side, "column": col, "defined_as": then, "now": now})
            })
        })
        .collect();
    if !retyped.is_empty() {
        row.count = retyped.len() as i64;
        row.flag(
            Status::Fail,
            format!("Registered columns changed type since the corpus was defined (locators and filters change with them): restore the types, or accept them with SELECT corpus.corpus_alter({});", crate::sql::literal(&corpus.name)),
        );
    }
    row.detail = json!({"sources": corpus.sources.iter().map(|s| &s.name).collect::<Vec<_>>(), "retyped": retyped});
    row
}

/// How the BM25 column of a source is made: whether it is a stored generated column, and its
/// expression. Columns: generated (bool), expression (text or null).
pub fn bm25_column_query(src: &Source) -> Query {
    Query::new(
        "SELECT a.attgenerated = 's' AS generated, pg_catalog.pg_get_expr(d.adbin, d.adrelid) AS expression \
         FROM pg_catalog.pg_attribute a LEFT JOIN pg_catalog.pg_attrdef d \
         ON d.adrelid = a.attrelid AND d.adnum = a.attnum WHERE a.attrelid = $1 AND a.attname = $2"
            .to_string(),
        vec![Param::Int(src.item.oid), Param::Text(src.tsv.column.clone())],
    )
}

/// Rows whose stored BM25 column is not what the installed analyser makes of their text.
pub const ANALYSIS_SAMPLE_ROWS: i64 = 500;

/// The language of a generated BM25 column's expression when it is exactly
/// `corpus.bm25_document(<the source's text column>, '<language>')`.
pub fn analyser_expression(src: &Source, expression: &str) -> Option<crate::model::Language> {
    let e: String = expression.chars().filter(|c| !c.is_whitespace()).collect();
    let call = e.strip_prefix("corpus.bm25_document(").or_else(|| e.strip_prefix("bm25_document("))?;
    let text_col = crate::sql::ident(&src.text.column);
    let rest =
        call.strip_prefix(&format!("{text_col},")).or_else(|| call.strip_prefix(&format!("{},", src.text.column)))?;
    let lang = rest.strip_prefix('\'')?.strip_suffix("'::text)")?;
    lang.parse().ok()
}

/// Of the first [`ANALYSIS_SAMPLE_ROWS`] rows with text, how many hold a BM25 column other than
/// what `corpus.bm25_document` makes of their text now. Columns: sampled, differ.
pub fn analysis_sample_query(src: &Source, lang: crate::model::Language) -> Query {
    let sql = format!(
        "SELECT count(*) AS sampled, count(*) FILTER (WHERE s.tsv IS DISTINCT FROM \
         corpus.bm25_document(s.body::text, $1)) AS differ FROM (SELECT i.{tsv} AS tsv, i.{text} AS body \
         FROM {table} AS i WHERE i.{text} IS NOT NULL LIMIT {ANALYSIS_SAMPLE_ROWS}) AS s",
        tsv = crate::sql::ident(&src.tsv.column),
        text = crate::sql::ident(&src.text.column),
        table = qualified(&src.item.schema, &src.item.name),
    );
    Query::new(sql, vec![Param::Text(lang.name().to_string())])
}

/// One batch of a re-analysis of a source's BM25 column: the next `$2` rows of the item table
/// by id after `$1` (NULL: from the first), each of them whose stored analysis differs from
/// what `corpus.bm25_document(text, $3)` makes of its text now rewritten (its text set to
/// itself, which computes the generated column again). Answers the rows read (`n`), those
/// rewritten (`changed`) and the last id read (`last`, text).
pub fn reanalyze_batch_sql(src: &Source) -> String {
    let id = crate::sql::ident(&src.id.column);
    format!(
        "WITH batch AS (SELECT i.{id} AS id FROM {table} AS i
                         WHERE $1::text IS NULL OR i.{id} > $1::text::{cast}
                         ORDER BY i.{id} LIMIT $2),
              rewritten AS (UPDATE {table} AS u SET {text} = u.{text} FROM batch AS b
                             WHERE u.{id} = b.id
                               AND u.{tsv} IS DISTINCT FROM corpus.bm25_document(u.{text}::text, $3)
                            RETURNING 1)
         SELECT (SELECT count(*) FROM batch) AS n, (SELECT count(*) FROM rewritten) AS changed,
                (SELECT max(b.id)::text FROM batch AS b) AS last",
        table = qualified(&src.item.schema, &src.item.name),
        cast = src.id.cast_type,
        text = crate::sql::ident(&src.text.column),
        tsv = crate::sql::ident(&src.tsv.column),
    )
}

/// The call that analyses a source's rows again and refreshes the statistics.
pub fn reanalyze_call(corpus: &str, source: &str) -> String {
    format!("CALL corpus.corpus_reanalyze({}, {});", crate::sql::literal(corpus), crate::sql::literal(source))
}

/// The `analysis` row of a source: a BM25 column generated by `corpus.bm25_document` whose
/// stored values another analyser version made (an upgrade changed stop words or stemming)
/// still searches, but its rows and the queries disagree on some words until the rows are
/// analysed again. `sample` is (sampled, differ) when the column could be checked.
pub fn judge_analysis(
    corpus: &str,
    src: &Source,
    how: Result<crate::model::Language, &str>,
    sample: (i64, i64),
) -> CheckRow {
    let mut row = CheckRow::new("analysis", Some(corpus), Some(&src.name));
    let lang = match how {
        Ok(lang) => lang,
        Err(why) => {
            row.detail = json!({"checked": false, "why": why, "analyzer_version": crate::analysis::ANALYZER_VERSION});
            return row;
        }
    };
    let (sampled, differ) = sample;
    row.count = differ;
    row.detail = json!({"checked": true, "language": lang.name(), "sampled": sampled, "differ": differ,
                        "analyzer_version": crate::analysis::ANALYZER_VERSION});
    if differ > 0 {
        row.flag(
            Status::Warn,
            format!(
                "{differ} of {sampled} rows sampled were analysed by an earlier version of the analyser (stop words or \
                 stemming changed): their words and the queries' disagree until the rows are analysed again. Analyse \
                 them again (the rows that differ, in committed batches, then the statistics of every corpus of the \
                 table): {}",
                reanalyze_call(corpus, &src.name)
            ),
        );
    }
    row
}

/// The `evidence` row: which rules the evidence filter can use. A space whose sources are
/// searched without usable vector thresholds (none set, or set for another model) has no vector
/// rule: the filter then admits only hits holding the query's rare words. That is a warning
/// where the corpus filters by default, and said in the detail otherwise.
pub fn judge_evidence(corpus: &Corpus) -> CheckRow {
    let mut row = CheckRow::new("evidence", Some(&corpus.name), None);
    let cfg = &corpus.evidence;
    let mut vector = serde_json::Map::new();
    let mut off: Vec<(String, CoreError)> = Vec::new();
    for (idx, space) in corpus.spaces.iter().enumerate() {
        if !corpus.sources.iter().any(|s| s.space == idx) {
            continue;
        }
        match crate::evidence::thresholds_for(cfg, &corpus.spaces, idx, &corpus.name) {
            Ok(t) => {
                vector.insert(space.name.clone(), json!({"max_distance": t.max_distance, "max_gap": t.max_gap}));
            }
            Err(e) => {
                vector.insert(space.name.clone(), json!({"off": e.message}));
                off.push((space.name.clone(), e));
            }
        }
    }
    row.count = off.len() as i64;
    row.detail = json!({
        "enabled_by_default": cfg.enabled,
        "rare_share": cfg.rare_share,
        "min_coverage": cfg.min_coverage,
        "vector_rule": vector,
    });
    if cfg.enabled {
        if let Some((_, e)) = off.first() {
            row.flag(
                Status::Warn,
                format!(
                    "Searches of this corpus filter by evidence, but the vector rule is off for {}: only hits with \
                     the query's rare words are returned. {}",
                    off.iter().map(|(s, _)| format!("space \"{s}\"")).collect::<Vec<_>>().join(", "),
                    e.hint
                ),
            );
        }
    }
    row
}

/// How hard the isolation audit probes: foreign items per source, and the search modes each
/// probe runs in (a hybrid search runs both branches' subplans; the single-branch modes rank
/// their candidates alone).
#[derive(Debug, PartialEq, Eq)]
pub struct AuditDepth {
    pub probes: i64,
    pub modes: &'static [&'static str],
}

/// Checking one corpus.
pub const THOROUGH: AuditDepth = AuditDepth { probes: 3, modes: &["hybrid", "semantic", "lexical"] };
/// Checking every corpus: a DBA's routine check, linear in the corpora.
pub const BROAD: AuditDepth = AuditDepth { probes: 2, modes: &["hybrid"] };

/// The audit's depth: [`THOROUGH`] when one corpus is checked, [`BROAD`] when all are.
pub fn audit_depth(one_corpus: bool) -> &'static AuditDepth {
    if one_corpus {
        &THOROUGH
    } else {
        &BROAD
    }
}

/// Words of a probe item's text a probe searches with.
pub const PROBE_WORDS: usize = 30;

/// A probe's query text: the first [`PROBE_WORDS`] words of a foreign item's content.
pub fn probe_words(content: &str) -> String {
    content.split_whitespace().take(PROBE_WORDS).collect::<Vec<_>>().join(" ")
}

/// Whether a probe runs in `mode`: a lexical search needs its text, a semantic one its vector.
pub fn probe_runs(mode: &str, has_text: bool, has_vector: bool) -> bool {
    match mode {
        "lexical" => has_text,
        "semantic" => has_vector,
        _ => true,
    }
}

/// The static half of the isolation audit: every subplan the search can generate for each
/// source (exact and approximate semantic, lexical, the final fetch) must carry the corpus
/// predicate with its values. Returns how many were checked and the failing ones as
/// `source/branch`.
pub fn static_isolation_audit(corpus: &Corpus) -> (usize, Vec<String>) {
    let mut checked = 0;
    let mut failures = Vec::new();
    for (idx, src) in corpus.sources.iter().enumerate() {
        let dims = src.dimensions.max(1) as usize;
        let plans = [
            plan::semantic(corpus, idx, &[], &vec![0.0; dims], 10, Strategy::Exact),
            plan::semantic(corpus, idx, &[], &vec![0.0; dims], 10, Strategy::Approximate),
            plan::lexical(corpus, idx, &[], "probe", 10),
        ];
        for p in plans {
            checked += 1;
            if !carries_isolation(src, &p.sql, &p.params) {
                failures.push(format!("{}/{}", src.name, p.branch.name()));
            }
        }
        let (sql, params) = plan::fetch(corpus, idx, &[], vec![], vec![]);
        checked += 1;
        if !carries_isolation(src, &sql, &params) {
            failures.push(format!("{}/fetch", src.name));
        }
    }
    (checked, failures)
}

/// The leaks among the probe searches' hits of one source: `found` holds each hit's item id
/// and the mode that returned it, `values` the rows of [`isolation_values_sql`] by item id. A
/// hit leaks unless its parent holds one of the declared values of every isolation condition
/// (a hit whose row is not found leaks, with a null parent).
pub fn audit_hits(src: &Source, found: Vec<(String, &str)>, values: &HashMap<String, Value>) -> Vec<Value> {
    let mut leaks = Vec::new();
    for (id, mode) in found {
        let hit = values.get(&id).cloned().unwrap_or(Value::Null);
        let ok = src.isolation.iter().enumerate().all(|(n, c)| {
            hit.get(format!("iso_{n}")).and_then(Value::as_str).is_some_and(|v| c.values.iter().any(|x| x == v))
        });
        if !ok {
            leaks.push(json!({"source": src.name, "item_id": id, "mode": mode, "parent": hit}));
        }
    }
    leaks
}

/// What the dynamic half of the isolation audit could do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probing {
    /// No source has an isolation predicate: the corpus owns its tables.
    NoIsolation,
    /// A required filter has no value among the corpus' searchable items to probe with.
    NoFilterValues,
    /// The probes ran.
    Ran,
}

/// What the isolation audit found.
#[derive(Debug, Clone, PartialEq)]
pub struct IsolationFacts {
    pub static_checked: usize,
    pub static_failures: Vec<String>,
    pub probing: Probing,
    pub probes: usize,
    pub searches: usize,
    pub hits_checked: usize,
    pub leaks: Vec<Value>,
}

/// Leaks listed in the `isolation_audit` row's detail (the count counts them all).
pub const LEAKS_LISTED: usize = 20;

/// The `isolation_audit` row: a subplan without the predicate or a hit outside the corpus fails.
pub fn judge_isolation(corpus: &str, depth: &AuditDepth, f: IsolationFacts) -> CheckRow {
    let mut row = CheckRow::new("isolation_audit", Some(corpus), None);
    let probes = match f.probing {
        Probing::NoIsolation => {
            row.detail = json!({"isolation": "none: the corpus owns its tables"});
            json!(f.probes)
        }
        Probing::NoFilterValues => json!("skipped: no searchable item to take required filter values from"),
        Probing::Ran => json!(f.probes),
    };
    row.count = (f.leaks.len() + f.static_failures.len()) as i64;
    if !f.static_failures.is_empty() {
        row.flag(Status::Fail, "A generated subplan lacks the corpus predicate: this is a pg_corpus bug; stop serving this corpus and report it.");
    }
    if !f.leaks.is_empty() {
        row.flag(Status::Fail, "Searches returned items outside the corpus: check the isolation column values of the listed parents and the corpus definition (corpus.corpus_list()).");
    }
    if let Value::Object(m) = &mut row.detail {
        m.insert("static_subplans_checked".into(), json!(f.static_checked));
        m.insert("static_failures".into(), json!(f.static_failures));
        m.insert("probes".into(), probes);
        m.insert("searches".into(), json!(f.searches));
        m.insert("modes".into(), json!(depth.modes));
        m.insert("hits_checked".into(), json!(f.hits_checked));
        m.insert("leaks".into(), json!(f.leaks.into_iter().take(LEAKS_LISTED).collect::<Vec<_>>()));
    }
    row
}

/// The BM25 statistics of a corpus and the row changes of its tables
/// (pg_stat_all_tables' inserted + updated + deleted rows) at the refresh and now.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LexicalFacts {
    pub refreshed: bool,
    pub documents: i64,
    pub terms: i64,
    pub total_length: i64,
    pub changes_at_refresh: i64,
    pub changes_now: i64,
    /// The database's statistics were reset since the refresh.
    pub reset_since: bool,
}

/// The statistics are stale when more rows changed since their refresh than this share of the
/// documents (at least one).
pub const STALE_SHARE: f64 = 0.1;

impl LexicalFacts {
    /// The counters went backwards (reset, crash recovery, restored backup): the changes since
    /// the refresh cannot be known.
    pub fn counters_reset(&self) -> bool {
        self.refreshed && (self.reset_since || self.changes_now < self.changes_at_refresh)
    }

    /// Rows changed since the refresh (never negative).
    pub fn changed(&self) -> i64 {
        (self.changes_now - self.changes_at_refresh).max(0)
    }

    /// Never refreshed, counters reset, or more rows changed than `share` of the documents (at
    /// least one).
    pub fn is_stale(&self, share: f64) -> bool {
        !self.refreshed
            || self.counters_reset()
            || (self.changes_now - self.changes_at_refresh) as f64 > (share * self.documents as f64).max(0.5)
    }
}

/// The `lexical_statistics` row of a role that may not read every item of the corpus (a
/// missing SELECT or row-level security): it cannot see the corpus' statistics.
pub fn lexical_unreadable(corpus: &str) -> CheckRow {
    let mut row = CheckRow::new("lexical_statistics", Some(corpus), None);
    // (the statistics describe every item of the corpus: sql/access.sql)
    row.flag(
        Status::Warn,
        "This role may not read every item of the corpus (a missing SELECT or row-level security), so it cannot see the corpus' BM25 statistics: run the health check as a role that reads all of its sources, e.g. the corpus owner.",
    );
    row
}

/// The `lexical_statistics` row: never computed, of unknown staleness, or stale warns. On a
/// standby (`in_recovery`) the table counters are its own (zero after a start) and the
/// statistics are refreshed on the primary, whose health check judges their staleness.
pub fn judge_lexical_statistics(corpus: &str, f: &LexicalFacts, in_recovery: bool) -> CheckRow {
    let mut row = CheckRow::new("lexical_statistics", Some(corpus), None);
    if in_recovery {
        row.detail = json!({"refreshed": f.refreshed, "documents": f.documents, "terms": f.terms,
                            "total_length": f.total_length, "in_recovery": true,
                            "staleness": "judged by the primary's health check"});
        return row;
    }
    let refresh = format!("SELECT * FROM corpus.corpus_refresh_lexical_stats({});", crate::sql::literal(corpus));
    if !f.refreshed {
        row.count = 1;
        row.flag(Status::Warn, format!("BM25 statistics were never computed: {refresh}"));
    } else if f.counters_reset() {
        row.count = 1;
        row.flag(Status::Warn, format!("The table statistics counters were reset since the BM25 statistics were computed, so their staleness is unknown: {refresh}"));
    } else if f.is_stale(STALE_SHARE) {
        row.count = f.changed();
        row.flag(Status::Warn, format!("More than 10% of the corpus changed since its BM25 statistics were computed: {refresh} (the reference worker does this automatically)."));
    }
    row.detail = json!({"refreshed": f.refreshed, "documents": f.documents, "terms": f.terms,
                        "total_length": f.total_length, "rows_changed_since_refresh": f.changed(), "counters_reset": f.counters_reset(),
                        "stale_when_changed_over": "10% of documents (pg_stat_all_tables counters)"});
    row
}

/// How a source's figures are counted: exactly, or from a TABLESAMPLE of a table of
/// `reltuples` rows ([`sample_percent`]) and scaled up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    pub percent: Option<f64>,
    pub reltuples: f64,
}

impl Sampling {
    pub fn of(reltuples: f64) -> Sampling {
        Sampling { percent: sample_percent(reltuples), reltuples }
    }

    /// The `sampling` entry of the rows' detail.
    pub fn detail(&self) -> Value {
        match self.percent {
            Some(pct) => json!({"counted": "estimated from a TABLESAMPLE SYSTEM sample", "sample_percent": pct,
                                "reltuples": self.reltuples}),
            None => json!({"counted": "exactly"}),
        }
    }

    /// The estimate of the whole table from the count `key` of a row (0 when absent).
    pub fn estimate(&self, row: &Value, key: &str) -> i64 {
        let scale = self.percent.map_or(1.0, |pct| 100.0 / pct);
        (int(row, key) as f64 * scale).round() as i64
    }
}

/// The figures of [`contract_sql`] of one source, estimated for the whole table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContractFigures {
    pub slice_items: i64,
    pub short_text: i64,
    pub incomplete_parent_items: i64,
    pub incomplete_parents: i64,
    pub rule_excluded: i64,
    pub searchable: i64,
    pub missing_embedding: i64,
    pub stale_embedding: i64,
    pub queued: i64,
    pub dead_letters: i64,
    pub zero_vectors: i64,
    pub non_finite: i64,
    pub unresolved_locators: i64,
}

impl ContractFigures {
    /// How many items have finding `f`.
    pub fn count(&self, f: Finding) -> i64 {
        match f {
            Finding::BelowMinLength => self.short_text,
            Finding::HiddenByIncompleteParents => self.incomplete_parent_items,
            Finding::ExcludedBySourceRule => self.rule_excluded,
            Finding::MissingEmbedding => self.missing_embedding,
            Finding::StaleEmbedding => self.stale_embedding,
            Finding::DeadLetters => self.dead_letters,
            Finding::ZeroVectors => self.zero_vectors,
            Finding::NonFinite => self.non_finite,
            Finding::UnresolvedLocators => self.unresolved_locators,
        }
    }

    /// From [`contract_sql`]'s row, scaled by `sampling`.
    pub fn from_row(row: &Value, sampling: &Sampling) -> ContractFigures {
        let est = |key| sampling.estimate(row, key);
        ContractFigures {
            slice_items: est("slice_items"),
            short_text: est("short_text"),
            incomplete_parent_items: est("incomplete_parent_items"),
            incomplete_parents: est("incomplete_parents"),
            rule_excluded: est("rule_excluded"),
            searchable: est("searchable"),
            missing_embedding: est("missing_embedding"),
            stale_embedding: est("stale_embedding"),
            queued: est("queued"),
            dead_letters: est("dead_letters"),
            zero_vectors: est("zero_vectors"),
            non_finite: est("non_finite"),
            unresolved_locators: est("unresolved_locators"),
        }
    }
}

/// The `embeddings` row of source `idx`: zero or non-finite vectors fail (they cannot be
/// ranked); searchable items without an embedding, or with one of old text, warn.
pub fn judge_embeddings(corpus: &Corpus, idx: usize, f: &ContractFigures, sampling: &Sampling) -> CheckRow {
    let src = &corpus.sources[idx];
    let mut e = CheckRow::new("embeddings", Some(&corpus.name), Some(&src.name));
    let (missing, stale, zero, bad) = (f.missing_embedding, f.stale_embedding, f.zero_vectors, f.non_finite);
    e.count = missing + stale + zero + bad;
    if zero + bad > 0 {
        e.flag(
            Status::Fail,
            format!(
                "Zero or non-finite vectors cannot be ranked: clear them so the re-embed trigger queues them, UPDATE {} SET {} = NULL WHERE {}.vector_norm({}) = 0; then fix the embedding producer.",
                qualified(&src.item.schema, &src.item.name),
                ident(&src.embedding.column),
                ident(&corpus.vector_schema),
                ident(&src.embedding.column)
            ),
        );
    }
    if missing > 0 {
        e.flag(Status::Warn, "Searchable items without an embedding are invisible to the semantic branch: run the re-embed worker (pg-corpus-worker).");
    }
    if stale > 0 {
        e.flag(Status::Warn, "Embeddings describe old text: run the re-embed worker; see corpus.embedding_queue.");
    }
    e.detail = json!({"searchable": f.searchable, "missing": missing, "stale": stale,
                      "zero_vectors": zero, "non_finite": bad, "dimensions": src.dimensions, "sampling": sampling.detail()});
    e
}

/// The embeddings being built beside a source's table's searched ones (slots no source ranks
/// by, `corpus_embedding_build`): one JSON object per column, `{"column", "model", "waiting",
/// "seconds"}` (items still queued; seconds since the build began).
pub fn builds_query(src: &Source) -> Query {
    Query::new(
        "SELECT s.embedding_column::text AS column, s.model,
                (SELECT count(*) FROM corpus.embedding_queue q
                  WHERE q.item_table = s.item_table AND q.embedding_column = s.embedding_column) AS waiting,
                extract(epoch FROM now() - s.created_at)::float8 AS seconds,
                (to_jsonb(s) ->> 'switch_from') IS NOT NULL AS auto
           FROM corpus.embedding_slots s
          WHERE s.item_table = $1::int8::oid
            AND NOT EXISTS (SELECT 1 FROM corpus.sources u WHERE u.item_table = s.item_table
                               AND u.embedding_column = s.embedding_column)
          ORDER BY s.embedding_column"
            .to_string(),
        vec![Param::Int(src.item.oid)],
    )
}

/// Add the state of each build ([`builds_query`]'s rows) over `total` items of the table to the
/// `embeddings` row: how far it is, when it should end at the rate so far, and what to run.
pub fn judge_builds(row: &mut CheckRow, corpus: &Corpus, idx: usize, builds: &[Value], total: f64) {
    let src = &corpus.sources[idx];
    let mut states = Vec::new();
    for b in builds {
        let column = b.get("column").and_then(Value::as_str).unwrap_or_default();
        let model = b.get("model").and_then(Value::as_str).unwrap_or("?");
        let waiting = int(b, "waiting");
        let seconds = b.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
        let total = (total.max(0.0) as i64).max(waiting);
        let done = total - waiting;
        let percent = if total > 0 { 100 * done / total } else { 100 };
        let eta = (done > 0 && seconds > 0.0).then(|| waiting as f64 / (done as f64 / seconds));
        let switch = format!(
            "SELECT corpus.corpus_embedding_switch({}, {}, {});",
            crate::sql::literal(&qualified(&src.item.schema, &src.item.name)),
            crate::sql::literal(&src.embedding.column),
            crate::sql::literal(column)
        );
        let auto = b.get("auto").and_then(Value::as_bool).unwrap_or(false);
        row.count += 1;
        if waiting > 0 {
            let left = eta.map_or("no item stored yet".to_string(), |s| {
                format!("about {} min left at the rate so far", (s / 60.0).ceil())
            });
            let then = if auto {
                "searches switch to it by themselves when no item waits".to_string()
            } else {
                format!("then {switch}")
            };
            row.flag(
                Status::Warn,
                format!(
                    "Building {} (model {model}): {percent}% ({done} of {total} items), {left}: keep the re-embed worker running with that model; {then}",
                    ident(column)
                ),
            );
        } else if auto {
            row.flag(
                Status::Warn,
                format!(
                    "The embeddings of {} (model {model}) are built: the re-embed worker's next call switches searches to them (if it reports a WARNING instead, run {switch})",
                    ident(column)
                ),
            );
        } else {
            row.flag(
                Status::Warn,
                format!(
                    "The embeddings of {} (model {model}) are built: switch searches to them with {switch}",
                    ident(column)
                ),
            );
        }
        states.push(json!({"column": column, "model": model, "done": done, "total": total, "percent": percent,
                           "eta_seconds": eta, "auto_switch": auto}));
    }
    if !states.is_empty() {
        if let Value::Object(m) = &mut row.detail {
            m.insert("building".into(), Value::Array(states));
        }
    }
}

/// The `searchable_contract` row of source `idx`: items that incomplete parents hide, items
/// below min_length, orphans (`orphans`, items whose parent row is gone) and returned items
/// without locator values warn.
pub fn judge_searchable_contract(
    corpus: &Corpus,
    idx: usize,
    f: &ContractFigures,
    orphans: i64,
    sampling: &Sampling,
) -> CheckRow {
    let src = &corpus.sources[idx];
    let mut s = CheckRow::new("searchable_contract", Some(&corpus.name), Some(&src.name));
    let (incomplete_items, short, unresolved) = (f.incomplete_parent_items, f.short_text, f.unresolved_locators);
    s.count = incomplete_items + short + orphans + unresolved;
    if incomplete_items > 0 {
        s.flag(
            Status::Warn,
            format!(
                "Parents missing required metadata ({}) hide their items: fill those columns in the parent table.",
                src.parent_required.iter().map(|c| c.column.as_str()).collect::<Vec<_>>().join(", ")
            ),
        );
    }
    if short > 0 {
        s.flag(Status::Warn, format!("Items shorter than min_length ({}) are never returned: merge them into neighbouring chunks or lower min_length.", src.min_length));
    }
    if orphans > 0 {
        s.flag(
            Status::Warn,
            "Items whose parent row is gone: DELETE them or restore the parents (and add a foreign key).",
        );
    }
    if unresolved > 0 {
        s.flag(
            Status::Warn,
            "Returned items lack locator values (page, quote…): fill the locator columns so every hit is traceable.",
        );
    }
    s.detail = json!({"slice_items": f.slice_items, "searchable": f.searchable,
                      "incomplete_parents": f.incomplete_parents, "items_hidden_by_incomplete_parents": incomplete_items,
                      "below_min_length": short, "excluded_by_source_rule": f.rule_excluded,
                      "orphans": orphans, "unresolved_locators": unresolved, "sampling": sampling.detail()});
    s
}

/// Whether the corpus is a small slice of its item table ([`partial_index_advice`]'s figures),
/// so that the planner is asked whether a partial HNSW index serves it.
pub fn small_slice(src: &Source, searchable: i64, table_rows: f64) -> bool {
    partial_index_advice(src, searchable, table_rows, false).is_some()
}

/// The `indexes` row ([`judge_indexes`]) with the small slice's verdict: a small slice that no
/// partial HNSW index serves (`served`) warns with the index to build.
pub fn judge_slice_index(mut row: CheckRow, src: &Source, searchable: i64, table_rows: f64, served: bool) -> CheckRow {
    if let Some(hint) = partial_index_advice(src, searchable, table_rows, served) {
        row.count += 1;
        row.flag(Status::Warn, hint);
    }
    if let Value::Object(m) = &mut row.detail {
        m.insert("small_slice".into(), json!(small_slice(src, searchable, table_rows)));
        m.insert("served_by_partial_hnsw".into(), json!(served));
    }
    row
}

/// A corpus at most this share of its item table's rows wants a `corpus_bm25` index that holds
/// its isolation columns: through an index on the BM25 column alone its ranking's first page is
/// about window / share rows of the whole table.
pub const BM25_KEY_COLUMNS_MAX_SHARE: f64 = 0.5;

/// The `indexes` row with the lexical slice's verdict: a corpus that is a slice of its item
/// table (at most [`BM25_KEY_COLUMNS_MAX_SHARE`] of `table_rows`) whose `corpus_bm25` index does
/// not hold the isolation columns it could hold ([`Source::isolation_index_keys`]) warns with
/// the index to build in its place.
pub fn judge_bm25_key_columns(
    mut row: CheckRow,
    src: &Source,
    indexes: &[IndexInfo],
    searchable: i64,
    table_rows: f64,
) -> CheckRow {
    let share = if table_rows > 0.0 { searchable as f64 / table_rows } else { 1.0 };
    let holdable: Vec<String> = src.isolation_index_keys().into_iter().map(String::from).collect();
    if !src.isolation_held_by(&holdable) || share > BM25_KEY_COLUMNS_MAX_SHARE {
        return row;
    }
    let bm25: Vec<&IndexInfo> = indexes
        .iter()
        .filter(|x| {
            x.valid && !x.partial && x.am == "corpus_bm25" && x.columns.first().is_some_and(|c| c == &src.tsv.column)
        })
        .collect();
    // (without one, the missing index's hint already names the isolation columns)
    if bm25.is_empty() || src.index_holds_isolation() {
        return row;
    }
    let name = |x: &IndexInfo| if x.qualified.is_empty() { ident(&x.name) } else { x.qualified.clone() };
    // (an index with other key columns may serve another corpus: only one on the BM25 column
    // alone is named to drop)
    let drop = bm25
        .iter()
        .find(|x| x.columns.len() == 1)
        .map(|x| format!(" DROP INDEX CONCURRENTLY {};", name(x)))
        .unwrap_or_default();
    row.count += 1;
    row.flag(
        Status::Warn,
        format!(
            "The corpus is {:.1}% of {}: ranking through {} reads the whole table's postings to find its rows; an index holding its isolation columns ranks its own rows: CREATE INDEX CONCURRENTLY ON {} USING corpus_bm25 ({});{drop}",
            share * 100.0,
            qualified(&src.item.schema, &src.item.name),
            name(bm25[0]),
            qualified(&src.item.schema, &src.item.name),
            bm25_index_columns(src)
        ),
    );
    row
}

/// Queued items older than this warn (no worker seems to run).
pub const QUEUE_WAIT_WARN_SECONDS: i64 = 3600;

/// The `reembed_queue` row of source `idx` from [`queue_query`]'s row (`queue`, per table)
/// and the corpus' own `queued` and `dead` items: a missing or disabled re-embed trigger fails
/// (text changes go unnoticed); dead letters and items queued over
/// [`QUEUE_WAIT_WARN_SECONDS`] warn.
pub fn judge_queue(corpus: &Corpus, idx: usize, queue: Value, queued: i64, dead: i64, sampling: &Sampling) -> CheckRow {
    let src = &corpus.sources[idx];
    let mut q = CheckRow::new("reembed_queue", Some(&corpus.name), Some(&src.name));
    let v = queue;
    q.count = queued;
    if int(&v, "slots") == 0 || int(&v, "enabled_triggers") == 0 {
        q.count = q.count.max(1);
        q.flag(
            Status::Fail,
            match v.get("trigger_name").and_then(Value::as_str) {
                Some(trigger) if int(&v, "slots") > 0 => format!(
                    "The re-embed trigger is disabled (or fires only as a replica trigger), so text changes are not noticed: ALTER TABLE {0} ENABLE TRIGGER {1}; then queue what changed meanwhile: SELECT corpus.corpus_embedding_enqueue({2}, {3}, only_missing => false); (or re-register the source: SELECT corpus.corpus_drop_source({4}, {5}); then corpus.corpus_add_source(...) as before)",
                    qualified(&src.item.schema, &src.item.name),
                    ident(trigger),
                    crate::sql::literal(&qualified(&src.item.schema, &src.item.name)),
                    crate::sql::literal(&src.embedding.column),
                    crate::sql::literal(&corpus.name),
                    crate::sql::literal(&src.name)
                ),
                _ => format!(
                    "The re-embed trigger is missing, so text changes are not noticed: re-register the source: SELECT corpus.corpus_drop_source({0}, {1}); then corpus.corpus_add_source(...) as before",
                    crate::sql::literal(&corpus.name),
                    crate::sql::literal(&src.name)
                ),
            },
        );
    }
    if dead > 0 {
        q.flag(Status::Warn, "Dead letters: items the worker failed to embed repeatedly; see last_error in corpus.embedding_queue, fix, then SELECT corpus.corpus_embedding_retry_dead();");
    }
    if queued > 0 && int(&v, "table_oldest_seconds") > QUEUE_WAIT_WARN_SECONDS {
        q.flag(Status::Warn, "Queued items have waited over an hour: is a re-embed worker running (pg-corpus-worker)?");
    }
    let mut v = v;
    if let Value::Object(m) = &mut v {
        m.insert("queued".into(), json!(queued));
        m.insert("dead_letters".into(), json!(dead));
        m.insert("sampling".into(), sampling.detail());
    }
    q.detail = v;
    q
}

/// The `audit_log` row of a corpus that keeps one: its rows and their time range (`summary`:
/// None when this role may not read the log), and the searches this backend could not log
/// (`skipped`: on a standby or in a read-only transaction), which warn.
pub fn judge_audit_log(
    corpus: &Corpus,
    skipped: u64,
    summary: Option<(i64, Option<String>, Option<String>)>,
) -> CheckRow {
    let mut row = CheckRow::new("audit_log", Some(&corpus.name), None);
    row.detail = match summary {
        Some((n, oldest, newest)) => {
            row.count = n;
            json!({"rows": n, "oldest": oldest, "newest": newest, "query_text": corpus.audit.query_text,
                   "skipped_in_this_session": skipped})
        }
        None => json!({"readable": false, "query_text": corpus.audit.query_text, "skipped_in_this_session": skipped}),
    };
    if skipped > 0 {
        row.flag(
            Status::Warn,
            "Searches on a hot standby or in a read-only transaction are not logged (nothing can be written there); \
             run audited searches on the primary in read-write transactions.",
        );
    }
    row
}

#[cfg(test)]
mod partial_index_tests {
    use super::*;
    use crate::testing::legal;

    #[test]
    fn a_small_slice_gets_the_sql_of_its_partial_index_quoted() {
        let c = legal();
        let src = &c.sources[0];
        assert!(partial_index_advice(src, 500, 100_000.0, false).is_none(), "few items: exact is cheap");
        assert!(partial_index_advice(src, 50_000, 100_000.0, false).is_none(), "half the table");
        assert!(partial_index_advice(src, 5_000, 100_000.0, true).is_none(), "already served");
        let hint = partial_index_advice(src, 5_000, 100_000.0, false).unwrap();
        assert!(hint.contains("5.0% of \"public\".\"precedent_chunks\""), "{hint}");
        assert!(
            hint.contains("ALTER TABLE \"public\".\"precedent_chunks\" ADD COLUMN \"source_kind\" text;"),
            "{hint}"
        );
        assert!(hint.contains("p.\"id\" = i.\"case_law_id\""), "{hint}");
        assert!(
            hint.contains("USING hnsw (\"embedding\" vector_cosine_ops) WHERE \"source_kind\" = 'external_upload';"),
            "{hint}"
        );
    }

    #[test]
    fn isolation_values_in_the_advice_are_literals() {
        let mut c = legal();
        let src = &mut c.sources[0];
        src.isolation[0].values = vec!["e', false); DROP TABLE victim; --".into(), "b".into()];
        let hint = partial_index_advice(src, 5_000, 100_000.0, false).unwrap();
        assert!(hint.contains("IN ('e'', false); DROP TABLE victim; --', 'b')"), "{hint}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Strategy;
    use crate::plan::{lexical, semantic};
    use crate::testing::legal;

    #[test]
    fn sampling_starts_above_the_threshold() {
        assert_eq!(sample_percent(1000.0), None);
        let pct = sample_percent(1_000_000.0).unwrap();
        assert!((pct - 5.0).abs() < 1e-9);
    }

    #[test]
    fn contract_sql_counts_inside_the_isolation_only() {
        let c = legal();
        let q = contract_sql(&c, 1, None);
        assert!(q.sql().contains("WHERE (p.\"source_kind\" = $"), "{}", q.sql());
        assert!(q.params().contains(&Param::Text("external_upload".into())));
        assert!(q.sql().contains("i.\"review_status\" = $"));
        assert!(contract_sql(&c, 0, Some(5.0)).sql().contains("TABLESAMPLE SYSTEM (5)"));
    }

    #[test]
    fn probes_come_from_outside_the_corpus() {
        let c = legal();
        let q = foreign_probes_sql(&c, 0, 5).unwrap();
        assert!(q.sql().contains("WHERE NOT COALESCE((p.\"source_kind\" = $"), "{}", q.sql());
    }

    #[test]
    fn static_audit_accepts_generated_subplans_and_rejects_others() {
        let c = legal();
        for idx in 0..2 {
            let src = &c.sources[idx];
            for p in [
                semantic(&c, idx, &[], &[0.0; 384], 10, Strategy::Exact),
                semantic(&c, idx, &[], &[0.0; 384], 10, Strategy::Approximate),
                lexical(&c, idx, &[], "x", 10),
            ] {
                assert!(carries_isolation(src, &p.sql, &p.params), "{}", p.sql);
                let stripped = p.sql.replace("p.\"source_kind\" = $", "p.\"court\" = $");
                assert!(!carries_isolation(src, &stripped, &p.params));
                let other: Vec<Param> = p
                    .params
                    .iter()
                    .map(|x| {
                        if *x == Param::Text("external_upload".into()) {
                            Param::Text("internal_committee".into())
                        } else {
                            x.clone()
                        }
                    })
                    .collect();
                assert!(!carries_isolation(src, &p.sql, &other));
            }
        }
    }

    #[test]
    fn a_slice_whose_bm25_index_lacks_its_isolation_column_is_told_the_index_that_holds_it() {
        let bm25 = |name: &str, cols: &[&str]| IndexInfo {
            name: name.into(),
            am: "corpus_bm25".into(),
            valid: true,
            columns: cols.iter().map(|c| c.to_string()).collect(),
            opclasses: vec!["bm25_tsvector_ops".into()],
            partial: false,
            qualified: format!("public.{name}"),
            definition: String::new(),
            oid: 0,
        };
        let judge = |src: &Source, indexes: &[IndexInfo], share: f64| {
            let row = judge_indexes("x", src, indexes);
            judge_bm25_key_columns(row, src, indexes, (share * 1000.0) as i64, 1000.0)
        };
        // the source as the catalog describes it: its usable indexes' key columns (a key
        // column of another collation than the column's, or of a partial or expression index,
        // is not listed)
        let listed = |src: &Source, keys: &[&str]| {
            let mut s = src.clone();
            s.tsv_index = true;
            s.tsv_index_keys = vec![keys.iter().map(|k| k.to_string()).collect()];
            s
        };
        // the isolation column is the parent's only: no index of the item table can hold it
        let legal = legal();
        assert!(legal.sources[0].isolation_index_keys().is_empty());
        let row = judge(&legal.sources[0], &[bm25("b", &["content_tsv"])], 0.1);
        assert!(!row.hint.contains("DROP INDEX CONCURRENTLY public.b"), "{}", row.hint);
        // the item table carries a copy of it: the index should hold the copy
        let mut d = crate::testing::legal_def();
        d["sources"][0]["item"]["columns"]["source_kind"] = d["sources"][0]["parent"]["columns"]["source_kind"].clone();
        let c = crate::definition::resolve(&serde_json::from_value(d).unwrap()).unwrap();
        let src = &c.sources[0];
        assert_eq!(src.isolation_index_keys(), vec!["source_kind"]);
        let row = judge(src, &[bm25("b", &["content_tsv"])], 0.1);
        assert!(
            row.hint.contains(
                "CREATE INDEX CONCURRENTLY ON \"public\".\"precedent_chunks\" USING corpus_bm25 (\"content_tsv\", \"source_kind\"); DROP INDEX CONCURRENTLY public.b;"
            ),
            "{}",
            row.hint
        );
        assert_eq!(row.detail["lexical_bm25_index_holds_isolation"], false);
        // most of the table: the plain index ranks it as well
        assert!(!judge(src, &[bm25("b", &["content_tsv"])], 0.9).hint.contains("DROP INDEX CONCURRENTLY public.b"));
        // another key column's index (another corpus'): the new index is named, none to drop
        let row = judge(&listed(src, &["page_number"]), &[bm25("t", &["content_tsv", "page_number"])], 0.1);
        assert!(row.hint.contains("USING corpus_bm25 (\"content_tsv\", \"source_kind\");"), "{}", row.hint);
        assert!(!row.hint.contains("DROP INDEX"), "{}", row.hint);
        // an index that holds it: nothing to say
        let row = judge(&listed(src, &["source_kind"]), &[bm25("b2", &["content_tsv", "source_kind"])], 0.1);
        assert!(!row.hint.contains("corpus_bm25 ("), "{}", row.hint);
        assert_eq!(row.detail["lexical_bm25_index_holds_isolation"], true);
        // one whose key column has another collation than the column (a search cannot take
        // it to hold the values): the index that holds them is named
        let row = judge(&listed(src, &[]), &[bm25("b3", &["content_tsv", "source_kind"])], 0.1);
        assert!(row.hint.contains("USING corpus_bm25 (\"content_tsv\", \"source_kind\");"), "{}", row.hint);
        assert_eq!(row.detail["lexical_bm25_index_holds_isolation"], false);
        // the planner's view: the index's key columns as the catalog lists them
        let mut held = src.clone();
        held.tsv_index = true;
        assert!(!held.index_holds_isolation());
        held.tsv_index_keys = vec![vec!["page_number".into()], vec!["source_kind".into()]];
        assert!(held.index_holds_isolation());
        assert_eq!((held.index_share(0.05), src.index_share(0.05)), (1.0, 0.05));
    }

    #[test]
    fn indexes_are_judged() {
        let c = legal();
        let src = &c.sources[0];
        let idx = |name: &str, am: &str, col: &str, opc: &str, valid: bool| IndexInfo {
            name: name.into(),
            am: am.into(),
            valid,
            columns: vec![col.into()],
            opclasses: vec![opc.into()],
            partial: false,
            qualified: format!("public.{name}"),
            definition: format!("CREATE INDEX {name} ON public.t USING {am} ({col})"),
            oid: 0,
        };
        let good = vec![
            idx("e", "hnsw", "embedding", "vector_cosine_ops", true),
            idx("t", "gin", "content_tsv", "tsvector_ops", true),
            idx("f", "btree", "case_law_id", "int8_ops", true),
            idx("pk", "btree", "id", "int8_ops", true),
            idx("b", "corpus_bm25", "content_tsv", "bm25_tsvector_ops", true),
        ];
        let without = |name: &str| good.iter().filter(|x| x.name != name).cloned().collect::<Vec<_>>();
        assert_eq!(judge_indexes("x", src, &good).status, Status::Ok);
        // without pg_corpus' analyser nothing to rank with; with it, the BM25 index is recommended
        assert_eq!(judge_indexes("x", src, &without("b")).status, Status::Ok);
        let mut hebrew = src.clone();
        hebrew.language = Some(crate::model::Language::parse("hebrew").unwrap());
        let row = judge_indexes("x", &hebrew, &without("b"));
        assert_eq!((row.status, row.count), (Status::Warn, 1));
        assert!(
            row.hint.ends_with(
                "CREATE INDEX CONCURRENTLY ON \"public\".\"precedent_chunks\" USING corpus_bm25 (\"content_tsv\");"
            ),
            "{}",
            row.hint
        );
        assert_eq!(row.detail["lexical_bm25_index"], false);
        // a damaged one: the failure's fix comes first
        let mut row = judge_indexes("x", src, &without("pk"));
        judge_bm25_damage(&mut row, &good[4], "page 3 is not a page of the index");
        assert_eq!((row.status, row.count), (Status::Fail, 2));
        assert!(
            row.hint.starts_with(
                "The BM25 index is damaged (page 3 is not a page of the index): REINDEX INDEX CONCURRENTLY public.b;"
            ),
            "{}",
            row.hint
        );
        assert_eq!(row.detail["bm25_index_damage"], "page 3 is not a page of the index");
        let audit = judge_audit_blocked("x", "b: page 3 is not a page of the index");
        assert_eq!((audit.check, audit.status, audit.count), ("isolation_audit", Status::Fail, 1));
        assert_eq!(audit.detail["blocked_by"], "b: page 3 is not a page of the index");
        let row = judge_indexes("x", src, &without("pk"));
        assert_eq!((row.status, row.count), (Status::Warn, 1));
        assert!(row.hint.contains("CREATE UNIQUE INDEX ON \"public\".\"precedent_chunks\" (\"id\");"), "{}", row.hint);
        let mut wrong_ops = good.clone();
        wrong_ops[0] = idx("e", "hnsw", "embedding", "vector_l2_ops", true);
        assert_eq!(judge_indexes("x", src, &wrong_ops).status, Status::Fail);
        let mut invalid = good.clone();
        invalid[1].valid = false;
        let row = judge_indexes("x", src, &invalid);
        // invalid, and so the tsvector is not covered either
        assert_eq!((row.status, row.count), (Status::Fail, 2));
        assert!(row.hint.contains("DROP INDEX CONCURRENTLY public.t;"), "{}", row.hint);
        let mut partial = good.clone();
        partial[0].partial = true;
        assert_eq!(judge_indexes("x", src, &partial).status, Status::Warn);
        let row = judge_indexes("x", src, &without("e"));
        assert_eq!(row.status, Status::Warn);
        assert!(row.hint.contains("USING hnsw"));
    }

    #[test]
    fn the_citus_row_names_each_node_that_differs_from_the_coordinator() {
        let node = |port: &str, version: &str, slots: Value, scan: Value| json!({"host": "10.0.0.2", "port": port, "pg_corpus": version, "slots": slots, "iterative_scan": scan});
        let coordinator = json!({"pg_corpus": "0.3.0", "slots": ["public.chunks.embedding"]});
        let good = json!({"database": "le\"gal", "coordinator": coordinator, "nodes": [
            node("5432", "0.3.0", json!(["public.chunks.embedding"]), json!("relaxed_order"))]});
        let row = judge_citus(&good);
        assert_eq!((row.status, row.count), (Status::Ok, 0), "{:?}", row.detail);
        let bad = json!({"database": "le\"gal", "coordinator": coordinator, "nodes": [
            node("5432", "0.3.0", json!(["public.chunks.embedding"]), Value::Null),
            node("5433", "0.2.0", json!([]), json!("off"))]});
        let row = judge_citus(&bad);
        assert_eq!((row.status, row.count), (Status::Fail, 4));
        assert_eq!(row.detail["iterative_scan_off"], json!(["10.0.0.2:5432", "10.0.0.2:5433"]));
        assert_eq!(row.detail["slots_differ"], json!(["10.0.0.2:5433"]));
        let scan_only = json!({"database": "le\"gal", "coordinator": coordinator, "nodes": [
            node("5432", "0.3.0", json!(["public.chunks.embedding"]), json!("off"))]});
        let row = judge_citus(&scan_only);
        assert_eq!(row.status, Status::Warn);
        assert!(row.hint.contains("ALTER DATABASE \"le\"\"gal\" SET hnsw.iterative_scan"), "{}", row.hint);
        let gone = json!({"database": "x", "coordinator": coordinator, "nodes": [
            {"host": "10.0.0.3", "port": "5432", "unreachable": "could not connect"}]});
        let row = judge_citus(&gone);
        assert_eq!((row.status, row.count), (Status::Fail, 1));
        assert_eq!(row.detail["unreachable"][0]["node"], "10.0.0.3:5432");
        assert!(row.detail["version_differs"].as_array().unwrap().is_empty(), "reported once, as unreachable");
    }
}

#[cfg(test)]
mod rules_tests {
    use super::*;
    use crate::error::SqlState;
    use crate::testing::legal;

    #[test]
    fn a_build_says_how_far_it_is_when_it_ends_and_what_to_run() {
        let c = legal();
        let mut row = CheckRow::new("embeddings", Some("c"), Some("chunks"));
        let builds = [json!({"column": "embedding_v2", "model": "m2", "waiting": 300, "seconds": 70.0})];
        judge_builds(&mut row, &c, 0, &builds, 1000.0);
        assert_eq!((row.status, row.count), (Status::Warn, 1));
        assert_eq!(row.detail["building"][0]["percent"], 70);
        // 700 items in 70 s: 300 more in 30 s
        assert!((row.detail["building"][0]["eta_seconds"].as_f64().unwrap() - 30.0).abs() < 1e-9);
        assert!(row
            .hint
            .starts_with("Building \"embedding_v2\" (model m2): 70% (700 of 1000 items), about 1 min left"));
        assert!(row.hint.ends_with(
            "SELECT corpus.corpus_embedding_switch('\"public\".\"precedent_chunks\"', 'embedding', 'embedding_v2');"
        ));
        let mut done = CheckRow::new("embeddings", Some("c"), Some("chunks"));
        judge_builds(&mut done, &c, 0, &[json!({"column": "e2", "model": "m2", "waiting": 0, "seconds": 5.0})], 10.0);
        assert!(done.hint.contains("are built: switch searches to them"), "{}", done.hint);
        // a build that switches by itself says so, before and after its backlog empties
        let mut auto = CheckRow::new("embeddings", Some("c"), Some("chunks"));
        let b = json!({"column": "e2", "model": "m2", "waiting": 4, "seconds": 5.0, "auto": true});
        judge_builds(&mut auto, &c, 0, &[b], 10.0);
        assert!(auto.hint.ends_with("searches switch to it by themselves when no item waits"), "{}", auto.hint);
        assert_eq!(auto.detail["building"][0]["auto_switch"], true);
        let mut built = CheckRow::new("embeddings", Some("c"), Some("chunks"));
        let b = json!({"column": "e2", "model": "m2", "waiting": 0, "seconds": 5.0, "auto": true});
        judge_builds(&mut built, &c, 0, &[b], 10.0);
        assert!(built.hint.contains("next call switches searches") && built.hint.contains("corpus_embedding_switch("));
        let mut none = CheckRow::new("embeddings", Some("c"), Some("chunks"));
        judge_builds(&mut none, &c, 0, &[], 10.0);
        assert_eq!((none.status, none.hint.as_str()), (Status::Ok, ""));
    }

    #[test]
    fn pgvector_before_0_8_2_is_vulnerable_and_an_unreadable_version_is_not_judged() {
        for (version, vulnerable) in [
            ("0.8.1", true),
            ("0.8", true),
            ("0.7.4", true),
            ("0.8.2", false),
            ("0.8.3", false),
            ("0.9", false),
            ("1.0.0", false),
            ("0", false),
            ("", false),
            ("dev", false),
        ] {
            assert_eq!(pgvector_vulnerable(version), vulnerable, "{version}");
        }
    }

    #[test]
    fn the_version_row_fails_on_a_library_mismatch_and_warns_on_pgvector() {
        let row = judge_version("0.3.0", "0.3.0", "0.8.2");
        assert_eq!((row.check, row.status, row.count, row.hint.as_str()), ("version", Status::Ok, 0, ""));
        assert_eq!(row.detail, json!({"installed": "0.3.0", "library": "0.3.0", "pgvector": "0.8.2"}));
        let row = judge_version("0.2.0", "0.3.0", "0.8.2");
        assert_eq!((row.status, row.count), (Status::Fail, 1));
        assert_eq!(
            row.hint,
            "The loaded library is 0.3.0: run ALTER EXTENSION pg_corpus UPDATE TO '0.3.0'; (or reinstall the 0.2.0 library)."
        );
        let row = judge_version("0.3.0", "0.3.0", "0.8.0");
        assert_eq!((row.status, row.count), (Status::Warn, 1));
        assert!(row.hint.starts_with("pgvector < 0.8.2 carries CVE-2026-3172 (parallel HNSW build): build HNSW indexes with SET max_parallel_maintenance_workers = 0,"), "{}", row.hint);
        let row = judge_version("0.2.0", "0.3.0", "0.8.0");
        assert_eq!((row.status, row.count), (Status::Fail, 2));
        assert!(row.hint.starts_with("The loaded library is 0.3.0"), "the first defect's hint: {}", row.hint);
    }

    #[test]
    fn the_privileges_row_fails_for_public_and_warns_for_other_writers() {
        let row = judge_privileges(false, json!([]));
        assert_eq!((row.check, row.status, row.count), ("privileges", Status::Ok, 0));
        assert_eq!(row.detail, json!({"public_can_create": false, "catalog_writers": []}));
        let row = judge_privileges(true, json!([]));
        assert_eq!(
            (row.status, row.count, row.hint.as_str()),
            (Status::Fail, 1, "REVOKE CREATE ON SCHEMA corpus FROM PUBLIC;")
        );
        let public = |table: &str| json!({"table": table, "column": null, "grantee": "PUBLIC", "privilege": "INSERT"});
        let writer = json!({"table": "corpora", "column": "name", "grantee": "alice", "privilege": "UPDATE"});
        let row = judge_privileges(false, json!([public("embedding_queue"), public("corpora")]));
        assert_eq!((row.status, row.count), (Status::Fail, 2));
        assert_eq!(row.hint, "REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA corpus FROM PUBLIC;");
        let row = judge_privileges(false, json!([writer]));
        assert_eq!((row.status, row.count), (Status::Warn, 1));
        assert!(
            row.hint.starts_with("These roles can redefine corpora (isolation predicates included)"),
            "{}",
            row.hint
        );
        assert!(row.hint.ends_with("(column grants: REVOKE UPDATE (column) ON ...)"), "{}", row.hint);
        let all = json!([public("corpora"), writer]);
        let row = judge_privileges(true, all.clone());
        assert_eq!((row.status, row.count), (Status::Fail, 3));
        assert_eq!(row.hint.lines().next(), Some("REVOKE CREATE ON SCHEMA corpus FROM PUBLIC;"));
        assert_eq!(row.hint.lines().count(), 3, "{}", row.hint);
        assert_eq!(row.detail, json!({"public_can_create": true, "catalog_writers": all}));
    }

    #[test]
    fn a_corpus_that_no_longer_loads_fails_with_the_loading_errors_hint() {
        let e = CoreError::new(SqlState::UndefinedColumn, "column \"x\" is gone", "Restore it.");
        let row = judge_unloadable("c", &e);
        assert_eq!(
            (row.check, row.corpus.as_deref(), row.status, row.count),
            ("catalog_drift", Some("c"), Status::Fail, 1)
        );
        assert_eq!(row.hint, "Restore it.");
        assert_eq!(row.detail, json!({"error": "column \"x\" is gone", "sqlstate": "42703", "detail": e.detail}));
    }

    #[test]
    fn a_retyped_column_is_catalog_drift() {
        let mut c = legal();
        let row = judge_drift(&c);
        assert_eq!((row.status, row.count), (Status::Ok, 0));
        assert_eq!(row.detail, json!({"sources": ["chunks", "halachot"], "retyped": []}));
        c.name = "o'brien".into();
        c.sources[0].column_types = json!({"item": {"page_number": "text"}});
        let row = judge_drift(&c);
        assert_eq!((row.status, row.count), (Status::Fail, 1));
        assert_eq!(
            row.detail["retyped"],
            json!([{"source": "chunks", "table": "item", "column": "page_number", "defined_as": "text", "now": "integer"}])
        );
        assert_eq!(
            row.hint,
            "Registered columns changed type since the corpus was defined (locators and filters change with them): restore the types, or accept them with SELECT corpus.corpus_alter('o''brien');"
        );
    }

    #[test]
    fn the_analysis_row_names_the_rows_to_analyse_again() {
        let c = legal();
        let src = &c.sources[0];
        let text = &src.text.column;
        let lang = analyser_expression(src, &format!("corpus.bm25_document({text}, 'czech'::text)"));
        assert_eq!(lang, Some(crate::model::Language::Czech));
        assert_eq!(analyser_expression(src, &format!("bm25_document({text},'cs'::text)")), lang);
        for other in [
            format!("corpus.bm25_document((title || {text}), 'czech'::text)"),
            "corpus.bm25_document(other, 'czech'::text)".to_string(),
            format!("to_tsvector('simple'::regconfig, {text})"),
            format!("corpus.bm25_document({text}, 'klingon'::text)"),
        ] {
            assert_eq!(analyser_expression(src, &other), None, "{other}");
        }
        let q = analysis_sample_query(src, crate::model::Language::Czech);
        assert!(q.sql().contains("LIMIT 500") && q.params() == [Param::Text("czech".into())], "{}", q.sql());
        let row = judge_analysis("o'c", src, Ok(crate::model::Language::Czech), (500, 0));
        assert_eq!((row.check, row.status, row.count, row.hint.as_str()), ("analysis", Status::Ok, 0, ""));
        let row = judge_analysis("o'c", src, Ok(crate::model::Language::Czech), (500, 7));
        assert_eq!((row.status, row.count), (Status::Warn, 7));
        assert!(
            row.hint.ends_with(&format!("CALL corpus.corpus_reanalyze('o''c', {});", crate::sql::literal(&src.name))),
            "{}",
            row.hint
        );
        let batch = reanalyze_batch_sql(src);
        assert!(batch.contains(&format!("SET {0} = u.{0}", crate::sql::ident(text))), "{batch}");
        assert!(batch.contains("IS DISTINCT FROM corpus.bm25_document(") && batch.contains("LIMIT $2"), "{batch}");
        let row = judge_analysis("c", src, Err("not generated"), (0, 0));
        assert_eq!((row.status, row.detail["checked"].clone()), (Status::Ok, json!(false)));
    }

    #[test]
    fn the_evidence_row_says_which_spaces_have_no_vector_rule() {
        let mut c = legal();
        c.spaces[0].model = Some("e5".into());
        let row = judge_evidence(&c);
        assert_eq!((row.status, row.count, row.hint.as_str()), (Status::Ok, 1, ""));
        assert!(row.detail["vector_rule"]["default"]["off"].as_str().unwrap().contains("no evidence thresholds"));
        // filtering by default without the vector rule: a warning whose hint calibrates
        c.evidence = crate::evidence::parse(&json!({"enabled": true}), &c.spaces).unwrap();
        let row = judge_evidence(&c);
        assert_eq!((row.status, row.count), (Status::Warn, 1));
        assert!(
            row.hint.contains("space \"default\"") && row.hint.contains("corpus_calibrate_evidence"),
            "{}",
            row.hint
        );
        // thresholds of another model are off too; of this model, on
        let cfg =
            json!({"enabled": true, "vector": {"default": {"max_distance": 0.2, "max_gap": 0.03, "model": "bge"}}});
        c.evidence = crate::evidence::parse(&cfg, &c.spaces).unwrap();
        assert_eq!(judge_evidence(&c).status, Status::Warn);
        let cfg =
            json!({"enabled": true, "vector": {"default": {"max_distance": 0.2, "max_gap": 0.03, "model": "e5"}}});
        c.evidence = crate::evidence::parse(&cfg, &c.spaces).unwrap();
        let row = judge_evidence(&c);
        assert_eq!((row.status, row.count), (Status::Ok, 0));
        assert_eq!(row.detail["vector_rule"], json!({"default": {"max_distance": 0.2, "max_gap": 0.03}}));
    }

    #[test]
    fn probes_search_with_the_first_thirty_words_in_the_modes_they_can_run() {
        assert_eq!(audit_depth(true), &THOROUGH);
        assert_eq!(audit_depth(false), &BROAD);
        assert_eq!((THOROUGH.probes, BROAD.probes), (3, 2));
        let text: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
        let words = probe_words(&format!("  {}\n", text.join(" \t ")));
        assert_eq!(words, text[..30].join(" "));
        assert_eq!(probe_words(" \n "), "");
        for (mode, text, vector, runs) in [
            ("hybrid", false, false, true),
            ("lexical", true, false, true),
            ("lexical", false, true, false),
            ("semantic", false, true, true),
            ("semantic", true, false, false),
        ] {
            assert_eq!(probe_runs(mode, text, vector), runs, "{mode} {text} {vector}");
        }
    }

    #[test]
    fn the_static_audit_checks_four_subplans_per_source() {
        assert_eq!(static_isolation_audit(&legal()), (8, Vec::new()));
    }

    #[test]
    fn a_hit_leaks_unless_its_parent_holds_a_declared_value() {
        let c = legal();
        let src = &c.sources[0];
        let values: HashMap<String, Value> = [
            ("1".to_string(), json!({"item_id": "1", "iso_0": "external_upload"})),
            ("2".to_string(), json!({"item_id": "2", "iso_0": "internal_committee"})),
            ("3".to_string(), json!({"item_id": "3", "iso_0": null})),
        ]
        .into_iter()
        .collect();
        let found = vec![("1".to_string(), "hybrid"), ("2".to_string(), "lexical"), ("3".to_string(), "hybrid")];
        let mut leaks = audit_hits(src, found, &values);
        leaks.extend(audit_hits(src, vec![("4".to_string(), "semantic")], &values));
        assert_eq!(
            leaks,
            vec![
                json!({"source": "chunks", "item_id": "2", "mode": "lexical", "parent": values["2"]}),
                json!({"source": "chunks", "item_id": "3", "mode": "hybrid", "parent": values["3"]}),
                json!({"source": "chunks", "item_id": "4", "mode": "semantic", "parent": null}),
            ]
        );
    }

    fn facts(probing: Probing) -> IsolationFacts {
        IsolationFacts {
            static_checked: 8,
            static_failures: Vec::new(),
            probing,
            probes: 4,
            searches: 12,
            hits_checked: 30,
            leaks: Vec::new(),
        }
    }

    #[test]
    fn the_isolation_row_says_what_was_probed_and_fails_on_any_leak() {
        let row = judge_isolation("c", &THOROUGH, facts(Probing::Ran));
        assert_eq!((row.check, row.status, row.count), ("isolation_audit", Status::Ok, 0));
        assert_eq!(
            row.detail,
            json!({"static_subplans_checked": 8, "static_failures": [], "probes": 4, "searches": 12,
                   "modes": ["hybrid", "semantic", "lexical"], "hits_checked": 30, "leaks": []})
        );
        let row = judge_isolation("c", &BROAD, IsolationFacts { probes: 0, ..facts(Probing::NoIsolation) });
        assert_eq!(row.detail["isolation"], "none: the corpus owns its tables");
        assert_eq!((row.detail["probes"].clone(), row.detail["modes"].clone()), (json!(0), json!(["hybrid"])));
        let row = judge_isolation("c", &BROAD, facts(Probing::NoFilterValues));
        assert_eq!(row.detail["probes"], "skipped: no searchable item to take required filter values from");
        assert!(row.detail.get("isolation").is_none());
        let leaks: Vec<Value> = (0..25).map(|i| json!({"item_id": i.to_string()})).collect();
        let row = judge_isolation("c", &BROAD, IsolationFacts { leaks: leaks.clone(), ..facts(Probing::Ran) });
        assert_eq!((row.status, row.count), (Status::Fail, 25));
        assert_eq!(row.detail["leaks"], json!(leaks[..LEAKS_LISTED]));
        assert_eq!(row.hint, "Searches returned items outside the corpus: check the isolation column values of the listed parents and the corpus definition (corpus.corpus_list()).");
        let failures = vec!["chunks/fetch".to_string()];
        let row = judge_isolation(
            "c",
            &BROAD,
            IsolationFacts { static_failures: failures, leaks: leaks[..1].to_vec(), ..facts(Probing::Ran) },
        );
        assert_eq!((row.status, row.count), (Status::Fail, 2));
        assert_eq!(row.detail["static_failures"], json!(["chunks/fetch"]));
        assert_eq!(row.hint.lines().next(), Some("A generated subplan lacks the corpus predicate: this is a pg_corpus bug; stop serving this corpus and report it."));
        assert_eq!(row.hint.lines().count(), 2, "{}", row.hint);
    }

    fn refreshed(documents: i64, changes_at_refresh: i64, changes_now: i64) -> LexicalFacts {
        LexicalFacts {
            refreshed: true,
            documents,
            terms: 7,
            total_length: 900,
            changes_at_refresh,
            changes_now,
            reset_since: false,
        }
    }

    #[test]
    fn bm25_statistics_are_stale_past_a_tenth_of_the_documents() {
        let refresh = "SELECT * FROM corpus.corpus_refresh_lexical_stats('o''k');";
        let row = judge_lexical_statistics("o'k", &refreshed(100, 50, 60), false);
        assert_eq!((row.check, row.status, row.count), ("lexical_statistics", Status::Ok, 0));
        assert_eq!(
            row.detail,
            json!({"refreshed": true, "documents": 100, "terms": 7, "total_length": 900, "rows_changed_since_refresh": 10,
                   "counters_reset": false, "stale_when_changed_over": "10% of documents (pg_stat_all_tables counters)"})
        );
        let row = judge_lexical_statistics("o'k", &refreshed(100, 50, 61), false);
        assert_eq!((row.status, row.count), (Status::Warn, 11));
        assert_eq!(row.hint, format!("More than 10% of the corpus changed since its BM25 statistics were computed: {refresh} (the reference worker does this automatically)."));
        // an empty corpus is stale after one change, not before
        assert!(!refreshed(0, 5, 5).is_stale(STALE_SHARE));
        assert!(refreshed(0, 5, 6).is_stale(STALE_SHARE));
        assert!(refreshed(100, 50, 71).is_stale(0.2) && !refreshed(100, 50, 70).is_stale(0.2));
        let never = LexicalFacts::default();
        let row = judge_lexical_statistics("o'k", &never, false);
        assert_eq!((row.status, row.count), (Status::Warn, 1));
        assert_eq!(row.hint, format!("BM25 statistics were never computed: {refresh}"));
        assert_eq!(row.detail["counters_reset"], false, "never refreshed is no reset");
        let reset_hint = format!("The table statistics counters were reset since the BM25 statistics were computed, so their staleness is unknown: {refresh}");
        for reset in [refreshed(100, 50, 10), LexicalFacts { reset_since: true, ..refreshed(100, 50, 50) }] {
            let row = judge_lexical_statistics("o'k", &reset, false);
            assert_eq!((row.status, row.count, row.hint.as_str()), (Status::Warn, 1, reset_hint.as_str()));
            assert_eq!(row.detail["counters_reset"], true);
            assert_eq!(row.detail["rows_changed_since_refresh"], 0, "never negative");
        }
    }

    #[test]
    fn a_standby_leaves_the_staleness_to_the_primary_and_an_unreadable_corpus_warns() {
        let row = judge_lexical_statistics("c", &refreshed(100, 50, 0), true);
        assert_eq!((row.status, row.count), (Status::Ok, 0));
        assert_eq!(
            row.detail,
            json!({"refreshed": true, "documents": 100, "terms": 7, "total_length": 900, "in_recovery": true,
                   "staleness": "judged by the primary's health check"})
        );
        let row = lexical_unreadable("c");
        assert_eq!(
            (row.check, row.corpus.as_deref(), row.status, row.count),
            ("lexical_statistics", Some("c"), Status::Warn, 0)
        );
        assert!(row.hint.starts_with("This role may not read every item of the corpus"), "{}", row.hint);
        assert_eq!(row.detail, json!({}));
    }

    #[test]
    fn sampled_counts_are_scaled_to_the_table() {
        let exact = Sampling::of(200_000.0);
        assert_eq!((exact.percent, exact.detail()), (None, json!({"counted": "exactly"})));
        assert_eq!(exact.estimate(&json!({"n": 7}), "n"), 7);
        let sampled = Sampling::of(1_000_000.0);
        assert_eq!(
            sampled.detail(),
            json!({"counted": "estimated from a TABLESAMPLE SYSTEM sample", "sample_percent": 5.0, "reltuples": 1_000_000.0})
        );
        assert_eq!(sampled.estimate(&json!({"n": 7}), "n"), 140);
        assert_eq!(sampled.estimate(&json!({"n": 7}), "missing"), 0);
        assert_eq!(sampled.estimate(&Value::Null, "n"), 0);
        let third = Sampling { percent: Some(30.0), reltuples: 1.0 };
        assert_eq!(third.estimate(&json!({"n": 1}), "n"), 3, "rounded: 3.33");
        assert_eq!(third.estimate(&json!({"n": 2}), "n"), 7, "rounded: 6.67");
        let f = ContractFigures::from_row(&json!({"searchable": 3, "queued": 1, "non_finite": 2}), &sampled);
        assert_eq!(f, ContractFigures { searchable: 60, queued: 20, non_finite: 40, ..ContractFigures::default() });
    }

    #[test]
    fn bad_vectors_fail_and_missing_or_stale_embeddings_warn() {
        let c = legal();
        let s = Sampling::of(10.0);
        let row = judge_embeddings(&c, 0, &ContractFigures { searchable: 9, ..Default::default() }, &s);
        assert_eq!(
            (row.check, row.source.as_deref(), row.status, row.count),
            ("embeddings", Some("chunks"), Status::Ok, 0)
        );
        assert_eq!(
            row.detail,
            json!({"searchable": 9, "missing": 0, "stale": 0, "zero_vectors": 0, "non_finite": 0, "dimensions": 384,
                   "sampling": {"counted": "exactly"}})
        );
        let row = judge_embeddings(
            &c,
            0,
            &ContractFigures { zero_vectors: 1, missing_embedding: 2, ..Default::default() },
            &s,
        );
        assert_eq!((row.status, row.count), (Status::Fail, 3));
        // every finding's fix, the failure's first
        assert_eq!(row.hint.lines().collect::<Vec<_>>(), vec!["Zero or non-finite vectors cannot be ranked: clear them so the re-embed trigger queues them, UPDATE \"public\".\"precedent_chunks\" SET \"embedding\" = NULL WHERE \"public\".vector_norm(\"embedding\") = 0; then fix the embedding producer.", "Searchable items without an embedding are invisible to the semantic branch: run the re-embed worker (pg-corpus-worker)."]);
        let row = judge_embeddings(&c, 0, &ContractFigures { non_finite: 1, ..Default::default() }, &s);
        assert_eq!((row.status, row.count), (Status::Fail, 1));
        let row = judge_embeddings(
            &c,
            1,
            &ContractFigures { missing_embedding: 2, stale_embedding: 3, ..Default::default() },
            &s,
        );
        assert_eq!((row.status, row.count), (Status::Warn, 5));
        assert_eq!(row.hint, "Searchable items without an embedding are invisible to the semantic branch: run the re-embed worker (pg-corpus-worker).\nEmbeddings describe old text: run the re-embed worker; see corpus.embedding_queue.");
        let row = judge_embeddings(&c, 1, &ContractFigures { stale_embedding: 3, ..Default::default() }, &s);
        assert_eq!(row.hint, "Embeddings describe old text: run the re-embed worker; see corpus.embedding_queue.");
    }

    #[test]
    fn the_searchable_contract_warns_about_every_hidden_item() {
        let c = legal();
        let s = Sampling::of(10.0);
        let all = ContractFigures {
            slice_items: 20,
            searchable: 10,
            incomplete_parents: 1,
            incomplete_parent_items: 2,
            short_text: 3,
            rule_excluded: 4,
            unresolved_locators: 5,
            ..Default::default()
        };
        let row = judge_searchable_contract(&c, 0, &all, 6, &s);
        assert_eq!((row.check, row.status, row.count), ("searchable_contract", Status::Warn, 16));
        assert_eq!(row.hint.lines().next(), Some("Parents missing required metadata (case_number, case_name) hide their items: fill those columns in the parent table."));
        assert_eq!(row.hint.lines().count(), 4, "every finding's fix: {}", row.hint);
        assert_eq!(
            row.detail,
            json!({"slice_items": 20, "searchable": 10, "incomplete_parents": 1, "items_hidden_by_incomplete_parents": 2,
                   "below_min_length": 3, "excluded_by_source_rule": 4, "orphans": 6, "unresolved_locators": 5,
                   "sampling": {"counted": "exactly"}})
        );
        let hint = |f: ContractFigures, orphans| judge_searchable_contract(&c, 0, &f, orphans, &s).hint;
        assert_eq!(hint(ContractFigures { short_text: 1, ..Default::default() }, 0), "Items shorter than min_length (50) are never returned: merge them into neighbouring chunks or lower min_length.");
        assert_eq!(
            hint(ContractFigures::default(), 1),
            "Items whose parent row is gone: DELETE them or restore the parents (and add a foreign key)."
        );
        assert_eq!(
            hint(ContractFigures { unresolved_locators: 1, ..Default::default() }, 0),
            "Returned items lack locator values (page, quote…): fill the locator columns so every hit is traceable."
        );
        let row = judge_searchable_contract(&c, 0, &ContractFigures { rule_excluded: 4, ..Default::default() }, 0, &s);
        assert_eq!((row.status, row.count), (Status::Ok, 0), "a source rule's exclusions are by design");
    }

    #[test]
    fn a_small_slice_without_a_serving_partial_index_warns() {
        let c = legal();
        let src = &c.sources[0];
        let ok = || CheckRow { detail: json!({"indexes": []}), ..CheckRow::new("indexes", Some("c"), Some("chunks")) };
        assert!(small_slice(src, 5_000, 100_000.0));
        assert!(!small_slice(src, 50_000, 100_000.0));
        let row = judge_slice_index(ok(), src, 5_000, 100_000.0, false);
        assert_eq!((row.status, row.count), (Status::Warn, 1));
        assert_eq!(Some(row.hint.clone()), partial_index_advice(src, 5_000, 100_000.0, false));
        assert_eq!(row.detail, json!({"indexes": [], "small_slice": true, "served_by_partial_hnsw": false}));
        let row = judge_slice_index(ok(), src, 5_000, 100_000.0, true);
        assert_eq!((row.status, row.count), (Status::Ok, 0));
        assert_eq!(row.detail, json!({"indexes": [], "small_slice": true, "served_by_partial_hnsw": true}));
        let row = judge_slice_index(ok(), src, 50_000, 100_000.0, false);
        assert_eq!((row.status, row.count, row.detail["small_slice"].clone()), (Status::Ok, 0, json!(false)));
    }

    #[test]
    fn the_queue_fails_without_its_trigger_and_warns_about_dead_letters_and_waiting_items() {
        let mut c = legal();
        c.name = "ext".into();
        let s = Sampling::of(10.0);
        let healthy = json!({"table_oldest_seconds": 3600, "table_expired_leases": 0, "slots": 1, "enabled_triggers": 1, "trigger_name": "t"});
        let row = judge_queue(&c, 0, healthy.clone(), 3, 0, &s);
        assert_eq!(
            (row.check, row.source.as_deref(), row.status, row.count),
            ("reembed_queue", Some("chunks"), Status::Ok, 3)
        );
        let mut detail = healthy.clone();
        detail["queued"] = json!(3);
        detail["dead_letters"] = json!(0);
        detail["sampling"] = json!({"counted": "exactly"});
        assert_eq!(row.detail, detail);
        let waited = json!({"table_oldest_seconds": 3601, "slots": 1, "enabled_triggers": 1});
        let row = judge_queue(&c, 0, waited.clone(), 1, 0, &s);
        assert_eq!((row.status, row.count), (Status::Warn, 1));
        assert_eq!(row.hint, "Queued items have waited over an hour: is a re-embed worker running (pg-corpus-worker)?");
        assert_eq!(judge_queue(&c, 0, waited, 0, 0, &s).status, Status::Ok, "nothing of this corpus waits");
        let row = judge_queue(&c, 0, healthy, 0, 2, &s);
        assert_eq!((row.status, row.count), (Status::Warn, 0));
        assert_eq!(row.hint, "Dead letters: items the worker failed to embed repeatedly; see last_error in corpus.embedding_queue, fix, then SELECT corpus.corpus_embedding_retry_dead();");
        let disabled =
            json!({"table_oldest_seconds": 0, "slots": 1, "enabled_triggers": 0, "trigger_name": "Emb\"Trg"});
        let row = judge_queue(&c, 0, disabled, 0, 0, &s);
        assert_eq!((row.status, row.count), (Status::Fail, 1));
        assert_eq!(row.hint, "The re-embed trigger is disabled (or fires only as a replica trigger), so text changes are not noticed: ALTER TABLE \"public\".\"precedent_chunks\" ENABLE TRIGGER \"Emb\"\"Trg\"; then queue what changed meanwhile: SELECT corpus.corpus_embedding_enqueue('\"public\".\"precedent_chunks\"', 'embedding', only_missing => false); (or re-register the source: SELECT corpus.corpus_drop_source('ext', 'chunks'); then corpus.corpus_add_source(...) as before)");
        let missing = json!({"table_oldest_seconds": 0, "slots": 0, "enabled_triggers": 0, "trigger_name": null});
        let row = judge_queue(&c, 1, missing, 5, 0, &s);
        assert_eq!((row.status, row.count), (Status::Fail, 5), "the queued items are the count");
        assert_eq!(row.hint, "The re-embed trigger is missing, so text changes are not noticed: re-register the source: SELECT corpus.corpus_drop_source('ext', 'halachot'); then corpus.corpus_add_source(...) as before");
        let row = judge_queue(&c, 1, Value::Null, 0, 0, &s);
        assert_eq!((row.status, row.count, row.detail.clone()), (Status::Fail, 1, Value::Null), "no queue row at all");
    }

    #[test]
    fn the_audit_log_row_counts_its_rows_and_warns_about_unlogged_searches() {
        let mut c = legal();
        c.audit.query_text = true;
        let row = judge_audit_log(&c, 0, Some((4, Some("2025-01-01".into()), None)));
        assert_eq!((row.check, row.status, row.count), ("audit_log", Status::Ok, 4));
        assert_eq!(
            row.detail,
            json!({"rows": 4, "oldest": "2025-01-01", "newest": null, "query_text": true, "skipped_in_this_session": 0})
        );
        let row = judge_audit_log(&c, 2, None);
        assert_eq!((row.status, row.count), (Status::Warn, 0));
        assert_eq!(row.detail, json!({"readable": false, "query_text": true, "skipped_in_this_session": 2}));
        assert_eq!(row.hint, "Searches on a hot standby or in a read-only transaction are not logged (nothing can be written there); run audited searches on the primary in read-write transactions.");
    }
}
