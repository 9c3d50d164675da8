//! The health check's reads: queries planned by `pg_corpus_core::health` (and its fixed
//! catalog queries) returned as JSON rows for the judging rules.

use pg_corpus_core::sql::Param;
use pg_corpus_core::CoreError;
use pgrx::prelude::*;
use pgrx::JsonB;

use super::{datums, spi_failure};

/// Run a read-only query and return its rows as JSON objects (column name → value).
pub fn query_json(sql: &str, params: &[Param]) -> Result<Vec<serde_json::Value>, CoreError> {
    Spi::connect(|client| {
        let wrapped = format!("SELECT to_jsonb(q) FROM ({sql}) AS q");
        let mut rows = Vec::new();
        for row in client.select(&wrapped, None, &datums(params))? {
            if let Some(JsonB(v)) = row.get::<JsonB>(1)? {
                rows.push(v);
            }
        }
        Ok(rows)
    })
    .map_err(spi_failure)
}
