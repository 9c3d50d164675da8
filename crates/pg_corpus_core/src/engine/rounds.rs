//! One round of a search: every subplan of every query with one candidate window, stale
//! embeddings dropped from the semantic lists, each branch's lists merged corpus-wide.

use std::collections::HashSet;

use super::{lexical_plan::candidate_plans, settings, Executor, LexicalPlans, Request, SemanticPlan, Setting};
use crate::error::Result;
use crate::fusion::{self, Fused, RankedList};
use crate::lexical::{self};
use crate::model::{Branch, QueryTag};
use crate::plan::{self, Subplan};

/// What one round searches for: the request's query, one of its extra queries, or feedback's
/// moved one.
#[derive(Clone, Copy)]
pub(super) struct RoundQuery<'a> {
    pub(super) tag: QueryTag,
    pub(super) weight: f64,
    /// The default space's vector.
    pub(super) vector: Option<&'a [f32]>,
    /// The named spaces' vectors, by space index (the original query's only).
    pub(super) space_vectors: &'a [Option<Vec<f32>>],
    pub(super) text: Option<&'a str>,
    pub(super) lexical: Option<&'a LexicalPlans>,
}

impl RoundQuery<'_> {
    /// The query's vector for sources of space `space` (None: they are not searched
    /// semantically).
    pub(super) fn vector_for(&self, space: usize) -> Option<&[f32]> {
        if space == 0 {
            self.vector
        } else {
            self.space_vectors.get(space).and_then(|v| v.as_deref())
        }
    }
}

impl Request {
    pub(super) fn query(&self) -> RoundQuery<'_> {
        RoundQuery {
            tag: QueryTag::Original,
            weight: 1.0,
            vector: self.vector.as_deref(),
            space_vectors: &self.space_vectors,
            text: self.text.as_deref(),
            lexical: self.lexical.as_ref(),
        }
    }

    /// The original query, then every extra query: all of them run in every round.
    pub(super) fn queries(&self) -> Vec<RoundQuery<'_>> {
        let mut out = vec![self.query()];
        out.extend(self.extra.iter().enumerate().map(|(i, q)| RoundQuery {
            tag: QueryTag::Extra(i),
            weight: q.weight,
            vector: q.vector.as_deref(),
            space_vectors: &[],
            text: q.text.as_deref(),
            lexical: q.lexical.as_ref(),
        }));
        out
    }

    /// The BM25 candidate budget for a window: the setting's, or below 1 the automatic one for
    /// the corpus' documents ([`lexical::auto_candidate_budget`]). It grows with the window, so
    /// that when capping or pruning left fewer than k rows, a wider window also lets commoner
    /// keys find candidates.
    pub(super) fn budget(&self, lex: &LexicalPlans, window: usize) -> u64 {
        let base = match u64::try_from(self.config.bm25_candidate_budget) {
            Ok(b) if b >= 1 => b,
            _ => lexical::auto_candidate_budget(lex.corpus.n_docs),
        };
        base.saturating_mul((window / self.window.max(1)).max(1) as u64)
    }
}

/// Every subplan of one round, in source order (semantic, then lexical, per source).
pub(super) fn subplans(
    req: &Request,
    q: RoundQuery,
    sem: &[SemanticPlan],
    window: usize,
    exec: &mut dyn Executor,
) -> Result<Vec<Subplan>> {
    let plans = match q.lexical {
        Some(lex) => Some(candidate_plans(req, lex, req.budget(lex, window), window, exec)?),
        None => None,
    };
    let mut out = Vec::new();
    for idx in 0..req.corpus.sources.len() {
        if sem.get(idx).is_some_and(SemanticPlan::is_empty) {
            continue;
        }
        if let Some(v) = q.vector_for(req.corpus.sources[idx].space) {
            out.push(plan::semantic(&req.corpus, idx, &req.conds, v, window as i64, sem[idx].strategy));
        }
        match (q.text, q.lexical, &plans) {
            (Some(_), Some(lex), Some(plans)) => {
                if let Some(cp) = &plans[idx] {
                    let scope = lexical::scope_check_costed(
                        cp,
                        lex.corpus_share,
                        lex.corpus.n_docs,
                        !req.conds.is_empty(),
                        lex.corpus_parents.get(idx).copied().flatten(),
                    );
                    let mut p = plan::lexical_bm25(
                        &req.corpus,
                        idx,
                        &req.conds,
                        cp,
                        lex.corpus.avg_doc_len(),
                        lex.params,
                        window as i64,
                        scope,
                    );
                    p.pruned = cp.pruned;
                    out.push(p);
                }
            }
            (Some(t), _, _) => {
                out.push(plan::lexical(&req.corpus, idx, &req.conds, lexical::ts_rank_cd_text(t), window as i64))
            }
            (None, _, _) => {}
        }
    }
    Ok(out)
}

pub(super) fn subplan_settings(req: &Request, sem: &[SemanticPlan], p: &Subplan, window: usize) -> Vec<Setting> {
    let selectivity = sem.get(p.source).map_or(1.0, |s| s.selectivity);
    // BM25 settings for every BM25 subplan: the original query's or an extra query's
    settings::for_subplan(p, window, selectivity, req.config.scorer == super::Scorer::Bm25, &req.config)
}

/// The end of one per-source list of a round's original query: whether the list filled its
/// window (or was a pruned lexical subplan), and its last hit. The evidence filter widens the
/// window only while such a list's last hit still has evidence.
#[derive(Debug, Clone)]
pub(super) struct Frontier {
    pub(super) branch: Branch,
    pub(super) space: usize,
    pub(super) full: bool,
    pub(super) last: Option<crate::model::Hit>,
}

/// What one round found: the ranked lists, whether a wider window could find more, and the
/// original query's per-source list ends.
pub(super) struct Round {
    pub(super) lists: Vec<RankedList>,
    pub(super) saturated: bool,
    pub(super) frontiers: Vec<Frontier>,
}

/// One query's lists: its semantic lists, each with its space, and its lexical ones.
pub(super) type QueryLists = (Vec<(usize, Vec<crate::model::Hit>)>, Vec<Vec<crate::model::Hit>>);

/// One round: every subplan of every query with `window` rows, each branch's per-source lists
/// of a query merged into a corpus-wide list (semantic, then lexical, per query, in query
/// order). Also says whether another round with a wider window could find more.
pub(super) fn run_round(
    req: &Request,
    queries: &[RoundQuery],
    sem: &[SemanticPlan],
    window: usize,
    exec: &mut dyn Executor,
) -> Result<Round> {
    // per query: (its semantic per-source lists with their space, its lexical ones)
    let mut per_query: Vec<QueryLists> = Vec::with_capacity(queries.len());
    // per query, per list (semantic ones, then lexical ones): did it fill its window
    let mut full: Vec<(Vec<bool>, Vec<bool>)> = Vec::with_capacity(queries.len());
    // A source that filled its window may hold more eligible items beyond it; so may a pruned
    // lexical subplan that returned fewer rows than the window (a wider window, and so a larger
    // candidate budget, can find them). Counted before stale embeddings are dropped.
    let mut saturated = false;
    for &q in queries {
        let (mut semantic, mut lexical) = (Vec::new(), Vec::new());
        let (mut sem_full, mut lex_full) = (Vec::new(), Vec::new());
        for p in subplans(req, q, sem, window, exec)? {
            let settings = subplan_settings(req, sem, &p, window);
            let hits = exec.branch_hits(&p, &settings)?;
            let more = fusion::may_hold_more(hits.len(), window, p.pruned);
            saturated |= more;
            match p.branch {
                Branch::Semantic => {
                    semantic.push((req.corpus.sources[p.source].space, hits));
                    sem_full.push(more);
                }
                Branch::Lexical => {
                    lexical.push(hits);
                    lex_full.push(more);
                }
            }
        }
        per_query.push((semantic, lexical));
        full.push((sem_full, lex_full));
    }
    if !req.include_stale {
        // stale embeddings are not used by the semantic branch: one
        // lookup of the queue for the semantic hits of every query
        let all = per_query.iter().flat_map(|(s, _)| s.iter().flat_map(|(_, hits)| hits));
        let stale = queued(req, all.map(|h| (h.source, h.item_id.as_str(), h.parent_id.as_str())), exec)?;
        if !stale.is_empty() {
            for (_, hits) in per_query.iter_mut().flat_map(|(s, _)| s.iter_mut()) {
                hits.retain(|h| !stale.contains(&(h.source, h.item_id.clone())));
            }
        }
    }
    // (read only by the evidence filter)
    let mut frontiers = Vec::new();
    for ((q, (semantic, lexical)), (sem_full, lex_full)) in queries.iter().zip(&per_query).zip(&full) {
        if q.tag != QueryTag::Original || req.evidence.is_none() {
            continue;
        }
        for ((space, hits), &full) in semantic.iter().zip(sem_full) {
            frontiers.push(Frontier { branch: Branch::Semantic, space: *space, full, last: hits.last().cloned() });
        }
        for (hits, &full) in lexical.iter().zip(lex_full) {
            frontiers.push(Frontier { branch: Branch::Lexical, space: 0, full, last: hits.last().cloned() });
        }
    }
    // one semantic list per embedding space (distances of different models are not comparable),
    // weighted by the space's weight; one lexical list
    let mut lists = Vec::new();
    for (q, (semantic, lexical)) in queries.iter().zip(per_query) {
        for (space, info) in req.corpus.spaces.iter().enumerate() {
            let per_source: Vec<Vec<crate::model::Hit>> =
                semantic.iter().filter(|(s, _)| *s == space).map(|(_, hits)| hits.clone()).collect();
            if !per_source.is_empty() {
                let list = fusion::merge_branch(Branch::Semantic, per_source).of_query(q.tag, q.weight * info.weight);
                lists.push(fusion::RankedList { space, ..list });
            }
        }
        if !lexical.is_empty() {
            lists.push(fusion::merge_branch(Branch::Lexical, lexical).of_query(q.tag, q.weight));
        }
    }
    Ok(Round { lists, saturated, frontiers })
}

/// Which of these (source, item id, parent id) are queued for re-embedding: one lookup of the
/// queue.
pub(super) fn queued<'a>(
    req: &Request,
    items: impl Iterator<Item = (usize, &'a str, &'a str)>,
    exec: &mut dyn Executor,
) -> Result<HashSet<(usize, String)>> {
    let mut per_source: Vec<Vec<(String, String)>> = vec![Vec::new(); req.corpus.sources.len()];
    for (source, id, parent) in items {
        per_source[source].push((id.to_string(), parent.to_string()));
    }
    let lookups: Vec<(usize, Vec<(String, String)>)> =
        per_source.into_iter().enumerate().filter(|(_, ids)| !ids.is_empty()).collect();
    if lookups.is_empty() {
        return Ok(HashSet::new());
    }
    let mut out = HashSet::new();
    for lookup in plan::queued_items(&req.corpus, &lookups) {
        out.extend(exec.queued_items(&lookup)?);
    }
    Ok(out)
}

/// The item ids of `hits` grouped by source, in hit order, for the sources that have any.
pub(super) fn ids_per_source<'a>(
    hits: impl Iterator<Item = &'a Fused>,
    n_sources: usize,
) -> impl Iterator<Item = (usize, Vec<String>)> {
    let mut ids = vec![Vec::new(); n_sources];
    for h in hits {
        ids[h.source].push(h.item_id.clone());
    }
    ids.into_iter().enumerate().filter(|(_, ids)| !ids.is_empty())
}
