//! SQL text helpers. Identifiers are always quoted (never interpolated bare) and values never
//! appear in SQL text: they travel as bind parameters, collected by [`Params`].

/// Quote an identifier the way PostgreSQL's `quote_ident` does when quoting is needed; we
/// quote always, which is never wrong and keeps mixed-case or keyword names working.
pub fn ident(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for ch in name.chars() {
        if ch == '"' {
            out.push('"');
        }
        out.push(ch);
    }
    out.push('"');
    out
}

/// `"schema"."name"`.
pub fn qualified(schema: &str, name: &str) -> String {
    format!("{}.{}", ident(schema), ident(name))
}

/// `'value'` with `'` doubled and `\` doubled: the quoting of SQL string literals (with the
/// `E` prefix, see [`literal`]) and of tsvector/tsquery input.
pub fn quote_escaped(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for ch in value.chars() {
        match ch {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Quote a string literal the way PostgreSQL's `quote_literal` does: doubled single quotes,
/// and the `E''` form with doubled backslashes when the text has a backslash (so that the
/// literal means the same whatever `standard_conforming_strings` is).
pub fn literal(value: &str) -> String {
    if value.contains('\\') {
        format!("E{}", quote_escaped(value))
    } else {
        quote_escaped(value)
    }
}

/// A configuration value as it appears after `SET name =`: bare when it is a plain word or
/// number (what pg_corpus sets), else a quoted literal.
pub fn setting_value(value: &str) -> String {
    if !value.is_empty() && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')) {
        value.to_string()
    } else {
        literal(value)
    }
}

/// A bind parameter of a subplan. The extension turns each into a typed datum.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum Param {
    Text(String),
    TextArray(Vec<String>),
    Floats(Vec<f32>),
    Int(i64),
    Float(f64),
}

/// Collects parameters and hands out their `$n` placeholders.
#[derive(Debug, Default, Clone)]
pub struct Params {
    pub values: Vec<Param>,
}

impl Params {
    pub fn push(&mut self, p: Param) -> String {
        self.values.push(p);
        format!("${}", self.values.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_everything() {
        assert_eq!(ident("id"), "\"id\"");
        assert_eq!(ident("we\"ird"), "\"we\"\"ird\"");
        assert_eq!(ident("x\"; DROP TABLE t; --"), "\"x\"\"; DROP TABLE t; --\"");
        assert_eq!(qualified("public", "T"), "\"public\".\"T\"");
    }

    #[test]
    fn literals_are_quoted() {
        assert_eq!(literal("abc"), "'abc'");
        assert_eq!(literal("e', false); DROP TABLE victim; --"), "'e'', false); DROP TABLE victim; --'");
        assert_eq!(literal(r"a\b'"), r"E'a\\b'''");
        assert_eq!(setting_value("1.1"), "1.1");
        assert_eq!(setting_value("relaxed_order"), "relaxed_order");
        assert_eq!(setting_value("pg_catalog, pg_temp"), "'pg_catalog, pg_temp'");
        assert_eq!(setting_value("x'; DROP TABLE t; --"), "'x''; DROP TABLE t; --'");
    }

    #[test]
    fn placeholders_count_up() {
        let mut p = Params::default();
        assert_eq!(p.push(Param::Int(1)), "$1");
        assert_eq!(p.push(Param::Text("a".into())), "$2");
        assert_eq!(p.values.len(), 2);
    }
}
