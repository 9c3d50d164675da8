//! The evidence filter: a fused hit becomes a result only with evidence that it
//! answers the query, so that a query about something the corpus does not hold returns no rows
//! ("not in the knowledge base") instead of its nearest neighbours.
//!
//! A hit is admitted by either rule:
//!
//! - **near vector**: its distance to the query (in its embedding space) is at most the
//!   space's `max_distance` *and* at most the space's best candidate's distance plus `max_gap`
//!   ("within a threshold and only slightly worse than the best candidate");
//! - **rare words**: the query's rare words that the hit contains cover more than
//!   `min_coverage` of the query's rare-or-unknown words. A word is rare when its key is in at
//!   most `rare_share` of the corpus' searchable items (the corpus' BM25 statistics); a word in
//!   more is common and neither evidence nor counted; a word the corpus does not contain at all
//!   is counted and never matched — so "zelený kolibřík" stays below half even where an
//!   unrelated item shares two rare words of the question. A word matched only by a fallback
//!   key (a Czech prefix key, a Hebrew form without its prefix letters) counts half
//!   ([`crate::analysis::FALLBACK_WEIGHT`]).
//!
//! Thresholds are per corpus and per embedding space (one model each); [`calibrate`] derives
//! the vector thresholds from a gold set.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

use crate::analysis::{Analyzer, KeyKind};

use crate::error::{CoreError, Result, SqlState};
use crate::lexical::QueryKey;
use crate::model::{
    EvidenceConfig, Language, SearchRow, Space, VectorThresholds, DEFAULT_MIN_COVERAGE, DEFAULT_RARE_SHARE,
};

const SHAPE: &str = "evidence is {\"enabled\": false, \"rare_share\": 0.02, \"min_coverage\": 0.5, \
                     \"vector\": {\"default\": {\"max_distance\": 0.2, \"max_gap\": 0.03, \"model\": \"…\"}}}: \
                     every key optional, the vector thresholds per embedding space.";

fn invalid(msg: String) -> CoreError {
    CoreError::new(SqlState::InvalidParameterValue, msg, SHAPE)
}

fn number_in(v: Option<&Value>, what: &str, default: f64, ok: impl Fn(f64) -> bool, range: &str) -> Result<f64> {
    match v {
        None | Some(Value::Null) => Ok(default),
        Some(x) => match x.as_f64() {
            Some(f) if f.is_finite() && ok(f) => Ok(f),
            _ => Err(invalid(format!("evidence: {what} must be a number in {range}, got {}", crate::json::brief(x)))),
        },
    }
}

/// Parse and check a corpus' evidence settings against its spaces.
pub fn parse(value: &Value, spaces: &[Space]) -> Result<EvidenceConfig> {
    let mut out = EvidenceConfig::off(spaces.len());
    let obj = match value {
        Value::Null => return Ok(out),
        Value::Object(o) => o,
        _ => return Err(invalid("evidence must be a JSON object".into())),
    };
    if let Some(k) = obj.keys().find(|k| !["enabled", "rare_share", "min_coverage", "vector"].contains(&k.as_str())) {
        return Err(invalid(format!("evidence has an unknown key {}", crate::json::brief_str(k))));
    }
    out.enabled = match obj.get("enabled") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(x) => return Err(invalid(format!("evidence: enabled must be a boolean, got {}", crate::json::brief(x)))),
    };
    out.rare_share =
        number_in(obj.get("rare_share"), "rare_share", DEFAULT_RARE_SHARE, |f| f > 0.0 && f <= 1.0, "(0, 1]")?;
    out.min_coverage = number_in(
        obj.get("min_coverage"),
        "min_coverage",
        DEFAULT_MIN_COVERAGE,
        |f| (0.0..1.0).contains(&f),
        "[0, 1)",
    )?;
    match obj.get("vector") {
        None | Some(Value::Null) => {}
        Some(Value::Object(per_space)) => {
            for (name, t) in per_space {
                let Some(idx) = spaces.iter().position(|s| &s.name == name) else {
                    let names: Vec<String> = spaces.iter().map(|s| crate::sql::literal(&s.name)).collect();
                    return Err(CoreError::new(
                        SqlState::InvalidParameterValue,
                        format!(
                            "evidence.vector names embedding space {}, which the corpus does not have",
                            crate::json::brief_str(name)
                        ),
                        format!("Its spaces: {}.", names.join(", ")),
                    ));
                };
                if t.is_null() {
                    continue;
                }
                let Value::Object(f) = t else {
                    return Err(invalid(format!("evidence.vector.{name} must be a JSON object")));
                };
                if let Some(k) = f.keys().find(|k| !["max_distance", "max_gap", "model"].contains(&k.as_str())) {
                    return Err(invalid(format!(
                        "evidence.vector.{name} has an unknown key {}",
                        crate::json::brief_str(k)
                    )));
                }
                let required = |key: &str| -> Result<f64> {
                    match f.get(key) {
                        None | Some(Value::Null) => {
                            Err(invalid(format!("evidence.vector.{name} needs {key} (a number >= 0)")))
                        }
                        v => number_in(v, &format!("vector.{name}.{key}"), 0.0, |x| x >= 0.0, "[0, ∞)"),
                    }
                };
                let model = match f.get("model") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(m)) => Some(m.clone()),
                    Some(x) => {
                        return Err(invalid(format!(
                            "evidence.vector.{name}.model must be a string, got {}",
                            crate::json::brief(x)
                        )))
                    }
                };
                out.vector[idx] = Some(VectorThresholds {
                    max_distance: required("max_distance")?,
                    max_gap: required("max_gap")?,
                    model,
                });
            }
        }
        Some(x) => {
            return Err(invalid(format!(
                "evidence.vector must be a JSON object of spaces, got {}",
                crate::json::brief(x)
            )))
        }
    }
    Ok(out)
}

/// The thresholds of space `idx` a search can use: set, and set for the space's current model.
pub fn thresholds_for<'a>(
    cfg: &'a EvidenceConfig,
    spaces: &[Space],
    idx: usize,
    corpus: &str,
) -> Result<&'a VectorThresholds> {
    let space = &spaces[idx];
    let lit = crate::sql::literal(corpus);
    let calibrate = format!(
        "Calibrate them on a gold set: SELECT * FROM corpus.corpus_calibrate_evidence('<gold set>', apply => true); \
         or set them, keeping the other settings: SELECT corpus.corpus_alter({lit}, evidence => (SELECT jsonb_set(evidence, \
         '{{vector}}', COALESCE(evidence->'vector', '{{}}') || '{{\"{}\": {{\"max_distance\": 0.2, \"max_gap\": 0.03}}}}') \
         FROM corpus.corpora WHERE name = {lit}));",
        space.name
    );
    let Some(t) = cfg.vector.get(idx).and_then(Option::as_ref) else {
        return Err(CoreError::new(
            SqlState::ObjectNotInPrerequisiteState,
            format!("corpus \"{corpus}\" has no evidence thresholds for embedding space \"{}\"", space.name),
            calibrate,
        ));
    };
    if let (Some(now), Some(then)) = (&space.model, &t.model) {
        if now != then {
            return Err(CoreError::new(
                SqlState::ObjectNotInPrerequisiteState,
                format!(
                    "the evidence thresholds of space \"{}\" of corpus \"{corpus}\" were set for model {}, the space now uses {}",
                    space.name,
                    crate::json::brief_str(then),
                    crate::json::brief_str(now)
                ),
                calibrate,
            ));
        }
    }
    Ok(t)
}

/// One word of a query: its own key and its fallback keys with their weights.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryWord {
    /// The word's own key.
    pub key: String,
    /// Every key of the word (its own first, weight 1), each with its weight.
    pub keys: Vec<(String, f64)>,
}

/// The words of a query for a source analysed by pg_corpus' analyser (`lang`), each once.
pub fn query_words(text: &str, lang: Language) -> Vec<QueryWord> {
    let mut words: Vec<QueryWord> = Vec::new();
    Analyzer::new(lang).for_each_key(text, |key, weight, kind| match (kind, words.last_mut()) {
        (KeyKind::Extra, Some(w)) => {
            if !w.keys.iter().any(|(k, _)| k == key) {
                w.keys.push((key.to_string(), weight));
            }
        }
        _ => words.push(QueryWord { key: key.to_string(), keys: vec![(key.to_string(), weight)] }),
    });
    let mut seen = std::collections::HashSet::new();
    words.retain(|w| seen.insert(w.key.clone()));
    words
}

/// How the query wrote each of its words: a word's own key → the query's spelling of it (its
/// first occurrence), each word of the text analysed alone.
pub fn as_written(text: &str, lang: Language) -> HashMap<String, String> {
    use unicode_segmentation::UnicodeSegmentation;
    let analyzer = Analyzer::new(lang);
    let mut out = HashMap::new();
    for seg in text.split_word_bounds().filter(|s| s.chars().any(char::is_alphanumeric)) {
        analyzer.for_each_key(seg, |key, _, kind| {
            if kind == KeyKind::Surface {
                out.entry(key.to_string()).or_insert_with(|| seg.to_string());
            }
        });
    }
    out
}

/// The words of a query for a source indexed by a text search configuration: each key one word.
pub fn words_of_keys(keys: &[QueryKey]) -> Vec<QueryWord> {
    keys.iter().map(|k| QueryWord { key: k.key.clone(), keys: vec![(k.key.clone(), 1.0)] }).collect()
}

/// Every key of these words (to look their document frequencies up).
pub fn word_keys(words: &[QueryWord]) -> impl Iterator<Item = &str> {
    words.iter().flat_map(|w| w.keys.iter().map(|(k, _)| k.as_str()))
}

/// What the rare-words rule found in one item.
#[derive(Debug, Clone, PartialEq)]
pub struct RareWords {
    /// Matched weight over counted words.
    pub coverage: f64,
    /// The query's words (their own keys) the item contains by a rare key.
    pub matched: Vec<String>,
    /// The query's rare or unknown words.
    pub counted: usize,
}

/// The most documents a rare key may be in: `rare_share` of the corpus' `documents`, and at
/// least one (a word only one item holds is rare in a corpus of any size).
pub fn rare_limit(rare_share: f64, documents: u64) -> f64 {
    (rare_share * documents as f64).max(1.0)
}

/// The rare-words rule for one item: None when the query has no rare or unknown word (its
/// words are all common, so they say nothing either way).
pub fn rare_words(
    words: &[QueryWord],
    df: impl Fn(&str) -> u64,
    limit: f64,
    contains: impl Fn(&str) -> bool,
) -> Option<RareWords> {
    let rare = |k: &str| (df(k) as f64) <= limit;
    let mut counted = 0usize;
    let mut weight = 0.0;
    let mut matched = Vec::new();
    for w in words {
        if !rare(&w.key) {
            continue;
        }
        counted += 1;
        let best = w.keys.iter().filter(|(k, _)| rare(k) && contains(k)).map(|(_, wt)| *wt).fold(0.0_f64, f64::max);
        if best > 0.0 {
            weight += best.min(1.0);
            matched.push(w.key.clone());
        }
    }
    (counted > 0).then(|| RareWords { coverage: weight / counted as f64, matched, counted })
}

/// The vector rule: `distance` against the space's best candidate's.
pub fn near_vector(distance: f64, best: f64, t: &VectorThresholds) -> bool {
    distance <= t.max_distance && distance <= best + t.max_gap
}

/// Why a hit was admitted: `{"near_vector": {...}, "rare_words": {...}}` (the rules it passed);
/// the rare words as keys (`words`) and as the query wrote them (`as_written`, from `written`).
pub fn verdict_json(
    near: Option<(&str, f64, f64)>,
    rare: Option<&RareWords>,
    min_coverage: f64,
    written: &HashMap<String, String>,
) -> Option<Value> {
    let mut o = serde_json::Map::new();
    if let Some((space, distance, best)) = near {
        o.insert("near_vector".into(), json!({"space": space, "distance": distance, "best_distance": best}));
    }
    if let Some(r) = rare.filter(|r| r.coverage > min_coverage) {
        let shown: Vec<&str> = r.matched.iter().map(|k| written.get(k).map_or(k.as_str(), String::as_str)).collect();
        o.insert(
            "rare_words".into(),
            json!({"coverage": r.coverage, "words": r.matched, "as_written": shown, "counted_words": r.counted}),
        );
    }
    (!o.is_empty()).then_some(Value::Object(o))
}

/// One gold query as calibration sees it: the distance of the best candidate of its semantic
/// search, and of the nearest relevant item among the candidates (None: no relevant item
/// among them — or the query has none, `answerable` false).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub best: f64,
    pub nearest_relevant: Option<f64>,
    pub answerable: bool,
}

/// Calibrated vector thresholds with what they do on the gold set.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    pub max_distance: f64,
    pub max_gap: f64,
    pub answerable: usize,
    /// Share of the answerable queries whose nearest relevant item the thresholds admit.
    pub kept: f64,
    pub unanswerable: usize,
    /// Share of the unanswerable queries whose best candidate the thresholds refuse (the vector
    /// rule admits nothing for them).
    pub rejected: f64,
}

/// The `q`-quantile of `xs` by nearest rank (the ⌈q·n⌉-th smallest); None when empty.
pub fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

/// Vector thresholds from a gold set: `max_distance` is the `q`-quantile of the answerable
/// queries' nearest relevant distances, `max_gap` the `q`-quantile of how much worse than the
/// best candidate it is. An answerable query without a relevant item among its candidates
/// counts as one the thresholds do not keep. None without an answerable query that has one.
pub fn calibrate(samples: &[Sample], q: f64) -> Option<Calibration> {
    let found: Vec<(f64, f64)> =
        samples.iter().filter(|s| s.answerable).filter_map(|s| s.nearest_relevant.map(|d| (s.best, d))).collect();
    let distances: Vec<f64> = found.iter().map(|(_, d)| *d).collect();
    let gaps: Vec<f64> = found.iter().map(|(b, d)| (d - b).max(0.0)).collect();
    let max_distance = quantile(&distances, q)?;
    let max_gap = quantile(&gaps, q)?;
    let t = VectorThresholds { max_distance, max_gap, model: None };
    let answerable = samples.iter().filter(|s| s.answerable).count();
    let kept = samples
        .iter()
        .filter(|s| s.answerable && s.nearest_relevant.is_some_and(|d| near_vector(d, s.best, &t)))
        .count();
    let unanswerable = samples.len() - answerable;
    let rejected = samples.iter().filter(|s| !s.answerable && !near_vector(s.best, s.best, &t)).count();
    let share = |n: usize, of: usize| if of == 0 { 0.0 } else { n as f64 / of as f64 };
    Some(Calibration {
        max_distance,
        max_gap,
        answerable,
        kept: share(kept, answerable),
        unanswerable,
        rejected: share(rejected, unanswerable),
    })
}

impl Calibration {
    /// The thresholds to store for a space whose current model is `model`.
    pub fn thresholds(&self, model: Option<String>) -> VectorThresholds {
        VectorThresholds { max_distance: self.max_distance, max_gap: self.max_gap, model }
    }
}

/// `corpus_calibrate_evidence`'s arguments: `quantile` in (0, 1], `candidates` between 1 and
/// `max_k` (pg_corpus.max_k).
pub fn check_calibration_args(quantile: f64, candidates: i32, max_k: i32) -> Result<()> {
    if !(quantile > 0.0 && quantile <= 1.0) {
        return Err(CoreError::new(
            SqlState::InvalidParameterValue,
            format!("quantile must be in (0, 1], got {quantile}"),
            "0.95 keeps the nearest relevant item of 95% of the answerable queries.",
        ));
    }
    if !(1..=max_k).contains(&candidates) {
        return Err(CoreError::new(
            SqlState::InvalidParameterValue,
            format!("candidates must be between 1 and {max_k}, got {candidates}"),
            "Each gold query's semantic search returns this many candidates (default 100).",
        ));
    }
    Ok(())
}

/// One gold query's [`Sample`] from the rows of its semantic search: distances, not fused ranks
/// (sources' weights reorder the fusion), of the default embedding space's hits only — the best
/// candidate's and the nearest relevant one's. A row is relevant when `judgments` grade its key
/// (its parent id for `parent_level` gold sets, else its item id) or its `source:item_id` above
/// 0; the query is answerable when any judgment is. None when no row has a default-space
/// distance.
pub fn sample(rows: &[SearchRow], judgments: Option<&HashMap<String, i32>>, parent_level: bool) -> Option<Sample> {
    let relevant = |key: &str| judgments.and_then(|j| j.get(key)).is_some_and(|&g| g > 0);
    let default_space =
        |r: &&SearchRow| r.query_ranks.as_array().is_some_and(|q| q.iter().any(|h| h.get("space").is_none()));
    let is_relevant = |r: &&SearchRow| {
        let key = if parent_level { r.parent_id.clone() } else { r.item_id.clone() };
        relevant(&key) || relevant(&format!("{}:{}", r.source, r.item_id))
    };
    let nearest = |rows: &mut dyn Iterator<Item = &SearchRow>| {
        rows.filter(default_space).filter_map(|r| r.semantic_distance).reduce(f64::min)
    };
    let best = nearest(&mut rows.iter())?;
    Some(Sample {
        best,
        nearest_relevant: nearest(&mut rows.iter().filter(is_relevant)),
        answerable: judgments.is_some_and(|j| j.values().any(|&g| g > 0)),
    })
}

/// A gold query's search failed: its error, naming the query.
pub fn in_gold_query(query_id: &str, e: CoreError) -> CoreError {
    CoreError { message: format!("gold query \"{query_id}\": {}", e.message), ..e }
}

/// No answerable query of the gold set has a vector and a relevant item among its first
/// `candidates`: there is nothing to calibrate on.
pub fn nothing_to_calibrate(gold_set: &str, candidates: i32) -> CoreError {
    CoreError::new(
        SqlState::ObjectNotInPrerequisiteState,
        format!(
            "gold set \"{gold_set}\" has no query with a vector whose relevant item is among its first {candidates} candidates"
        ),
        "Judge relevant items for queries that have a query_vec, or raise candidates.",
    )
}

/// The corpus' evidence settings with space `space`'s vector thresholds replaced (what
/// `corpus_calibrate_evidence(..., apply => true)` stores).
pub fn with_thresholds(current: &Value, space: &str, t: &VectorThresholds) -> Value {
    let mut out = match current {
        Value::Object(o) => o.clone(),
        _ => serde_json::Map::new(),
    };
    let mut vector: BTreeMap<String, Value> = match out.get("vector") {
        Some(Value::Object(v)) => v.clone().into_iter().collect(),
        _ => BTreeMap::new(),
    };
    let mut entry = json!({"max_distance": t.max_distance, "max_gap": t.max_gap});
    if let Some(m) = &t.model {
        entry["model"] = Value::from(m.as_str());
    }
    vector.insert(space.to_string(), entry);
    out.insert("vector".into(), Value::Object(vector.into_iter().collect()));
    Value::Object(out)
}

/// Document frequencies of the words' keys that `df` lacks are 0 (the corpus has no such key).
pub fn df_of<'a>(df: &'a HashMap<String, u64>) -> impl Fn(&str) -> u64 + 'a {
    move |k| df.get(k).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spaces() -> Vec<Space> {
        vec![
            Space { name: "default".into(), dimensions: Some(4), model: Some("e5".into()), weight: 1.0 },
            Space { name: "pages".into(), dimensions: Some(2), model: None, weight: 0.5 },
        ]
    }

    #[test]
    fn settings_are_checked_against_the_spaces() {
        let cfg = parse(
            &json!({"enabled": true, "vector": {"default": {"max_distance": 0.2, "max_gap": 0.03, "model": "e5"}}}),
            &spaces(),
        )
        .unwrap();
        assert!(cfg.enabled);
        assert_eq!(cfg.rare_share, DEFAULT_RARE_SHARE);
        assert_eq!(cfg.vector[0].as_ref().unwrap().max_distance, 0.2);
        assert!(cfg.vector[1].is_none());
        assert!(thresholds_for(&cfg, &spaces(), 0, "c").is_ok());
        let e = thresholds_for(&cfg, &spaces(), 1, "c").unwrap_err();
        assert_eq!(e.state, SqlState::ObjectNotInPrerequisiteState);
        assert!(e.hint.contains("corpus_calibrate_evidence"), "{e:?}");
        for bad in [
            json!([]),
            json!({"rare_share": 0}),
            json!({"rare_share": 1.5}),
            json!({"min_coverage": 1}),
            json!({"enabled": "yes"}),
            json!({"vector": {"nope": {"max_distance": 0.1, "max_gap": 0.1}}}),
            json!({"vector": {"default": {"max_distance": -1, "max_gap": 0.1}}}),
            json!({"vector": {"default": {"max_gap": 0.1}}}),
            json!({"vector": {"default": {"max_distance": 0.1, "max_gap": 0.1, "x": 1}}}),
            json!({"vector": []}),
            json!({"other": 1}),
        ] {
            let e = parse(&bad, &spaces()).unwrap_err();
            assert_eq!(e.state, SqlState::InvalidParameterValue, "{bad}");
            assert!(!e.hint.is_empty());
        }
    }

    #[test]
    fn thresholds_of_another_model_are_refused() {
        let cfg =
            parse(&json!({"vector": {"default": {"max_distance": 0.2, "max_gap": 0.03, "model": "bge"}}}), &spaces())
                .unwrap();
        let e = thresholds_for(&cfg, &spaces(), 0, "c").unwrap_err();
        assert!(e.message.contains("bge") && e.message.contains("e5"), "{e:?}");
    }

    #[test]
    fn the_czech_record_is_found_by_its_lemma_and_the_unknown_word_keeps_coverage_low() {
        // "Kdo je Novák?" against a record that mentions "Novákovi": the analyser's keys match
        let words = query_words("Kdo je Novák?", Language::Czech);
        let doc: Vec<String> = crate::analysis::document_terms("Panu Novákovi byl doručen dopis.", Language::Czech)
            .into_iter()
            .map(|t| t.key)
            .collect();
        let mut df: HashMap<String, u64> = HashMap::new();
        for k in word_keys(&words) {
            df.insert(k.to_string(), 1000); // common
        }
        for k in &doc {
            df.insert(k.clone(), 1);
        }
        let r = rare_words(&words, df_of(&df), 2.0, |k| doc.iter().any(|d| d == k)).unwrap();
        assert!(r.coverage > DEFAULT_MIN_COVERAGE, "{r:?} {words:?} {doc:?}");
        // a question about something absent: two rare words shared, two unknown words
        let words = query_words("Kde hnízdí zelený kolibřík v Andách?", Language::Czech);
        let doc: Vec<String> = crate::analysis::document_terms("Zelený plot, kde hnízdí vrabci.", Language::Czech)
            .into_iter()
            .map(|t| t.key)
            .collect();
        let mut df: HashMap<String, u64> = HashMap::new();
        for k in &doc {
            df.insert(k.clone(), 1);
        }
        let r = rare_words(&words, df_of(&df), 2.0, |k| doc.iter().any(|d| d == k)).unwrap();
        assert!(r.matched.len() >= 2 && r.coverage <= DEFAULT_MIN_COVERAGE, "{r:?}");
    }

    #[test]
    fn rare_words_are_shown_as_the_query_wrote_them() {
        let written = as_written("Kdo je Svoboda? חסאם ומרואן", Language::Hebrew);
        assert_eq!(written.get("חסאמ").map(String::as_str), Some("חסאם"));
        assert_eq!(written.get("ומרואנ").map(String::as_str), Some("ומרואן"));
        let r = RareWords { coverage: 1.0, matched: vec!["חסאמ".into(), "unknown".into()], counted: 2 };
        let v = verdict_json(None, Some(&r), 0.5, &written).unwrap();
        assert_eq!(v["rare_words"]["as_written"], json!(["חסאם", "unknown"]));
        assert_eq!(v["rare_words"]["words"], json!(["חסאמ", "unknown"]));
    }

    #[test]
    fn question_words_are_not_words_of_the_question() {
        // every word of the record is rare, as in a small corpus: only content words count
        let cases = [
            (Language::Czech, "Kdo je Svoboda? Kde je? Co je to? Kdy?", "Panu Svobodovi byl doručen dopis.", "svobod"),
            (Language::Hebrew, "מי זה סבובודה? איפה הוא? מה זה?", "המכתב נמסר לסבובודה ביום שני.", "סבובודה"),
            (
                Language::English,
                "Who is Svoboda? Where is he? What is it?",
                "The letter was handed to Svoboda.",
                "svoboda",
            ),
            (Language::German, "Wer ist Svoboda? Wo ist er? Wann?", "Der Brief wurde Svoboda zugestellt.", "svoboda"),
        ];
        for (lang, question, record, key) in cases {
            let words = query_words(question, lang);
            let own: Vec<&str> = words.iter().map(|w| w.key.as_str()).collect();
            assert_eq!(own, [key], "{lang:?}: {words:?}");
            let doc: Vec<String> = crate::analysis::document_terms(record, lang).into_iter().map(|t| t.key).collect();
            let df: HashMap<String, u64> = doc.iter().map(|k| (k.clone(), 1)).collect();
            let r = rare_words(&words, df_of(&df), 2.0, |k| doc.iter().any(|d| d == k)).unwrap();
            assert!(r.coverage > DEFAULT_MIN_COVERAGE, "{lang:?}: {r:?} {doc:?}");
        }
    }

    #[test]
    fn calibration_takes_quantiles_of_the_relevant_distances() {
        let samples: Vec<Sample> = (0..20)
            .map(|i| Sample { best: 0.1, nearest_relevant: Some(0.1 + i as f64 * 0.01), answerable: true })
            .chain([Sample { best: 0.5, nearest_relevant: None, answerable: false }])
            .collect();
        let c = calibrate(&samples, 0.95).unwrap();
        assert!((c.max_distance - 0.28).abs() < 1e-9, "{c:?}");
        assert!((c.max_gap - 0.18).abs() < 1e-9, "{c:?}");
        assert!((c.kept - 0.95).abs() < 1e-9);
        assert_eq!((c.unanswerable, c.rejected), (1, 1.0));
        assert!(calibrate(&[Sample { best: 0.1, nearest_relevant: None, answerable: true }], 0.9).is_none());
    }

    #[test]
    fn calibration_arguments_are_checked_at_their_edges() {
        assert!(check_calibration_args(1.0, 1, 100).is_ok());
        assert!(check_calibration_args(1e-9, 100, 100).is_ok());
        for q in [0.0, -0.5, 1.000001, f64::NAN] {
            let e = check_calibration_args(q, 10, 100).unwrap_err();
            assert_eq!(e.state, SqlState::InvalidParameterValue);
            assert_eq!(e.message, format!("quantile must be in (0, 1], got {q}"));
            assert_eq!(e.hint, "0.95 keeps the nearest relevant item of 95% of the answerable queries.");
        }
        for candidates in [0, -1, 101] {
            let e = check_calibration_args(0.95, candidates, 100).unwrap_err();
            assert_eq!(e.state, SqlState::InvalidParameterValue);
            assert_eq!(e.message, format!("candidates must be between 1 and 100, got {candidates}"));
            assert_eq!(e.hint, "Each gold query's semantic search returns this many candidates (default 100).");
        }
        // the quantile is checked first
        let e = check_calibration_args(2.0, 0, 100).unwrap_err();
        assert!(e.message.starts_with("quantile"), "{e:?}");
    }

    fn row(source: &str, item: &str, parent: &str, distance: Option<f64>, space: Option<&str>) -> SearchRow {
        let mut rank = json!({"query": "original", "branch": "semantic", "rank": 1});
        if let Some(s) = space {
            rank["space"] = json!(s);
        }
        SearchRow {
            rank: 1,
            source: source.into(),
            item_id: item.into(),
            parent_id: parent.into(),
            score: 1.0,
            semantic_rank: Some(1),
            semantic_distance: distance,
            lexical_rank: None,
            lexical_score: None,
            content: None,
            locator: json!({}),
            metadata: json!({}),
            embedding_stale: false,
            evidence: None,
            origin: None,
            query_ranks: json!([rank]),
        }
    }

    #[test]
    fn a_gold_querys_sample_is_of_the_default_spaces_distances() {
        let rows = vec![
            row("pages", "p1", "9", Some(0.01), Some("page_image")),
            row("chunks", "1", "7", Some(0.2), None),
            row("chunks", "2", "8", Some(0.1), None),
            row("halachot", "3", "8", Some(0.3), None),
            row("chunks", "4", "7", None, None),
        ];
        let judged = |pairs: &[(&str, i32)]| -> HashMap<String, i32> {
            pairs.iter().map(|(k, g)| (k.to_string(), *g)).collect()
        };
        // an item judgment: the best is the default space's best, not the page's 0.01
        let j = judged(&[("1", 2), ("p1", 1)]);
        let s = sample(&rows, Some(&j), false).unwrap();
        assert_eq!(s, Sample { best: 0.1, nearest_relevant: Some(0.2), answerable: true });
        // a qualified item judgment
        let j = judged(&[("halachot:3", 1)]);
        assert_eq!(sample(&rows, Some(&j), false).unwrap().nearest_relevant, Some(0.3));
        // parent judgments match the parent id, not the item id
        let j = judged(&[("8", 1)]);
        assert_eq!(sample(&rows, Some(&j), true).unwrap().nearest_relevant, Some(0.1));
        assert_eq!(sample(&rows, Some(&j), false).unwrap().nearest_relevant, None);
        // a grade of 0 is no relevant judgment: the query is unanswerable
        let j = judged(&[("1", 0)]);
        assert_eq!(
            sample(&rows, Some(&j), false).unwrap(),
            Sample { best: 0.1, nearest_relevant: None, answerable: false }
        );
        assert!(!sample(&rows, None, false).unwrap().answerable);
        // answerable, but its relevant item is not among the candidates
        let j = judged(&[("elsewhere", 3)]);
        assert_eq!(
            sample(&rows, Some(&j), false).unwrap(),
            Sample { best: 0.1, nearest_relevant: None, answerable: true }
        );
        // no default-space distance: no sample
        assert_eq!(sample(&rows[..1], None, false), None);
        assert_eq!(sample(&rows[4..], None, false), None);
        assert_eq!(sample(&[], None, false), None);
    }

    #[test]
    fn calibration_errors_name_the_gold_query_and_set() {
        let e = CoreError::new(SqlState::DataException, "bad vector", "fix it");
        let named = in_gold_query("q7", e.clone());
        assert_eq!(named, CoreError { message: "gold query \"q7\": bad vector".into(), ..e });
        let e = nothing_to_calibrate("legal", 100);
        assert_eq!(e.state, SqlState::ObjectNotInPrerequisiteState);
        assert_eq!(
            e.message,
            "gold set \"legal\" has no query with a vector whose relevant item is among its first 100 candidates"
        );
        assert_eq!(e.hint, "Judge relevant items for queries that have a query_vec, or raise candidates.");
        let c = calibrate(&[Sample { best: 0.1, nearest_relevant: Some(0.15), answerable: true }], 1.0).unwrap();
        let t = c.thresholds(Some("e5".into()));
        assert_eq!((t.max_distance, t.max_gap, t.model.as_deref()), (0.15, c.max_gap, Some("e5")));
        assert!((t.max_gap - 0.05).abs() < 1e-12);
    }

    #[test]
    fn calibration_without_unanswerable_queries_rejects_nothing() {
        let samples = [
            Sample { best: 0.1, nearest_relevant: Some(0.1), answerable: true },
            Sample { best: 0.2, nearest_relevant: None, answerable: true },
        ];
        let c = calibrate(&samples, 1.0).unwrap();
        assert_eq!((c.answerable, c.unanswerable, c.rejected), (2, 0, 0.0));
        assert!((c.kept - 0.5).abs() < 1e-12, "the query without its relevant item is not kept: {c:?}");
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.0), Some(1.0), "the rank is at least 1");
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), Some(2.0));
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 1.0), Some(3.0));
    }

    proptest! {
        /// Coverage is a share, common words never count, and a word the item lacks never
        /// raises it.
        #[test]
        fn coverage_is_a_share_of_the_counted_words(
            dfs in prop::collection::vec(0u64..10, 1..8),
            present in prop::collection::vec(any::<bool>(), 8),
            limit in 0.0f64..6.0,
        ) {
            let words: Vec<QueryWord> = (0..dfs.len())
                .map(|i| QueryWord { key: format!("w{i}"), keys: vec![(format!("w{i}"), 1.0), (format!("w{i}*"), 0.5)] })
                .collect();
            let df = |k: &str| dfs[k.trim_start_matches('w').trim_end_matches('*').parse::<usize>().unwrap()];
            let has = |k: &str| present[k.trim_start_matches('w').trim_end_matches('*').parse::<usize>().unwrap()];
            let r = rare_words(&words, df, limit, has);
            let counted = dfs.iter().filter(|&&d| d as f64 <= limit).count();
            match r {
                None => prop_assert_eq!(counted, 0),
                Some(r) => {
                    prop_assert_eq!(r.counted, counted);
                    prop_assert!((0.0..=1.0).contains(&r.coverage));
                    let hits = (0..dfs.len()).filter(|&i| dfs[i] as f64 <= limit && present[i]).count();
                    prop_assert!((r.coverage - hits as f64 / counted as f64).abs() < 1e-9);
                }
            }
        }
    }
}
