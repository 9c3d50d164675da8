//! Running a [`Request`]: planning each source's branches, the rounds (window widening and the
//! feedback round), fusion, capping and the final fetch.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::request::LexicalPlans;
use super::{settings, ChampionRequest, Executor, FeedbackDoc, Request, Setting};
use crate::error::Result;
use crate::feedback;
use crate::filters::Condition;
use crate::fusion::{self, Fused, QueryHit, QueryTag, RankedList, SourceInfo};
use crate::lexical::{self, CandidatePlan, ChampionHead};
use crate::plan::{self, Branch, Strategy, Subplan};
use crate::resolve::Corpus;
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
    vector: Option<&'a [f32]>,
    text: Option<&'a str>,
    lexical: Option<&'a LexicalPlans>,
}

impl Request {
    fn query(&self) -> RoundQuery<'_> {
        RoundQuery {
            tag: QueryTag::Original,
            weight: 1.0,
            vector: self.vector.as_deref(),
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
        if let Some(v) = q.vector {
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

/// One round: every subplan of every query with `window` rows, each branch's per-source lists
/// of a query merged into a corpus-wide list (semantic, then lexical, per query, in query
/// order). Also says whether another round with a wider window could find more.
fn run_round(
    req: &Request,
    queries: &[RoundQuery],
    sem: &[SemanticPlan],
    window: usize,
    exec: &mut dyn Executor,
) -> Result<(Vec<RankedList>, bool)> {
    // per query: (its semantic per-source lists, its lexical ones)
    let mut per_query: Vec<(Vec<Vec<fusion::Hit>>, Vec<Vec<fusion::Hit>>)> = Vec::with_capacity(queries.len());
    // A source that filled its window may hold more eligible items beyond it; so may a pruned
    // lexical subplan that returned fewer rows than the window (a wider window, and so a larger
    // candidate budget, can find them). Counted before stale embeddings are dropped.
    let mut saturated = false;
    for &q in queries {
        let (mut semantic, mut lexical) = (Vec::new(), Vec::new());
        for p in subplans(req, q, sem, window, exec)? {
            let settings = subplan_settings(req, sem, &p, window);
            let hits = exec.branch_hits(&p, &settings)?;
            saturated |= fusion::may_hold_more(hits.len(), window, p.pruned);
            match p.branch {
                Branch::Semantic => semantic.push(hits),
                Branch::Lexical => lexical.push(hits),
            }
        }
        per_query.push((semantic, lexical));
    }
    if !req.include_stale {
        // stale embeddings are not used by the semantic branch (PRODUCT.md invariant 5): one
        // lookup of the queue for the semantic hits of every query
        let all = per_query.iter().flat_map(|(s, _)| s.iter().flatten());
        let stale = queued(req, all.map(|h| (h.source, h.item_id.as_str())), exec)?;
        if !stale.is_empty() {
            for hits in per_query.iter_mut().flat_map(|(s, _)| s.iter_mut()) {
                hits.retain(|h| !stale.contains(&(h.source, h.item_id.clone())));
            }
        }
    }
    let mut lists = Vec::new();
    for (q, (semantic, lexical)) in queries.iter().zip(per_query) {
        for (branch, per_source) in [(Branch::Semantic, semantic), (Branch::Lexical, lexical)] {
            if !per_source.is_empty() {
                lists.push(fusion::merge_branch(branch, per_source).of_query(q.tag, q.weight));
            }
        }
    }
    Ok((lists, saturated))
}

/// Which of these (source, item id) are queued for re-embedding: one lookup of the queue.
fn queued<'a>(
    req: &Request,
    items: impl Iterator<Item = (usize, &'a str)>,
    exec: &mut dyn Executor,
) -> Result<HashSet<(usize, String)>> {
    let mut per_source: Vec<Vec<String>> = vec![Vec::new(); req.corpus.sources.len()];
    for (source, id) in items {
        per_source[source].push(id.to_string());
    }
    let lookups: Vec<(usize, Vec<String>)> =
        per_source.into_iter().enumerate().filter(|(_, ids)| !ids.is_empty()).collect();
    if lookups.is_empty() {
        return Ok(HashSet::new());
    }
    let (sql, params) = plan::queued_items(&req.corpus, &lookups);
    Ok(exec.queued_items(&sql, &params)?.into_iter().collect())
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
    let vectors: Vec<Vec<f32>> = docs.iter().take(feedback::VECTOR_DOCS).filter_map(|d| d.embedding.clone()).collect();
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
        text: req.text.as_deref(),
        lexical: Some(&expanded),
    };
    run_round(req, &[q], sem, window, exec)
}

/// One hit of a search, with its provenance (`corpus_hybrid_search`'s row).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRow {
    pub rank: i32,
    pub source: String,
    pub item_id: String,
    pub parent_id: String,
    pub score: f64,
    pub semantic_rank: Option<i32>,
    pub semantic_distance: Option<f64>,
    pub lexical_rank: Option<i32>,
    pub lexical_score: Option<f64>,
    pub content: Option<String>,
    pub locator: Value,
    pub metadata: Value,
    pub embedding_stale: bool,
    /// Every query and branch that ranked the hit: `[{"query", "branch", "rank", "distance" |
    /// "score"}]`, in fusion order.
    pub query_ranks: Value,
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
    loop {
        let (lists, saturated) = run_round(req, &queries, &sem, window, exec)?;
        let (lists, saturated) = if req.feedback {
            let first = fusion::rrf(&lists, &sources, req.rrf_k);
            let (more, more_saturated) = feedback_round(req, &sem, window, &first, exec)?;
            // RRF(feedback vector, first lexical list, feedback lexical list, extra queries'
            // lists): the feedback vector replaces the original one
            let (original, extra): (Vec<RankedList>, Vec<RankedList>) =
                lists.into_iter().partition(|l| l.query == QueryTag::Original);
            let mut fused_lists: Vec<RankedList> =
                more.iter().filter(|l| l.branch == Branch::Semantic).cloned().collect();
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
        let rows = fusion::cap(&fused, req.max_per_parent, req.k);
        if window >= max_window || !fusion::needs_wider_window(rows.len(), req.k, saturated) {
            return Ok(rows);
        }
        window = window.saturating_mul(4).min(max_window);
    }
}

/// Run a search: its hits with content and provenance, fetched per source under the same
/// predicate and filters.
pub fn search(req: &Request, exec: &mut dyn Executor) -> Result<Vec<SearchRow>> {
    let rows = ranked(req, exec)?;
    // hits the semantic branch kept are known fresh (it dropped the stale ones); the others
    // are looked up
    let unknown = rows.iter().filter(|f| req.include_stale || f.semantic.is_none());
    let stale = queued(req, unknown.map(|f| (f.source, f.item_id.as_str())), exec)?;
    let mut fetched = HashMap::new();
    for (idx, ids) in ids_per_source(rows.iter(), req.corpus.sources.len()) {
        let (sql, params) = plan::fetch(&req.corpus, idx, &req.conds, ids);
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
    Ok(rows)
}
