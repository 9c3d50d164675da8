//! Reading jsonb that callers and tables hand the extension (filters, definitions, metadata)
//! with a bound on its nesting: serde_json stops at 128 levels with an error the extension
//! used to turn into XX000, and deeper recursion would risk the backend's stack. Nothing
//! pg_corpus reads needs more than a few levels.

use serde_json::Value;

use crate::error::{CoreError, Result, SqlState};

/// Caller input as an error message shows it: JSON-quoted (so that quotes and newlines cannot
/// forge message text) and at most [`BRIEF_CHARS`] characters.
pub fn brief_str(s: &str) -> String {
    let mut out: String = s.chars().take(BRIEF_CHARS).collect();
    if s.chars().nth(BRIEF_CHARS).is_some() {
        out.push('…');
    }
    Value::String(out).to_string()
}

/// A caller's JSON value as an error message shows it: its JSON text, at most [`BRIEF_CHARS`]
/// characters.
pub fn brief(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().nth(BRIEF_CHARS).is_some() {
        let mut out: String = text.chars().take(BRIEF_CHARS).collect();
        out.push('…');
        out
    } else {
        text
    }
}

/// How much of a caller's input an error message repeats.
pub const BRIEF_CHARS: usize = 100;

/// The deepest nesting pg_corpus reads (objects and arrays, the outermost counting 1).
pub const MAX_DEPTH: usize = 64;

/// The deepest nesting of arrays and objects in JSON text (brackets inside strings do not
/// count).
pub fn depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Parse JSON text (jsonb's output) of at most [`MAX_DEPTH`] levels; deeper: 54001, naming
/// `what` (an argument, a column).
pub fn parse(text: &str, what: &str) -> Result<Value> {
    let d = depth(text);
    if d > MAX_DEPTH {
        return Err(CoreError::new(
            SqlState::StatementTooComplex,
            format!("{what} is nested {d} levels deep; pg_corpus reads jsonb of at most {MAX_DEPTH} levels"),
            "Filters, definitions and metadata are flat objects of fields and values; pass a shallower value.",
        ));
    }
    serde_json::from_str(text).map_err(|e| {
        CoreError::new(
            SqlState::InvalidParameterValue,
            format!("{what} could not be read as JSON: {e}"),
            "Pass a jsonb object.",
        )
    })
}

/// A JSON scalar as the text form PostgreSQL casts from.
pub fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(n: usize) -> String {
        format!("{}1{}", "{\"a\": ".repeat(n), "}".repeat(n))
    }

    #[test]
    fn depth_counts_brackets_outside_strings() {
        assert_eq!(depth("1"), 0);
        assert_eq!(depth(r#"{"a": [1, {"b": 2}]}"#), 3);
        assert_eq!(depth(r#"{"a": "[[[[{{{"}"#), 1);
        assert_eq!(depth(r#"{"a\"[[": "\\"}"#), 1);
        assert_eq!(depth(&nested(300)), 300);
    }

    #[test]
    fn deep_values_are_refused_with_54001_and_shallow_ones_parse() {
        assert!(parse(&nested(MAX_DEPTH), "filters").unwrap().pointer("/a/a").is_some());
        let e = parse(&nested(MAX_DEPTH + 1), "filters").unwrap_err();
        assert_eq!(e.state.code(), "54001");
        assert!(e.message.starts_with("filters is nested 65 levels deep"), "{}", e.message);
        let e = parse(&nested(100_000), "metadata").unwrap_err();
        assert_eq!(e.state.code(), "54001");
        assert_eq!(parse("{", "x").unwrap_err().state.code(), "22023");
    }
}
