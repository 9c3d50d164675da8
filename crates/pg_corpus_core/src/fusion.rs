//! Reciprocal Rank Fusion and the per-parent cap.
//!
//! `score(item) = Σ_lists weight_list / (rrf_k + rank_list(item))`, ranks 1-based. Only ranks
//! enter the score: raw scores from different retrievers are never added (PRODUCT.md
//! invariant 3), so rescaling one branch's raw scores cannot change the fused order.

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::plan::Branch;

/// One hit of one branch of one source, as the subplan returned it.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub item_id: String,
    pub parent_id: String,
    /// Distance (semantic, smaller is better) or score (lexical, larger is better).
    pub raw: f64,
}

/// One ranked input of the fusion: a (source, branch) list.
#[derive(Debug, Clone)]
pub struct RankedList {
    pub source: usize,
    /// Sources that share a parent table share the cap: this names the parent scope.
    pub parent_scope: String,
    pub branch: Branch,
    pub weight: f64,
    pub hits: Vec<Hit>,
}

/// Put a branch's hits in rank order: nearest first for semantic, best first for lexical,
/// item id breaking ties, so the ranks do not depend on the order rows arrived in.
pub fn order_hits(branch: Branch, hits: &mut [Hit]) {
    hits.sort_by(|a, b| {
        let primary = match branch {
            Branch::Semantic => a.raw.total_cmp(&b.raw),
            Branch::Lexical => b.raw.total_cmp(&a.raw),
        };
        primary.then_with(|| a.item_id.cmp(&b.item_id))
    });
}

#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    pub source: usize,
    pub item_id: String,
    pub parent_scope: String,
    pub parent_id: String,
    pub score: f64,
    /// (rank, distance) in the source's semantic list.
    pub semantic: Option<(usize, f64)>,
    /// (rank, score) in the source's lexical list.
    pub lexical: Option<(usize, f64)>,
}

impl Fused {
    fn best_rank(&self) -> usize {
        let s = self.semantic.map_or(usize::MAX, |(r, _)| r);
        let l = self.lexical.map_or(usize::MAX, |(r, _)| r);
        s.min(l)
    }
}

/// The deterministic order of fused hits: score, then best branch rank, source, item id.
pub fn fused_order(a: &Fused, b: &Fused) -> Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| a.best_rank().cmp(&b.best_rank()))
        .then_with(|| a.source.cmp(&b.source))
        .then_with(|| a.item_id.cmp(&b.item_id))
}

/// Fuse ranked lists (each already in rank order) with RRF.
pub fn rrf(lists: &[RankedList], rrf_k: f64) -> Vec<Fused> {
    let mut by_item: HashMap<(usize, &str), Fused> = HashMap::new();
    for list in lists {
        for (i, hit) in list.hits.iter().enumerate() {
            let rank = i + 1;
            let entry = by_item
                .entry((list.source, hit.item_id.as_str()))
                .or_insert_with(|| Fused {
                    source: list.source,
                    item_id: hit.item_id.clone(),
                    parent_scope: list.parent_scope.clone(),
                    parent_id: hit.parent_id.clone(),
                    score: 0.0,
                    semantic: None,
                    lexical: None,
                });
            let slot = match list.branch {
                Branch::Semantic => &mut entry.semantic,
                Branch::Lexical => &mut entry.lexical,
            };
            // A list holds an item once; keep its best rank if a caller passed duplicates.
            if slot.is_none() {
                *slot = Some((rank, hit.raw));
                entry.score += list.weight / (rrf_k + rank as f64);
            }
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
            let n = per_parent
                .entry((f.parent_scope.as_str(), f.parent_id.as_str()))
                .or_insert(0);
            if *n >= max {
                continue;
            }
            *n += 1;
        }
        out.push(f.clone());
    }
    out
}

/// After a round: widen the candidate window when fewer than `k` rows came out while some list
/// was full (it may hold more eligible items beyond the window).
pub fn needs_wider_window(rows: usize, k: usize, lists: &[RankedList], window: usize) -> bool {
    rows < k && lists.iter().any(|l| l.hits.len() >= window)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hit(id: &str, parent: &str, raw: f64) -> Hit {
        Hit {
            item_id: id.into(),
            parent_id: parent.into(),
            raw,
        }
    }

    fn list(branch: Branch, hits: Vec<Hit>) -> RankedList {
        RankedList {
            source: 0,
            parent_scope: "rel:1".into(),
            branch,
            weight: 1.0,
            hits,
        }
    }

    #[test]
    fn rrf_formula() {
        let lists = vec![
            list(
                Branch::Semantic,
                vec![hit("a", "1", 0.1), hit("b", "1", 0.2)],
            ),
            list(
                Branch::Lexical,
                vec![hit("b", "1", 9.0), hit("c", "2", 1.0)],
            ),
        ];
        let f = rrf(&lists, 60.0);
        assert_eq!(f[0].item_id, "b");
        assert!((f[0].score - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-15);
        assert_eq!(f[0].semantic, Some((2, 0.2)));
        assert_eq!(f[0].lexical, Some((1, 9.0)));
        // a and c tie on 1/61; a has semantic rank 1, c lexical rank 2 → a first
        assert_eq!(f[1].item_id, "a");
        assert_eq!(f[2].item_id, "c");
    }

    #[test]
    fn ties_break_on_best_rank_then_source_then_id() {
        let mut l1 = list(Branch::Semantic, vec![hit("x", "1", 0.1)]);
        l1.source = 1;
        let l0 = list(Branch::Semantic, vec![hit("y", "2", 0.1)]);
        let f = rrf(&[l1, l0], 60.0);
        assert_eq!((f[0].source, f[0].item_id.as_str()), (0, "y"));
    }

    #[test]
    fn weights_scale_contributions() {
        let mut sem = list(Branch::Semantic, vec![hit("a", "1", 0.1)]);
        sem.weight = 0.5;
        let lex = list(Branch::Lexical, vec![hit("b", "2", 3.0)]);
        let f = rrf(&[sem, lex], 60.0);
        assert_eq!(f[0].item_id, "b");
        assert!((f[1].score - 0.5 / 61.0).abs() < 1e-15);
    }

    #[test]
    fn cap_skips_full_parents_and_keeps_order() {
        let lists = vec![list(
            Branch::Semantic,
            vec![
                hit("a", "1", 0.1),
                hit("b", "1", 0.2),
                hit("c", "1", 0.3),
                hit("d", "2", 0.4),
            ],
        )];
        let f = rrf(&lists, 60.0);
        let ids: Vec<_> = cap(&f, Some(2), 3).into_iter().map(|x| x.item_id).collect();
        assert_eq!(ids, vec!["a", "b", "d"]);
        assert_eq!(cap(&f, None, 3).len(), 3);
    }

    #[test]
    fn order_hits_sorts_per_branch() {
        let mut h = vec![hit("b", "1", 0.3), hit("a", "1", 0.3), hit("c", "1", 0.1)];
        order_hits(Branch::Semantic, &mut h);
        assert_eq!(
            h.iter().map(|x| x.item_id.as_str()).collect::<String>(),
            "cab"
        );
        order_hits(Branch::Lexical, &mut h);
        assert_eq!(
            h.iter().map(|x| x.item_id.as_str()).collect::<String>(),
            "abc"
        );
    }

    /// Random ranked lists over a shared pool of items with random parents: at most one list
    /// per (source, branch), as a search produces.
    fn arb_lists() -> impl Strategy<Value = Vec<RankedList>> {
        let item = (0u32..60, 0.0f64..10.0);
        let one = (any::<bool>(), prop::collection::vec(item, 0..40));
        prop::collection::vec(one, 4).prop_map(|specs| {
            specs
                .into_iter()
                .enumerate()
                .filter(|(_, (present, _))| *present)
                .map(|(combo, (_, items))| {
                    let branch = if combo % 2 == 0 {
                        Branch::Semantic
                    } else {
                        Branch::Lexical
                    };
                    let mut seen = std::collections::HashSet::new();
                    let mut hits: Vec<Hit> = items
                        .into_iter()
                        .filter(|(id, _)| seen.insert(*id))
                        // the parent is a function of the item: an item has one parent
                        .map(|(id, raw)| hit(&format!("i{id}"), &format!("p{}", id % 8), raw))
                        .collect();
                    order_hits(branch, &mut hits);
                    RankedList {
                        source: combo / 2,
                        parent_scope: "rel:1".into(),
                        branch,
                        weight: 1.0,
                        hits,
                    }
                })
                .collect()
        })
    }

    proptest! {
        /// Rescaling (or any monotone transform of) one branch's raw scores leaves the fused
        /// order unchanged: only ranks are fused.
        #[test]
        fn rrf_ignores_raw_score_scale(lists in arb_lists(), which in 0usize..5, scale in 0.001f64..1000.0, shift in -5.0f64..5.0) {
            let before: Vec<_> = rrf(&lists, 60.0).into_iter().map(|f| (f.source, f.item_id, f.score)).collect();
            let mut changed = lists.clone();
            let n = changed.len().max(1);
            for h in changed.iter_mut().skip(which % n).take(1).flat_map(|l| l.hits.iter_mut()) {
                h.raw = h.raw * scale + shift;
            }
            let after: Vec<_> = rrf(&changed, 60.0).into_iter().map(|f| (f.source, f.item_id, f.score)).collect();
            prop_assert_eq!(before, after);
        }

        /// No parent above its cap; exactly min(k, eligible) rows, where eligible counts at
        /// most `max` items per parent.
        #[test]
        fn cap_respects_limits(lists in arb_lists(), max in 1usize..4, k in 1usize..30) {
            let fused = rrf(&lists, 60.0);
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
            // the kept rows are in fused order
            for w in rows.windows(2) {
                prop_assert_ne!(fused_order(&w[0], &w[1]), Ordering::Greater);
            }
        }

        /// Fusion is deterministic whatever order the lists come in.
        #[test]
        fn rrf_is_order_independent(lists in arb_lists()) {
            let a = rrf(&lists, 60.0);
            let mut rev = lists.clone();
            rev.reverse();
            let b = rrf(&rev, 60.0);
            let ids = |v: &[Fused]| v.iter().map(|f| (f.source, f.item_id.clone())).collect::<Vec<_>>();
            prop_assert_eq!(ids(&a), ids(&b));
        }
    }
}
