//! The semantic strategy of each source: exact over a small slice, else the HNSW index, and
//! whether the slice is empty so that no subplan of the source runs.

use super::SliceOf;
use super::SliceQuery;
use super::{settings, Executor, Request, Setting};
use crate::error::Result;
use crate::model::{Condition, Corpus, Strategy};
use crate::plan::{self, Subplan};

/// How the semantic branch of one source runs: exact over a small slice, else the HNSW index
/// with an iterative scan sized by the slice's selectivity (docs/filtered-ann.md); and whether
/// the source's slice is empty, so that neither branch runs for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SemanticPlan {
    pub strategy: Strategy,
    pub selectivity: f64,
    /// Which probe found the slice empty (None: not empty, or not probed).
    pub empty: Option<SliceOf>,
}

impl SemanticPlan {
    pub fn is_empty(&self) -> bool {
        self.empty.is_some()
    }
}

/// The probe of a source's slice (or of its parents) for a row (None: a parent probe of a
/// source without parent-side isolation, which is never asked).
pub fn probe(of: SliceOf, corpus: &Corpus, idx: usize, conds: &[Condition]) -> Option<SliceQuery> {
    let q = match of {
        SliceOf::Parents => plan::parent_slice_probe(corpus, idx)?,
        SliceOf::Items => plan::slice_probe(corpus, idx, conds),
    };
    Some(SliceQuery::new(idx, of, q))
}

/// A slice (or its parents) the planner estimates at this many rows or fewer (its minimum is 1)
/// is probed for emptiness before its subplans are planned: planning them was nearly all of the time of a
/// search of an empty corpus (docs/search-engine.md).
pub const EMPTY_PROBE_MAX_ESTIMATE: f64 = 1.0;

/// Each source's plan, from the planner's estimate of its slice: a slice of at most
/// `pg_corpus.exact_search_max_rows` items is searched exactly, unless a partial HNSW index
/// covers the corpus (its predicate implied by the corpus predicate: the planner uses it for
/// the approximate subplan), which is then faster still (1% slice of 100k × 1024-d: 0.9× an
/// unfiltered search against 3.0× exact, docs/filtered-ann.md). A slice estimated at a row
/// or less is probed, and skipped when it holds no searchable item; parents estimated at a row
/// or less are probed first, once for all the sources that share them.
pub fn semantic_plans(req: &Request, exec: &mut dyn Executor) -> Result<Vec<SemanticPlan>> {
    semantic_plans_of(req, None, exec)
}

/// [`semantic_plans`] of source `only` (None: all); the others are planned as skipped, without
/// asking the planner (a must-include class restricted to one source).
pub(super) fn semantic_plans_of(
    req: &Request,
    only: Option<usize>,
    exec: &mut dyn Executor,
) -> Result<Vec<SemanticPlan>> {
    let exact_max = f64::from(req.config.exact_search_max_rows);
    // the probes' answers in this call, by query (sources sharing a parent table ask the same)
    let mut probed: Vec<(SliceQuery, bool)> = Vec::new();
    let mut any_row = |probe: SliceQuery, exec: &mut dyn Executor| -> Result<bool> {
        if let Some((_, found)) = probed.iter().find(|(q, _)| q.sql == probe.sql && q.params == probe.params) {
            return Ok(*found);
        }
        let found = exec.any_row(&probe)?;
        probed.push((probe, found));
        Ok(found)
    };
    let mut out = Vec::with_capacity(req.table_rows.len());
    for (idx, &total) in req.table_rows.iter().enumerate() {
        if only.is_some_and(|o| o != idx) {
            out.push(SemanticPlan { strategy: Strategy::Exact, selectivity: 0.0, empty: Some(SliceOf::Items) });
            continue;
        }
        if req.corpus.sources[idx].distributed() {
            // Citus: the planner's estimate of a distributed table is Citus' constant, so the
            // slice is counted (up to the exact-search limit, each shard stopping there).
            // Emptiness is not judged from it (the executor may memoise the count, and a
            // memoised 0 would hide new items): an empty slice's subplans return nothing.
            let cap = i64::from(req.config.exact_search_max_rows).saturating_add(1);
            let count = plan::slice_count(&req.corpus, idx, &req.conds, cap);
            let slice = exec.count_rows(&SliceQuery::new(idx, SliceOf::Items, count))?;
            let strategy = if req.any_vector() && slice > exact_max { Strategy::Approximate } else { Strategy::Exact };
            out.push(SemanticPlan { strategy, selectivity: 1.0, empty: None });
            continue;
        }
        // the planner's minimum estimate for the parents (a value the statistics do not know)
        // says they may be empty
        let parent_probe = probe(SliceOf::Parents, &req.corpus, idx, &req.conds);
        let parents = match (&parent_probe, plan::parent_slice_estimate(&req.corpus, idx)) {
            (Some(_), Some(q)) => exec.estimate_rows(&SliceQuery::new(idx, SliceOf::Parents, q))?,
            _ => f64::INFINITY,
        };
        if parents <= EMPTY_PROBE_MAX_ESTIMATE {
            if let Some(probe) = parent_probe {
                if !any_row(probe, exec)? {
                    out.push(SemanticPlan {
                        strategy: Strategy::Exact,
                        selectivity: 0.0,
                        empty: Some(SliceOf::Parents),
                    });
                    continue;
                }
            }
        }
        let estimate = plan::slice_estimate(&req.corpus, idx, &req.conds);
        let slice = exec.estimate_rows(&SliceQuery::new(idx, SliceOf::Items, estimate))?;
        let selectivity = if total > 0.0 { (slice / total).clamp(1e-6, 1.0) } else { 1.0 };
        let empty = (slice <= EMPTY_PROBE_MAX_ESTIMATE || parents <= EMPTY_PROBE_MAX_ESTIMATE)
            && !any_row(SliceQuery::new(idx, SliceOf::Items, plan::slice_probe(&req.corpus, idx, &req.conds)), exec)?;
        let strategy = if !req.any_vector() || empty {
            Strategy::Exact
        } else if slice > exact_max || covered_by_partial_index(req, idx, selectivity, exec)? {
            Strategy::Approximate
        } else {
            Strategy::Exact
        };
        out.push(SemanticPlan { strategy, selectivity, empty: empty.then_some(SliceOf::Items) });
    }
    Ok(out)
}

/// Whether the planner serves source `idx`'s approximate subplan with a partial HNSW index.
/// Asked with a fixed probe vector (the index choice does not depend on it), so that the
/// executor can memoise the answer per corpus and filters.
pub(super) fn covered_by_partial_index(
    req: &Request,
    idx: usize,
    selectivity: f64,
    exec: &mut dyn Executor,
) -> Result<bool> {
    let (p, settings) =
        partial_index_probe(&req.corpus, idx, &req.conds, req.window, selectivity, req.config.ann_max_scan_tuples);
    exec.served_by_partial_index(&p, &settings)
}

/// The approximate subplan (with a fixed probe vector) and the settings under which the planner
/// is asked whether a partial HNSW index serves source `idx` (the search and the health check).
pub fn partial_index_probe(
    corpus: &Corpus,
    idx: usize,
    conds: &[Condition],
    window: usize,
    selectivity: f64,
    max_scan_tuples: i32,
) -> (Subplan, Vec<Setting>) {
    let dims = corpus.sources[idx].dimensions.max(1) as usize;
    let probe = vec![(1.0 / dims as f64).sqrt() as f32; dims];
    let p = plan::semantic(corpus, idx, conds, &probe, window as i64, Strategy::Approximate);
    (p, settings::ann(window, selectivity, max_scan_tuples))
}
