//! A search's arguments checked: every user mistake is a [`CoreError`] with a SQLSTATE and a
//! hint, found before any I/O. Pure: nothing here reads the database.

use std::sync::Arc;

use serde_json::Value;

use super::LexicalPlans;
use crate::error::{CoreError, Result, SqlState};
use crate::filters;
use crate::model::{Condition, Corpus, Distance, Source};

/// Characters of query_text the lexical branch uses (documented in the README): an OR of more
/// words than that overflows PostgreSQL's tsquery (54000) or its stack (54001) and says
/// nothing more.
pub const MAX_QUERY_CHARS: usize = 10_000;

/// Extra queries one search may fuse with its original query (each runs its own branches).
pub const MAX_EXTRA_QUERIES: usize = 16;

/// The largest weight of an extra query (the original query's is 1).
pub const MAX_QUERY_WEIGHT: f64 = 100.0;

/// Labels a caller cannot give an extra query: they name the original query and the feedback
/// round in `query_ranks`.
pub const RESERVED_LABELS: [&str; 2] = ["original", "feedback"];

pub(super) const MAX_LABEL_CHARS: usize = 100;

/// One query fused with the original one (multi-query retrieval: an LLM's rewrites, a HyDE
/// passage's embedding, sub-questions), validated against the corpus and the mode.
#[derive(Debug, Clone)]
pub struct ExtraQuery {
    pub label: String,
    /// Its vector, when the mode has a semantic branch.
    pub vector: Option<Vec<f32>>,
    /// Its text, when the mode has a lexical branch.
    pub text: Option<String>,
    /// Multiplies the RRF contribution of each of its lists.
    pub weight: f64,
    /// BM25 plans of its text (None: no text, or the ts_rank_cd scorer).
    pub lexical: Option<LexicalPlans>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Hybrid,
    Semantic,
    Lexical,
}

impl Mode {
    pub fn parse(s: &str) -> Result<Mode> {
        match s {
            "hybrid" => Ok(Mode::Hybrid),
            "semantic" => Ok(Mode::Semantic),
            "lexical" => Ok(Mode::Lexical),
            other => Err(bad(
                format!("unknown search mode {}", crate::json::brief_str(other)),
                "mode is hybrid, semantic or lexical.",
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Hybrid => "hybrid",
            Mode::Semantic => "semantic",
            Mode::Lexical => "lexical",
        }
    }
}

/// The lexical branch's scorer (`pg_corpus.lexical_scorer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scorer {
    Bm25,
    TsRankCd,
}

/// The settings a search reads, taken once per call (the `pg_corpus.*` GUCs and the session's
/// `random_page_cost`). [`Config::default`] has the documented defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub max_k: i32,
    pub max_candidates: i32,
    pub exact_search_max_rows: i32,
    pub ann_max_scan_tuples: i32,
    pub scorer: Scorer,
    pub bm25_k1: f64,
    pub bm25_b: f64,
    /// Below 1: automatic ([`crate::lexical::auto_candidate_budget`]).
    pub bm25_candidate_budget: i32,
    /// Rank through a source's `corpus_bm25` index where there is one.
    pub bm25_index: bool,
    pub hybrid_feedback: bool,
    /// The session's random_page_cost (BM25 subplans plan with at most 1.1).
    pub random_page_cost: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_k: 1000,
            max_candidates: 10_000,
            exact_search_max_rows: 4_000,
            ann_max_scan_tuples: 1_000_000,
            scorer: Scorer::Bm25,
            bm25_k1: 1.2,
            bm25_b: 0.75,
            bm25_candidate_budget: -1,
            bm25_index: true,
            hybrid_feedback: false,
            random_page_cost: 4.0,
        }
    }
}

/// A search's arguments as the caller gave them (`corpus_hybrid_search`'s, minus the corpus).
#[derive(Debug, Clone)]
pub struct Args {
    pub query_vec: Option<Vec<f32>>,
    pub query_text: Option<String>,
    pub k: i32,
    /// Rows of the ranking skipped before the k returned (a page of it).
    pub offset: i32,
    pub filters: Value,
    pub mode: String,
    pub max_per_parent: Option<i32>,
    pub candidates: Option<i32>,
    /// None: the corpus' setting ([`crate::ranking::Ranking`]).
    pub rrf_k: Option<i32>,
    /// (semantic, lexical) weight of each source in definition order, in place of the
    /// catalog's (a tuner's trial settings; no SQL argument sets it).
    pub source_weights: Option<Vec<(f64, f64)>>,
    /// The feedback round's parameters in place of the corpus' (a tuner's trials too).
    pub feedback_params: Option<crate::model::FeedbackParams>,
    pub include_stale: bool,
    pub feedback: Option<bool>,
    /// `extra_queries`: a JSON array of `{"text", "vector", "weight", "label"}` objects (NULL
    /// or `[]`: none).
    pub extra_queries: Value,
    /// `filter_mode`: `strict` or `lenient` ([`crate::filters::FilterMode`]).
    pub filter_mode: String,
    /// `query_vectors`: `{"space": [numbers]}` or `{"space": {"vector": [numbers], "model":
    /// "name"}}`, a query vector per named embedding space (`query_vec` is the default space's).
    pub query_vectors: Value,
    /// `query_model`: the model that embedded `query_vec` (and the extra queries' vectors);
    /// None: not declared, not checked.
    pub query_model: Option<String>,
    /// `evidence`: the evidence filter (None: the corpus' `evidence.enabled`).
    pub evidence: Option<bool>,
    /// `expand`: citation-graph expansion (None: off).
    pub expand: Option<bool>,
    /// The corpus' must-include classes (false: not applied; evidence calibration measures the
    /// search's own ranking).
    pub must_include: bool,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            query_vec: None,
            query_text: None,
            k: 10,
            offset: 0,
            filters: Value::Object(Default::default()),
            mode: "hybrid".into(),
            max_per_parent: Some(3),
            candidates: None,
            rrf_k: None,
            source_weights: None,
            feedback_params: None,
            include_stale: false,
            feedback: None,
            extra_queries: Value::Null,
            filter_mode: "strict".into(),
            query_vectors: Value::Null,
            query_model: None,
            evidence: None,
            expand: None,
            must_include: true,
        }
    }
}

/// The most ranked rows a search may skip (`offset`).
pub const MAX_OFFSET: i32 = 10_000;

/// The arguments that can be checked without the corpus.
#[derive(Debug, Clone)]
pub struct Checked {
    pub mode: Mode,
    pub k: usize,
    pub offset: usize,
    /// The call's window (None: the corpus' rule).
    pub window: Option<usize>,
    pub max_per_parent: Option<usize>,
    /// The call's rank constant (None: the corpus').
    pub rrf_k: Option<f64>,
}

pub(crate) fn bad(msg: String, hint: &str) -> CoreError {
    CoreError::new(SqlState::InvalidParameterValue, msg, hint)
}

impl Args {
    /// Check what needs no corpus (k, mode, candidates, rrf_k, max_per_parent).
    pub fn check(&self, config: &Config) -> Result<Checked> {
        let (k, max_k) = (self.k, config.max_k);
        if k <= 0 || k > max_k {
            return Err(bad(
                format!("k must be between 1 and {max_k}, got {k}"),
                "Ask for fewer rows, or raise pg_corpus.max_k.",
            ));
        }
        if !(0..=MAX_OFFSET).contains(&self.offset) {
            return Err(bad(
                format!("offset must be between 0 and {MAX_OFFSET}, got {}", self.offset),
                "offset is the number of ranked rows skipped before the k returned: 0 for the first page, k for \
                 the second, and so on.",
            ));
        }
        let mode = Mode::parse(&self.mode)?;
        let max_candidates = config.max_candidates;
        if let Some(c) = self.candidates {
            if c < 1 || c > max_candidates {
                return Err(bad(
                    format!("candidates must be between 1 and {max_candidates}, got {c}"),
                    "Leave it NULL for the corpus' window (by default max(100, 4*k)), or raise pg_corpus.max_candidates.",
                ));
            }
        }
        if let Some(rrf_k) = self.rrf_k.filter(|r| !(0..=crate::ranking::MAX_RRF_K).contains(r)) {
            return Err(bad(
                format!("rrf_k must be between 0 and {}, got {rrf_k}", crate::ranking::MAX_RRF_K),
                "The default is 20 (60 in the original RRF paper); leave it NULL for the corpus' setting.",
            ));
        }
        let max_per_parent = match self.max_per_parent {
            None | Some(0) => None,
            Some(n) if n < 0 => {
                return Err(bad(
                    format!("max_per_parent must be >= 0, got {n}"),
                    "Use 0 or NULL for no per-parent cap.",
                ))
            }
            Some(n) => Some(n as usize),
        };
        let window = self.candidates.map(|c| c as usize);
        let offset = self.offset as usize;
        Ok(Checked { mode, k: k as usize, offset, window, max_per_parent, rrf_k: self.rrf_k.map(f64::from) })
    }
}

/// The query vector a search uses (of the default space), checked against the corpus.
pub(super) fn check_vector(corpus: &Corpus, v: Vec<f32>) -> Result<Vec<f32>> {
    check_space_vector(corpus, 0, v)
}

/// A query vector of space `space`, checked against the space's dimension and its sources'
/// distances.
pub(super) fn check_space_vector(corpus: &Corpus, space: usize, v: Vec<f32>) -> Result<Vec<f32>> {
    let dims = corpus.spaces.get(space).and_then(|s| s.dimensions).unwrap_or(v.len() as i32);
    if v.len() as i32 != dims {
        let what = if space == 0 {
            format!("corpus \"{}\" has {dims}", corpus.name)
        } else {
            format!("space \"{}\" of corpus \"{}\" has {dims}", corpus.spaces[space].name, corpus.name)
        };
        return Err(CoreError::new(
            SqlState::DataException,
            format!("query vector has {} dimensions, {what}", v.len()),
            "Embed the query with the space's embedding model.",
        ));
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(CoreError::new(
            SqlState::DataException,
            "query vector contains NaN or Infinity",
            "Check the embedding model's output; every component must be a finite number.",
        ));
    }
    // A zero vector has no direction: its cosine distance to every item is NaN.
    if corpus.sources.iter().any(|s| s.space == space && s.distance == Distance::Cosine) && v.iter().all(|&x| x == 0.0)
    {
        return Err(CoreError::new(
            SqlState::DataException,
            "query vector is all zeros, which has no cosine distance",
            "Check the embedding model's output, or search with mode => 'lexical'.",
        ));
    }
    Ok(v)
}

/// `query_vectors` validated against the corpus.
#[derive(Debug, Clone, Default)]
pub(super) struct SpaceVectors {
    /// The default space's query vector (`query_vec`, or the object's "default" entry: not
    /// both).
    pub default: Option<Vec<f32>>,
    /// The named spaces' vectors by space index (None at 0). A lexical search uses none.
    pub spaces: Vec<Option<Vec<f32>>>,
    /// The declared model of each space's vector by space index (`query_model` at 0).
    pub models: Vec<Option<String>>,
}

pub(super) fn space_vectors(
    corpus: &Corpus,
    mode: Mode,
    value: &Value,
    query_vec: Option<Vec<f32>>,
    query_model: Option<&str>,
) -> Result<SpaceVectors> {
    let mut out = SpaceVectors {
        default: query_vec,
        spaces: vec![None; corpus.spaces.len()],
        models: vec![None; corpus.spaces.len()],
    };
    if let Some(m) = query_model {
        out.models[0] = Some(check_model_name(m, "query_model")?);
    }
    let hint = "query_vectors is {\"space\": [0.1, …]} or {\"space\": {\"vector\": [0.1, …], \"model\": \"name\"}}: \
                one vector per embedding space the corpus declares (query_vec is the default space's).";
    let obj = match value {
        Value::Null => return Ok(out),
        Value::Object(o) => o,
        other => return Err(bad(format!("query_vectors must be a JSON object, got {}", json_type(other)), hint)),
    };
    for (name, v) in obj {
        let Some(idx) = corpus.space(name) else {
            let names: Vec<String> = corpus.spaces.iter().map(|s| crate::sql::literal(&s.name)).collect();
            return Err(bad(
                format!("corpus \"{}\" has no embedding space {}", corpus.name, crate::json::brief_str(name)),
                &format!("Its spaces: {}.", names.join(", ")),
            ));
        };
        let (xs, model) = match v {
            Value::Array(xs) => (xs, None),
            Value::Object(entry) => {
                if let Some(k) = entry.keys().find(|k| !["vector", "model"].contains(&k.as_str())) {
                    return Err(bad(
                        format!("query_vectors.{name} has an unknown field {}", crate::json::brief_str(k)),
                        hint,
                    ));
                }
                let model = match entry.get("model") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(m)) => Some(check_model_name(m, &format!("query_vectors.{name}.model"))?),
                    Some(other) => {
                        return Err(bad(
                            format!("query_vectors.{name}.model must be a string, got {}", json_type(other)),
                            hint,
                        ))
                    }
                };
                match entry.get("vector") {
                    Some(Value::Array(xs)) => (xs, model),
                    other => {
                        return Err(bad(
                            format!(
                                "query_vectors.{name}.vector must be an array of numbers, got {}",
                                other.map_or("nothing", json_type)
                            ),
                            hint,
                        ))
                    }
                }
            }
            _ => {
                return Err(bad(
                    format!("query_vectors.{name} must be an array of numbers, got {}", json_type(v)),
                    hint,
                ))
            }
        };
        let mut vec = Vec::with_capacity(xs.len());
        for x in xs {
            match x.as_f64() {
                Some(f) if f.abs() <= f64::from(f32::MAX) => vec.push(f as f32),
                _ => {
                    return Err(bad(
                        format!(
                            "query_vectors.{name} must hold finite numbers within ±3.4e38, got {}",
                            crate::json::brief(x)
                        ),
                        hint,
                    ))
                }
            }
        }
        if mode == Mode::Lexical {
            continue;
        }
        let vec = check_space_vector(corpus, idx, vec)?;
        if idx == 0 {
            if out.default.is_some() {
                return Err(bad(
                    "query_vectors names the default space, and query_vec is given too".into(),
                    "Pass the default space's vector once: as query_vec, or as query_vectors.default.",
                ));
            }
            if model.is_some() && out.models[0].is_some() {
                return Err(bad(
                    "query_vectors.default names a model, and query_model is given too".into(),
                    "Name the default space's model once: as query_model, or in query_vectors.default.",
                ));
            }
            out.default = Some(vec);
        } else {
            out.spaces[idx] = Some(vec);
        }
        if model.is_some() {
            out.models[idx] = model;
        }
    }
    Ok(out)
}

/// A declared model name: non-empty, at most 200 characters.
fn check_model_name(m: &str, what: &str) -> Result<String> {
    let trimmed = m.trim();
    if trimmed.is_empty() || trimmed.chars().count() > 200 {
        return Err(bad(
            format!("{what} must be a model name of 1 to 200 characters, got {}", crate::json::brief_str(m)),
            "Name the model that embedded the query as corpus_set_embedding_model recorded it, or leave it NULL.",
        ));
    }
    Ok(trimmed.to_string())
}

/// A query text as the lexical branch uses it: trimmed, at most [`MAX_QUERY_CHARS`]
/// characters; None when empty.
pub(super) fn query_text(t: &str) -> Option<String> {
    let t = t.trim();
    (!t.is_empty()).then(|| t.chars().take(MAX_QUERY_CHARS).collect())
}

pub(super) fn extra_error(msg: String) -> CoreError {
    bad(
        msg,
        "extra_queries is a JSON array of objects such as \
         [{\"text\": \"a rewrite\"}, {\"vector\": [0.1, …], \"weight\": 0.5, \"label\": \"hyde\"}]: \
         each with text, a vector or both, an optional weight in (0, 100] and an optional label.",
    )
}

/// Validate `extra_queries` against the corpus and the mode: what each query's branches use.
/// An extra query that gives the mode nothing to search (a text-only query in a semantic
/// search) is an error, as is anything malformed: extra queries come from programs, and a
/// silently ignored one would hide a bug.
pub fn extra_queries(corpus: &Corpus, mode: Mode, value: &Value) -> Result<Vec<ExtraQuery>> {
    let items = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        other => return Err(extra_error(format!("extra_queries must be a JSON array, got {}", json_type(other)))),
    };
    if items.len() > MAX_EXTRA_QUERIES {
        return Err(extra_error(format!(
            "extra_queries holds {} queries, at most {MAX_EXTRA_QUERIES} are fused",
            items.len()
        )));
    }
    let mut out: Vec<ExtraQuery> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let n = i + 1;
        let Value::Object(fields) = item else {
            return Err(extra_error(format!("extra query {n} must be a JSON object, got {}", json_type(item))));
        };
        if let Some(unknown) = fields.keys().find(|k| !["text", "vector", "weight", "label"].contains(&k.as_str())) {
            return Err(extra_error(format!("extra query {n} has an unknown key {}", crate::json::brief_str(unknown))));
        }
        let text = match fields.get("text") {
            None | Some(Value::Null) => None,
            Some(Value::String(t)) => query_text(t),
            Some(other) => {
                return Err(extra_error(format!(
                    "extra query {n}: \"text\" must be a string, got {}",
                    json_type(other)
                )))
            }
        };
        let vector = match fields.get("vector") {
            None | Some(Value::Null) => None,
            Some(Value::Array(xs)) => {
                let mut v = Vec::with_capacity(xs.len());
                for x in xs {
                    match x.as_f64() {
                        Some(f) if f.abs() > f64::from(f32::MAX) => {
                            return Err(CoreError::new(
                                SqlState::DataException,
                                format!("extra query {n}: a vector component ({f:e}) is out of the real range"),
                                "Every component must be a finite number within ±3.4e38 (PostgreSQL's real).",
                            ))
                        }
                        Some(f) => v.push(f as f32),
                        None => {
                            return Err(extra_error(format!(
                                "extra query {n}: \"vector\" must be an array of numbers, got an element of type {}",
                                json_type(x)
                            )))
                        }
                    }
                }
                // a lexical search ignores an extra query's vector (as it ignores query_vec)
                if mode == Mode::Lexical {
                    None
                } else {
                    Some(
                        check_vector(corpus, v)
                            .map_err(|e| CoreError { message: format!("extra query {n}: {}", e.message), ..e })?,
                    )
                }
            }
            Some(other) => {
                return Err(extra_error(format!(
                    "extra query {n}: \"vector\" must be an array of numbers, got {}",
                    json_type(other)
                )))
            }
        };
        let weight = match fields.get("weight") {
            None | Some(Value::Null) => 1.0,
            Some(w) => match w.as_f64() {
                Some(w) if w > 0.0 && w <= MAX_QUERY_WEIGHT => w,
                _ => {
                    return Err(extra_error(format!(
                        "extra query {n}: \"weight\" must be a number in (0, {MAX_QUERY_WEIGHT}], got {}",
                        crate::json::brief(w)
                    )))
                }
            },
        };
        let label = match fields.get("label") {
            None | Some(Value::Null) => format!("extra_{n}"),
            Some(Value::String(l)) if !l.trim().is_empty() && l.chars().count() <= MAX_LABEL_CHARS => l.clone(),
            Some(other) => {
                return Err(extra_error(format!(
                "extra query {n}: \"label\" must be a non-empty string of at most {MAX_LABEL_CHARS} characters, got {}",
                crate::json::brief(other)
            )))
            }
        };
        if RESERVED_LABELS.contains(&label.as_str()) || out.iter().any(|q| q.label == label) {
            return Err(extra_error(format!(
                "extra query {n}: label {} is taken (\"original\" and \"feedback\" are reserved, and labels are unique)",
                crate::json::brief_str(&label)
            )));
        }
        let (vector, text) = match mode {
            Mode::Semantic => (vector, None),
            Mode::Lexical => (None, text),
            Mode::Hybrid => (vector, text),
        };
        if vector.is_none() && text.is_none() {
            let needs = match mode {
                Mode::Semantic => "a vector (a semantic search)",
                Mode::Lexical => "non-empty text (a lexical search)",
                Mode::Hybrid => "non-empty text, a vector or both",
            };
            return Err(extra_error(format!("extra query {n} has nothing to search for: it needs {needs}")));
        }
        out.push(ExtraQuery { label, vector, text, weight, lexical: None });
    }
    Ok(out)
}

pub(super) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A search checked against its corpus: what it searches for and how, before any I/O.
#[derive(Debug, Clone)]
pub struct Validated {
    pub corpus: Arc<Corpus>,
    pub conds: Vec<Condition>,
    /// The filter conditions a lenient search dropped.
    pub rejected_filters: Vec<filters::Rejected>,
    pub mode: Mode,
    pub k: usize,
    pub offset: usize,
    pub window: usize,
    pub max_per_parent: Option<usize>,
    pub rrf_k: f64,
    pub vector: Option<Vec<f32>>,
    pub text: Option<String>,
    pub extra: Vec<ExtraQuery>,
    pub space_vectors: Vec<Option<Vec<f32>>>,
    /// The declared model of each space's query vectors, by space index (None: not declared,
    /// or no vector of that space is compared).
    pub query_models: Vec<Option<String>>,
    pub feedback: bool,
    /// Whether the evidence filter applies.
    pub evidence: bool,
    pub expand: bool,
    pub must_include: bool,
    pub include_stale: bool,
    pub config: Config,
}

/// Whether a per-parent cap of `max_per_parent` can drop one of the first `rows` of a ranking
/// of `corpus`: not without a cap, nor with one of at least `rows`, nor when every source's
/// items are their own parents (each source a parent scope of its own).
fn cap_can_bite(corpus: &Corpus, max_per_parent: Option<usize>, rows: usize) -> bool {
    if max_per_parent.is_none_or(|c| c >= rows) {
        return false;
    }
    let mut scopes: Vec<&str> = corpus.sources.iter().map(|s| s.parent_scope.as_str()).collect();
    scopes.sort_unstable();
    scopes.dedup();
    scopes.len() < corpus.sources.len() || !corpus.sources.iter().all(Source::own_parent)
}

/// Check `args` against `corpus` (`checked` is [`Args::check`]'s answer): filters, vectors,
/// texts, extra queries and the options that depend on them. Reads nothing.
pub fn validate(corpus: Arc<Corpus>, args: Args, checked: Checked, config: Config) -> Result<Validated> {
    let filter_mode = filters::FilterMode::parse(&args.filter_mode)?;
    let (conds, rejected_filters) = filters::parse_with_mode(&corpus, &args.filters, filter_mode)?;
    let Checked { mode, k, offset, window, max_per_parent, rrf_k } = checked;
    let text = args.query_text.as_deref().and_then(query_text);
    let extra = extra_queries(&corpus, mode, &args.extra_queries)?;
    let SpaceVectors { default: query_vec, spaces: space_vectors, mut models } =
        space_vectors(&corpus, mode, &args.query_vectors, args.query_vec, args.query_model.as_deref())?;
    let any_space = space_vectors.iter().any(Option::is_some);
    let wants_vector = mode == Mode::Semantic || (mode == Mode::Hybrid && (query_vec.is_some() || any_space));
    let vector = match (wants_vector, query_vec) {
        (true, Some(v)) => Some(check_vector(&corpus, v)?),
        (true, None) if any_space => None,
        (true, None) => {
            return Err(CoreError::new(
                SqlState::NullValueNotAllowed,
                "a semantic search needs a query vector, got NULL",
                "Pass query_vec, or use mode => 'lexical'.",
            )
            .with_kind("bad_vector", None))
        }
        (false, _) => None,
    };
    let text = match mode {
        Mode::Semantic => None,
        Mode::Lexical if text.is_none() => {
            return Err(bad(
                "a lexical search needs non-empty query text".into(),
                "Pass query_text, or use mode => 'semantic'.",
            ))
        }
        _ => text,
    };
    if vector.is_none() && !(any_space && mode != Mode::Lexical) && text.is_none() {
        return Err(bad(
            "nothing to search for: no query vector and empty query text".into(),
            "Pass query_vec, query_text or both; extra_queries are fused with them, they do not replace them.",
        ));
    }
    // A declared model is judged only where its vector is compared with embeddings.
    for (i, model) in models.iter_mut().enumerate() {
        let compared = mode != Mode::Lexical
            && if i == 0 {
                vector.is_some() || extra.iter().any(|q| q.vector.is_some())
            } else {
                space_vectors[i].is_some()
            };
        if !compared {
            *model = None;
        }
    }
    // Feedback needs both branches and BM25. Asked for in the call, anything else is an
    // error; by pg_corpus.hybrid_feedback, it applies where it can.
    let can_feed_back = vector.is_some() && text.is_some() && config.scorer == Scorer::Bm25;
    let feedback = match args.feedback {
        Some(true) if !can_feed_back => return Err(bad(
            "feedback needs a hybrid search with BM25: a query vector, query text and pg_corpus.lexical_scorer = bm25"
                .into(),
            "Pass both query_vec and query_text with mode => 'hybrid', or feedback => false.",
        )),
        Some(f) => f,
        None => corpus.ranking.feedback.unwrap_or(config.hybrid_feedback) && can_feed_back,
    };
    // The corpus' window is fusion's; a search of one list (one branch, one query) ranks it the
    // same with any window and takes the floor a cap needs.
    let lists = usize::from(vector.is_some())
        + space_vectors.iter().filter(|v| v.is_some()).count()
        + usize::from(text.is_some())
        + extra.len();
    let evidence = args.evidence.unwrap_or(corpus.evidence.enabled);
    let window = window.unwrap_or_else(|| {
        if lists > 1 || feedback {
            corpus.ranking.window(k, config.max_candidates)
        } else if text.is_some() && !evidence && !cap_can_bite(&corpus, max_per_parent, k + offset) {
            crate::model::exact_list_window(k, offset, config.max_candidates)
        } else {
            crate::model::single_list_window(k, config.max_candidates)
        }
    });
    let corpus = match (args.source_weights, args.feedback_params) {
        (None, None) => corpus,
        (Some(w), _) if w.len() != corpus.sources.len() || !w.iter().all(|(s, l)| s.is_finite() && l.is_finite()) => {
            return Err(bad(
                format!(
                    "{} source weights for the {} sources of corpus \"{}\"",
                    w.len(),
                    corpus.sources.len(),
                    corpus.name
                ),
                "Give one finite (semantic, lexical) pair per source.",
            ))
        }
        (weights, params) => {
            let mut c = (*corpus).clone();
            for (src, (s, l)) in c.sources.iter_mut().zip(weights.unwrap_or_default()) {
                src.semantic_weight = s;
                src.lexical_weight = l;
            }
            if let Some(p) = params {
                c.ranking.feedback_beta = Some(p.beta);
                c.ranking.feedback_alpha = Some(p.alpha);
                c.ranking.feedback_terms = Some(p.terms as i32);
            }
            Arc::new(c)
        }
    };
    let rrf_k = rrf_k.unwrap_or_else(|| f64::from(corpus.ranking.rrf_k()));
    let expand = args.expand.unwrap_or(false);
    if let Some(e) = corpus.edge_errors.first().filter(|_| expand) {
        return Err(e.clone());
    }
    if expand && corpus.edges.is_empty() {
        return Err(bad(
            format!("corpus \"{}\" has no edge sets to expand along", corpus.name),
            &format!(
                "Register one with corpus.corpus_add_edges({}, ...), or search with expand => false.",
                crate::sql::literal(&corpus.name)
            ),
        ));
    }
    if offset > 0 && expand {
        return Err(CoreError::new(
            SqlState::FeatureNotSupported,
            "a search with citation-graph expansion has no pages beyond the first",
            "Expansion adds the cited items to the first page's rows; ask for more rows with a larger k \
             (offset => 0), or page without it (expand => false).",
        ));
    }
    Ok(Validated {
        evidence,
        corpus,
        conds,
        rejected_filters,
        mode,
        k,
        offset,
        window,
        max_per_parent,
        rrf_k,
        vector,
        text,
        extra,
        space_vectors,
        query_models: models,
        feedback,
        expand,
        must_include: args.must_include,
        include_stale: args.include_stale,
        config,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::engine::tests::fake::*;
    use crate::engine::{search, validate, Args, Config, Request};
    use crate::error::SqlState;

    #[test]
    fn bad_arguments_fail_before_any_query_runs() {
        type Mutation = Box<dyn Fn(&mut Args)>;
        let cases: Vec<(Mutation, SqlState)> = vec![
            (Box::new(|a| a.k = 0), SqlState::InvalidParameterValue),
            (Box::new(|a| a.k = 1001), SqlState::InvalidParameterValue),
            (Box::new(|a| a.offset = -1), SqlState::InvalidParameterValue),
            (Box::new(|a| a.offset = 10_001), SqlState::InvalidParameterValue),
            (Box::new(|a| a.mode = "fuzzy".into()), SqlState::InvalidParameterValue),
            (Box::new(|a| a.candidates = Some(0)), SqlState::InvalidParameterValue),
            (Box::new(|a| a.rrf_k = Some(-1)), SqlState::InvalidParameterValue),
            (Box::new(|a| a.max_per_parent = Some(-2)), SqlState::InvalidParameterValue),
            (Box::new(|a| a.query_vec = Some(vec![0.5; 3])), SqlState::DataException),
            (Box::new(|a| a.query_vec = Some(vec![f32::NAN; 384])), SqlState::DataException),
            (Box::new(|a| a.query_vec = Some(vec![0.0; 384])), SqlState::DataException),
            (Box::new(|a| a.filters = json!({"source_kind": "internal_committee"})), SqlState::InsufficientPrivilege),
            (Box::new(|a| a.filters = json!({"nope": 1})), SqlState::UndefinedColumn),
            (
                Box::new(|a| {
                    a.mode = "semantic".into();
                    a.query_vec = None;
                }),
                SqlState::NullValueNotAllowed,
            ),
            (
                Box::new(|a| {
                    a.mode = "lexical".into();
                    a.query_text = Some("   ".into());
                }),
                SqlState::InvalidParameterValue,
            ),
            (
                Box::new(|a| {
                    a.query_vec = None;
                    a.query_text = None;
                }),
                SqlState::InvalidParameterValue,
            ),
        ];
        for (i, (change, state)) in cases.into_iter().enumerate() {
            let mut a = args("hybrid");
            change(&mut a);
            let mut f = default_fake();
            let e = run(&mut f, a, Config::default()).unwrap_err();
            assert_eq!(e.state, state, "case {i}: {e}");
            assert!(!e.hint.is_empty(), "case {i}: every error has a hint");
            assert!(f.branch_calls().is_empty(), "case {i}: no subplan ran");
        }
    }

    /// The legal corpus with a required scope filter on court.
    fn scoped() -> std::sync::Arc<crate::model::Corpus> {
        let mut d = crate::testing::legal_def();
        d["required_filters"] = json!(["court"]);
        std::sync::Arc::new(crate::definition::resolve(&serde_json::from_value(d).unwrap()).unwrap())
    }

    /// A 384-d vector with `bad` in its middle.
    fn with(bad: f32) -> Option<Vec<f32>> {
        let mut v = vec384();
        v[192] = bad;
        Some(v)
    }

    #[test]
    fn every_search_mistake_gets_its_sqlstate_and_names_what_is_wrong() {
        use SqlState::*;
        let hybrid = || args("hybrid");
        let semantic = || args("semantic");
        // a search of the scoped corpus: its court, and these filters
        let court = |f: Value| {
            let mut filters = json!({"court": "עליון"});
            filters.as_object_mut().unwrap().extend(f.as_object().unwrap().clone());
            Args { filters, ..hybrid() }
        };
        let text_only = |t: Option<&str>| Args { query_vec: None, query_text: t.map(str::to_string), ..hybrid() };
        // (SQLSTATE, what the message or its detail names, the search; of the scoped corpus?)
        let cases: Vec<(SqlState, Option<&str>, Args, bool)> = vec![
            (InvalidParameterValue, Some("court"), hybrid(), true),
            (InvalidParameterValue, Some("court"), Args { filters: json!({"page_number": 1}), ..hybrid() }, true),
            (UndefinedColumn, Some("judge"), Args { filters: json!({"judge": "x"}), ..hybrid() }, false),
            (DatatypeMismatch, Some("page_number"), court(json!({"page_number": "abc"})), true),
            (DatatypeMismatch, Some("page_number"), court(json!({"page_number": [1, "abc"]})), true),
            (DatatypeMismatch, Some("page_number"), court(json!({"page_number": {"gte": "abc"}})), true),
            (InvalidParameterValue, Some("like"), court(json!({"page_number": {"like": 5}})), true),
            (InsufficientPrivilege, Some("source_kind"), court(json!({"source_kind": "internal_committee"})), true),
            (InsufficientPrivilege, Some("source_kind"), court(json!({"source_kind": "external_upload"})), true),
            (
                InsufficientPrivilege,
                Some("source_kind"),
                Args { filters: json!({"source_kind": ["internal_committee", "external_upload"]}), ..hybrid() },
                false,
            ),
            (NullValueNotAllowed, None, Args { query_vec: None, ..semantic() }, false),
            (DataException, Some("dimensions"), Args { query_vec: Some(vec![1.0, 2.0, 3.0]), ..hybrid() }, false),
            (DataException, Some("dimensions"), Args { query_vec: Some(vec![0.05; 383]), ..hybrid() }, false),
            (DataException, Some("dimensions"), Args { query_vec: Some(vec![0.05; 385]), ..semantic() }, false),
            (DataException, Some("nan"), Args { query_vec: with(f32::NAN), ..hybrid() }, false),
            (DataException, Some("infinity"), Args { query_vec: with(f32::INFINITY), ..hybrid() }, false),
            (DataException, Some("infinity"), Args { query_vec: with(f32::NEG_INFINITY), ..semantic() }, false),
            (InvalidParameterValue, Some("k must be"), Args { k: 0, ..hybrid() }, false),
            (InvalidParameterValue, Some("k must be"), Args { k: -1, ..hybrid() }, false),
            (InvalidParameterValue, Some("k must be"), Args { k: 1_000_000, ..hybrid() }, false),
            (InvalidParameterValue, Some("k must be"), Args { k: i32::MAX, ..hybrid() }, false),
            (InvalidParameterValue, Some("nothing to search for"), text_only(Some("")), false),
            (InvalidParameterValue, Some("nothing to search for"), text_only(Some("   \t\n ")), false),
            (InvalidParameterValue, Some("nothing to search for"), text_only(None), false),
            (
                InvalidParameterValue,
                Some("lexical search needs"),
                Args { query_text: Some("  ".into()), ..args("lexical") },
                false,
            ),
            (InvalidParameterValue, Some("fuzzy"), Args { mode: "fuzzy".into(), ..hybrid() }, false),
            (InvalidParameterValue, Some("mode"), Args { mode: String::new(), ..hybrid() }, false),
            (InvalidParameterValue, Some("candidates"), Args { candidates: Some(-1), ..hybrid() }, false),
            (InvalidParameterValue, Some("rrf_k"), Args { rrf_k: Some(-1), ..hybrid() }, false),
            (InvalidParameterValue, Some("max_per_parent"), Args { max_per_parent: Some(-1), ..hybrid() }, false),
            (InvalidParameterValue, Some("feedback"), Args { feedback: Some(true), ..semantic() }, false),
            (
                InvalidParameterValue,
                Some("feedback"),
                Args { feedback: Some(true), query_text: None, ..hybrid() },
                false,
            ),
            (
                InvalidParameterValue,
                Some("feedback"),
                Args { feedback: Some(true), query_vec: None, ..hybrid() },
                false,
            ),
        ];
        for (i, (state, mention, a, scoped_corpus)) in cases.into_iter().enumerate() {
            let mut f = default_fake();
            let c = if scoped_corpus { scoped() } else { corpus() };
            let e = run_in(c, &mut f, a, Config::default()).unwrap_err();
            assert_eq!(e.state, state, "case {i}: {e}");
            assert!(!e.message.trim().is_empty() && !e.hint.trim().is_empty(), "case {i}: {e:?}");
            if let Some(m) = mention {
                let text = format!("{} {}", e.message, e.detail.as_deref().unwrap_or("")).to_lowercase();
                assert!(text.contains(m), "case {i}: the message names {m:?}: {}", e.message);
            }
            assert!(f.branch_calls().is_empty(), "case {i}: no subplan ran");
        }
        // the valid variant of the scoped cases runs
        let ok = court(json!({"page_number": {"gte": 1}}));
        assert_eq!(run_in(scoped(), &mut default_fake(), ok, Config::default()).unwrap().len(), 10);
    }

    #[test]
    fn bad_extra_queries_fail_before_any_query_runs() {
        let v = extra_json(1.0);
        let many: Vec<Value> = (0..17).map(|i| json!({"text": format!("q{i}")})).collect();
        let cases: Vec<(&str, Value, SqlState)> = vec![
            ("hybrid", json!({"text": "x"}), SqlState::InvalidParameterValue),
            ("hybrid", json!("x"), SqlState::InvalidParameterValue),
            ("hybrid", Value::Array(many), SqlState::InvalidParameterValue),
            ("hybrid", json!([1]), SqlState::InvalidParameterValue),
            ("hybrid", json!([{}]), SqlState::InvalidParameterValue),
            ("hybrid", json!([{"text": "  "}]), SqlState::InvalidParameterValue),
            ("hybrid", json!([{"txt": "x"}]), SqlState::InvalidParameterValue),
            ("hybrid", json!([{"text": 5}]), SqlState::InvalidParameterValue),
            ("hybrid", json!([{"vector": "[1,2]"}]), SqlState::InvalidParameterValue),
            ("hybrid", json!([{"vector": [1, "2"]}]), SqlState::InvalidParameterValue),
            ("hybrid", json!([{"vector": [0.5, 0.5, 0.5]}]), SqlState::DataException),
            ("hybrid", json!([{"vector": vec![0; 384]}]), SqlState::DataException),
            ("hybrid", json!([{"vector": vec![1e300; 384]}]), SqlState::DataException),
            ("hybrid", json!([{"text": "x", "weight": 0}]), SqlState::InvalidParameterValue),
            ("hybrid", json!([{"text": "x", "weight": -1}]), SqlState::InvalidParameterValue),
            ("hybrid", json!([{"text": "x", "weight": 101}]), SqlState::InvalidParameterValue),
            ("hybrid", json!([{"text": "x", "weight": "1"}]), SqlState::InvalidParameterValue),
            ("hybrid", json!([{"text": "x", "label": "original"}]), SqlState::InvalidParameterValue),
            ("hybrid", json!([{"text": "x", "label": "feedback"}]), SqlState::InvalidParameterValue),
            (
                "hybrid",
                json!([{"text": "x", "label": "a"}, {"text": "y", "label": "a"}]),
                SqlState::InvalidParameterValue,
            ),
            ("hybrid", json!([{"text": "x", "label": ""}]), SqlState::InvalidParameterValue),
            ("hybrid", json!([{"text": "x", "label": 3}]), SqlState::InvalidParameterValue),
            ("semantic", json!([{"text": "x"}]), SqlState::InvalidParameterValue),
            ("lexical", json!([{"vector": v}]), SqlState::InvalidParameterValue),
        ];
        for (i, (mode, extra, state)) in cases.into_iter().enumerate() {
            let mut a = args(mode);
            a.extra_queries = extra;
            let mut f = default_fake();
            let e = run(&mut f, a, Config::default()).unwrap_err();
            assert_eq!(e.state, state, "case {i}: {e}");
            assert!(!e.hint.is_empty(), "case {i}: every error has a hint");
            assert!(f.calls.is_empty(), "case {i}: nothing ran: {:?}", f.calls);
        }
        // extra queries never stand in for the original query
        let mut a = args("hybrid");
        a.query_vec = None;
        a.query_text = None;
        a.extra_queries = json!([{"text": "x"}]);
        let e = run(&mut default_fake(), a, Config::default()).unwrap_err();
        assert_eq!(e.state, SqlState::InvalidParameterValue);
        assert!(e.hint.contains("do not replace"), "{}", e.hint);
    }

    #[test]
    fn extra_query_mistakes_name_what_is_wrong() {
        let many: Vec<Value> = (0..17).map(|i| json!({"text": format!("q{i}")})).collect();
        let cases: Vec<(&str, Value, SqlState, &str)> = vec![
            ("hybrid", json!({"text": "x"}), SqlState::InvalidParameterValue, "must be a JSON array"),
            ("hybrid", json!([{"text": "x", "weight": 0}]), SqlState::InvalidParameterValue, "weight"),
            ("hybrid", json!([{"text": "x", "weight": 1000}]), SqlState::InvalidParameterValue, "weight"),
            ("hybrid", json!([{"text": "x", "label": "original"}]), SqlState::InvalidParameterValue, "reserved"),
            ("hybrid", json!([{"text": "x", "colour": "red"}]), SqlState::InvalidParameterValue, "unknown key"),
            ("hybrid", json!([{}]), SqlState::InvalidParameterValue, "nothing to search for"),
            ("hybrid", json!([{"vector": [1, 2, 3]}]), SqlState::DataException, "dimensions"),
            ("hybrid", json!([{"vector": "not an array"}]), SqlState::InvalidParameterValue, "array of numbers"),
            ("hybrid", Value::Array(many), SqlState::InvalidParameterValue, "at most 16"),
            ("semantic", json!([{"text": "a rewrite"}]), SqlState::InvalidParameterValue, "a vector"),
        ];
        for (mode, extra, state, words) in cases {
            let a = Args { extra_queries: extra.clone(), ..args(mode) };
            let e = run(&mut default_fake(), a, Config::default()).unwrap_err();
            assert_eq!(e.state, state, "{extra}: {e}");
            assert!(e.message.contains(words), "{extra}: the message says {words:?}: {}", e.message);
            assert!(!e.hint.is_empty());
        }
    }

    #[test]
    fn a_lenient_search_is_the_strict_search_of_the_kept_conditions() {
        let proposed = json!({"court": "עליון", "judge": "כהן", "page_number": {"gte": 2, "lt": "ten"}});
        let kept = json!({"court": "עליון", "page_number": {"gte": 2}});
        let search = |filters: Value, filter_mode: &str| {
            let a = Args { filters, filter_mode: filter_mode.into(), ..args("hybrid") };
            let mut f = default_fake();
            let out = crate::engine::run(corpus(), crate::engine::Call::Search(a), Config::default(), &mut f).unwrap();
            let sql: Vec<String> = f
                .calls
                .into_iter()
                .filter_map(|c| if let Call::Branch { sql, .. } = c { Some(sql) } else { None })
                .collect();
            let rows: Vec<(String, String, f64)> =
                out.rows.into_iter().map(|r| (r.source, r.item_id, r.score)).collect();
            (rows, sql, out.rejected_filters)
        };
        let (lenient_rows, lenient_sql, dropped) = search(proposed, "lenient");
        let (strict_rows, strict_sql, none) = search(kept, "strict");
        assert!(none.is_empty());
        assert_eq!(lenient_rows, strict_rows);
        assert_eq!(lenient_sql, strict_sql, "the same subplans run");
        let (_, unfiltered_sql, _) = search(json!({}), "strict");
        assert_ne!(lenient_sql, unfiltered_sql, "the kept conditions narrow the subplans");
        // the caller learns what was dropped, each with the SQLSTATE a strict search raises
        let report = crate::filters::rejected_json(&dropped);
        let got: Vec<(Value, &str)> = report
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (d["condition"].clone(), d["sqlstate"].as_str().unwrap()))
            .collect();
        assert_eq!(got, vec![(json!({"judge": "כהן"}), "42703"), (json!({"page_number": {"lt": "ten"}}), "42804")]);
    }

    #[test]
    fn a_lenient_search_runs_with_the_valid_conditions_only() {
        let mut a = args("hybrid");
        a.filters = json!({"court": "עליון", "judge": "x", "page_number": "five"});
        let e = run(&mut default_fake(), a.clone(), Config::default()).unwrap_err();
        assert_eq!(e.state, SqlState::UndefinedColumn, "strict is the default: the first bad field is the error");
        a.filter_mode = "lenient".into();
        let mut f = default_fake();
        let config = Config::default();
        let checked = a.check(&config).unwrap();
        let req = Request::prepare(validate(corpus(), a.clone(), checked, config.clone()).unwrap(), &mut f).unwrap();
        assert_eq!(req.conds.len(), 1);
        assert_eq!(req.conds[0].field, "court");
        let dropped: Vec<&str> = req.rejected_filters.iter().map(|r| r.field.as_str()).collect();
        assert_eq!(dropped, vec!["judge", "page_number"]);
        assert_eq!(search(&req, &mut f).unwrap().len(), 10);
        for c in &f.calls {
            if let Call::Branch { sql, .. } = c {
                assert!(sql.contains("p.\"court\" = ") && !sql.contains("page_number"), "{sql}");
            }
        }
        // the isolation column is never lenient
        a.filters = json!({"court": "עליון", "source_kind": "internal_committee"});
        assert_eq!(
            run(&mut default_fake(), a.clone(), Config::default()).unwrap_err().state,
            SqlState::InsufficientPrivilege
        );
        a.filter_mode = "sloppy".into();
        assert_eq!(run(&mut default_fake(), a, Config::default()).unwrap_err().state, SqlState::InvalidParameterValue);
    }
}
