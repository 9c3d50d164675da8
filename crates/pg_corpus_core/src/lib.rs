//! The pgrx-free core of pg_corpus.
//!
//! Everything that can be decided without a running PostgreSQL lives here and is tested by
//! plain `cargo test`: the domain model ([`model`]), reading and validating corpus definitions
//! ([`definition`]), caller filters ([`filters`]), the SQL text of every subplan ([`plan`], the
//! only place the corpus predicate is built), and rank fusion with per-parent capping
//! ([`fusion`]). The extension crate turns
//! SQL arguments into calls of this core and runs the SQL it produces through SPI.

#![forbid(unsafe_code)]

pub mod analysis;
pub mod audit;
pub mod augment;
pub mod bm25;
pub mod bm25_index;
pub mod champions;
pub mod content;
pub mod definition;
pub mod engine;
pub mod error;
pub mod evidence;
pub mod feedback;
pub mod filters;
pub mod fusion;
pub mod health;
pub mod items;
pub mod json;
pub mod lexical;
pub mod metrics;
pub mod model;
pub mod plan;
pub mod postings;
pub mod queue;
pub mod ranking;
pub mod registry;
pub mod slots;
pub mod snippet;
pub mod sql;
pub mod statistics;
pub mod topk;
pub mod tsvector;
pub mod tune;

#[cfg(test)]
mod testing;

pub use error::{CoreError, SqlState};
