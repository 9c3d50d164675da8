//! The catalog's description of a corpus, as the extension's catalog query hands it out: the
//! registered mappings with the live column lists of their tables. [`crate::definition`] checks
//! it and resolves it into a [`super::Corpus`].

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Deserialize)]
pub struct ColumnInfo {
    /// The column's name now (absent in older catalog queries: the name it was looked up by).
    #[serde(default)]
    pub name: Option<String>,
    /// Its attribute number, which a rename keeps (absent in older catalog queries).
    #[serde(default)]
    pub attnum: Option<i64>,
    /// `format_type(atttypid, atttypmod)` with search_path = pg_catalog: schema-qualified
    /// outside pg_catalog, so it can be used verbatim as a cast target.
    #[serde(rename = "type")]
    pub sql_type: String,
    pub typname: String,
    pub category: String,
    pub typmod: i32,
    #[serde(default)]
    pub not_null: bool,
    /// The type under any domains (`format_type(base, NULL)`): values compared with the column
    /// are cast to it, so that no domain's CHECK runs on the caller's behalf.
    #[serde(default)]
    pub base_type: Option<String>,
    #[serde(default)]
    pub base_typname: Option<String>,
    #[serde(default)]
    pub base_schema: Option<String>,
    /// Whether that base type is built into PostgreSQL: its input, output, casts and operators
    /// are PostgreSQL's own, none of them code a table owner wrote. None in older catalogs.
    #[serde(default)]
    pub builtin: Option<bool>,
}

impl ColumnInfo {
    /// The type values compared with this column are cast to: its base type.
    pub fn cast_type(&self) -> &str {
        self.base_type.as_deref().unwrap_or(&self.sql_type)
    }

    /// Whether the column's base type is built into PostgreSQL. A catalog of an older release
    /// does not say: there the type's name tells, schema-qualified by `format_type` unless it
    /// is in pg_catalog (where only a superuser creates types), so a domain or a type of a
    /// table owner's counts as not built in.
    pub fn is_builtin(&self) -> bool {
        self.builtin.unwrap_or_else(|| !self.sql_type.contains('.') && !self.sql_type.contains('"'))
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct RelationInfo {
    pub oid: i64,
    pub schema: String,
    pub name: String,
    pub kind: String,
    /// A Citus distributed table's distribution column (None: a table of this node only).
    #[serde(default)]
    pub distribution: Option<String>,
    pub columns: BTreeMap<String, ColumnInfo>,
    /// Columns with a usable `corpus_bm25` index (valid, not partial, first on the column);
    /// absent in older catalogs.
    #[serde(default)]
    pub bm25_indexes: Vec<String>,
    /// The usable `corpus_bm25` indexes with further key columns: their first column and the
    /// others.
    #[serde(default)]
    pub bm25_index_keys: Vec<Bm25IndexKeys>,
}

/// A `corpus_bm25` index's first column (the BM25 column it ranks) and its further key columns
/// (whose values restrict its ranking).
#[derive(Debug, Clone, Deserialize)]
pub struct Bm25IndexKeys {
    pub column: String,
    pub keys: Vec<String>,
}

impl RelationInfo {
    /// The table's columns as a definition written before some of them were renamed sees them:
    /// `attnums` maps each name the definition uses to the column's attribute number when it
    /// was recorded, and the live column of that number answers to that name too (a rename
    /// keeps the number; the number wins over a newer column of the old name). A name whose
    /// column is gone, or that was never recorded, is looked up as it is.
    pub fn following_renames(&self, attnums: Option<&Value>) -> RelationInfo {
        let mut out = self.clone();
        let Some(recorded) = attnums.and_then(Value::as_object) else { return out };
        for (old, number) in recorded {
            let Some(number) = number.as_i64() else { continue };
            if let Some(live) = self.columns.values().find(|c| c.attnum == Some(number)) {
                out.columns.insert(old.clone(), live.clone());
            }
        }
        out
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct SourceDef {
    pub name: String,
    /// NULL when the registered table no longer exists.
    pub item: Option<RelationInfo>,
    pub item_oid: i64,
    pub id_column: String,
    pub text_column: String,
    pub tsv_column: String,
    pub embedding_column: String,
    /// The text columns the embedding is computed from; absent in old catalogs.
    #[serde(default)]
    pub embedding_inputs: Vec<String>,
    pub distance: String,
    pub parent: Option<RelationInfo>,
    pub parent_oid: Option<i64>,
    pub parent_fk: String,
    pub parent_key: String,
    pub parent_required: Vec<String>,
    pub rule: Value,
    pub locator: Value,
    pub metadata: Value,
    pub min_length: i32,
    pub ts_config: i64,
    /// pg_corpus analyser language of the tsvector column (built by corpus.bm25_document);
    /// NULL: the column holds PostgreSQL's to_tsvector(ts_config, ...).
    #[serde(default)]
    pub language: Option<String>,
    pub semantic_weight: f64,
    pub lexical_weight: f64,
    /// `{"item": {column: type}, "parent": {...}, "attnums": {"item": {column: attnum},
    /// "parent": {...}}}` when the source was defined (the attnums of every name it has used).
    #[serde(default)]
    pub column_types: Value,
    /// The embedding space the source belongs to (NULL: the default space).
    #[serde(default)]
    pub space: Option<String>,
}

impl SourceDef {
    /// The definition with its tables' columns following renames since it was recorded
    /// ([`RelationInfo::following_renames`]).
    pub fn following_renames(&self) -> SourceDef {
        let attnums = self.column_types.get("attnums");
        let mut out = self.clone();
        out.item = self.item.as_ref().map(|r| r.following_renames(attnums.and_then(|a| a.get("item"))));
        out.parent = self.parent.as_ref().map(|r| r.following_renames(attnums.and_then(|a| a.get("parent"))));
        out
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct CorpusDef {
    pub name: String,
    pub description: Option<String>,
    pub isolation: Value,
    pub required_filters: Vec<String>,
    pub filter_fields: Value,
    pub vector_schema: Option<String>,
    /// Whether the catalog has `corpus._content_length` (false in catalogs of older releases,
    /// which a newer library serves until they are updated: text is then measured with btrim).
    #[serde(default)]
    pub content_function: bool,
    /// Whether the catalog has `corpus._has_content` (false in catalogs of older releases:
    /// searches then compare `corpus._content_length` with the minimum).
    #[serde(default)]
    pub has_content_function: bool,
    pub sources: Vec<SourceDef>,
    /// Named embedding spaces: `{"name": {"dimensions": n, "model": "…", "weight": w}}`.
    #[serde(default)]
    pub spaces: Value,
    /// The evidence filter's settings ([`crate::evidence::parse`]).
    #[serde(default)]
    pub evidence: Value,
    /// Must-include classes ([`crate::augment::parse_must_include`]).
    #[serde(default)]
    pub must_include: Value,
    /// Graph expansion limits ([`crate::augment::parse_limits`]).
    #[serde(default)]
    pub graph: Value,
    /// The fusion defaults ([`crate::ranking::parse`]; absent from catalogs of older releases).
    #[serde(default)]
    pub ranking: Value,
    /// Registered edge sets (`corpus.edges`).
    #[serde(default)]
    pub edges: Vec<EdgeDef>,
    /// The search audit log's settings ([`crate::audit::parse`]).
    #[serde(default)]
    pub audit: Value,
}

/// An edge set as the catalog hands it out (`corpus.edges`).
#[derive(Debug, Clone, Deserialize)]
pub struct EdgeDef {
    pub name: String,
    /// NULL when the edge table no longer exists.
    pub table: Option<RelationInfo>,
    pub table_oid: i64,
    pub from_source: String,
    pub from_column: String,
    pub to_source: String,
    pub to_column: String,
}
