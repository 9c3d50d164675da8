//! The evidence filter over fused hits: what its rules need, and the verdict per hit.

use std::collections::HashMap;

use super::ItemKeysQuery;
use super::{rounds::Frontier, Executor, LexicalPlans, Request};
use crate::error::{CoreError, Result, SqlState};
use crate::evidence::{self, QueryWord};
use crate::fusion::{Fused, RankedList};
use crate::model::{Branch, Corpus, QueryTag, VectorThresholds};
use crate::plan::{self};

/// The evidence filter of a search ([`crate::evidence`]): what its rules need.
#[derive(Debug, Clone)]
pub struct EvidencePlan {
    /// Per space the original query searches, its vector thresholds (None: not searched).
    pub vector: Vec<Option<VectorThresholds>>,
    /// Per source, the original query's words (empty: no query text).
    pub words: Vec<Vec<QueryWord>>,
    /// Per source, each word's key → the query's spelling of it.
    pub written: Vec<HashMap<String, String>>,
    /// Document frequencies of the words' keys.
    pub df: HashMap<String, u64>,
    /// The most documents a rare key is in.
    pub rare_limit: f64,
    pub min_coverage: f64,
}

/// What the evidence filter of a search needs: the thresholds of every space the original
/// query searches, and the query's words with their document frequencies. Its rare-words rule
/// needs the BM25 statistics.
pub(super) fn evidence_plan(
    corpus: &Corpus,
    default_vector: bool,
    space_vectors: &[Option<Vec<f32>>],
    has_text: bool,
    lexical: Option<&LexicalPlans>,
) -> Result<EvidencePlan> {
    let cfg = &corpus.evidence;
    let mut vector = vec![None; corpus.spaces.len()];
    // a space without usable thresholds has no vector rule; the rare-words rule still judges
    let mut unusable = None;
    for (idx, slot) in vector.iter_mut().enumerate() {
        let searched = if idx == 0 { default_vector } else { space_vectors.get(idx).is_some_and(Option::is_some) };
        if searched && corpus.sources.iter().any(|s| s.space == idx) {
            match evidence::thresholds_for(cfg, &corpus.spaces, idx, &corpus.name) {
                Ok(t) => *slot = Some(t.clone()),
                Err(e) => unusable = unusable.or(Some(e)),
            }
        }
    }
    if let (false, Some(e)) = (has_text || vector.iter().any(Option::is_some), unusable) {
        return Err(e);
    }
    let written: Vec<HashMap<String, String>> = corpus
        .sources
        .iter()
        .map(|src| match (src.language, lexical) {
            (Some(lang), Some(lex)) if has_text => evidence::as_written(lex.text.as_str(), lang),
            _ => HashMap::new(),
        })
        .collect();
    let (words, df, rare_limit) = match (has_text, lexical) {
        (false, _) => (vec![Vec::new(); corpus.sources.len()], HashMap::new(), 0.0),
        (true, None) => {
            return Err(CoreError::new(
                SqlState::ObjectNotInPrerequisiteState,
                "the evidence filter's rare-words rule needs the BM25 scorer (pg_corpus.lexical_scorer = bm25)",
                "SET pg_corpus.lexical_scorer = 'bm25', or search with evidence => false (a corpus whose evidence \
                 is enabled by default filters every search that does not say so).",
            ))
        }
        (true, Some(lex)) if lex.corpus.n_docs == 0 => {
            return Err(CoreError::new(
                SqlState::ObjectNotInPrerequisiteState,
                format!("corpus \"{}\" has no lexical statistics, which the evidence filter needs", corpus.name),
                format!(
                    "Refresh them: SELECT corpus.corpus_refresh_lexical_stats({});",
                    crate::sql::literal(&corpus.name)
                ),
            ))
        }
        (true, Some(lex)) => {
            let words: Vec<Vec<QueryWord>> = corpus
                .sources
                .iter()
                .zip(&lex.keys_per_source)
                .map(|(src, keys)| match src.language {
                    Some(lang) => evidence::query_words(lex.text.as_str(), lang),
                    None => evidence::words_of_keys(keys),
                })
                .collect();
            (words, lex.stats.df.clone(), evidence::rare_limit(cfg.rare_share, lex.corpus.n_docs))
        }
    };
    Ok(EvidencePlan { vector, words, written, df, rare_limit, min_coverage: cfg.min_coverage })
}

/// The original query's semantic distances, as the evidence filter's vector rule reads them.
pub(super) struct Near {
    /// (source, item id) → (space, distance).
    pub(super) distance: HashMap<(usize, String), (usize, f64)>,
    /// Per space, the best candidate's distance.
    pub(super) best: HashMap<usize, f64>,
}

impl Near {
    pub(super) fn of(lists: &[RankedList]) -> Near {
        let mut near = Near { distance: HashMap::new(), best: HashMap::new() };
        near.add(lists, true);
        near
    }

    /// The distances of the original query's semantic lists; with `best`, they set each
    /// space's best candidate (a must-include class's lists add distances only: the best
    /// candidate stays the search's own).
    pub(super) fn add(&mut self, lists: &[RankedList], best: bool) {
        for l in lists.iter().filter(|l| l.query == QueryTag::Original && l.branch == Branch::Semantic) {
            for h in &l.hits {
                self.distance.entry((h.source, h.item_id.clone())).or_insert((l.space, h.raw));
                if best {
                    let b = self.best.entry(l.space).or_insert(h.raw);
                    *b = b.min(h.raw);
                }
            }
        }
    }

    /// Whether a distance in `space` passes the vector rule.
    pub(super) fn admits(&self, ev: &EvidencePlan, space: usize, distance: f64) -> Option<f64> {
        let t = ev.vector.get(space)?.as_ref()?;
        let best = *self.best.get(&space)?;
        evidence::near_vector(distance, best, t).then_some(best)
    }
}

/// The evidence filter over the fused hits ([`crate::evidence`]): keep the hits
/// that a rule admits, each with its verdict. Returns whether a wider window could admit more:
/// some per-source list of the original query filled its window and its last hit still has
/// evidence (beyond a list's end, a hit is no nearer and its rare words no more telling).
pub(super) fn apply_evidence(
    req: &Request,
    ev: &EvidencePlan,
    near: &Near,
    frontiers: &[Frontier],
    fused: &mut Vec<Fused>,
    cache: &mut HashMap<(usize, String), Vec<String>>,
    exec: &mut dyn Executor,
) -> Result<bool> {
    // the index terms of every candidate not yet checked whose source has query words
    let mut missing: Vec<Vec<String>> = vec![Vec::new(); req.corpus.sources.len()];
    let ends = frontiers.iter().filter_map(|f| f.last.as_ref().map(|h| (h.source, &h.item_id)));
    for (source, id) in fused.iter().map(|f| (f.source, &f.item_id)).chain(ends) {
        if !ev.words[source].is_empty() && !cache.contains_key(&(source, id.clone())) && !missing[source].contains(id) {
            missing[source].push(id.clone());
        }
    }
    for (idx, ids) in missing.into_iter().enumerate().filter(|(_, ids)| !ids.is_empty()) {
        let mut keys: Vec<String> = evidence::word_keys(&ev.words[idx]).map(str::to_string).collect();
        keys.sort();
        keys.dedup();
        let (sql, params) = plan::item_keys(&req.corpus, idx, &req.conds, ids.clone(), keys.clone());
        let mut found = exec.item_keys(&ItemKeysQuery { source: idx, ids: ids.clone(), keys, sql, params })?;
        for id in ids {
            let held = found.remove(&id).unwrap_or_default();
            cache.insert((idx, id), held);
        }
    }
    let rare = |source: usize, id: &str| -> Option<evidence::RareWords> {
        let held = cache.get(&(source, id.to_string()))?;
        evidence::rare_words(&ev.words[source], evidence::df_of(&ev.df), ev.rare_limit, |k| held.iter().any(|h| h == k))
    };
    fused.retain_mut(|f| {
        let near_vector = near.distance.get(&(f.source, f.item_id.clone())).and_then(|&(space, d)| {
            near.admits(ev, space, d).map(|best| (req.corpus.spaces[space].name.as_str(), d, best))
        });
        let words = rare(f.source, &f.item_id);
        f.evidence = evidence::verdict_json(near_vector, words.as_ref(), ev.min_coverage, &ev.written[f.source]);
        f.evidence.is_some()
    });
    Ok(frontiers.iter().filter(|f| f.full).any(|f| match (&f.last, f.branch) {
        (None, _) => false,
        (Some(h), Branch::Semantic) => near.admits(ev, f.space, h.raw).is_some(),
        // BM25 order is not coverage order (a long item with every rare word can rank below
        // short ones): widen while the list's end still holds some rare query word
        (Some(h), Branch::Lexical) => rare(h.source, &h.item_id).is_some_and(|r| !r.matched.is_empty()),
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::engine::tests::fake::*;
    use crate::engine::Args;
    use crate::error::SqlState;

    fn evidence_args(max_per_parent: Option<i32>) -> Args {
        Args { evidence: Some(true), max_per_parent, ..args("hybrid") }
    }

    #[test]
    fn the_evidence_filter_keeps_near_hits_and_rare_word_hits_only() {
        let c = evidence_corpus(json!({"vector": {"default": {"max_distance": 0.105, "max_gap": 0.003}}}));
        let mut f = default_fake();
        // a far item that holds both (rare) query words
        f.terms.insert("100021".into(), vec!["חוזה".into(), "שכירות".into()]);
        // one that holds only one of the two: half the query is not more than half
        f.terms.insert("30".into(), vec!["שכירות".into()]);
        let rows = run_on(c, &mut f, evidence_args(None)).unwrap();
        let ids: Vec<&str> = rows.iter().map(|r| r.item_id.as_str()).collect();
        // distance <= min(0.105, best 0.1 + 0.003): items 1..4 of chunks, 100001..100003 of halachot
        let mut expected = vec!["1", "2", "3", "4", "100001", "100002", "100003", "100021"];
        let mut got = ids.clone();
        expected.sort();
        got.sort();
        assert_eq!(got, expected, "{rows:?}");
        for r in &rows {
            let ev = r.evidence.as_ref().expect("every hit says why it was admitted");
            if r.item_id == "100021" {
                assert_eq!(ev["rare_words"]["coverage"], json!(1.0), "{ev}");
                assert!(ev.get("near_vector").is_none());
            } else {
                assert!(ev["near_vector"]["distance"].as_f64().unwrap() <= 0.103 + 1e-12, "{ev}");
            }
        }
        // the list ends had no evidence: one round
        assert!(f.branch_calls().iter().all(|&(_, _, limit)| limit == 40), "{:?}", f.branch_calls());
    }

    #[test]
    fn without_vector_thresholds_only_the_rare_words_rule_admits() {
        // no thresholds, or thresholds set for the model the space used before
        for cfg in [json!({}), json!({"vector": {"default": {"max_distance": 0.9, "max_gap": 0.9, "model": "other"}}})]
        {
            let mut c = crate::testing::legal();
            c.spaces[0].model = Some("e5".into());
            c.evidence = crate::evidence::parse(&cfg, &c.spaces).unwrap();
            let mut f = default_fake();
            f.terms.insert("100021".into(), vec!["חוזה".into(), "שכירות".into()]);
            f.terms.insert("30".into(), vec!["שכירות".into()]);
            let rows = run_on(std::sync::Arc::new(c), &mut f, evidence_args(None)).unwrap();
            let ids: Vec<&str> = rows.iter().map(|r| r.item_id.as_str()).collect();
            assert_eq!(ids, ["100021"], "{cfg} {rows:?}");
            let ev = rows[0].evidence.as_ref().unwrap();
            assert!(ev.get("near_vector").is_none() && ev["rare_words"]["coverage"] == json!(1.0), "{ev}");
        }
    }

    #[test]
    fn nothing_with_evidence_is_an_empty_answer_after_one_round() {
        let c = evidence_corpus(json!({"vector": {"default": {"max_distance": 0.05, "max_gap": 0.01}}}));
        let mut f = default_fake();
        let rows = run_on(c, &mut f, evidence_args(Some(3))).unwrap();
        assert!(rows.is_empty(), "{rows:?}");
        assert!(f.branch_calls().iter().all(|&(_, _, limit)| limit == 40));
        assert!(!f.calls.iter().any(|c| matches!(c, Call::Fetch(_))), "nothing to fetch");
    }

    #[test]
    fn the_window_widens_while_the_end_of_a_list_still_has_evidence() {
        // every item up to distance 0.2 is near: the semantic lists' ends (0.139) still are, and
        // one hit per parent leaves fewer than k rows from 40 candidates
        let c = evidence_corpus(json!({"vector": {"default": {"max_distance": 0.2, "max_gap": 0.2}}}));
        let mut f = default_fake();
        let rows = run_on(c, &mut f, evidence_args(Some(1))).unwrap();
        assert_eq!(rows.len(), 10);
        assert!(f.branch_calls().iter().any(|&(_, _, limit)| limit == 160), "{:?}", f.branch_calls());
        // ends beyond the threshold: no widening, fewer rows
        let c = evidence_corpus(json!({"vector": {"default": {"max_distance": 0.125, "max_gap": 0.2}}}));
        let mut f = default_fake();
        let rows = run_on(c, &mut f, evidence_args(Some(1))).unwrap();
        assert!(rows.len() < 10 && !rows.is_empty(), "{rows:?}");
        assert!(f.branch_calls().iter().all(|&(_, _, limit)| limit == 40));
    }

    #[test]
    fn the_evidence_filter_needs_its_thresholds_and_statistics() {
        // without text, a search with no vector thresholds has nothing to judge by
        let mut f = default_fake();
        let a = Args { query_text: None, ..evidence_args(None) };
        let e = run_on(evidence_corpus(json!({})), &mut f, a).unwrap_err();
        assert_eq!(e.state, SqlState::ObjectNotInPrerequisiteState);
        assert!(e.hint.contains("corpus_calibrate_evidence"), "{e:?}");
        // a lexical search needs no vector thresholds, but statistics
        let mut f = default_fake();
        f.documents = 0;
        let a = Args { evidence: Some(true), ..args("lexical") };
        let e = run_on(evidence_corpus(json!({})), &mut f, a).unwrap_err();
        assert_eq!(e.state, SqlState::ObjectNotInPrerequisiteState);
        assert!(e.hint.contains("corpus_refresh_lexical_stats"), "{e:?}");
        // enabled by the corpus, turned off by the call
        let c = evidence_corpus(json!({"enabled": true}));
        let mut f = default_fake();
        assert!(run_on(c.clone(), &mut f, args("hybrid")).unwrap().is_empty());
        let rows = run_on(c, &mut f, Args { evidence: Some(false), ..args("hybrid") }).unwrap();
        assert_eq!(rows.len(), 10);
        assert!(rows.iter().all(|r| r.evidence.is_none()));
    }

    #[test]
    fn the_corpus_enables_the_filter_by_default_and_the_call_decides() {
        // thresholds nothing is near enough to, and no item holds a query word: no evidence
        let none = json!({"vector": {"default": {"max_distance": 0.05, "max_gap": 0.01}}});
        let mut enabled = none.clone();
        enabled["enabled"] = json!(true);
        let by_default = run_on(evidence_corpus(enabled.clone()), &mut default_fake(), args("hybrid")).unwrap();
        assert!(by_default.is_empty(), "the corpus' default filters a call that does not say: {by_default:?}");
        let off = Args { evidence: Some(false), ..args("hybrid") };
        let rows = run_on(evidence_corpus(enabled), &mut default_fake(), off).unwrap();
        assert_eq!(rows.len(), 10, "the call turns it off");
        assert!(rows.iter().all(|r| r.evidence.is_none()));
        // asked for on a corpus that does not enable it: no rows in every mode
        for mode in ["hybrid", "semantic", "lexical"] {
            let a = Args { evidence: Some(true), ..args(mode) };
            let rows = run_on(evidence_corpus(none.clone()), &mut default_fake(), a).unwrap();
            assert!(rows.is_empty(), "{mode}: {rows:?}");
        }
        let plain = run_on(evidence_corpus(none), &mut default_fake(), args("hybrid")).unwrap();
        assert_eq!(plain.len(), 10, "off unless the corpus or the call turns it on");
    }

    #[test]
    fn thresholds_calibrated_for_another_model_are_refused_by_a_search_without_text() {
        let mut c = crate::testing::legal();
        c.spaces[0].model = Some("bge-m3".into());
        c.evidence = crate::evidence::parse(
            &json!({"vector": {"default": {"max_distance": 0.2, "max_gap": 0.03, "model": "e5-small"}}}),
            &c.spaces,
        )
        .unwrap();
        let c = std::sync::Arc::new(c);
        let a = Args { query_text: None, ..evidence_args(None) };
        let e = run_on(c.clone(), &mut default_fake(), a).unwrap_err();
        assert_eq!(e.state, SqlState::ObjectNotInPrerequisiteState);
        assert!(e.message.contains("bge-m3") && e.hint.contains("corpus_calibrate_evidence"), "{e:?}");
        // a lexical search needs no vector thresholds: its rare-words rule still admits
        let mut f = default_fake();
        f.terms.insert("7".into(), vec!["חוזה".into(), "שכירות".into()]);
        let rows = run_on(c, &mut f, Args { evidence: Some(true), ..args("lexical") }).unwrap();
        let ids: Vec<&str> = rows.iter().map(|r| r.item_id.as_str()).collect();
        assert_eq!(ids, vec!["7"]);
    }
}
