//! The health check's reads: queries built by `pg_corpus_core::health` (a `Query` has no public
//! constructor, so no health SQL is written in this crate), returned as JSON objects (column
//! name → value) for the judging rules.

use crate::jsonb::JsonbText;
use pg_corpus_core::health::Query;
use pg_corpus_core::CoreError;
use pgrx::prelude::*;

use super::{datums, spi_failure};

/// Run a health query and return its rows as JSON objects.
pub fn rows(query: &Query) -> Result<Vec<serde_json::Value>, CoreError> {
    Spi::connect(|client| {
        // (a materialised CTE, not a subquery: Citus pushes a subquery's whole-row reference
        // down to the shards, and the rows come back as anonymous records, {"f1": ...})
        let wrapped = format!("WITH q AS MATERIALIZED ({}) SELECT to_jsonb(q) FROM q", query.sql());
        let mut rows = Vec::new();
        for row in client.select(&wrapped, None, &datums(query.params()))? {
            if let Some(v) = row.get::<JsonbText>(1)? {
                rows.push(v);
            }
        }
        Ok(rows)
    })
    .map_err(spi_failure)?
    .iter()
    .map(|v| v.parse("a health check row"))
    .collect()
}

/// The first row of a health query (JSON null when it has none).
pub fn first_row(query: &Query) -> Result<serde_json::Value, CoreError> {
    Ok(rows(query)?.into_iter().next().unwrap_or(serde_json::Value::Null))
}

thread_local! {
    /// Rows of the table-level queries of the health check being run (see [`with_table_memo`]).
    static TABLE_MEMO: std::cell::RefCell<Option<std::collections::HashMap<String, Vec<serde_json::Value>>>> =
        const { std::cell::RefCell::new(None) };
}

/// Run `f` (one health check call) with [`table_rows`] remembering what it read: corpora that
/// share a table ask the same questions of it once.
pub fn with_table_memo<T>(f: impl FnOnce() -> T) -> T {
    struct Forget;
    impl Drop for Forget {
        fn drop(&mut self) {
            TABLE_MEMO.with(|m| *m.borrow_mut() = None);
        }
    }
    let _forget = Forget;
    TABLE_MEMO.with(|m| *m.borrow_mut() = Some(Default::default()));
    f()
}

/// [`rows`] of a query about a table (its indexes, orphans, queue), the same for every corpus
/// that has a source in it: read once per [`with_table_memo`] call.
pub fn table_rows(query: &Query) -> Result<Vec<serde_json::Value>, CoreError> {
    let key = format!("{}\u{0}{:?}", query.sql(), query.params());
    if let Some(hit) = TABLE_MEMO.with(|m| m.borrow().as_ref().and_then(|m| m.get(&key).cloned())) {
        return Ok(hit);
    }
    let out = rows(query)?;
    TABLE_MEMO.with(|m| {
        if let Some(m) = m.borrow_mut().as_mut() {
            m.insert(key, out.clone());
        }
    });
    Ok(out)
}
