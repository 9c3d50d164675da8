//! The catalog's writes: corpora, sources and edge sets registered, changed and dropped, with
//! the caller's rights (a role that may not write the catalog gets PostgreSQL's 42501), and the
//! re-embed slot and statistics maintenance a registration sets off.

use pg_corpus_core::CoreError;
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;

use super::{select_bool, spi_failure, write};
use crate::jsonb::JsonbText;

/// Run one statement that writes; the number of rows it processed.
fn execute(sql: &str, args: &[DatumWithOid<'_>]) -> Result<usize, CoreError> {
    write(sql, args, |t| Ok(t.len()))
}

fn jsonb(v: &Option<JsonbText>) -> DatumWithOid<'static> {
    DatumWithOid::from(v.as_ref().map(|j| j.0.clone()))
}

pub fn corpus_exists(name: &str) -> bool {
    select_bool("SELECT EXISTS (SELECT 1 FROM corpus.corpora c WHERE c.name = $1)", &[DatumWithOid::from(name)])
}

pub fn source_exists(corpus: &str, source: &str) -> bool {
    select_bool(
        "SELECT EXISTS (SELECT 1 FROM corpus.sources s WHERE s.corpus = $1 AND s.name = $2)",
        &[DatumWithOid::from(corpus), DatumWithOid::from(source)],
    )
}

pub fn edges_exist(corpus: &str, name: &str) -> bool {
    select_bool(
        "SELECT EXISTS (SELECT 1 FROM corpus.edges e WHERE e.corpus = $1 AND e.name = $2)",
        &[DatumWithOid::from(corpus), DatumWithOid::from(name)],
    )
}

/// A corpus' settings as `corpus_create` and `corpus_alter` take them (None: the default, or
/// for an alteration, unchanged).
pub struct CorpusSettings {
    pub isolation: Option<JsonbText>,
    pub required_filters: Option<Vec<Option<String>>>,
    pub filter_fields: Option<JsonbText>,
    pub description: Option<String>,
    pub spaces: Option<JsonbText>,
    pub evidence: Option<JsonbText>,
    pub must_include: Option<JsonbText>,
    pub graph: Option<JsonbText>,
    pub audit: Option<JsonbText>,
}

impl CorpusSettings {
    fn args<'a>(&'a self, name: &'a str) -> Vec<DatumWithOid<'a>> {
        vec![
            DatumWithOid::from(name),
            DatumWithOid::from(self.description.as_deref()),
            jsonb(&self.isolation),
            DatumWithOid::from(self.required_filters.clone()),
            jsonb(&self.filter_fields),
            jsonb(&self.spaces),
            jsonb(&self.evidence),
            jsonb(&self.must_include),
            jsonb(&self.graph),
            jsonb(&self.audit),
        ]
    }
}

pub fn insert_corpus(name: &str, s: &CorpusSettings) -> Result<(), CoreError> {
    execute(
        "INSERT INTO corpus.corpora (name, description, isolation, required_filters, filter_fields, spaces,
                                     evidence, must_include, graph, audit)
         VALUES ($1, $2, COALESCE($3::text::jsonb, '{}'), COALESCE($4::text[], '{}'), COALESCE($5::text::jsonb, '{}'),
                 COALESCE($6::text::jsonb, '{}'), COALESCE($7::text::jsonb, '{}'), COALESCE($8::text::jsonb, '[]'),
                 COALESCE($9::text::jsonb, '{}'), COALESCE($10::text::jsonb, '{}'))",
        &s.args(name),
    )
    .map(drop)
}

/// Change the settings given; false when there is no such corpus.
pub fn update_corpus(name: &str, s: &CorpusSettings) -> Result<bool, CoreError> {
    execute(
        "UPDATE corpus.corpora c
            SET description      = COALESCE($2, c.description),
                isolation        = COALESCE($3::text::jsonb, c.isolation),
                required_filters = COALESCE($4::text[], c.required_filters),
                filter_fields    = COALESCE($5::text::jsonb, c.filter_fields),
                spaces           = COALESCE($6::text::jsonb, c.spaces),
                evidence         = COALESCE($7::text::jsonb, c.evidence),
                must_include     = COALESCE($8::text::jsonb, c.must_include),
                graph            = COALESCE($9::text::jsonb, c.graph),
                audit            = COALESCE($10::text::jsonb, c.audit)
          WHERE c.name = $1",
        &s.args(name),
    )
    .map(|n| n > 0)
}

/// Drop a corpus (its sources and edge sets go with it); false when there is none.
pub fn delete_corpus(name: &str) -> Result<bool, CoreError> {
    execute("DELETE FROM corpus.corpora c WHERE c.name = $1", &[DatumWithOid::from(name)]).map(|n| n > 0)
}

/// A source's registration as `corpus_add_source` takes it (defaults applied by the caller).
pub struct SourceRow<'a> {
    pub corpus: &'a str,
    pub name: &'a str,
    pub item_table: i64,
    pub id_column: &'a str,
    pub text_column: &'a str,
    pub tsv_column: &'a str,
    pub embedding_column: &'a str,
    pub embedding_inputs: Vec<String>,
    pub distance: &'a str,
    pub parent_table: Option<i64>,
    pub parent_fk: &'a str,
    pub parent_key: &'a str,
    pub parent_required: Vec<Option<String>>,
    pub rule: Option<JsonbText>,
    pub locator: Option<JsonbText>,
    pub metadata: Option<JsonbText>,
    pub min_length: i32,
    pub ts_config: i64,
    pub language: Option<&'a str>,
    pub semantic_weight: f64,
    pub lexical_weight: f64,
    pub space: Option<&'a str>,
}

pub fn insert_source(s: &SourceRow<'_>) -> Result<(), CoreError> {
    execute(
        "INSERT INTO corpus.sources (corpus, name, item_table, id_column, text_column, tsv_column,
             embedding_column, embedding_inputs, distance, parent_table, parent_fk, parent_key, parent_required, rule,
             locator, metadata, min_length, ts_config, language, semantic_weight, lexical_weight, space)
         VALUES ($1, $2, $3::oid::regclass, $4, $5, $6, $7, $8::text[]::name[], $9, $10::oid::regclass, $11, $12,
                 $13::text[], COALESCE($14::text::jsonb, '{}'), COALESCE($15::text::jsonb, '{}'),
                 COALESCE($16::text::jsonb, '{}'), $17, $18::oid::regconfig, $19, $20, $21, $22)",
        &[
            DatumWithOid::from(s.corpus),
            DatumWithOid::from(s.name),
            DatumWithOid::from(s.item_table),
            DatumWithOid::from(s.id_column),
            DatumWithOid::from(s.text_column),
            DatumWithOid::from(s.tsv_column),
            DatumWithOid::from(s.embedding_column),
            DatumWithOid::from(s.embedding_inputs.clone()),
            DatumWithOid::from(s.distance),
            DatumWithOid::from(s.parent_table),
            DatumWithOid::from(s.parent_fk),
            DatumWithOid::from(s.parent_key),
            DatumWithOid::from(s.parent_required.clone()),
            jsonb(&s.rule),
            jsonb(&s.locator),
            jsonb(&s.metadata),
            DatumWithOid::from(s.min_length),
            DatumWithOid::from(s.ts_config),
            DatumWithOid::from(s.language),
            DatumWithOid::from(s.semantic_weight),
            DatumWithOid::from(s.lexical_weight),
            DatumWithOid::from(s.space),
        ],
    )
    .map(drop)
}

/// The changes `corpus_alter_source` makes to a source (None: unchanged).
pub struct SourceChanges<'a> {
    pub id_column: Option<&'a str>,
    pub text_column: Option<&'a str>,
    pub tsv_column: Option<&'a str>,
    pub embedding_column: Option<&'a str>,
    pub embedding_inputs: Option<Vec<String>>,
    pub distance: Option<&'a str>,
    pub parent_table: Option<i64>,
    pub parent_fk: Option<&'a str>,
    pub parent_key: Option<&'a str>,
    pub parent_required: Option<Vec<Option<String>>>,
    pub rule: Option<JsonbText>,
    pub locator: Option<JsonbText>,
    pub metadata: Option<JsonbText>,
    pub min_length: Option<i32>,
    pub ts_config: Option<i64>,
    pub language: Option<&'a str>,
    pub semantic_weight: Option<f64>,
    pub lexical_weight: Option<f64>,
}

/// A source's registration as it stands: its item table, id and embedding columns and the
/// embedding's input columns (None: there is no such source).
pub fn source_slot(corpus: &str, source: &str) -> Result<Option<(i64, String, String, Vec<String>)>, CoreError> {
    Spi::connect(|client| {
        let t = client.select(
            "SELECT s.item_table::oid::int8, s.id_column::text, s.embedding_column::text, s.embedding_inputs::text[]
               FROM corpus.sources s WHERE s.corpus = $1 AND s.name = $2",
            Some(1),
            &[DatumWithOid::from(corpus), DatumWithOid::from(source)],
        )?;
        if t.is_empty() {
            return Ok(None);
        }
        let row = t.first();
        Ok(Some((
            row.get::<i64>(1)?.unwrap_or(0),
            row.get::<String>(2)?.unwrap_or_default(),
            row.get::<String>(3)?.unwrap_or_default(),
            row.get::<Vec<String>>(4)?.unwrap_or_default(),
        )))
    })
    .map_err(spi_failure)
}

/// Change a source's mapping in place: each given value replaces the registered one.
pub fn update_source(corpus: &str, source: &str, c: &SourceChanges<'_>) -> Result<(), CoreError> {
    execute(
        "UPDATE corpus.sources s
            SET id_column = COALESCE($3, s.id_column), text_column = COALESCE($4, s.text_column),
                tsv_column = COALESCE($5, s.tsv_column), embedding_column = COALESCE($6, s.embedding_column),
                embedding_inputs = COALESCE($7::text[]::name[], s.embedding_inputs),
                distance = COALESCE($8, s.distance), parent_table = COALESCE($9::oid::regclass, s.parent_table),
                parent_fk = COALESCE($10, s.parent_fk), parent_key = COALESCE($11, s.parent_key),
                parent_required = COALESCE($12::text[], s.parent_required),
                rule = COALESCE($13::text::jsonb, s.rule), locator = COALESCE($14::text::jsonb, s.locator),
                metadata = COALESCE($15::text::jsonb, s.metadata), min_length = COALESCE($16, s.min_length),
                ts_config = COALESCE($17::oid::regconfig, s.ts_config), language = COALESCE($18, s.language),
                semantic_weight = COALESCE($19, s.semantic_weight), lexical_weight = COALESCE($20, s.lexical_weight)
          WHERE s.corpus = $1 AND s.name = $2",
        &[
            DatumWithOid::from(corpus),
            DatumWithOid::from(source),
            DatumWithOid::from(c.id_column),
            DatumWithOid::from(c.text_column),
            DatumWithOid::from(c.tsv_column),
            DatumWithOid::from(c.embedding_column),
            DatumWithOid::from(c.embedding_inputs.clone()),
            DatumWithOid::from(c.distance),
            DatumWithOid::from(c.parent_table),
            DatumWithOid::from(c.parent_fk),
            DatumWithOid::from(c.parent_key),
            DatumWithOid::from(c.parent_required.clone()),
            jsonb(&c.rule),
            jsonb(&c.locator),
            jsonb(&c.metadata),
            DatumWithOid::from(c.min_length),
            DatumWithOid::from(c.ts_config),
            DatumWithOid::from(c.language),
            DatumWithOid::from(c.semantic_weight),
            DatumWithOid::from(c.lexical_weight),
        ],
    )
    .map(drop)
}

/// Drop a source: its item table and embedding column (None: there is no such source).
pub fn delete_source(corpus: &str, source: &str) -> Result<Option<(i64, String)>, CoreError> {
    write(
        "DELETE FROM corpus.sources s WHERE s.corpus = $1 AND s.name = $2
         RETURNING s.item_table::oid::int8, s.embedding_column::text",
        &[DatumWithOid::from(corpus), DatumWithOid::from(source)],
        |t| {
            let Some(row) = t.into_iter().next() else { return Ok(None) };
            Ok(row.get::<i64>(1)?.zip(row.get::<String>(2)?))
        },
    )
}

pub struct EdgesRow<'a> {
    pub corpus: &'a str,
    pub name: &'a str,
    pub edge_table: i64,
    pub from_source: &'a str,
    pub from_column: &'a str,
    pub to_source: &'a str,
    pub to_column: &'a str,
}

pub fn insert_edges(e: &EdgesRow<'_>) -> Result<(), CoreError> {
    execute(
        "INSERT INTO corpus.edges (corpus, name, edge_table, from_source, from_column, to_source, to_column)
         VALUES ($1, $2, $3::oid::regclass, $4, $5, $6, $7)",
        &[
            DatumWithOid::from(e.corpus),
            DatumWithOid::from(e.name),
            DatumWithOid::from(e.edge_table),
            DatumWithOid::from(e.from_source),
            DatumWithOid::from(e.from_column),
            DatumWithOid::from(e.to_source),
            DatumWithOid::from(e.to_column),
        ],
    )
    .map(drop)
}

/// Drop an edge set; false when there is none.
pub fn delete_edges(corpus: &str, name: &str) -> Result<bool, CoreError> {
    execute(
        "DELETE FROM corpus.edges e WHERE e.corpus = $1 AND e.name = $2",
        &[DatumWithOid::from(corpus), DatumWithOid::from(name)],
    )
    .map(|n| n > 0)
}

/// Delete the audit rows older than `older_than` (an interval's text), of one corpus or all;
/// how many.
pub fn purge_audit(older_than: &str, corpus: Option<&str>) -> Result<i64, CoreError> {
    execute(
        "DELETE FROM corpus.search_audit a
          WHERE a.logged_at < clock_timestamp() - $1::text::interval
            AND ($2::text IS NULL OR a.corpus = $2)",
        &[DatumWithOid::from(older_than), DatumWithOid::from(corpus)],
    )
    .map(|n| n as i64)
}

/// The embedding columns a corpus' sources rank by: (item table, embedding column).
pub fn slots(corpus: &str) -> Result<Vec<(i64, String)>, CoreError> {
    write(
        "SELECT DISTINCT s.item_table::oid::int8, s.embedding_column::text FROM corpus.sources s WHERE s.corpus = $1",
        &[DatumWithOid::from(corpus)],
        |t| {
            let mut out = Vec::new();
            for row in t {
                if let (Some(table), Some(column)) = (row.get::<i64>(1)?, row.get::<String>(2)?) {
                    out.push((table, column));
                }
            }
            Ok(out)
        },
    )
}

/// The declared dimension of a vector column (its typmod; None when it has none or is gone).
pub fn vector_typmod(table: i64, column: &str) -> Option<i32> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT a.atttypmod FROM pg_catalog.pg_attribute a WHERE a.attrelid = $1::oid AND a.attname = $2",
                Some(1),
                &[DatumWithOid::from(table), DatumWithOid::from(column)],
            )?
            .first()
            .get_one::<i32>()
    })
    .ok()
    .flatten()
}

/// Record the column types of a corpus' sources (of one source only, when given): a later retype
/// shows as catalog drift. And their attribute numbers, by every name the definition has known
/// them by (the numbers recorded before win: a rename keeps the number, so a definition written
/// before it keeps reaching the column).
pub fn snapshot_column_types(corpus: &str, source: Option<&str>) -> Result<(), CoreError> {
    execute(
        r#"
UPDATE corpus.sources s
       SET column_types = jsonb_build_object(
               'item', (SELECT jsonb_object_agg(c.key, c.value->>'type')
                          FROM jsonb_each(corpus._relation_json(s.item_table)->'columns') c),
               'parent', CASE WHEN s.parent_table IS NULL THEN '{}'::jsonb ELSE
                         (SELECT jsonb_object_agg(c.key, c.value->>'type')
                            FROM jsonb_each(corpus._relation_json(s.parent_table)->'columns') c) END,
               'attnums', jsonb_build_object(
                   'item', COALESCE((SELECT jsonb_object_agg(a.attname::text, a.attnum) FROM pg_catalog.pg_attribute a
                                      WHERE a.attrelid = s.item_table AND a.attnum > 0 AND NOT a.attisdropped), '{}')
                           || COALESCE(s.column_types #> '{attnums,item}', '{}'),
                   'parent', COALESCE((SELECT jsonb_object_agg(a.attname::text, a.attnum) FROM pg_catalog.pg_attribute a
                                        WHERE a.attrelid = s.parent_table AND a.attnum > 0 AND NOT a.attisdropped), '{}')
                             || CASE WHEN s.parent_table IS NULL THEN '{}' ELSE
                                COALESCE(s.column_types #> '{attnums,parent}', '{}') END))
     WHERE s.corpus = $1 AND ($2::text IS NULL OR s.name = $2)"#,
        &[DatumWithOid::from(corpus), DatumWithOid::from(source)],
    )
    .map(drop)
}

/// Refresh a corpus' lexical statistics over its new extent.
pub fn refresh_lexical_stats(corpus: &str) -> Result<(), CoreError> {
    execute("SELECT 1 FROM corpus.corpus_refresh_lexical_stats($1)", &[DatumWithOid::from(corpus)]).map(drop)
}

/// One corpus as `corpus_list` shows it; `json` holds the text of isolation, filter_fields,
/// sources, spaces, evidence, must_include, graph, edges, audit and ranking.
pub struct ListedCorpus {
    pub name: Option<String>,
    pub description: Option<String>,
    pub required_filters: Option<Vec<Option<String>>>,
    pub json: [Option<String>; 10],
}

/// Every corpus with its sources and edge sets, by name.
pub fn list() -> Result<Vec<ListedCorpus>, CoreError> {
    Spi::connect(|client| {
        let table = client.select(
            "SELECT c.name, c.description, c.required_filters, c.isolation::text, c.filter_fields::text,
                    COALESCE((SELECT jsonb_agg(jsonb_build_object(
                                 'source', s.name,
                                 'item_table', s.item_table::text,
                                 'id_column', s.id_column, 'text_column', s.text_column,
                                 'tsv_column', s.tsv_column, 'embedding_column', s.embedding_column,
                                 'distance', s.distance,
                                 'parent_table', s.parent_table::text, 'parent_fk', s.parent_fk,
                                 'parent_key', s.parent_key, 'parent_required', s.parent_required,
                                 'rule', s.rule, 'locator', s.locator, 'metadata', s.metadata,
                                 'min_length', s.min_length, 'ts_config', s.ts_config::text, 'language', s.language,
                                 'semantic_weight', s.semantic_weight,
                                 'lexical_weight', s.lexical_weight,
                                 'column_types', s.column_types, 'space', s.space) ORDER BY s.name)
                                FROM corpus.sources s WHERE s.corpus = c.name), '[]'::jsonb)::text,
                    c.spaces::text, c.evidence::text, c.must_include::text, c.graph::text,
                    COALESCE((SELECT jsonb_agg(jsonb_build_object(
                                 'name', e.name, 'edge_table', e.edge_table::text,
                                 'from_source', e.from_source, 'from_column', e.from_column,
                                 'to_source', e.to_source, 'to_column', e.to_column) ORDER BY e.name)
                                FROM corpus.edges e WHERE e.corpus = c.name), '[]'::jsonb)::text,
                    c.audit::text, c.ranking::text
               FROM corpus.corpora c
              ORDER BY c.name",
            None,
            &[],
        )?;
        let mut out = Vec::new();
        for row in table {
            let mut json: [Option<String>; 10] = Default::default();
            for (i, slot) in json.iter_mut().enumerate() {
                *slot = row.get::<String>(4 + i)?;
            }
            out.push(ListedCorpus {
                name: row.get::<String>(1)?,
                description: row.get::<String>(2)?,
                required_filters: row.get::<Vec<Option<String>>>(3)?,
                json,
            });
        }
        Ok(out)
    })
    .map_err(spi_failure)
}

/// A corpus' ranking settings in the shape `corpus_alter(ranking => ...)` takes, every key
/// present (null: the default) and every source's weights: what restores them as they are.
/// None when there is no such corpus.
pub fn ranking_settings(corpus: &str) -> Result<Option<serde_json::Value>, CoreError> {
    let text = Spi::connect(|client| {
        client
            .select(
                "SELECT jsonb_build_object(
                        'rrf_k', c.ranking -> 'rrf_k',
                        'window', c.ranking -> 'window',
                        'feedback', c.ranking -> 'feedback',
                        'feedback_beta', c.ranking -> 'feedback_beta',
                        'feedback_alpha', c.ranking -> 'feedback_alpha',
                        'feedback_terms', c.ranking -> 'feedback_terms',
                        'weights', COALESCE((SELECT jsonb_object_agg(s.name, jsonb_build_object(
                                                 'semantic', s.semantic_weight, 'lexical', s.lexical_weight))
                                               FROM corpus.sources s WHERE s.corpus = c.name), '{}'::jsonb))::text
                   FROM corpus.corpora c WHERE c.name = $1",
                None,
                &[DatumWithOid::from(corpus)],
            )?
            .first()
            .get_one::<String>()
    })
    .map_err(spi_failure)?;
    text.map(|t| pg_corpus_core::json::parse(&t, "the corpus' ranking settings")).transpose()
}

/// Store a ranking change: the corpus row's settings and the weights of the sources it names
/// (checked against the corpus' sources first). False when there is no such corpus.
pub fn alter_ranking(corpus: &str, change: &pg_corpus_core::ranking::RankingChange) -> Result<bool, CoreError> {
    let Some(current) = ranking_settings(corpus)? else {
        return Ok(false);
    };
    let names: Vec<&str> =
        current["weights"].as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
    pg_corpus_core::ranking::check_sources(change, corpus, &names)?;
    let stored = pg_corpus_core::ranking::parse(&serde_json::json!({
        "rrf_k": current["rrf_k"], "window": current["window"], "feedback": current["feedback"],
        "feedback_beta": current["feedback_beta"], "feedback_alpha": current["feedback_alpha"],
        "feedback_terms": current["feedback_terms"],
    }))?;
    let next = change.apply(&stored).to_json().to_string();
    execute(
        "UPDATE corpus.corpora SET ranking = $2::text::jsonb WHERE name = $1",
        &[DatumWithOid::from(corpus), DatumWithOid::from(next.as_str())],
    )?;
    for (source, w) in &change.weights {
        execute(
            "UPDATE corpus.sources
                SET semantic_weight = COALESCE($3, semantic_weight),
                    lexical_weight  = COALESCE($4, lexical_weight)
              WHERE corpus = $1 AND name = $2",
            &[
                DatumWithOid::from(corpus),
                DatumWithOid::from(source.as_str()),
                DatumWithOid::from(w.semantic),
                DatumWithOid::from(w.lexical),
            ],
        )?;
    }
    Ok(true)
}
