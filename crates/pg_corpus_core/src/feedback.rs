//! Pseudo-relevance feedback for the hybrid search (`feedback => true`): a second round whose
//! query vector and lexical query are moved towards the best hits of the first fusion, fused
//! by RRF with the first round's lexical list. The method and its parameters come from an
//! offline study over 1,230 settings on HeQ val and Cranfield (docs/studies/prf-feedback.md, "best
//! joint"): RRF(vector PRF, BM25, RM3) with
//!
//! - vector PRF (Rocchio in embedding space): `q' = normalise(q̂ + β·mean(d̂₁..d̂ₘ))` over the
//!   first fusion's top [`VECTOR_DOCS`] items, β = [`VECTOR_BETA`];
//! - RM3: the relevance model `P(t|R) ∝ Σ_d tf(t,d)/|d|` over the first fusion's top
//!   [`RM3_DOCS`] items (equal weights: weighting them by `1/(60 + rank)` gave Cranfield 0.4092
//!   instead of 0.4107, HeQ 0.9394 instead of 0.9392), its [`RM3_TERMS`] most probable keys
//!   L1-normalised, mixed with the L1-normalised query as `α·q + (1−α)·P(t|R)`, α =
//!   [`RM3_ALPHA`]. `|d|` counts every position of the tsvector (extra keys included).

use std::collections::BTreeMap;

use crate::lexical::QueryKey;

pub const VECTOR_DOCS: usize = 3;
pub const VECTOR_BETA: f64 = crate::model::DEFAULT_FEEDBACK_BETA;
pub const RM3_DOCS: usize = 10;
pub const RM3_TERMS: usize = crate::model::DEFAULT_FEEDBACK_TERMS as usize;
pub const RM3_ALPHA: f64 = crate::model::DEFAULT_FEEDBACK_ALPHA;

fn normalised(v: &[f64]) -> Option<Vec<f64>> {
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    (norm > 0.0 && norm.is_finite()).then(|| v.iter().map(|x| x / norm).collect())
}

/// The feedback query vector: the unit query plus β times the mean of the unit document
/// vectors (documents of another dimension, or zero, are skipped), normalised. None when no
/// document can be used (the first round's vector is then kept).
pub fn vector_prf(query: &[f32], docs: &[Vec<f32>], beta: f64) -> Option<Vec<f32>> {
    let q = normalised(&query.iter().map(|&x| x as f64).collect::<Vec<_>>())?;
    let units: Vec<Vec<f64>> = docs
        .iter()
        .filter(|d| d.len() == q.len())
        .filter_map(|d| normalised(&d.iter().map(|&x| x as f64).collect::<Vec<_>>()))
        .collect();
    if units.is_empty() {
        return None;
    }
    let n = units.len() as f64;
    let moved: Vec<f64> = (0..q.len()).map(|i| q[i] + beta * units.iter().map(|u| u[i]).sum::<f64>() / n).collect();
    normalised(&moved).map(|v| v.into_iter().map(|x| x as f32).collect())
}

/// RM3: the query's keys mixed with the `n_terms` most probable keys of the feedback documents'
/// relevance model (`docs`: each document's key → term frequency). Keys
/// are returned by descending weight (key order breaking ties). With no usable document the
/// query is returned unchanged.
pub fn rm3(query: &[QueryKey], docs: &[BTreeMap<String, f64>], n_terms: usize, alpha: f64) -> Vec<QueryKey> {
    let mut model: BTreeMap<&str, f64> = BTreeMap::new();
    for doc in docs {
        let len: f64 = doc.values().filter(|tf| **tf > 0.0).sum();
        if len <= 0.0 {
            continue;
        }
        for (key, tf) in doc {
            if *tf > 0.0 {
                *model.entry(key.as_str()).or_insert(0.0) += tf / len;
            }
        }
    }
    let q_total: f64 = query.iter().map(|k| k.weight.max(0.0)).sum();
    if model.is_empty() || q_total <= 0.0 {
        return query.to_vec();
    }
    let mut best: Vec<(&str, f64)> = model.into_iter().collect();
    best.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    best.truncate(n_terms);
    let fb_total: f64 = best.iter().map(|(_, p)| p).sum();
    let mut mixed: BTreeMap<String, f64> = BTreeMap::new();
    for k in query {
        *mixed.entry(k.key.clone()).or_insert(0.0) += alpha * k.weight.max(0.0) / q_total;
    }
    for (key, p) in best {
        *mixed.entry(key.to_string()).or_insert(0.0) += (1.0 - alpha) * p / fb_total;
    }
    let mut out: Vec<QueryKey> =
        mixed.into_iter().filter(|(_, w)| *w > 0.0).map(|(key, weight)| QueryKey { key, weight }).collect();
    out.sort_by(|a, b| b.weight.total_cmp(&a.weight).then_with(|| a.key.cmp(&b.key)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn vector_prf_moves_towards_the_documents() {
        let q = [1.0f32, 0.0];
        let v = vector_prf(&q, &[vec![0.0, 2.0], vec![0.0, 5.0]], 1.0).unwrap();
        // (1, 0) + 1·(0, 1), normalised
        assert!((v[0] - 0.70710677).abs() < 1e-6 && (v[1] - 0.70710677).abs() < 1e-6, "{v:?}");
        let half = vector_prf(&q, &[vec![0.0, 1.0]], 0.5).unwrap();
        assert!((half[1] / half[0] - 0.5).abs() < 1e-6);
        // unusable documents are skipped; none usable: no feedback vector
        assert!(vector_prf(&q, &[vec![0.0, 0.0], vec![1.0, 2.0, 3.0]], 1.0).is_none());
        assert!(vector_prf(&[0.0, 0.0], &[vec![1.0, 0.0]], 1.0).is_none());
        let v = vector_prf(&q, &[vec![0.0, 0.0], vec![0.0, 3.0]], 1.0).unwrap();
        assert!((v[0] - v[1]).abs() < 1e-6);
    }

    #[test]
    fn rm3_mixes_the_query_with_the_relevance_model() {
        let query = vec![QueryKey { key: "a".into(), weight: 2.0 }, QueryKey { key: "b".into(), weight: 2.0 }];
        let docs = [doc(&[("a", 1.0), ("c", 3.0)]), doc(&[("c", 1.0), ("d", 1.0)])];
        let out = rm3(&query, &docs, 2, 0.5);
        let w = |k: &str| out.iter().find(|x| x.key == k).map_or(0.0, |x| x.weight);
        // P(t|R) before truncation (up to a constant): a = 1/4, c = 3/4 + 1/2, d = 1/2
        let (pa, pc, pd) = (0.25, 0.75 + 0.5, 0.5);
        assert!(pd > pa, "d is kept, a is cut");
        let fb = pc + pd;
        assert!((w("a") - 0.25).abs() < 1e-12);
        assert!((w("b") - 0.25).abs() < 1e-12);
        assert!((w("c") - 0.5 * pc / fb).abs() < 1e-12);
        assert!((w("d") - 0.5 * pd / fb).abs() < 1e-12);
        assert!((out.iter().map(|k| k.weight).sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(out[0].key, "c", "heaviest first");
        // nothing to learn from: the query as it was
        assert_eq!(rm3(&query, &[], 20, 0.5), query);
        assert_eq!(rm3(&query, &[doc(&[("x", 0.0)])], 20, 0.5), query);
    }
}
