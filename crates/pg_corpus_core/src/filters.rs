//! Caller filters: a jsonb object validated against the corpus' declared filter fields. Filters
//! only narrow a search (they are ANDed with the corpus predicate); an unknown field, a value of
//! the wrong type or an attempt to name the isolation column is an error, never ignored.

use serde_json::Value;

use crate::error::{CoreError, Result, SqlState};
use crate::json::scalar_text;
use crate::model::{Condition, Corpus, FieldLimits, FieldType, Op};

/// Whether a date filter value is a plain ISO 8601 date (the form bounds compare as text).
pub fn is_iso_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

const FILTER_HINT: &str =
    "Filters look like {\"field\": value}, {\"field\": [v1, v2]} or {\"field\": {\"gte\": v, \"lt\": v}}.";

/// How a search treats invalid conditions (`filter_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterMode {
    /// Any invalid condition is an error (the default).
    Strict,
    /// Invalid conditions are dropped and reported (model-proposed
    /// filters only narrow, a wrong one never breaks the search). The isolation column and the
    /// required scope filters are never lenient.
    Lenient,
}

impl FilterMode {
    pub fn parse(s: &str) -> Result<FilterMode> {
        match s {
            "strict" => Ok(FilterMode::Strict),
            "lenient" => Ok(FilterMode::Lenient),
            other => Err(CoreError::new(
                SqlState::InvalidParameterValue,
                format!("unknown filter mode {}", crate::json::brief_str(other)),
                "filter_mode is strict (an invalid filter is an error) or lenient (it is dropped and reported).",
            )),
        }
    }
}

/// A condition a lenient search dropped: the field, the part of the filter object it was
/// (`{"field": value}` or `{"field": {"op": value}}`), why, and the SQLSTATE a strict search
/// raises for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub field: String,
    pub condition: Value,
    pub reason: String,
    pub sqlstate: SqlState,
}

/// Compare two bounds or values of one ordered field type: numbers numerically, dates as text.
pub fn compare_bound(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// A calendar date `YYYY-MM-DD` (years 1–9999).
pub fn valid_date(s: &str) -> bool {
    if !is_iso_date(s) {
        return false;
    }
    let (y, m, d): (u32, u32, u32) =
        (s[0..4].parse().unwrap_or(0), s[5..7].parse().unwrap_or(0), s[8..10].parse().unwrap_or(0));
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => 0,
    };
    y >= 1 && d >= 1 && d <= days
}

/// An ISO 8601 timestamp: a [`valid_date`], optionally `T` or a space and `HH:MM[:SS[.fraction]]`,
/// then optionally `Z` or an offset `±HH[:MM]`.
pub fn valid_timestamptz(s: &str) -> bool {
    if s.len() < 10 || !s.is_char_boundary(10) || !valid_date(&s[..10]) {
        return false;
    }
    let rest = &s[10..];
    if rest.is_empty() {
        return true;
    }
    let Some(rest) = rest.strip_prefix('T').or_else(|| rest.strip_prefix(' ')) else { return false };
    let two = |t: &str, max: u32| {
        t.len() >= 2
            && t.as_bytes()[..2].iter().all(u8::is_ascii_digit)
            && t[..2].parse::<u32>().is_ok_and(|n| n <= max)
    };
    if !two(rest, 23) || rest.as_bytes().get(2) != Some(&b':') || !two(&rest[3..], 59) {
        return false;
    }
    let mut rest = &rest[5..];
    if let Some(r) = rest.strip_prefix(':') {
        if !two(r, 60) {
            return false;
        }
        rest = &r[2..];
        if let Some(r) = rest.strip_prefix('.') {
            let digits = r.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return false;
            }
            rest = &r[digits..];
        }
    }
    match rest {
        "" | "Z" => true,
        zone => {
            let Some(z) = zone.strip_prefix('+').or_else(|| zone.strip_prefix('-')) else { return false };
            two(z, 15) && matches!(&z[2..], "" | "00" | "30" | "45" | ":00" | ":30" | ":45")
        }
    }
}

/// A filter value checked against its field's type and declared limits, in the text form the
/// type casts from.
pub(crate) fn typed_value(field: &str, ty: FieldType, v: &Value, limits: Option<&FieldLimits>) -> Result<String> {
    let ok = match ty {
        FieldType::Text => v.is_string(),
        // checked here, not left to the cast: a lenient search must be able to drop it
        FieldType::Date => v.as_str().is_some_and(valid_date),
        FieldType::Timestamptz => v.as_str().is_some_and(valid_timestamptz),
        FieldType::Integer => v.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        FieldType::Bigint => v.is_i64(),
        FieldType::Numeric => v.is_number(),
        FieldType::Boolean => v.is_boolean(),
    };
    if !ok {
        let expected = match ty {
            FieldType::Text => "a JSON string",
            FieldType::Date | FieldType::Timestamptz => "a JSON string in ISO 8601 form",
            FieldType::Integer => "a JSON integer within the int4 range",
            FieldType::Bigint => "a JSON integer",
            FieldType::Numeric => "a JSON number",
            FieldType::Boolean => "true or false",
        };
        return Err(CoreError::new(
            SqlState::DatatypeMismatch,
            format!(
                "filter field \"{field}\" is of type {} but the value {} is not {expected}",
                ty.sql(),
                crate::json::brief(v)
            ),
            format!("Pass {expected} for \"{field}\"."),
        ));
    }
    let text = scalar_text(v).expect("checked scalar above");
    if let Some(l) = limits {
        if let Some(values) = &l.values {
            if !values.contains(&text) {
                let shown: Vec<String> = values.iter().take(20).map(|x| crate::sql::literal(x)).collect();
                return Err(CoreError::new(
                    SqlState::InvalidParameterValue,
                    format!("{} is not an allowed value of filter field \"{field}\"", crate::json::brief(v)),
                    format!("Allowed values: {}{}.", shown.join(", "), if values.len() > 20 { ", …" } else { "" }),
                ));
            }
        }
        let date_form = ty == FieldType::Date && (l.min.is_some() || l.max.is_some()) && !is_iso_date(&text);
        let below = l.min.as_ref().is_some_and(|m| compare_bound(v, m) == Some(std::cmp::Ordering::Less));
        let above = l.max.as_ref().is_some_and(|m| compare_bound(v, m) == Some(std::cmp::Ordering::Greater));
        if date_form || below || above {
            let range = format!(
                "from {} to {}",
                l.min.as_ref().map_or("any".to_string(), Value::to_string),
                l.max.as_ref().map_or("any".to_string(), Value::to_string)
            );
            return Err(CoreError::new(
                SqlState::InvalidParameterValue,
                format!("{} is outside the range of filter field \"{field}\" ({range})", crate::json::brief(v)),
                format!("Pass a value {range}{}.", if ty == FieldType::Date { " as 'YYYY-MM-DD'" } else { "" }),
            ));
        }
    }
    Ok(text)
}

/// A filter error with its DETAIL: kind `bad_filter` and the field (its first
/// [`crate::json::BRIEF_CHARS`] characters).
fn bad_filter(e: CoreError, field: Option<&str>) -> CoreError {
    let brief = field.map(|f| f.chars().take(crate::json::BRIEF_CHARS).collect::<String>());
    e.with_kind("bad_filter", brief.as_deref())
}

/// The conditions of one field's part of a filter object (an error for any invalid piece).
fn field_conditions(corpus: &Corpus, field: &str, v: &Value, out: &mut Vec<(Condition, Value)>) -> Result<()> {
    conditions_of_field(corpus, field, v, out).map_err(|e| bad_filter(e, Some(field)))
}

fn conditions_of_field(corpus: &Corpus, field: &str, v: &Value, out: &mut Vec<(Condition, Value)>) -> Result<()> {
    let ty = *corpus.filter_fields.get(field).ok_or_else(|| {
        let declared: Vec<&str> = corpus.filter_fields.keys().map(String::as_str).collect();
        CoreError::new(
            SqlState::UndefinedColumn,
            format!("corpus \"{}\" has no filter field {}", corpus.name, crate::json::brief_str(field)),
            if declared.is_empty() {
                "This corpus declares no filter fields.".to_string()
            } else {
                format!("Declared filter fields: {}.", declared.join(", "))
            },
        )
    })?;
    let limits = corpus.filter_limits.get(field);
    let part = |x: Value| Value::Object([(field.to_string(), x)].into_iter().collect());
    match v {
        Value::Null => Err(CoreError::new(
            SqlState::DatatypeMismatch,
            format!("filter field \"{field}\" has a null value"),
            "Leave the field out instead of passing null.",
        )),
        Value::Array(items) => {
            if items.is_empty() {
                return Err(CoreError::new(
                    SqlState::InvalidParameterValue,
                    format!("filter field \"{field}\" has an empty value list"),
                    "An empty list would match nothing; leave the field out or give at least one value.",
                ));
            }
            let values = items.iter().map(|x| typed_value(field, ty, x, limits)).collect::<Result<Vec<_>>>()?;
            out.push((Condition { field: field.to_string(), field_type: ty, op: Op::In, values }, part(v.clone())));
            Ok(())
        }
        Value::Object(ops) => {
            if ops.is_empty() {
                return Err(CoreError::new(
                    SqlState::InvalidParameterValue,
                    format!("filter field \"{field}\" has no operator"),
                    FILTER_HINT,
                ));
            }
            for (op, x) in ops {
                out.push(op_condition(field, ty, limits, op, x)?);
            }
            Ok(())
        }
        scalar => {
            let value = typed_value(field, ty, scalar, limits)?;
            out.push((
                Condition { field: field.to_string(), field_type: ty, op: Op::Eq, values: vec![value] },
                part(v.clone()),
            ));
            Ok(())
        }
    }
}

fn op_condition(
    field: &str,
    ty: FieldType,
    limits: Option<&FieldLimits>,
    op: &str,
    x: &Value,
) -> Result<(Condition, Value)> {
    let parsed = match op {
        "eq" => Op::Eq,
        "gt" => Op::Gt,
        "gte" => Op::Gte,
        "lt" => Op::Lt,
        "lte" => Op::Lte,
        other => {
            return Err(CoreError::new(
                SqlState::InvalidParameterValue,
                format!("unknown filter operator {} on field \"{field}\"", crate::json::brief_str(other)),
                "Operators are eq, gt, gte, lt and lte.",
            ))
        }
    };
    let value = typed_value(field, ty, x, limits)?;
    let part = serde_json::json!({ field: { op: x } });
    Ok((Condition { field: field.to_string(), field_type: ty, op: parsed, values: vec![value] }, part))
}

fn isolation_error(corpus: &Corpus, field: &str) -> CoreError {
    bad_filter(
        CoreError::new(
            SqlState::InsufficientPrivilege,
            format!("\"{field}\" is the isolation column of corpus \"{}\" and cannot be filtered on", corpus.name),
            "The corpus predicate is fixed by the corpus definition; search another corpus instead of overriding it.",
        ),
        Some(field),
    )
}

fn not_an_object() -> CoreError {
    bad_filter(CoreError::new(SqlState::InvalidParameterValue, "filters must be a JSON object", FILTER_HINT), None)
}

/// Validate `filters` against the corpus and return the conditions, in field order.
pub fn parse(corpus: &Corpus, filters: &Value) -> Result<Vec<Condition>> {
    parse_with_mode(corpus, filters, FilterMode::Strict).map(|(conds, _)| conds)
}

/// [`parse`] in a filter mode: the conditions, and the conditions a lenient search dropped. In
/// both modes naming the isolation column is 42501, a missing required scope filter 22023 and
/// an invalid one the error a strict search raises for it (required filters are never
/// dropped); a lenient search drops the other invalid conditions one by one (a field's value,
/// or one operator of its range) and reports each.
pub fn parse_with_mode(corpus: &Corpus, filters: &Value, mode: FilterMode) -> Result<(Vec<Condition>, Vec<Rejected>)> {
    let mut rejected = Vec::new();
    let obj = match filters {
        Value::Null => return required_present(corpus, &[]).map(|_| (Vec::new(), rejected)),
        Value::Object(o) => o.clone(),
        other => {
            let e = not_an_object();
            if mode == FilterMode::Strict {
                return Err(e);
            }
            rejected.push(Rejected {
                field: String::new(),
                condition: other.clone(),
                reason: e.message,
                sqlstate: e.state,
            });
            serde_json::Map::new()
        }
    };
    // naming the isolation column is refused first, whatever else the object holds
    if let Some(field) = obj.keys().find(|f| corpus.isolation_columns.contains(f)) {
        return Err(isolation_error(corpus, field));
    }
    let mut out: Vec<Condition> = Vec::new();
    for (field, v) in &obj {
        let required = corpus.required_filters.contains(field);
        if mode == FilterMode::Strict || required {
            let mut conds = Vec::new();
            field_conditions(corpus, field, v, &mut conds)?;
            out.extend(conds.into_iter().map(|(c, _)| c));
            continue;
        }
        // lenient: each operator of a range on its own, anything else as a whole
        match v {
            Value::Object(ops) if !ops.is_empty() && corpus.filter_fields.contains_key(field) => {
                let ty = corpus.filter_fields[field];
                for (op, x) in ops {
                    match op_condition(field, ty, corpus.filter_limits.get(field), op, x) {
                        Ok((c, _)) => out.push(c),
                        Err(e) => rejected.push(Rejected {
                            field: field.clone(),
                            condition: serde_json::json!({ field: { op: x } }),
                            reason: e.message,
                            sqlstate: e.state,
                        }),
                    }
                }
            }
            _ => {
                let mut conds = Vec::new();
                match field_conditions(corpus, field, v, &mut conds) {
                    Ok(()) => out.extend(conds.into_iter().map(|(c, _)| c)),
                    Err(e) => rejected.push(Rejected {
                        field: field.clone(),
                        condition: serde_json::json!({ field: v }),
                        reason: e.message,
                        sqlstate: e.state,
                    }),
                }
            }
        }
    }
    required_present(corpus, &out)?;
    Ok((out, rejected))
}

/// The conditions of a filter object that is part of a corpus definition (a must-include
/// class): checked as a strict search checks its filters — declared fields, never the isolation
/// column (42501) — but without the search's required scope filters, which each search adds.
pub fn check_class(corpus: &Corpus, filters: &Value) -> Result<Vec<Condition>> {
    let Value::Object(obj) = filters else {
        return Err(not_an_object());
    };
    if let Some(field) = obj.keys().find(|f| corpus.isolation_columns.contains(f)) {
        return Err(isolation_error(corpus, field));
    }
    let mut out = Vec::new();
    for (field, v) in obj {
        let mut conds = Vec::new();
        field_conditions(corpus, field, v, &mut conds)?;
        out.extend(conds.into_iter().map(|(c, _)| c));
    }
    Ok(out)
}

/// One piece of a filter object as `corpus_check_filters` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct FilterCheck {
    pub field: String,
    pub accepted: bool,
    /// `{"field": value}` or `{"field": {"op": value}}`.
    pub condition: Value,
    pub reason: Option<String>,
    pub sqlstate: Option<SqlState>,
}

/// What a search in `mode` does with each piece of `filters` (a range's operators one by
/// one): accepted, or dropped with the reason. The errors a search in that mode raises are this
/// function's errors too (in lenient mode: the isolation column, a missing or invalid required
/// scope filter).
pub fn check(corpus: &Corpus, filters: &Value, mode: FilterMode) -> Result<Vec<FilterCheck>> {
    let (_, rejected) = parse_with_mode(corpus, filters, mode)?;
    let mut out: Vec<FilterCheck> = Vec::new();
    for r in rejected.iter().filter(|r| r.field.is_empty()) {
        out.push(FilterCheck {
            field: String::new(),
            accepted: false,
            condition: r.condition.clone(),
            reason: Some(r.reason.clone()),
            sqlstate: Some(r.sqlstate),
        });
    }
    let Value::Object(obj) = filters else { return Ok(out) };
    for (field, v) in obj {
        let whole = serde_json::json!({ field: v });
        let parts: Vec<Value> = match v {
            Value::Object(ops) if !ops.is_empty() && corpus.filter_fields.contains_key(field) => {
                ops.iter().map(|(op, x)| serde_json::json!({ field: { op: x } })).collect()
            }
            _ => vec![whole],
        };
        for condition in parts {
            let dropped = rejected.iter().find(|r| r.field == *field && r.condition == condition);
            out.push(FilterCheck {
                field: field.clone(),
                accepted: dropped.is_none(),
                condition,
                reason: dropped.map(|r| r.reason.clone()),
                sqlstate: dropped.map(|r| r.sqlstate),
            });
        }
    }
    Ok(out)
}

/// The dropped conditions as a lenient search's NOTICE reports them (JSON): a condition longer than
/// [`crate::json::BRIEF_CHARS`] characters of JSON (a caller's field name or value may be
/// megabytes long) as the beginning of its JSON text.
pub fn rejected_json(rejected: &[Rejected]) -> Value {
    Value::Array(
        rejected
            .iter()
            .map(|r| {
                let text = crate::json::brief(&r.condition);
                let condition = if text.ends_with('…') { Value::String(text) } else { r.condition.clone() };
                serde_json::json!({"condition": condition, "reason": r.reason, "sqlstate": r.sqlstate.code()})
            })
            .collect(),
    )
}

fn required_present(corpus: &Corpus, conds: &[Condition]) -> Result<()> {
    for req in &corpus.required_filters {
        if !conds.iter().any(|c| &c.field == req && matches!(c.op, Op::Eq | Op::In)) {
            return Err(CoreError::new(
                SqlState::InvalidParameterValue,
                format!("corpus \"{}\" requires a filter on \"{req}\"", corpus.name),
                format!(
                    "Pass filters => '{{\"{req}\": ...}}' (an equality or a value list); searches of this corpus without it are refused."
                ),
            )
            .with_kind("missing_scope_filter", Some(req)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_their_kind_and_field_in_the_detail() {
        let c = legal();
        let detail = |f: Value, mode: FilterMode| -> Value {
            let e = parse_with_mode(&c, &f, mode).unwrap_err();
            serde_json::from_str(e.detail.as_deref().expect("a detail")).unwrap()
        };
        let strict = FilterMode::Strict;
        assert_eq!(detail(json!({"nope": 1}), strict), json!({"kind": "bad_filter", "field": "nope"}));
        assert_eq!(detail(json!({"court": 5}), strict), json!({"kind": "bad_filter", "field": "court"}));
        assert_eq!(
            detail(json!({"page_number": {"near": 1}}), strict),
            json!({"kind": "bad_filter", "field": "page_number"})
        );
        assert_eq!(detail(json!([1]), strict), json!({"kind": "bad_filter"}));
        // the isolation column, in both modes
        for mode in [strict, FilterMode::Lenient] {
            assert_eq!(
                detail(json!({"source_kind": "x"}), mode),
                json!({"kind": "bad_filter", "field": "source_kind"})
            );
        }
        let long = "f".repeat(1000);
        let field = detail(json!({ long.as_str(): 1 }), strict)["field"].as_str().unwrap().chars().count();
        assert_eq!(field, crate::json::BRIEF_CHARS);
        let mut d = crate::testing::legal_def();
        d["required_filters"] = json!(["court"]);
        let scoped = crate::definition::resolve(&serde_json::from_value(d).unwrap()).unwrap();
        let e = parse(&scoped, &json!({})).unwrap_err();
        let detail: Value = serde_json::from_str(e.detail.as_deref().unwrap()).unwrap();
        assert_eq!(detail, json!({"kind": "missing_scope_filter", "field": "court"}));
    }

    #[test]
    fn the_brief_report_of_a_rejected_condition_is_bounded() {
        let long = "f".repeat(1 << 20);
        let r = Rejected {
            field: long.clone(),
            condition: json!({ long.as_str(): "x" }),
            reason: "unknown".into(),
            sqlstate: SqlState::UndefinedColumn,
        };
        let text = rejected_json(&[r]).to_string();
        assert!(text.len() < 400, "{}", text.len());
        assert!(text.contains("fff") && text.contains("42703"));
    }
    use crate::testing::legal;
    use proptest::prelude::*;
    use serde_json::json;

    /// JSON values of every shape, with the legal corpus' field names and operators among the
    /// keys often enough to reach past the first check.
    fn any_json() -> impl Strategy<Value = Value> {
        let key = prop_oneof![
            prop::sample::select(vec![
                "court",
                "practice_area",
                "case_number",
                "page_number",
                "source_kind",
                "gte",
                "lt",
                "lte",
                "gt",
                "in",
                "eq"
            ])
            .prop_map(str::to_string),
            any::<String>(),
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
            any::<String>().prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 64, 8, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(key.clone(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Fuzzing: whatever a caller sends as filters, the parser answers with
        /// conditions or an error that has a SQLSTATE and a hint; never a panic.
        #[test]
        fn the_filter_parser_answers_every_json_value(v in any_json()) {
            let c = legal();
            match parse(&c, &v) {
                Ok(conds) => prop_assert!(conds.len() <= v.as_object().map_or(0, |m| m.len())),
                Err(e) => {
                    prop_assert!(!e.state.code().starts_with("XX"));
                    prop_assert!(!e.hint.is_empty() && !e.message.is_empty());
                }
            }
        }
    }

    #[test]
    fn accepts_equality_lists_and_ranges() {
        let c = legal();
        let f = parse(&c, &json!({"court": ["a", "b"], "page_number": {"gte": 2, "lt": 9}})).unwrap();
        assert_eq!(f.len(), 3);
        // fields in name order
        assert_eq!(f[0].op, Op::In);
        assert_eq!(f[0].values, vec!["a", "b"]);
        assert_eq!((f[1].op, f[2].op), (Op::Gte, Op::Lt));
    }

    #[test]
    fn rejects_mistakes_with_their_sqlstate() {
        let c = legal();
        let cases = [
            (json!({"source_kind": "internal_committee"}), SqlState::InsufficientPrivilege),
            (json!({"source_kind": ["external_upload", "internal_committee"]}), SqlState::InsufficientPrivilege),
            (json!({"judge": "x"}), SqlState::UndefinedColumn),
            (json!({"court": 5}), SqlState::DatatypeMismatch),
            (json!({"page_number": "five"}), SqlState::DatatypeMismatch),
            (json!({"page_number": 1.5}), SqlState::DatatypeMismatch),
            (json!({"page_number": 9_999_999_999i64}), SqlState::DatatypeMismatch),
            (json!({"court": null}), SqlState::DatatypeMismatch),
            (json!({"court": []}), SqlState::InvalidParameterValue),
            (json!({"court": {"like": "x"}}), SqlState::InvalidParameterValue),
            (json!(["court"]), SqlState::InvalidParameterValue),
        ];
        for (f, state) in cases {
            assert_eq!(parse(&c, &f).unwrap_err().state, state, "{f}");
        }
    }

    #[test]
    fn required_filters_are_enforced() {
        let mut c = legal();
        c.required_filters = vec!["court".into()];
        assert_eq!(parse(&c, &json!({})).unwrap_err().state, SqlState::InvalidParameterValue);
        assert_eq!(parse(&c, &Value::Null).unwrap_err().state, SqlState::InvalidParameterValue);
        // a range does not scope the search
        assert_eq!(parse(&c, &json!({"court": {"gte": "a"}})).unwrap_err().state, SqlState::InvalidParameterValue);
        assert!(parse(&c, &json!({"court": "x"})).is_ok());
    }

    /// The legal corpus with limits: court one of three, page_number 1..500, practice_area a
    /// required scope filter.
    fn limited() -> Corpus {
        let mut d = crate::testing::legal_def();
        d["filter_fields"] = json!({
            "court": {"type": "text", "values": ["עליון", "מחוזי", "שלום"]},
            "page_number": {"type": "integer", "min": 1, "max": 500},
            "practice_area": "text",
        });
        d["required_filters"] = json!(["practice_area"]);
        crate::definition::resolve(&serde_json::from_value(d).unwrap()).unwrap()
    }

    #[test]
    fn declared_values_and_ranges_are_enforced_in_strict_mode() {
        let c = limited();
        let ok = parse(&c, &json!({"practice_area": "tax", "court": "עליון", "page_number": {"gte": 1, "lte": 500}}));
        assert_eq!(ok.unwrap().len(), 4);
        for (bad, words) in [
            (json!({"practice_area": "tax", "court": "צבאי"}), "not an allowed value"),
            (json!({"practice_area": "tax", "court": ["עליון", "צבאי"]}), "not an allowed value"),
            (json!({"practice_area": "tax", "page_number": 0}), "outside the range"),
            (json!({"practice_area": "tax", "page_number": {"lt": 501, "gt": 900}}), "outside the range"),
        ] {
            let e = parse(&c, &bad).unwrap_err();
            assert_eq!(e.state, SqlState::InvalidParameterValue, "{bad}");
            assert!(e.message.contains(words), "{bad}: {}", e.message);
            assert!(!e.hint.is_empty());
        }
    }

    #[test]
    fn bad_declarations_fail_at_definition_time() {
        let bad = SqlState::InvalidParameterValue;
        for (spec, state) in [
            (json!({"type": "text", "values": []}), bad),
            (json!({"type": "text", "values": [1]}), SqlState::DatatypeMismatch),
            (json!({"type": "integer", "min": "a"}), SqlState::DatatypeMismatch),
            (json!({"type": "text", "min": 1}), bad),
            (json!({"type": "integer", "min": 5, "max": 1}), bad),
            (json!({"type": "date", "max": "2024/01/01"}), SqlState::DatatypeMismatch),
            // a value or a bound of the wrong type, alike
            (json!({"type": "integer", "values": ["x"]}), SqlState::DatatypeMismatch),
            (json!({"type": "date", "max": 5}), SqlState::DatatypeMismatch),
            (json!({"type": "integer", "colour": 1}), bad),
            (json!({"values": ["a"]}), bad),
            (json!(5), bad),
        ] {
            let mut d = crate::testing::legal_def();
            d["filter_fields"] = json!({ "court": spec.clone() });
            let e = crate::definition::resolve(&serde_json::from_value(d).unwrap()).unwrap_err();
            assert_eq!(e.state, state, "{spec}: {e}");
            assert!(!e.hint.is_empty());
        }
    }

    #[test]
    fn lenient_mode_drops_invalid_conditions_and_says_why() {
        let c = limited();
        let f = json!({"practice_area": "tax", "court": "צבאי", "judge": "x", "page_number": {"gte": 2, "lt": "ten"}});
        let (conds, rejected) = parse_with_mode(&c, &f, FilterMode::Lenient).unwrap();
        let kept: Vec<(&str, Op)> = conds.iter().map(|c| (c.field.as_str(), c.op)).collect();
        assert_eq!(kept, vec![("page_number", Op::Gte), ("practice_area", Op::Eq)]);
        let dropped: Vec<(&str, SqlState)> = rejected.iter().map(|r| (r.field.as_str(), r.sqlstate)).collect();
        assert_eq!(
            dropped,
            vec![
                ("court", SqlState::InvalidParameterValue),
                ("judge", SqlState::UndefinedColumn),
                ("page_number", SqlState::DatatypeMismatch)
            ]
        );
        assert_eq!(rejected[2].condition, json!({"page_number": {"lt": "ten"}}));
        // never lenient: the isolation column, and the required scope filter
        let e =
            parse_with_mode(&c, &json!({"practice_area": "tax", "source_kind": "x"}), FilterMode::Lenient).unwrap_err();
        assert_eq!(e.state, SqlState::InsufficientPrivilege);
        for f in [json!({"court": "עליון"}), json!({"practice_area": 5}), json!({"practice_area": []}), json!([1])]
        {
            let e = parse_with_mode(&c, &f, FilterMode::Lenient).unwrap_err();
            assert!(e.message.contains("practice_area"), "{f}: {e}");
        }
    }

    /// A filter object's pieces: one per operator of a range, one per other field (a required
    /// scope field's value is one piece: it is checked as a whole, never dropped in parts).
    fn pieces(f: &serde_json::Map<String, Value>) -> Vec<Value> {
        let mut out = Vec::new();
        for (k, v) in f {
            match v {
                // (an undeclared field's value is one piece too: it is dropped as a whole)
                Value::Object(ops) if !ops.is_empty() && ["court", "page_number"].contains(&k.as_str()) => {
                    out.extend(ops.iter().map(|(op, x)| json!({ k: { op: x } })));
                }
                _ => out.push(json!({ k: v })),
            }
        }
        out
    }

    fn filter_object() -> impl Strategy<Value = serde_json::Map<String, Value>> {
        let field = prop::sample::select(vec!["court", "page_number", "judge", "practice_area"]);
        let scalar = prop_oneof![
            prop::sample::select(vec!["עליון", "מחוזי", "צבאי", "tax", ""]).prop_map(Value::from),
            (-5i64..600).prop_map(Value::from),
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            Just(json!(1.5)),
        ];
        let value = prop_oneof![
            scalar.clone(),
            prop::collection::vec(scalar.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(prop::sample::select(vec!["gte", "lt", "eq", "like"]), scalar, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ];
        prop::collection::btree_map(field, value, 0..4)
            .prop_map(|m| m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    proptest! {
        /// Lenient mode drops exactly the invalid conditions: every kept piece is valid on its
        /// own, every dropped one is what a strict search refuses (with that SQLSTATE), and the
        /// kept conditions are what a strict search of the kept pieces uses. The required scope
        /// filter and the isolation column are never dropped.
        #[test]
        fn lenient_mode_drops_exactly_the_invalid_conditions(mut f in filter_object(), isolation in any::<bool>()) {
            let c = limited();
            if isolation {
                f.insert("source_kind".into(), json!("internal_committee"));
            }
            let strict_alone = |piece: &Value| {
                let mut obj = piece.as_object().unwrap().clone();
                obj.entry("practice_area").or_insert(json!("tax"));
                parse(&c, &Value::Object(obj))
            };
            match parse_with_mode(&c, &Value::Object(f.clone()), FilterMode::Lenient) {
                Err(e) => {
                    let required_bad = f.get("practice_area").is_none_or(|v| strict_alone(&json!({"practice_area": v})).is_err()
                        || !matches!(v, Value::String(_) | Value::Array(_)));
                    prop_assert!(isolation || required_bad, "only isolation or the scope filter fail: {e}");
                    if isolation { prop_assert_eq!(e.state, SqlState::InsufficientPrivilege); }
                }
                Ok((conds, rejected)) => {
                    prop_assert!(!isolation);
                    let mut kept = serde_json::Map::new();
                    for piece in pieces(&f) {
                        let (k, v) = piece.as_object().unwrap().iter().next().unwrap();
                        let dropped = rejected.iter().find(|r| r.condition == piece || (r.field == *k && r.condition == json!({ k: v })));
                        match (strict_alone(&piece), dropped) {
                            (Ok(_), None) => {
                                match (kept.get_mut(k), v) {
                                    (Some(Value::Object(ops)), Value::Object(more)) => ops.extend(more.clone()),
                                    _ => { kept.insert(k.clone(), v.clone()); }
                                }
                            }
                            (Err(e), Some(r)) => prop_assert_eq!(e.state, r.sqlstate),
                            (Ok(_), Some(r)) => prop_assert!(false, "a valid piece was dropped: {piece} ({})", r.reason),
                            (Err(e), None) => prop_assert!(false, "an invalid piece was kept: {piece} ({e})"),
                        }
                    }
                    prop_assert_eq!(parse(&c, &Value::Object(kept)).unwrap(), conds);
                }
            }
        }
    }

    #[test]
    fn check_reports_every_piece_as_a_search_treats_it() {
        let c = limited();
        let f = json!({"practice_area": "tax", "court": "צבאי", "page_number": {"gte": 2, "lt": "ten"}});
        let rows = check(&c, &f, FilterMode::Lenient).unwrap();
        let got: Vec<(Value, bool)> = rows.iter().map(|r| (r.condition.clone(), r.accepted)).collect();
        assert_eq!(
            got,
            vec![
                (json!({"court": "צבאי"}), false),
                (json!({"page_number": {"gte": 2}}), true),
                (json!({"page_number": {"lt": "ten"}}), false),
                (json!({"practice_area": "tax"}), true),
            ]
        );
        assert!(rows.iter().all(|r| r.accepted == r.reason.is_none() && r.accepted == r.sqlstate.is_none()));
        // strict: the first invalid piece is the error a strict search raises
        assert_eq!(check(&c, &f, FilterMode::Strict).unwrap_err().state, SqlState::InvalidParameterValue);
        assert!(check(&c, &json!({"practice_area": "tax"}), FilterMode::Strict).unwrap().iter().all(|r| r.accepted));
    }

    #[test]
    fn dates_and_timestamps_are_iso_8601() {
        for ok in ["2024-02-29", "2023-12-31", "0001-01-01"] {
            assert!(valid_date(ok), "{ok}");
        }
        for bad in ["2023-02-29", "2024-13-01", "2024-00-10", "2024-04-31", "24-01-01", "2024/01/01", "", "now"] {
            assert!(!valid_date(bad), "{bad}");
        }
        for ok in [
            "2024-05-01",
            "2024-05-01T10:30",
            "2024-05-01 10:30:59",
            "2024-05-01T10:30:59.123Z",
            "2024-05-01T23:59+03:00",
            "2024-05-01T00:00:00-05",
        ] {
            assert!(valid_timestamptz(ok), "{ok}");
        }
        for bad in [
            "2024-05-01T24:00",
            "2024-05-01T10",
            "2024-05-01T10:30:",
            "2024-05-01T10:30Q",
            "2024-05-01T10:30+3",
            "tomorrow",
            "2024-05-01T10:30:00.",
        ] {
            assert!(!valid_timestamptz(bad), "{bad}");
        }
    }
}
