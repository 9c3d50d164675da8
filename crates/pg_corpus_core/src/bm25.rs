//! BM25 scoring, Lucene variant — the one bm25s calls `method="lucene"` (Kamphuis, de Vries,
//! Boytsov & Lin, "Which BM25 do you mean?", ECIR 2020):
//!
//! ```text
//! idf(t)      = ln(1 + (N - df + 0.5) / (df + 0.5))
//! tfn(t, d)   = tf / (tf + k1 · (1 - b + b · dl / avgdl))
//! score(q, d) = Σ_{t ∈ q}  w_t · qtf_t · idf(t) · tfn(t, d)
//! ```
//!
//! - `N` is the number of documents of the collection the statistics describe (for
//!   pg_corpus: the searchable items of one corpus), `df` the number of them containing the
//!   key, `tf` the key's count in the document ([`crate::analysis::Term::count`]).
//! - `dl` is the document's length in *surface tokens* ([`crate::analysis::Analysis::length`]),
//!   `avgdl` the mean of `dl` over the `N` documents. Extra keys (Hebrew forms without
//!   prefixes, Czech prefix keys) have their own `tf` and `df` but do not lengthen documents.
//! - `w_t` is the query term's weight ([`crate::analysis::Term::weight`]: 1.0, or 0.5 for
//!   fallback keys) and `qtf_t` its count in the query. With every `w_t = 1` the score is
//!   exactly bm25s' `get_scores` over the query's token list (which adds a token's score once
//!   per occurrence in the query); the weight multiplies the term's contribution, so a fallback
//!   key adds half of what the same match on a full key would add.
//! - The Lucene variant has no `(k1 + 1)` factor: it scales every score by the same constant
//!   and does not change rankings. Its idf is never negative, so a key present in every
//!   document still adds a little.
//!
//! Defaults: `k1 = 1.2`, `b = 0.75`.

use std::collections::HashMap;

use crate::analysis::{Analysis, Term};
use crate::error::{CoreError, SqlState};

/// BM25 parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25Params {
    /// Term-frequency saturation, ≥ 0 (0: a match counts once whatever its frequency).
    pub k1: f64,
    /// Length normalisation, in [0, 1] (0: none).
    pub b: f64,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Bm25Params { k1: 1.2, b: 0.75 }
    }
}

impl Bm25Params {
    /// Checked constructor: `k1` finite and ≥ 0, `b` in [0, 1].
    pub fn new(k1: f64, b: f64) -> crate::error::Result<Bm25Params> {
        if !k1.is_finite() || k1 < 0.0 {
            return Err(CoreError::new(
                SqlState::InvalidParameterValue,
                format!("BM25 k1 must be a finite number >= 0, got {k1}"),
                "The usual range is 0.9 to 2.0; the default is 1.2.",
            ));
        }
        if !b.is_finite() || !(0.0..=1.0).contains(&b) {
            return Err(CoreError::new(
                SqlState::InvalidParameterValue,
                format!("BM25 b must be between 0 and 1, got {b}"),
                "The default is 0.75; 0 disables length normalisation.",
            ));
        }
        Ok(Bm25Params { k1, b })
    }
}

/// Collection statistics: number of documents and sum of their lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CorpusStats {
    pub n_docs: u64,
    pub total_length: u64,
}

impl CorpusStats {
    /// Mean document length; 1.0 for an empty collection or one whose documents are all
    /// empty (then every `dl` is 0 and the length factor is `1 - b`).
    pub fn avg_doc_len(&self) -> f64 {
        if self.n_docs == 0 || self.total_length == 0 {
            1.0
        } else {
            self.total_length as f64 / self.n_docs as f64
        }
    }
}

/// Lucene idf: `ln(1 + (N - df + 0.5) / (df + 0.5))`. `df` is clamped to `N` (statistics
/// that lag behind the table cannot make it negative or NaN).
pub fn idf(n_docs: u64, df: u64) -> f64 {
    let n = n_docs as f64;
    let df = df.min(n_docs) as f64;
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// Term-frequency part: `tf / (tf + k1 · (1 - b + b · dl / avgdl))`; 0 when `tf` is 0.
pub fn tf_norm(tf: f64, doc_len: f64, avg_doc_len: f64, p: Bm25Params) -> f64 {
    if tf <= 0.0 {
        return 0.0;
    }
    tf / (tf + length_norm(doc_len, avg_doc_len, p))
}

/// The length's part of [`tf_norm`]'s denominator, `k1 · (1 - b + b · dl / avgdl)`: the same
/// for every term of a document, so a scorer may compute it once per length.
pub fn length_norm(doc_len: f64, avg_doc_len: f64, p: Bm25Params) -> f64 {
    let avg = if avg_doc_len > 0.0 && avg_doc_len.is_finite() { avg_doc_len } else { 1.0 };
    let dl = if doc_len.is_finite() && doc_len > 0.0 { doc_len } else { 0.0 };
    p.k1 * (1.0 - p.b + p.b * dl / avg)
}

/// One query term's contribution: `weight · qtf · idf · tfn`.
pub fn term_score(
    weight: f64,
    query_count: u32,
    idf: f64,
    tf: u32,
    doc_len: u32,
    avg_doc_len: f64,
    p: Bm25Params,
) -> f64 {
    weight * query_count as f64 * idf * tf_norm(tf as f64, doc_len as f64, avg_doc_len, p)
}

/// Score of one document: `tf(key)` its count of a key, `df(key)` the key's document
/// frequency in the collection described by `stats`.
pub fn score(
    query: &[Term],
    tf: impl Fn(&str) -> u32,
    doc_len: u32,
    df: impl Fn(&str) -> u64,
    stats: CorpusStats,
    p: Bm25Params,
) -> f64 {
    let avg = stats.avg_doc_len();
    query
        .iter()
        .map(|t| {
            let f = tf(&t.key);
            if f == 0 {
                0.0
            } else {
                term_score(t.weight, t.count, idf(stats.n_docs, df(&t.key)), f, doc_len, avg, p)
            }
        })
        .sum()
}

/// An in-memory inverted index, for tests, evaluation and small collections: documents are
/// numbered in insertion order from 0.
#[derive(Debug, Clone, Default)]
pub struct MemoryIndex {
    postings: HashMap<String, Vec<(u32, u32)>>,
    doc_len: Vec<u32>,
    total_length: u64,
}

impl MemoryIndex {
    pub fn new() -> MemoryIndex {
        MemoryIndex::default()
    }

    /// Add a document; returns its number.
    pub fn add(&mut self, doc: &Analysis) -> usize {
        let id = self.doc_len.len();
        for t in &doc.terms {
            self.postings.entry(t.key.clone()).or_default().push((id as u32, t.count));
        }
        self.doc_len.push(doc.length);
        self.total_length += doc.length as u64;
        id
    }

    pub fn len(&self) -> usize {
        self.doc_len.len()
    }

    pub fn is_empty(&self) -> bool {
        self.doc_len.is_empty()
    }

    pub fn stats(&self) -> CorpusStats {
        CorpusStats { n_docs: self.doc_len.len() as u64, total_length: self.total_length }
    }

    pub fn df(&self, key: &str) -> u64 {
        self.postings.get(key).map_or(0, |p| p.len() as u64)
    }

    pub fn doc_len(&self, doc: usize) -> u32 {
        self.doc_len[doc]
    }

    /// A key's postings: (document, its count of the key, the document's length), by document.
    pub fn postings_of(&self, key: &str) -> Vec<(u32, u32, u32)> {
        self.postings
            .get(key)
            .map_or_else(Vec::new, |p| p.iter().map(|&(d, tf)| (d, tf, self.doc_len[d as usize])).collect())
    }

    /// Scores of every document (exhaustive, term at a time).
    pub fn scores(&self, query: &[Term], p: Bm25Params) -> Vec<f64> {
        let stats = self.stats();
        let avg = stats.avg_doc_len();
        let mut out = vec![0.0; self.doc_len.len()];
        for t in query {
            let Some(post) = self.postings.get(&t.key) else { continue };
            let idf = idf(stats.n_docs, post.len() as u64);
            for &(d, tf) in post {
                out[d as usize] += term_score(t.weight, t.count, idf, tf, self.doc_len[d as usize], avg, p);
            }
        }
        out
    }

    /// The `k` best documents with a positive score: score descending, document number
    /// ascending on ties.
    pub fn search(&self, query: &[Term], p: Bm25Params, k: usize) -> Vec<(usize, f64)> {
        let mut hits: Vec<(usize, f64)> =
            self.scores(query, p).into_iter().enumerate().filter(|(_, s)| *s > 0.0).collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.truncate(k);
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Analyzer;
    use crate::model::Language;

    #[test]
    fn params_are_checked() {
        assert!(Bm25Params::new(1.2, 0.75).is_ok());
        assert!(Bm25Params::new(-1.0, 0.75).is_err());
        assert!(Bm25Params::new(1.2, 1.5).is_err());
        assert!(Bm25Params::new(f64::NAN, 0.5).is_err());
        assert_eq!(Bm25Params::default(), Bm25Params { k1: 1.2, b: 0.75 });
    }

    #[test]
    fn idf_matches_the_formula_and_never_goes_wrong() {
        assert!((idf(10, 1) - (1.0f64 + 9.5 / 1.5).ln()).abs() < 1e-12);
        assert!(idf(10, 10) > 0.0);
        assert!(idf(10, 50).is_finite() && idf(10, 50) > 0.0);
        assert!(idf(0, 0).is_finite());
    }

    #[test]
    fn hand_computed_score() {
        // N = 2, avgdl = (3 + 1) / 2 = 2; query "x" (df 1); doc 0 has x twice, dl 3.
        let p = Bm25Params::default();
        let expect_idf = (1.0f64 + (2.0 - 1.0 + 0.5) / 1.5).ln();
        let expect = expect_idf * 2.0 / (2.0 + 1.2 * (1.0 - 0.75 + 0.75 * 3.0 / 2.0));
        let mut ix = MemoryIndex::new();
        let a = Analyzer::new(Language::Simple);
        ix.add(&a.analyze("x x y"));
        ix.add(&a.analyze("z"));
        let q = a.query_terms("x");
        let s = ix.scores(&q, p);
        assert!((s[0] - expect).abs() < 1e-12, "{} vs {expect}", s[0]);
        assert_eq!(s[1], 0.0);
        // The free function agrees with the index.
        let d = a.analyze("x x y");
        let tf = |k: &str| d.terms.iter().find(|t| t.key == k).map_or(0, |t| t.count);
        let s2 = score(&q, tf, d.length, |k| ix.df(k), ix.stats(), p);
        assert!((s2 - expect).abs() < 1e-12);
    }

    #[test]
    fn weight_scales_the_contribution_linearly() {
        let p = Bm25Params::default();
        let mut ix = MemoryIndex::new();
        let a = Analyzer::new(Language::Simple);
        ix.add(&a.analyze("alpha beta"));
        ix.add(&a.analyze("gamma"));
        let full = a.query_terms("alpha");
        let mut half = full.clone();
        half[0].weight = 0.5;
        let s_full = ix.scores(&full, p)[0];
        let s_half = ix.scores(&half, p)[0];
        assert!((s_half - 0.5 * s_full).abs() < 1e-12);
    }

    #[test]
    fn empty_collections_are_fine() {
        let ix = MemoryIndex::new();
        assert!(ix.search(&[], Bm25Params::default(), 10).is_empty());
        assert_eq!(ix.stats().avg_doc_len(), 1.0);
        assert_eq!(tf_norm(1.0, 0.0, 0.0, Bm25Params::default()), 1.0 / (1.0 + 1.2 * 0.25));
    }
}
