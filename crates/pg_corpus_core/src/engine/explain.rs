//! What a search would run first, as `corpus_explain` shows it.

use serde_json::Value;

use super::probe;
use super::SliceQuery;
use super::{
    rounds::{subplan_settings, subplans},
    semantic_plans, Executor, Request, SemanticPlan,
};
use crate::error::Result;
use crate::model::{Branch, QueryTag};
use crate::sql::Param;

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
        .filter_map(|(idx, s)| s.empty.and_then(|of| probe(of, &req.corpus, idx, &req.conds)))
        .map(|SliceQuery { source: idx, sql, params, .. }| ExplainRow {
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

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use crate::engine::tests::fake::*;
    use crate::engine::{explain, validate, Config, Request};

    #[test]
    fn explain_shows_the_first_rounds_subplans_with_their_settings() {
        let mut f = default_fake();
        f.slice_rows = vec![50_000.0, 50_000.0];
        let a = args("hybrid");
        let config = Config::default();
        let checked = a.check(&config).unwrap();
        let req = Request::prepare(validate(corpus(), a, checked, config).unwrap(), &mut f).unwrap();
        let rows = explain(&req, &mut f).unwrap();
        assert_eq!(rows.len(), 4);
        assert!(f.branch_calls().is_empty(), "explain runs no subplan");
        let sem = &rows[0];
        assert_eq!((sem.branch, sem.strategy), ("semantic", "hnsw_iterative"));
        assert!(sem
            .sql
            .starts_with("SET LOCAL hnsw.ef_search = 40;\nSET LOCAL hnsw.iterative_scan = relaxed_order;\n"));
        assert_eq!(sem.params[0], Value::String("<query vector, 384 dimensions>".into()));
        let lex = &rows[1];
        assert_eq!(lex.branch, "lexical");
        assert!(lex.sql.starts_with("SET LOCAL random_page_cost = 1.1;\n"), "{}", lex.sql);
        // a session below 1.1 keeps its own
        let a = args("lexical");
        let config = Config { random_page_cost: 0.5, ..Config::default() };
        let checked = a.check(&config).unwrap();
        let req = Request::prepare(validate(corpus(), a, checked, config).unwrap(), &mut f).unwrap();
        assert!(explain(&req, &mut f).unwrap()[0].sql.starts_with("SET LOCAL random_page_cost = 0.5;\n"));
    }
}
