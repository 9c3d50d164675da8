//! Running a [`Request`]: planning each source's branches, the rounds (window widening and the
//! feedback round), fusion, capping and the final fetch.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::request::EvidencePlan;
use super::request::LexicalPlans;
use super::{settings, ChampionRequest, Executor, FeedbackDoc, Request, Setting};
use crate::augment;
use crate::error::Result;
use crate::evidence;
use crate::feedback;
use crate::fusion::{self, Fused, QueryHit, RankedList, SourceInfo};
use crate::lexical::{self, CandidatePlan, ChampionHead};
use crate::model::{Branch, Condition, Corpus, QueryTag, SearchRow, Strategy};
use crate::plan::{self, Subplan};
use crate::sql::Param;

/// How the semantic branch of one source runs: exact over a small slice, else the HNSW index
/// with an iterative scan sized by the slice's selectivity (docs/filtered-ann.md); and whether
/// the source's slice is empty, so that neither branch runs for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SemanticPlan {
    pub strategy: Strategy,
    pub selectivity: f64,
    /// Which probe found the slice empty (None: not empty, or not probed).
    pub empty: Option<EmptyBy>,
}

/// The probe that found a source's slice empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmptyBy {
    /// No parent is in the corpus ([`plan::parent_slice_probe`], one for all sources that share it).
    Parents,
    /// No searchable item of the source is ([`plan::slice_probe`]).
    Items,
}

impl SemanticPlan {
    pub fn is_empty(&self) -> bool {
        self.empty.is_some()
    }
}

impl EmptyBy {
    /// The probe's SQL and parameters (None: a parent probe of a source without parent-side
    /// isolation, which is never asked).
    pub fn probe(self, corpus: &Corpus, idx: usize, conds: &[Condition]) -> Option<(String, Vec<Param>)> {
        match self {
            EmptyBy::Parents => plan::parent_slice_probe(corpus, idx),
            EmptyBy::Items => Some(plan::slice_probe(corpus, idx, conds)),
        }
    }
}

/// A slice (or its parents) the planner estimates at this many rows or fewer (its minimum is 1)
/// is probed for emptiness before its subplans are planned: planning them was nearly all of the time of a
/// search of an empty corpus (docs/search-engine.md).
pub const EMPTY_PROBE_MAX_ESTIMATE: f64 = 1.0;

/// Each source's plan, from the planner's estimate of its slice: a slice of at most
/// `pg_corpus.exact_search_max_rows` items is searched exactly, unless a partial HNSW index
/// covers the corpus (its predicate implied by the corpus predicate: the planner uses it for
/// the approximate subplan), which is then faster still (1% slice of 100k × 1024-d: 0.9× an
/// unfiltered search against 3.0× exact, docs/filtered-ann.md). A slice estimated at a row
/// or less is probed, and skipped when it holds no searchable item; parents estimated at a row
/// or less are probed first, once for all the sources that share them.
pub fn semantic_plans(req: &Request, exec: &mut dyn Executor) -> Result<Vec<SemanticPlan>> {
    semantic_plans_of(req, None, exec)
}

/// [`semantic_plans`] of source `only` (None: all); the others are planned as skipped, without
/// asking the planner (a must-include class restricted to one source).
fn semantic_plans_of(req: &Request, only: Option<usize>, exec: &mut dyn Executor) -> Result<Vec<SemanticPlan>> {
    let exact_max = f64::from(req.config.exact_search_max_rows);
    // the probes' answers in this call, by query (sources sharing a parent table ask the same)
    let mut probed: Vec<((String, Vec<Param>), bool)> = Vec::new();
    let mut any_row = |probe: (String, Vec<Param>), exec: &mut dyn Executor| -> Result<bool> {
        if let Some((_, found)) = probed.iter().find(|(q, _)| *q == probe) {
            return Ok(*found);
        }
        let found = exec.any_row(&probe.0, &probe.1)?;
        probed.push((probe, found));
        Ok(found)
    };
    let mut out = Vec::with_capacity(req.table_rows.len());
    for (idx, &total) in req.table_rows.iter().enumerate() {
        if only.is_some_and(|o| o != idx) {
            out.push(SemanticPlan { strategy: Strategy::Exact, selectivity: 0.0, empty: Some(EmptyBy::Items) });
            continue;
        }
        if req.corpus.sources[idx].distributed() {
            // Citus: the planner's estimate of a distributed table is Citus' constant, so the
            // slice is counted (up to the exact-search limit, each shard stopping there).
            // Emptiness is not judged from it (the executor may memoise the count, and a
            // memoised 0 would hide new items): an empty slice's subplans return nothing.
            let cap = i64::from(req.config.exact_search_max_rows).saturating_add(1);
            let (sql, params) = plan::slice_count(&req.corpus, idx, &req.conds, cap);
            let slice = exec.count_rows(&sql, &params)?;
            let strategy = if req.any_vector() && slice > exact_max { Strategy::Approximate } else { Strategy::Exact };
            out.push(SemanticPlan { strategy, selectivity: 1.0, empty: None });
            continue;
        }
        // the planner's minimum estimate for the parents (a value the statistics do not know)
        // says they may be empty
        let parent_probe = plan::parent_slice_probe(&req.corpus, idx);
        let parents = match (&parent_probe, plan::parent_slice_estimate(&req.corpus, idx)) {
            (Some(_), Some((sql, params))) => exec.estimate_rows(&sql, &params)?,
            _ => f64::INFINITY,
        };
        if parents <= EMPTY_PROBE_MAX_ESTIMATE {
            if let Some(probe) = parent_probe {
                if !any_row(probe, exec)? {
                    out.push(SemanticPlan {
                        strategy: Strategy::Exact,
                        selectivity: 0.0,
                        empty: Some(EmptyBy::Parents),
                    });
                    continue;
                }
            }
        }
        let (sql, params) = plan::slice_estimate(&req.corpus, idx, &req.conds);
        let slice = exec.estimate_rows(&sql, &params)?;
        let selectivity = if total > 0.0 { (slice / total).clamp(1e-6, 1.0) } else { 1.0 };
        let empty = (slice <= EMPTY_PROBE_MAX_ESTIMATE || parents <= EMPTY_PROBE_MAX_ESTIMATE)
            && !any_row(plan::slice_probe(&req.corpus, idx, &req.conds), exec)?;
        let strategy = if !req.any_vector() || empty {
            Strategy::Exact
        } else if slice > exact_max || covered_by_partial_index(req, idx, selectivity, exec)? {
            Strategy::Approximate
        } else {
            Strategy::Exact
        };
        out.push(SemanticPlan { strategy, selectivity, empty: empty.then_some(EmptyBy::Items) });
    }
    Ok(out)
}

/// Whether the planner serves source `idx`'s approximate subplan with a partial HNSW index.
/// Asked with a fixed probe vector (the index choice does not depend on it), so that the
/// executor can memoise the answer per corpus and filters.
fn covered_by_partial_index(req: &Request, idx: usize, selectivity: f64, exec: &mut dyn Executor) -> Result<bool> {
    let (p, settings) =
        partial_index_probe(&req.corpus, idx, &req.conds, req.window, selectivity, req.config.ann_max_scan_tuples);
    exec.served_by_partial_index(&p, &settings)
}

/// The approximate subplan (with a fixed probe vector) and the settings under which the planner
/// is asked whether a partial HNSW index serves source `idx` (the search and the health check).
pub fn partial_index_probe(
    corpus: &Corpus,
    idx: usize,
    conds: &[Condition],
    window: usize,
    selectivity: f64,
    max_scan_tuples: i32,
) -> (Subplan, Vec<Setting>) {
    let dims = corpus.sources[idx].dimensions.max(1) as usize;
    let probe = vec![(1.0 / dims as f64).sqrt() as f32; dims];
    let p = plan::semantic(corpus, idx, conds, &probe, window as i64, Strategy::Approximate);
    (p, settings::ann(window, selectivity, max_scan_tuples))
}

/// What one round searches for: the request's query, one of its extra queries, or feedback's
/// moved one.
#[derive(Clone, Copy)]
struct RoundQuery<'a> {
    tag: QueryTag,
    weight: f64,
    /// The default space's vector.
    vector: Option<&'a [f32]>,
    /// The named spaces' vectors, by space index (the original query's only).
    space_vectors: &'a [Option<Vec<f32>>],
    text: Option<&'a str>,
    lexical: Option<&'a LexicalPlans>,
}

impl RoundQuery<'_> {
    /// The query's vector for sources of space `space` (None: they are not searched
    /// semantically).
    fn vector_for(&self, space: usize) -> Option<&[f32]> {
        if space == 0 {
            self.vector
        } else {
            self.space_vectors.get(space).and_then(|v| v.as_deref())
        }
    }
}

impl Request {
    fn query(&self) -> RoundQuery<'_> {
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
    fn queries(&self) -> Vec<RoundQuery<'_>> {
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
    fn budget(&self, lex: &LexicalPlans, window: usize) -> u64 {
        let base = match u64::try_from(self.config.bm25_candidate_budget) {
            Ok(b) if b >= 1 => b,
            _ => lexical::auto_candidate_budget(lex.corpus.n_docs),
        };
        base.saturating_mul((window / self.window.max(1)).max(1) as u64)
    }
}

/// Each source's BM25 candidate plan for `budget`; for a plan with champion lists, the items of
/// their heads that can reach the top `window` ([`lexical::preselect`]), read for all sources
/// in one round trip.
fn candidate_plans(
    req: &Request,
    lex: &LexicalPlans,
    budget: u64,
    window: usize,
    exec: &mut dyn Executor,
) -> Result<Vec<Option<CandidatePlan>>> {
    let mut plans: Vec<Option<CandidatePlan>> = lex
        .keys_per_source
        .iter()
        .map(|keys| lexical::candidate_plan(keys, |key| lex.df(key), lex.corpus.n_docs, budget, req.k))
        .collect();
    let wanting: Vec<usize> =
        (0..plans.len()).filter(|&i| plans[i].as_ref().is_some_and(|p| !p.champions.is_empty())).collect();
    if wanting.is_empty() {
        return Ok(plans);
    }
    let requests: Vec<ChampionRequest> = wanting
        .iter()
        .map(|&i| {
            let p = plans[i].as_ref().expect("filtered above");
            ChampionRequest {
                source: req.corpus.sources[i].name.clone(),
                terms: p.champions.clone(),
                prefix: p.champion_prefix,
            }
        })
        .collect();
    let answers = exec.champion_heads(&req.corpus.name, &requests)?;
    let mut answers = answers.into_iter();
    for &idx in &wanting {
        let lists = answers.next().unwrap_or_default();
        let Some(p) = plans[idx].as_mut() else { continue };
        let unlisted_keys: Vec<String> =
            p.champions.iter().filter(|k| !lists.iter().any(|l| &l.term == *k)).cloned().collect();
        lexical::through_index(p, &unlisted_keys, |key| lex.df(key));
        let weight = |key: &str| p.scored.iter().find(|k| k.key == key).map_or(0.0, |k| k.weight_idf);
        let heads: Vec<ChampionHead> = lists
            .into_iter()
            .map(|l| ChampionHead { weight_idf: weight(&l.term), items: l.items, impacts: l.impacts })
            .collect();
        // keys found through the index can add at most k1 + 1 times their weight
        let unlisted: f64 = p
            .scored
            .iter()
            .filter(|k| !p.champions.contains(&k.key))
            .map(|k| k.weight_idf.max(0.0) * (lex.params.k1 + 1.0))
            .sum();
        p.champion_items = lexical::preselect(&heads, unlisted, window, budget as usize);
    }
    Ok(plans)
}

/// Every subplan of one round, in source order (semantic, then lexical, per source).
fn subplans(
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

fn subplan_settings(req: &Request, sem: &[SemanticPlan], p: &Subplan, window: usize) -> Vec<Setting> {
    let selectivity = sem.get(p.source).map_or(1.0, |s| s.selectivity);
    // BM25 settings for every BM25 subplan: the original query's or an extra query's
    settings::for_subplan(p, window, selectivity, req.config.scorer == super::Scorer::Bm25, &req.config)
}

/// The end of one per-source list of a round's original query: whether the list filled its
/// window (or was a pruned lexical subplan), and its last hit. The evidence filter widens the
/// window only while such a list's last hit still has evidence.
#[derive(Debug, Clone)]
struct Frontier {
    branch: Branch,
    space: usize,
    full: bool,
    last: Option<crate::model::Hit>,
}

/// What one round found: the ranked lists, whether a wider window could find more, and the
/// original query's per-source list ends.
struct Round {
    lists: Vec<RankedList>,
    saturated: bool,
    frontiers: Vec<Frontier>,
}

/// One query's lists: its semantic lists, each with its space, and its lexical ones.
type QueryLists = (Vec<(usize, Vec<crate::model::Hit>)>, Vec<Vec<crate::model::Hit>>);

/// One round: every subplan of every query with `window` rows, each branch's per-source lists
/// of a query merged into a corpus-wide list (semantic, then lexical, per query, in query
/// order). Also says whether another round with a wider window could find more.
fn run_round(
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
fn queued<'a>(
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
fn ids_per_source<'a>(
    hits: impl Iterator<Item = &'a Fused>,
    n_sources: usize,
) -> impl Iterator<Item = (usize, Vec<String>)> {
    let mut ids = vec![Vec::new(); n_sources];
    for h in hits {
        ids[h.source].push(h.item_id.clone());
    }
    ids.into_iter().enumerate().filter(|(_, ids)| !ids.is_empty())
}

/// The feedback round: the query vector moved towards the first fusion's best items (vector
/// PRF) and the lexical query expanded with their relevance model (RM3), both searched with
/// the same window ([`crate::feedback`]).
fn feedback_round(
    req: &Request,
    sem: &[SemanticPlan],
    window: usize,
    first: &[Fused],
    exec: &mut dyn Executor,
) -> Result<(Vec<RankedList>, bool)> {
    let (Some(vector), Some(lex)) = (&req.vector, &req.lexical) else {
        return Ok((Vec::new(), false));
    };
    let top: Vec<&Fused> = first.iter().take(feedback::RM3_DOCS.max(feedback::VECTOR_DOCS)).collect();
    let mut learned: HashMap<(usize, String), FeedbackDoc> = HashMap::new();
    for (idx, ids) in ids_per_source(top.iter().copied(), req.corpus.sources.len()) {
        let (sql, params) = plan::feedback_fetch(&req.corpus, idx, &req.conds, ids);
        for (id, doc) in exec.feedback_docs(&sql, &params)? {
            learned.insert((idx, id), doc);
        }
    }
    let docs: Vec<&FeedbackDoc> = top.iter().filter_map(|f| learned.get(&(f.source, f.item_id.clone()))).collect();
    // the query vector moves towards the best items of its own (default) space only
    let vectors: Vec<Vec<f32>> = top
        .iter()
        .filter(|f| req.corpus.sources[f.source].space == 0)
        .filter_map(|f| learned.get(&(f.source, f.item_id.clone())))
        .take(feedback::VECTOR_DOCS)
        .filter_map(|d| d.embedding.clone())
        .collect();
    let moved = feedback::vector_prf(vector, &vectors, feedback::VECTOR_BETA).unwrap_or_else(|| vector.clone());
    let tfs: Vec<_> = docs.iter().take(feedback::RM3_DOCS).map(|d| d.tf.clone()).collect();
    let mut expanded = lex.clone();
    expanded.keys_per_source = lex
        .keys_per_source
        .iter()
        .map(|keys| feedback::rm3(keys, &tfs, feedback::RM3_TERMS, feedback::RM3_ALPHA))
        .collect();
    let mut new_keys: Vec<String> = expanded
        .keys_per_source
        .iter()
        .flatten()
        .filter(|k| !lex.stats.df.contains_key(&k.key))
        .map(|k| k.key.clone())
        .collect();
    new_keys.sort();
    new_keys.dedup();
    if !new_keys.is_empty() {
        let more = exec.term_stats(&req.corpus.name, &new_keys)?;
        expanded.stats.df.extend(more.df);
    }
    let q = RoundQuery {
        tag: QueryTag::Feedback,
        weight: 1.0,
        vector: Some(&moved),
        space_vectors: &[],
        text: req.text.as_deref(),
        lexical: Some(&expanded),
    };
    let round = run_round(req, &[q], sem, window, exec)?;
    Ok((round.lists, round.saturated))
}

/// `query_ranks` of a hit: the label of each query that ranked it, with the branch, rank and
/// raw value.
pub fn query_ranks(req: &Request, hits: &[QueryHit]) -> Value {
    Value::Array(
        hits.iter()
            .map(|h| {
                let mut o = serde_json::Map::new();
                o.insert("query".into(), Value::from(req.label(h.query)));
                o.insert("branch".into(), Value::from(h.branch.name()));
                o.insert("rank".into(), Value::from(h.rank as u64));
                if h.space != 0 {
                    o.insert("space".into(), Value::from(req.corpus.spaces[h.space].name.as_str()));
                }
                let raw = serde_json::Number::from_f64(h.raw).map_or(Value::Null, Value::Number);
                o.insert(if h.branch == Branch::Semantic { "distance" } else { "score" }.into(), raw);
                Value::Object(o)
            })
            .collect(),
    )
}

fn source_infos(req: &Request) -> Vec<SourceInfo> {
    req.corpus
        .sources
        .iter()
        .map(|s| SourceInfo {
            parent_scope: s.parent_scope.clone(),
            semantic_weight: s.semantic_weight,
            lexical_weight: s.lexical_weight,
        })
        .collect()
}

/// The fused, capped hits of a request (before the final fetch).
pub fn ranked(req: &Request, exec: &mut dyn Executor) -> Result<Vec<Fused>> {
    let sem = semantic_plans(req, exec)?;
    let max_window = (req.config.max_candidates.max(1) as usize).max(req.window);
    let sources = source_infos(req);
    let mut window = req.window;
    let queries = req.queries();
    // the evidence filter's index terms of the items it has checked, across rounds
    let mut item_keys: HashMap<(usize, String), Vec<String>> = HashMap::new();
    loop {
        let Round { lists, saturated, frontiers } = run_round(req, &queries, &sem, window, exec)?;
        let near = req.evidence.as_ref().map(|_| Near::of(&lists));
        let (lists, saturated) = if req.feedback {
            let first = fusion::rrf(&lists, &sources, req.rrf_k);
            let (more, more_saturated) = feedback_round(req, &sem, window, &first, exec)?;
            // RRF(feedback vector, first lexical list, feedback lexical list, extra queries'
            // lists): the feedback vector replaces the original one
            let (original, extra): (Vec<RankedList>, Vec<RankedList>) =
                lists.into_iter().partition(|l| l.query == QueryTag::Original);
            let mut fused_lists: Vec<RankedList> =
                more.iter().filter(|l| l.branch == Branch::Semantic).cloned().collect();
            // (the moved vector is the default space's: other spaces keep their first list)
            fused_lists.extend(original.iter().filter(|l| l.branch == Branch::Semantic && l.space != 0).cloned());
            fused_lists.extend(original.into_iter().filter(|l| l.branch == Branch::Lexical));
            fused_lists.extend(more.into_iter().filter(|l| l.branch == Branch::Lexical));
            fused_lists.extend(extra);
            (fused_lists, saturated || more_saturated)
        } else {
            (lists, saturated)
        };
        let mut fused = fusion::rrf(&lists, &sources, req.rrf_k);
        if !req.exclude_items.is_empty() || req.exclude_parent.is_some() {
            fused.retain(|f| !req.excludes(f));
        }
        let saturated = match (&req.evidence, &near) {
            (Some(ev), Some(near)) => apply_evidence(req, ev, near, &frontiers, &mut fused, &mut item_keys, exec)?,
            _ => saturated,
        };
        let rows = fusion::cap(&fused, req.max_per_parent, req.k);
        if window >= max_window || !fusion::needs_wider_window(rows.len(), req.k, saturated) {
            let mut rows = if req.expand { expand(req, rows, exec)? } else { rows };
            if req.must_include && !req.corpus.must_include.is_empty() {
                let mut near = near;
                must_include(req, &mut rows, &fused, near.as_mut(), &mut item_keys, exec)?;
            }
            return Ok(rows);
        }
        window = window.saturating_mul(4).min(max_window);
    }
}

/// Citation-graph expansion: the forward neighbours of the best hits join them,
/// each scored its seed's score times `1 - hop_penalty`, at most `max_added`, every one looked
/// up under the corpus predicate and the filters; then the hits are capped and cut to k again.
fn expand(req: &Request, rows: Vec<Fused>, exec: &mut dyn Executor) -> Result<Vec<Fused>> {
    let limits = req.corpus.graph;
    let seeds: Vec<augment::Seed> = rows
        .iter()
        .take(limits.seeds)
        .map(|f| augment::Seed { source: f.source, item_id: f.item_id.clone(), score: f.score })
        .collect();
    let mut neighbours = Vec::new();
    for (e, edges) in req.corpus.edges.iter().enumerate() {
        let ids: Vec<String> =
            seeds.iter().filter(|s| s.source == edges.from_source).map(|s| s.item_id.clone()).collect();
        if ids.is_empty() {
            continue;
        }
        let exclude: Vec<String> =
            rows.iter().filter(|f| f.source == edges.to_source).map(|f| f.item_id.clone()).collect();
        let (sql, params) = plan::graph_neighbours(&req.corpus, e, &req.conds, ids, exclude, limits.max_added as i64);
        for (seed, item_id, parent_id) in exec.neighbours(&sql, &params)? {
            // the seed's stored id as text: find its rank among the seeds of this source
            let Some(si) = seeds.iter().position(|s| s.source == edges.from_source && s.item_id == seed) else {
                continue;
            };
            neighbours.push(augment::Neighbour { edges: e, seed: si, source: edges.to_source, item_id, parent_id });
        }
    }
    let present = |source: usize, id: &str| rows.iter().any(|f| f.source == source && f.item_id == id);
    let added = augment::expansion(&seeds, neighbours, present, &limits);
    let infos = source_infos(req);
    let mut all = rows.clone();
    for a in added {
        let n = a.neighbour;
        let seed = &seeds[n.seed];
        let via = serde_json::json!({
            "edges": req.corpus.edges[n.edges].name,
            "seed": {"source": req.corpus.sources[seed.source].name, "item_id": seed.item_id},
            "hop_penalty": limits.hop_penalty,
        });
        let f = Fused {
            source: n.source,
            parent_scope: infos[n.source].parent_scope.clone(),
            item_id: n.item_id,
            parent_id: n.parent_id,
            score: a.score,
            semantic: None,
            lexical: None,
            queries: Vec::new(),
            // admitted by its edge from an admitted seed, not by evidence of its own
            evidence: req.evidence.as_ref().map(|_| serde_json::json!({"graph_edge": via.clone()})),
            origin: Some(serde_json::json!({"kind": "graph", "graph": via})),
        };
        if !req.excludes(&f) {
            all.push(f);
        }
    }
    all.sort_by(fusion::fused_order);
    Ok(fusion::cap(&all, req.max_per_parent, req.k))
}

/// Must-include classes: each class's best hits — searched
/// by the original query under the corpus predicate, the filters and the class's own condition —
/// are among the rows, replacing the lowest-ranked others. A class hit the search ranked keeps
/// its score; one it did not scores 0 and comes last. The evidence filter, when on, judges class
/// hits as any other (a class is a candidate, not an answer).
fn must_include(
    req: &Request,
    rows: &mut Vec<Fused>,
    pool: &[Fused],
    mut near: Option<&mut Near>,
    cache: &mut HashMap<(usize, String), Vec<String>>,
    exec: &mut dyn Executor,
) -> Result<()> {
    let infos = source_infos(req);
    let mut guaranteed: Vec<(usize, String)> = Vec::new();
    for class in &req.corpus.must_include {
        let mut creq = req.clone();
        creq.conds.extend(crate::filters::check_class(&req.corpus, &class.filters)?);
        creq.extra.clear();
        creq.feedback = false;
        let window = (4 * class.top).max(20);
        let csem = semantic_plans_of(&creq, class.source, exec)?;
        let round = run_round(&creq, &[creq.query()], &csem, window, exec)?;
        let mut class_hits = fusion::rrf(&round.lists, &infos, req.rrf_k);
        class_hits.retain(|f| !req.excludes(f));
        if let (Some(ev), Some(near)) = (&req.evidence, near.as_deref_mut()) {
            near.add(&round.lists, false);
            apply_evidence(&creq, ev, near, &[], &mut class_hits, cache, exec)?;
        }
        for (i, hit) in fusion::cap(&class_hits, req.max_per_parent, class.top).into_iter().enumerate() {
            let key = (hit.source, hit.item_id.clone());
            if guaranteed.contains(&key) {
                continue;
            }
            guaranteed.push(key.clone());
            if rows.iter().any(|f| f.source == hit.source && f.item_id == hit.item_id) {
                continue;
            }
            let origin = serde_json::json!({"kind": "must_include", "class": class.name, "class_rank": i + 1});
            let row = match pool.iter().find(|f| f.source == hit.source && f.item_id == hit.item_id) {
                Some(f) => {
                    Fused { origin: Some(origin), evidence: hit.evidence.clone().or(f.evidence.clone()), ..f.clone() }
                }
                None => Fused {
                    score: 0.0,
                    semantic: None,
                    lexical: None,
                    queries: Vec::new(),
                    origin: Some(origin),
                    ..hit
                },
            };
            rows.push(row);
        }
    }
    rows.sort_by(fusion::fused_order);
    // back to k rows: drop the lowest-ranked rows that no class guarantees, first those of a
    // parent the class hits took over the per-parent cap
    let over_cap = |rows: &[Fused], f: &Fused| {
        req.max_per_parent.is_some_and(|max| {
            rows.iter().filter(|o| o.parent_scope == f.parent_scope && o.parent_id == f.parent_id).count() > max
        })
    };
    while rows.len() > req.k {
        let free = |f: &Fused| !guaranteed.contains(&(f.source, f.item_id.clone()));
        let pick = rows.iter().rposition(|f| free(f) && over_cap(rows, f)).or_else(|| rows.iter().rposition(free));
        match pick {
            Some(i) => {
                rows.remove(i);
            }
            None => {
                rows.truncate(req.k);
            }
        }
    }
    Ok(())
}

/// The original query's semantic distances, as the evidence filter's vector rule reads them.
struct Near {
    /// (source, item id) → (space, distance).
    distance: HashMap<(usize, String), (usize, f64)>,
    /// Per space, the best candidate's distance.
    best: HashMap<usize, f64>,
}

impl Near {
    fn of(lists: &[RankedList]) -> Near {
        let mut near = Near { distance: HashMap::new(), best: HashMap::new() };
        near.add(lists, true);
        near
    }

    /// The distances of the original query's semantic lists; with `best`, they set each
    /// space's best candidate (a must-include class's lists add distances only: the best
    /// candidate stays the search's own).
    fn add(&mut self, lists: &[RankedList], best: bool) {
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
    fn admits(&self, ev: &EvidencePlan, space: usize, distance: f64) -> Option<f64> {
        let t = ev.vector.get(space)?.as_ref()?;
        let best = *self.best.get(&space)?;
        evidence::near_vector(distance, best, t).then_some(best)
    }
}

/// The evidence filter over the fused hits ([`crate::evidence`]): keep the hits
/// that a rule admits, each with its verdict. Returns whether a wider window could admit more:
/// some per-source list of the original query filled its window and its last hit still has
/// evidence (beyond a list's end, a hit is no nearer and its rare words no more telling).
fn apply_evidence(
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
        let (sql, params) = plan::item_keys(&req.corpus, idx, &req.conds, ids.clone(), keys);
        let mut found = exec.item_keys(&sql, &params)?;
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

/// Run a search: its hits with content and provenance, fetched per source under the same
/// predicate and filters.
pub fn search(req: &Request, exec: &mut dyn Executor) -> Result<Vec<SearchRow>> {
    let rows = ranked(req, exec)?;
    // hits the semantic branch kept are known fresh (it dropped the stale ones); the others
    // are looked up
    let unknown = rows.iter().filter(|f| req.include_stale || f.semantic.is_none());
    let stale = queued(req, unknown.map(|f| (f.source, f.item_id.as_str(), f.parent_id.as_str())), exec)?;
    let mut fetched = HashMap::new();
    for (idx, ids) in ids_per_source(rows.iter(), req.corpus.sources.len()) {
        // (the parents route a Citus lookup to their shards; nothing else reads them)
        let parents = if req.corpus.sources[idx].routed_by_parent() {
            rows.iter().filter(|f| f.source == idx).map(|f| f.parent_id.clone()).collect()
        } else {
            Vec::new()
        };
        let (sql, params) = plan::fetch(&req.corpus, idx, &req.conds, ids, parents);
        for row in exec.fetch_rows(&sql, &params)? {
            fetched.insert((idx, row.item_id.clone()), row);
        }
    }
    let mut out = Vec::with_capacity(rows.len());
    for f in rows {
        let embedding_stale = stale.contains(&(f.source, f.item_id.clone()));
        // An item the fetch does not return (it cannot, within one snapshot) is left out.
        let Some(row) = fetched.remove(&(f.source, f.item_id.clone())) else {
            continue;
        };
        let query_ranks = query_ranks(req, &f.queries);
        out.push(SearchRow {
            rank: out.len() as i32 + 1,
            source: req.corpus.sources[f.source].name.clone(),
            item_id: f.item_id,
            parent_id: f.parent_id,
            score: f.score,
            semantic_rank: f.semantic.map(|(r, _)| r as i32),
            semantic_distance: f.semantic.map(|(_, d)| d),
            lexical_rank: f.lexical.map(|(r, _)| r as i32),
            lexical_score: f.lexical.map(|(_, s)| s),
            content: row.content,
            locator: row.locator,
            metadata: row.metadata,
            embedding_stale,
            query_ranks,
            evidence: f.evidence,
            origin: f.origin,
        });
    }
    Ok(out)
}

/// One subplan as `corpus_explain` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExplainRow {
    pub source: String,
    pub branch: &'static str,
    pub strategy: &'static str,
    /// The subplan's SQL preceded by the `SET LOCAL` statements of its settings.
    pub sql: String,
    /// Its parameters (the query vector shown by its dimension).
    pub params: Value,
    /// The query it searches for: "original", or an extra query's label (probes: "original").
    pub query: String,
}

/// The exact SQL and parameters of every subplan a search would run first (it may repeat them
/// with a wider window to fill k rows after capping).
pub fn explain(req: &Request, exec: &mut dyn Executor) -> Result<Vec<ExplainRow>> {
    let sem = semantic_plans(req, exec)?;
    let mut plans = Vec::new();
    for q in req.queries() {
        plans.extend(subplans(req, q, &sem, req.window, exec)?.into_iter().map(|p| (q.tag, p)));
    }
    // a source whose slice the probe found empty runs no subplan: show the probe instead
    let probes: Vec<ExplainRow> = sem
        .iter()
        .enumerate()
        .filter_map(|(idx, s)| s.empty.and_then(|by| by.probe(&req.corpus, idx, &req.conds)).map(|q| (idx, q)))
        .map(|(idx, (sql, params))| ExplainRow {
            source: req.corpus.sources[idx].name.clone(),
            branch: "none",
            strategy: "empty_slice",
            sql,
            params: serde_json::to_value(&params).unwrap_or(Value::Null),
            query: req.label(QueryTag::Original).to_string(),
        })
        .collect();
    let mut rows: Vec<ExplainRow> = plans
        .into_iter()
        .map(|(tag, p)| {
            let params: Vec<Value> = p
                .params
                .iter()
                .enumerate()
                .map(|(i, param)| match (i, param, p.branch) {
                    // The query vector is long; show its dimension instead of every component.
                    (0, Param::Floats(v), Branch::Semantic) => {
                        Value::String(format!("<query vector, {} dimensions>", v.len()))
                    }
                    _ => serde_json::to_value(param).unwrap_or(Value::Null),
                })
                .collect();
            let set_local = subplan_settings(req, &sem, &p, req.window)
                .into_iter()
                .map(|s| format!("SET LOCAL {} = {};\n", s.name, crate::sql::setting_value(&s.value)))
                .collect::<String>();
            ExplainRow {
                source: req.corpus.sources[p.source].name.clone(),
                branch: p.branch.name(),
                strategy: p.strategy.name(),
                sql: format!("{set_local}{}", p.sql),
                params: Value::Array(params),
                query: req.label(tag).to_string(),
            }
        })
        .collect();
    rows.extend(probes);
    // the evidence filter's rules as each source's hits will meet them
    if let Some(ev) = &req.evidence {
        for (idx, src) in req.corpus.sources.iter().enumerate() {
            let t = ev.vector.get(src.space).and_then(Option::as_ref);
            let words: Vec<Value> = ev.words[idx]
                .iter()
                .map(|w| {
                    let df = ev.df.get(&w.key).copied().unwrap_or(0);
                    serde_json::json!({"word": w.key, "df": df, "rare": (df as f64) <= ev.rare_limit})
                })
                .collect();
            rows.push(ExplainRow {
                source: src.name.clone(),
                branch: "none",
                strategy: "evidence_filter",
                sql: String::new(),
                params: serde_json::json!({
                    "near_vector": t.map(|t| serde_json::json!({
                        "space": req.corpus.spaces[src.space].name,
                        "max_distance": t.max_distance,
                        "max_gap": t.max_gap})),
                    "rare_words": {"words": words, "rare_max_documents": ev.rare_limit, "min_coverage": ev.min_coverage},
                }),
                query: req.label(QueryTag::Original).to_string(),
            });
        }
    }
    // a corpus of several embedding spaces: say which sources a search in a semantic mode does
    // not search semantically, for want of their space's vector
    if req.corpus.spaces.len() > 1 && req.mode != super::Mode::Lexical {
        let q = req.query();
        for (idx, src) in req.corpus.sources.iter().enumerate() {
            if q.vector_for(src.space).is_none() && !sem.get(idx).is_some_and(SemanticPlan::is_empty) {
                rows.push(ExplainRow {
                    source: src.name.clone(),
                    branch: Branch::Semantic.name(),
                    strategy: "no_query_vector",
                    sql: String::new(),
                    params: serde_json::json!({"space": req.corpus.spaces[src.space].name}),
                    query: req.label(QueryTag::Original).to_string(),
                });
            }
        }
    }
    Ok(rows)
}
