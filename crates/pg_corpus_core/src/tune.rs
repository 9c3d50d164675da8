//! Tuning a corpus' fusion settings on its gold set.
//!
//! Each gold query's branch lists are captured once with a wide window ([`Capture`]); a
//! fusion setting (rrf_k, the candidate window, each source's branch weights) is then scored
//! by replaying the search's own fusion on them ([`Problem::score`]: the lists cut to the
//! setting's window per source, [`fusion::rrf`], [`fusion::cap`], the window widened ×4 while
//! too few rows survive the cap, as the search does). A coordinate ascent over a fixed grid
//! ([`ascend`]) finds the best setting of a set of queries; [`cross_validate`] does it once per
//! fold on the other folds' queries only (folds by query, a seeded shuffle), so that each
//! query is scored by a setting chosen without it.

use std::collections::HashMap;

use crate::fusion::{self, RankedList, SourceInfo};
use crate::metrics::{self, SplitMix64};
use crate::ranking::{FeedbackParams, WINDOW_PER_K};

/// One fusion setting.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Setting {
    pub rrf_k: i32,
    /// The smallest window; a search uses max(window, 4k).
    pub window: i32,
    /// (semantic, lexical) weight of each source, in definition order.
    pub weights: Vec<(f64, f64)>,
}

/// The values [`ascend`] tries for each parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    pub rrf_k: Vec<i32>,
    pub window: Vec<i32>,
    pub weight: Vec<f64>,
}

impl Grid {
    /// The default grid for searches of `k` rows with lists captured `capture` deep: windows
    /// above the capture cannot be replayed and are left out.
    pub fn standard(k: usize, capture: usize) -> Grid {
        let floor = (WINDOW_PER_K * k) as i32;
        let mut window: Vec<i32> = [20, 40, 60, 80, 100, 150, 200, 300, 400]
            .into_iter()
            .map(|w: i32| w.max(floor))
            .filter(|&w| w as usize <= capture.max(1))
            .collect();
        window.dedup();
        Grid {
            rrf_k: vec![1, 5, 10, 20, 30, 40, 60, 80, 100, 150, 200],
            window,
            weight: vec![0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0],
        }
    }
}

/// One gold query's unfused branch lists (the original query's, corpus-wide, in rank order)
/// and its judgments.
#[derive(Debug, Clone)]
pub struct Capture {
    pub lists: Vec<RankedList>,
    pub judgments: HashMap<String, i32>,
}

/// What scoring a setting needs besides the captures.
#[derive(Debug, Clone)]
pub struct Problem {
    pub captures: Vec<Capture>,
    /// Per source, in definition order: its name and the parent scope its cap counts under.
    pub sources: Vec<(String, String)>,
    pub k: usize,
    pub max_per_parent: Option<usize>,
    /// Judgments name parents (else items).
    pub parent_level: bool,
    /// The window the lists were captured with (items per source and branch).
    pub capture: usize,
}

/// The hits of `list` that rank within the first `window` of their own source.
fn cut(list: &RankedList, window: usize, sources: usize) -> (RankedList, bool) {
    let mut seen = vec![0usize; sources];
    let mut filled = false;
    let hits = list
        .hits
        .iter()
        .filter(|h| {
            let n = &mut seen[h.source];
            *n += 1;
            if *n == window {
                filled = true;
            }
            *n <= window
        })
        .cloned()
        .collect();
    (RankedList { hits, ..list.clone() }, filled)
}

impl Problem {
    /// nDCG@k of query `q` under `s`, as the search would rank it from the captured lists.
    pub fn score(&self, q: usize, s: &Setting) -> f64 {
        let c = &self.captures[q];
        let infos: Vec<SourceInfo> = self
            .sources
            .iter()
            .zip(&s.weights)
            .map(|((_, scope), &(semantic_weight, lexical_weight))| SourceInfo {
                parent_scope: scope.clone(),
                semantic_weight,
                lexical_weight,
            })
            .collect();
        let capture = self.capture.max(1);
        let mut window = (s.window.max(1) as usize).max(WINDOW_PER_K * self.k).min(capture);
        loop {
            let mut saturated = false;
            let lists: Vec<RankedList> = c
                .lists
                .iter()
                .map(|l| {
                    let (cut, filled) = cut(l, window, self.sources.len());
                    saturated |= filled;
                    cut
                })
                .collect();
            let fused = fusion::rrf(&lists, &infos, f64::from(s.rrf_k));
            let rows = fusion::cap(&fused, self.max_per_parent, self.k);
            if window >= capture || !fusion::needs_wider_window(rows.len(), self.k, saturated) {
                let hits =
                    rows.iter().map(|f| (self.sources[f.source].0.as_str(), f.item_id.as_str(), f.parent_id.as_str()));
                let ranking = metrics::ranking(self.parent_level, Some(&c.judgments), hits);
                return metrics::evaluate(&ranking, &c.judgments, self.k).ndcg;
            }
            window = window.saturating_mul(4).min(capture);
        }
    }
}

/// The mean of `score` over `queries` (0 for none).
pub fn mean_score(queries: &[usize], s: &Setting, score: &mut dyn FnMut(usize, &Setting) -> f64) -> f64 {
    if queries.is_empty() {
        return 0.0;
    }
    queries.iter().map(|&q| score(q, s)).sum::<f64>() / queries.len() as f64
}

/// A gain smaller than this is no gain (float noise of a mean).
const EPSILON: f64 = 1e-9;

/// The best setting for `queries` found by coordinate ascent from `start` over `grid`: each
/// parameter in turn (rrf_k, window, then each source's semantic and lexical weight) takes the
/// grid value with the best mean score, a change only when it gains; rounds repeat until one
/// changes nothing, at most `max_rounds`, or until `out_of_time` says so (checked between
/// trials). Returns the setting and its mean score.
pub fn ascend(
    queries: &[usize],
    start: &Setting,
    grid: &Grid,
    max_rounds: usize,
    score: &mut dyn FnMut(usize, &Setting) -> f64,
    out_of_time: &mut dyn FnMut() -> bool,
) -> (Setting, f64) {
    let mut best = start.clone();
    let mut best_score = mean_score(queries, &best, score);
    for _ in 0..max_rounds {
        let mut changed = false;
        let params = 2 + 2 * best.weights.len();
        for p in 0..params {
            let values: Vec<f64> = match p {
                0 => grid.rrf_k.iter().map(|&v| f64::from(v)).collect(),
                1 => grid.window.iter().map(|&v| f64::from(v)).collect(),
                _ => grid.weight.clone(),
            };
            for v in values {
                if out_of_time() {
                    return (best, best_score);
                }
                let mut trial = best.clone();
                match p {
                    0 => trial.rrf_k = v as i32,
                    1 => trial.window = v as i32,
                    _ => {
                        let (source, branch) = ((p - 2) / 2, (p - 2) % 2);
                        let w = &mut trial.weights[source];
                        if branch == 0 {
                            w.0 = v
                        } else {
                            w.1 = v
                        }
                    }
                }
                if trial == best {
                    continue;
                }
                let s = mean_score(queries, &trial, score);
                if s > best_score + EPSILON {
                    best = trial;
                    best_score = s;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    (best, best_score)
}

/// The fold of each of `n` queries: a seeded shuffle dealt round-robin into `folds` folds
/// (as even as they can be; the same seed gives the same folds).
pub fn folds(n: usize, folds: usize, seed: u64) -> Vec<usize> {
    let folds = folds.max(1);
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = SplitMix64(seed);
    for i in (1..n).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    let mut out = vec![0; n];
    for (pos, q) in order.into_iter().enumerate() {
        out[q] = pos % folds;
    }
    out
}

/// The setting chosen for each fold on the other folds' queries.
#[derive(Debug, Clone)]
pub struct CrossValidation {
    pub fold_of: Vec<usize>,
    pub settings: Vec<Setting>,
}

impl CrossValidation {
    /// The setting query `q` is scored with: its fold's.
    pub fn setting_of(&self, q: usize) -> &Setting {
        &self.settings[self.fold_of[q]]
    }

    /// The queries tuned on for `fold` (every query of the other folds).
    pub fn training(&self, fold: usize) -> Vec<usize> {
        (0..self.fold_of.len()).filter(|&q| self.fold_of[q] != fold).collect()
    }
}

/// Tune once per fold on the other folds' queries (`fold_of` from [`folds`]);
/// `out_of_time(fold)` bounds each fold's ascent.
pub fn cross_validate(
    fold_of: Vec<usize>,
    start: &Setting,
    grid: &Grid,
    max_rounds: usize,
    score: &mut dyn FnMut(usize, &Setting) -> f64,
    out_of_time: &mut dyn FnMut(usize) -> bool,
) -> CrossValidation {
    let n_folds = fold_of.iter().max().map_or(0, |m| m + 1);
    let mut cv = CrossValidation { fold_of, settings: Vec::with_capacity(n_folds) };
    for f in 0..n_folds {
        let train = cv.training(f);
        let (s, _) = ascend(&train, start, grid, max_rounds, score, &mut || out_of_time(f));
        cv.settings.push(s);
    }
    cv
}

/// Whether to flip feedback from `current` for the queries `train`: `base` and `flipped` are
/// each query's score without and with the flip; flip when it gains on their mean.
pub fn flip_feedback(train: &[usize], base: &[f64], flipped: &[f64]) -> bool {
    if train.is_empty() {
        return false;
    }
    let gain: f64 = train.iter().map(|&q| flipped[q] - base[q]).sum::<f64>() / train.len() as f64;
    gain > EPSILON
}

/// The index of the option with the best mean score over `train` (`scores[option][query]`);
/// the first of equal ones, so that the current option, listed first, stays unless beaten.
pub fn best_option(train: &[usize], scores: &[Vec<f64>]) -> usize {
    let mean = |s: &Vec<f64>| train.iter().map(|&q| s[q]).sum::<f64>() / train.len().max(1) as f64;
    let mut best = 0;
    for (i, s) in scores.iter().enumerate().skip(1) {
        if mean(s) > mean(&scores[best]) + EPSILON {
            best = i;
        }
    }
    best
}

/// The feedback parameters tried besides `current`: each changed alone, halved or doubled
/// within its range.
pub fn feedback_alternatives(current: FeedbackParams) -> Vec<FeedbackParams> {
    let mut out = vec![
        FeedbackParams { beta: current.beta / 2.0, ..current },
        FeedbackParams { beta: (current.beta * 2.0).min(4.0), ..current },
        FeedbackParams { alpha: (current.alpha - 0.2).max(0.0), ..current },
        FeedbackParams { alpha: (current.alpha + 0.2).min(1.0), ..current },
        FeedbackParams { terms: (current.terms / 2).max(1), ..current },
        FeedbackParams { terms: (current.terms * 2).min(100), ..current },
    ];
    out.retain(|p| *p != current);
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Branch, Hit, QueryTag};
    use std::cell::RefCell;
    use std::collections::HashSet;

    fn list(branch: Branch, ids: &[usize]) -> RankedList {
        let hits = ids
            .iter()
            .enumerate()
            .map(|(i, id)| Hit {
                source: 0,
                item_id: id.to_string(),
                parent_id: id.to_string(),
                raw: if branch == Branch::Semantic { i as f64 } else { -(i as f64) },
            })
            .collect();
        RankedList { branch, hits, query: QueryTag::Original, weight: 1.0, space: 0 }
    }

    fn problem(captures: Vec<Capture>, capture: usize) -> Problem {
        Problem {
            captures,
            sources: vec![("chunks".into(), "rel:1".into())],
            k: 10,
            max_per_parent: None,
            parent_level: false,
            capture,
        }
    }

    fn defaults() -> Setting {
        Setting { rrf_k: 60, window: 20, weights: vec![(1.0, 1.0)] }
    }

    fn judged(ids: impl IntoIterator<Item = usize>) -> HashMap<String, i32> {
        ids.into_iter().map(|i| (i.to_string(), 1)).collect()
    }

    /// A set where the lexical list is right and the semantic one is noise: the best setting
    /// leans on the lexical branch.
    fn lexical_set(n: usize, seed: u64) -> Vec<Capture> {
        let mut rng = SplitMix64(seed);
        (0..n)
            .map(|q| {
                let base = q * 1000;
                let relevant: Vec<usize> = (base..base + 5).collect();
                let mut lex: Vec<usize> = relevant.clone();
                lex.extend(base + 100..base + 300);
                let mut sem: Vec<usize> = (base + 100..base + 300).collect();
                for i in (1..sem.len()).rev() {
                    sem.swap(i, (rng.next() % (i as u64 + 1)) as usize);
                }
                // the relevant items come low in the semantic list
                sem.splice(30..30, relevant.iter().copied());
                Capture {
                    lists: vec![list(Branch::Semantic, &sem), list(Branch::Lexical, &lex)],
                    judgments: judged(relevant),
                }
            })
            .collect()
    }

    #[test]
    fn replaying_the_defaults_ranks_like_rrf_of_the_cut_lists() {
        // lexical 0..9, semantic 5..14: RRF of the top 40 of each puts 5..9 (in both) first
        let c = Capture {
            lists: vec![
                list(Branch::Semantic, &(5..200).collect::<Vec<_>>()),
                list(Branch::Lexical, &(0..200).collect::<Vec<_>>()),
            ],
            judgments: judged(5..10),
        };
        let p = problem(vec![c], 200);
        assert!((p.score(0, &defaults()) - 1.0).abs() < 1e-12, "5..9 are in both lists' top: ranked first");
        // with the lexical branch alone, 0..4 come first: 5..9 at ranks 6..10 give nDCG 0.54
        let lexical_only = Setting { weights: vec![(0.0, 1.0)], ..defaults() };
        assert!((p.score(0, &lexical_only) - 0.5406).abs() < 1e-3, "{}", p.score(0, &lexical_only));
    }

    #[test]
    fn an_item_beyond_the_window_is_not_fused() {
        // the one relevant item is 50th in both lists: a window of 40 never sees it
        let ids: Vec<usize> = (0..200).collect();
        let c =
            Capture { lists: vec![list(Branch::Semantic, &ids), list(Branch::Lexical, &ids)], judgments: judged([49]) };
        let p = problem(vec![c], 200);
        assert_eq!(p.score(0, &defaults()), 0.0);
        assert_eq!(p.score(0, &Setting { window: 60, ..defaults() }), 0.0, "still ranked 50th of all");
    }

    #[test]
    fn the_tuner_finds_a_known_best_setting() {
        let p = problem(lexical_set(40, 7), 200);
        let mut score = |q: usize, s: &Setting| p.score(q, s);
        let all: Vec<usize> = (0..40).collect();
        let base = mean_score(&all, &defaults(), &mut score);
        let grid = Grid::standard(10, 200);
        let (best, best_score) = ascend(&all, &defaults(), &grid, 4, &mut score, &mut || false);
        assert!((best_score - 1.0).abs() < 1e-12, "the lexical list alone is perfect: {best:?} {best_score}");
        assert!(base < 0.99, "the defaults are not: {base}");
        assert!(best.weights[0].1 > best.weights[0].0, "the lexical branch weighs more: {best:?}");

        // the semantic list is right: the mirror image
        let mirrored: Vec<Capture> = lexical_set(40, 7)
            .into_iter()
            .map(|mut c| {
                let (s, l) = (c.lists[0].hits.clone(), c.lists[1].hits.clone());
                c.lists[0].hits = l;
                c.lists[1].hits = s;
                c
            })
            .collect();
        let p = problem(mirrored, 200);
        let mut score = |q: usize, s: &Setting| p.score(q, s);
        let (best, _) = ascend(&all, &defaults(), &grid, 4, &mut score, &mut || false);
        assert!(best.weights[0].0 > best.weights[0].1, "{best:?}");
    }

    #[test]
    fn a_wide_window_is_found_when_relevant_items_rank_deep() {
        // 30 relevant items per query at ranks 41..70 of both lists, distinct noise ahead of them
        // in each list: a window of 40 (the default for k 10) sees none of them
        let captures: Vec<Capture> = (0..20)
            .map(|q| {
                let b = q * 1000;
                let relevant: Vec<usize> = (b..b + 30).collect();
                let mut sem: Vec<usize> = (b + 100..b + 140).collect();
                sem.extend(&relevant);
                sem.extend(b + 200..b + 300);
                let mut lex: Vec<usize> = (b + 400..b + 440).collect();
                lex.extend(&relevant);
                lex.extend(b + 500..b + 600);
                Capture {
                    lists: vec![list(Branch::Semantic, &sem), list(Branch::Lexical, &lex)],
                    judgments: judged(relevant),
                }
            })
            .collect();
        let p = problem(captures, 200);
        let mut score = |q: usize, s: &Setting| p.score(q, s);
        let all: Vec<usize> = (0..20).collect();
        assert_eq!(mean_score(&all, &defaults(), &mut score), 0.0);
        let (best, s) = ascend(&all, &defaults(), &Grid::standard(10, 200), 4, &mut score, &mut || false);
        assert!(best.window >= 60, "{best:?}");
        assert!(s > 0.99, "{s}");
    }

    #[test]
    fn folds_are_even_seeded_and_cover_every_query() {
        let f = folds(103, 5, 42);
        assert_eq!(f, folds(103, 5, 42));
        assert_ne!(f, folds(103, 5, 43));
        let mut sizes = [0usize; 5];
        for &x in &f {
            sizes[x] += 1;
        }
        assert_eq!(sizes.iter().sum::<usize>(), 103);
        assert!(sizes.iter().all(|&n| n == 20 || n == 21), "{sizes:?}");
    }

    #[test]
    fn cross_validation_never_scores_a_test_folds_query_while_tuning_it() {
        let p = problem(lexical_set(30, 3), 200);
        let fold_of = folds(30, 3, 9);
        let seen: RefCell<Vec<HashSet<usize>>> = RefCell::new(vec![HashSet::new()]);
        let mut score = |q: usize, s: &Setting| {
            seen.borrow_mut().last_mut().unwrap().insert(q);
            p.score(q, s)
        };
        // one fold at a time, recording which queries the tuning of that fold scored
        let mut settings = Vec::new();
        for f in 0..3 {
            let cv = CrossValidation { fold_of: fold_of.clone(), settings: Vec::new() };
            let train = cv.training(f);
            let (s, _) = ascend(&train, &defaults(), &Grid::standard(10, 200), 4, &mut score, &mut || false);
            settings.push(s);
            seen.borrow_mut().push(HashSet::new());
        }
        for (f, queries) in seen.borrow().iter().take(3).enumerate() {
            assert!(!queries.is_empty());
            assert!(queries.iter().all(|&q| fold_of[q] != f), "fold {f} tuned on its own queries");
        }
        // and cross_validate is that loop
        let mut plain = |q: usize, s: &Setting| p.score(q, s);
        let cv = cross_validate(fold_of.clone(), &defaults(), &Grid::standard(10, 200), 4, &mut plain, &mut |_| false);
        assert_eq!(cv.settings, settings);
        assert_eq!(cv.setting_of(0), &settings[fold_of[0]]);
    }

    #[test]
    fn the_budget_stops_the_ascent_with_the_best_so_far() {
        let p = problem(lexical_set(10, 1), 200);
        let mut score = |q: usize, s: &Setting| p.score(q, s);
        let all: Vec<usize> = (0..10).collect();
        let (s, _) = ascend(&all, &defaults(), &Grid::standard(10, 200), 4, &mut score, &mut || true);
        assert_eq!(s, defaults(), "no trial ran");
        let mut trials = 0;
        let (_, sc) = ascend(&all, &defaults(), &Grid::standard(10, 200), 4, &mut score, &mut || {
            trials += 1;
            trials > 3
        });
        assert!(sc >= mean_score(&all, &defaults(), &mut score));
    }

    #[test]
    fn feedback_flips_only_on_a_training_gain() {
        let base = [0.5, 0.5, 0.5, 0.5];
        let flipped = [0.9, 0.9, 0.1, 0.1];
        assert!(flip_feedback(&[0, 1], &base, &flipped));
        assert!(!flip_feedback(&[2, 3], &base, &flipped));
        assert!(!flip_feedback(&[0, 1, 2, 3], &base, &flipped), "no mean gain");
        assert!(!flip_feedback(&[], &base, &flipped));
    }

    #[test]
    fn the_best_option_is_the_first_of_the_best_on_the_training_queries() {
        let scores = vec![vec![0.5, 0.5, 0.5], vec![0.9, 0.1, 0.5], vec![0.5, 0.5, 0.5]];
        assert_eq!(best_option(&[0], &scores), 1);
        assert_eq!(best_option(&[1], &scores), 0, "the current option, first, stays unless beaten");
        assert_eq!(best_option(&[2], &scores), 0);
        let alts = feedback_alternatives(FeedbackParams { beta: 0.5, alpha: 0.5, terms: 20 });
        assert_eq!(alts.len(), 6);
        assert!(alts.iter().all(|p| (0.0..=4.0).contains(&p.beta) && (0.0..=1.0).contains(&p.alpha) && p.terms >= 1));
        let edge = feedback_alternatives(FeedbackParams { beta: 4.0, alpha: 1.0, terms: 100 });
        assert!(edge.iter().all(|p| p.beta <= 4.0 && p.alpha <= 1.0 && p.terms <= 100), "{edge:?}");
        assert_eq!(edge.len(), 3, "the changes the ranges allow: {edge:?}");
    }

    #[test]
    fn the_grid_keeps_windows_the_capture_can_replay() {
        let g = Grid::standard(10, 100);
        assert_eq!(g.window, vec![40, 60, 80, 100]);
        let g = Grid::standard(50, 400);
        assert_eq!(g.window, vec![200, 300, 400]);
    }
}
