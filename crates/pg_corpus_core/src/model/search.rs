//! What a search works with: branches and their strategies, filter conditions, one branch's
//! hits and the rows a search returns.

use serde::Serialize;
use serde_json::Value;

use super::corpus::FieldType;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Branch {
    Semantic,
    Lexical,
}

impl Branch {
    pub fn name(self) -> &'static str {
        match self {
            Branch::Semantic => "semantic",
            Branch::Lexical => "lexical",
        }
    }
}

/// How the semantic branch finds its nearest neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Distances computed for every item of the (small) corpus slice, found through the
    /// parent/filter B-tree indexes; exact by construction.
    Exact,
    /// The ANN index (HNSW) over the whole table, filtered, with pgvector's iterative scan so
    /// that a selective corpus predicate cannot starve the result.
    Approximate,
    /// The lexical branch: `@@` through the tsvector's GIN index.
    TextMatch,
    /// The lexical branch: rows ranked by the BM25 column's `corpus_bm25` index.
    Bm25Index,
}

impl Strategy {
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Exact => "exact",
            Strategy::Approximate => "hnsw_iterative",
            Strategy::TextMatch => "text_match",
            Strategy::Bm25Index => "bm25_index",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    In,
    Gt,
    Gte,
    Lt,
    Lte,
}

impl Op {
    pub fn sql(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::In => "= ANY",
            Op::Gt => ">",
            Op::Gte => ">=",
            Op::Lt => "<",
            Op::Lte => "<=",
        }
    }
}

/// One validated caller condition: `field op value(s)`; values in the text form the field type casts from.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub field: String,
    pub field_type: FieldType,
    pub op: Op,
    pub values: Vec<String>,
}

/// Which query of a search produced a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueryTag {
    /// The call's own query_vec / query_text.
    Original,
    /// The feedback round's moved vector and expanded text.
    Feedback,
    /// The i-th (0-based) of the call's extra_queries.
    Extra(usize),
}

/// One hit of one branch of one source, as the subplan returned it.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub source: usize,
    pub item_id: String,
    pub parent_id: String,
    /// Distance (semantic, smaller is better) or score (lexical, larger is better).
    pub raw: f64,
}

/// One hit of a search, with its provenance (`corpus_hybrid_search`'s row).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRow {
    pub rank: i32,
    pub source: String,
    pub item_id: String,
    pub parent_id: String,
    pub score: f64,
    pub semantic_rank: Option<i32>,
    pub semantic_distance: Option<f64>,
    pub lexical_rank: Option<i32>,
    pub lexical_score: Option<f64>,
    pub content: Option<String>,
    pub locator: Value,
    pub metadata: Value,
    pub embedding_stale: bool,
    /// Why the evidence filter admitted the hit (None: the filter was off).
    pub evidence: Option<Value>,
    /// How the hit came in when not by the search's own lists (None: it did).
    pub origin: Option<Value>,
    /// Every query and branch that ranked the hit: `[{"query", "branch", "rank", "distance" |
    /// "score"}]`, in fusion order.
    pub query_ranks: Value,
}
