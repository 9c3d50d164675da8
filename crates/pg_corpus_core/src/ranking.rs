//! A corpus' ranking settings: the fusion defaults a search of the corpus uses where the call
//! leaves them out (`rrf_k`, the candidate window, feedback), and the per-source branch weights
//! that can be changed with them.
//!
//! Precedence: an argument of the call, then the corpus' setting, then the extension's default
//! (for feedback: `pg_corpus.hybrid_feedback`).

use std::collections::BTreeMap;

use serde_json::Value;

pub use crate::model::{FeedbackParams, Ranking, DEFAULT_RRF_K, DEFAULT_WINDOW, MAX_RRF_K, MAX_WINDOW, WINDOW_PER_K};

use crate::error::{CoreError, Result, SqlState};

/// The bound of a branch weight.
pub const MAX_WEIGHT: f64 = 1_000.0;

const KEYS: [&str; 7] = ["rrf_k", "window", "feedback", "feedback_beta", "feedback_alpha", "feedback_terms", "weights"];
const SHAPE: &str = "ranking is {\"rrf_k\": 20, \"window\": 100, \"feedback\": false, \
                     \"feedback_beta\": 0.5, \"feedback_alpha\": 0.5, \"feedback_terms\": 20, \
                     \"weights\": {\"source\": {\"semantic\": 1, \"lexical\": 1}}}: every key optional, \
                     null resets a setting to the default.";

/// New branch weights of one source (None: unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WeightChange {
    pub semantic: Option<f64>,
    pub lexical: Option<f64>,
}

/// A `ranking` argument: what to store in the corpus row, and the weights to change per source.
/// Keys absent from the argument keep their stored value; null ones go back to the default.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RankingChange {
    /// The keys given, each with its new value (None: back to the default).
    pub rrf_k: Option<Option<i32>>,
    pub window: Option<Option<i32>>,
    pub feedback: Option<Option<bool>>,
    pub feedback_beta: Option<Option<f64>>,
    pub feedback_alpha: Option<Option<f64>>,
    pub feedback_terms: Option<Option<i32>>,
    pub weights: BTreeMap<String, WeightChange>,
}

impl RankingChange {
    /// `settings` with this change applied.
    pub fn apply(&self, settings: &Ranking) -> Ranking {
        Ranking {
            rrf_k: self.rrf_k.unwrap_or(settings.rrf_k),
            window: self.window.unwrap_or(settings.window),
            feedback: self.feedback.unwrap_or(settings.feedback),
            feedback_beta: self.feedback_beta.unwrap_or(settings.feedback_beta),
            feedback_alpha: self.feedback_alpha.unwrap_or(settings.feedback_alpha),
            feedback_terms: self.feedback_terms.unwrap_or(settings.feedback_terms),
        }
    }
}

fn invalid(msg: String) -> CoreError {
    CoreError::new(SqlState::InvalidParameterValue, msg, SHAPE)
}

fn int_in(v: &Value, what: &str, lo: i32, hi: i32) -> Result<Option<i32>> {
    match v {
        Value::Null => Ok(None),
        x => match x.as_i64() {
            Some(n) if (i64::from(lo)..=i64::from(hi)).contains(&n) => Ok(Some(n as i32)),
            _ => Err(invalid(format!(
                "ranking: {what} must be an integer in [{lo}, {hi}], got {}",
                crate::json::brief(x)
            ))),
        },
    }
}

fn number_in(v: &Value, what: &str, lo: f64, hi: f64) -> Result<Option<f64>> {
    match v {
        Value::Null => Ok(None),
        x => match x.as_f64() {
            Some(f) if f.is_finite() && (lo..=hi).contains(&f) => Ok(Some(f)),
            _ => {
                Err(invalid(format!("ranking: {what} must be a number in [{lo}, {hi}], got {}", crate::json::brief(x))))
            }
        },
    }
}

fn weight(v: Option<&Value>, what: &str) -> Result<Option<f64>> {
    match v {
        None => Ok(None),
        Some(x) => match x.as_f64() {
            Some(f) if f.is_finite() && (0.0..=MAX_WEIGHT).contains(&f) => Ok(Some(f)),
            _ => Err(invalid(format!(
                "ranking: weights.{what} must be a number in [0, {MAX_WEIGHT}], got {}",
                crate::json::brief(x)
            ))),
        },
    }
}

/// Read a corpus' stored ranking settings (the catalog's `ranking` column; null: none).
pub fn parse(value: &Value) -> Result<Ranking> {
    let change = parse_change(value)?;
    if !change.weights.is_empty() {
        return Err(invalid("ranking: weights are stored with the sources, not in the corpus row".into()));
    }
    Ok(change.apply(&Ranking::default()))
}

/// Read a `ranking` argument (what `corpus_alter` and `corpus_tune` change).
pub fn parse_change(value: &Value) -> Result<RankingChange> {
    let obj = match value {
        Value::Null => return Ok(RankingChange::default()),
        Value::Object(o) => o,
        _ => return Err(invalid("ranking must be a JSON object".into())),
    };
    if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(invalid(format!("ranking has an unknown key {}", crate::json::brief_str(k))));
    }
    let mut out = RankingChange {
        rrf_k: obj.get("rrf_k").map(|v| int_in(v, "rrf_k", 0, MAX_RRF_K)).transpose()?,
        window: obj.get("window").map(|v| int_in(v, "window", 1, MAX_WINDOW)).transpose()?,
        feedback: obj
            .get("feedback")
            .map(|v| match v {
                Value::Null => Ok(None),
                Value::Bool(b) => Ok(Some(*b)),
                x => Err(invalid(format!("ranking: feedback must be a boolean, got {}", crate::json::brief(x)))),
            })
            .transpose()?,
        feedback_beta: obj.get("feedback_beta").map(|v| number_in(v, "feedback_beta", 0.0, 4.0)).transpose()?,
        feedback_alpha: obj.get("feedback_alpha").map(|v| number_in(v, "feedback_alpha", 0.0, 1.0)).transpose()?,
        feedback_terms: obj.get("feedback_terms").map(|v| int_in(v, "feedback_terms", 1, 100)).transpose()?,
        weights: BTreeMap::new(),
    };
    match obj.get("weights") {
        None | Some(Value::Null) => {}
        Some(Value::Object(per_source)) => {
            for (source, w) in per_source {
                let Value::Object(w) = w else {
                    return Err(invalid(format!(
                        "ranking: weights.{} must be an object like {{\"semantic\": 1, \"lexical\": 1}}",
                        crate::json::brief_str(source)
                    )));
                };
                if let Some(k) = w.keys().find(|k| !["semantic", "lexical"].contains(&k.as_str())) {
                    return Err(invalid(format!(
                        "ranking: weights.{} has an unknown key {}",
                        crate::json::brief_str(source),
                        crate::json::brief_str(k)
                    )));
                }
                let change = WeightChange {
                    semantic: weight(w.get("semantic"), &format!("{source}.semantic"))?,
                    lexical: weight(w.get("lexical"), &format!("{source}.lexical"))?,
                };
                out.weights.insert(source.clone(), change);
            }
        }
        Some(x) => return Err(invalid(format!("ranking: weights must be an object, got {}", crate::json::brief(x)))),
    }
    Ok(out)
}

/// The first source `change` names that is not in `sources`, as the error to raise.
pub fn check_sources(change: &RankingChange, corpus: &str, sources: &[&str]) -> Result<()> {
    match change.weights.keys().find(|s| !sources.contains(&s.as_str())) {
        None => Ok(()),
        Some(s) => {
            let names: Vec<String> = sources.iter().map(|n| crate::sql::literal(n)).collect();
            Err(CoreError::new(
                SqlState::UndefinedObject,
                format!("corpus \"{corpus}\" has no source {}", crate::json::brief_str(s)),
                format!("Its sources: {}.", if names.is_empty() { "none".into() } else { names.join(", ") }),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_window_is_the_floor_or_four_times_k_within_max_candidates() {
        let r = Ranking::default();
        assert_eq!(r.window(10, 10_000), 100);
        assert_eq!(r.window(50, 10_000), 200);
        let r = Ranking { window: Some(20), ..Ranking::default() };
        assert_eq!(r.window(10, 10_000), 40);
        assert_eq!(r.window(3, 10_000), 20);
        assert_eq!(Ranking::default().window(10, 64), 64, "pg_corpus.max_candidates bounds a corpus' window");
        assert_eq!(Ranking::default().rrf_k(), 20);
    }

    #[test]
    fn settings_round_trip_and_null_resets() {
        let stored = parse(&json!({"rrf_k": 20, "window": 100, "feedback": true, "feedback_terms": 10})).unwrap();
        assert_eq!(
            stored,
            Ranking {
                rrf_k: Some(20),
                window: Some(100),
                feedback: Some(true),
                feedback_terms: Some(10),
                ..Ranking::default()
            }
        );
        assert_eq!(stored.feedback_params(), FeedbackParams { beta: 0.5, alpha: 0.5, terms: 10 });
        assert_eq!(parse(&stored.to_json()).unwrap(), stored);
        let change = parse_change(&json!({"window": null, "weights": {"chunks": {"lexical": 2}}})).unwrap();
        let next = change.apply(&stored);
        assert_eq!(
            next,
            Ranking {
                rrf_k: Some(20),
                window: None,
                feedback: Some(true),
                feedback_terms: Some(10),
                ..Ranking::default()
            }
        );
        assert_eq!(change.weights["chunks"], WeightChange { semantic: None, lexical: Some(2.0) });
        assert_eq!(parse(&Value::Null).unwrap(), Ranking::default());
        assert_eq!(Ranking::default().to_json(), json!({}));
    }

    #[test]
    fn bad_settings_are_refused_with_the_shape() {
        for bad in [
            json!([]),
            json!({"rrf": 1}),
            json!({"rrf_k": -1}),
            json!({"rrf_k": 1.5}),
            json!({"window": 0}),
            json!({"window": "100"}),
            json!({"feedback": 1}),
            json!({"feedback_beta": 5}),
            json!({"feedback_alpha": -0.1}),
            json!({"feedback_terms": 0}),
            json!({"weights": []}),
            json!({"weights": {"chunks": 2}}),
            json!({"weights": {"chunks": {"semantic": -1}}}),
            json!({"weights": {"chunks": {"semantic": f64::MAX}}}),
            json!({"weights": {"chunks": {"fused": 1}}}),
        ] {
            let e = parse_change(&bad).unwrap_err();
            assert_eq!(e.state, SqlState::InvalidParameterValue, "{bad}");
            assert!(e.hint.contains("rrf_k"), "{bad}: {}", e.hint);
        }
        assert!(parse(&json!({"weights": {"chunks": {"lexical": 2}}})).is_err(), "weights live with the sources");
        let change = parse_change(&json!({"weights": {"nope": {"lexical": 2}}})).unwrap();
        let e = check_sources(&change, "legal", &["chunks", "halachot"]).unwrap_err();
        assert_eq!(e.state, SqlState::UndefinedObject);
        assert!(e.hint.contains("'chunks', 'halachot'"), "{}", e.hint);
    }
}
