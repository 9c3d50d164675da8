//! Registering corpora, sources and edge sets: the checks the definition functions
//! (`corpus_create`, `corpus_alter`, `corpus_add_source`, `corpus_add_edges`, ...) make of their
//! arguments before they write the catalog, and the errors they answer with. What a definition
//! means is checked afterwards against the live tables ([`crate::definition`]).

use serde_json::Value;

use crate::error::{CoreError, Result, SqlState};
use crate::model::is_name;

/// What a registered name names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    Corpus,
    Source,
    EdgeSet,
}

impl Named {
    fn what(self) -> &'static str {
        match self {
            Named::Corpus => "corpus",
            Named::Source => "source",
            Named::EdgeSet => "edge set",
        }
    }
}

/// The name, when it is a valid one (22023 otherwise, NULL included).
pub fn check_name(kind: Named, name: Option<&str>) -> Result<&str> {
    match name {
        Some(n) if is_name(n) => Ok(n),
        other => {
            let what = kind.what();
            let article = if kind == Named::EdgeSet { "An" } else { "A" };
            Err(CoreError::new(
                SqlState::InvalidParameterValue,
                format!("invalid {what} name \"{}\"", other.unwrap_or("")),
                format!(
                    "{article} {what} name is a lower-case identifier: letters, digits and _, at most 63 characters."
                ),
            ))
        }
    }
}

/// The JSON shape a definition argument must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Object,
    Array,
}

/// jsonb_typeof's name of a JSON value's type.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// 22023 unless a definition argument (when given) has its shape: the catalog's CHECK
/// constraints would answer 23514 without saying which argument or what to pass.
pub fn check_shape(value: Option<&Value>, argument: &str, shape: Shape) -> Result<()> {
    let Some(v) = value else { return Ok(()) };
    let (ok, name, hint) = match shape {
        Shape::Object => {
            (v.is_object(), "object", format!("Pass an object of column names and values, e.g. {argument} => '{{}}'."))
        }
        Shape::Array => (v.is_array(), "array", format!("Pass an array, e.g. {argument} => '[]'.")),
    };
    if ok {
        return Ok(());
    }
    Err(CoreError::new(
        SqlState::InvalidParameterValue,
        format!("{argument} must be a jsonb {name}, got a {}", json_type(v)),
        hint,
    ))
}

/// 0A000: the id or input columns of an embedding column's slot change only with a new source.
pub fn slot_columns_fixed(source: &str, embedding: &str) -> CoreError {
    CoreError::new(
        SqlState::FeatureNotSupported,
        format!("the id and embedding input columns of source \"{source}\" cannot change while it embeds into \"{embedding}\""),
        "Map another embedding column (embedding_column => ...), or drop the source and add it again \
         (corpus.corpus_drop_source + corpus_add_source).",
    )
}

/// 42704: no corpus of that name.
pub fn no_corpus(name: &str, hint: &str) -> CoreError {
    CoreError::new(SqlState::UndefinedObject, format!("corpus \"{name}\" does not exist"), hint)
}

/// The hint of a missing corpus to a function that registers something in it.
pub const CREATE_IT: &str = "Create it with corpus.corpus_create, or see corpus.corpus_list().";

/// 42710: a corpus of that name exists.
pub fn corpus_exists(name: &str) -> CoreError {
    CoreError::new(
        SqlState::DuplicateObject,
        format!("corpus \"{name}\" already exists"),
        "Use corpus.corpus_alter to change it, or corpus.corpus_drop first.",
    )
}

/// 42710: the corpus has a source of that name.
pub fn source_exists(corpus: &str, source: &str) -> CoreError {
    CoreError::new(
        SqlState::DuplicateObject,
        format!("source \"{source}\" is already registered in corpus \"{corpus}\""),
        "Use corpus.corpus_drop_source first to redefine it.",
    )
}

/// 42704: the corpus has no source of that name.
pub fn no_source(corpus: &str, source: &str, hint: &str) -> CoreError {
    CoreError::new(
        SqlState::UndefinedObject,
        format!("source \"{source}\" is not registered in corpus \"{corpus}\""),
        hint,
    )
}

/// 42710: the corpus has an edge set of that name.
pub fn edges_exist(corpus: &str, name: &str) -> CoreError {
    CoreError::new(
        SqlState::DuplicateObject,
        format!("edge set \"{name}\" is already registered in corpus \"{corpus}\""),
        "Use corpus.corpus_drop_edges first to redefine it.",
    )
}

/// 42704: the corpus has no edge set of that name.
pub fn no_edges(corpus: &str, name: &str) -> CoreError {
    CoreError::new(
        SqlState::UndefinedObject,
        format!("edge set \"{name}\" is not registered in corpus \"{corpus}\""),
        "See the edge sets of each corpus in corpus.corpus_list().",
    )
}

/// 22004: an argument a registration requires is NULL (the error names them all).
pub fn required(names: &[&str], hint: &str) -> CoreError {
    let list = match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    };
    CoreError::new(SqlState::NullValueNotAllowed, format!("{list} are required"), hint)
}

/// The columns a source's embedding is computed from: `embedding_inputs` when given (at least
/// one, none NULL), else the text column.
pub fn embedding_inputs(inputs: Option<Vec<Option<String>>>, text_column: &str) -> Result<Vec<String>> {
    match inputs {
        None => Ok(vec![text_column.to_string()]),
        Some(cols) if !cols.is_empty() && cols.iter().all(Option::is_some) => Ok(cols.into_iter().flatten().collect()),
        Some(_) => Err(CoreError::new(
            SqlState::InvalidParameterValue,
            "embedding_inputs must name at least one column, and no NULL",
            "Name the text columns the embedding is computed from, or leave embedding_inputs out to use text_column.",
        )),
    }
}

/// A gold set's name when it is a valid one: lower-case letters, digits, `_`, `.` and `-`,
/// starting with a letter or `_`, at most 63 characters (22023 otherwise, NULL included).
pub fn check_gold_set_name(name: Option<&str>) -> Result<&str> {
    let ok = |n: &str| {
        n.len() <= 63
            && n.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
            && n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c))
    };
    match name {
        Some(n) if ok(n) => Ok(n),
        other => Err(CoreError::new(
            SqlState::InvalidParameterValue,
            format!("invalid gold set name \"{}\"", other.unwrap_or("")),
            "Use lower-case letters, digits, _, . and -, starting with a letter or _.",
        )),
    }
}

/// A gold set's judgment level: `item` (judgments name item ids) or `parent`.
pub fn check_level(level: Option<&str>) -> Result<&str> {
    match level {
        Some(l @ ("item" | "parent")) => Ok(l),
        other => Err(CoreError::new(
            SqlState::InvalidParameterValue,
            format!("unknown judgment level \"{}\"", other.unwrap_or("")),
            "level is item (judgments name item ids) or parent (judgments name parent ids).",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_lower_case_identifiers() {
        assert_eq!(check_name(Named::Corpus, Some("legal_2")), Ok("legal_2"));
        for bad in [None, Some(""), Some("Legal"), Some("2legal"), Some("a-b"), Some("ש")] {
            let e = check_name(Named::Corpus, bad).unwrap_err();
            assert_eq!(e.state, SqlState::InvalidParameterValue);
            assert!(e.message.starts_with("invalid corpus name"), "{}", e.message);
        }
        assert!(check_name(Named::Source, Some(&"x".repeat(63))).is_ok());
        let e = check_name(Named::EdgeSet, Some(&"x".repeat(64))).unwrap_err();
        assert!(e.hint.starts_with("An edge set name"), "{}", e.hint);
    }

    #[test]
    fn definition_arguments_have_their_shape() {
        assert!(check_shape(None, "rule", Shape::Object).is_ok());
        assert!(check_shape(Some(&json!({})), "rule", Shape::Object).is_ok());
        assert!(check_shape(Some(&json!([])), "must_include", Shape::Array).is_ok());
        let e = check_shape(Some(&json!([1])), "isolation", Shape::Object).unwrap_err();
        assert_eq!(e.message, "isolation must be a jsonb object, got a array");
        assert_eq!(e.hint, "Pass an object of column names and values, e.g. isolation => '{}'.");
        let e = check_shape(Some(&Value::Null), "must_include", Shape::Array).unwrap_err();
        assert_eq!(e.message, "must_include must be a jsonb array, got a null");
    }

    #[test]
    fn required_arguments_are_listed_in_one_error() {
        let e = required(&["a", "b", "c"], "h");
        assert_eq!((e.state, e.message.as_str()), (SqlState::NullValueNotAllowed, "a, b and c are required"));
    }

    #[test]
    fn embedding_inputs_default_to_the_text_column() {
        assert_eq!(embedding_inputs(None, "body").unwrap(), vec!["body"]);
        assert_eq!(embedding_inputs(Some(vec![Some("t".into()), Some("b".into())]), "x").unwrap(), vec!["t", "b"]);
        for bad in [Some(vec![]), Some(vec![Some("t".into()), None])] {
            assert_eq!(embedding_inputs(bad, "x").unwrap_err().state, SqlState::InvalidParameterValue);
        }
    }

    #[test]
    fn gold_sets_have_names_and_levels() {
        assert_eq!(check_gold_set_name(Some("heq-val.v2")), Ok("heq-val.v2"));
        for bad in [None, Some(""), Some("-x"), Some("Heq"), Some("a b")] {
            assert_eq!(check_gold_set_name(bad).unwrap_err().state, SqlState::InvalidParameterValue);
        }
        assert_eq!(check_level(Some("parent")), Ok("parent"));
        let e = check_level(None).unwrap_err();
        assert_eq!(e.message, "unknown judgment level \"\"");
    }
}
