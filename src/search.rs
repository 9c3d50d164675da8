//! The SQL-visible search functions: `corpus_hybrid_search`, `corpus_explain` and the catalog's
//! validation hook. Argument checking and orchestration only: planning and fusion live in the
//! core, queries run through `crate::spi`.

use std::collections::HashMap;

use pg_corpus_core::feedback;
use pg_corpus_core::filters::{self, Condition};
use pg_corpus_core::fusion::{self, RankedList, SourceInfo};
use pg_corpus_core::plan::{self, Branch, Strategy, Subplan};
use pg_corpus_core::resolve::Corpus;
use pg_corpus_core::{CoreError, SqlState};
use pgrx::prelude::*;
use pgrx::JsonB;

use pg_corpus_core::bm25::{Bm25Params, CorpusStats};
use pg_corpus_core::lexical::{self, CandidatePlan, ChampionHead, QueryKey};

use crate::error::OrRaise;
use crate::gucs;
use crate::gucs::LexicalScorer;
use crate::spi;
use crate::vector::Vector;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Hybrid,
    Semantic,
    Lexical,
}

/// Validated search arguments.
pub(crate) struct Request {
    corpus: Corpus,
    conds: Vec<Condition>,
    vector: Option<Vec<f32>>,
    text: Option<String>,
    k: usize,
    window: usize,
    max_per_parent: Option<usize>,
    rrf_k: f64,
    include_stale: bool,
    /// BM25 candidate plans per source (None: the source gets no lexical subplan), or None for
    /// the ts_rank_cd scorer.
    lexical: Option<LexicalPlans>,
    /// A second, pseudo-relevance feedback round (pg_corpus_core::feedback).
    feedback: bool,
    /// `pg_class.reltuples` of each source's item table (negative: never analysed), read once
    /// for both branches.
    table_rows: Vec<f64>,
}

/// The BM25 side of a request: each source's query keys and the corpus statistics they need;
/// the candidate plans follow from them and a budget (which grows with the window).
#[derive(Clone)]
struct LexicalPlans {
    keys_per_source: Vec<Vec<QueryKey>>,
    df: HashMap<String, u64>,
    stats: CorpusStats,
    params: Bm25Params,
    /// The corpus' share of its source tables' rows (0 when a table was never analysed).
    corpus_share: f64,
}

impl LexicalPlans {
    /// Each source's candidate plan for `budget` and `k` rows; for a plan with champion lists,
    /// the items of their heads that can reach the top `window` (lexical::preselect).
    fn candidate_plans(
        &self,
        corpus: &Corpus,
        budget: u64,
        window: usize,
        k: usize,
    ) -> Result<Vec<Option<CandidatePlan>>, CoreError> {
        let mut plans: Vec<Option<CandidatePlan>> = self
            .keys_per_source
            .iter()
            .map(|keys| {
                lexical::candidate_plan(
                    keys,
                    |key| self.df.get(key).copied().unwrap_or(0),
                    self.stats.n_docs,
                    budget,
                    k,
                )
            })
            .collect();
        for (idx, plan) in plans.iter_mut().enumerate() {
            let Some(p) = plan.as_mut().filter(|p| !p.champions.is_empty()) else { continue };
            let weight = |key: &str| p.scored.iter().find(|k| k.key == key).map_or(0.0, |k| k.weight_idf);
            let heads: Vec<ChampionHead> =
                spi::champion_heads(&corpus.name, &corpus.sources[idx].name, &p.champions, p.champion_prefix)?
                    .into_iter()
                    .map(|(term, items, impacts)| ChampionHead { weight_idf: weight(&term), items, impacts })
                    .collect();
            // keys found through the index can add at most k1 + 1 times their weight
            let unlisted: f64 = p
                .scored
                .iter()
                .filter(|k| !p.champions.contains(&k.key))
                .map(|k| k.weight_idf.max(0.0) * (self.params.k1 + 1.0))
                .sum();
            p.champion_items = lexical::preselect(&heads, unlisted, window, budget as usize);
        }
        Ok(plans)
    }
}

/// Analyse the query for every source (pg_corpus' analyser for sources with a language,
/// PostgreSQL's text search configuration otherwise), look the keys up in the corpus'
/// statistics, and split them into candidate-finding and scoring-only keys.
fn lexical_plans(corpus: &Corpus, text: &str, table_rows: &[f64]) -> Result<LexicalPlans, CoreError> {
    let params = Bm25Params::new(gucs::BM25_K1.get(), gucs::BM25_B.get())?;
    let mut keys_per_source = Vec::with_capacity(corpus.sources.len());
    for src in &corpus.sources {
        let keys: Vec<QueryKey> = match src.language {
            Some(lang) => lexical::query_keys(text, lang),
            None => spi::ts_query_keys(src.ts_config, text)?
                .into_iter()
                .map(|(key, weight)| QueryKey { key, weight })
                .collect(),
        };
        keys_per_source.push(keys);
    }
    let mut all: Vec<String> = keys_per_source.iter().flatten().map(|k| k.key.clone()).collect();
    all.sort();
    all.dedup();
    let (df, documents, total_length) = spi::lexical_stats(&corpus.name, &all)?;
    let stats = CorpusStats { n_docs: documents.max(0) as u64, total_length: total_length.max(0) as u64 };
    let corpus_share = lexical::corpus_share(stats.n_docs, table_rows);
    Ok(LexicalPlans { keys_per_source, df, stats, params, corpus_share })
}

/// Characters of query_text the lexical branch uses (documented in the README).
pub(crate) const MAX_QUERY_CHARS: usize = 10_000;

fn bad(msg: String, hint: &str) -> CoreError {
    CoreError::new(SqlState::InvalidParameterValue, msg, hint)
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn request(
    corpus: &str,
    query_vec: Option<Vector>,
    query_text: Option<&str>,
    k: i32,
    filters: Option<JsonB>,
    mode: &str,
    max_per_parent: Option<i32>,
    candidates: Option<i32>,
    rrf_k: i32,
    include_stale: bool,
    feedback: Option<bool>,
) -> Result<Request, CoreError> {
    let max_k = gucs::MAX_K.get();
    if k <= 0 || k > max_k {
        return Err(bad(
            format!("k must be between 1 and {max_k}, got {k}"),
            "Ask for fewer rows, or raise pg_corpus.max_k.",
        ));
    }
    let mode = match mode {
        "hybrid" => Mode::Hybrid,
        "semantic" => Mode::Semantic,
        "lexical" => Mode::Lexical,
        other => {
            return Err(bad(format!("unknown search mode \"{other}\""), "mode is hybrid, semantic or lexical."));
        }
    };
    let max_candidates = gucs::MAX_CANDIDATES.get();
    if let Some(c) = candidates {
        if c < 1 || c > max_candidates {
            return Err(bad(
                format!("candidates must be between 1 and {max_candidates}, got {c}"),
                "Leave it NULL for max(20, 4*k), or raise pg_corpus.max_candidates.",
            ));
        }
    }
    if !(0..=100_000).contains(&rrf_k) {
        return Err(bad(format!("rrf_k must be between 0 and 100000, got {rrf_k}"), "The usual value is 60."));
    }
    let max_per_parent = match max_per_parent {
        None | Some(0) => None,
        Some(n) if n < 0 => {
            return Err(bad(format!("max_per_parent must be >= 0, got {n}"), "Use 0 or NULL for no per-parent cap."))
        }
        Some(n) => Some(n as usize),
    };
    let corpus = spi::load_corpus(corpus)?;
    let conds = filters::parse(&corpus, &filters.map_or(serde_json::Value::Null, |j| j.0))?;

    // The lexical branch reads at most MAX_QUERY_CHARS of the query: an OR of more words than
    // that overflows PostgreSQL's tsquery (54000) or its stack (54001) and says nothing more.
    let text = query_text
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| t.chars().take(MAX_QUERY_CHARS).collect::<String>());
    let wants_vector = matches!(mode, Mode::Semantic) || (mode == Mode::Hybrid && query_vec.is_some());
    let vector = match (wants_vector, query_vec) {
        (true, Some(Vector(v))) => {
            let dims = corpus.dimensions().unwrap_or(v.len() as i32);
            if v.len() as i32 != dims {
                return Err(CoreError::new(
                    SqlState::DataException,
                    format!("query vector has {} dimensions, corpus \"{}\" has {dims}", v.len(), corpus.name),
                    "Embed the query with the corpus' embedding model.",
                ));
            }
            if v.iter().any(|x| !x.is_finite()) {
                return Err(CoreError::new(
                    SqlState::DataException,
                    "query vector contains NaN or Infinity",
                    "Check the embedding model's output; every component must be a finite number.",
                ));
            }
            Some(v)
        }
        (true, None) => {
            return Err(CoreError::new(
                SqlState::NullValueNotAllowed,
                "a semantic search needs a query vector, got NULL",
                "Pass query_vec, or use mode => 'lexical'.",
            ))
        }
        (false, _) => None,
    };
    let text = match mode {
        Mode::Semantic => None,
        Mode::Lexical if text.is_none() => {
            return Err(bad(
                "a lexical search needs non-empty query text".into(),
                "Pass query_text, or use mode => 'semantic'.",
            ))
        }
        _ => text,
    };
    if vector.is_none() && text.is_none() {
        return Err(bad(
            "nothing to search for: no query vector and empty query text".into(),
            "Pass query_vec, query_text or both.",
        ));
    }
    let window = candidates.map_or((4 * k).max(20), |c| c) as usize;
    let table_rows = corpus.sources.iter().map(|src| spi::reltuples(src.item.oid)).collect::<Result<Vec<f64>, _>>()?;
    let lexical = match (&text, gucs::LEXICAL_SCORER.get()) {
        (Some(t), LexicalScorer::Bm25) => Some(lexical_plans(&corpus, t, &table_rows)?),
        _ => None,
    };
    // Feedback needs both branches and BM25. Asked for in the call, anything else is an error;
    // by pg_corpus.hybrid_feedback, it applies where it can.
    let can_feed_back = vector.is_some() && lexical.is_some();
    let feedback = match feedback {
        Some(true) if !can_feed_back => return Err(bad(
            "feedback needs a hybrid search with BM25: a query vector, query text and pg_corpus.lexical_scorer = bm25"
                .into(),
            "Pass both query_vec and query_text with mode => 'hybrid', or feedback => false.",
        )),
        Some(f) => f,
        None => gucs::HYBRID_FEEDBACK.get() && can_feed_back,
    };
    Ok(Request {
        corpus,
        conds,
        vector,
        text,
        k: k as usize,
        window,
        max_per_parent,
        rrf_k: rrf_k as f64,
        include_stale,
        lexical,
        feedback,
        table_rows,
    })
}

/// How the semantic branch of each source runs: exact over a small slice, else the HNSW index
/// with an iterative scan sized by the slice's selectivity (docs/filtered-ann.md).
#[derive(Clone)]
struct SemanticPlan {
    strategy: Strategy,
    selectivity: f64,
}

fn semantic_plans(req: &Request) -> Result<Vec<SemanticPlan>, CoreError> {
    let exact_max = gucs::EXACT_SEARCH_MAX_ROWS.get() as f64;
    req.table_rows
        .iter()
        .enumerate()
        .map(|(idx, &total)| {
            let (sql, params) = plan::slice_estimate(&req.corpus, idx, &req.conds);
            let slice = spi::estimated_rows(&sql, &params)?;
            let selectivity = if total > 0.0 { (slice / total).clamp(1e-6, 1.0) } else { 1.0 };
            let strategy = if slice <= exact_max { Strategy::Exact } else { Strategy::Approximate };
            Ok(SemanticPlan { strategy, selectivity })
        })
        .collect()
}

/// What one round searches for: the request's query, or feedback's moved one.
#[derive(Clone, Copy)]
struct RoundQuery<'a> {
    vector: Option<&'a [f32]>,
    lexical: Option<&'a LexicalPlans>,
}

impl Request {
    fn query(&self) -> RoundQuery<'_> {
        RoundQuery { vector: self.vector.as_deref(), lexical: self.lexical.as_ref() }
    }
}

fn subplans(req: &Request, q: RoundQuery, sem: &[SemanticPlan], window: usize) -> Result<Vec<Subplan>, CoreError> {
    // The candidate budget grows with the window: when capping or pruning left fewer than k
    // rows, a wider window also lets commoner keys find candidates.
    let budget =
        (gucs::BM25_CANDIDATE_BUDGET.get().max(1) as u64).saturating_mul((window / req.window.max(1)).max(1) as u64);
    let candidate_plans = match q.lexical {
        Some(lex) => Some(lex.candidate_plans(&req.corpus, budget, window, req.k)?),
        None => None,
    };
    let mut out = Vec::new();
    for idx in 0..req.corpus.sources.len() {
        if let Some(v) = q.vector {
            out.push(plan::semantic(
                &req.corpus,
                idx,
                &req.conds,
                v,
                window as i64,
                sem[idx].strategy,
                req.include_stale,
            ));
        }
        match (&req.text, q.lexical, &candidate_plans) {
            (Some(_), Some(lex), Some(plans)) => {
                if let Some(cp) = &plans[idx] {
                    let mut p = plan::lexical_bm25(
                        &req.corpus,
                        idx,
                        &req.conds,
                        cp,
                        lex.stats.avg_doc_len(),
                        lex.params,
                        window as i64,
                        lexical::scope_check(cp, lex.corpus_share, lex.stats.n_docs, !req.conds.is_empty()),
                    );
                    p.pruned = cp.pruned;
                    out.push(p);
                }
            }
            (Some(t), _, _) => out.push(plan::lexical(&req.corpus, idx, &req.conds, t, window as i64)),
            (None, _, _) => {}
        }
    }
    Ok(out)
}

/// pgvector settings for an approximate subplan: enough ef_search for the window, an iterative
/// scan, and a scan budget that lets a selective predicate still fill the window.
fn ann_settings(window: usize, selectivity: f64) -> Vec<(&'static str, String)> {
    let budget = ((window as f64) / selectivity * 4.0).ceil();
    let budget = budget.clamp(20_000.0, gucs::ANN_MAX_SCAN_TUPLES.get() as f64) as i64;
    vec![
        ("hnsw.ef_search", window.clamp(40, 1000).to_string()),
        ("hnsw.iterative_scan", "relaxed_order".to_string()),
        ("hnsw.max_scan_tuples", budget.to_string()),
        // Memory is the iterative scan's other stop condition; let it follow the budget.
        ("hnsw.scan_mem_multiplier", "4".to_string()),
        // pgvector costs its distance function like any cheap operator, so for a selective
        // predicate the planner prefers sorting the slice (detoasting every vector) to the
        // index: 62 ms against 36 ms at a 5% slice of 100k × 1024-d (docs/filtered-ann.md).
        ("enable_sort", "off".to_string()),
    ]
}

/// Planner settings for a BM25 lexical subplan. It reads at most about a candidate budget of
/// items through indexes, yet at the default random_page_cost (4) the planner joins their
/// parents by hashing every parent of the corpus (3 ms at 8,000 parents) instead of looking
/// the candidates' parents up by key: 13.5 → 8.8 ms p50 (docs/lexical-speed.md). A session's
/// lower setting is kept.
fn lexical_settings(index_first: bool) -> Vec<(&'static str, String)> {
    // SAFETY: a plain GUC variable, read in the backend's only thread.
    let current = unsafe { pg_sys::random_page_cost };
    let mut out = vec![("random_page_cost", current.min(1.1).to_string())];
    if index_first {
        // lexical::ScopeCheck::JoinedAfterIndex: no parameterised path through the parents
        out.push(("enable_nestloop", "off".to_string()));
    }
    out
}

/// The settings a subplan runs with (restored afterwards).
fn subplan_settings(req: &Request, sem: &[SemanticPlan], p: &Subplan, window: usize) -> Vec<(&'static str, String)> {
    match (p.strategy, p.branch) {
        (Strategy::Approximate, _) => ann_settings(window, sem[p.source].selectivity),
        (_, Branch::Lexical) if req.lexical.is_some() => lexical_settings(p.index_first),
        _ => Vec::new(),
    }
}

/// One round: every subplan with `window` rows, each branch's per-source lists merged into a
/// corpus-wide list. Also says whether some source filled its window.
fn run_round(
    req: &Request,
    q: RoundQuery,
    sem: &[SemanticPlan],
    window: usize,
) -> Result<(Vec<RankedList>, bool), CoreError> {
    let mut semantic = Vec::new();
    let mut lexical = Vec::new();
    // A pruned lexical subplan that returned fewer rows than the window may have left matching
    // items out: a wider window (and so a larger candidate budget) can find them.
    let mut pruned_short = false;
    for p in subplans(req, q, sem, window)? {
        let settings = subplan_settings(req, sem, &p, window);
        let hits = if settings.is_empty() {
            spi::branch_hits(p.source, &p.sql, &p.params)?
        } else {
            spi::with_settings(&settings, || spi::branch_hits(p.source, &p.sql, &p.params))?
        };
        pruned_short |= p.pruned && hits.len() < window;
        match p.branch {
            Branch::Semantic => semantic.push(hits),
            Branch::Lexical => lexical.push(hits),
        }
    }
    let mut lists = Vec::new();
    let mut saturated = pruned_short;
    for (branch, per_source) in [(Branch::Semantic, semantic), (Branch::Lexical, lexical)] {
        if !per_source.is_empty() {
            let (list, full) = fusion::merge_branch(branch, per_source, window);
            saturated |= full;
            lists.push(list);
        }
    }
    Ok((lists, saturated))
}

/// The item ids of `hits` grouped by source, in hit order, for the sources that have any.
fn ids_per_source<'a>(
    hits: impl Iterator<Item = &'a fusion::Fused>,
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
/// the same window (pg_corpus_core::feedback).
fn feedback_round(
    req: &Request,
    sem: &[SemanticPlan],
    window: usize,
    first: &[fusion::Fused],
) -> Result<(Vec<RankedList>, bool), CoreError> {
    let (Some(vector), Some(lex)) = (&req.vector, &req.lexical) else {
        return Ok((Vec::new(), false));
    };
    let top: Vec<&fusion::Fused> = first.iter().take(feedback::RM3_DOCS.max(feedback::VECTOR_DOCS)).collect();
    let mut learned: HashMap<(usize, String), spi::FeedbackDoc> = HashMap::new();
    for (idx, ids) in ids_per_source(top.iter().copied(), req.corpus.sources.len()) {
        let (sql, params) = plan::feedback_fetch(&req.corpus, idx, &req.conds, ids);
        for (id, doc) in spi::feedback_docs(&sql, &params)? {
            learned.insert((idx, id), doc);
        }
    }
    let docs: Vec<&spi::FeedbackDoc> = top.iter().filter_map(|f| learned.get(&(f.source, f.item_id.clone()))).collect();
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
        .filter(|k| !lex.df.contains_key(&k.key))
        .map(|k| k.key.clone())
        .collect();
    new_keys.sort();
    new_keys.dedup();
    if !new_keys.is_empty() {
        let (df, _, _) = spi::lexical_stats(&req.corpus.name, &new_keys)?;
        expanded.df.extend(df);
    }
    run_round(req, RoundQuery { vector: Some(&moved), lexical: Some(&expanded) }, sem, window)
}

/// One hit: rank, corpus, source, item_id, parent_id, score, semantic_rank, semantic_distance,
/// lexical_rank, lexical_score, content, locator, metadata (named in the signature below).
pub(crate) type SearchRow = (
    i32,
    String,
    String,
    String,
    String,
    f64,
    Option<i32>,
    Option<f64>,
    Option<i32>,
    Option<f64>,
    Option<String>,
    JsonB,
    JsonB,
    bool,
);

pub(crate) fn search(req: &Request) -> Result<Vec<SearchRow>, CoreError> {
    let sem = if req.vector.is_some() { semantic_plans(req)? } else { Vec::new() };
    let max_window = (gucs::MAX_CANDIDATES.get() as usize).max(req.window);
    let sources: Vec<SourceInfo> = req
        .corpus
        .sources
        .iter()
        .map(|s| SourceInfo {
            parent_scope: s.parent_scope.clone(),
            semantic_weight: s.semantic_weight,
            lexical_weight: s.lexical_weight,
        })
        .collect();
    let mut window = req.window;
    let rows = loop {
        let (lists, saturated) = run_round(req, req.query(), &sem, window)?;
        let (lists, saturated) = if req.feedback {
            let first = fusion::rrf(&lists, &sources, req.rrf_k);
            let (more, more_saturated) = feedback_round(req, &sem, window, &first)?;
            // RRF(feedback vector, first lexical list, feedback lexical list)
            let mut fused_lists: Vec<RankedList> =
                more.iter().filter(|l| l.branch == Branch::Semantic).cloned().collect();
            fused_lists.extend(lists.into_iter().filter(|l| l.branch == Branch::Lexical));
            fused_lists.extend(more.into_iter().filter(|l| l.branch == Branch::Lexical));
            (fused_lists, saturated || more_saturated)
        } else {
            (lists, saturated)
        };
        let fused = fusion::rrf(&lists, &sources, req.rrf_k);
        let rows = fusion::cap(&fused, req.max_per_parent, req.k);
        if window >= max_window || !fusion::needs_wider_window(rows.len(), req.k, saturated) {
            break rows;
        }
        window = (window * 4).min(max_window);
    };

    // Fetch content and provenance per source, under the same predicate and filters.
    let mut fetched: HashMap<(usize, String), spi::FetchedRow> = HashMap::new();
    for (idx, ids) in ids_per_source(rows.iter(), req.corpus.sources.len()) {
        let (sql, params) = plan::fetch(&req.corpus, idx, &req.conds, ids);
        for row in spi::fetch_rows(&sql, &params)? {
            fetched.insert((idx, row.item_id.clone()), row);
        }
    }
    let mut out = Vec::with_capacity(rows.len());
    for f in rows {
        // An item the fetch does not return (it cannot, within one snapshot) is left out.
        let Some(row) = fetched.remove(&(f.source, f.item_id.clone())) else {
            continue;
        };
        out.push((
            out.len() as i32 + 1,
            req.corpus.name.clone(),
            req.corpus.sources[f.source].name.clone(),
            f.item_id,
            f.parent_id,
            f.score,
            f.semantic.map(|(r, _)| r as i32),
            f.semantic.map(|(_, d)| d),
            f.lexical.map(|(r, _)| r as i32),
            f.lexical.map(|(_, s)| s),
            row.content,
            JsonB(row.locator),
            JsonB(row.metadata),
            row.stale,
        ));
    }
    Ok(out)
}

/// Hybrid (semantic + lexical) search of one corpus, fused by RRF, capped per parent.
#[allow(clippy::too_many_arguments)]
#[pg_extern(stable, parallel_restricted)]
fn corpus_hybrid_search(
    corpus: &str,
    query_vec: Option<Vector>,
    query_text: Option<&str>,
    k: default!(i32, 10),
    filters: default!(Option<JsonB>, "'{}'"),
    mode: default!(&str, "'hybrid'"),
    max_per_parent: default!(Option<i32>, 3),
    candidates: default!(Option<i32>, "NULL"),
    rrf_k: default!(i32, 60),
    include_stale: default!(bool, false),
    feedback: default!(Option<bool>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(rank, i32),
        name!(corpus, String),
        name!(source, String),
        name!(item_id, String),
        name!(parent_id, String),
        name!(score, f64),
        name!(semantic_rank, Option<i32>),
        name!(semantic_distance, Option<f64>),
        name!(lexical_rank, Option<i32>),
        name!(lexical_score, Option<f64>),
        name!(content, Option<String>),
        name!(locator, JsonB),
        name!(metadata, JsonB),
        name!(embedding_stale, bool),
    ),
> {
    let rows = spi::pinned_search_path(|| {
        let req = request(
            corpus,
            query_vec,
            query_text,
            k,
            filters,
            mode,
            max_per_parent,
            candidates,
            rrf_k,
            include_stale,
            feedback,
        )?;
        search(&req)
    })
    .or_raise();
    TableIterator::new(rows)
}

/// The exact SQL and parameters of every subplan a search with these arguments would run first
/// (the search may repeat them with a wider window to fill k rows after capping).
#[allow(clippy::too_many_arguments)]
#[pg_extern(stable, parallel_restricted)]
fn corpus_explain(
    corpus: &str,
    query_vec: default!(Option<Vector>, "NULL"),
    query_text: default!(Option<&str>, "NULL"),
    k: default!(i32, 10),
    filters: default!(Option<JsonB>, "'{}'"),
    mode: default!(&str, "'hybrid'"),
    candidates: default!(Option<i32>, "NULL"),
    include_stale: default!(bool, false),
) -> TableIterator<
    'static,
    (name!(source, String), name!(branch, String), name!(strategy, String), name!(sql, String), name!(params, JsonB)),
> {
    let (req, sem, plans) = spi::pinned_search_path(|| {
        let req = request(
            corpus,
            query_vec,
            query_text,
            k,
            filters,
            mode,
            Some(0),
            candidates,
            60,
            include_stale,
            Some(false),
        )?;
        let sem = if req.vector.is_some() { semantic_plans(&req)? } else { Vec::new() };
        let plans = subplans(&req, req.query(), &sem, req.window)?;
        Ok::<_, CoreError>((req, sem, plans))
    })
    .or_raise();
    let rows: Vec<_> = plans
        .into_iter()
        .map(|p| {
            let mut params = serde_json::to_value(&p.params).unwrap_or_default();
            if let (Some(arr), Some(_)) = (params.as_array_mut(), &req.vector) {
                // The query vector is long; show its dimension instead of every component.
                if p.branch == Branch::Semantic {
                    arr[0] = serde_json::json!(format!(
                        "<query vector, {} dimensions>",
                        req.vector.as_ref().map_or(0, Vec::len)
                    ));
                }
            }
            let settings = subplan_settings(&req, &sem, &p, req.window)
                .into_iter()
                .map(|(k, v)| format!("SET LOCAL {k} = {v};\n"))
                .collect::<String>();
            (
                req.corpus.sources[p.source].name.clone(),
                p.branch.name().to_string(),
                p.strategy.name().to_string(),
                format!("{settings}{}", p.sql),
                JsonB(params),
            )
        })
        .collect();
    TableIterator::new(rows)
}

/// Validate a corpus definition against the live tables (called by the catalog functions).
#[pg_extern(stable, parallel_safe)]
fn _validate_corpus(name: &str) -> bool {
    spi::pinned_search_path(|| spi::load_corpus(name)).or_raise();
    true
}
