//! A corpus as searches use it: its sources with every mapped column resolved, its embedding
//! spaces, filter fields and feature settings.

use std::collections::BTreeMap;

use serde_json::Value;

use super::catalog::ColumnInfo;
use super::features::{AuditConfig, Edges, EvidenceConfig, GraphLimits, MustInclude};
use super::language::Language;
use crate::error::CoreError;

/// Which table of a source a column belongs to: the item table (alias `i`) or the parent (`p`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Item,
    Parent,
}

impl Side {
    pub fn alias(self) -> &'static str {
        match self {
            Side::Item => "i",
            Side::Parent => "p",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ColRef {
    pub side: Side,
    pub column: String,
    /// The column's declared type (`format_type`).
    pub sql_type: String,
    /// Cast target for values compared with this column: its built-in base type (under any
    /// domains), so that comparing never builds a value of a type a table owner defined.
    pub cast_type: String,
    pub is_array: bool,
}

/// Values a predicate column must equal (one value: `=`, several: `= ANY`).
#[derive(Debug, Clone, PartialEq)]
pub struct BoundCond {
    pub col: ColRef,
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distance {
    Cosine,
    L2,
    InnerProduct,
}

impl Distance {
    pub fn operator(self) -> &'static str {
        match self {
            Distance::Cosine => "<=>",
            Distance::L2 => "<->",
            Distance::InnerProduct => "<#>",
        }
    }

    /// The pgvector HNSW/IVFFlat operator class that serves this operator.
    pub fn opclass(self) -> &'static str {
        match self {
            Distance::Cosine => "vector_cosine_ops",
            Distance::L2 => "vector_l2_ops",
            Distance::InnerProduct => "vector_ip_ops",
        }
    }
}

/// Declared type of a caller filter field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    Text,
    Integer,
    Bigint,
    Numeric,
    Boolean,
    Date,
    Timestamptz,
}

impl FieldType {
    pub fn parse(s: &str) -> Option<FieldType> {
        Some(match s {
            "text" => FieldType::Text,
            "integer" | "int" | "int4" => FieldType::Integer,
            "bigint" | "int8" => FieldType::Bigint,
            "numeric" => FieldType::Numeric,
            "boolean" | "bool" => FieldType::Boolean,
            "date" => FieldType::Date,
            "timestamptz" => FieldType::Timestamptz,
            _ => return None,
        })
    }

    pub fn sql(self) -> &'static str {
        match self {
            FieldType::Text => "text",
            FieldType::Integer => "integer",
            FieldType::Bigint => "bigint",
            FieldType::Numeric => "numeric",
            FieldType::Boolean => "boolean",
            FieldType::Date => "date",
            FieldType::Timestamptz => "timestamptz",
        }
    }

    /// Does a column of this PostgreSQL type category / name hold values of the field type?
    pub fn accepts(self, col: &ColumnInfo) -> bool {
        match self {
            FieldType::Text => col.category == "S",
            FieldType::Integer | FieldType::Bigint | FieldType::Numeric => col.category == "N",
            FieldType::Boolean => col.category == "B",
            FieldType::Date => col.typname == "date",
            FieldType::Timestamptz => col.typname == "timestamptz" || col.typname == "timestamp",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Relation {
    pub oid: i64,
    pub schema: String,
    pub name: String,
    /// A Citus distributed table's distribution column: its rows are on the shards, and the
    /// subplans take the shapes Citus pushes down to them (crate::plan).
    pub distribution: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Source {
    pub name: String,
    pub item: Relation,
    pub parent: Option<Relation>,
    /// The key the per-parent cap is counted under: sources sharing a parent table share it.
    pub parent_scope: String,
    pub id: ColRef,
    pub text: ColRef,
    pub tsv: ColRef,
    /// The BM25 column has a `corpus_bm25` index: the lexical branch ranks through it.
    pub tsv_index: bool,
    /// The further key columns of each `corpus_bm25` index of the BM25 column that has some.
    pub tsv_index_keys: Vec<Vec<String>>,
    pub embedding: ColRef,
    pub dimensions: i32,
    /// Its embedding space: an index into [`Corpus::spaces`] (0: the default space).
    pub space: usize,
    pub distance: Distance,
    pub parent_fk: ColRef,
    pub parent_key: Option<ColRef>,
    pub parent_required: Vec<ColRef>,
    pub rule: Vec<BoundCond>,
    /// The corpus isolation predicate, bound to this source's columns.
    pub isolation: Vec<BoundCond>,
    /// Declared filter fields resolved to this source's columns.
    pub filter_columns: BTreeMap<String, ColRef>,
    pub locator: Vec<(String, ColRef)>,
    pub metadata: Vec<(String, ColRef)>,
    pub min_length: i32,
    /// Measure text with `corpus._content_length` ([`crate::content`]), or with btrim in a
    /// catalog that predates it.
    pub content_function: bool,
    /// Ask whether a text reaches `min_length` with `corpus._has_content`, which reads a
    /// stored text's beginning first ([`crate::content::has_content_length`]), in a catalog
    /// that has it.
    pub has_content_function: bool,
    pub ts_config: i64,
    pub language: Option<Language>,
    pub semantic_weight: f64,
    pub lexical_weight: f64,
    /// Column types when the source was defined (see [`Source::retyped_columns`]).
    pub column_types: Value,
}

impl Source {
    /// Whether the items are in a Citus distributed table (on the shards, not on this node).
    pub fn distributed(&self) -> bool {
        self.item.distribution.is_some()
    }

    /// Whether the item table is distributed by the parent key column: a lookup by item ids
    /// that also names their parents' keys goes only to the shards holding them.
    pub fn routed_by_parent(&self) -> bool {
        self.item.distribution.as_deref() == Some(self.parent_fk.column.as_str())
    }

    /// Whether each item is its own parent (the parent key is the item's id column): a
    /// per-parent cap then counts one item per parent of this source.
    pub fn own_parent(&self) -> bool {
        self.parent_fk.side == Side::Item && self.parent_fk.column == self.id.column
    }

    /// The isolation columns a `corpus_bm25` index can hold as further key columns: the item
    /// table's own (or its copies of the parent's), of type text, in the order the isolation
    /// names them.
    pub fn isolation_index_keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = Vec::new();
        for c in &self.isolation {
            if c.col.side == Side::Item
                && !c.col.is_array
                && c.col.cast_type == "text"
                && !keys.contains(&c.col.column.as_str())
            {
                keys.push(c.col.column.as_str());
            }
        }
        keys
    }

    /// Whether an index with these further key columns holds every isolation column, on the
    /// item table (a parent's isolation column counts when the item table carries a copy of it,
    /// which the corpus predicate checks too), each of one value: its ranking is then of the
    /// corpus' rows alone (rows whose copy drifted from the parent's are refused after it).
    /// PostgreSQL before 17 never makes `col = ANY(array)` on an index's later column a
    /// condition of an ordered index scan, so an isolation of several values is left to the
    /// executor's check after the ranking, as without the key column.
    pub fn isolation_held_by(&self, keys: &[String]) -> bool {
        let held = self.isolation_index_keys();
        !self.isolation.is_empty()
            && self.isolation.iter().all(|c| {
                c.values.len() == 1 && held.contains(&c.col.column.as_str()) && keys.iter().any(|k| k == &c.col.column)
            })
    }

    /// Whether a `corpus_bm25` index of the BM25 column holds every isolation column as a key
    /// column ([`Source::isolation_held_by`]): its ranking is then of the corpus' rows alone,
    /// however small a slice of the table the corpus is.
    pub fn index_holds_isolation(&self) -> bool {
        self.tsv_index && self.tsv_index_keys.iter().any(|keys| self.isolation_held_by(keys))
    }

    /// The share of the rows its `corpus_bm25` index ranks that are in a corpus which is
    /// `corpus_share` of the table: all of them when the index holds the isolation columns.
    pub fn index_share(&self, corpus_share: f64) -> f64 {
        if self.index_holds_isolation() {
            1.0
        } else {
            corpus_share
        }
    }

    /// Every column the definition uses.
    pub fn columns(&self) -> Vec<&ColRef> {
        let mut cols = vec![&self.id, &self.text, &self.tsv, &self.embedding, &self.parent_fk];
        cols.extend(self.parent_key.iter());
        cols.extend(self.parent_required.iter());
        cols.extend(self.rule.iter().map(|c| &c.col));
        cols.extend(self.isolation.iter().map(|c| &c.col));
        cols.extend(self.filter_columns.values());
        cols.extend(self.locator.iter().map(|(_, c)| c));
        cols.extend(self.metadata.iter().map(|(_, c)| c));
        cols
    }

    /// Columns whose type changed since the definition, as (table side, column, then, now): a
    /// retype that still validates (page_number integer → text changes every locator).
    pub fn retyped_columns(&self) -> Vec<(&'static str, String, String, String)> {
        let mut out = Vec::new();
        for c in self.columns() {
            let side = if c.side == Side::Item { "item" } else { "parent" };
            if let Some(then) = self.column_types.get(side).and_then(|t| t.get(&c.column)).and_then(Value::as_str) {
                if then != c.sql_type
                    && !out.iter().any(|(s, col, _, _): &(&str, String, String, String)| *s == side && *col == c.column)
                {
                    out.push((side, c.column.clone(), then.to_string(), c.sql_type.clone()));
                }
            }
        }
        out
    }
}

#[derive(Debug, Clone)]
pub struct Corpus {
    pub name: String,
    /// Isolation columns (names); callers can never filter on them.
    pub isolation_columns: Vec<String>,
    pub required_filters: Vec<String>,
    pub filter_fields: BTreeMap<String, FieldType>,
    /// The allowed values or range a filter field declares (only fields that declare some).
    pub filter_limits: BTreeMap<String, FieldLimits>,
    pub vector_schema: String,
    pub sources: Vec<Source>,
    /// The corpus' embedding spaces: the default one first (index 0), then the declared ones
    /// by name. Every source belongs to one ([`Source::space`]).
    pub spaces: Vec<Space>,
    /// The evidence filter's settings.
    pub evidence: EvidenceConfig,
    /// Classes whose top hits every search returns.
    pub must_include: Vec<MustInclude>,
    /// Edge sets a search with `expand` follows, and how far.
    pub edges: Vec<Edges>,
    /// Edge sets that no longer resolve (their table dropped or changed): an error for a
    /// search that expands and for the definition functions, none for other searches.
    pub edge_errors: Vec<CoreError>,
    pub graph: GraphLimits,
    /// Whether searches are logged.
    pub audit: AuditConfig,
    /// The fusion defaults of its searches.
    pub ranking: super::Ranking,
}

/// The name of the space of sources that declare none, searched with `query_vec`.
pub const DEFAULT_SPACE: &str = "default";

/// One embedding space of a corpus: one model, one dimension; its sources are searched with
/// its query vector, and its semantic list enters RRF with its weight.
#[derive(Debug, Clone, PartialEq)]
pub struct Space {
    pub name: String,
    /// None: the default space of a corpus without sources in it.
    pub dimensions: Option<i32>,
    pub model: Option<String>,
    pub weight: f64,
}

/// What a filter field declares besides its type: `{"type": "text", "values": [...]}` or
/// `{"type": "integer", "min": 1, "max": 2000}` (filters outside them are refused, or dropped by
/// a lenient search).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FieldLimits {
    /// Allowed values, in the text form PostgreSQL casts from.
    pub values: Option<Vec<String>>,
    /// Inclusive bounds (integer, bigint, numeric: numbers; date: 'YYYY-MM-DD' strings).
    pub min: Option<Value>,
    pub max: Option<Value>,
}

impl Corpus {
    /// The dimension of the default space (`query_vec`'s): that of its sources, or the one it
    /// declares.
    pub fn dimensions(&self) -> Option<i32> {
        self.spaces.first().and_then(|s| s.dimensions)
    }

    /// The index of a space by name.
    pub fn space(&self, name: &str) -> Option<usize> {
        self.spaces.iter().position(|s| s.name == name)
    }
}
