//! The I/O of a search: the [`Executor`] trait and the typed requests and answers that cross
//! it. Each request says what it asks (which source, which ids), so an executor can serve it
//! without reading its SQL; the SQL and bind values come from [`crate::plan`].

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::Setting;
use crate::error::Result;
use crate::lexical::QueryKey;
use crate::model::Hit;
use crate::plan::Subplan;
use crate::sql::Param;

/// Document frequencies of some keys in a corpus' lexical statistics, with its totals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TermStats {
    pub df: HashMap<String, u64>,
    /// Searchable documents at the last refresh (0 when never refreshed).
    pub documents: u64,
    /// Their total BM25 length.
    pub total_length: u64,
}

/// What one champion-list request returns for a key: its first items and their impacts.
#[derive(Debug, Clone, PartialEq)]
pub struct ChampionList {
    pub term: String,
    pub items: Vec<String>,
    pub impacts: Vec<f64>,
}

/// The heads of some champion lists of one source.
#[derive(Debug, Clone, PartialEq)]
pub struct ChampionRequest {
    pub source: String,
    pub terms: Vec<String>,
    /// How many items of each list's head.
    pub prefix: u64,
}

/// One row of the final fetch ([`crate::plan::fetch`]).
#[derive(Debug, Clone, PartialEq)]
pub struct FetchedRow {
    pub item_id: String,
    pub content: Option<String>,
    pub locator: Value,
    pub metadata: Value,
}

/// The item a find-similar search starts from ([`crate::plan::similar_seed`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SeedItem {
    /// Its stored id as text (the caller's may be another spelling of it, e.g. `'042'`).
    pub item_id: String,
    pub parent_id: Option<String>,
    pub embedding: Option<Vec<f32>>,
    pub content: Option<String>,
}

/// An item feedback learns from ([`crate::plan::feedback_fetch`]).
#[derive(Debug, Clone, PartialEq)]
pub struct FeedbackDoc {
    pub embedding: Option<Vec<f32>>,
    /// Its index terms' frequencies.
    pub tf: BTreeMap<String, f64>,
}

/// Which rows of a source's corpus slice a [`SliceQuery`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceOf {
    /// Its searchable items ([`crate::plan::slice_estimate`], [`crate::plan::slice_probe`],
    /// [`crate::plan::slice_count`]).
    Items,
    /// The parents in the corpus ([`crate::plan::parent_slice_estimate`],
    /// [`crate::plan::parent_slice_probe`]).
    Parents,
}

/// A query about one source's corpus slice: estimated, probed for a row, or counted.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceQuery {
    pub source: usize,
    pub of: SliceOf,
    pub sql: String,
    pub params: Vec<Param>,
}

impl SliceQuery {
    pub fn new(source: usize, of: SliceOf, (sql, params): (String, Vec<Param>)) -> SliceQuery {
        SliceQuery { source, of, sql, params }
    }
}

/// A lookup of some items of one source by id ([`crate::plan::fetch`],
/// [`crate::plan::feedback_fetch`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ItemsQuery {
    pub source: usize,
    pub ids: Vec<String>,
    pub sql: String,
    pub params: Vec<Param>,
    /// One plan serves every set of ids ([`crate::plan::one_plan_serves`]).
    pub generic: bool,
}

impl ItemsQuery {
    /// The lookup `(sql, params)` of `ids` of source `source` of `corpus`.
    pub fn new(
        corpus: &crate::model::Corpus,
        source: usize,
        ids: Vec<String>,
        (sql, params): (String, Vec<Param>),
    ) -> Self {
        let generic = crate::plan::one_plan_serves(&corpus.sources[source]);
        ItemsQuery { source, ids, sql, params, generic }
    }
}

/// Which of `keys` the index terms of some items of one source hold ([`crate::plan::item_keys`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ItemKeysQuery {
    pub source: usize,
    pub ids: Vec<String>,
    pub keys: Vec<String>,
    pub sql: String,
    pub params: Vec<Param>,
}

/// The forward neighbours of some seeds along one edge set ([`crate::plan::graph_neighbours`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NeighboursQuery {
    /// The edge set's index in [`crate::model::Corpus::edges`].
    pub edges: usize,
    pub seeds: Vec<String>,
    /// Items not to return (already among the hits).
    pub exclude: Vec<String>,
    /// At most this many neighbours per seed.
    pub per_seed: i64,
    pub sql: String,
    pub params: Vec<Param>,
}

/// The item a find-similar search starts from, as the caller named it
/// ([`crate::plan::similar_seed`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SeedQuery {
    pub source: usize,
    pub item_id: String,
    pub sql: String,
    pub params: Vec<Param>,
}

/// The I/O a search needs. Every SQL text it is given was built by [`crate::plan`]; values
/// travel as parameters. Errors are the database's (or the executor's own, with a SQLSTATE).
pub trait Executor {
    /// Run one branch subplan with `settings` in effect for it (the executor may keep them for
    /// the next subplan that wants the same values): rows of (item_id, parent_id, raw score).
    fn branch_hits(&mut self, plan: &Subplan, settings: &[Setting]) -> Result<Vec<Hit>>;
    /// The planner's row estimate of a slice query (planned with its values, not run).
    fn estimate_rows(&mut self, q: &SliceQuery) -> Result<f64>;
    /// Whether the planner serves this approximate subplan (under `settings`) with a partial
    /// HNSW index, i.e. one whose predicate the corpus predicate implies.
    fn served_by_partial_index(&mut self, plan: &Subplan, settings: &[Setting]) -> Result<bool>;
    /// Run a [`crate::plan::slice_probe`] or [`crate::plan::parent_slice_probe`] query: does it
    /// return a row (the slice, or its parents, is not empty)?
    fn any_row(&mut self, q: &SliceQuery) -> Result<bool>;
    /// Run a [`crate::plan::slice_count`] query: the number of rows it counts (the executor may
    /// memoise it like an estimate: it only chooses a strategy).
    fn count_rows(&mut self, q: &SliceQuery) -> Result<f64>;
    /// `pg_class.reltuples` of each table (negative: never analysed).
    fn table_rows(&mut self, tables: &[i64]) -> Result<Vec<f64>>;
    /// Document frequencies of `terms` in a corpus' statistics, with its totals: one round trip.
    fn term_stats(&mut self, corpus: &str, terms: &[String]) -> Result<TermStats>;
    /// Heads of champion lists of several sources (those the caller may read): one round trip;
    /// the answer has one list per request, in request order.
    fn champion_heads(&mut self, corpus: &str, requests: &[ChampionRequest]) -> Result<Vec<Vec<ChampionList>>>;
    /// PostgreSQL's analysis of a query with a text search configuration: (lexeme, count).
    fn ts_query_keys(&mut self, ts_config: i64, text: &str) -> Result<Vec<QueryKey>>;
    /// Run a [`crate::plan::feedback_fetch`] query: item id → what feedback learns from it.
    fn feedback_docs(&mut self, q: &ItemsQuery) -> Result<HashMap<String, FeedbackDoc>>;
    /// Run a [`crate::plan::item_keys`] query: item id → the asked keys its index terms hold.
    fn item_keys(&mut self, q: &ItemKeysQuery) -> Result<HashMap<String, Vec<String>>>;
    /// Run a [`crate::plan::graph_neighbours`] query: (seed id, item id, parent id) rows.
    fn neighbours(&mut self, q: &NeighboursQuery) -> Result<Vec<(String, String, String)>>;
    /// Run a [`crate::plan::fetch`] query.
    fn fetch_rows(&mut self, q: &ItemsQuery) -> Result<Vec<FetchedRow>>;
    /// Run one statement of a [`crate::plan::queued_items`] lookup: (source index, item id) of
    /// the queued items.
    fn queued_items(&mut self, lookup: &crate::plan::QueueLookup) -> Result<Vec<(usize, String)>>;
    /// Run a [`crate::plan::similar_seed`] query (None: no such item in the corpus).
    fn seed_item(&mut self, q: &SeedQuery) -> Result<Option<SeedItem>>;
    /// The recorded models of embedding columns given as (table OID, column's current name),
    /// one answer per column in order (a column without a slot: no model, no others).
    fn embedding_models(&mut self, columns: &[(i64, String)]) -> Result<Vec<super::SlotModels>>;
}
