//! The final fetch: the ranked hits' content and provenance, read under the corpus predicate.

use std::collections::HashMap;

use serde_json::Value;

use super::ItemsQuery;
use super::{
    fuse::ranked,
    rounds::{ids_per_source, queued},
    Executor, Request,
};
use crate::error::Result;
use crate::fusion::QueryHit;
use crate::model::{Branch, SearchRow};
use crate::plan::{self};

/// Run a search: its hits with content and provenance, fetched per source under the same
/// predicate and filters.
pub fn search(req: &Request, exec: &mut dyn Executor) -> Result<Vec<SearchRow>> {
    let rows = ranked(req, exec)?;
    // hits the semantic branch kept are known fresh (it dropped the stale ones); the others
    // are looked up
    let unknown = rows.iter().filter(|f| req.include_stale || f.semantic.is_none());
    let stale = queued(req, unknown.map(|f| (f.source, f.item_id.as_str(), f.parent_id.as_str())), exec)?;
    let mut fetched = HashMap::new();
    for (idx, ids) in ids_per_source(rows.iter(), req.corpus.sources.len()) {
        // (the parents route a Citus lookup to their shards; nothing else reads them)
        let parents = if req.corpus.sources[idx].routed_by_parent() {
            rows.iter().filter(|f| f.source == idx).map(|f| f.parent_id.clone()).collect()
        } else {
            Vec::new()
        };
        let lookup = plan::fetch(&req.corpus, idx, &req.conds, ids.clone(), parents);
        for row in exec.fetch_rows(&ItemsQuery::new(&req.corpus, idx, ids, lookup))? {
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
            rank: (req.offset + out.len()) as i32 + 1,
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
            evidence: f.evidence,
            origin: f.origin,
        });
    }
    Ok(out)
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
                if h.space != 0 {
                    o.insert("space".into(), Value::from(req.corpus.spaces[h.space].name.as_str()));
                }
                let raw = serde_json::Number::from_f64(h.raw).map_or(Value::Null, Value::Number);
                o.insert(if h.branch == Branch::Semantic { "distance" } else { "score" }.into(), raw);
                Value::Object(o)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use crate::engine::tests::fake::*;
    use crate::engine::Config;

    #[test]
    fn an_item_the_fetch_no_longer_returns_is_left_out_and_ranks_stay_dense() {
        let mut f = default_fake();
        let first = run(&mut default_fake(), args("hybrid"), Config::default()).unwrap();
        f.vanished = vec![first[0].item_id.clone()];
        let rows = run(&mut f, args("hybrid"), Config::default()).unwrap();
        assert_eq!(rows.len(), 9);
        assert!(rows.iter().all(|r| r.item_id != first[0].item_id));
        assert_eq!(rows.iter().map(|r| r.rank).collect::<Vec<_>>(), (1..=9).collect::<Vec<_>>());
    }
}
