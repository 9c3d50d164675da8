//! Retrieval metrics with trec_eval's definitions, and a paired randomisation test.
//!
//! A query's ranking is the list of retrieved ids, best first; its judgments map ids to graded
//! relevance (0 = judged not relevant). As in trec_eval, an id is relevant when its grade is
//! at least 1, gains are the grades themselves (linear), and a query without hits scores 0.

use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct QueryMetrics {
    /// P@k: relevant hits in the top k, divided by k (trec_eval P_k).
    pub precision: f64,
    /// recall@k: relevant hits in the top k over all relevant judgments (trec_eval recall_k).
    pub recall: f64,
    /// Reciprocal rank of the first relevant hit (trec_eval recip_rank).
    pub mrr: f64,
    /// nDCG@k with linear gains, log2(rank + 1) discount (trec_eval ndcg_cut_k).
    pub ndcg: f64,
    /// Number of hits the search returned.
    pub hits: usize,
    /// Number of relevant judgments of the query.
    pub relevant: usize,
}

/// Metrics of one query at cut-off `k`. Ties in the ranking are the caller's business: the
/// ranking is taken in the order given (pg_corpus rankings are already deterministic).
pub fn evaluate(ranking: &[String], judgments: &HashMap<String, i32>, k: usize) -> QueryMetrics {
    let k = k.max(1);
    let top = &ranking[..ranking.len().min(k)];
    let relevant = judgments.values().filter(|&&g| g >= 1).count();
    let grade = |id: &String| judgments.get(id).copied().unwrap_or(0);
    let rel_in_top = top.iter().filter(|id| grade(id) >= 1).count();
    let precision = rel_in_top as f64 / k as f64;
    let recall = if relevant == 0 { 0.0 } else { rel_in_top as f64 / relevant as f64 };
    let mrr = ranking.iter().position(|id| grade(id) >= 1).map_or(0.0, |i| 1.0 / (i + 1) as f64);
    let dcg: f64 = top.iter().enumerate().map(|(i, id)| grade(id).max(0) as f64 / ((i + 2) as f64).log2()).sum();
    let mut ideal: Vec<i32> = judgments.values().copied().filter(|&g| g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal.iter().take(k).enumerate().map(|(i, &g)| g as f64 / ((i + 2) as f64).log2()).sum();
    let ndcg = if idcg > 0.0 { dcg / idcg } else { 0.0 };
    QueryMetrics { precision, recall, mrr, ndcg, hits: ranking.len(), relevant }
}

/// The ranking of a search's hits that judgments are matched against: for item-level
/// judgments a hit (source, item id, parent id) matches "source:item_id" or, failing that,
/// "item_id"; for parent-level ones its parent id (the first hit of a parent counts, later ones
/// are duplicates of it).
pub fn ranking<'a>(
    parent_level: bool,
    judgments: Option<&HashMap<String, i32>>,
    hits: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (source, item_id, parent_id) in hits {
        let key = if parent_level {
            parent_id.to_string()
        } else {
            let qualified = format!("{source}:{item_id}");
            if judgments.is_some_and(|j| j.contains_key(&qualified)) {
                qualified
            } else {
                item_id.to_string()
            }
        };
        if seen.insert(key.clone()) {
            out.push(key);
        }
    }
    out
}

/// Mean of each metric over queries.
pub fn mean(per_query: &[QueryMetrics]) -> QueryMetrics {
    let n = per_query.len().max(1) as f64;
    let sum = |f: fn(&QueryMetrics) -> f64| per_query.iter().map(f).sum::<f64>() / n;
    QueryMetrics {
        precision: sum(|m| m.precision),
        recall: sum(|m| m.recall),
        mrr: sum(|m| m.mrr),
        ndcg: sum(|m| m.ndcg),
        hits: per_query.iter().map(|m| m.hits).sum(),
        relevant: per_query.iter().map(|m| m.relevant).sum(),
    }
}

/// Outcome of comparing run B against run A on paired per-query values.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Comparison {
    pub queries: usize,
    pub mean_a: f64,
    pub mean_b: f64,
    pub wins: usize,
    pub losses: usize,
    pub ties: usize,
    /// Two-sided p-value of the paired randomisation (sign-flip) test on the mean difference.
    pub p_value: f64,
}

/// A small deterministic PRNG (SplitMix64): the test must give the same p-value every time.
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Paired comparison with Fisher's randomisation test (Smucker, Allan & Carterette 2007): under
/// the null hypothesis the sign of each per-query difference is arbitrary; the p-value is the
/// share of `trials` random sign assignments whose |mean difference| reaches the observed one.
pub fn compare(a: &[f64], b: &[f64], trials: usize, seed: u64) -> Comparison {
    assert_eq!(a.len(), b.len(), "paired values");
    let n = a.len();
    let diffs: Vec<f64> = a.iter().zip(b).map(|(x, y)| y - x).collect();
    let eps = 1e-12;
    let wins = diffs.iter().filter(|d| **d > eps).count();
    let losses = diffs.iter().filter(|d| **d < -eps).count();
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let observed = mean(&diffs).abs();
    let p_value = if n == 0 || wins + losses == 0 {
        1.0
    } else {
        let mut rng = SplitMix64(seed);
        let mut at_least = 0usize;
        for _ in 0..trials {
            let mut s = 0.0;
            let mut bits = 0u64;
            for (i, d) in diffs.iter().enumerate() {
                if i % 64 == 0 {
                    bits = rng.next();
                }
                s += if bits & (1 << (i % 64)) != 0 { *d } else { -*d };
            }
            if (s / n as f64).abs() >= observed - eps {
                at_least += 1;
            }
        }
        // Add-one smoothing: the observed assignment is one of the possible ones.
        (at_least + 1) as f64 / (trials + 1) as f64
    };
    Comparison { queries: n, mean_a: mean(a), mean_b: mean(b), wins, losses, ties: n - wins - losses, p_value }
}

/// One of the per-query metrics, by the name `corpus_compare_queries` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Precision,
    Recall,
    Mrr,
    Ndcg,
}

impl Metric {
    pub fn parse(name: Option<&str>) -> crate::error::Result<Metric> {
        Ok(match name {
            Some("precision") => Metric::Precision,
            Some("recall") => Metric::Recall,
            Some("mrr") => Metric::Mrr,
            Some("ndcg") => Metric::Ndcg,
            other => {
                return Err(crate::error::CoreError::new(
                    crate::error::SqlState::InvalidParameterValue,
                    format!("unknown metric \"{}\"", other.unwrap_or("")),
                    "metric is precision, recall, mrr or ndcg.",
                ))
            }
        })
    }

    /// The column of `corpus.eval_query_results` that holds it.
    pub fn column(self) -> &'static str {
        match self {
            Metric::Precision => "precision_at_k",
            Metric::Recall => "recall_at_k",
            Metric::Mrr => "mrr",
            Metric::Ndcg => "ndcg_at_k",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn qrels(v: &[(&str, i32)]) -> HashMap<String, i32> {
        v.iter().map(|(k, g)| (k.to_string(), *g)).collect()
    }

    #[test]
    fn textbook_example() {
        // relevant: a (grade 3), c (grade 1), z (grade 2, not retrieved)
        let m = evaluate(&ids(&["a", "b", "c"]), &qrels(&[("a", 3), ("c", 1), ("z", 2), ("b", 0)]), 3);
        assert!((m.precision - 2.0 / 3.0).abs() < 1e-12);
        assert!((m.recall - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(m.mrr, 1.0);
        let dcg = 3.0 / 2f64.log2() + 1.0 / 4f64.log2();
        let idcg = 3.0 / 2f64.log2() + 2.0 / 3f64.log2() + 1.0 / 4f64.log2();
        assert!((m.ndcg - dcg / idcg).abs() < 1e-12);
    }

    #[test]
    fn edge_cases() {
        // no hits: all zero
        let m = evaluate(&[], &qrels(&[("a", 1)]), 10);
        assert_eq!((m.precision, m.recall, m.mrr, m.ndcg), (0.0, 0.0, 0.0, 0.0));
        // no relevant judgments: zero, never NaN
        let m = evaluate(&ids(&["a"]), &qrels(&[("a", 0)]), 10);
        assert_eq!((m.precision, m.recall, m.mrr, m.ndcg), (0.0, 0.0, 0.0, 0.0));
        // fewer hits than k: precision still divides by k
        let m = evaluate(&ids(&["a"]), &qrels(&[("a", 1)]), 10);
        assert!((m.precision - 0.1).abs() < 1e-12);
        assert_eq!(m.ndcg, 1.0);
        // MRR looks past the cut-off like trec_eval's recip_rank on the whole ranking
        let m = evaluate(&ids(&["x", "y", "a"]), &qrels(&[("a", 1)]), 2);
        assert!((m.mrr - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(m.recall, 0.0);
    }

    #[test]
    fn randomisation_test() {
        let a = vec![0.1, 0.2, 0.3, 0.4, 0.5, 0.2, 0.3, 0.1, 0.2, 0.4];
        let better: Vec<f64> = a.iter().map(|x| x + 0.3).collect();
        let c = compare(&a, &better, 10_000, 42);
        assert_eq!((c.wins, c.losses, c.ties), (10, 0, 0));
        assert!(c.p_value < 0.01, "{c:?}");
        let same = compare(&a, &a, 10_000, 42);
        assert_eq!(same.p_value, 1.0);
        let noisy: Vec<f64> = a.iter().enumerate().map(|(i, x)| if i % 2 == 0 { x + 0.05 } else { x - 0.05 }).collect();
        assert!(compare(&a, &noisy, 10_000, 42).p_value > 0.5);
        // deterministic
        assert_eq!(compare(&a, &noisy, 1000, 7), compare(&a, &noisy, 1000, 7));
    }
}
