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
    for (idx, slot) in vector.iter_mut().enumerate() {
        let searched = if idx == 0 { default_vector } else { space_vectors.get(idx).is_some_and(Option::is_some) };
        if searched && corpus.sources.iter().any(|s| s.space == idx) {
            *slot = Some(evidence::thresholds_for(cfg, &corpus.spaces, idx, &corpus.name)?.clone());
        }
    }
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
    Ok(EvidencePlan { vector, words, df, rare_limit, min_coverage: cfg.min_coverage })
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
        f.evidence = evidence::verdict_json(near_vector, words.as_ref(), ev.min_coverage);
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
