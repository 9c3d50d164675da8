//! The search engine: everything a search decides, behind a small [`Executor`] trait.
//!
//! [`run`] is the one entry: a call checked, run and answered with its rows, the dropped filter
//! conditions and its audit row. A search runs in stages, each a module:
//! - `args`: its arguments checked, alone and against the corpus (pure);
//! - `request`: made ready to run, with `lexical_plan` (each text's keys and their
//!   statistics) and the evidence filter's statistics looked up once;
//! - `strategy`: each source's semantic strategy (exact or HNSW) and empty-slice probes;
//! - `rounds`: every subplan of every query with one candidate window, stale embeddings
//!   dropped;
//! - `fuse`: rounds with a widening window, fused by RRF and capped, with `feedback`,
//!   `evidence`, then `expand` and `must_include`;
//! - `fetch`: the rows' content and provenance under the same corpus predicate;
//!   `explain` shows what the first round would run instead.
//!
//! The SQL of every query comes from [`crate::plan`]; the [`Executor`] (`io`) only runs it,
//! and every request it gets says what it asks. The extension implements the executor over
//! SPI; the tests implement it over in-memory tables, so that the policy is tested by plain
//! `cargo test` (the pattern of VectorChord-bm25's `RelationRead`).

mod args;
pub mod cache;
mod entry;
mod evidence;
mod expand;
mod explain;
mod feedback;
mod fetch;
mod fuse;
mod io;
mod item;
mod key_type;
mod lexical_plan;
mod models;
mod must_include;
mod request;
mod rounds;
pub mod settings;
mod similar;
mod strategy;
#[cfg(test)]
mod tests;
mod why_not;

pub use args::{extra_queries, validate, Args, Checked, Config, ExtraQuery, Mode, Scorer, Validated, MAX_QUERY_CHARS};
pub use entry::{audit_row, run, unembedded_notice, Call, Outcome};
pub use evidence::EvidencePlan;
pub use explain::{explain, ExplainRow};
pub use fetch::search;
pub use fuse::branch_lists;
pub use io::{
    ChampionList, ChampionRequest, Executor, FeedbackDoc, FetchedRow, ItemKeysQuery, ItemsQuery, NeighboursQuery,
    SeedItem, SeedQuery, SliceOf, SliceQuery, TermStats,
};
pub use item::{fetch_item, FetchArgs};
pub use key_type::check_key_type;
pub use lexical_plan::LexicalPlans;
pub use models::SlotModels;
pub use request::Request;
pub use settings::Setting;
pub(crate) use similar::source_index;
pub use similar::{find_similar, SimilarArgs};
pub use strategy::{partial_index_probe, probe, semantic_plans, SemanticPlan};
pub use why_not::{why_not, WhyNot, WHY_NOT_DEPTH};
