//! Caller filters: a jsonb object validated against the corpus' declared filter fields. Filters
//! only narrow a search (they are ANDed with the corpus predicate); an unknown field, a value of
//! the wrong type or an attempt to name the isolation column is an error, never ignored.

use serde_json::Value;

use crate::error::{CoreError, Result, SqlState};
use crate::resolve::{scalar_text, Corpus, FieldType};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    In,
    Gt,
    Gte,
    Lt,
    Lte,
}

impl Op {
    pub fn sql(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::In => "= ANY",
            Op::Gt => ">",
            Op::Gte => ">=",
            Op::Lt => "<",
            Op::Lte => "<=",
        }
    }
}

/// One validated condition: `field op value(s)`; values in the text form the field type casts from.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub field: String,
    pub field_type: FieldType,
    pub op: Op,
    pub values: Vec<String>,
}

const FILTER_HINT: &str =
    "Filters look like {\"field\": value}, {\"field\": [v1, v2]} or {\"field\": {\"gte\": v, \"lt\": v}}.";

fn typed_value(field: &str, ty: FieldType, v: &Value) -> Result<String> {
    let ok = match ty {
        FieldType::Text | FieldType::Date | FieldType::Timestamptz => v.is_string(),
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
            format!("filter field \"{field}\" is of type {} but the value {v} is not {expected}", ty.sql()),
            format!("Pass {expected} for \"{field}\"."),
        ));
    }
    Ok(scalar_text(v).expect("checked scalar above"))
}

/// Validate `filters` against the corpus and return the conditions, in field order.
pub fn parse(corpus: &Corpus, filters: &Value) -> Result<Vec<Condition>> {
    let obj = match filters {
        Value::Null => return required_present(corpus, &[]).map(|_| Vec::new()),
        Value::Object(o) => o,
        _ => return Err(CoreError::new(SqlState::InvalidParameterValue, "filters must be a JSON object", FILTER_HINT)),
    };
    let mut out = Vec::new();
    for (field, v) in obj {
        if corpus.isolation_columns.iter().any(|c| c == field) {
            return Err(CoreError::new(
                SqlState::InsufficientPrivilege,
                format!("\"{field}\" is the isolation column of corpus \"{}\" and cannot be filtered on", corpus.name),
                "The corpus predicate is fixed by the corpus definition; search another corpus instead of overriding it.",
            ));
        }
        let ty = *corpus.filter_fields.get(field).ok_or_else(|| {
            let declared: Vec<&str> = corpus.filter_fields.keys().map(String::as_str).collect();
            CoreError::new(
                SqlState::UndefinedColumn,
                format!("corpus \"{}\" has no filter field \"{field}\"", corpus.name),
                if declared.is_empty() {
                    "This corpus declares no filter fields.".to_string()
                } else {
                    format!("Declared filter fields: {}.", declared.join(", "))
                },
            )
        })?;
        match v {
            Value::Null => {
                return Err(CoreError::new(
                    SqlState::DatatypeMismatch,
                    format!("filter field \"{field}\" has a null value"),
                    "Leave the field out instead of passing null.",
                ))
            }
            Value::Array(items) => {
                if items.is_empty() {
                    return Err(CoreError::new(
                        SqlState::InvalidParameterValue,
                        format!("filter field \"{field}\" has an empty value list"),
                        "An empty list would match nothing; leave the field out or give at least one value.",
                    ));
                }
                let values = items.iter().map(|x| typed_value(field, ty, x)).collect::<Result<Vec<_>>>()?;
                out.push(Condition { field: field.clone(), field_type: ty, op: Op::In, values });
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
                    let op = match op.as_str() {
                        "eq" => Op::Eq,
                        "gt" => Op::Gt,
                        "gte" => Op::Gte,
                        "lt" => Op::Lt,
                        "lte" => Op::Lte,
                        other => {
                            return Err(CoreError::new(
                                SqlState::InvalidParameterValue,
                                format!("unknown filter operator \"{other}\" on field \"{field}\""),
                                "Operators are eq, gt, gte, lt and lte.",
                            ))
                        }
                    };
                    let value = typed_value(field, ty, x)?;
                    out.push(Condition { field: field.clone(), field_type: ty, op, values: vec![value] });
                }
            }
            scalar => {
                let value = typed_value(field, ty, scalar)?;
                out.push(Condition { field: field.clone(), field_type: ty, op: Op::Eq, values: vec![value] });
            }
        }
    }
    required_present(corpus, &out)?;
    Ok(out)
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
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::tests::legal;
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
        /// Fuzzing (issue 12): whatever a caller sends as filters, the parser answers with
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
}
