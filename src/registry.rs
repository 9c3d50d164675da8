//! The definition functions: corpora, sources and edge sets registered, changed, listed and
//! dropped. They run with the caller's rights (only roles that may write the catalog change
//! it); the argument checks are `pg_corpus_core::registry`'s, the statements `spi::registry`'s,
//! and every definition is checked against the live tables (`spi::catalog::validate_corpus`)
//! before the call returns.

use pg_corpus_core::registry::{self, Named, Shape};
use pg_corpus_core::{CoreError, SqlState};
use pgrx::prelude::*;

use crate::error::OrRaise;
use crate::jsonb::JsonbText;
use crate::regtypes::{RegClass, RegConfig};
use crate::spi;
use crate::spi::registry::{self as catalog, CorpusSettings, EdgesRow, SourceRow};

/// The definition arguments' shapes, checked before anything is written.
fn check_shapes(s: &CorpusSettings) -> Result<(), CoreError> {
    let parsed = |j: &Option<JsonbText>, what: &str| j.as_ref().map(|j| j.parse(what)).transpose();
    for (value, argument, shape) in [
        (&s.isolation, "isolation", Shape::Object),
        (&s.filter_fields, "filter_fields", Shape::Object),
        (&s.spaces, "spaces", Shape::Object),
        (&s.evidence, "evidence", Shape::Object),
        (&s.must_include, "must_include", Shape::Array),
        (&s.graph, "graph", Shape::Object),
        (&s.audit, "audit", Shape::Object),
    ] {
        registry::check_shape(parsed(value, argument)?.as_ref(), argument, shape)?;
    }
    Ok(())
}

/// Define a corpus: its isolation predicate, filter fields and feature settings.
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_create(
    name: Option<&str>,
    isolation: default!(Option<JsonbText>, "'{}'"),
    required_filters: default!(Option<Vec<Option<String>>>, "'{}'"),
    filter_fields: default!(Option<JsonbText>, "'{}'"),
    description: default!(Option<&str>, "NULL"),
    spaces: default!(Option<JsonbText>, "'{}'"),
    evidence: default!(Option<JsonbText>, "'{}'"),
    must_include: default!(Option<JsonbText>, "'[]'"),
    graph: default!(Option<JsonbText>, "'{}'"),
    audit: default!(Option<JsonbText>, "'{}'"),
) {
    let settings = CorpusSettings {
        isolation,
        required_filters,
        filter_fields,
        description: description.map(str::to_string),
        spaces,
        evidence,
        must_include,
        graph,
        audit,
    };
    spi::pinned_search_path(|| -> Result<(), CoreError> {
        spi::require_writable("corpus_create")?;
        let name = registry::check_name(Named::Corpus, name)?;
        check_shapes(&settings)?;
        if catalog::corpus_exists(name) {
            return Err(registry::corpus_exists(name));
        }
        catalog::insert_corpus(name, &settings)?;
        spi::catalog::validate_corpus(name)
    })
    .or_raise()
}

/// Change a corpus' settings: the arguments given replace the stored ones.
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_alter(
    name: Option<&str>,
    isolation: default!(Option<JsonbText>, "NULL"),
    required_filters: default!(Option<Vec<Option<String>>>, "NULL"),
    filter_fields: default!(Option<JsonbText>, "NULL"),
    description: default!(Option<&str>, "NULL"),
    spaces: default!(Option<JsonbText>, "NULL"),
    evidence: default!(Option<JsonbText>, "NULL"),
    must_include: default!(Option<JsonbText>, "NULL"),
    graph: default!(Option<JsonbText>, "NULL"),
    audit: default!(Option<JsonbText>, "NULL"),
    ranking: default!(Option<JsonbText>, "NULL"),
) {
    let settings = CorpusSettings {
        isolation,
        required_filters,
        filter_fields,
        description: description.map(str::to_string),
        spaces,
        evidence,
        must_include,
        graph,
        audit,
    };
    spi::pinned_search_path(|| -> Result<(), CoreError> {
        spi::require_writable("corpus_alter")?;
        check_shapes(&settings)?;
        let ranking = ranking.map(|r| r.parse("ranking")).transpose()?;
        let ranking = ranking.map(|r| pg_corpus_core::ranking::parse_change(&r)).transpose()?;
        let name = name.unwrap_or("");
        if !catalog::update_corpus(name, &settings)? {
            return Err(registry::no_corpus(name, "See corpus.corpus_list() for the defined corpora."));
        }
        if let Some(change) = &ranking {
            catalog::alter_ranking(name, change)?;
        }
        spi::catalog::validate_corpus(name)?;
        catalog::snapshot_column_types(name, None)?;
        catalog::refresh_lexical_stats(name)
    })
    .or_raise()
}

/// Drop a corpus with its sources and edge sets; the embedding slots no source uses any more
/// are released.
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_drop(name: Option<&str>, if_exists: default!(Option<bool>, false)) {
    spi::pinned_search_path(|| -> Result<(), CoreError> {
        spi::require_writable("corpus_drop")?;
        let name = name.unwrap_or("");
        // its sources' slots go when no other corpus' source uses them (a slot being built, no
        // source's yet, stays)
        let slots = catalog::slots(name)?;
        if catalog::delete_corpus(name)? {
            for (table, column) in slots {
                spi::slots::detach(table, &column)?;
            }
        } else if !if_exists.unwrap_or(false) {
            return Err(registry::no_corpus(name, "Pass if_exists => true to ignore a missing corpus."));
        }
        Ok(())
    })
    .or_raise()
}

/// What registering a source found: the rows of its table, its items in the corpus, how many
/// are searchable, and how many are hidden and why.
type Found =
    (String, Option<i64>, Option<i64>, Option<i64>, Option<i64>, Option<i64>, Option<i64>, Option<i64>, String);

/// Register a table's rows as a source of a corpus: its item, text, text search and embedding
/// columns, its parent, the rule that makes an item searchable and its provenance. Answers
/// what it found (one row).
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe, name = "corpus_add_source")]
pub(crate) fn add_source(
    corpus: Option<&str>,
    source: Option<&str>,
    item_table: Option<RegClass>,
    text_column: Option<&str>,
    embedding_column: Option<&str>,
    tsv_column: Option<&str>,
    id_column: default!(Option<&str>, "'id'"),
    parent_table: default!(Option<RegClass>, "NULL"),
    parent_fk: default!(Option<&str>, "NULL"),
    parent_key: default!(Option<&str>, "'id'"),
    parent_required: default!(Option<Vec<Option<String>>>, "'{}'"),
    rule: default!(Option<JsonbText>, "'{}'"),
    locator: default!(Option<JsonbText>, "'{}'"),
    metadata: default!(Option<JsonbText>, "'{}'"),
    min_length: default!(Option<i32>, 50),
    ts_config: default!(Option<RegConfig>, "'simple'"),
    distance: default!(Option<&str>, "'cosine'"),
    semantic_weight: default!(Option<f64>, 1),
    lexical_weight: default!(Option<f64>, 1),
    embedding_inputs: default!(Option<Vec<Option<String>>>, "NULL"),
    embedding_model: default!(Option<&str>, "NULL"),
    language: default!(Option<&str>, "NULL"),
    space: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(source, String),
        name!(table_rows, Option<i64>),
        name!(items, Option<i64>),
        name!(searchable, Option<i64>),
        name!(below_min_length, Option<i64>),
        name!(hidden_by_incomplete_parents, Option<i64>),
        name!(excluded_by_source_rule, Option<i64>),
        name!(missing_embedding, Option<i64>),
        name!(counted, String),
    ),
> {
    let found = spi::pinned_search_path(|| -> Result<Found, CoreError> {
        spi::require_writable("corpus_add_source")?;
        let corpus = corpus.unwrap_or("");
        if !catalog::corpus_exists(corpus) {
            return Err(registry::no_corpus(corpus, registry::CREATE_IT));
        }
        let source = registry::check_name(Named::Source, source)?;
        if catalog::source_exists(corpus, source) {
            return Err(registry::source_exists(corpus, source));
        }
        let (
            Some(item_table),
            Some(id_column),
            Some(text_column),
            Some(embedding_column),
            Some(tsv_column),
            Some(parent_fk),
        ) = (item_table, id_column, text_column, embedding_column, tsv_column, parent_fk)
        else {
            return Err(registry::required(
                &["item_table", "id_column", "text_column", "embedding_column", "tsv_column", "parent_fk"],
                "parent_fk names the item column that holds the parent id (the capping and provenance key).",
            ));
        };
        let inputs = registry::embedding_inputs(embedding_inputs, text_column)?;
        let progress = crate::progress::Progress::start("corpus_add_source", Some(corpus));
        progress.phase("checking the definition against the tables", None, None);
        catalog::insert_source(&SourceRow {
            corpus,
            name: source,
            item_table: item_table.as_i64(),
            id_column,
            text_column,
            tsv_column,
            embedding_column,
            embedding_inputs: inputs.clone(),
            distance: distance.unwrap_or("cosine"),
            parent_table: parent_table.map(RegClass::as_i64),
            parent_fk,
            parent_key: parent_key.unwrap_or("id"),
            parent_required: parent_required.unwrap_or_default(),
            rule,
            locator,
            metadata,
            min_length: min_length.unwrap_or(50),
            ts_config: match ts_config {
                Some(c) => c.as_i64(),
                None => simple_config()?,
            },
            language,
            semantic_weight: semantic_weight.unwrap_or(1.0),
            lexical_weight: lexical_weight.unwrap_or(1.0),
            space,
        })?;
        spi::catalog::validate_corpus(corpus)?;
        // only the new source: another source's retype stays visible as drift
        catalog::snapshot_column_types(corpus, Some(source))?;
        let dimensions = catalog::vector_typmod(item_table.as_i64(), embedding_column);
        progress.phase("attaching the re-embed trigger, queueing items without an embedding", None, None);
        spi::slots::attach(item_table.as_i64(), embedding_column, id_column, &inputs, embedding_model, dimensions)?;
        // BM25 statistics over the corpus' new extent
        progress.phase("refreshing the corpus' statistics", None, None);
        catalog::refresh_lexical_stats(corpus)?;
        let def = spi::catalog::load_corpus(corpus)?;
        if let Some(src) = def.sources.iter().find(|s| s.name == source && s.language.is_some() && !s.tsv_index) {
            crate::error::notice(
                format!("source \"{source}\" has no corpus_bm25 index on its BM25 column"),
                "Its lexical branch scores every candidate row found through the GIN index.".to_string(),
                &pg_corpus_core::health::bm25_index_hint(src),
            );
        }
        progress.phase("counting what the corpus holds of the table", None, None);
        found(&def, source)
    })
    .or_raise();
    TableIterator::once(found)
}

/// The items of source `source` of the corpus: the table's rows, those in the corpus, and why
/// those not searchable are hidden (counted as the health check counts them: a large table
/// from a sample).
fn found(corpus: &pg_corpus_core::model::Corpus, source: &str) -> Result<Found, CoreError> {
    use pg_corpus_core::health::{self, ContractFigures, Sampling};
    let Some(idx) = corpus.sources.iter().position(|s| s.name == source) else {
        return Err(registry::no_source(&corpus.name, source, "It was dropped meanwhile."));
    };
    let total = spi::search::reltuples(&[corpus.sources[idx].item.oid])?[0];
    let sampling = Sampling::of(total);
    let row = spi::health::table_rows(&health::contract_sql(corpus, idx, sampling.percent))?
        .into_iter()
        .next()
        .unwrap_or(serde_json::Value::Null);
    let f = ContractFigures::from_row(&row, &sampling);
    let counted = sampling.detail().get("counted").and_then(|c| c.as_str()).unwrap_or("exactly").to_string();
    Ok((
        source.to_string(),
        (total >= 0.0).then_some(total as i64),
        Some(f.slice_items),
        Some(f.searchable),
        Some(f.short_text),
        Some(f.incomplete_parent_items),
        Some(f.rule_excluded),
        Some(f.missing_embedding),
        counted,
    ))
}

/// Change a source's mapping in place: every argument given replaces the registered value, the
/// rest stay. The definition is checked against the tables before the call returns; the queue
/// and the statistics stay (the statistics are recomputed when the corpus' extent or BM25
/// column changed; a new embedding column gets its own slot and backlog).
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_alter_source(
    corpus: Option<&str>,
    source: Option<&str>,
    text_column: default!(Option<&str>, "NULL"),
    embedding_column: default!(Option<&str>, "NULL"),
    tsv_column: default!(Option<&str>, "NULL"),
    id_column: default!(Option<&str>, "NULL"),
    parent_table: default!(Option<RegClass>, "NULL"),
    parent_fk: default!(Option<&str>, "NULL"),
    parent_key: default!(Option<&str>, "NULL"),
    parent_required: default!(Option<Vec<Option<String>>>, "NULL"),
    rule: default!(Option<JsonbText>, "NULL"),
    locator: default!(Option<JsonbText>, "NULL"),
    metadata: default!(Option<JsonbText>, "NULL"),
    min_length: default!(Option<i32>, "NULL"),
    ts_config: default!(Option<RegConfig>, "NULL"),
    distance: default!(Option<&str>, "NULL"),
    semantic_weight: default!(Option<f64>, "NULL"),
    lexical_weight: default!(Option<f64>, "NULL"),
    embedding_inputs: default!(Option<Vec<Option<String>>>, "NULL"),
    embedding_model: default!(Option<&str>, "NULL"),
    language: default!(Option<&str>, "NULL"),
) {
    spi::pinned_search_path(|| -> Result<(), CoreError> {
        spi::require_writable("corpus_alter_source")?;
        let (corpus, source) = (corpus.unwrap_or(""), source.unwrap_or(""));
        if !catalog::corpus_exists(corpus) {
            return Err(registry::no_corpus(corpus, "See the corpora in corpus.corpus_list()."));
        }
        let Some((table, old_id, old_embedding, old_inputs)) = catalog::source_slot(corpus, source)? else {
            return Err(registry::no_source(corpus, source, "See the sources of each corpus in corpus.corpus_list()."));
        };
        for (value, argument) in [(&rule, "rule"), (&locator, "locator"), (&metadata, "metadata")] {
            registry::check_shape(
                value.as_ref().map(|j| j.parse(argument)).transpose()?.as_ref(),
                argument,
                Shape::Object,
            )?;
        }
        let inputs = match embedding_inputs {
            Some(given) => Some(registry::embedding_inputs(Some(given), text_column.unwrap_or(""))?),
            None => None,
        };
        let extent_changed = text_column.is_some()
            || tsv_column.is_some()
            || parent_table.is_some()
            || parent_fk.is_some()
            || parent_key.is_some()
            || parent_required.is_some()
            || rule.is_some()
            || min_length.is_some()
            || ts_config.is_some()
            || language.is_some();
        catalog::update_source(
            corpus,
            source,
            &catalog::SourceChanges {
                id_column,
                text_column,
                tsv_column,
                embedding_column,
                embedding_inputs: inputs,
                distance,
                parent_table: parent_table.map(RegClass::as_i64),
                parent_fk,
                parent_key,
                parent_required,
                rule,
                locator,
                metadata,
                min_length,
                ts_config: ts_config.map(RegConfig::as_i64),
                language,
                semantic_weight,
                lexical_weight,
            },
        )?;
        spi::catalog::validate_corpus(corpus)?;
        catalog::snapshot_column_types(corpus, Some(source))?;
        let Some((_, id, embedding, inputs)) = catalog::source_slot(corpus, source)? else { return Ok(()) };
        if embedding != old_embedding {
            // the old column's slot (and its queue) goes when no other source uses it
            spi::slots::detach(table, &old_embedding)?;
            let dimensions = catalog::vector_typmod(table, &embedding);
            spi::slots::attach(table, &embedding, &id, &inputs, embedding_model, dimensions)?;
        } else if id != old_id || inputs != old_inputs {
            return Err(registry::slot_columns_fixed(source, &old_embedding));
        } else if embedding_model.is_some() {
            return Err(CoreError::new(
                SqlState::InvalidParameterValue,
                "embedding_model names the model of a new embedding column",
                "Change the model of the embeddings a column holds with CALL corpus.corpus_set_embedding_model(...).",
            ));
        }
        if extent_changed {
            catalog::refresh_lexical_stats(corpus)?;
        }
        Ok(())
    })
    .or_raise()
}

/// The OID of the `simple` text search configuration (a NULL ts_config's default).
fn simple_config() -> Result<i64, CoreError> {
    Spi::connect(|client| {
        client.select("SELECT 'pg_catalog.simple'::regconfig::oid::int8", Some(1), &[])?.first().get_one::<i64>()
    })
    .map_err(spi::spi_failure)?
    .ok_or_else(|| CoreError::new(SqlState::UndefinedObject, "text search configuration \"simple\" is missing", ""))
}

/// Drop a source of a corpus; its embedding slot is released when no other source uses it.
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_drop_source(corpus: Option<&str>, source: Option<&str>) {
    spi::pinned_search_path(|| -> Result<(), CoreError> {
        spi::require_writable("corpus_drop_source")?;
        let (corpus, source) = (corpus.unwrap_or(""), source.unwrap_or(""));
        let Some((table, column)) = catalog::delete_source(corpus, source)? else {
            return Err(registry::no_source(corpus, source, "See the sources of each corpus in corpus.corpus_list()."));
        };
        spi::slots::detach(table, &column)?;
        catalog::refresh_lexical_stats(corpus)
    })
    .or_raise()
}

/// Register an edge set: rows of `edge_table` say that item `from_column` of `from_source`
/// cites item `to_column` of `to_source` (followed by searches with `expand => true`).
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_add_edges(
    corpus: Option<&str>,
    name: Option<&str>,
    edge_table: Option<RegClass>,
    from_source: Option<&str>,
    from_column: Option<&str>,
    to_source: Option<&str>,
    to_column: Option<&str>,
) {
    spi::pinned_search_path(|| -> Result<(), CoreError> {
        spi::require_writable("corpus_add_edges")?;
        let corpus = corpus.unwrap_or("");
        if !catalog::corpus_exists(corpus) {
            return Err(registry::no_corpus(corpus, registry::CREATE_IT));
        }
        let name = registry::check_name(Named::EdgeSet, name)?;
        let (Some(edge_table), Some(from_source), Some(from_column), Some(to_source), Some(to_column)) =
            (edge_table, from_source, from_column, to_source, to_column)
        else {
            return Err(registry::required(
                &["edge_table", "from_source", "from_column", "to_source", "to_column"],
                "A row of edge_table says that item from_column of from_source cites item to_column of to_source.",
            ));
        };
        for source in [from_source, to_source] {
            if !catalog::source_exists(corpus, source) {
                return Err(registry::no_source(
                    corpus,
                    source,
                    "Edges join two sources of the corpus: see its sources in corpus.corpus_list().",
                ));
            }
        }
        if catalog::edges_exist(corpus, name) {
            return Err(registry::edges_exist(corpus, name));
        }
        catalog::insert_edges(&EdgesRow {
            corpus,
            name,
            edge_table: edge_table.as_i64(),
            from_source,
            from_column,
            to_source,
            to_column,
        })?;
        spi::catalog::validate_corpus(corpus)
    })
    .or_raise()
}

/// Drop an edge set of a corpus.
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_drop_edges(corpus: Option<&str>, name: Option<&str>) {
    spi::pinned_search_path(|| -> Result<(), CoreError> {
        spi::require_writable("corpus_drop_edges")?;
        let (corpus, name) = (corpus.unwrap_or(""), name.unwrap_or(""));
        if !catalog::delete_edges(corpus, name)? {
            return Err(registry::no_edges(corpus, name));
        }
        Ok(())
    })
    .or_raise()
}

/// Retention of the search audit log: delete the rows older than `older_than` (of one corpus, or
/// all); returns how many. Runs with the caller's rights: only the owner, or a role it granted
/// DELETE on corpus.search_audit, deletes anything (others get 42501).
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_audit_purge(older_than: Option<pgrx::datum::Interval>, corpus: default!(Option<&str>, "NULL")) -> i64 {
    spi::pinned_search_path(|| -> Result<i64, CoreError> {
        spi::require_writable("corpus_audit_purge")?;
        let text = match spi::interval_sign(older_than)? {
            Some((text, std::cmp::Ordering::Equal | std::cmp::Ordering::Greater)) => text,
            other => {
                let shown = other.map_or_else(|| "NULL".to_string(), |(text, _)| text);
                return Err(CoreError::new(
                    SqlState::InvalidParameterValue,
                    format!("older_than must be a non-negative interval, got {shown}"),
                    "Pass how old the rows to delete are, e.g. corpus.corpus_audit_purge(interval '90 days').",
                ));
            }
        };
        catalog::purge_audit(&text, corpus)
    })
    .or_raise()
}

/// Every corpus with its settings, sources and edge sets, by name.
#[pg_extern(stable, parallel_safe)]
fn corpus_list() -> TableIterator<
    'static,
    (
        name!(name, Option<String>),
        name!(description, Option<String>),
        name!(isolation, Option<JsonbText>),
        name!(required_filters, Option<Vec<Option<String>>>),
        name!(filter_fields, Option<JsonbText>),
        name!(sources, Option<JsonbText>),
        name!(spaces, Option<JsonbText>),
        name!(evidence, Option<JsonbText>),
        name!(must_include, Option<JsonbText>),
        name!(graph, Option<JsonbText>),
        name!(edges, Option<JsonbText>),
        name!(audit, Option<JsonbText>),
        name!(ranking, Option<JsonbText>),
    ),
> {
    let rows = spi::pinned_search_path(catalog::list).or_raise();
    TableIterator::new(rows.into_iter().map(|r| {
        let j = |s: Option<String>| s.map(JsonbText);
        let [isolation, filter_fields, sources, spaces, evidence, must_include, graph, edges, audit, ranking] = r.json;
        (
            r.name,
            r.description,
            j(isolation),
            r.required_filters,
            j(filter_fields),
            j(sources),
            j(spaces),
            j(evidence),
            j(must_include),
            j(graph),
            j(edges),
            j(audit),
            j(ranking),
        )
    }))
}

/// A table's description as corpus definitions carry it (its live columns and their types).
#[pg_extern(stable, parallel_safe)]
fn _relation_json(rel: Option<RegClass>) -> Option<JsonbText> {
    let rel = rel?;
    spi::pinned_search_path(|| spi::catalog::relation_json(rel.as_i64())).or_raise()
}
