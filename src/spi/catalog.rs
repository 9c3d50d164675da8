//! Corpus definitions: read from the catalog, resolved by the core, and kept per backend in
//! `pg_corpus_core::engine::cache` until PostgreSQL's invalidation messages say a catalog row
//! or a registered table changed (the rules are in that module).

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use pg_corpus_core::definition;
use pg_corpus_core::engine::cache::Cache;
use pg_corpus_core::model::{Corpus, CorpusDef};
use pg_corpus_core::{CoreError, SqlState};
use pgrx::datum::DatumWithOid;
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::jsonb::JsonbText;

use super::spi_failure;

thread_local! {
    static DEFINITIONS: RefCell<Cache<Corpus>> = RefCell::new(Cache::new());
    /// An invalidation arrived while the cache was borrowed: clear it at the next access.
    static MISSED: Cell<bool> = const { Cell::new(false) };
}

fn with_cache<T>(f: impl FnOnce(&mut Cache<Corpus>) -> T) -> T {
    DEFINITIONS.with(|c| {
        let mut c = c.borrow_mut();
        if MISSED.with(|m| m.replace(false)) {
            c.invalidate_all();
        }
        f(&mut c)
    })
}

/// Run `f` on the cache from an invalidation callback; when the cache is borrowed (a callback
/// fired inside a cache access), remember to clear it at the next access instead.
fn from_callback(f: impl FnOnce(&mut Cache<Corpus>)) {
    let done = DEFINITIONS.with(|c| c.try_borrow_mut().map(|mut c| f(&mut c)).is_ok());
    if !done {
        MISSED.with(|m| m.set(true));
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn relcache_callback(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    // InvalidOid (0): the whole relcache was reset
    from_callback(|c| c.invalidate_relation(i64::from(relid.to_u32())));
}

#[pg_guard]
unsafe extern "C-unwind" fn syscache_callback(_arg: pg_sys::Datum, cacheid: std::ffi::c_int, hash: u32) {
    // a type or schema changed: column type names and qualified table names may differ
    from_callback(|c| c.invalidate_syscache(cacheid, hash));
}

#[pg_guard]
unsafe extern "C-unwind" fn xact_callback(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    if matches!(
        event,
        pg_sys::XactEvent::XACT_EVENT_COMMIT
            | pg_sys::XactEvent::XACT_EVENT_ABORT
            | pg_sys::XactEvent::XACT_EVENT_PARALLEL_COMMIT
            | pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT
            | pg_sys::XactEvent::XACT_EVENT_PREPARE
    ) {
        from_callback(|c| c.end_of_transaction());
    }
}

/// Register the invalidation callbacks (from `_PG_init`, once per backend).
pub fn init() {
    // SAFETY: callbacks with the signatures PostgreSQL expects; they touch only the cache.
    unsafe {
        pg_sys::CacheRegisterRelcacheCallback(Some(relcache_callback), pg_sys::Datum::from(0));
        for cache in [pg_sys::SysCacheIdentifier::TYPEOID, pg_sys::SysCacheIdentifier::NAMESPACEOID] {
            pg_sys::CacheRegisterSyscacheCallback(cache as i32, Some(syscache_callback), pg_sys::Datum::from(0));
        }
        pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut());
    }
}

/// The catalog tables' statement trigger (src/lib.rs creates the function and the triggers on
/// corpus.corpora, corpus.sources and corpus.edges): an invalidation of the table, so every
/// backend's cached definitions are dropped when this transaction commits, this backend's at
/// its next command. Called other than as a trigger it does nothing and raises 0A000, as
/// PostgreSQL's own trigger functions do, so no role can send invalidations at will.
///
/// Written by hand rather than with `#[pg_trigger]`, whose wrapper answers a direct call with
/// an internal error (XX000).
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn _catalog_changed_wrapper(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the fcinfo PostgreSQL passed to this function.
    let trigger = unsafe {
        crate::trigger::trigger_data(
            fcinfo,
            "corpus._catalog_changed()",
            "It runs on changes of pg_corpus' catalog tables; change definitions with the corpus_* functions.",
        )
    };
    // SAFETY: a trigger call carries the open relation it fires on; the invalidation names it.
    unsafe {
        let relid = (*(*trigger).tg_relation).rd_id;
        pg_sys::CacheInvalidateRelcacheByRelid(relid);
    }
    // a null pointer (not SQL NULL): what a statement trigger returns
    pg_sys::Datum::from(0)
}

/// The V1 calling-convention record PostgreSQL looks up for `_catalog_changed_wrapper`.
#[no_mangle]
pub extern "C" fn pg_finfo__catalog_changed_wrapper() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// The caller may read the catalog tables (a cached definition must not serve a role a DBA
/// revoked them from; the uncached read then fails with PostgreSQL's own 42501). A table that
/// no longer exists reads as no.
fn may_read(tables: &[i64]) -> bool {
    // SAFETY: ACL checks by OID; `is_missing` makes a dropped relation an answer, not an error.
    unsafe {
        let user = pg_sys::GetUserId();
        !tables.is_empty()
            && tables.iter().all(|&t| {
                let mut missing = false;
                let ok = pg_sys::pg_class_aclcheck_ext(
                    pg_sys::Oid::from(t as u32),
                    user,
                    pg_sys::ACL_SELECT as pg_sys::AclMode,
                    &mut missing,
                ) == pg_sys::AclResult::ACLCHECK_OK;
                ok && !missing
            })
    }
}

/// A corpus' definition, resolved against the live tables: from the backend's cache when no
/// invalidation since says it may have changed.
pub fn load_corpus(name: &str) -> Result<Arc<Corpus>, CoreError> {
    // Messages committed before this call are processed now (the cache is never older than
    // what the caller's previous statements could see).
    unsafe { pg_sys::AcceptInvalidationMessages() };
    let cached = with_cache(|c| c.get(name).map(|v| (v, c.catalog_tables().to_vec())));
    if let Some((corpus, catalog)) = cached {
        if may_read(&catalog) {
            return Ok(corpus);
        }
    }
    let (corpus, catalog) = read_corpus(name)?;
    let corpus = Arc::new(corpus);
    let relids: Vec<i64> = corpus
        .sources
        .iter()
        .flat_map(|s| std::iter::once(s.item.oid).chain(s.parent.as_ref().map(|p| p.oid)))
        .chain(corpus.edges.iter().map(|e| e.oid))
        .collect();
    let syscache = syscache_dependencies(&relids)?;
    with_cache(|c| c.offer(name, corpus.clone(), relids, syscache, &catalog));
    Ok(corpus)
}

/// A fact memoised with a cached corpus (reltuples, slice estimates).
pub fn cached_fact(corpus: &str, key: &str) -> Option<f64> {
    with_cache(|c| c.fact(corpus, key))
}

/// Memoise a fact with a cached corpus (kept only under the cache's rules).
pub fn remember_fact(corpus: &str, key: String, value: f64) {
    with_cache(|c| c.remember(corpus, key, value));
}

/// The syscache rows a definition over these tables depends on besides the tables: the types
/// of their columns and pgvector's `vector` (TYPEOID), their schemas and pgvector's
/// (NAMESPACEOID), as (cache id, hash value) pairs the syscache callback is given.
fn syscache_dependencies(relids: &[i64]) -> Result<Vec<(i32, u32)>, CoreError> {
    let (types, schemas) = Spi::connect(|client| {
        client
            .select(
                "SELECT (SELECT pg_catalog.array_agg(DISTINCT t) FROM (
                             SELECT a.atttypid::int8 FROM pg_catalog.pg_attribute a
                              WHERE a.attrelid = ANY($1::int8[]::oid[]) AND a.attnum > 0
                             UNION ALL
                             SELECT t.oid::int8 FROM pg_catalog.pg_type t
                               JOIN pg_catalog.pg_extension e ON e.extnamespace = t.typnamespace
                              WHERE e.extname = 'vector' AND t.typname = 'vector') AS x(t)),
                        (SELECT pg_catalog.array_agg(DISTINCT n) FROM (
                             SELECT c.relnamespace::int8 FROM pg_catalog.pg_class c WHERE c.oid = ANY($1::int8[]::oid[])
                             UNION ALL
                             SELECT e.extnamespace::int8 FROM pg_catalog.pg_extension e WHERE e.extname = 'vector')
                             AS y(n))",
                None,
                &[DatumWithOid::from(relids.to_vec())],
            )?
            .first()
            .get_two::<Vec<i64>, Vec<i64>>()
    })
    .map_err(spi_failure)?;
    let hash = |cache: pg_sys::SysCacheIdentifier::Type, oid: i64| {
        let key = pg_sys::Datum::from(pg_sys::Oid::from(oid as u32));
        let zero = pg_sys::Datum::from(0);
        // SAFETY: the hash of a one-key syscache lookup; no catalog access.
        (cache as i32, unsafe { pg_sys::GetSysCacheHashValue(cache as i32, key, zero, zero, zero) })
    };
    let mut out: Vec<(i32, u32)> =
        types.unwrap_or_default().into_iter().map(|t| hash(pg_sys::SysCacheIdentifier::TYPEOID, t)).collect();
    out.extend(schemas.unwrap_or_default().into_iter().map(|n| hash(pg_sys::SysCacheIdentifier::NAMESPACEOID, n)));
    Ok(out)
}

/// A table's description as a definition carries it: its OID, schema, name, kind, Citus
/// distribution column, and every live column with its type, the type under any domains and
/// whether that type is built in (so renamed, dropped or retyped columns are seen).
const RELATION_JSON: &str = r#"
SELECT jsonb_build_object(
        'oid', c.oid::bigint,
        'schema', n.nspname::text,
        'name', c.relname::text,
        'kind', c.relkind::text,
        'distribution', corpus._citus_distribution_column(c.oid),
        'bm25_indexes', COALESCE((
            SELECT jsonb_agg(a.attname::text ORDER BY a.attname)
              FROM pg_index x
              JOIN pg_class ic ON ic.oid = x.indexrelid
              JOIN pg_am am ON am.oid = ic.relam
              JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = x.indkey[0]
             WHERE x.indrelid = c.oid AND am.amname = 'corpus_bm25'
               AND x.indpred IS NULL AND x.indexprs IS NULL
               AND x.indisvalid AND x.indisready AND x.indislive), '[]'::jsonb),
        'bm25_index_keys', COALESCE((
            SELECT jsonb_agg(jsonb_build_object('column', a.attname::text, 'keys', COALESCE((
                       SELECT jsonb_agg(ka.attname::text ORDER BY k.n)
                         FROM unnest(x.indkey::int2[], x.indcollation::oid[]) WITH ORDINALITY
                              AS k(attnum, coll, n)
                         JOIN pg_attribute ka ON ka.attrelid = c.oid AND ka.attnum = k.attnum
                        WHERE k.n > 1 AND k.coll = ka.attcollation), '[]'::jsonb)) ORDER BY ic.relname)
              FROM pg_index x
              JOIN pg_class ic ON ic.oid = x.indexrelid
              JOIN pg_am am ON am.oid = ic.relam
              JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = x.indkey[0]
             WHERE x.indrelid = c.oid AND am.amname = 'corpus_bm25' AND x.indnatts > 1
               AND x.indpred IS NULL AND x.indexprs IS NULL
               AND x.indisvalid AND x.indisready AND x.indislive), '[]'::jsonb),
        'columns', COALESCE((
            SELECT jsonb_object_agg(a.attname::text, jsonb_build_object(
                       'name', a.attname::text,
                       'attnum', a.attnum,
                       'type', format_type(a.atttypid, a.atttypmod),
                       'typname', t.typname::text,
                       'category', t.typcategory::text,
                       'typmod', a.atttypmod,
                       'not_null', a.attnotnull,
                       'base_type', format_type(b.oid, -1),
                       'base_typname', b.typname::text,
                       'base_schema', bn.nspname::text,
                       'builtin', b.oid < 16384))
              FROM pg_attribute a
              JOIN pg_type t ON t.oid = a.atttypid
              -- the type under any domains: what values are compared and cast as
              CROSS JOIN LATERAL (
                  WITH RECURSIVE d(oid, typtype, typbasetype, depth) AS (
                      SELECT t.oid, t.typtype, t.typbasetype, 0
                      UNION ALL
                      SELECT u.oid, u.typtype, u.typbasetype, d.depth + 1
                        FROM d JOIN pg_type u ON u.oid = d.typbasetype
                       WHERE d.typtype = 'd' AND d.depth < 64)
                  SELECT d.oid FROM d WHERE d.typtype <> 'd' ORDER BY d.depth LIMIT 1) AS bt
              JOIN pg_type b ON b.oid = bt.oid
              JOIN pg_namespace bn ON bn.oid = b.typnamespace
             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '{}'::jsonb))
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = $1::oid"#;

/// The catalog's description of one corpus (`pg_corpus_core::model::CorpusDef`'s JSON): its
/// rows with the live description of every item, parent and edge table.
const CORPUS_DEFINITION: &str = r#"
(SELECT jsonb_build_object(
         'name', c.name,
         'description', c.description,
         'isolation', c.isolation,
         'required_filters', to_jsonb(c.required_filters),
         'filter_fields', c.filter_fields,
         'spaces', c.spaces,
         'evidence', c.evidence,
         'must_include', c.must_include,
         'graph', c.graph,
         'audit', c.audit,
         -- (absent from catalogs of older releases)
         'ranking', to_jsonb(c) -> 'ranking',
         'edges', COALESCE((
             SELECT jsonb_agg(jsonb_build_object(
                        'name', e.name,
                        'table', corpus._relation_json(e.edge_table),
                        'table_oid', e.edge_table::oid::bigint,
                        'from_source', e.from_source,
                        'from_column', e.from_column::text,
                        'to_source', e.to_source,
                        'to_column', e.to_column::text) ORDER BY e.name)
               FROM corpus.edges e
              WHERE e.corpus = c.name), '[]'::jsonb),
         -- searches measure text with corpus._content_length (absent from older catalogs)
         'content_function', true,
         -- and ask whether it reaches the minimum with corpus._has_content (likewise)
         'has_content_function',
             pg_catalog.to_regprocedure('corpus._has_content(pg_catalog.text,pg_catalog.int4)') IS NOT NULL,
         'vector_schema', (SELECT n.nspname::text FROM pg_extension e
                             JOIN pg_namespace n ON n.oid = e.extnamespace
                            WHERE e.extname = 'vector'),
         'sources', COALESCE((
             SELECT jsonb_agg(jsonb_build_object(
                        'name', s.name,
                        'item', corpus._relation_json(s.item_table),
                        'item_oid', s.item_table::oid::bigint,
                        'id_column', s.id_column::text,
                        'text_column', s.text_column::text,
                        'tsv_column', s.tsv_column::text,
                        'embedding_column', s.embedding_column::text,
                        'embedding_inputs', to_jsonb(s.embedding_inputs::text[]),
                        'distance', s.distance,
                        'parent', CASE WHEN s.parent_table IS NULL THEN NULL
                                       ELSE corpus._relation_json(s.parent_table) END,
                        'parent_oid', s.parent_table::oid::bigint,
                        'parent_fk', s.parent_fk::text,
                        'parent_key', s.parent_key::text,
                        'parent_required', to_jsonb(s.parent_required),
                        'rule', s.rule,
                        'locator', s.locator,
                        'metadata', s.metadata,
                        'min_length', s.min_length,
                        'ts_config', s.ts_config::oid::bigint,
                        'language', s.language,
                        'semantic_weight', s.semantic_weight,
                        'lexical_weight', s.lexical_weight,
                        'column_types', s.column_types,
                        'space', s.space)
                      ORDER BY s.name)
               FROM corpus.sources s
              WHERE s.corpus = c.name), '[]'::jsonb))
       FROM corpus.corpora c
      WHERE c.name = $1)"#;

/// A table's description (None: no such table).
pub fn relation_json(table: i64) -> Result<Option<JsonbText>, CoreError> {
    super::select_saved(RELATION_JSON, &[DatumWithOid::from(table)], |t| {
        if t.is_empty() {
            Ok(None)
        } else {
            t.first().get_one::<JsonbText>()
        }
    })
}

/// The expression of a corpus' definition (its name is `$1`): a catalog of an earlier release,
/// served until `ALTER EXTENSION pg_corpus UPDATE`, has a SQL function of its own for it.
fn definition_expression() -> &'static str {
    if super::has_function("corpus._corpus_definition(text)") {
        "corpus._corpus_definition($1)"
    } else {
        CORPUS_DEFINITION
    }
}

/// Read and resolve a definition from the catalog (uncached), with the catalog tables' OIDs.
fn read_corpus(name: &str) -> Result<(Corpus, Vec<i64>), CoreError> {
    let (def, catalog) = read_definition(name)?;
    Ok((definition::resolve(&def)?, catalog))
}

/// A corpus' definition resolved with the sources that still resolve, and each other source's
/// error (never cached: what the health check judges of a corpus that does not load).
pub fn load_corpus_available(name: &str) -> Result<(Corpus, Vec<(String, CoreError)>), CoreError> {
    definition::resolve_available(&read_definition(name)?.0)
}

/// A corpus' definition as the catalog holds it, with the catalog tables it was read from.
fn read_definition(name: &str) -> Result<(CorpusDef, Vec<i64>), CoreError> {
    let (json, corpora, sources, edges) = Spi::connect(|client| {
        let sql = format!(
            "SELECT {}, 'corpus.corpora'::pg_catalog.regclass::pg_catalog.oid::int8,
                    'corpus.sources'::pg_catalog.regclass::pg_catalog.oid::int8,
                    pg_catalog.to_regclass('corpus.edges')::pg_catalog.oid::int8",
            definition_expression()
        );
        let row = client.select(&sql, None, &[DatumWithOid::from(name)])?.first();
        Ok::<_, pgrx::spi::SpiError>((
            row.get::<JsonbText>(1)?,
            row.get::<i64>(2)?,
            row.get::<i64>(3)?,
            row.get::<i64>(4)?,
        ))
    })
    .map_err(spi_failure)?;
    let Some(json) = json else {
        if on_citus_worker() {
            // Citus sent the statement to a worker node (it also read a distributed table in a
            // way Citus routes to one shard), or a client connected to one: the catalog of
            // corpora is kept on the coordinator
            return Err(CoreError::new(
                SqlState::FeatureNotSupported,
                format!("corpus \"{name}\" is not defined on this Citus worker node"),
                "Connect to the coordinator, and pass the query vector as a value (a bind parameter), or read it first: \
                 WITH v AS MATERIALIZED (SELECT embedding FROM ... WHERE ...) SELECT s.* FROM v, corpus.corpus_hybrid_search(..., v.embedding, ...) s",
            )
            .with_detail(
                "pg_corpus keeps its catalog on the coordinator; Citus runs a statement that reads a distributed table \
                 through a single shard on that shard's node.",
            ));
        }
        return Err(CoreError::new(
            SqlState::UndefinedObject,
            format!("corpus \"{name}\" does not exist"),
            "See corpus.corpus_list() for the defined corpora.",
        ));
    };
    let value = json.parse(&format!("the definition of corpus \"{name}\""))?;
    let def: CorpusDef = serde_json::from_value(value).map_err(|e| {
        CoreError::new(
            SqlState::ObjectNotInPrerequisiteState,
            format!("the definition of corpus \"{name}\" could not be read: {e}"),
            "The pg_corpus catalog and library versions may differ; run ALTER EXTENSION pg_corpus UPDATE.",
        )
    })?;
    // (corpus.edges is new in 0.3.0: absent until an older install is updated)
    let catalog = [corpora, sources, edges].into_iter().flatten().collect();
    Ok((def, catalog))
}

/// Validate a definition against the live tables, bypassing the cache (the catalog functions).
pub fn validate_corpus(name: &str) -> Result<(), CoreError> {
    let (corpus, _) = read_corpus(name)?;
    // an edge set that does not resolve fails only expanding searches, but never a definition
    match corpus.edge_errors.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// How often this backend's searches found their corpus in the cache: (hits, misses, entries).
#[pg_extern(volatile, parallel_restricted)]
fn _definition_cache_stats() -> TableIterator<'static, (name!(hits, i64), name!(misses, i64), name!(entries, i64))> {
    let row = with_cache(|c| (c.hits as i64, c.misses as i64, c.len() as i64));
    TableIterator::once(row)
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

/// Whether this node is a worker of a Citus cluster (`corpus._citus_node_role()`; false on any
/// error: this only chooses an error message).
fn on_citus_worker() -> bool {
    super::has_function("corpus._citus_node_role()")
        && super::select_bool("SELECT corpus._citus_node_role() = 'worker'", &[])
}
