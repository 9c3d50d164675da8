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
        // (a search without a vector searches items without an embedding too)
        let estimate = plan::slice_estimate(&req.corpus, idx, &req.conds, req.any_vector());
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

#[cfg(test)]
mod tests {
    /// The default rank constant the searches fuse with.
    const K: f64 = crate::model::DEFAULT_RRF_K as f64;
    use std::sync::Arc;

    use serde_json::json;

    use crate::engine::tests::fake::*;
    use crate::engine::{explain, search, semantic_plans, validate, Args, Config, Request, Setting, SliceOf};
    use crate::error::{Result, SqlState};
    use crate::model::{Branch, Corpus, SearchRow, Strategy};
    use crate::testing::legal;

    #[test]
    fn a_small_slice_is_searched_exactly_a_large_one_through_hnsw_with_its_scan_budget() {
        let mut f = default_fake();
        f.slice_rows = vec![3000.0, 20_000.0];
        f.table_rows = vec![1_000_000.0, 200_000.0];
        run(&mut f, args("semantic"), Config::default()).unwrap();
        let strategies: Vec<(Strategy, Vec<Setting>)> = f
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Branch { strategy, settings, .. } => Some((*strategy, settings.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(strategies[0].0, Strategy::Exact);
        assert!(strategies[0].1.is_empty(), "an exact subplan needs no settings");
        assert_eq!(strategies[1].0, Strategy::Approximate);
        let budget = strategies[1].1.iter().find(|s| s.name == "hnsw.max_scan_tuples").unwrap();
        // 40 rows of a 10% slice, four times over: 1,600, raised to the 20,000 floor
        assert_eq!(budget.value, "20000");
        assert!(strategies[1].1.iter().any(|s| s.name == "hnsw.iterative_scan" && s.value == "relaxed_order"));
    }

    #[test]
    fn a_search_without_a_vector_estimates_the_slice_with_items_lacking_an_embedding() {
        let estimates = |mode: &str| {
            let mut f = default_fake();
            run(&mut f, args(mode), Config::default()).unwrap();
            f.calls
                .iter()
                .filter_map(|c| match c {
                    Call::Estimate(sql) if sql.contains("AS i") => Some(sql.clone()),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let semantic = estimates("semantic");
        assert!(
            !semantic.is_empty() && semantic.iter().all(|s| s.contains("\"embedding\" IS NOT NULL")),
            "{semantic:?}"
        );
        let lexical = estimates("lexical");
        assert!(!lexical.is_empty() && lexical.iter().all(|s| !s.contains("\"embedding\"")), "{lexical:?}");
    }

    #[test]
    fn a_small_slice_covered_by_a_partial_hnsw_index_uses_it() {
        let mut f = default_fake();
        f.slice_rows = vec![3000.0, 3000.0];
        f.partial_index = vec![1];
        run(&mut f, args("semantic"), Config::default()).unwrap();
        let strategies: Vec<(usize, Strategy)> = f
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Branch { source, strategy, .. } => Some((*source, *strategy)),
                _ => None,
            })
            .collect();
        assert_eq!(strategies, vec![(0, Strategy::Exact), (1, Strategy::Approximate)]);
        // a large slice is approximate anyway: the planner is not asked
        let mut f = default_fake();
        f.slice_rows = vec![50_000.0, 50_000.0];
        run(&mut f, args("semantic"), Config::default()).unwrap();
        assert!(!f.calls.iter().any(|c| matches!(c, Call::Partial(_))));
    }

    #[test]
    fn an_empty_slice_is_probed_and_runs_no_subplan() {
        for mode in ["hybrid", "semantic", "lexical"] {
            let mut f = Fake::new(vec![items(0, 0, 1), items(1, 0, 1)]);
            let rows = run(&mut f, args(mode), Config::default()).unwrap();
            assert!(rows.is_empty());
            assert!(f.branch_calls().is_empty(), "{mode}: no subplan for an empty corpus");
            assert_eq!(f.calls.iter().filter(|c| matches!(c, Call::Probe(_))).count(), 2);
        }
        // a slice estimated at one row that holds items is searched
        let mut f = default_fake();
        f.slice_rows = vec![1.0, 1.0];
        let rows = run(&mut f, args("hybrid"), Config::default()).unwrap();
        assert_eq!(rows.len(), 10);
        assert_eq!(f.branch_calls().len(), 4);
        // larger estimates are not probed
        let mut f = default_fake();
        run(&mut f, args("hybrid"), Config::default()).unwrap();
        assert!(!f.calls.iter().any(|c| matches!(c, Call::Probe(_))));
        // an isolation value the parents' statistics do not know (estimated at one parent) is
        // probed, though its items are estimated at ten per parent
        let mut f = Fake::new(vec![items(0, 0, 1), items(1, 0, 1)]);
        f.slice_rows = vec![10.0, 2.0];
        f.parent_rows = 1.0;
        assert!(run(&mut f, args("hybrid"), Config::default()).unwrap().is_empty());
        assert!(f.branch_calls().is_empty());
        // ... by one probe of the parents for both sources, which share them; no source probe
        // and no slice estimate follow
        let probes = |f: &Fake| {
            (
                f.calls.iter().filter(|c| matches!(c, Call::ParentProbe)).count(),
                f.calls.iter().filter(|c| matches!(c, Call::Probe(_))).count(),
            )
        };
        assert_eq!(probes(&f), (1, 0));
        let a = args("semantic");
        let checked = a.check(&Config::default()).unwrap();
        let mut g = Fake::new(vec![items(0, 0, 1), items(1, 0, 1)]);
        g.parent_rows = 1.0;
        let req = Request::prepare(validate(corpus(), a, checked, Config::default()).unwrap(), &mut g).unwrap();
        let estimates = g.calls.iter().filter(|c| matches!(c, Call::Estimate(_))).count();
        let sem = semantic_plans(&req, &mut g).unwrap();
        assert!(sem.iter().all(|s| s.empty == Some(SliceOf::Parents)), "{sem:?}");
        assert_eq!(
            g.calls.iter().filter(|c| matches!(c, Call::Estimate(_))).count() - estimates,
            2,
            "the parents' only"
        );
        let rows = explain(&req, &mut g).unwrap();
        assert_eq!(rows.len(), 2);
        for r in &rows {
            assert_eq!((r.branch, r.strategy), ("none", "empty_slice"));
            assert!(r.sql.starts_with("SELECT 1 FROM \"public\".\"case_law\" AS p\nWHERE"), "{}", r.sql);
        }
        // parents in the corpus but one source without items: each source is probed after the
        // parents, and the other one is searched
        let mut f = Fake::new(vec![items(0, 50, 1), items(1, 0, 1)]);
        f.parent_rows = 1.0;
        let rows = run(&mut f, args("hybrid"), Config::default()).unwrap();
        assert_eq!(rows.len(), 10);
        assert_eq!(probes(&f), (1, 2));
        assert!(f.branch_calls().iter().all(|c| c.0 == 0));
        // explain shows the probe of an empty source
        let mut f = Fake::new(vec![items(0, 50, 1), items(1, 0, 1)]);
        let a = args("hybrid");
        let checked = a.check(&Config::default()).unwrap();
        let req = Request::prepare(validate(corpus(), a, checked, Config::default()).unwrap(), &mut f).unwrap();
        let rows = explain(&req, &mut f).unwrap();
        let shown: Vec<(&str, &str, &str)> = rows.iter().map(|r| (r.source.as_str(), r.branch, r.strategy)).collect();
        assert_eq!(
            shown,
            vec![
                ("chunks", "semantic", "exact"),
                ("chunks", "lexical", "text_match"),
                ("halachot", "none", "empty_slice")
            ]
        );
        assert!(rows[2].sql.starts_with("SELECT 1\nFROM \"public\".\"halachot\""), "{}", rows[2].sql);
    }

    /// The legal corpus with its item tables distributed by Citus on the parent key.
    fn distributed_corpus() -> Arc<Corpus> {
        let mut c = legal();
        for s in &mut c.sources {
            s.item.distribution = Some(s.parent_fk.column.clone());
        }
        Arc::new(c)
    }

    #[test]
    fn a_distributed_source_is_planned_by_a_count_and_looked_up_by_its_parents() {
        let mut f = default_fake();
        let nearest: Vec<String> = f.items[0].iter().take(3).map(|i| i.id.clone()).collect();
        f.stale = nearest.clone();
        f.slice_rows = vec![3000.0, 20_000.0];
        let rows = run_in(distributed_corpus(), &mut f, args("hybrid"), Config::default()).unwrap();
        assert_eq!(rows.len(), 10);
        // counted, never estimated or probed (Citus' estimate is a constant)
        assert_eq!(f.calls.iter().filter(|c| matches!(c, Call::Count)).count(), 2);
        assert!(!f
            .calls
            .iter()
            .any(|c| matches!(c, Call::Estimate(_) | Call::Probe(_) | Call::ParentProbe | Call::Partial(_))));
        let sems: Vec<(Strategy, String)> = f
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Branch { branch: Branch::Semantic, strategy, sql, .. } => Some((*strategy, sql.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(sems.iter().map(|s| s.0).collect::<Vec<_>>(), vec![Strategy::Exact, Strategy::Approximate]);
        for (_, sql) in &sems {
            assert!(!sql.contains("OFFSET 0"), "no fence Citus would pull to the coordinator: {sql}");
            assert!(sql.contains(", i.\"id\"::text\nLIMIT"), "ids break distance ties: {sql}");
        }
        // stale items never come from the semantic branch, and the lookup went through the items
        assert!(rows.iter().all(|r| !nearest.contains(&r.item_id) || r.semantic_rank.is_none()));
        assert!(f.calls.iter().any(|c| matches!(c, Call::Queued(n) if *n > 0)));
        for c in &f.calls {
            if let Call::Branch { branch: Branch::Lexical, sql, .. } = c {
                assert!(!sql.contains("OFFSET 0"), "scored and cut on the shards: {sql}");
            }
        }
    }

    #[test]
    fn a_text_only_hybrid_search_with_vector_extra_queries_plans_its_semantic_branches() {
        let mut f = default_fake();
        f.slice_rows = vec![50_000.0, 50_000.0];
        let mut a = args("lexical");
        a.mode = "hybrid".into();
        a.extra_queries = json!([{"vector": extra_json(2.0)}]);
        run(&mut f, a, Config::default()).unwrap();
        let strategies: Vec<Strategy> = f
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Branch { branch: Branch::Semantic, strategy, .. } => Some(*strategy),
                _ => None,
            })
            .collect();
        assert_eq!(
            strategies,
            vec![Strategy::Approximate; 2],
            "a large slice goes through HNSW for an extra vector too"
        );
    }

    fn run_pages(f: &mut Fake, a: Args) -> Result<Vec<SearchRow>> {
        let config = Config::default();
        let checked = a.check(&config)?;
        let req = Request::prepare(validate(pages_corpus(), a, checked, config)?, f)?;
        search(&req, f)
    }

    fn semantic_calls(f: &Fake) -> Vec<(usize, usize)> {
        f.calls
            .iter()
            .filter_map(|c| match c {
                Call::Branch { source, branch: Branch::Semantic, sql, .. } => {
                    Some((*source, sql.matches("page_images").count()))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn each_embedding_space_is_searched_with_its_own_vector_and_fused_with_its_weight() {
        // query_vec alone: the page images (another model) are not searched semantically
        let mut f = pages_fake();
        run_pages(&mut f, args("hybrid")).unwrap();
        assert_eq!(semantic_calls(&f).iter().map(|c| c.0).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(f.branch_calls().iter().filter(|c| c.1 == Branch::Lexical).count(), 3);
        // with the page space's vector: its sources' subplan, with that vector
        let mut f = pages_fake();
        f.boost_vector.push((0.25, "200005".into()));
        let mut a = args("hybrid");
        let mut page_vec = vec![0.5f32; 8];
        page_vec[0] = 0.25;
        a.query_vectors = json!({"page_image": page_vec});
        let rows = run_pages(&mut f, Args { k: 100, max_per_parent: Some(0), ..a.clone() }).unwrap();
        let calls: Vec<(usize, f32)> = f
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Branch { source, branch: Branch::Semantic, vector0, .. } => Some((*source, *vector0)),
                _ => None,
            })
            .collect();
        assert_eq!(calls.iter().map(|c| c.0).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(calls[2].1, 0.25, "the page source is searched with the page vector");
        assert!(calls[0].1 != 0.25 && calls[1].1 != 0.25);
        // a page's semantic rank is within its space's list, weighted 0.5
        let p = rows.iter().find(|r| r.item_id == "200005").expect("the page nearest to the page vector is a hit");
        let sem = p.query_ranks.as_array().unwrap().iter().find(|q| q["branch"] == "semantic").unwrap();
        assert_eq!((sem["rank"].as_i64(), sem["space"].as_str()), (Some(1), Some("page_image")));
        assert_eq!(p.semantic_rank, Some(1), "its rank within its own space's list");
        let mut f = pages_fake();
        f.boost_vector.push((0.25, "200005".into()));
        let mut b = a.clone();
        b.mode = "semantic".into();
        b.query_vec = None;
        let rows = run_pages(&mut f, b).unwrap();
        assert_eq!(
            semantic_calls(&f).iter().map(|c| c.0).collect::<Vec<_>>(),
            vec![2],
            "only the page space has a vector"
        );
        assert_eq!(rows[0].item_id, "200005");
        assert!((rows[0].score - 0.5 / (K + 1.0)).abs() < 1e-12, "{}", rows[0].score);
        // mistakes
        for (qv, state) in [
            (json!({"page_image": [1.0, 2.0]}), SqlState::DataException),
            (json!({"audio": [1.0]}), SqlState::InvalidParameterValue),
            (json!({"default": vec384()}), SqlState::InvalidParameterValue),
            (json!({"page_image": "x"}), SqlState::InvalidParameterValue),
            (json!([1]), SqlState::InvalidParameterValue),
            (json!({"page_image": [1e39, 0, 0, 0, 0, 0, 0, 0]}), SqlState::InvalidParameterValue),
        ] {
            let mut a = args("hybrid");
            a.query_vectors = qv.clone();
            let mut f = pages_fake();
            let e = run_pages(&mut f, a).unwrap_err();
            assert_eq!(e.state, state, "{qv}: {e}");
            assert!(f.branch_calls().is_empty() && !e.hint.is_empty());
        }
        // explain says which sources are not searched semantically
        let mut f = pages_fake();
        let a = args("hybrid");
        let config = Config::default();
        let checked = a.check(&config).unwrap();
        let req = Request::prepare(validate(pages_corpus(), a, checked, config).unwrap(), &mut f).unwrap();
        let rows = explain(&req, &mut f).unwrap();
        let none: Vec<(&str, &str)> =
            rows.iter().filter(|r| r.strategy == "no_query_vector").map(|r| (r.source.as_str(), r.branch)).collect();
        assert_eq!(none, vec![("pages", "semantic")]);
    }
    #[test]
    fn a_space_without_a_query_vector_is_not_searched_and_one_with_it_ranks_in_its_own_list() {
        let semantic = |query_vec: Option<Vec<f32>>, page: Option<f32>| {
            let mut f = pages_fake();
            f.boost_vector.push((0.25, "200005".into()));
            let query_vectors = page.map_or(serde_json::Value::Null, |first| {
                let mut v = vec![0.5f32; 8];
                v[0] = first;
                json!({ "page_image": v })
            });
            let a = Args { query_vec, query_vectors, k: 300, max_per_parent: Some(0), ..args("semantic") };
            run_pages(&mut f, a).unwrap()
        };
        // no page vector: the pages are not searched semantically
        let plain = semantic(Some(vec384()), None);
        assert!(!plain.is_empty() && plain.iter().all(|r| r.source != "pages"));
        // with it: every page is ranked in the page space's list, which counts with its weight 0.5
        let both = semantic(Some(vec384()), Some(0.25));
        let pages: Vec<&SearchRow> = both.iter().filter(|r| r.source == "pages").collect();
        assert!(!pages.is_empty() && pages.iter().all(|r| r.semantic_rank.is_some()));
        for r in &pages {
            let spaces: Vec<&serde_json::Value> =
                r.query_ranks.as_array().unwrap().iter().map(|q| &q["space"]).collect();
            assert!(!spaces.is_empty() && spaces.iter().all(|s| *s == "page_image"), "{}", r.query_ranks);
        }
        let first = pages.iter().min_by_key(|r| r.semantic_rank).unwrap();
        assert_eq!((first.item_id.as_str(), first.semantic_rank), ("200005", Some(1)), "the nearest page");
        assert!((first.score - 0.5 / (K + 1.0)).abs() < 1e-12, "{}", first.score);
        // the text sources' ranks are their own list's: a page does not push them down
        let text_ranks: Vec<i32> =
            both.iter().filter(|r| r.source != "pages").filter_map(|r| r.semantic_rank).take(3).collect();
        assert_eq!(text_ranks, vec![1, 2, 3]);
        // the page vector alone: only the pages
        let only = semantic(None, Some(0.25));
        assert!(!only.is_empty() && only.iter().all(|r| r.source == "pages"));
    }
}
