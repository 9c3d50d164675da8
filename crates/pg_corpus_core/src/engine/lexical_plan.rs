//! The lexical plan: each query text analysed per source, its keys' statistics looked up in one
//! round trip, and per round the BM25 candidate plans with their champion-list heads.

use super::SliceOf;
use super::SliceQuery;
use super::{ChampionRequest, Config, Executor, Request, TermStats};
use crate::bm25::{Bm25Params, CorpusStats};
use crate::error::Result;
use crate::lexical::{self, CandidatePlan, ChampionHead, QueryKey};
use crate::model::Corpus;
use crate::plan::{self};

/// The BM25 side of a request: each source's query keys and the corpus statistics they need;
/// the candidate plans follow from them and a budget (which grows with the window).
#[derive(Debug, Clone)]
pub struct LexicalPlans {
    /// The text analysed.
    pub text: String,
    pub keys_per_source: Vec<Vec<QueryKey>>,
    pub stats: TermStats,
    pub corpus: CorpusStats,
    pub params: Bm25Params,
    /// The corpus' share of its source tables' rows (0 when a table was never analysed).
    pub corpus_share: f64,
    /// Per source, the planner's estimate of the corpus' parents (None without a parent table).
    pub corpus_parents: Vec<Option<f64>>,
}

impl LexicalPlans {
    pub fn df(&self, key: &str) -> u64 {
        self.stats.df.get(key).copied().unwrap_or(0)
    }
}

/// Analyse each query text for every source (pg_corpus' analyser for sources with a language,
/// PostgreSQL's text search configuration otherwise) and look all their keys up in the corpus'
/// statistics in one round trip: one plan per text, in order.
pub(super) fn lexical_plans(
    corpus: &Corpus,
    texts: &[&str],
    table_rows: &[f64],
    config: &Config,
    exec: &mut dyn Executor,
) -> Result<Vec<LexicalPlans>> {
    let params = Bm25Params::new(config.bm25_k1, config.bm25_b)?;
    let mut keys_per_text = Vec::with_capacity(texts.len());
    for text in texts {
        let mut keys_per_source = Vec::with_capacity(corpus.sources.len());
        for src in &corpus.sources {
            let keys: Vec<QueryKey> = match src.language {
                Some(lang) => lexical::query_keys(text, lang),
                None => exec.ts_query_keys(src.ts_config, text)?,
            };
            keys_per_source.push(keys);
        }
        keys_per_text.push(keys_per_source);
    }
    let mut all: Vec<String> = keys_per_text.iter().flatten().flatten().map(|k| k.key.clone()).collect();
    all.sort();
    all.dedup();
    let stats = exec.term_stats(&corpus.name, &all)?;
    let corpus_stats = CorpusStats { n_docs: stats.documents, total_length: stats.total_length };
    let corpus_share = lexical::corpus_share(corpus_stats.n_docs, table_rows);
    // (how the BM25 subplan checks the corpus predicate; a distributed source's subplan has
    // one shape, checked on the shards: Citus' estimate would mean nothing here)
    let corpus_parents = (0..corpus.sources.len())
        .map(|idx| match plan::parent_slice_estimate(corpus, idx) {
            Some(q) if !corpus.sources[idx].distributed() => {
                exec.estimate_rows(&SliceQuery::new(idx, SliceOf::Parents, q)).map(Some)
            }
            _ => Ok(None),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(keys_per_text
        .into_iter()
        .zip(texts)
        .map(|(keys_per_source, text)| LexicalPlans {
            text: text.to_string(),
            keys_per_source,
            stats: stats.clone(),
            corpus: corpus_stats,
            params,
            corpus_share,
            corpus_parents: corpus_parents.clone(),
        })
        .collect())
}

/// Each source's BM25 candidate plan for `budget`; for a plan with champion lists, the items of
/// their heads that can reach the top `window` ([`lexical::preselect`]), read for all sources
/// in one round trip.
pub(super) fn candidate_plans(
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
    // (a source ranked through its index needs no champion lists)
    let wanting: Vec<usize> = (0..plans.len())
        .filter(|&i| plans[i].as_ref().is_some_and(|p| !p.champions.is_empty()))
        .filter(|&i| !super::rounds::through_index(req, lex, i, window))
        .collect();
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

#[cfg(test)]
mod tests {
    use crate::engine::tests::fake::*;
    use crate::engine::{Config, Scorer, Setting};

    #[test]
    fn a_source_without_readable_champion_lists_finds_its_common_keys_through_the_index() {
        // both keys common: with lists, chunks' candidates are the lists' heads (a pruned plan the
        // fake answers with half of the matches); without them, the index (every match)
        let run_with = |unlisted: Vec<String>| {
            let mut f = Fake::new(vec![items(0, 30, 1), items(1, 0, 1)]);
            f.df = [("שכירות".to_string(), 3000u64), ("חוזה".to_string(), 2500)].into_iter().collect();
            f.unlisted = unlisted;
            let mut a = args("lexical");
            a.k = 20;
            let rows = run(&mut f, a, Config { bm25_candidate_budget: 2000, ..Config::default() }).unwrap();
            let first = f
                .calls
                .iter()
                .find_map(|c| match c {
                    Call::Branch { source: 0, sql, .. } => Some(sql.clone()),
                    _ => None,
                })
                .unwrap();
            (rows.len(), f.branch_calls().iter().filter(|c| c.0 == 0).count(), first)
        };
        let (rows, rounds, _) = run_with(vec![]);
        assert_eq!((rows, rounds), (20, 2), "half found through the heads, then a wider round");
        let (rows, rounds, sql) = run_with(vec!["chunks".to_string()]);
        assert_eq!((rows, rounds), (20, 1), "all found through the index in the first round");
        assert!(sql.contains("@@"), "the index: {sql}");
    }

    #[test]
    fn the_automatic_candidate_budget_grows_with_the_corpus() {
        // the same keys in a corpus of 1M documents: the automatic budget (2%, 20,000) lets both
        // find candidates through the index in the first round; a budget set to 2,000 does not
        let run_with = |budget: i32| {
            let mut f = Fake::new(vec![items(0, 30, 1), items(1, 0, 1)]);
            f.df = [("שכירות".to_string(), 3000u64), ("חוזה".to_string(), 2500)].into_iter().collect();
            f.documents = 1_000_000;
            let mut a = args("lexical");
            a.k = 20;
            let rows = run(&mut f, a, Config { bm25_candidate_budget: budget, ..Config::default() }).unwrap();
            assert_eq!(rows.len(), 20);
            let limits: Vec<i64> = f.branch_calls().iter().filter(|c| c.0 == 0).map(|c| c.2).collect();
            (limits, f.calls.iter().any(|c| matches!(c, Call::Champions(_))))
        };
        assert_eq!(run_with(-1), (vec![80], false));
        assert_eq!(run_with(0), (vec![80], false), "below 1 is automatic");
        assert_eq!(run_with(2000), (vec![80, 320], true), "a set budget is the bound");
        assert_eq!(run_with(20_000), (vec![80], false));
        assert_eq!(crate::lexical::auto_candidate_budget(0), 2000);
        assert_eq!(crate::lexical::auto_candidate_budget(100_000), 2000);
        assert_eq!(crate::lexical::auto_candidate_budget(551_000), 11_020);
    }

    #[test]
    fn the_ts_rank_cd_scorer_reads_no_statistics() {
        let mut f = default_fake();
        let config = Config { scorer: Scorer::TsRankCd, ..Config::default() };
        let rows = run(&mut f, args("lexical"), config).unwrap();
        assert_eq!(rows.len(), 10);
        assert!(!f.calls.iter().any(|c| matches!(c, Call::TermStats(_))));
        let settings: Vec<&Vec<Setting>> = f
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Branch { settings, .. } => Some(settings),
                _ => None,
            })
            .collect();
        assert!(settings.iter().all(|s| s.is_empty()), "ts_rank_cd subplans run with the session's settings");
    }
}
