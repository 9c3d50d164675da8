//! Reciprocal Rank Fusion and the per-parent cap.
//!
//! Each branch's per-source lists are merged into one corpus-wide list first (all sources of a
//! corpus share one embedding space — checked at definition time — and one lexical scorer), so
//! `semantic_rank` 1 is the corpus' nearest item whatever its source. The two branch lists are
//! then fused: `score(item) = Σ_branch weight(source, branch) / (rrf_k + rank_branch(item))`,
//! ranks 1-based. Only ranks enter the score: raw scores of different retrievers are never added
//! so rescaling one branch's raw scores cannot change the fused order.

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::model::{Branch, Hit, QueryTag};

/// What fusion needs to know of a source.
#[derive(Debug, Clone)]
pub struct SourceInfo {
    /// Sources that share a parent table share the cap: this names the parent scope.
    pub parent_scope: String,
    pub semantic_weight: f64,
    pub lexical_weight: f64,
}

/// One ranked input of the fusion: a branch's corpus-wide list of one query, best first.
#[derive(Debug, Clone)]
pub struct RankedList {
    pub branch: Branch,
    pub hits: Vec<Hit>,
    pub query: QueryTag,
    /// Multiplies every RRF contribution of the list (an extra query's weight times an
    /// embedding space's; 1 otherwise).
    pub weight: f64,
    /// The embedding space of a semantic list (0: the default space; lexical lists: 0).
    pub space: usize,
}

impl RankedList {
    /// The same list, attributed to `query` with `weight`.
    pub fn of_query(self, query: QueryTag, weight: f64) -> RankedList {
        RankedList { query, weight, ..self }
    }
}

/// Where one list ranked a fused hit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueryHit {
    pub query: QueryTag,
    pub branch: Branch,
    /// The list's embedding space (semantic lists).
    pub space: usize,
    /// 1-based.
    pub rank: usize,
    /// Distance (semantic) or score (lexical).
    pub raw: f64,
}

/// Compare item ids the way their SQL type would: numerically when both are integers (so that
/// 2 comes before 10, as ORDER BY id does in the subplans), else as text.
pub fn cmp_ids(a: &str, b: &str) -> Ordering {
    match (a.parse::<i128>(), b.parse::<i128>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.cmp(b),
    }
}

/// Put a branch's hits in rank order: nearest first for semantic, best first for lexical;
/// source and item id break ties, so ranks do not depend on the order rows arrived in.
pub fn order_hits(branch: Branch, hits: &mut [Hit]) {
    hits.sort_by(|a, b| {
        let primary = match branch {
            Branch::Semantic => a.raw.total_cmp(&b.raw),
            Branch::Lexical => b.raw.total_cmp(&a.raw),
        };
        primary.then_with(|| a.source.cmp(&b.source)).then_with(|| cmp_ids(&a.item_id, &b.item_id))
    });
}

/// Merge one branch's per-source lists into one corpus-wide list. Nothing is cut: an item
/// dropped here could be the one needed to fill `k` rows after capping.
pub fn merge_branch(branch: Branch, per_source: Vec<Vec<Hit>>) -> RankedList {
    let mut hits: Vec<Hit> = per_source.into_iter().flatten().collect();
    order_hits(branch, &mut hits);
    RankedList { branch, hits, query: QueryTag::Original, weight: 1.0, space: 0 }
}

/// Whether a subplan that returned `rows` of a `window` may have left eligible items out, so
/// that a wider window could find them: it filled its window, or it was a pruned lexical
/// subplan (some matching documents were no candidates) that came back short.
pub fn may_hold_more(rows: usize, window: usize, pruned: bool) -> bool {
    rows >= window || pruned
}

#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    pub source: usize,
    pub item_id: String,
    pub parent_scope: String,
    pub parent_id: String,
    pub score: f64,
    /// (rank, distance) in the semantic list.
    pub semantic: Option<(usize, f64)>,
    /// (rank, score) in the lexical list.
    pub lexical: Option<(usize, f64)>,
    /// Every list that ranked it, in fusion order.
    pub queries: Vec<QueryHit>,
    /// Why the evidence filter admitted it (None: the filter is off).
    pub evidence: Option<serde_json::Value>,
    /// How it came in when not by the search's own lists (must-include, graph expansion).
    pub origin: Option<serde_json::Value>,
}

impl Fused {
    /// The best rank of its original-query (or feedback) branches; for a hit only extra
    /// queries found, the best rank any of them gave it.
    fn best_rank(&self) -> usize {
        let s = self.semantic.map_or(usize::MAX, |(r, _)| r);
        let l = self.lexical.map_or(usize::MAX, |(r, _)| r);
        let own = s.min(l);
        if own == usize::MAX {
            self.queries.iter().map(|q| q.rank).min().unwrap_or(usize::MAX)
        } else {
            own
        }
    }
}

/// The deterministic order of fused hits: score, then best branch rank, source, item id.
pub fn fused_order(a: &Fused, b: &Fused) -> Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| a.best_rank().cmp(&b.best_rank()))
        .then_with(|| a.source.cmp(&b.source))
        .then_with(|| cmp_ids(&a.item_id, &b.item_id))
}

/// Fuse ranked lists (each already in rank order) with RRF: each list adds
/// `list weight × source-branch weight / (rrf_k + rank)`. The `semantic` and `lexical` ranks
/// of a hit are those of the first list of that branch that is not an extra query's.
pub fn rrf(lists: &[RankedList], sources: &[SourceInfo], rrf_k: f64) -> Vec<Fused> {
    let mut by_item: HashMap<(usize, &str), Fused> = HashMap::new();
    for list in lists {
        let mut seen: std::collections::HashSet<(usize, &str)> = std::collections::HashSet::new();
        for (i, hit) in list.hits.iter().enumerate() {
            let rank = i + 1;
            // A list holds an item once; keep its best rank if a caller passed duplicates.
            if !seen.insert((hit.source, hit.item_id.as_str())) {
                continue;
            }
            let info = &sources[hit.source];
            let entry = by_item.entry((hit.source, hit.item_id.as_str())).or_insert_with(|| Fused {
                source: hit.source,
                item_id: hit.item_id.clone(),
                parent_scope: info.parent_scope.clone(),
                parent_id: hit.parent_id.clone(),
                score: 0.0,
                semantic: None,
                lexical: None,
                queries: Vec::new(),
                evidence: None,
                origin: None,
            });
            let (slot, weight) = match list.branch {
                Branch::Semantic => (&mut entry.semantic, info.semantic_weight),
                Branch::Lexical => (&mut entry.lexical, info.lexical_weight),
            };
            // Every list adds its share; with several lists of one branch (feedback) the item's
            // rank and raw score in that branch are the first list's.
            if slot.is_none() && !matches!(list.query, QueryTag::Extra(_)) {
                *slot = Some((rank, hit.raw));
            }
            entry.queries.push(QueryHit {
                query: list.query,
                branch: list.branch,
                space: list.space,
                rank,
                raw: hit.raw,
            });
            entry.score += list.weight * weight / (rrf_k + rank as f64);
        }
    }
    let mut out: Vec<Fused> = by_item.into_values().collect();
    out.sort_by(fused_order);
    out
}

/// Take hits in fused order, at most `max_per_parent` per parent (None: no cap), up to `k`.
pub fn cap(fused: &[Fused], max_per_parent: Option<usize>, k: usize) -> Vec<Fused> {
    let mut per_parent: HashMap<(&str, &str), usize> = HashMap::new();
    let mut out = Vec::with_capacity(k.min(fused.len()));
    for f in fused {
        if out.len() >= k {
            break;
        }
        if let Some(max) = max_per_parent {
            let n = per_parent.entry((f.parent_scope.as_str(), f.parent_id.as_str())).or_insert(0);
            if *n >= max {
                continue;
            }
            *n += 1;
        }
        out.push(f.clone());
    }
    out
}

/// Continue a ranking with the rows a wider window found: `fused` (in its order) adds each hit
/// `pages` does not hold yet, within the per-parent cap counted over the whole ranking. The rows
/// already ranked keep their places, so that every page is a slice of one ranking.
pub fn extend_pages(pages: &mut Vec<Fused>, fused: &[Fused], max_per_parent: Option<usize>) {
    let mut per_parent: HashMap<(String, String), usize> = HashMap::new();
    let mut held: std::collections::HashSet<(usize, String)> = std::collections::HashSet::new();
    for f in pages.iter() {
        *per_parent.entry((f.parent_scope.clone(), f.parent_id.clone())).or_insert(0) += 1;
        held.insert((f.source, f.item_id.clone()));
    }
    for f in fused {
        if held.contains(&(f.source, f.item_id.clone())) {
            continue;
        }
        let n = per_parent.entry((f.parent_scope.clone(), f.parent_id.clone())).or_insert(0);
        if max_per_parent.is_some_and(|max| *n >= max) {
            continue;
        }
        *n += 1;
        held.insert((f.source, f.item_id.clone()));
        pages.push(f.clone());
    }
}

/// After a round: widen the candidate window when fewer than `k` rows came out while some
/// source filled its window (it may hold more eligible items beyond it).
pub fn needs_wider_window(rows: usize, k: usize, saturated: bool) -> bool {
    rows < k && saturated
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hit(source: usize, id: &str, parent: &str, raw: f64) -> Hit {
        Hit { source, item_id: id.into(), parent_id: parent.into(), raw }
    }

    fn list(branch: Branch, hits: Vec<Hit>) -> RankedList {
        RankedList { branch, hits, query: QueryTag::Original, weight: 1.0, space: 0 }
    }

    fn sources(n: usize) -> Vec<SourceInfo> {
        (0..n).map(|_| SourceInfo { parent_scope: "rel:1".into(), semantic_weight: 1.0, lexical_weight: 1.0 }).collect()
    }

    #[test]
    fn rrf_formula() {
        let lists = vec![
            list(Branch::Semantic, vec![hit(0, "a", "1", 0.1), hit(0, "b", "1", 0.2)]),
            list(Branch::Lexical, vec![hit(0, "b", "1", 9.0), hit(0, "c", "2", 1.0)]),
        ];
        let f = rrf(&lists, &sources(1), 60.0);
        assert_eq!(f[0].item_id, "b");
        assert!((f[0].score - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-15);
        assert_eq!(f[0].semantic, Some((2, 0.2)));
        assert_eq!(f[0].lexical, Some((1, 9.0)));
        // a and c tie on 1/61 and 1/62; a has the better rank
        assert_eq!(f[1].item_id, "a");
        assert_eq!(f[2].item_id, "c");
    }

    #[test]
    fn sources_are_merged_per_branch() {
        // the halacha at distance 0 is the corpus' nearest item, whatever its source
        let sem = merge_branch(
            Branch::Semantic,
            vec![vec![hit(0, "c1", "1", 0.3), hit(0, "c2", "1", 0.4)], vec![hit(1, "h1", "2", 0.0)]],
        );
        assert!(may_hold_more(2, 2, false), "a source filled its window of 2");
        let ids: Vec<_> = sem.hits.iter().map(|h| (h.source, h.item_id.as_str())).collect();
        assert_eq!(ids, vec![(1, "h1"), (0, "c1"), (0, "c2")]);
        let f = rrf(&[sem], &sources(2), 60.0);
        assert_eq!((f[0].item_id.as_str(), f[0].semantic), ("h1", Some((1, 0.0))));
        assert!(!may_hold_more(1, 2, false), "one row of a window of 2: nothing more");
        assert!(may_hold_more(1, 2, true), "a pruned subplan that came back short");
    }

    #[test]
    fn ties_break_on_best_rank_then_source_then_id() {
        let sem = merge_branch(Branch::Semantic, vec![vec![hit(0, "y", "2", 0.1)], vec![hit(1, "x", "1", 0.1)]]);
        assert_eq!((sem.hits[0].source, sem.hits[0].item_id.as_str()), (0, "y"));
    }

    #[test]
    fn every_list_of_a_branch_adds_its_share() {
        // feedback fuses two lexical lists: both count, the first one's rank is reported
        let lists = vec![
            list(Branch::Lexical, vec![hit(0, "a", "1", 5.0), hit(0, "b", "1", 4.0), hit(0, "a", "1", 1.0)]),
            list(Branch::Lexical, vec![hit(0, "b", "1", 7.0)]),
        ];
        let f = rrf(&lists, &sources(1), 60.0);
        assert_eq!(f[0].item_id, "b");
        assert!((f[0].score - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-15);
        assert_eq!(f[0].lexical, Some((2, 4.0)));
        assert!((f[1].score - 1.0 / 61.0).abs() < 1e-15, "a duplicate within a list counts once");
    }

    #[test]
    fn weights_scale_contributions() {
        let mut info = sources(2);
        info[0].semantic_weight = 0.5;
        let sem = list(Branch::Semantic, vec![hit(0, "a", "1", 0.1)]);
        let lex = list(Branch::Lexical, vec![hit(1, "b", "2", 3.0)]);
        let f = rrf(&[sem, lex], &info, 60.0);
        assert_eq!(f[0].item_id, "b");
        assert!((f[1].score - 0.5 / 61.0).abs() < 1e-15);
    }

    #[test]
    fn cap_skips_full_parents_and_keeps_order() {
        let lists = vec![list(
            Branch::Semantic,
            vec![hit(0, "a", "1", 0.1), hit(0, "b", "1", 0.2), hit(0, "c", "1", 0.3), hit(0, "d", "2", 0.4)],
        )];
        let f = rrf(&lists, &sources(1), 60.0);
        let ids: Vec<_> = cap(&f, Some(2), 3).into_iter().map(|x| x.item_id).collect();
        assert_eq!(ids, vec!["a", "b", "d"]);
        assert_eq!(cap(&f, None, 3).len(), 3);
    }

    #[test]
    fn integer_ids_tie_break_numerically() {
        let mut h = vec![hit(0, "10", "1", 0.5), hit(0, "2", "1", 0.5), hit(0, "b", "1", 0.5), hit(0, "a", "1", 0.5)];
        order_hits(Branch::Semantic, &mut h);
        assert_eq!(h.iter().map(|x| x.item_id.as_str()).collect::<Vec<_>>(), vec!["2", "10", "a", "b"]);
    }

    #[test]
    fn order_hits_sorts_per_branch() {
        let mut h = vec![hit(0, "b", "1", 0.3), hit(0, "a", "1", 0.3), hit(0, "c", "1", 0.1)];
        order_hits(Branch::Semantic, &mut h);
        assert_eq!(h.iter().map(|x| x.item_id.as_str()).collect::<String>(), "cab");
        order_hits(Branch::Lexical, &mut h);
        assert_eq!(h.iter().map(|x| x.item_id.as_str()).collect::<String>(), "abc");
    }

    /// Random per-source hit lists for both branches over a shared pool of items (an item's
    /// source and parent are functions of its id), merged as a search merges them.
    fn arb_lists() -> impl Strategy<Value = Vec<RankedList>> {
        let item = (0u32..60, 0.0f64..10.0);
        let one = (any::<bool>(), prop::collection::vec(item, 0..40));
        prop::collection::vec(one, 2).prop_map(|specs| {
            specs
                .into_iter()
                .enumerate()
                .filter(|(_, (present, _))| *present)
                .map(|(b, (_, items))| {
                    let branch = if b == 0 { Branch::Semantic } else { Branch::Lexical };
                    let mut seen = std::collections::HashSet::new();
                    let mut per_source = vec![Vec::new(), Vec::new()];
                    for (id, raw) in items.into_iter().filter(|(id, _)| seen.insert(*id)) {
                        let source = (id % 2) as usize;
                        per_source[source].push(hit(source, &format!("i{id}"), &format!("p{}", id % 8), raw));
                    }
                    merge_branch(branch, per_source)
                })
                .collect()
        })
    }

    proptest! {
        /// Rescaling (or shifting) one branch's raw scores leaves the fused order unchanged:
        /// only ranks are fused.
        #[test]
        fn rrf_ignores_raw_score_scale(lists in arb_lists(), which in 0usize..2, scale in 0.001f64..1000.0, shift in -5.0f64..5.0) {
            let info = sources(2);
            let before: Vec<_> = rrf(&lists, &info, 60.0).into_iter().map(|f| (f.source, f.item_id, f.score)).collect();
            let mut changed = lists.clone();
            let n = changed.len().max(1);
            for h in changed.iter_mut().skip(which % n).take(1).flat_map(|l| l.hits.iter_mut()) {
                h.raw = h.raw * scale + shift;
            }
            let after: Vec<_> = rrf(&changed, &info, 60.0).into_iter().map(|f| (f.source, f.item_id, f.score)).collect();
            prop_assert_eq!(before, after);
        }

        /// No parent above its cap; exactly min(k, eligible) rows, where eligible counts at
        /// most `max` items per parent.
        #[test]
        fn cap_respects_limits(lists in arb_lists(), max in 1usize..4, k in 1usize..30) {
            let fused = rrf(&lists, &sources(2), 60.0);
            let rows = cap(&fused, Some(max), k);
            let mut counts: HashMap<String, usize> = HashMap::new();
            for r in &rows {
                *counts.entry(r.parent_id.clone()).or_default() += 1;
            }
            prop_assert!(counts.values().all(|&c| c <= max));
            let mut per_parent: HashMap<String, usize> = HashMap::new();
            for f in &fused {
                *per_parent.entry(f.parent_id.clone()).or_default() += 1;
            }
            let eligible: usize = per_parent.values().map(|&c| c.min(max)).sum();
            prop_assert_eq!(rows.len(), k.min(eligible));
            for w in rows.windows(2) {
                prop_assert_ne!(fused_order(&w[0], &w[1]), Ordering::Greater);
            }
        }

        /// Fusion is deterministic whatever order the lists come in.
        #[test]
        fn rrf_is_order_independent(lists in arb_lists()) {
            let info = sources(2);
            let a = rrf(&lists, &info, 60.0);
            let mut rev = lists.clone();
            rev.reverse();
            let b = rrf(&rev, &info, 60.0);
            let ids = |v: &[Fused]| v.iter().map(|f| (f.source, f.item_id.clone())).collect::<Vec<_>>();
            prop_assert_eq!(ids(&a), ids(&b));
        }
    }
}
