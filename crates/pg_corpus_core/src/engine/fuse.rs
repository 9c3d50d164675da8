//! The fusion loop: rounds with a widening window until k rows survive the cap, each fused
//! by RRF with the feedback round's lists and filtered by evidence, then expansion and
//! must-include classes.

use std::collections::HashMap;

use super::{
    evidence::{apply_evidence, Near},
    feedback::feedback_round,
    rounds::{run_round, Round},
    semantic_plans, Executor, Request,
};
use crate::error::Result;
use crate::fusion::{self, Fused, RankedList, SourceInfo};
use crate::model::{Branch, QueryTag};

pub(super) fn source_infos(req: &Request) -> Vec<SourceInfo> {
    req.corpus
        .sources
        .iter()
        .map(|s| SourceInfo {
            parent_scope: s.parent_scope.clone(),
            semantic_weight: s.semantic_weight,
            lexical_weight: s.lexical_weight,
        })
        .collect()
}

/// The original query's branch lists of one round with the request's window, each corpus-wide
/// and in rank order, unfused: what a tuner replays fusion settings on.
pub fn branch_lists(req: &Request, exec: &mut dyn Executor) -> Result<Vec<RankedList>> {
    let sem = semantic_plans(req, exec)?;
    let queries = req.queries();
    let Round { lists, .. } = run_round(req, &queries, &sem, req.window, exec)?;
    Ok(lists.into_iter().filter(|l| l.query == QueryTag::Original).collect())
}

/// The fused, capped hits of a request (before the final fetch): its k rows, or with an offset
/// that page of the ranking.
pub fn ranked(req: &Request, exec: &mut dyn Executor) -> Result<Vec<Fused>> {
    if req.offset == 0 {
        return ranked_to(req, None, exec);
    }
    let rows = ranked_to(req, Some(req.offset + req.k), exec)?;
    Ok(rows.into_iter().skip(req.offset).take(req.k).collect())
}

/// [`ranked`]'s k rows (`depth` None), or the ranking pages of k are slices of, down to `depth`
/// rows or as far as the corpus goes: the ranking of the first page's window, continued by what
/// wider windows add.
pub(super) fn ranked_to(req: &Request, depth: Option<usize>, exec: &mut dyn Executor) -> Result<Vec<Fused>> {
    let sem = semantic_plans(req, exec)?;
    let max_window = (req.config.max_candidates.max(1) as usize).max(req.window);
    let sources = source_infos(req);
    let mut window = req.window;
    let queries = req.queries();
    // the evidence filter's index terms of the items it has checked, across rounds
    let mut item_keys: HashMap<(usize, String), Vec<String>> = HashMap::new();
    // a page beyond the first: the ranking of the first page's window, continued by what wider
    // windows add (None until the first page's window is reached)
    let mut pages: Option<Vec<Fused>> = None;
    loop {
        let Round { lists, saturated, frontiers } = run_round(req, &queries, &sem, window, exec)?;
        let near = req.evidence.as_ref().map(|_| Near::of(&lists));
        let (lists, saturated) = if req.feedback {
            let first = fusion::rrf(&lists, &sources, req.rrf_k);
            let (more, more_saturated) = feedback_round(req, &sem, window, &first, exec)?;
            // RRF(feedback vector, first lexical list, feedback lexical list, extra queries'
            // lists): the feedback vector replaces the original one
            let (original, extra): (Vec<RankedList>, Vec<RankedList>) =
                lists.into_iter().partition(|l| l.query == QueryTag::Original);
            let mut fused_lists: Vec<RankedList> =
                more.iter().filter(|l| l.branch == Branch::Semantic).cloned().collect();
            // (the moved vector is the default space's: other spaces keep their first list)
            fused_lists.extend(original.iter().filter(|l| l.branch == Branch::Semantic && l.space != 0).cloned());
            fused_lists.extend(original.into_iter().filter(|l| l.branch == Branch::Lexical));
            fused_lists.extend(more.into_iter().filter(|l| l.branch == Branch::Lexical));
            fused_lists.extend(extra);
            (fused_lists, saturated || more_saturated)
        } else {
            (lists, saturated)
        };
        let mut fused = fusion::rrf(&lists, &sources, req.rrf_k);
        if !req.exclude_items.is_empty() || req.exclude_parent.is_some() {
            fused.retain(|f| !req.excludes(f));
        }
        let saturated = match (&req.evidence, &near) {
            (Some(ev), Some(near)) => apply_evidence(req, ev, near, &frontiers, &mut fused, &mut item_keys, exec)?,
            _ => saturated,
        };
        if let Some(want) = depth {
            match pages.as_mut() {
                Some(p) => fusion::extend_pages(p, &fused, req.max_per_parent),
                None => {
                    let mut first = fusion::cap(&fused, req.max_per_parent, req.k);
                    if window < max_window && fusion::needs_wider_window(first.len(), req.k, saturated) {
                        window = window.saturating_mul(4).min(max_window);
                        continue;
                    }
                    // the first page as a search of k rows returns it (must-include hits in place
                    // of its lowest-ranked rows), then the rows it left out, in ranking order
                    if req.must_include && !req.corpus.must_include.is_empty() {
                        let mut near = near;
                        super::must_include::must_include(
                            req,
                            &mut first,
                            &fused,
                            near.as_mut(),
                            &mut item_keys,
                            exec,
                        )?;
                    }
                    fusion::extend_pages(
                        &mut first,
                        &fusion::cap(&fused, req.max_per_parent, usize::MAX),
                        req.max_per_parent,
                    );
                    pages = Some(first);
                }
            }
            let p = pages.as_ref().map_or(0, Vec::len);
            if window >= max_window || !fusion::needs_wider_window(p, want, saturated) {
                return Ok(pages.unwrap_or_default());
            }
            window = window.saturating_mul(4).min(max_window);
            continue;
        }
        let rows = fusion::cap(&fused, req.max_per_parent, req.k);
        if window >= max_window || !fusion::needs_wider_window(rows.len(), req.k, saturated) {
            let mut rows = if req.expand { super::expand::expand(req, rows, exec)? } else { rows };
            if req.must_include && !req.corpus.must_include.is_empty() {
                let mut near = near;
                super::must_include::must_include(req, &mut rows, &fused, near.as_mut(), &mut item_keys, exec)?;
            }
            return Ok(rows);
        }
        window = window.saturating_mul(4).min(max_window);
    }
}

#[cfg(test)]
mod tests {
    /// The default rank constant the searches fuse with.
    const K: f64 = crate::model::DEFAULT_RRF_K as f64;
    use std::collections::HashMap;

    use proptest::prelude::*;
    use serde_json::json;

    use crate::engine::tests::fake::*;
    use crate::engine::{Args, Config};
    use crate::model::Branch;

    #[test]
    fn the_window_widens_until_k_rows_survive_the_cap() {
        // 40 items per parent: the first window of 40 holds one or two parents per source
        let mut f = Fake::new(vec![items(0, 5000, 40), items(1, 5000, 40)]);
        let mut a = args("semantic");
        a.max_per_parent = Some(1);
        let rows = run(&mut f, a, Config::default()).unwrap();
        assert_eq!(rows.len(), 10);
        let limits: Vec<i64> = f.branch_calls().iter().filter(|c| c.0 == 0).map(|c| c.2).collect();
        assert_eq!(limits, vec![40, 160, 640], "×4 per round until 10 parents are in the window");
        let parents: std::collections::HashSet<&str> = rows.iter().map(|r| r.parent_id.as_str()).collect();
        assert_eq!(parents.len(), 10);
    }

    #[test]
    fn the_window_stops_widening_when_the_sources_are_exhausted_or_at_max_candidates() {
        // 30 items in all, 10 parents of 3: a cap of 1 leaves 10 rows per source... in 10 parents
        let mut f = Fake::new(vec![items(0, 30, 3), items(1, 0, 1)]);
        let mut a = args("semantic");
        a.max_per_parent = Some(1);
        a.k = 20;
        let rows = run(&mut f, a, Config::default()).unwrap();
        assert_eq!(rows.len(), 10, "only 10 parents exist");
        assert_eq!(f.branch_calls(), vec![(0, Branch::Semantic, 80)], "one round; the empty source runs nothing");

        let mut f = Fake::new(vec![items(0, 100_000, 1000), items(1, 0, 1)]);
        let mut a = args("semantic");
        a.max_per_parent = Some(1);
        let config = Config { max_candidates: 500, ..Config::default() };
        let rows = run(&mut f, a, config).unwrap();
        let limits: Vec<i64> = f.branch_calls().iter().filter(|c| c.0 == 0).map(|c| c.2).collect();
        assert_eq!(limits, vec![40, 160, 500], "the window never exceeds pg_corpus.max_candidates");
        assert_eq!(rows.len(), 1, "500 items of one parent give one row");
    }

    #[test]
    fn fusion_takes_the_corpus_window_and_a_single_list_the_floor() {
        let mut d = crate::testing::legal_def();
        d["ranking"] = serde_json::json!({});
        let corpus = std::sync::Arc::new(crate::definition::resolve(&serde_json::from_value(d).unwrap()).unwrap());
        let first_limits = |mode: &str| {
            let mut f = default_fake();
            run_in(corpus.clone(), &mut f, args(mode), Config::default()).unwrap();
            let mut limits: Vec<i64> = f.branch_calls().iter().map(|c| c.2).collect();
            limits.dedup();
            limits
        };
        assert_eq!(first_limits("hybrid"), vec![100], "the default fusion window, max(100, 4k)");
        assert_eq!(first_limits("semantic"), vec![40], "one list: max(20, 4k)");
        assert_eq!(first_limits("lexical"), vec![40]);
        let mut f = default_fake();
        let a = Args { query_vec: None, ..args("hybrid") };
        run_in(corpus.clone(), &mut f, a, Config::default()).unwrap();
        assert!(f.branch_calls().iter().all(|c| c.2 == 40), "a hybrid call with text only is one list");
    }

    #[test]
    fn one_lexical_list_nothing_drops_asks_for_its_page_only() {
        let mut d = crate::testing::legal_def();
        d["ranking"] = serde_json::json!({});
        let legal = std::sync::Arc::new(crate::definition::resolve(&serde_json::from_value(d).unwrap()).unwrap());
        let mut own = (*legal).clone();
        for (i, s) in own.sources.iter_mut().enumerate() {
            s.parent_fk = s.id.clone();
            s.parent_scope = format!("own:{i}");
        }
        let own = std::sync::Arc::new(own);
        let first_limits = |corpus: &std::sync::Arc<crate::model::Corpus>, a: Args| {
            let mut f = default_fake();
            run_in(corpus.clone(), &mut f, a, Config::default()).unwrap();
            // (the first round's: a round that comes back short widens it)
            f.branch_calls().first().map(|c| c.2)
        };
        let lexical = |cap: Option<i32>, offset: i32| Args { max_per_parent: cap, offset, ..args("lexical") };
        assert_eq!(first_limits(&legal, lexical(None, 0)), Some(10), "no cap: the page");
        assert_eq!(first_limits(&legal, lexical(Some(0), 0)), Some(10), "0 is no cap");
        assert_eq!(first_limits(&legal, lexical(Some(10), 0)), Some(10), "a cap of k cannot bite");
        assert_eq!(first_limits(&legal, lexical(None, 20)), Some(30), "the page and the rows before it");
        assert_eq!(first_limits(&own, lexical(Some(3), 0)), Some(10), "each item its own parent");
        assert_eq!(first_limits(&legal, lexical(Some(3), 0)), Some(40), "a cap that can bite: max(20, 4k)");
        let mut shared = (*own).clone();
        shared.sources[1].parent_scope = shared.sources[0].parent_scope.clone();
        assert_eq!(
            first_limits(&std::sync::Arc::new(shared), lexical(Some(3), 0)),
            Some(40),
            "two sources' items may share a parent key"
        );
        let semantic = Args { max_per_parent: None, ..args("semantic") };
        assert_eq!(first_limits(&legal, semantic), Some(40), "an approximate list keeps its window");
        let evidence = Args { max_per_parent: None, evidence: Some(true), ..args("lexical") };
        assert_eq!(first_limits(&legal, evidence), Some(40), "the evidence filter may drop rows");
    }

    #[test]
    fn dropping_stale_embeddings_still_fills_k_rows() {
        // 45 items of one source, the 40 nearest stale: the first window's semantic list keeps none
        let mut f = Fake::new(vec![items(0, 45, 1), items(1, 0, 1)]);
        f.stale = f.items[0].iter().take(40).map(|i| i.id.clone()).collect();
        let rows = run(&mut f, args("semantic"), Config::default()).unwrap();
        assert_eq!(rows.len(), 5, "the 5 fresh items, found by widening");
        assert!(rows.iter().all(|r| !r.embedding_stale));
        let limits: Vec<i64> = f.branch_calls().iter().filter(|c| c.0 == 0).map(|c| c.2).collect();
        assert_eq!(limits, vec![40, 160]);
    }

    #[test]
    fn an_item_only_an_extra_query_finds_enters_with_that_querys_weight() {
        let target = "100003".to_string(); // the halachot's third item, out of the original's lists
        let search = |weight: f64| {
            let mut f = default_fake();
            f.items[1][2] = Item { distance: 9.0, lexical: None, ..f.items[1][2].clone() };
            f.boost_vector.push((3.0, target.clone()));
            let mut a = args("hybrid");
            a.extra_queries = json!([{"vector": extra_json(3.0), "weight": weight, "label": "hyde"}]);
            run(&mut f, a, Config::default()).unwrap()
        };
        let strong = search(100.0);
        // the heavy query's first two items lead: its best, and the original's best (its second)
        let hit = strong.iter().position(|r| r.item_id == target).expect("a heavy extra query's best item is returned");
        assert!(hit < 2, "at rank {}", hit + 1);
        let hit = &strong[hit];
        assert_eq!((hit.semantic_rank, hit.lexical_rank), (None, None), "the original did not find it");
        assert_eq!(hit.query_ranks, json!([{"query": "hyde", "branch": "semantic", "rank": 1, "distance": 0.0}]));
        assert!((hit.score - 100.0 / (K + 1.0)).abs() < 1e-12);
        let weak = search(0.001);
        assert!(weak.iter().all(|r| r.item_id != target), "a light one cannot outrank two original lists");
    }

    #[test]
    fn the_fused_score_is_the_weighted_sum_over_every_list_that_ranked_a_hit() {
        let mut f = default_fake();
        f.boost_vector.push((5.0, "100007".into()));
        f.boost_key.push(("extra".into(), "100009".into()));
        f.df.insert("extra".into(), 5);
        let mut a = args("hybrid");
        a.extra_queries = json!([{"vector": extra_json(5.0), "weight": 0.5}, {"text": "extra", "weight": 2.0}]);
        let rows = run(&mut f, a, Config::default()).unwrap();
        let weight = |label: &str| match label {
            "extra_1" => 0.5,
            "extra_2" => 2.0,
            _ => 1.0,
        };
        for r in &rows {
            let expected: f64 = r
                .query_ranks
                .as_array()
                .unwrap()
                .iter()
                .map(|q| weight(q["query"].as_str().unwrap()) / (K + q["rank"].as_f64().unwrap()))
                .sum();
            assert!((r.score - expected).abs() < 1e-12, "{} vs {expected}: {}", r.score, r.query_ranks);
            assert!(
                r.query_ranks.as_array().unwrap().iter().any(|q| q["query"] != "original")
                    || r.semantic_rank.is_some()
                    || r.lexical_rank.is_some()
            );
        }
        // the original's best hit of each branch is still there: the original is always fused
        assert!(rows.iter().any(|r| r.semantic_rank == Some(1)) || rows.iter().any(|r| r.lexical_rank == Some(1)));
    }

    /// The fake of the multi-query tests: each extra query has an item only it finds first (by
    /// its vector's first component, or by its text's key), far down the original's lists.
    fn multi_query_fake() -> Fake {
        let mut f = default_fake();
        for (src, j) in [(1, 19), (1, 29), (0, 24)] {
            let i = &mut f.items[src][j];
            i.distance += 9.0;
            i.lexical = Some(0.001);
        }
        f.boost_vector.push((3.0, "100020".into()));
        f.boost_vector.push((5.0, "100030".into()));
        f.boost_key.push(("rewrite".into(), "25".into()));
        f.df.insert("rewrite".into(), 20);
        f
    }

    /// One window, never widened: the lists a search fuses are the lists a search with the same
    /// window ranks.
    fn one_window() -> Config {
        Config { max_candidates: 40, ..Config::default() }
    }

    /// One query's branch list as a plain single-branch search reports it, whole: (source, item) →
    /// rank.
    fn alone(vector: Option<Vec<f32>>, text: Option<&str>) -> HashMap<(String, String), i32> {
        let mode = if vector.is_some() { "semantic" } else { "lexical" };
        let a = Args {
            query_vec: vector,
            query_text: text.map(str::to_string),
            mode: mode.into(),
            k: 160,
            max_per_parent: Some(0),
            candidates: Some(40),
            ..Args::default()
        };
        let rows = run(&mut multi_query_fake(), a, one_window()).unwrap();
        rows.into_iter()
            .filter_map(|r| {
                let rank = if mode == "semantic" { r.semantic_rank } else { r.lexical_rank };
                rank.map(|rank| ((r.source, r.item_id), rank))
            })
            .collect()
    }

    fn multi_query_args(extra: serde_json::Value) -> Args {
        Args { k: 30, max_per_parent: Some(0), candidates: Some(40), extra_queries: extra, ..args("hybrid") }
    }

    #[test]
    fn the_fusion_is_rrf_over_the_lists_each_query_ranks_alone_with_its_weight() {
        let extra = json!([
            {"vector": extra_json(3.0), "text": "rewrite", "weight": 0.7, "label": "rewrite"},
            {"vector": extra_json(5.0), "weight": 50}
        ]);
        let lists = [
            (1.0, "original", "semantic", alone(Some(vec384()), None)),
            (1.0, "original", "lexical", alone(None, Some("חוזה שכירות"))),
            (0.7, "rewrite", "semantic", alone(Some(vector_starting(3.0)), None)),
            (0.7, "rewrite", "lexical", alone(None, Some("rewrite"))),
            (50.0, "extra_2", "semantic", alone(Some(vector_starting(5.0)), None)),
        ];
        let fused = run(&mut multi_query_fake(), multi_query_args(extra), one_window()).unwrap();
        assert_eq!(fused.len(), 30);
        for r in &fused {
            let item = (r.source.clone(), r.item_id.clone());
            let mut want: Vec<(String, String, i64)> = lists
                .iter()
                .filter_map(|(_, label, branch, ranks)| {
                    ranks.get(&item).map(|&rank| (label.to_string(), branch.to_string(), i64::from(rank)))
                })
                .collect();
            want.sort();
            let mut got: Vec<(String, String, i64)> = r
                .query_ranks
                .as_array()
                .unwrap()
                .iter()
                .map(|q| {
                    (
                        q["query"].as_str().unwrap().into(),
                        q["branch"].as_str().unwrap().into(),
                        q["rank"].as_i64().unwrap(),
                    )
                })
                .collect();
            got.sort();
            assert_eq!(got, want, "{item:?}");
            let score: f64 = lists
                .iter()
                .filter_map(|(w, _, _, ranks)| ranks.get(&item).map(|&rank| w / (K + f64::from(rank))))
                .sum();
            assert!((r.score - score).abs() <= 1e-12 * score, "{item:?}: {} vs {score}", r.score);
            // the classic columns stay the original query's
            assert_eq!(r.semantic_rank, lists[0].3.get(&item).copied(), "{item:?}");
            assert_eq!(r.lexical_rank, lists[1].3.get(&item).copied(), "{item:?}");
        }
        assert!(fused.windows(2).all(|w| w[0].score >= w[1].score));
        // the extra queries changed the result, and the heavy one's best item came in
        let plain = run(&mut multi_query_fake(), multi_query_args(serde_json::Value::Null), one_window()).unwrap();
        let ids = |rows: &[crate::model::SearchRow]| -> Vec<(String, String)> {
            rows.iter().map(|r| (r.source.clone(), r.item_id.clone())).collect()
        };
        assert_ne!(ids(&plain), ids(&fused));
        let best = lists[4].3.iter().min_by_key(|(_, &rank)| rank).unwrap().0;
        assert!(ids(&plain).iter().all(|i| i != best) && ids(&fused).contains(best), "{best:?}");
    }

    #[test]
    fn the_original_query_is_always_fused_and_an_empty_list_is_no_extra_query() {
        let heavy = json!([
            {"vector": extra_json(3.0), "text": "rewrite", "weight": 100},
            {"vector": extra_json(5.0), "weight": 100}
        ]);
        let rows =
            run(&mut multi_query_fake(), Args { extra_queries: heavy, ..args("hybrid") }, Config::default()).unwrap();
        assert!(
            rows.iter().flat_map(|r| r.query_ranks.as_array().unwrap()).any(|q| q["query"] == "original"),
            "the original query's lists are in the fusion however heavy the extra queries"
        );
        let key = |rows: Vec<crate::model::SearchRow>| -> Vec<(String, String, f64)> {
            rows.into_iter().map(|r| (r.source, r.item_id, r.score)).collect()
        };
        let none = key(run(&mut multi_query_fake(), args("hybrid"), Config::default()).unwrap());
        let empty = Args { extra_queries: json!([]), ..args("hybrid") };
        assert_eq!(key(run(&mut multi_query_fake(), empty, Config::default()).unwrap()), none);
    }

    /// The rows one can get from all eligible items: fused over the full lists, capped.
    fn achievable(all: &[Vec<Item>], max_per_parent: Option<usize>) -> usize {
        let mut per_parent: HashMap<&str, usize> = HashMap::new();
        let mut n = 0;
        for list in all {
            for i in list {
                let c = per_parent.entry(i.parent.as_str()).or_default();
                if max_per_parent.is_none_or(|m| *c < m) {
                    *c += 1;
                    n += 1;
                }
            }
        }
        n
    }

    proptest! {
        /// Whatever the items and their parents, a search returns min(k, what the cap allows) rows
        /// when the window may grow to every item, at most max_per_parent per parent, ranked
        /// 1..n by non-increasing score.
        #[test]
        fn a_search_fills_k_rows_whenever_they_exist(
            sizes in (0usize..300, 0usize..300),
            per_parent in (1usize..60, 1usize..60),
            k in 1i32..60,
            cap in prop::option::of(1i32..5),
            mode in prop::sample::select(vec!["hybrid", "semantic", "lexical"]),
        ) {
            let all = vec![items(0, sizes.0, per_parent.0), items(1, sizes.1, per_parent.1)];
            let mut f = Fake::new(all.clone());
            f.df = [("חוזה".to_string(), 10u64), ("שכירות".to_string(), 40)].into_iter().collect();
            let mut a = args(mode);
            a.k = k;
            a.max_per_parent = cap;
            let rows = run(&mut f, a, Config::default()).unwrap();
            let want = (k as usize).min(achievable(&all, cap.map(|c| c as usize)));
            prop_assert_eq!(rows.len(), want);
            let mut per_parent_count: HashMap<&str, usize> = HashMap::new();
            for (i, r) in rows.iter().enumerate() {
                prop_assert_eq!(r.rank as usize, i + 1);
                let c = per_parent_count.entry(r.parent_id.as_str()).or_default();
                *c += 1;
                if let Some(m) = cap {
                    prop_assert!(*c <= m as usize);
                }
            }
            prop_assert!(rows.windows(2).all(|w| w[0].score >= w[1].score));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Pages are slices of one ranking: the first page is the search of k rows, each next
        /// page holds the following ranks, no item twice, within the cap over all pages, until
        /// every item the cap allows has been on a page.
        #[test]
        fn pages_are_disjoint_slices_of_one_ranking(
            sizes in (0usize..300, 0usize..300),
            per_parent in (1usize..60, 1usize..60),
            k in 4i32..25,
            cap in prop::option::of(1i32..4),
            mode in prop::sample::select(vec!["hybrid", "semantic", "lexical"]),
        ) {
            let all = vec![items(0, sizes.0, per_parent.0), items(1, sizes.1, per_parent.1)];
            let page = |offset: i32| {
                let mut f = Fake::new(all.clone());
                f.df = [("חוזה".to_string(), 10u64), ("שכירות".to_string(), 40)].into_iter().collect();
                let mut a = args(mode);
                a.k = k;
                a.offset = offset;
                a.max_per_parent = cap;
                run(&mut f, a, Config::default()).unwrap()
            };
            let first = page(0);
            let mut seen: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
            let mut per_parent_count: HashMap<String, usize> = HashMap::new();
            let mut total = 0usize;
            let mut offset = 0;
            loop {
                let rows = page(offset);
                if offset == 0 {
                    prop_assert_eq!(&rows, &first);
                }
                for (i, r) in rows.iter().enumerate() {
                    prop_assert_eq!(r.rank as usize, offset as usize + i + 1);
                    prop_assert!(seen.insert((r.source.clone(), r.item_id.clone())), "{} twice", r.item_id);
                    let c = per_parent_count.entry(r.parent_id.clone()).or_default();
                    *c += 1;
                    if let Some(m) = cap {
                        prop_assert!(*c <= m as usize);
                    }
                }
                total += rows.len();
                if rows.len() < k as usize || offset > 2_000 {
                    break;
                }
                offset += k;
            }
            prop_assert_eq!(total, achievable(&all, cap.map(|c| c as usize)));
        }
    }
}
