//! The domain model: plain data that every other module of the core works with and that
//! depends on no other module. [`crate::definition`] builds it from the catalog; the feature
//! parsers fill its settings; the planner and the engine read it.

mod catalog;
mod corpus;
mod features;
mod language;
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
pub use search::{Branch, Condition, Hit, Op, QueryTag, SearchRow, Strategy};
