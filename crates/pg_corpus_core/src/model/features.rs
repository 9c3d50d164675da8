//! The settings of a corpus' features, as plain data: the evidence filter, must-include
//! classes, citation-graph expansion and the search audit log. Their parsers and rules live in
//! [`crate::evidence`], [`crate::augment`] and [`crate::audit`].

use serde_json::Value;

/// A key in at most this share of the corpus' items is rare (2%).
pub const DEFAULT_RARE_SHARE: f64 = 0.02;

/// Rare words must cover more than this share of the query's counted words.
pub const DEFAULT_MIN_COVERAGE: f64 = 0.5;

/// The vector rule's thresholds of one embedding space.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorThresholds {
    pub max_distance: f64,
    pub max_gap: f64,
    /// The embedding model they were set for (when the space declares one).
    pub model: Option<String>,
}

/// A corpus' evidence settings (`corpus.corpora.evidence`).
#[derive(Debug, Clone, PartialEq)]
pub struct EvidenceConfig {
    /// Whether a search that passes `evidence => NULL` filters.
    pub enabled: bool,
    pub rare_share: f64,
    pub min_coverage: f64,
    /// By space index ([`crate::model::Corpus::spaces`]); None: not set.
    pub vector: Vec<Option<VectorThresholds>>,
}

impl EvidenceConfig {
    pub fn off(spaces: usize) -> EvidenceConfig {
        EvidenceConfig {
            enabled: false,
            rare_share: DEFAULT_RARE_SHARE,
            min_coverage: DEFAULT_MIN_COVERAGE,
            vector: vec![None; spaces],
        }
    }
}

/// A class of items whose top hits every search of the corpus returns (a source, a filter of
/// declared fields, or both).
#[derive(Debug, Clone, PartialEq)]
pub struct MustInclude {
    pub name: String,
    /// Only this source's items (None: every source's).
    pub source: Option<usize>,
    /// A filter object of the corpus' declared fields (`{}`: none).
    pub filters: Value,
    /// How many of its best hits are guaranteed.
    pub top: usize,
}

/// A registered edge set: rows of `table` say that item `from` (of `from_source`) cites item
/// `to` (of `to_source`). Only this direction is followed.
#[derive(Debug, Clone, PartialEq)]
pub struct Edges {
    pub name: String,
    /// The edge table's OID (the definition cache is invalidated when it changes).
    pub oid: i64,
    pub schema: String,
    pub table: String,
    pub from_source: usize,
    pub from_column: String,
    pub from_type: String,
    pub to_source: usize,
    pub to_column: String,
}

/// How far an expansion goes (defaults: 5 seeds, at most 15 added, hop penalty 0.05).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GraphLimits {
    /// The best hits whose forward neighbours are followed.
    pub seeds: usize,
    /// The most items an expansion adds.
    pub max_added: usize,
    /// A neighbour's score is its seed's times (1 - hop_penalty).
    pub hop_penalty: f64,
}

impl Default for GraphLimits {
    fn default() -> Self {
        GraphLimits { seeds: 5, max_added: 15, hop_penalty: 0.05 }
    }
}

/// A corpus' audit settings (`corpus.corpora.audit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AuditConfig {
    pub enabled: bool,
    /// Store the query text itself (else only its hash).
    pub query_text: bool,
}
