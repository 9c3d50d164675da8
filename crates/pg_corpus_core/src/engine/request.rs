//! A checked search made ready to run: the statistics its lexical side needs and the tables
//! it reads, looked up once.

use std::sync::Arc;

use super::{
    args::RESERVED_LABELS, evidence::evidence_plan, lexical_plan::lexical_plans, Config, EvidencePlan, Executor,
    ExtraQuery, LexicalPlans, Mode, Scorer, Validated,
};
use crate::error::Result;
use crate::filters;
use crate::model::{Condition, Corpus};

/// A validated search.
#[derive(Debug, Clone)]
pub struct Request {
    pub corpus: Arc<Corpus>,
    pub conds: Vec<Condition>,
    pub mode: Mode,
    pub vector: Option<Vec<f32>>,
    pub text: Option<String>,
    pub k: usize,
    /// Ranked rows skipped before the k returned: pages are slices of one ranking.
    pub offset: usize,
    /// The first round's per-branch candidate window.
    pub window: usize,
    pub max_per_parent: Option<usize>,
    pub rrf_k: f64,
    pub include_stale: bool,
    /// BM25 plans (None: no lexical branch, or the ts_rank_cd scorer).
    pub lexical: Option<LexicalPlans>,
    /// A second, pseudo-relevance feedback round ([`crate::feedback`]).
    pub feedback: bool,
    /// Queries fused with the original one, in the caller's order.
    pub extra: Vec<ExtraQuery>,
    /// The original query's vectors of the named spaces, by space index (index 0, the default
    /// space, is `vector`'s and stays None here).
    pub space_vectors: Vec<Option<Vec<f32>>>,
    /// Items never returned (find-similar's own item): (source index, item id).
    pub exclude_items: Vec<(usize, String)>,
    /// A parent whose items are never returned (find-similar's `exclude_parent`): (parent
    /// scope, parent id).
    pub exclude_parent: Option<(String, String)>,
    /// The filter conditions a lenient search dropped.
    pub rejected_filters: Vec<filters::Rejected>,
    /// The evidence filter (None: off).
    pub evidence: Option<EvidencePlan>,
    /// Citation-graph expansion of the best hits ([`crate::augment`]).
    pub expand: bool,
    /// Whether the corpus' must-include classes apply.
    pub must_include: bool,
    /// `pg_class.reltuples` of each source's item table (negative: never analysed).
    pub table_rows: Vec<f64>,
    pub config: Config,
}

impl Request {
    /// Make a checked search ready to run: the source tables' sizes, the BM25 plans of its
    /// texts and the evidence filter's statistics, each looked up once through `exec`.
    pub fn prepare(v: Validated, exec: &mut dyn Executor) -> Result<Request> {
        let Validated {
            corpus,
            conds,
            rejected_filters,
            mode,
            k,
            offset,
            window,
            max_per_parent,
            rrf_k,
            vector,
            text,
            mut extra,
            space_vectors,
            query_models,
            feedback,
            evidence,
            expand,
            must_include,
            include_stale,
            config,
        } = v;
        super::models::check_query_models(&corpus, &query_models, exec)?;
        let tables: Vec<i64> = corpus.sources.iter().map(|s| s.item.oid).collect();
        let table_rows = if tables.is_empty() { Vec::new() } else { exec.table_rows(&tables)? };
        // the BM25 plans of the original text and of every extra query's, from one lookup of
        // the statistics of all their keys
        let texts: Vec<&str> =
            text.iter().chain(extra.iter().filter_map(|q| q.text.as_ref())).map(String::as_str).collect();
        let (lexical, extra_plans) = match config.scorer {
            Scorer::Bm25 if !texts.is_empty() => {
                let mut plans = lexical_plans(&corpus, &texts, &table_rows, &config, exec)?.into_iter();
                let original = if text.is_some() { plans.next() } else { None };
                (original, plans.collect::<Vec<_>>())
            }
            _ => (None, Vec::new()),
        };
        let mut extra_plans = extra_plans.into_iter();
        for q in extra.iter_mut().filter(|q| q.text.is_some()) {
            q.lexical = extra_plans.next();
        }
        let evidence = match evidence {
            true => Some(evidence_plan(&corpus, vector.is_some(), &space_vectors, text.is_some(), lexical.as_ref())?),
            false => None,
        };
        Ok(Request {
            corpus,
            evidence,
            expand,
            must_include,
            conds,
            mode,
            vector,
            text,
            k,
            offset,
            window,
            max_per_parent,
            rrf_k,
            include_stale,
            lexical,
            feedback,
            extra,
            space_vectors,
            exclude_items: Vec::new(),
            exclude_parent: None,
            rejected_filters,
            table_rows,
            config,
        })
    }

    /// Whether a fused hit is one the request excludes.
    pub fn excludes(&self, f: &crate::fusion::Fused) -> bool {
        self.exclude_items.iter().any(|(s, id)| *s == f.source && *id == f.item_id)
            || self.exclude_parent.as_ref().is_some_and(|(scope, id)| *scope == f.parent_scope && *id == f.parent_id)
    }

    /// Whether any query of the search (original or extra) has a vector.
    pub fn any_vector(&self) -> bool {
        self.vector.is_some()
            || self.space_vectors.iter().any(Option::is_some)
            || self.extra.iter().any(|q| q.vector.is_some())
    }

    /// The label `query_ranks` gives a query.
    pub fn label(&self, q: crate::model::QueryTag) -> &str {
        match q {
            crate::model::QueryTag::Original => RESERVED_LABELS[0],
            crate::model::QueryTag::Feedback => RESERVED_LABELS[1],
            crate::model::QueryTag::Extra(i) => self.extra.get(i).map_or("extra", |e| e.label.as_str()),
        }
    }
}
