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
