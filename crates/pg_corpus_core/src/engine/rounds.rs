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

/// Whether source `idx`'s BM25 subplan ranks through its `corpus_bm25` index (on Citus, each
/// shard through its own).
pub(super) fn through_index(req: &Request, lex: &LexicalPlans, idx: usize, window: usize) -> bool {
    let src = &req.corpus.sources[idx];
    req.config.bm25_index
        && src.tsv_index
        && lexical::ranks_through_index(lex.corpus.n_docs, src.index_share(lex.corpus_share), window)
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
                    if through_index(req, lex, idx, window) {
                        out.push(plan::lexical_bm25_index(
                            &req.corpus,
                            idx,
                            &req.conds,
                            &cp.scored,
                            lex.corpus.avg_doc_len(),
                            lex.params,
                            window as i64,
                            lexical::index_page(window, req.corpus.sources[idx].index_share(lex.corpus_share)),
                        ));
                        continue;
                    }
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;

    use crate::engine::tests::fake::*;
    use crate::engine::{Config, Setting};
    use crate::model::Branch;

    #[test]
    fn hybrid_runs_both_branches_of_every_source_and_fuses_them() {
        let mut f = default_fake();
        let rows = run(&mut f, args("hybrid"), Config::default()).unwrap();
        assert_eq!(rows.len(), 10);
        let branches = f.branch_calls();
        assert_eq!(
            branches,
            vec![
                (0, Branch::Semantic, 40),
                (0, Branch::Lexical, 40),
                (1, Branch::Semantic, 40),
                (1, Branch::Lexical, 40)
            ]
        );
        // ranks are 1..=k, scores non-increasing, every hit has the provenance of a branch
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(r.rank as usize, i + 1);
            assert!(r.semantic_rank.is_some() || r.lexical_rank.is_some());
            assert_eq!(r.content.as_deref(), Some(format!("text of {}", r.item_id).as_str()));
        }
        assert!(rows.windows(2).all(|w| w[0].score >= w[1].score));
        // the legal schema's sources share case_law: at most 3 hits per parent over both
        let mut per_parent: HashMap<&str, usize> = HashMap::new();
        for r in &rows {
            *per_parent.entry(r.parent_id.as_str()).or_default() += 1;
        }
        assert!(per_parent.values().all(|&n| n <= 3), "{per_parent:?}");
        // one round trip for the statistics of all keys, one reltuples read, one fetch per source
        assert_eq!(f.calls.iter().filter(|c| matches!(c, Call::TermStats(_))).count(), 1);
        assert_eq!(f.calls.iter().filter(|c| matches!(c, Call::TableRows)).count(), 1);
        assert!(f.calls.iter().filter(|c| matches!(c, Call::Fetch(_))).count() <= 2);
    }

    #[test]
    fn extra_queries_run_their_own_branches_and_are_fused_with_the_original() {
        let mut f = default_fake();
        f.df.insert("rewrite".into(), 20);
        let mut a = args("hybrid");
        a.extra_queries = json!([{"text": "rewrite"}, {"vector": extra_json(7.0), "label": "hyde"}]);
        let rows = run(&mut f, a, Config::default()).unwrap();
        assert_eq!(rows.len(), 10);
        // per source: the original's two branches, the text query's lexical one, the vector query's
        // semantic one; every subplan of a source is the same SQL shape (one builder, one predicate)
        let branches = f.branch_calls();
        let expected = vec![
            (0, Branch::Semantic, 40),
            (0, Branch::Lexical, 40),
            (1, Branch::Semantic, 40),
            (1, Branch::Lexical, 40),
            (0, Branch::Lexical, 40),
            (1, Branch::Lexical, 40),
            (0, Branch::Semantic, 40),
            (1, Branch::Semantic, 40),
        ];
        assert_eq!(branches, expected);
        for c in &f.calls {
            if let Call::Branch { sql, .. } = c {
                assert!(sql.contains("p.\"source_kind\" = "), "every subplan carries the corpus predicate:\n{sql}");
            }
        }
        // one statistics lookup for the keys of every text; one queue lookup per round
        let stats: Vec<&Call> = f.calls.iter().filter(|c| matches!(c, Call::TermStats(_))).collect();
        assert_eq!(stats.len(), 1);
        let Call::TermStats(keys) = stats[0] else { unreachable!() };
        assert!(keys.contains(&"rewrite".to_string()) && keys.contains(&"חוזה".to_string()), "{keys:?}");
        let first_fetch = f.calls.iter().position(|c| matches!(c, Call::Fetch(_))).unwrap();
        assert_eq!(f.calls[..first_fetch].iter().filter(|c| matches!(c, Call::Queued(_))).count(), 1, "one per round");
        // provenance names the queries; the original's columns stay the original's
        for r in &rows {
            let labels: Vec<&str> =
                r.query_ranks.as_array().unwrap().iter().map(|q| q["query"].as_str().unwrap()).collect();
            assert!(labels.iter().all(|l| ["original", "extra_1", "hyde"].contains(l)), "{labels:?}");
            let own = r
                .query_ranks
                .as_array()
                .unwrap()
                .iter()
                .find(|q| q["query"] == "original" && q["branch"] == "semantic");
            assert_eq!(own.map(|q| q["rank"].as_i64().unwrap() as i32), r.semantic_rank);
        }
    }

    #[test]
    fn an_extra_querys_bm25_subplans_run_with_the_bm25_settings() {
        let mut f = default_fake();
        let mut a = args("semantic");
        a.mode = "hybrid".into();
        a.extra_queries = json!([{"text": "שכירות"}]);
        run(&mut f, a, Config::default()).unwrap();
        let lexical: Vec<&Vec<Setting>> = f
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Branch { branch: Branch::Lexical, settings, .. } => Some(settings),
                _ => None,
            })
            .collect();
        assert_eq!(lexical.len(), 2);
        assert!(lexical.iter().all(|s| s.iter().any(|x| x.name == "random_page_cost")), "{lexical:?}");
    }

    #[test]
    fn extra_queries_of_a_single_branch_mode_use_that_branch_only() {
        let mut f = default_fake();
        let mut a = args("semantic");
        a.extra_queries = json!([{"vector": extra_json(2.0), "text": "ignored here"}]);
        run(&mut f, a, Config::default()).unwrap();
        assert!(f.branch_calls().iter().all(|(_, b, _)| *b == Branch::Semantic));
        assert_eq!(f.branch_calls().len(), 4);
        assert!(!f.calls.iter().any(|c| matches!(c, Call::TermStats(_))), "no lexical side at all");
        let mut f = default_fake();
        let mut a = args("lexical");
        a.extra_queries = json!([{"text": "שכירות"}, {"text": "חוזה", "vector": extra_json(2.0)}]);
        run(&mut f, a, Config::default()).unwrap();
        assert!(f.branch_calls().iter().all(|(_, b, _)| *b == Branch::Lexical));
        assert_eq!(f.branch_calls().len(), 6);
    }

    #[test]
    fn stale_embeddings_are_dropped_from_the_semantic_branch_only_and_flagged() {
        let mut f = default_fake();
        let nearest: Vec<String> = f.items[0].iter().take(5).map(|i| i.id.clone()).collect();
        f.stale = nearest.clone();
        let mut a = args("hybrid");
        a.max_per_parent = Some(0);
        a.k = 200;
        let rows = run(&mut f, a.clone(), Config::default()).unwrap();
        assert!(rows.iter().any(|r| r.embedding_stale), "the stale items are found by their text");
        for r in &rows {
            let stale = nearest.contains(&r.item_id);
            assert_eq!(r.embedding_stale, stale, "{r:?}");
            if stale {
                assert!(r.semantic_rank.is_none() && r.lexical_rank.is_some(), "found by its text only");
            }
        }
        // one lookup per round and one for the final rows the semantic branch did not vouch for
        let lookups: Vec<usize> = f
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Queued(n) => Some(*n),
                _ => None,
            })
            .collect();
        let lexical_only = rows.iter().filter(|r| r.semantic_rank.is_none()).count();
        assert_eq!(lookups, vec![1600, lexical_only], "the round's 2 x 800 semantic hits, then the lexical-only rows");
        a.include_stale = true;
        let mut f2 = default_fake();
        f2.stale = nearest.clone();
        let rows = run(&mut f2, a, Config::default()).unwrap();
        assert!(rows.iter().any(|r| nearest.contains(&r.item_id) && r.semantic_rank == Some(1) && r.embedding_stale));
        assert_eq!(f2.calls.iter().filter(|c| matches!(c, Call::Queued(_))).count(), 1, "only the final rows");
    }

    #[test]
    fn hits_ranked_without_their_embeddings_are_counted_for_the_notice() {
        let outcome = |mode: &str, include_stale: bool| {
            let mut f = default_fake();
            f.stale = f.items[0].iter().take(5).map(|i| i.id.clone()).collect();
            let mut a = args(mode);
            (a.max_per_parent, a.k, a.include_stale) = (Some(0), 200, include_stale);
            crate::engine::run(corpus(), crate::engine::Call::Search(a), Config::default(), &mut f).unwrap()
        };
        let hybrid = outcome("hybrid", false);
        let expected = hybrid.rows.iter().filter(|r| r.embedding_stale).count();
        assert!(expected > 0 && hybrid.unembedded_hits == expected);
        let (message, detail, hint) =
            crate::engine::unembedded_notice("c", hybrid.unembedded_hits, hybrid.rows.len()).unwrap();
        assert!(message.starts_with(&format!("{expected} of the 200 hits")), "{message}");
        assert!(detail.contains("unembedded_hits") && hint.contains("include_stale => true"));
        // a lexical search has no semantic branch to miss them; include_stale ranks them
        assert_eq!(outcome("lexical", false).unembedded_hits, 0);
        assert_eq!(outcome("hybrid", true).unembedded_hits, 0);
        assert!(crate::engine::unembedded_notice("c", 0, 10).is_none());
    }

    #[test]
    fn a_pruned_lexical_subplan_that_came_back_short_is_replanned_with_a_larger_budget() {
        // every document holds only the common key: the plan is pruned (champion lists) and the
        // fake returns only half of the matches for a pruned plan
        let mut f = Fake::new(vec![items(0, 30, 1), items(1, 0, 1)]);
        f.df = [("שכירות".to_string(), 3000u64), ("חוזה".to_string(), 2500)].into_iter().collect();
        let mut a = args("lexical");
        a.k = 20;
        let rows = run(&mut f, a, Config::default()).unwrap();
        let limits: Vec<i64> = f.branch_calls().iter().filter(|c| c.0 == 0).map(|c| c.2).collect();
        // window 80 (4k), budget 2000: both keys common (champion lists), 15 of 30 found; window
        // 320, budget 8000: both keys find candidates through the index, all 30 found
        assert_eq!(limits, vec![80, 320]);
        assert_eq!(rows.len(), 20);
        assert!(f.calls.iter().any(|c| matches!(c, Call::Champions(_))), "champion heads were read");
    }

    #[test]
    fn a_corpus_with_many_parents_checks_its_predicate_after_ranking() {
        // 47.5% of a table: 47,500 parents (the estimate) make joining them dearer than scoring
        // the other corpus' matches; 4,750 do not
        for (parents, after_ranking) in [(47_500.0, true), (4_750.0, false)] {
            let mut f = default_fake();
            f.df = [("חוזה".to_string(), 1500u64), ("שכירות".to_string(), 400_000)].into_iter().collect();
            f.documents = 475_000;
            f.table_rows = vec![1_000_000.0, 1_000_000.0];
            f.parent_rows = parents;
            run(&mut f, args("lexical"), Config::default()).unwrap();
            let sql = f
                .calls
                .iter()
                .find_map(|c| match c {
                    Call::Branch { branch: Branch::Lexical, sql, .. } => Some(sql.clone()),
                    _ => None,
                })
                .unwrap();
            assert_eq!(sql.contains("WHERE EXISTS (SELECT 1"), after_ranking, "{parents} parents: {sql}");
        }
    }
}
