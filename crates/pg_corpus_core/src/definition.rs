//! Corpus definitions: the JSON the catalog query hands out (src/spi/catalog.rs), checked
//! and resolved against the live column lists it carries into the [`crate::model`]. The same
//! code validates a definition when it is made and resolves it for every search, so a mapping
//! that would fail at search time fails at definition time, and catalog drift (a column dropped
//! or retyped later) gives a clear error instead of a broken query.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{CoreError, Result, SqlState};
use crate::filters::is_iso_date;
use crate::json::scalar_text;
use crate::model::*;

// ---------------------------------------------------------------------------------------------
// Resolution
// ---------------------------------------------------------------------------------------------

fn invalid(msg: String, hint: &str) -> CoreError {
    CoreError::new(SqlState::InvalidParameterValue, msg, hint)
}

/// `{"col": v}` / `{"col": [v, ...]}` → (column, values). Used for isolation and source rules.
fn equality_map(v: &Value, what: &str) -> Result<Vec<(String, Vec<String>)>> {
    let hint = "Write it as {\"column\": value} or {\"column\": [value, ...]} with string, number or boolean values.";
    let obj = v.as_object().ok_or_else(|| invalid(format!("{what} must be a JSON object"), hint))?;
    let mut out = Vec::new();
    for (col, val) in obj {
        let values = match val {
            Value::Array(items) => {
                if items.is_empty() {
                    return Err(invalid(format!("{what}: the value list of \"{col}\" is empty"), hint));
                }
                items
                    .iter()
                    .map(|x| {
                        scalar_text(x)
                            .ok_or_else(|| invalid(format!("{what}: \"{col}\" has a value that is not a scalar"), hint))
                    })
                    .collect::<Result<Vec<_>>>()?
            }
            other => vec![scalar_text(other)
                .ok_or_else(|| invalid(format!("{what}: \"{col}\" has a value that is not a scalar"), hint))?],
        };
        out.push((col.clone(), values));
    }
    Ok(out)
}

fn column<'a>(rel: &'a RelationInfo, name: &str, role: &str) -> Result<&'a ColumnInfo> {
    rel.columns.get(name).ok_or_else(|| {
        CoreError::new(
            SqlState::UndefinedColumn,
            format!("column \"{name}\" ({role}) does not exist in table \"{}\".\"{}\"", rel.schema, rel.name),
            "Check the column mapping of the source; if the table changed after the corpus was defined, redefine the source (corpus.corpus_drop_source + corpus_add_source).",
        )
        .with_detail(format!(
            "columns of \"{}\".\"{}\": {}",
            rel.schema,
            rel.name,
            rel.columns.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    })
}

fn colref_unchecked(side: Side, name: &str, info: &ColumnInfo) -> ColRef {
    ColRef {
        side,
        // the column's name now, when the definition knew it by the name it had before
        column: info.name.clone().unwrap_or_else(|| name.to_string()),
        sql_type: info.sql_type.clone(),
        cast_type: info.cast_type().to_string(),
        is_array: info.category == "A",
    }
}

/// A mapped column, refused unless its base type is built in: reading, casting and comparing
/// a value of a type a table owner defined (an enum, a composite, a range, a base type of an
/// extension, an array of any of them) can call code that owner wrote — a cast, an operator,
/// a conversion to JSON — with the rights of whoever searches.
fn colref(side: Side, rel: &RelationInfo, name: &str, info: &ColumnInfo) -> Result<ColRef> {
    if !info.is_builtin() {
        return Err(CoreError::new(
            SqlState::DatatypeMismatch,
            format!(
                "column \"{name}\" of \"{}\".\"{}\" has type {}, not a built-in type pg_corpus can read safely",
                rel.schema, rel.name, info.sql_type
            ),
            "Map a column of a built-in type (text, varchar, integer, bigint, numeric, boolean, date, \
             timestamptz, uuid, arrays of them) or of a domain over one, e.g. \
             ALTER TABLE ... ALTER COLUMN ... TYPE text.",
        )
        .with_detail(format!(
            "Its base type {} is not built into PostgreSQL: its casts, operators and conversions are code \
             its owner wrote, which a search would run with the searcher's rights.",
            info.cast_type()
        )));
    }
    Ok(colref_unchecked(side, name, info))
}

fn wrong_type(rel: &RelationInfo, col: &str, info: &ColumnInfo, want: &str, hint: &str) -> CoreError {
    CoreError::new(
        SqlState::DatatypeMismatch,
        format!("column \"{col}\" of \"{}\".\"{}\" has type {}, expected {want}", rel.schema, rel.name, info.sql_type),
        hint,
    )
}

/// `"col"` → item column, `"parent.col"` → parent column.
fn mapped_column(src: &SourceDef, item: &RelationInfo, spec: &str, what: &str) -> Result<ColRef> {
    if let Some(pcol) = spec.strip_prefix("parent.") {
        let parent = src.parent.as_ref().ok_or_else(|| {
            invalid(
                format!("{what} names \"{spec}\" but source \"{}\" has no parent table", src.name),
                "Name an item column, or register the source with parent_table.",
            )
        })?;
        colref(Side::Parent, parent, pcol, column(parent, pcol, what)?)
    } else {
        colref(Side::Item, item, spec, column(item, spec, what)?)
    }
}

fn key_map(src: &SourceDef, item: &RelationInfo, v: &Value, what: &str) -> Result<Vec<(String, ColRef)>> {
    let hint = "Write it as {\"key\": \"item_column\"} or {\"key\": \"parent.column\"}.";
    let obj = v.as_object().ok_or_else(|| invalid(format!("{what} must be a JSON object"), hint))?;
    let mut out = Vec::new();
    for (key, spec) in obj {
        let spec = spec
            .as_str()
            .ok_or_else(|| invalid(format!("{what}: the value of \"{key}\" must be a column name"), hint))?;
        out.push((key.clone(), mapped_column(src, item, spec, what)?));
    }
    Ok(out)
}

fn check_identifier(name: &str, what: &str) -> Result<()> {
    if is_name(name) {
        Ok(())
    } else {
        Err(invalid(
            format!("invalid {what} \"{name}\""),
            "Use a lower-case identifier: letters, digits and _, at most 63 characters.",
        ))
    }
}

/// One declared filter field: its type and limits (see [`FieldLimits`]).
fn field_spec(corpus: &str, name: &str, spec: &Value) -> Result<(FieldType, Option<FieldLimits>)> {
    let types = "Field types are text, integer, bigint, numeric, boolean, date and timestamptz.";
    let shape = "Declare a field as \"type\" or {\"type\": \"type\", \"values\": [...]} or \
                 {\"type\": \"integer\", \"min\": 1, \"max\": 100}.";
    let parse_type = |ty: &Value| {
        ty.as_str()
            .and_then(FieldType::parse)
            .ok_or_else(|| invalid(format!("filter field \"{name}\" has an unknown type {ty}"), types))
    };
    let obj = match spec {
        Value::String(_) => return Ok((parse_type(spec)?, None)),
        Value::Object(o) => o,
        other => return Err(invalid(format!("filter field \"{name}\" is declared as {other}"), shape)),
    };
    if let Some(k) = obj.keys().find(|k| !["type", "values", "min", "max"].contains(&k.as_str())) {
        return Err(invalid(format!("filter field \"{name}\" has an unknown key \"{k}\""), shape));
    }
    let ty = parse_type(obj.get("type").unwrap_or(&Value::Null))?;
    let mut limits = FieldLimits::default();
    if let Some(values) = obj.get("values") {
        let list = values
            .as_array()
            .filter(|l| !l.is_empty())
            .ok_or_else(|| invalid(format!("filter field \"{name}\": \"values\" must be a non-empty array"), shape))?;
        let mut out = Vec::with_capacity(list.len());
        for v in list {
            crate::filters::typed_value(name, ty, v, None).map_err(|e| CoreError {
                message: format!("corpus \"{corpus}\": allowed values: {}", e.message),
                ..e
            })?;
            out.push(scalar_text(v).unwrap_or_default());
        }
        limits.values = Some(out);
    }
    for (key, slot) in [("min", &mut limits.min), ("max", &mut limits.max)] {
        let Some(bound) = obj.get(key) else { continue };
        let hint = "Ranges are for integer, bigint and numeric fields (numbers) and date fields ('YYYY-MM-DD').";
        let ok = match ty {
            FieldType::Integer | FieldType::Bigint | FieldType::Numeric => bound.is_number(),
            FieldType::Date => bound.as_str().is_some_and(is_iso_date),
            _ => {
                return Err(invalid(
                    format!("filter field \"{name}\" of type {} cannot declare a \"{key}\"", ty.sql()),
                    hint,
                ))
            }
        };
        if !ok {
            // a bound of the wrong type, as an allowed value of the wrong type
            return Err(CoreError::new(
                SqlState::DatatypeMismatch,
                format!(
                    "filter field \"{name}\": \"{key}\" {} does not fit its type {}",
                    crate::json::brief(bound),
                    ty.sql()
                ),
                hint,
            ));
        }
        *slot = Some(bound.clone());
    }
    if let (Some(lo), Some(hi)) = (&limits.min, &limits.max) {
        if crate::filters::compare_bound(lo, hi) == Some(std::cmp::Ordering::Greater) {
            return Err(invalid(format!("filter field \"{name}\": min {lo} is above max {hi}"), shape));
        }
    }
    Ok((ty, Some(limits)))
}

type CorpusSettings = (Vec<(String, Vec<String>)>, BTreeMap<String, FieldType>, BTreeMap<String, FieldLimits>);

/// Parse and validate corpus-level settings (no tables needed).
fn corpus_settings(def: &CorpusDef) -> Result<CorpusSettings> {
    let isolation = equality_map(&def.isolation, "isolation")?;
    let mut fields = BTreeMap::new();
    let mut limits = BTreeMap::new();
    let obj = def
        .filter_fields
        .as_object()
        .ok_or_else(|| invalid("filter_fields must be a JSON object".into(), "Write it as {\"field\": \"type\"}."))?;
    for (name, spec) in obj {
        let (ty, lim) = field_spec(&def.name, name, spec)?;
        if isolation.iter().any(|(c, _)| c == name) {
            return Err(CoreError::new(
                SqlState::InsufficientPrivilege,
                format!("\"{name}\" is an isolation column of corpus \"{}\" and cannot be a filter field", def.name),
                "The isolation predicate is fixed by the corpus definition; remove the field from filter_fields.",
            ));
        }
        fields.insert(name.clone(), ty);
        if let Some(l) = lim {
            limits.insert(name.clone(), l);
        }
    }
    for req in &def.required_filters {
        if !fields.contains_key(req) {
            return Err(invalid(
                format!("required filter \"{req}\" is not a declared filter field"),
                "Declare it in filter_fields with its type.",
            ));
        }
    }
    Ok((isolation, fields, limits))
}

fn resolve_source(
    def: &CorpusDef,
    src: &SourceDef,
    isolation: &[(String, Vec<String>)],
    fields: &BTreeMap<String, FieldType>,
) -> Result<Source> {
    check_identifier(&src.name, "source name")?;
    let item = src.item.as_ref().ok_or_else(|| {
        CoreError::new(
            SqlState::UndefinedTable,
            format!("the item table of source \"{}\" (oid {}) no longer exists", src.name, src.item_oid),
            "Drop the source with corpus.corpus_drop_source and register the new table.",
        )
    })?;
    if src.parent_oid.is_some() && src.parent.is_none() {
        return Err(CoreError::new(
            SqlState::UndefinedTable,
            format!("the parent table of source \"{}\" no longer exists", src.name),
            "Drop the source with corpus.corpus_drop_source and register it again.",
        ));
    }
    let id_info = column(item, &src.id_column, "id_column")?;
    let text_info = column(item, &src.text_column, "text_column")?;
    if text_info.category != "S" {
        return Err(wrong_type(
            item,
            &src.text_column,
            text_info,
            "text or varchar",
            "text_column must hold the item's text.",
        ));
    }
    let tsv_info = column(item, &src.tsv_column, "tsv_column")?;
    if tsv_info.typname != "tsvector" {
        return Err(wrong_type(
            item,
            &src.tsv_column,
            tsv_info,
            "tsvector",
            "Add a generated column, e.g. ALTER TABLE t ADD COLUMN body_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED.",
        ));
    }
    let emb_info = column(item, &src.embedding_column, "embedding_column")?;
    // pgvector's own type, not a look-alike named "vector" in another schema
    let pgvector = match (&emb_info.base_schema, &def.vector_schema) {
        (Some(schema), Some(vector_schema)) => schema == vector_schema,
        _ => true,
    };
    if emb_info.base_typname.as_deref().unwrap_or(&emb_info.typname) != "vector" || !pgvector {
        return Err(wrong_type(
            item,
            &src.embedding_column,
            emb_info,
            "vector(n) (pgvector)",
            "The embedding column must be a pgvector vector with a fixed dimension.",
        ));
    }
    if emb_info.typmod <= 0 {
        return Err(wrong_type(
            item,
            &src.embedding_column,
            emb_info,
            "vector(n) with a fixed dimension n",
            "Declare the dimension, e.g. ALTER TABLE t ALTER COLUMN embedding TYPE vector(384); the search checks query vectors against it.",
        ));
    }
    for input in &src.embedding_inputs {
        let info = column(item, input, "embedding_inputs")?;
        if info.category != "S" {
            return Err(wrong_type(
                item,
                input,
                info,
                "text or varchar",
                "embedding_inputs name the text columns the embedding is computed from.",
            ));
        }
    }
    let distance = match src.distance.as_str() {
        "cosine" => Distance::Cosine,
        "l2" => Distance::L2,
        "ip" => Distance::InnerProduct,
        other => {
            return Err(invalid(format!("unknown distance \"{other}\""), "distance is cosine, l2 or ip."));
        }
    };
    let fk_info = column(item, &src.parent_fk, "parent_fk")?;
    let parent_key = match &src.parent {
        Some(parent) => {
            let key_info = column(parent, &src.parent_key, "parent_key")?;
            let compatible = key_info.typname == fk_info.typname
                || (key_info.category == "N" && fk_info.category == "N")
                || (key_info.category == "S" && fk_info.category == "S");
            if !compatible {
                return Err(wrong_type(
                    item,
                    &src.parent_fk,
                    fk_info,
                    &format!("a type comparable with {}.{} ({})", parent.name, src.parent_key, key_info.sql_type),
                    "parent_fk must reference the parent key.",
                ));
            }
            Some(colref(Side::Parent, parent, &src.parent_key, key_info)?)
        }
        None => None,
    };
    // The scope table of corpus-level rules: the parent when there is one.
    let (scope_side, scope) = match &src.parent {
        Some(p) => (Side::Parent, p),
        None => (Side::Item, item),
    };
    let parent_required = src
        .parent_required
        .iter()
        .map(|c| colref(scope_side, scope, c, column(scope, c, "parent_required")?))
        .collect::<Result<Vec<_>>>()?;
    let rule = equality_map(&src.rule, "rule")?
        .into_iter()
        .map(|(c, values)| Ok(BoundCond { col: colref(Side::Item, item, &c, column(item, &c, "rule")?)?, values }))
        .collect::<Result<Vec<_>>>()?;
    let fields_of_isolation = isolation;
    let mut isolation = isolation
        .iter()
        .map(|(c, values)| {
            Ok(BoundCond { col: colref(scope_side, scope, c, column(scope, c, "isolation")?)?, values: values.clone() })
        })
        .collect::<Result<Vec<_>>>()?;
    // An item table that carries its own copy of an isolation column (denormalised, e.g. for
    // per-corpus partial HNSW indexes) is filtered on it too: both copies must match, so a
    // drifting copy can hide items but never leak them, and the planner can use an index whose
    // predicate is on the item table (docs/filtered-ann.md).
    if scope_side == Side::Parent {
        let item_copies: Vec<BoundCond> = fields_of_isolation
            .iter()
            .filter_map(|(field, values)| {
                let info = item.columns.get(field)?;
                Some(colref(Side::Item, item, field, info).map(|col| BoundCond { col, values: values.clone() }))
            })
            .collect::<Result<_>>()?;
        isolation.extend(item_copies);
    }
    let mut filter_columns = BTreeMap::new();
    for (field, ty) in fields {
        let (side, rel, info) = match (item.columns.get(field), src.parent.as_ref()) {
            (Some(info), _) => (Side::Item, item, info),
            (None, Some(parent)) => (Side::Parent, parent, column(parent, field, "filter field")?),
            (None, None) => (Side::Item, item, column(item, field, "filter field")?),
        };
        if !ty.accepts(info) {
            return Err(wrong_type(rel, field, info, ty.sql(), "Declare the filter field with the column's type."));
        }
        filter_columns.insert(field.clone(), colref(side, rel, field, info)?);
    }
    if src.min_length < 0 {
        return Err(invalid(format!("min_length must be >= 0, got {}", src.min_length), "Use 0 to accept any text."));
    }
    for (w, name) in [(src.semantic_weight, "semantic_weight"), (src.lexical_weight, "lexical_weight")] {
        if !(w.is_finite() && w >= 0.0) {
            return Err(invalid(
                format!("{name} must be a finite number >= 0, got {w}"),
                "Weights scale a source's RRF contribution; 1 is neutral.",
            ));
        }
    }
    let parent_scope = match &src.parent {
        Some(p) => format!("rel:{}", p.oid),
        None => format!("src:{}:{}", def.name, src.name),
    };
    Ok(Source {
        name: src.name.clone(),
        item: Relation {
            oid: item.oid,
            schema: item.schema.clone(),
            name: item.name.clone(),
            distribution: item.distribution.clone(),
        },
        parent: src.parent.as_ref().map(|p| Relation {
            oid: p.oid,
            schema: p.schema.clone(),
            name: p.name.clone(),
            distribution: p.distribution.clone(),
        }),
        parent_scope,
        id: colref(Side::Item, item, &src.id_column, id_info)?,
        text: colref(Side::Item, item, &src.text_column, text_info)?,
        tsv: colref(Side::Item, item, &src.tsv_column, tsv_info)?,
        tsv_index: item.bm25_indexes.iter().any(|c| c == tsv_info.name.as_deref().unwrap_or(&src.tsv_column)),
        tsv_index_keys: item
            .bm25_index_keys
            .iter()
            .filter(|x| x.column == tsv_info.name.as_deref().unwrap_or(&src.tsv_column))
            .map(|x| x.keys.clone())
            .collect(),
        embedding: colref_unchecked(Side::Item, &src.embedding_column, emb_info),
        dimensions: emb_info.typmod,
        space: 0,
        distance,
        parent_fk: colref(Side::Item, item, &src.parent_fk, fk_info)?,
        parent_key,
        parent_required,
        rule,
        isolation,
        filter_columns,
        locator: key_map(src, item, &src.locator, "locator")?,
        metadata: key_map(src, item, &src.metadata, "metadata")?,
        min_length: src.min_length,
        content_function: def.content_function,
        has_content_function: def.has_content_function,
        ts_config: src.ts_config,
        language: src.language.as_deref().map(crate::model::Language::parse).transpose()?,
        semantic_weight: src.semantic_weight,
        lexical_weight: src.lexical_weight,
        column_types: src.column_types.clone(),
    })
}

/// Validate a corpus definition and resolve it for planning.
pub fn resolve(def: &CorpusDef) -> Result<Corpus> {
    check_identifier(&def.name, "corpus name")?;
    let (isolation, fields, filter_limits) = corpus_settings(def)?;
    let vector_schema = def.vector_schema.clone().ok_or_else(|| {
        CoreError::new(
            SqlState::ObjectNotInPrerequisiteState,
            "the vector extension (pgvector) is not installed in this database",
            "CREATE EXTENSION vector;",
        )
    })?;
    let mut sources = def
        .sources
        .iter()
        .map(|s| resolve_source(def, &s.following_renames(), &isolation, &fields))
        .collect::<Result<Vec<_>>>()?;
    let mut spaces = declared_spaces(def)?;
    for (src, src_def) in sources.iter_mut().zip(&def.sources) {
        let name = src_def.space.as_deref().unwrap_or(DEFAULT_SPACE);
        let Some(idx) = spaces.iter().position(|s| s.name == name) else {
            let names: Vec<String> = spaces.iter().skip(1).map(|s| crate::sql::literal(&s.name)).collect();
            return Err(invalid(
                format!(
                    "source \"{}\" names space {}, which corpus \"{}\" does not declare",
                    src.name,
                    crate::json::brief_str(name),
                    def.name
                ),
                &if names.is_empty() {
                    "Declare it with corpus_alter(spaces => '{\"name\": {\"dimensions\": n}}'), or leave space NULL."
                        .to_string()
                } else {
                    format!("Declared spaces: {}; or leave space NULL for the default one.", names.join(", "))
                },
            ));
        };
        match spaces[idx].dimensions {
            Some(d) if d != src.dimensions => {
                return Err(CoreError::new(
                    SqlState::DatatypeMismatch,
                    format!(
                        "source \"{}\" has {}-dimensional embeddings but space \"{}\" has {}",
                        src.name, src.dimensions, spaces[idx].name, d
                    ),
                    "The sources of a space are searched with one query vector: give each model its own space.",
                ));
            }
            Some(_) => {}
            None => spaces[idx].dimensions = Some(src.dimensions),
        }
        src.space = idx;
    }
    let mut corpus = Corpus {
        name: def.name.clone(),
        isolation_columns: isolation.into_iter().map(|(c, _)| c).collect(),
        required_filters: def.required_filters.clone(),
        filter_fields: fields,
        filter_limits,
        vector_schema,
        sources,
        evidence: crate::evidence::parse(&def.evidence, &spaces)?,
        spaces,
        must_include: Vec::new(),
        edges: Vec::new(),
        edge_errors: Vec::new(),
        graph: crate::augment::parse_limits(&def.graph)?,
        audit: crate::audit::parse(&def.audit)?,
        ranking: crate::ranking::parse(&def.ranking)?,
    };
    corpus.must_include = crate::augment::parse_must_include(&def.must_include, &corpus)?;
    for e in &def.edges {
        match crate::augment::resolve_edges(e, &corpus) {
            Ok(edges) => corpus.edges.push(edges),
            Err(err) => corpus.edge_errors.push(err),
        }
    }
    Ok(corpus)
}

/// The corpus with the sources that still resolve, and each other source's error: what can
/// still be judged of a corpus one of whose sources no longer resolves (a mapped column
/// dropped). An error of the corpus' own settings is the corpus' error.
pub fn resolve_available(def: &CorpusDef) -> Result<(Corpus, Vec<(String, CoreError)>)> {
    let (isolation, fields, _) = corpus_settings(def)?;
    let mut kept = def.clone();
    let mut broken = Vec::new();
    kept.sources.retain(|s| match resolve_source(def, &s.following_renames(), &isolation, &fields) {
        Ok(_) => true,
        Err(e) => {
            broken.push((s.name.clone(), e));
            false
        }
    });
    Ok((resolve(&kept)?, broken))
}

/// The default space, then the declared ones in name order (`{"name": {"dimensions": n,
/// "model": "…", "weight": w}}`; "default" may be declared to give it a model or weight).
fn declared_spaces(def: &CorpusDef) -> Result<Vec<Space>> {
    let shape = "Declare spaces as {\"name\": {\"dimensions\": 512, \"model\": \"clip\", \"weight\": 0.5}}: \
                 dimensions a positive integer, model a string, weight a positive number (default 1).";
    let mut out = vec![Space { name: DEFAULT_SPACE.into(), dimensions: None, model: None, weight: 1.0 }];
    let obj = match &def.spaces {
        Value::Null => return Ok(out),
        Value::Object(o) => o,
        _ => return Err(invalid("spaces must be a JSON object".into(), shape)),
    };
    for (name, spec) in obj {
        check_identifier(name, "space name")?;
        let Value::Object(f) = spec else {
            return Err(invalid(format!("space \"{name}\" must be a JSON object"), shape));
        };
        if let Some(k) = f.keys().find(|k| !["dimensions", "model", "weight"].contains(&k.as_str())) {
            return Err(invalid(format!("space \"{name}\" has an unknown key {}", crate::json::brief_str(k)), shape));
        }
        let dimensions = match f.get("dimensions") {
            Some(d) => match d.as_i64() {
                Some(n) if (1..=16_000).contains(&n) => Some(n as i32),
                _ => {
                    return Err(invalid(
                        format!("space \"{name}\": dimensions must be an integer from 1 to 16000"),
                        shape,
                    ))
                }
            },
            None if name == DEFAULT_SPACE => None,
            None => return Err(invalid(format!("space \"{name}\" declares no dimensions"), shape)),
        };
        let model = match f.get("model") {
            None | Some(Value::Null) => None,
            Some(Value::String(m)) => Some(m.clone()),
            Some(_) => return Err(invalid(format!("space \"{name}\": model must be a string"), shape)),
        };
        let weight = match f.get("weight") {
            None | Some(Value::Null) => 1.0,
            Some(w) => match w.as_f64() {
                Some(w) if w.is_finite() && w > 0.0 && w <= 100.0 => w,
                _ => return Err(invalid(format!("space \"{name}\": weight must be a number in (0, 100]"), shape)),
            },
        };
        let space = Space { name: name.clone(), dimensions, model, weight };
        if name == DEFAULT_SPACE {
            out[0] = space;
        } else {
            out.push(space);
        }
    }
    Ok(out)
}

/// Parse the catalog JSON.
pub fn parse_definition(json: &str) -> Result<CorpusDef> {
    serde_json::from_str(json).map_err(|e| {
        CoreError::new(
            SqlState::ObjectNotInPrerequisiteState,
            format!("the corpus catalog could not be read: {e}"),
            "The pg_corpus catalog and library versions may differ; run ALTER EXTENSION pg_corpus UPDATE.",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{col, legal, legal_def, with_pages_def};
    use serde_json::json;

    fn resolve_json(v: Value) -> Result<Corpus> {
        resolve(&serde_json::from_value(v).unwrap())
    }

    /// The legal corpus with one column of `table` (0 case_law, 1 precedent_chunks) retyped.
    fn retyped(table: &str, column: &str, info: Value) -> Value {
        let mut def = legal_def();
        for s in def["sources"].as_array_mut().unwrap() {
            let rel = if table == "case_law" { &mut s["parent"] } else { &mut s["item"] };
            if rel["name"] == table {
                rel["columns"][column] = info.clone();
            }
        }
        def
    }

    fn domain_over_text() -> Value {
        json!({"type": "tenant.kind_d", "typname": "kind_d", "category": "S", "typmod": -1,
               "base_type": "text", "base_typname": "text", "base_schema": "pg_catalog", "builtin": true})
    }

    #[test]
    fn values_compared_with_a_domain_column_are_cast_to_its_base_type() {
        let c = resolve_json(retyped("case_law", "source_kind", domain_over_text())).unwrap();
        let iso = &c.sources[0].isolation[0].col;
        assert_eq!((iso.sql_type.as_str(), iso.cast_type.as_str()), ("tenant.kind_d", "text"));
        let (sql, _) = crate::plan::fetch(&c, 0, &[], vec!["1".into()], vec![]);
        assert!(sql.contains("p.\"source_kind\" = $") && !sql.contains("kind_d"), "{sql}");
    }

    #[test]
    fn every_mapped_column_of_a_type_a_table_owner_defined_is_refused() {
        let user_type = |ty: &str, typname: &str, cat: &str| {
            json!({"type": ty, "typname": typname, "category": cat, "typmod": -1,
                   "base_type": ty, "base_typname": typname, "base_schema": "tenant", "builtin": false})
        };
        let cases = [
            ("case_law", "source_kind", user_type("tenant.kind_e", "kind_e", "E")),
            ("case_law", "case_number", user_type("tenant.title_t", "title_t", "C")),
            ("case_law", "court", user_type("tenant.court_r", "court_r", "R")),
            ("case_law", "id", user_type("tenant.key_t", "key_t", "C")),
            ("precedent_chunks", "page_number", user_type("tenant.page_t", "page_t", "C")),
            ("precedent_chunks", "content", user_type("tenant.body_t", "body_t", "S")),
            ("precedent_chunks", "case_law_id", user_type("tenant.fk_t", "fk_t", "N")),
            ("precedent_chunks", "content_tsv", user_type("tenant.tsvector", "tsvector", "U")),
        ];
        for (table, column, info) in cases {
            let err = resolve_json(retyped(table, column, info)).map(|_| ()).unwrap_err();
            assert_eq!(err.state, SqlState::DatatypeMismatch, "{table}.{column}: {err:?}");
            assert!(err.message.contains(column) && !err.hint.is_empty(), "{err:?}");
        }
    }

    #[test]
    fn an_embedding_column_of_a_look_alike_vector_type_is_refused() {
        let fake = json!({"type": "tenant.vector", "typname": "vector", "category": "U", "typmod": 384,
                          "base_type": "tenant.vector", "base_typname": "vector", "base_schema": "tenant",
                          "builtin": false});
        let err = resolve_json(retyped("precedent_chunks", "embedding", fake)).map(|_| ()).unwrap_err();
        assert_eq!(err.state, SqlState::DatatypeMismatch, "{err:?}");
    }

    #[test]
    fn the_contract_measures_content_with_the_content_function_when_the_catalog_has_it() {
        let mut def = legal_def();
        def["content_function"] = json!(true);
        let c = resolve_json(def.clone()).unwrap();
        let (sql, _) = crate::plan::fetch(&c, 0, &[], vec!["1".into()], vec![]);
        assert!(sql.contains("corpus._content_length(i.\"content\") >= 50"), "{sql}");
        assert!(sql.contains("corpus._content_length(p.\"case_number\"::text) > 0"), "{sql}");
        assert!(!sql.contains("btrim") && !sql.contains("_has_content"), "{sql}");
        // a catalog with corpus._has_content asks it whether the text reaches the minimum
        def["has_content_function"] = json!(true);
        let c = resolve_json(def).unwrap();
        let (sql, _) = crate::plan::fetch(&c, 0, &[], vec!["1".into()], vec![]);
        assert!(sql.contains("corpus._has_content(i.\"content\", 50)"), "{sql}");
        assert!(!sql.contains("corpus._content_length(i."), "{sql}");
        assert!(sql.contains("corpus._content_length(p.\"case_number\"::text) > 0"), "{sql}");
    }

    #[test]
    fn resolves_the_legal_corpus() {
        let c = legal();
        assert_eq!(c.isolation_columns, vec!["source_kind"]);
        assert_eq!(c.sources.len(), 2);
        let h = &c.sources[1];
        assert_eq!(h.isolation[0].col.side, Side::Parent);
        assert_eq!(h.rule[0].values, vec!["approved"]);
        assert_eq!(h.dimensions, 384);
        assert_eq!(h.filter_columns["court"].side, Side::Parent);
        assert_eq!(c.sources[0].filter_columns["page_number"].side, Side::Item);
        assert_eq!(h.parent_scope, c.sources[0].parent_scope);
    }

    #[test]
    fn missing_column_is_42703() {
        let mut d = legal_def();
        d["sources"][0]["text_column"] = json!("body");
        assert_eq!(resolve_json(d).unwrap_err().state, SqlState::UndefinedColumn);
    }

    #[test]
    fn wrong_types_are_42804() {
        for (field, value) in
            [("tsv_column", "content"), ("embedding_column", "content"), ("text_column", "page_number")]
        {
            let mut d = legal_def();
            d["sources"][0][field] = json!(value);
            assert_eq!(resolve_json(d).unwrap_err().state, SqlState::DatatypeMismatch, "{field}");
        }
        let mut d = legal_def();
        d["sources"][0]["item"]["columns"]["embedding"]["typmod"] = json!(-1);
        assert_eq!(resolve_json(d).unwrap_err().state, SqlState::DatatypeMismatch);
        let mut d = legal_def();
        d["filter_fields"]["court"] = json!("integer");
        assert_eq!(resolve_json(d).unwrap_err().state, SqlState::DatatypeMismatch);
    }

    #[test]
    fn isolation_column_cannot_be_a_filter_field() {
        let mut d = legal_def();
        d["filter_fields"]["source_kind"] = json!("text");
        assert_eq!(resolve_json(d).unwrap_err().state, SqlState::InsufficientPrivilege);
    }

    #[test]
    fn required_filter_must_be_declared() {
        let mut d = legal_def();
        d["required_filters"] = json!(["practice_area"]);
        assert_eq!(resolve_json(d).unwrap_err().state, SqlState::InvalidParameterValue);
    }

    #[test]
    fn isolation_values_must_be_scalars() {
        for bad in [json!({"source_kind": []}), json!({"source_kind": {"a": 1}}), json!(["x"])] {
            let mut d = legal_def();
            d["isolation"] = bad;
            assert_eq!(resolve_json(d).unwrap_err().state, SqlState::InvalidParameterValue);
        }
    }

    #[test]
    fn embedding_inputs_are_checked() {
        let mut d = legal_def();
        d["sources"][0]["embedding_inputs"] = json!(["content", "nope"]);
        assert_eq!(resolve_json(d).unwrap_err().state, SqlState::UndefinedColumn);
        let mut d = legal_def();
        d["sources"][0]["embedding_inputs"] = json!(["page_number"]);
        assert_eq!(resolve_json(d).unwrap_err().state, SqlState::DatatypeMismatch);
    }

    #[test]
    fn retyped_columns_are_listed() {
        let mut d = legal_def();
        d["sources"][0]["column_types"] =
            json!({"item": {"page_number": "integer"}, "parent": {"case_number": "text"}});
        let c = resolve_json(d.clone()).unwrap();
        assert!(c.sources[0].retyped_columns().is_empty());
        // still valid (a string type), but every locator now carries a different type
        d["sources"][0]["parent"]["columns"]["case_number"] = col("character varying(20)", "varchar", "S", 24);
        let c = resolve_json(d).unwrap();
        assert_eq!(
            c.sources[0].retyped_columns(),
            vec![("parent", "case_number".to_string(), "text".to_string(), "character varying(20)".to_string())]
        );
    }

    #[test]
    fn an_item_copy_of_the_isolation_column_is_filtered_too() {
        let mut d = legal_def();
        d["sources"][0]["item"]["columns"]["source_kind"] = col("text", "text", "S", -1);
        let c = resolve_json(d).unwrap();
        let sides: Vec<Side> = c.sources[0].isolation.iter().map(|b| b.col.side).collect();
        assert_eq!(sides, vec![Side::Parent, Side::Item]);
        assert_eq!(c.sources[1].isolation.len(), 1, "halachot has no copy");
        // the slice estimate counts one copy (the planner would multiply correlated selectivities)
        let (sql, _) = crate::plan::slice_estimate(&c, 0, &[], true);
        assert!(sql.contains("i.\"source_kind\" = $") && !sql.contains("p.\"source_kind\" = $"), "{sql}");
    }

    /// The legal definition with attribute numbers on its chunks source's columns (item and
    /// parent, in name order) and recorded under the names it uses.
    fn numbered() -> Value {
        let mut d = legal_def();
        let src = &mut d["sources"][0];
        for side in ["item", "parent"] {
            let names: Vec<String> = src[side]["columns"].as_object().unwrap().keys().cloned().collect();
            let mut recorded = serde_json::Map::new();
            for (i, name) in names.iter().enumerate() {
                src[side]["columns"][name]["name"] = json!(name);
                src[side]["columns"][name]["attnum"] = json!(i + 1);
                recorded.insert(name.clone(), json!(i + 1));
            }
            src["column_types"]["attnums"][side] = Value::Object(recorded);
        }
        d
    }

    /// Rename a column of the chunks source's table (`side`) in the live description.
    fn rename(d: &mut Value, side: &str, from: &str, to: &str) {
        let cols = d["sources"][0][side]["columns"].as_object_mut().unwrap();
        let mut info = cols.remove(from).unwrap();
        info["name"] = json!(to);
        cols.insert(to.to_string(), info);
    }

    #[test]
    fn renamed_columns_are_followed_by_attribute_number() {
        let mut d = numbered();
        rename(&mut d, "item", "content", "body");
        rename(&mut d, "item", "id", "chunk_id");
        rename(&mut d, "parent", "source_kind", "kind");
        rename(&mut d, "parent", "court", "court_name");
        let c = resolve_json(d.clone()).unwrap();
        let s = &c.sources[0];
        assert_eq!((s.text.column.as_str(), s.id.column.as_str()), ("body", "chunk_id"));
        assert_eq!(s.isolation[0].col.column, "kind");
        assert_eq!(s.filter_columns["court"].column, "court_name");
        assert_eq!(s.metadata[0].1.column, "court_name");
        // the number wins over a newer column that took the old name
        let mut newer = d.clone();
        newer["sources"][0]["item"]["columns"]["content"] = json!({"name": "content", "attnum": 99,
            "type": "text", "typname": "text", "category": "S", "typmod": -1});
        assert_eq!(resolve_json(newer).unwrap().sources[0].text.column, "body");
        // a dropped column is gone: 42703, as without the numbers
        d["sources"][0]["item"]["columns"].as_object_mut().unwrap().remove("body");
        assert_eq!(resolve_json(d).unwrap_err().state, SqlState::UndefinedColumn);
        // a definition without recorded numbers looks names up as they are
        let mut old = legal_def();
        let cols = old["sources"][0]["item"]["columns"].as_object_mut().unwrap();
        let info = cols.remove("content").unwrap();
        cols.insert("body".into(), info);
        assert_eq!(resolve_json(old).unwrap_err().state, SqlState::UndefinedColumn);
    }

    #[test]
    fn the_sources_that_resolve_are_kept_beside_the_errors_of_the_others() {
        let mut d = legal_def();
        d["sources"][1]["item"]["columns"].as_object_mut().unwrap().remove("supporting_quote");
        let def: CorpusDef = serde_json::from_value(d).unwrap();
        assert_eq!(resolve(&def).unwrap_err().state, SqlState::UndefinedColumn);
        let (c, broken) = resolve_available(&def).unwrap();
        assert_eq!(c.sources.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), vec!["chunks"]);
        assert_eq!(broken.len(), 1);
        assert_eq!((broken[0].0.as_str(), broken[0].1.state), ("halachot", SqlState::UndefinedColumn));
        assert!(broken[0].1.message.contains("supporting_quote"));
    }

    #[test]
    fn dropped_table_is_reported() {
        let mut d = legal_def();
        d["sources"][0]["item"] = Value::Null;
        assert_eq!(resolve_json(d).unwrap_err().state, SqlState::UndefinedTable);
    }

    #[test]
    fn dimensions_must_agree() {
        let mut d = legal_def();
        d["sources"][1]["item"]["columns"]["embedding"]["typmod"] = json!(768);
        assert_eq!(resolve_json(d).unwrap_err().state, SqlState::DatatypeMismatch);
    }

    #[test]
    fn spaces_give_sources_of_other_models_their_own_dimension() {
        let c = resolve_json(with_pages_def()).unwrap();
        let names: Vec<&str> = c.spaces.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, vec!["default", "page_image"]);
        assert_eq!((c.spaces[0].dimensions, c.spaces[1].dimensions), (Some(384), Some(8)));
        assert_eq!(c.sources.iter().map(|s| s.space).collect::<Vec<_>>(), vec![0, 0, 1]);
        assert_eq!(c.dimensions(), Some(384));
        // a source of another dimension than its space, an undeclared space, bad declarations
        let mut d = with_pages_def();
        d["sources"][2]["item"]["columns"]["embedding"]["typmod"] = json!(16);
        assert_eq!(resolve_json(d).unwrap_err().state, SqlState::DatatypeMismatch);
        let mut d = with_pages_def();
        d["sources"][2]["space"] = json!("audio");
        let e = resolve_json(d).unwrap_err();
        assert_eq!(e.state, SqlState::InvalidParameterValue);
        assert!(e.hint.contains("'page_image'"), "{}", e.hint);
        let mut d = with_pages_def();
        d["sources"][2]["space"] = Value::Null;
        assert_eq!(resolve_json(d).unwrap_err().state, SqlState::DatatypeMismatch, "8-d in the 384-d default space");
        for spaces in [
            json!([1]),
            json!({"page_image": {"dimensions": 0}}),
            json!({"page_image": {}}),
            json!({"page_image": {"dimensions": 8, "weight": -1}}),
            json!({"page_image": {"dimensions": 8, "colour": 1}}),
            json!({"Page Image": {"dimensions": 8}}),
            json!({"default": {"dimensions": 512}}),
        ] {
            let mut d = with_pages_def();
            d["spaces"] = spaces.clone();
            let e = resolve_json(d).unwrap_err();
            assert!(!e.state.code().starts_with("XX") && !e.hint.is_empty(), "{spaces}: {e}");
        }
    }
}
