//! The domain model: plain data that every other module of the core works with and that
//! depends on no other module. [`crate::definition`] builds it from the catalog; the feature
//! parsers fill its settings; the planner and the engine read it.

mod catalog;
mod corpus;
mod features;
mod language;
mod ranking;
mod search;

pub use catalog::{ColumnInfo, CorpusDef, EdgeDef, RelationInfo, SourceDef};
pub use corpus::{
    BoundCond, ColRef, Corpus, Distance, FieldLimits, FieldType, Relation, Side, Source, Space, DEFAULT_SPACE,
};
pub use features::{
    AuditConfig, Edges, EvidenceConfig, GraphLimits, MustInclude, VectorThresholds, DEFAULT_MIN_COVERAGE,
    DEFAULT_RARE_SHARE,
};
pub use language::{Language, LANGUAGES};
pub use ranking::{
    exact_list_window, single_list_window, FeedbackParams, Ranking, DEFAULT_FEEDBACK_ALPHA, DEFAULT_FEEDBACK_BETA,
    DEFAULT_FEEDBACK_TERMS, DEFAULT_RRF_K, DEFAULT_WINDOW, MAX_RRF_K, MAX_WINDOW, SINGLE_LIST_WINDOW, WINDOW_PER_K,
};
pub use search::{Branch, Condition, Hit, Op, QueryTag, SearchRow, Strategy};

/// Whether a name of a corpus, source, embedding space, must-include class or edge set is valid:
/// a lower-case identifier (letters, digits and `_`, not starting with a digit), at most 63
/// characters. Such a name is the same quoted or not, and never needs escaping.
pub fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}
