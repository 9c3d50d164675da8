//! `corpus_health_check`: the SQL of each check and the rules that turn its figures into
//! `ok` / `warn` / `fail` rows. The corpus predicate's parts come from `plan::scope_parts`
//! (still the one place they are written); the extension runs the SQL and the probe searches.

use serde::Serialize;
use serde_json::{json, Value};

use crate::model::{Corpus, Side, Source};
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

    /// Raise the status to `status` (never lower it) and set the hint if none is set yet.
    pub fn flag(&mut self, status: Status, hint: impl Into<String>) {
        if status > self.status {
            self.status = status;
        }
        if self.hint.is_empty() {
            self.hint = hint.into();
        }
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
    let parts = plan::scope_parts(src, &mut params);
    let text = coalesce_false(all(&parts.text));
    let complete = coalesce_false(all(&parts.parent_complete));
    let rule = coalesce_false(all(&parts.rule));
    let searchable = format!("({text} AND {complete} AND {rule})");
    let emb = plan::col(&src.embedding);
    let queued = plan::queued(src, &mut params);
    let dead = plan::queued_in_state(src, &mut params, Some("dead"));
    let locators: Vec<String> = src.locator.iter().map(|(_, c)| format!("{} IS NULL", plan::col(c))).collect();
    let unresolved = if locators.is_empty() { "false".to_string() } else { locators.join(" OR ") };
    let vs = ident(&corpus.vector_schema);
    let sql = format!(
        "SELECT count(*) AS slice_items,
       count(*) FILTER (WHERE NOT {text} AND {complete} AND {rule}) AS short_text,
       count(*) FILTER (WHERE NOT {complete} AND {text} AND {rule}) AS incomplete_parent_items,
       count(DISTINCT {fk}) FILTER (WHERE NOT {complete}) AS incomplete_parents,
       count(*) FILTER (WHERE NOT {rule}) AS rule_excluded,
       count(*) FILTER (WHERE {searchable}) AS searchable,
       count(*) FILTER (WHERE {searchable} AND {emb} IS NULL) AS missing_embedding,
       count(*) FILTER (WHERE {searchable} AND {emb} IS NOT NULL AND {queued}) AS stale_embedding,
       count(*) FILTER (WHERE {searchable} AND {queued}) AS queued,
       count(*) FILTER (WHERE {searchable} AND {dead}) AS dead_letters,
       count(*) FILTER (WHERE {emb} IS NOT NULL AND {vs}.vector_norm({emb}) = 0) AS zero_vectors,
       count(*) FILTER (WHERE {emb} IS NOT NULL
                          AND {emb}::real[] && '{{NaN,Infinity,-Infinity}}'::real[]) AS non_finite,
       count(*) FILTER (WHERE {searchable} AND ({unresolved})) AS unresolved_locators
{from}
WHERE {isolation}",
        fk = plan::col(&src.parent_fk),
        from = plan::from_clause_sampled(src, sample),
        isolation = all(&parts.isolation),
    );
    Query::new(sql, params.values)
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
       pg_catalog.pg_get_indexdef(x.indexrelid) AS definition
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
}

/// Judge a source's indexes: an ANN index on the embedding with the operator class of the
/// search's distance, a GIN index on the tsvector, an index leading with the parent key (the
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
    if ann_ok.is_empty() {
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
        row.flag(Status::Warn, format!("CREATE INDEX ON {table} USING gin ({});", ident(&src.tsv.column)));
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
    row.detail = json!({
        "ann_index": ann.first().map(|x| &x.name),
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
        };
        let good = vec![
            idx("e", "hnsw", "embedding", "vector_cosine_ops", true),
            idx("t", "gin", "content_tsv", "tsvector_ops", true),
            idx("f", "btree", "case_law_id", "int8_ops", true),
            idx("pk", "btree", "id", "int8_ops", true),
        ];
        assert_eq!(judge_indexes("x", src, &good).status, Status::Ok);
        let row = judge_indexes("x", src, &good[..3]);
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
        let row = judge_indexes("x", src, &good[1..]);
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
