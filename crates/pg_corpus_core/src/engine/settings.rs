//! The configuration settings a subplan runs with, and applying them once per statement.
//!
//! Every approximate subplan needs pgvector's scan settings and the planner kept on the index;
//! every BM25 subplan a low random_page_cost. [`Applied`] turns the settings each subplan wants
//! into the changes to make from what the previous subplan left, so that a search sets each
//! value once per statement (inside one GUC nest level the executor opens and restores) instead
//! of setting and restoring five settings around every subplan.

use crate::plan::Subplan;

use crate::model::{Branch, Strategy};

/// One configuration setting (a GUC name and its value as text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub name: &'static str,
    pub value: String,
}

fn set(name: &'static str, value: impl ToString) -> Setting {
    Setting { name, value: value.to_string() }
}

/// hnsw.max_scan_tuples of an iterative scan never goes below this (pgvector's default): a
/// smaller budget ends scans of a non-selective slice before they fill the window.
pub const ANN_MIN_SCAN_TUPLES: i64 = 20_000;

/// The scan budget of an approximate subplan: the window over the slice's selectivity, four
/// times over, between [`ANN_MIN_SCAN_TUPLES`] and `max` (`pg_corpus.ann_max_scan_tuples`; a
/// setting below the minimum wins, since it is the operator's bound on the work).
pub fn ann_scan_budget(window: usize, selectivity: f64, max: i32) -> i64 {
    let max = i64::from(max.max(1));
    let selectivity = if selectivity.is_finite() && selectivity > 0.0 { selectivity.min(1.0) } else { 1.0 };
    let wanted = ((window as f64) / selectivity * 4.0).ceil();
    let wanted = if wanted.is_finite() && wanted < i64::MAX as f64 { wanted as i64 } else { i64::MAX };
    wanted.max(ANN_MIN_SCAN_TUPLES).min(max)
}

/// pgvector settings for an approximate subplan: enough ef_search for the window, an iterative
/// scan, and a scan budget that lets a selective predicate still fill the window.
pub fn ann(window: usize, selectivity: f64, max_scan_tuples: i32) -> Vec<Setting> {
    vec![
        set("hnsw.ef_search", window.clamp(40, 1000)),
        set("hnsw.iterative_scan", "relaxed_order"),
        set("hnsw.max_scan_tuples", ann_scan_budget(window, selectivity, max_scan_tuples)),
        // Memory is the iterative scan's other stop condition; let it follow the budget.
        set("hnsw.scan_mem_multiplier", 4),
        // pgvector costs its distance function like any cheap operator, so for a selective
        // predicate the planner prefers sorting the slice (detoasting every vector) to the
        // index: 62 ms against 36 ms at a 5% slice of 100k × 1024-d (docs/filtered-ann.md).
        set("enable_sort", "off"),
    ]
}

/// Planner settings for a BM25 lexical subplan. It reads at most about a candidate budget of
/// items through indexes, yet at the default random_page_cost (4) the planner joins their
/// parents by hashing every parent of the corpus (3 ms at 8,000 parents) instead of looking
/// the candidates' parents up by key: 13.5 → 8.8 ms p50 (docs/lexical-speed.md). A session's
/// lower setting is kept.
pub fn lexical(random_page_cost: f64, index_first: bool, through_bm25_index: bool) -> Vec<Setting> {
    let rpc = if random_page_cost.is_finite() { random_page_cost.min(1.1) } else { 1.1 };
    let mut out = vec![set("random_page_cost", rpc)];
    if index_first {
        // lexical::ScopeCheck::JoinedAfterIndex: no parameterised path through the parents
        out.push(set("enable_nestloop", "off"));
    }
    if through_bm25_index {
        // The ranking comes from the corpus_bm25 index's order. The planner's estimate of the
        // slice multiplies the searchable contract's default selectivities (1/3 per
        // expression), so for a slice it believes small it scored every row of the slice and
        // sorted them instead: 32.6 ms against 8.5 ms for the index at 7,542 rows of
        // halachot (bench/scale.py, 100k, hybrid mode).
        out.push(set("enable_sort", "off"));
    }
    out
}

/// The settings `p` runs with: `selectivity` is its source's slice selectivity, `bm25` whether
/// the lexical branch scores with BM25.
pub fn for_subplan(p: &Subplan, window: usize, selectivity: f64, bm25: bool, config: &super::Config) -> Vec<Setting> {
    match (p.strategy, p.branch) {
        (Strategy::Approximate, _) => ann(window, selectivity, config.ann_max_scan_tuples),
        (_, Branch::Lexical) if bm25 => {
            lexical(config.random_page_cost, p.index_first, p.strategy == Strategy::Bm25Index)
        }
        _ => Vec::new(),
    }
}

/// What the executor has applied so far in this statement: each setting changed, with the value
/// it had before (to put back when a later subplan does not want it).
#[derive(Debug, Default, Clone)]
pub struct Applied {
    changed: Vec<(&'static str, String, String)>, // (name, original, current)
}

impl Applied {
    /// The changes that make `wanted` hold and put every other setting changed earlier back to
    /// its original value. `original` reads a setting's value before it is first changed.
    pub fn transition(&mut self, wanted: &[Setting], mut original: impl FnMut(&str) -> Option<String>) -> Vec<Setting> {
        let mut out = Vec::new();
        for (name, orig, current) in self.changed.iter_mut() {
            if !wanted.iter().any(|w| w.name == *name) && current != orig {
                *current = orig.clone();
                out.push(Setting { name, value: orig.clone() });
            }
        }
        for w in wanted {
            match self.changed.iter_mut().find(|(n, _, _)| *n == w.name) {
                Some((_, _, current)) => {
                    if *current != w.value {
                        *current = w.value.clone();
                        out.push(w.clone());
                    }
                }
                None => {
                    let Some(orig) = original(w.name) else {
                        // unknown setting (pgvector not loaded yet): set it and never restore
                        // by hand; the executor's nest level restores it at the end
                        out.push(w.clone());
                        continue;
                    };
                    if orig != w.value {
                        out.push(w.clone());
                    }
                    self.changed.push((w.name, orig, w.value.clone()));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(name: &'static str, v: &str) -> Setting {
        Setting { name, value: v.into() }
    }

    #[test]
    fn a_ranking_through_the_bm25_index_keeps_the_index_order_and_other_bm25_plans_may_sort() {
        let sub = |strategy, index_first| Subplan {
            source: 0,
            branch: Branch::Lexical,
            strategy,
            sql: String::new(),
            params: Vec::new(),
            limit: 40,
            pruned: false,
            index_first,
            generic: false,
        };
        let config = super::super::Config::default();
        let sorts = |p: &Subplan| {
            let all = for_subplan(p, 40, 0.5, true, &config);
            assert!(all.iter().any(|x| x.name == "random_page_cost" && x.value == "1.1"), "{all:?}");
            all.iter().any(|x| x.name == "enable_sort" && x.value == "off")
        };
        assert!(sorts(&sub(crate::model::Strategy::Bm25Index, false)));
        assert!(!sorts(&sub(crate::model::Strategy::TextMatch, false)));
        assert!(!sorts(&sub(crate::model::Strategy::TextMatch, true)));
        // (without BM25 scoring a lexical subplan gets no settings)
        assert!(for_subplan(&sub(crate::model::Strategy::Bm25Index, false), 40, 0.5, false, &config).is_empty());
    }

    #[test]
    fn transition_sets_once_and_restores_what_is_no_longer_wanted() {
        let mut a = Applied::default();
        let orig = |n: &str| Some(if n == "enable_sort" { "on".into() } else { "4".into() });
        let ann = vec![s("enable_sort", "off"), s("random_page_cost", "4")];
        // random_page_cost already 4: nothing to do for it
        assert_eq!(a.transition(&ann, orig), vec![s("enable_sort", "off")]);
        assert_eq!(a.transition(&ann, orig), vec![], "same settings again: no change");
        let lex = vec![s("random_page_cost", "1.1")];
        assert_eq!(a.transition(&lex, orig), vec![s("enable_sort", "on"), s("random_page_cost", "1.1")]);
        assert_eq!(a.transition(&[], orig), vec![s("random_page_cost", "4")]);
        assert_eq!(a.transition(&[], orig), vec![]);
    }

    proptest! {
        /// Whatever the sequence of wanted settings, after each transition every wanted setting
        /// has its value and every other one its original value.
        #[test]
        fn transitions_reach_the_wanted_state(seq in prop::collection::vec(
            prop::collection::vec((0usize..4, 0u8..3), 0..4), 1..12)) {
            let names = ["a", "b", "c", "d"];
            let originals = ["0", "0", "1", "2"];
            let mut state: std::collections::HashMap<&str, String> =
                names.iter().zip(originals).map(|(n, o)| (*n, o.to_string())).collect();
            let mut applied = Applied::default();
            for step in seq {
                let mut wanted: Vec<Setting> = Vec::new();
                for (i, v) in step {
                    if !wanted.iter().any(|w| w.name == names[i]) {
                        wanted.push(Setting { name: names[i], value: v.to_string() });
                    }
                }
                let snapshot = state.clone();
                for ch in applied.transition(&wanted, |n| snapshot.get(n).cloned()) {
                    state.insert(ch.name, ch.value);
                }
                for (n, o) in names.iter().zip(originals) {
                    let want = wanted.iter().find(|w| w.name == *n).map_or(o.to_string(), |w| w.value.clone());
                    prop_assert_eq!(&state[n], &want);
                }
            }
        }

        /// The whole documented range of pg_corpus.ann_max_scan_tuples (1000 to i32::MAX), any
        /// window and selectivity: a budget within [1, max], never a panic.
        #[test]
        fn scan_budget_is_bounded(window in 1usize..2_000_000, sel in prop::num::f64::ANY, max in 1000i32..=i32::MAX) {
            let b = ann_scan_budget(window, sel, max);
            prop_assert!(b >= 1 && b <= i64::from(max));
            prop_assert!(b >= ANN_MIN_SCAN_TUPLES.min(i64::from(max)));
            let settings = ann(window, sel, max);
            prop_assert_eq!(settings.len(), 5);
        }
    }

    #[test]
    fn scan_budget_follows_selectivity_up_to_the_bound() {
        assert_eq!(ann_scan_budget(40, 1.0, 1_000_000), ANN_MIN_SCAN_TUPLES);
        assert_eq!(ann_scan_budget(40, 0.001, 1_000_000), 160_000);
        assert_eq!(ann_scan_budget(40, 1e-6, 1_000_000), 1_000_000);
        // a bound below the minimum wins (it used to panic: clamp with min > max)
        assert_eq!(ann_scan_budget(40, 0.5, 1_000), 1_000);
    }
}
