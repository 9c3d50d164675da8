//! The lexical branch's index terms and scoring, between the analyser ([`crate::analysis`]),
//! BM25 ([`crate::bm25`]) and PostgreSQL's tsvector ([`crate::tsvector`]).
//!
//! - Documents: `corpus.bm25_document(text, language)` turns text into a tsvector (a generated
//!   column with a GIN index): one position per word, the word's own key labelled D, its extra
//!   keys (Hebrew forms without prefix letters, Czech prefix keys) labelled C at the same
//!   position. `tf` = positions of a key, document length = D positions (surface tokens).
//! - Queries: the same analyser gives keys with weights and counts; the search looks up each
//!   key's document frequency in the corpus' statistics, keeps the rare keys to find
//!   candidates through the GIN index (Lucene's common-terms idea: very common keys only score
//!   documents found by rarer ones), and scores candidates with [`score_tsvector`].

use std::collections::BTreeMap;

use crate::analysis::{Analyzer, KeyKind, Language};
use crate::bm25::{self, Bm25Params};
use crate::tsvector::{quote_lexeme, TsVector, EXTRA_LABEL, MAX_POSITION};

/// tsvector's limits: 256 positions per lexeme, about 1 MB of lexeme bytes per value. Beyond
/// them a document's extra occurrences (or new keys) are not indexed.
const MAX_POSITIONS_PER_KEY: usize = 255;
const MAX_LEXEME_BYTES: usize = 900_000;

/// The tsvector input text for a document (`'key':1,4 'other':2C ...`).
pub fn document_tsvector(text: &str, lang: Language) -> String {
    let mut keys: BTreeMap<String, Vec<(u32, bool)>> = BTreeMap::new();
    let mut position = 0u32;
    let mut bytes = 0usize;
    Analyzer::new(lang).for_each_key(text, |key, _weight, kind| {
        if kind == KeyKind::Surface {
            position = (position + 1).min(MAX_POSITION);
        }
        let pos = position.max(1);
        match keys.get_mut(key) {
            Some(list) => {
                if list.len() < MAX_POSITIONS_PER_KEY && list.last().is_none_or(|(p, _)| *p < pos) {
                    list.push((pos, kind == KeyKind::Extra));
                }
            }
            None => {
                if bytes + key.len() <= MAX_LEXEME_BYTES {
                    bytes += key.len();
                    keys.insert(key.to_string(), vec![(pos, kind == KeyKind::Extra)]);
                }
            }
        }
    });
    let mut out = String::with_capacity(bytes * 2);
    for (key, positions) in keys {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&quote_lexeme(&key));
        out.push(':');
        for (n, (p, extra)) in positions.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(&p.to_string());
            if *extra {
                out.push(EXTRA_LABEL);
            }
        }
    }
    out
}

/// One query key with its BM25 weight (analyser weight × count in the query).
#[derive(Debug, Clone, PartialEq)]
pub struct QueryKey {
    pub key: String,
    pub weight: f64,
}

/// The query's keys for documents analysed as `lang`.
pub fn query_keys(text: &str, lang: Language) -> Vec<QueryKey> {
    Analyzer::new(lang)
        .query_terms(text)
        .into_iter()
        .map(|t| QueryKey { weight: t.weight * t.count as f64, key: t.key })
        .collect()
}

/// A key ready for scoring: its bytes and `weight · idf`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredKey {
    pub key: String,
    pub weight_idf: f64,
}

/// BM25 of one document tsvector against the query (see [`crate::bm25`] for the formula).
pub fn score_tsvector(doc: &TsVector, keys: &[ScoredKey], avg_doc_len: f64, p: Bm25Params) -> f64 {
    let mut dl: Option<f64> = None;
    let mut total = 0.0;
    for k in keys {
        if let Some(e) = doc.find(k.key.as_bytes()) {
            let len = *dl.get_or_insert_with(|| doc.surface_length() as f64);
            total += k.weight_idf * bm25::tf_norm(e.npos as f64, len, avg_doc_len, p);
        }
    }
    total
}

/// How the lexical branch finds candidates for a query.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidatePlan {
    /// tsquery input text: the rare keys ORed, or (when every key is common) all keys ANDed.
    pub tsquery: String,
    /// Keys that only score documents found by others.
    pub common: Vec<String>,
    /// Every key with `weight · idf`, for scoring.
    pub scored: Vec<ScoredKey>,
    /// Some key did not find candidates (common keys, or the all-common AND): documents that
    /// match only those keys are not candidates, so a larger budget can find more.
    pub pruned: bool,
}

/// Split the query into keys that find candidates and keys that only score them, so that the
/// GIN index never hands over more than about `budget` documents: keys are taken rarest first
/// while their document frequencies add up to at most `budget` (the rarest is always taken);
/// the rest (the common keys) only add to the candidates' scores — Lucene's common-terms idea
/// with a bound on the work instead of a frequency cutoff. When even the rarest key is common,
/// candidates must contain every key. On a corpus whose documents fit in the budget every key
/// finds candidates and the ranking is exact BM25. `df` gives a key's document frequency.
pub fn candidate_plan(keys: &[QueryKey], df: impl Fn(&str) -> u64, n_docs: u64, budget: u64) -> Option<CandidatePlan> {
    if keys.is_empty() {
        return None;
    }
    let scored: Vec<ScoredKey> = keys
        .iter()
        .map(|k| ScoredKey { key: k.key.clone(), weight_idf: k.weight * bm25::idf(n_docs, df(&k.key)) })
        .collect();
    let mut by_df: Vec<(&QueryKey, u64)> = keys.iter().map(|k| (k, df(&k.key))).collect();
    by_df.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.key.cmp(&b.0.key)));
    let mut taken = 0u64;
    let mut finders = Vec::new();
    let mut common = Vec::new();
    for (k, f) in &by_df {
        if taken.saturating_add(*f) <= budget.max(1) || finders.is_empty() && *f <= budget {
            taken = taken.saturating_add(*f);
            finders.push(*k);
        } else {
            common.push(k.key.clone());
        }
    }
    let pruned = !common.is_empty();
    let tsquery = if finders.is_empty() {
        // every key is common: documents must contain all of them
        common.clear();
        keys.iter().map(|k| quote_lexeme(&k.key)).collect::<Vec<_>>().join(" & ")
    } else {
        finders.iter().map(|k| quote_lexeme(&k.key)).collect::<Vec<_>>().join(" | ")
    };
    Some(CandidatePlan { tsquery, common, scored, pruned })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tsvector::tests::encode;

    #[test]
    fn document_literal_marks_extra_keys() {
        let lit = document_tsvector("the cat and the cat", Language::Simple);
        assert_eq!(lit, "'and':3 'cat':2,5 'the':1,4");
        let he = document_tsvector("בעוגיות", Language::Hebrew);
        assert!(he.contains(":1C"), "{he}");
        assert!(he.contains(":1 ") || he.ends_with(":1"), "{he}");
    }

    #[test]
    fn huge_and_weird_documents_stay_within_tsvector_limits() {
        let many = "word ".repeat(100_000);
        let lit = document_tsvector(&many, Language::English);
        assert!(lit.matches(',').count() < MAX_POSITIONS_PER_KEY);
        let distinct: String = (0..200_000).map(|i| format!("w{i} ")).collect();
        let lit = document_tsvector(&distinct, Language::Simple);
        assert!(lit.len() < 2 * MAX_LEXEME_BYTES + 400_000);
        let odd = document_tsvector("it's a \\back'slash\\ \u{202b}שָׁלוֹם\u{202c} 😀", Language::Hebrew);
        assert!(!odd.is_empty());
    }

    #[test]
    fn scores_match_the_bm25_module() {
        // doc: a a b (+ extra key x at position 1, not counted in the length)
        let data = encode(&[("a", &[(1, 0), (2, 0)]), ("b", &[(3, 0)]), ("x", &[(1, 1)])]);
        let doc = TsVector::parse(&data).unwrap();
        let p = Bm25Params::default();
        let keys = vec![
            ScoredKey { key: "a".into(), weight_idf: 2.0 },
            ScoredKey { key: "x".into(), weight_idf: 0.5 },
            ScoredKey { key: "zz".into(), weight_idf: 9.0 },
        ];
        let want = 2.0 * bm25::tf_norm(2.0, 3.0, 4.0, p) + 0.5 * bm25::tf_norm(1.0, 3.0, 4.0, p);
        assert!((score_tsvector(&doc, &keys, 4.0, p) - want).abs() < 1e-12);
    }

    #[test]
    fn common_keys_do_not_find_candidates() {
        let keys = vec![QueryKey { key: "the".into(), weight: 1.0 }, QueryKey { key: "zebra".into(), weight: 1.0 }];
        let df = |k: &str| if k == "the" { 900 } else { 3 };
        let plan = candidate_plan(&keys, df, 1000, 100).unwrap();
        assert_eq!(plan.tsquery, "'zebra'");
        assert_eq!(plan.common, vec!["the"]);
        assert!(plan.pruned);
        assert!(plan.scored[0].weight_idf < plan.scored[1].weight_idf);
        // a small corpus fits the budget: every key finds candidates (exact BM25)
        let small = candidate_plan(&keys, df, 1000, 2000).unwrap();
        assert_eq!(small.tsquery, "'zebra' | 'the'");
        assert!(small.common.is_empty() && !small.pruned);
        let all_common = candidate_plan(&keys, |_| 900, 1000, 100).unwrap();
        assert_eq!(all_common.tsquery, "'the' & 'zebra'");
        assert!(all_common.pruned);
        assert!(candidate_plan(&[], df, 1000, 100).is_none());
    }
}
