//! The feedback round: pseudo-relevance feedback from the first fusion's best items.

use std::collections::HashMap;

use super::ItemsQuery;
use super::{
    rounds::{ids_per_source, run_round, RoundQuery},
    Executor, FeedbackDoc, Request, SemanticPlan,
};
use crate::error::Result;
use crate::feedback;
use crate::fusion::{Fused, RankedList};
use crate::model::QueryTag;
use crate::plan::{self};

/// The feedback round: the query vector moved towards the first fusion's best items (vector
/// PRF) and the lexical query expanded with their relevance model (RM3), both searched with
/// the same window ([`crate::feedback`]).
pub(super) fn feedback_round(
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
        let lookup = plan::feedback_fetch(&req.corpus, idx, &req.conds, ids.clone());
        for (id, doc) in exec.feedback_docs(&ItemsQuery::new(&req.corpus, idx, ids, lookup))? {
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
    let params = req.corpus.ranking.feedback_params();
    let moved = feedback::vector_prf(vector, &vectors, params.beta).unwrap_or_else(|| vector.clone());
    let tfs: Vec<_> = docs.iter().take(feedback::RM3_DOCS).map(|d| d.tf.clone()).collect();
    let mut expanded = lex.clone();
    expanded.keys_per_source =
        lex.keys_per_source.iter().map(|keys| feedback::rm3(keys, &tfs, params.terms, params.alpha)).collect();
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;

    use crate::engine::tests::fake::*;
    use crate::engine::{Args, Config};
    use crate::error::SqlState;

    #[test]
    fn feedback_learns_from_the_first_fusions_top_and_moves_the_query() {
        let mut f = default_fake();
        let mut a = args("hybrid");
        a.feedback = Some(true);
        let rows = run(&mut f, a, Config::default()).unwrap();
        assert_eq!(rows.len(), 10);
        let fed: Vec<String> = f
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Feedback(ids) => Some(ids.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(fed.len(), crate::feedback::RM3_DOCS, "the first fusion's top 10 items");
        let vectors = f.semantic_vectors();
        assert_eq!(vectors.len(), 4, "two rounds of two sources");
        assert_eq!(vectors[0], vec384()[0]);
        assert_ne!(vectors[2], vectors[0], "the feedback round searches with the moved vector");
        // the expanded query's new keys are looked up once more
        assert_eq!(f.calls.iter().filter(|c| matches!(c, Call::TermStats(_))).count(), 2);
    }

    #[test]
    fn feedback_by_setting_applies_only_where_it_can() {
        let mut f = default_fake();
        let config = Config { hybrid_feedback: true, ..Config::default() };
        run(&mut f, args("semantic"), config.clone()).unwrap();
        assert!(!f.calls.iter().any(|c| matches!(c, Call::Feedback(_))));
        let mut a = args("semantic");
        a.feedback = Some(true);
        let e = run(&mut default_fake(), a, config).unwrap_err();
        assert_eq!(e.state, SqlState::InvalidParameterValue);
    }

    /// A row as the comparisons see it: source, item, score, semantic and lexical rank.
    type Key = (String, String, f64, Option<i32>, Option<i32>);

    fn key(rows: Vec<crate::model::SearchRow>) -> Vec<Key> {
        rows.into_iter().map(|r| (r.source, r.item_id, r.score, r.semantic_rank, r.lexical_rank)).collect()
    }

    #[test]
    fn the_setting_is_the_arguments_default_and_the_argument_decides() {
        let on = Config { hybrid_feedback: true, ..Config::default() };
        let search = |feedback: Option<bool>, config: &Config| {
            key(run(&mut default_fake(), Args { feedback, ..args("hybrid") }, config.clone()).unwrap())
        };
        let plain = search(None, &Config::default());
        let fed = search(Some(true), &Config::default());
        assert_ne!(plain, fed, "feedback changes the fusion");
        assert_eq!(search(None, &on), fed, "the setting turns it on");
        assert_eq!(search(Some(false), &on), plain, "the argument turns it off");
        // where feedback cannot apply, the setting is ignored
        let semantic = |feedback: Option<bool>, config: &Config| {
            key(run(&mut default_fake(), Args { feedback, ..args("semantic") }, config.clone()).unwrap())
        };
        assert_eq!(semantic(None, &on), semantic(Some(false), &Config::default()));
    }

    #[test]
    fn the_semantic_list_is_the_moved_vectors_and_the_lexical_rank_the_first_rounds() {
        // the fake's feedback documents all have the vector (1, …, 1): the query vector moves to
        // normalise(q̂ + 0.5·(1, …, 1)/√384)
        let q: Vec<f64> = vec384().into_iter().map(f64::from).collect();
        let norm = q.iter().map(|x| x * x).sum::<f64>().sqrt();
        let moved: Vec<f64> = q.iter().map(|x| x / norm + 0.5 / 384f64.sqrt()).collect();
        let moved0 = (moved[0] / moved.iter().map(|x| x * x).sum::<f64>().sqrt()) as f32;
        let fake = || {
            let mut f = default_fake();
            // an item the original query ranks last, the moved vector's nearest
            f.items[1][40] = Item { distance: 9.0, lexical: None, ..f.items[1][40].clone() };
            f.boost_vector.push((moved0, "100041".into()));
            // the feedback round's lexical list differs from the first round's: an expansion
            // key of the feedback documents finds item 33 first
            f.boost_key.push(("term1".into(), "33".into()));
            f
        };
        let one_window = Config { max_candidates: 40, ..Config::default() };
        // (k 100: an item of one list of the three ranks below the 80 the three lists share)
        let fed =
            Args { feedback: Some(true), k: 100, max_per_parent: Some(0), candidates: Some(40), ..args("hybrid") };
        let rows = run(&mut fake(), fed, one_window.clone()).unwrap();
        let hit = rows.iter().find(|r| r.item_id == "100041").expect("the moved vector's nearest item");
        assert_eq!((hit.semantic_rank, hit.lexical_rank), (Some(1), None), "{hit:?}");
        assert_eq!(hit.query_ranks, json!([{"query": "feedback", "branch": "semantic", "rank": 1, "distance": 0.0}]));
        // the lexical rank is the first round's BM25 list's, as the plain search reports it
        let plain = Args { k: 200, max_per_parent: Some(0), candidates: Some(40), ..args("hybrid") };
        let first: HashMap<String, Option<i32>> =
            run(&mut fake(), plain, one_window).unwrap().into_iter().map(|r| (r.item_id, r.lexical_rank)).collect();
        let lexical: Vec<&crate::model::SearchRow> = rows.iter().filter(|r| r.lexical_rank.is_some()).collect();
        assert!(lexical.len() >= 5);
        for r in lexical {
            assert_eq!(Some(r.lexical_rank), first.get(&r.item_id).copied(), "{}", r.item_id);
        }
    }
}
