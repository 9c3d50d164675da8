//! The search audit log: opt-in per corpus, one row per search of
//! `corpus_hybrid_search` or `corpus_find_similar` with who searched what and what came back.
//! The row is written in the caller's transaction (a rolled-back search leaves none, a failed
//! search writes none); on a hot standby or in a read-only transaction it is skipped and
//! counted. What a row holds is decided here; `src/spi/audit.rs` writes it.

use serde_json::{json, Value};

use crate::error::{CoreError, Result, SqlState};
use crate::model::{AuditConfig, SearchRow};

const SHAPE: &str =
    "audit is {\"enabled\": true, \"query_text\": false}: both booleans, both optional (default false).";

/// Parse a corpus' audit settings.
pub fn parse(value: &Value) -> Result<AuditConfig> {
    let obj = match value {
        Value::Null => return Ok(AuditConfig::default()),
        Value::Object(o) => o,
        _ => return Err(CoreError::new(SqlState::InvalidParameterValue, "audit must be a JSON object", SHAPE)),
    };
    let mut out = AuditConfig::default();
    for (k, v) in obj {
        let slot = match k.as_str() {
            "enabled" => &mut out.enabled,
            "query_text" => &mut out.query_text,
            other => {
                return Err(CoreError::new(
                    SqlState::InvalidParameterValue,
                    format!("audit has an unknown key {}", crate::json::brief_str(other)),
                    SHAPE,
                ))
            }
        };
        *slot = match v {
            Value::Bool(b) => *b,
            Value::Null => false,
            other => {
                return Err(CoreError::new(
                    SqlState::InvalidParameterValue,
                    format!("audit.{k} must be a boolean, got {}", crate::json::brief(other)),
                    SHAPE,
                ))
            }
        };
    }
    Ok(out)
}

/// One audit row, as the SPI layer inserts it.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    pub corpus: String,
    /// `corpus_hybrid_search` or `corpus_find_similar`.
    pub function: &'static str,
    pub mode: String,
    pub k: i32,
    pub filters: Value,
    /// What the query hash is computed from (sha256 in the database): the text and the
    /// vector's components, so equal queries have equal hashes.
    pub hash_input: String,
    /// The query text, when the corpus stores it.
    pub query_text: Option<String>,
    /// `[{"rank", "source", "item_id"}]`.
    pub results: Value,
    /// The search's other arguments that shape its results.
    pub options: Value,
    pub latency_ms: f64,
}

/// What identifies a query for its hash: its text, its vector, the other spaces' vectors and the
/// extra queries (as the caller gave them: serde_json keeps object keys sorted), and a
/// find-similar search's item.
pub fn hash_input(
    text: Option<&str>,
    vector: Option<&[f32]>,
    query_vectors: &Value,
    extra_queries: &Value,
    item: Option<(&str, &str)>,
) -> String {
    let v: Vec<String> = vector.map(|v| v.iter().map(|x| format!("{x:e}")).collect()).unwrap_or_default();
    json!({"text": text, "vector": v, "query_vectors": query_vectors, "extra_queries": extra_queries,
           "item": item.map(|(s, i)| json!([s, i]))})
    .to_string()
}

/// The returned hits, as the audit keeps them: ranks and ids, never content.
pub fn results(rows: &[SearchRow]) -> Value {
    Value::Array(rows.iter().map(|r| json!({"rank": r.rank, "source": r.source, "item_id": r.item_id})).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_and_hashes() {
        assert_eq!(parse(&json!({"enabled": true})).unwrap(), AuditConfig { enabled: true, query_text: false });
        assert_eq!(parse(&Value::Null).unwrap(), AuditConfig::default());
        for bad in [json!([]), json!({"enabled": "yes"}), json!({"other": true})] {
            let e = parse(&bad).unwrap_err();
            assert_eq!(e.state, SqlState::InvalidParameterValue);
            assert!(!e.hint.is_empty());
        }
        let n = Value::Null;
        let a = hash_input(Some("x"), Some(&[0.5, 1.0]), &n, &n, None);
        assert_eq!(a, hash_input(Some("x"), Some(&[0.5, 1.0]), &n, &n, None));
        assert_ne!(a, hash_input(Some("x"), Some(&[0.5, 1.5]), &n, &n, None));
        assert_ne!(a, hash_input(Some("x"), None, &n, &n, None));
        assert_ne!(a, hash_input(Some("x"), Some(&[0.5, 1.0]), &json!({"pages": [1.0]}), &n, None));
        assert_ne!(a, hash_input(Some("x"), Some(&[0.5, 1.0]), &n, &json!([{"text": "y"}]), None));
        assert_ne!(
            hash_input(None, None, &n, &n, Some(("chunks", "1"))),
            hash_input(None, None, &n, &n, Some(("chunks", "2")))
        );
    }
}
