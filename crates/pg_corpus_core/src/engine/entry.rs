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
}

/// Check and run a call of `corpus` through `exec`.
pub fn run(corpus: Arc<Corpus>, call: Call, config: Config, exec: &mut dyn Executor) -> Result<Outcome> {
    let audit = audit_row(&corpus, &call);
    let (rows, rejected_filters) = match call {
        Call::Search(args) => {
            let checked = args.check(&config)?;
            let req = Request::prepare(validate(corpus, args, checked, config)?, exec)?;
            (search(&req, exec)?, req.rejected_filters)
        }
        Call::Similar(sim) => find_similar(corpus, sim, config, exec)?,
    };
    let audit = audit.map(|row| AuditRow { results: audit::results(&rows), ..row });
    Ok(Outcome { rows, rejected_filters, audit })
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
    use crate::engine::tests::fake::*;
    use crate::engine::Config;
    use crate::error::{CoreError, SqlState};

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
}
