//! Item ids in their key's own type: which type a search may return them as.

use serde_json::Value;

use crate::error::{CoreError, SqlState};
use crate::model::Corpus;

/// Check that a corpus' item ids can be returned as `requested` (a base type, `format_type`; `builtin`:
/// PostgreSQL's own, whose input function is no table owner's code): every source's key has
/// that base type. A corpus without sources returns no ids and takes any type.
pub fn check_key_type(corpus: &Corpus, requested: &str, builtin: bool) -> Result<(), CoreError> {
    let Some(first) = corpus.sources.first() else { return Ok(()) };
    let shared = corpus.sources.iter().all(|s| s.id.cast_type == first.id.cast_type);
    let keys: serde_json::Map<String, Value> =
        corpus.sources.iter().map(|s| (s.name.clone(), Value::from(s.id.cast_type.as_str()))).collect();
    let detail = serde_json::json!({"kind": "key_type", "requested": requested, "sources": keys}).to_string();
    let cast_hint = format!(
        "corpus_hybrid_search returns every item id as text: join back with a cast per source, \
         e.g. JOIN {} t ON t.{} = h.item_id::{} AND h.source = {}.",
        crate::sql::qualified(&first.item.schema, &first.item.name),
        crate::sql::ident(&first.id.column),
        first.id.cast_type,
        crate::sql::literal(&first.name)
    );
    if !shared {
        return Err(CoreError::new(
            SqlState::DatatypeMismatch,
            format!("the sources of corpus \"{}\" have keys of different types", corpus.name),
            cast_hint,
        )
        .with_detail(detail));
    }
    let key = first.id.cast_type.as_str();
    if key != requested {
        return Err(CoreError::new(
            SqlState::DatatypeMismatch,
            format!("the item ids of corpus \"{}\" are of type {key}, not {requested}", corpus.name),
            format!("Pass NULL::{key} as id_type."),
        )
        .with_detail(detail));
    }
    if !builtin {
        return Err(CoreError::new(
            SqlState::FeatureNotSupported,
            format!("item ids of type {key} are returned only as text"),
            format!("Types built into PostgreSQL only: {cast_hint}"),
        )
        .with_detail(detail));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_key_type;
    use crate::error::SqlState;
    use crate::testing::legal;

    #[test]
    fn key_type_is_the_base_type_every_source_shares() {
        let mut c = legal();
        assert_eq!(check_key_type(&c, "bigint", true), Ok(()));

        let e = check_key_type(&c, "integer", true).unwrap_err();
        assert_eq!(e.state, SqlState::DatatypeMismatch);
        assert!(e.message.contains("bigint, not integer"), "{}", e.message);
        assert_eq!(e.hint, "Pass NULL::bigint as id_type.");
        let detail: serde_json::Value = serde_json::from_str(e.detail.as_deref().unwrap()).unwrap();
        assert_eq!(detail["sources"]["halachot"], "bigint");

        assert_eq!(check_key_type(&c, "bigint", false).unwrap_err().state, SqlState::FeatureNotSupported);

        c.sources[1].id.cast_type = "uuid".into();
        let e = check_key_type(&c, "bigint", true).unwrap_err();
        assert_eq!(e.state, SqlState::DatatypeMismatch);
        assert!(e.message.contains("different types"), "{}", e.message);
        assert!(e.hint.contains("h.item_id::bigint AND h.source = 'chunks'"), "{}", e.hint);

        c.sources.clear();
        assert_eq!(check_key_type(&c, "uuid", false), Ok(()));
    }
}
