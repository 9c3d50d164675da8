//! Fetching one item of a corpus by its id: its full text and provenance, read under the
//! corpus predicate (and the caller's filters) exactly as a search's hits are.

use std::sync::Arc;

use serde_json::Value;

use super::similar::{not_in_corpus, plausible_id, source_index};
use super::{Executor, ItemsQuery, SeedQuery};
use crate::error::Result;
use crate::filters;
use crate::model::{Corpus, SearchRow};
use crate::plan;

/// The item asked for.
#[derive(Debug, Clone)]
pub struct FetchArgs {
    pub source: String,
    pub item_id: String,
    pub filters: Value,
}

/// One item of `corpus` as a search would return it (rank 1, no branch ranks); 42704 alike for
/// an item that does not exist, is another corpus' or is not searchable.
pub fn fetch_item(corpus: Arc<Corpus>, a: FetchArgs, exec: &mut dyn Executor) -> Result<SearchRow> {
    const F: &str = "corpus_fetch";
    let idx = source_index(&corpus, &a.source)?;
    let src = &corpus.sources[idx];
    // the filters (and the required scope filters) scope the lookup, as a search's
    let (conds, _) = filters::parse_with_mode(&corpus, &a.filters, filters::FilterMode::Strict)?;
    if !plausible_id(&a.item_id, &src.id.sql_type) {
        return Err(not_in_corpus(&corpus, &a.source, &a.item_id, F));
    }
    let (sql, params) = plan::similar_seed(&corpus, idx, &conds, &a.item_id);
    let Some(seed) = exec.seed_item(&SeedQuery { source: idx, item_id: a.item_id.clone(), sql, params })? else {
        return Err(not_in_corpus(&corpus, &a.source, &a.item_id, F));
    };
    let item_id = seed.item_id;
    let parent_id = seed.parent_id.unwrap_or_default();
    let parents = if src.routed_by_parent() { vec![parent_id.clone()] } else { Vec::new() };
    let lookup = plan::fetch(&corpus, idx, &conds, vec![item_id.clone()], parents);
    let Some(row) = exec
        .fetch_rows(&ItemsQuery::new(&corpus, idx, vec![item_id.clone()], lookup))?
        .into_iter()
        .find(|r| r.item_id == item_id)
    else {
        return Err(not_in_corpus(&corpus, &a.source, &a.item_id, F));
    };
    let mut embedding_stale = false;
    for lookup in &plan::queued_items(&corpus, &[(idx, vec![(item_id.clone(), parent_id.clone())])]) {
        embedding_stale |= !exec.queued_items(lookup)?.is_empty();
    }
    Ok(SearchRow {
        rank: 1,
        source: src.name.clone(),
        item_id,
        parent_id,
        score: 0.0,
        semantic_rank: None,
        semantic_distance: None,
        lexical_rank: None,
        lexical_score: None,
        content: row.content,
        locator: row.locator,
        metadata: row.metadata,
        embedding_stale,
        query_ranks: Value::Array(Vec::new()),
        evidence: None,
        origin: None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::{fetch_item, FetchArgs};
    use crate::engine::tests::fake::*;
    use crate::error::SqlState;

    fn fetch(
        f: &mut Fake,
        source: &str,
        id: &str,
        filters: serde_json::Value,
    ) -> crate::error::Result<crate::model::SearchRow> {
        let corpus = Arc::new(crate::testing::legal());
        fetch_item(corpus, FetchArgs { source: source.into(), item_id: id.into(), filters }, f)
    }

    #[test]
    fn an_item_of_the_corpus_comes_with_its_text_and_provenance() {
        let mut f = default_fake();
        let id = f.items[0][0].id.clone();
        let row = fetch(&mut f, "chunks", &id, json!({})).unwrap();
        assert_eq!((row.rank, row.source.as_str(), row.item_id.as_str()), (1, "chunks", id.as_str()));
        assert!(row.content.is_some());
        assert!(row.semantic_rank.is_none() && row.lexical_rank.is_none());
    }

    #[test]
    fn missing_malformed_and_unknown_are_refused_alike_or_by_source() {
        let mut f = default_fake();
        for id in ["99999999", "not-a-number", ""] {
            let e = fetch(&mut f, "chunks", id, json!({})).unwrap_err();
            assert_eq!(e.state, SqlState::UndefinedObject, "{id}");
            assert!(e.message.contains("is not in corpus"), "{}", e.message);
            assert!(e.hint.starts_with("corpus_fetch"), "{}", e.hint);
        }
        let e = fetch(&mut f, "nope", "1", json!({})).unwrap_err();
        assert_eq!(e.state, SqlState::UndefinedObject);
        assert!(e.message.contains("has no source"));
        let e = fetch(&mut f, "chunks", "1", json!({"source_kind": "internal"})).unwrap_err();
        assert_eq!(e.state, SqlState::InsufficientPrivilege, "the isolation column is never a filter");
    }
}
