//! Find similar items: a search of a corpus by one of its own
//! items — its stored vector for the semantic branch, its text for the lexical one — that never
//! returns the item itself, nor, when asked, the other items of its parent.

use std::sync::Arc;

use super::SeedQuery;
use super::{validate, Args, Checked, Config, Executor, Mode, Request};
use crate::error::{CoreError, Result, SqlState};
use crate::filters;
use crate::json::brief_str;
use crate::model::{Corpus, SearchRow};
use crate::plan;
use crate::sql::literal;

/// A find-similar search: the item it starts from and the search's other arguments (their
/// query_vec and query_text are the item's).
#[derive(Debug, Clone)]
pub struct SimilarArgs {
    pub source: String,
    pub item_id: String,
    pub exclude_parent: bool,
    pub args: Args,
}

pub(super) fn not_in_corpus(corpus: &Corpus, source: &str, item_id: &str, function: &str) -> CoreError {
    // The same answer whether the item does not exist, is another corpus' or is not searchable:
    // a caller learns nothing about items outside the corpus.
    CoreError::new(
        SqlState::UndefinedObject,
        format!("item {} of source {} is not in corpus \"{}\"", brief_str(item_id), brief_str(source), corpus.name),
        format!(
            "{function} takes an item the search could return: check the item id and the source, and that \
             the item is searchable (its text, its parent and the source's rule) and within the filters."
        ),
    )
}

/// The index of the source named `name`, or 42704 naming the corpus' sources.
pub(crate) fn source_index(corpus: &Corpus, name: &str) -> Result<usize> {
    corpus.sources.iter().position(|s| s.name == name).ok_or_else(|| {
        let names: Vec<String> = corpus.sources.iter().map(|s| literal(&s.name)).collect();
        CoreError::new(
            SqlState::UndefinedObject,
            format!("corpus \"{}\" has no source {}", corpus.name, brief_str(name)),
            format!("Its sources: {}.", if names.is_empty() { "none".to_string() } else { names.join(", ") }),
        )
    })
}

/// `s` without the leading and trailing whitespace PostgreSQL's input functions skip (ASCII).
fn ascii_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_ascii_whitespace())
}

/// Whether `id` can be a value of an id column of type `sql_type` (integers and uuids are
/// checked here: a malformed one is no item of the corpus, not a cast error).
pub(super) fn plausible_id(id: &str, sql_type: &str) -> bool {
    match sql_type {
        "smallint" => ascii_trim(id).parse::<i16>().is_ok(),
        "integer" => ascii_trim(id).parse::<i32>().is_ok(),
        "bigint" => ascii_trim(id).parse::<i64>().is_ok(),
        "uuid" => {
            let hex: String =
                ascii_trim(id).trim_matches(|c| c == '{' || c == '}').chars().filter(|&c| c != '-').collect();
            hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit())
        }
        _ => true,
    }
}

/// Run a find-similar search of `corpus`. The item is looked up under the whole corpus
/// predicate first (an item of another corpus is the same error as a missing one); its
/// embedding is used unless it is missing or queued for re-embedding (then a semantic search
/// is an error, a hybrid one searches by text alone, unless `include_stale`).
pub fn find_similar(
    corpus: Arc<Corpus>,
    sim: SimilarArgs,
    config: Config,
    exec: &mut dyn Executor,
) -> Result<(Vec<SearchRow>, Vec<crate::filters::Rejected>)> {
    let checked: Checked = sim.args.check(&config)?;
    let idx = source_index(&corpus, &sim.source)?;
    let src = &corpus.sources[idx];
    // The filters (and the required scope filters) are checked first and scope the item's own
    // lookup: whether an item exists is never answered outside the caller's scope.
    let filter_mode = filters::FilterMode::parse(&sim.args.filter_mode)?;
    let (conds, _) = filters::parse_with_mode(&corpus, &sim.args.filters, filter_mode)?;
    if !plausible_id(&sim.item_id, &src.id.sql_type) {
        return Err(not_in_corpus(&corpus, &sim.source, &sim.item_id, "find_similar"));
    }
    let (sql, params) = plan::similar_seed(&corpus, idx, &conds, &sim.item_id);
    let Some(seed) = exec.seed_item(&SeedQuery { source: idx, item_id: sim.item_id.clone(), sql, params })? else {
        return Err(not_in_corpus(&corpus, &sim.source, &sim.item_id, "find_similar"));
    };
    // the stored id: the caller's may be another spelling of it ('042', ' 42', an upper-case uuid)
    let item_id = seed.item_id.clone();
    let mode = checked.mode;
    let vector = match (mode, seed.embedding) {
        (Mode::Lexical, _) => None,
        (_, Some(v)) if sim.args.include_stale => Some(v),
        (_, Some(v)) => {
            let lookups = plan::queued_items(
                &corpus,
                &[(idx, vec![(item_id.clone(), seed.parent_id.clone().unwrap_or_default())])],
            );
            let mut queued = false;
            for lookup in &lookups {
                queued |= !exec.queued_items(lookup)?.is_empty();
            }
            if !queued {
                Some(v)
            } else {
                None
            }
        }
        (_, None) => None,
    };
    if mode == Mode::Semantic && vector.is_none() {
        return Err(CoreError::new(
            SqlState::ObjectNotInPrerequisiteState,
            format!("item {} of source {} has no current embedding", brief_str(&item_id), brief_str(&sim.source)),
            "Its embedding is missing or queued for re-embedding: wait for the worker, pass include_stale => true, \
             or search with mode => 'hybrid' or 'lexical' (by its text).",
        ));
    }
    let text = if mode == Mode::Semantic { None } else { seed.content };
    // the item's vector is of its source's space
    let (query_vec, query_vectors) = match vector {
        Some(v) if src.space != 0 => {
            let name = corpus.spaces[src.space].name.clone();
            (None, serde_json::json!({ name: v }))
        }
        v => (v, serde_json::Value::Null),
    };
    // the evidence filter judges answers to a question: an item's neighbours need none
    let args = Args {
        query_vec,
        query_text: text,
        query_vectors,
        extra_queries: serde_json::Value::Null,
        evidence: Some(false),
        ..sim.args
    };
    let mut req = Request::prepare(validate(corpus.clone(), args, checked, config)?, exec)?;
    req.exclude_items.push((idx, item_id));
    if sim.exclude_parent {
        if let Some(parent) = seed.parent_id {
            req.exclude_parent = Some((src.parent_scope.clone(), parent));
        }
    }
    Ok((super::search(&req, exec)?, req.rejected_filters.clone()))
}
