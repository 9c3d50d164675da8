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

/// [`rows`] of a query about a table (its indexes, orphans, queue), the same for every corpus
/// that has a source in it: read once per [`super::with_table_memo`] call.
pub fn table_rows(query: &Query) -> Result<Vec<serde_json::Value>, CoreError> {
    let key = format!("health\u{0}{}\u{0}{:?}", query.sql(), query.params());
    let v = super::table_memo(key, || Ok(serde_json::Value::Array(rows(query)?)))?;
    Ok(match v {
        serde_json::Value::Array(rows) => rows,
        _ => Vec::new(),
    })
}
