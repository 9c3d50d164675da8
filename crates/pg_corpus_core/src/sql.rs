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
    fn placeholders_count_up() {
        let mut p = Params::default();
        assert_eq!(p.push(Param::Int(1)), "$1");
        assert_eq!(p.push(Param::Text("a".into())), "$2");
        assert_eq!(p.values.len(), 2);
    }
}
