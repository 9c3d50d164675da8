//! The one entry of a search: a call (a search by query, or by one of the corpus' own items)
//! checked, run and answered with its rows, the filter conditions a lenient search dropped and
//! the audit row the corpus keeps of it.

use std::sync::Arc;

use serde_json::json;

use super::{find_similar, search, validate, Args, Config, Executor, Request, SimilarArgs};
use crate::audit::{self, AuditRow};
use crate::error::Result;
use crate::filters::Rejected;
use crate::model::{Corpus, SearchRow};

/// What a caller asked for.
#[derive(Debug, Clone)]
pub enum Call {
    /// `corpus_hybrid_search`.
    Search(Args),
    /// `corpus_find_similar`.
    Similar(SimilarArgs),
}

impl Call {
    /// The SQL function the call is made through (as the audit log names it).
    pub fn function(&self) -> &'static str {
        match self {
            Call::Search(_) => "corpus_hybrid_search",
            Call::Similar(_) => "corpus_find_similar",
        }
    }

    fn args(&self) -> &Args {
        match self {
            Call::Search(a) => a,
            Call::Similar(s) => &s.args,
        }
    }
}

/// A search's answer.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub rows: Vec<SearchRow>,
    /// The filter conditions a lenient search dropped.
    pub rejected_filters: Vec<Rejected>,
    /// The row the audit log keeps of the search, when the corpus logs searches (its latency is
    /// the caller's to measure).
    pub audit: Option<AuditRow>,
    /// Hits ranked without their embeddings although the search ran its semantic branch: their
    /// embeddings are missing or describe old text (queued for re-embedding), and the branch
    /// leaves such items out unless `include_stale`.
    pub unembedded_hits: usize,
}

/// The NOTICE a search gives when some of its hits were ranked without their embeddings
/// (message, detail, hint); None when every hit could be.
pub fn unembedded_notice(corpus: &str, unembedded: usize, hits: usize) -> Option<(String, String, String)> {
    if unembedded == 0 {
        return None;
    }
    Some((
        format!("{unembedded} of the {hits} hits of corpus \"{corpus}\" were ranked without their embeddings"),
        serde_json::json!({"kind": "unembedded_hits", "unembedded": unembedded, "hits": hits}).to_string(),
        "Their embeddings are missing or describe old text (queued for re-embedding), so the semantic branch \
         left them out: run the re-embed worker, or pass include_stale => true to rank them by the embeddings \
         they have. corpus.corpus_health_check() shows the backlog."
            .to_string(),
    ))
}

/// Check and run a call of `corpus` through `exec`.
pub fn run(corpus: Arc<Corpus>, call: Call, config: Config, exec: &mut dyn Executor) -> Result<Outcome> {
    let audit = audit_row(&corpus, &call);
    let semantic = match &call {
        Call::Search(a) => {
            !a.include_stale
                && a.mode != "lexical"
                && (a.query_vec.is_some() || a.query_vectors.as_object().is_some_and(|o| !o.is_empty()))
        }
        Call::Similar(_) => false,
    };
    let (rows, rejected_filters) = match call {
        Call::Search(args) => {
            let checked = args.check(&config)?;
            let req = Request::prepare(validate(corpus, args, checked, config)?, exec)?;
            (search(&req, exec)?, req.rejected_filters)
        }
        Call::Similar(sim) => find_similar(corpus, sim, config, exec)?,
    };
    let audit = audit.map(|row| AuditRow { results: audit::results(&rows), ..row });
    let unembedded_hits =
        if semantic { rows.iter().filter(|r| r.embedding_stale && r.semantic_rank.is_none()).count() } else { 0 };
    Ok(Outcome { rows, rejected_filters, audit, unembedded_hits })
}

/// The audit row of a call when the corpus logs its searches, before its results.
pub fn audit_row(corpus: &Corpus, call: &Call) -> Option<AuditRow> {
    if !corpus.audit.enabled {
        return None;
    }
    let args = call.args();
    let item = match call {
        Call::Similar(s) => Some((s.source.as_str(), s.item_id.as_str())),
        Call::Search(_) => None,
    };
    let extra = args.extra_queries.as_array().map_or(0, Vec::len);
    let spaces: Vec<&String> = args.query_vectors.as_object().map(|o| o.keys().collect()).unwrap_or_default();
    Some(AuditRow {
        corpus: corpus.name.clone(),
        function: call.function(),
        mode: args.mode.clone(),
        k: args.k,
        filters: args.filters.clone(),
        hash_input: audit::hash_input(
            args.query_text.as_deref(),
            args.query_vec.as_deref(),
            &args.query_vectors,
            &args.extra_queries,
            item,
        ),
        query_text: if corpus.audit.query_text { args.query_text.clone() } else { None },
        results: serde_json::Value::Null,
        options: json!({
            "max_per_parent": args.max_per_parent, "candidates": args.candidates, "rrf_k": args.rrf_k,
            "include_stale": args.include_stale, "feedback": args.feedback, "extra_queries": extra,
            "filter_mode": args.filter_mode, "query_vectors": spaces,
            "evidence": args.evidence.unwrap_or(corpus.evidence.enabled),
            "expand": args.expand, "item": item.map(|(s, i)| json!({"source": s, "item_id": i})),
        }),
        latency_ms: 0.0,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use crate::engine::tests::fake::*;
    use crate::engine::{Args, Config, SimilarArgs};
    use crate::error::{CoreError, SqlState};
    use crate::testing::legal;

    #[test]
    fn an_executor_error_stops_the_search_with_that_error() {
        let boom = CoreError::new(SqlState::ObjectNotInPrerequisiteState, "boom", "h");
        for n in 0..12 {
            let mut f = default_fake();
            f.fail_at = Some((n, boom.clone()));
            let r = run(&mut f, args("hybrid"), Config::default());
            if n < f.calls.len() {
                assert_eq!(r.unwrap_err(), boom, "failing call {n} is the search's error");
                assert_eq!(f.calls.len(), n + 1, "nothing runs after a failed call");
            }
        }
    }

    fn audited(query_text: bool) -> Arc<crate::model::Corpus> {
        let mut c = legal();
        c.audit.enabled = true;
        c.audit.query_text = query_text;
        Arc::new(c)
    }

    #[test]
    fn a_logged_corpus_gets_the_audit_row_of_each_call_with_its_results() {
        let search = |a: Args| super::Call::Search(a);
        let out = super::run(corpus(), search(args("hybrid")), Config::default(), &mut default_fake()).unwrap();
        assert_eq!(out.rows.len(), 10);
        assert!(out.audit.is_none(), "a corpus that keeps no log");
        let mut a = args("hybrid");
        a.filters = json!({"court": "עליון", "judge": "x"});
        a.filter_mode = "lenient".into();
        a.extra_queries = json!([{"text": "rewrite"}]);
        let out = super::run(audited(false), search(a), Config::default(), &mut default_fake()).unwrap();
        let row = out.audit.unwrap();
        assert_eq!(
            (row.corpus.as_str(), row.function, row.mode.as_str(), row.k),
            ("external_precedents", "corpus_hybrid_search", "hybrid", 10)
        );
        assert_eq!(row.query_text, None, "the text only where the corpus keeps it");
        assert_eq!(row.results, crate::audit::results(&out.rows));
        assert_eq!(row.filters, json!({"court": "עליון", "judge": "x"}), "the filters as given");
        assert_eq!(out.rejected_filters.iter().map(|r| r.field.as_str()).collect::<Vec<_>>(), vec!["judge"]);
        assert_eq!(
            row.options,
            json!({"max_per_parent": 3, "candidates": null, "rrf_k": null, "include_stale": false, "feedback": null,
                   "extra_queries": 1, "filter_mode": "lenient", "query_vectors": [], "evidence": false,
                   "expand": null, "item": null})
        );
        let out = super::run(audited(true), search(args("lexical")), Config::default(), &mut default_fake()).unwrap();
        assert_eq!(out.audit.unwrap().query_text.as_deref(), Some("חוזה שכירות"));
    }

    #[test]
    fn a_similar_calls_audit_row_names_its_item_and_a_failed_call_has_none() {
        let mut f = default_fake();
        f.boost_vector.push((9.0, "12".into()));
        let sim = SimilarArgs {
            source: "chunks".into(),
            item_id: "12".into(),
            exclude_parent: false,
            args: Args { query_vec: None, query_text: None, mode: "hybrid".into(), ..Args::default() },
        };
        let out = super::run(audited(true), super::Call::Similar(sim), Config::default(), &mut f).unwrap();
        let row = out.audit.unwrap();
        assert_eq!((row.function, row.query_text.as_deref()), ("corpus_find_similar", None));
        assert_eq!(row.options["item"], json!({"source": "chunks", "item_id": "12"}));
        assert_eq!(row.results, crate::audit::results(&out.rows));
        let mut a = args("hybrid");
        a.k = 0;
        let e = super::run(audited(true), super::Call::Search(a), Config::default(), &mut default_fake()).unwrap_err();
        assert_eq!(e.state, SqlState::InvalidParameterValue);
    }
}
