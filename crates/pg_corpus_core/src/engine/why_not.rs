//! Why a search does not return one item: the first rule, in the order a search applies them,
//! that keeps it out — outside the corpus (the same answer for an item that does not exist),
//! the search's filters, a part of the searchable contract, then the ranking: its rank beyond
//! k, the per-parent cap, the evidence filter, or neither branch ranking it. A missing or stale
//! embedding is said on the way (the semantic branch cannot rank the item; the lexical one can).

use std::sync::Arc;

use serde_json::{json, Value};

use super::fuse::{branch_lists, ranked_to};
use super::io::{SeedQuery, SliceOf, SliceQuery};
use super::similar::{plausible_id, source_index};
use super::{validate, Args, Config, Executor, Request};
use crate::error::Result;
use crate::fusion::Fused;
use crate::model::{Branch, Corpus};
use crate::plan::{self, ItemProbe};
use crate::sql::literal;

/// Rows of the ranking searched for the item, at most.
pub const WHY_NOT_DEPTH: usize = 1000;

/// One finding: a reason code, its figures, and what to do.
#[derive(Debug, Clone, PartialEq)]
pub struct WhyNot {
    pub reason: &'static str,
    pub detail: Value,
    pub hint: String,
}

fn finding(reason: &'static str, detail: Value, hint: impl Into<String>) -> WhyNot {
    WhyNot { reason, detail, hint: hint.into() }
}

/// The findings for item `item_id` of source `source` under the search `search` of `corpus`.
pub fn why_not(
    corpus: Arc<Corpus>,
    source: &str,
    item_id: &str,
    search: Args,
    config: Config,
    exec: &mut dyn Executor,
) -> Result<Vec<WhyNot>> {
    let idx = source_index(&corpus, source)?;
    let include_stale = search.include_stale;
    let checked = search.check(&config)?;
    let v = validate(corpus.clone(), search, checked, config.clone())?;
    let src = &corpus.sources[idx];
    let not_in_corpus = || {
        finding(
            "not_in_corpus",
            json!({}),
            format!(
                "No item {} of source {} is in corpus {}: it does not exist, or the corpus predicate leaves it out.",
                literal(item_id),
                literal(source),
                literal(&corpus.name)
            ),
        )
    };
    if !plausible_id(item_id, &src.id.sql_type) {
        return Ok(vec![not_in_corpus()]);
    }
    let probe = |p: ItemProbe, exec: &mut dyn Executor| -> Result<bool> {
        exec.any_row(&SliceQuery::new(idx, SliceOf::Items, plan::item_probe(&corpus, idx, &v.conds, item_id, p)))
    };
    if !probe(ItemProbe::InCorpus, exec)? {
        return Ok(vec![not_in_corpus()]);
    }
    if !probe(ItemProbe::Filters, exec)? {
        let mut fields: Vec<&str> = v.conds.iter().map(|c| c.field.as_str()).collect();
        fields.sort_unstable();
        fields.dedup();
        return Ok(vec![finding(
            "filters",
            json!({"fields": fields}),
            "The item fails the search's filters (or the corpus' required scope filters): search without them, or with values it holds.",
        )]);
    }
    let mut out = Vec::new();
    if !probe(ItemProbe::Text, exec)? {
        out.push(finding(
            "text",
            json!({"column": src.text.column, "min_length": src.min_length}),
            format!(
                "Its text ({}) is missing or shorter than min_length ({} characters): items that short are not searchable.",
                src.text.column, src.min_length
            ),
        ));
    }
    if !probe(ItemProbe::Parent, exec)? {
        let columns: Vec<&str> = src.parent_required.iter().map(|c| c.column.as_str()).collect();
        out.push(finding(
            "parent",
            json!({"parent_id_column": src.parent_fk.column, "required": columns}),
            format!(
                "Its parent lacks required metadata ({}): fill those columns in the parent table.",
                columns.join(", ")
            ),
        ));
    }
    if !probe(ItemProbe::Rule, exec)? {
        let columns: Vec<&str> = src.rule.iter().map(|c| c.col.column.as_str()).collect();
        out.push(finding(
            "rule",
            json!({"columns": columns}),
            format!("The source rule of {} leaves it out (columns {}).", literal(source), columns.join(", ")),
        ));
    }
    if !out.is_empty() {
        return Ok(out);
    }
    let semantic = v.vector.is_some() && v.mode != super::Mode::Lexical;
    if semantic && !probe(ItemProbe::Embedding, exec)? {
        out.push(finding(
            "no_embedding",
            json!({"column": src.embedding.column}),
            "It has no embedding yet, so the semantic branch cannot rank it: run the re-embed worker (pg-corpus-worker).",
        ));
    } else if semantic && !include_stale && stale(&corpus, idx, &v.conds, item_id, exec)? {
        out.push(finding(
            "stale_embedding",
            json!({"column": src.embedding.column}),
            "Its embedding describes older text, so the semantic branch leaves it out until it is re-embedded \
             (or search with include_stale => true).",
        ));
    }
    let req = Request::prepare(v, exec)?;
    let at = |rows: &[Fused]| rows.iter().position(|f| f.source == idx && f.item_id.trim() == item_id.trim());
    let full = ranked_to(&req, Some(WHY_NOT_DEPTH), exec)?;
    if let Some(pos) = at(&full) {
        let rank = pos + 1;
        out.push(if rank <= req.k {
            finding("returned", json!({"rank": rank, "score": full[pos].score}), "The search returns it.")
        } else {
            finding(
                "below_k",
                json!({"rank": rank, "k": req.k, "score": full[pos].score, "kth_score": full[req.k - 1].score}),
                format!(
                    "It ranks {rank}, below the {} rows asked for: ask for more rows, or the page that holds it (\"offset\" => {}).",
                    req.k,
                    (rank - 1) / req.k * req.k
                ),
            )
        });
        return Ok(out);
    }
    // the evidence filter judges the fused hits before the per-parent cap counts them
    let uncapped = Request { max_per_parent: None, ..req.clone() };
    let rows = ranked_to(&uncapped, Some(WHY_NOT_DEPTH), exec)?;
    let pos = at(&rows);
    if pos.is_none() && req.evidence.is_some() {
        let unfiltered = Request { evidence: None, ..uncapped.clone() };
        if let Some(p) = at(&ranked_to(&unfiltered, Some(WHY_NOT_DEPTH), exec)?) {
            out.push(finding(
                "no_evidence",
                json!({"rank_without_filter": p + 1}),
                "Neither rule of the evidence filter admits it: it is not near the query's vector within the corpus' \
                 thresholds, and holds too few of the query's rare words.",
            ));
            return Ok(out);
        }
    }
    if let (Some(pos), Some(cap)) = (pos, req.max_per_parent) {
        let parent = rows[pos].parent_id.clone();
        let ahead: Vec<Value> = rows[..pos]
            .iter()
            .filter(|f| f.parent_id == parent && f.parent_scope == rows[pos].parent_scope)
            .take(cap)
            .map(|f| json!({"source": corpus.sources[f.source].name, "item_id": f.item_id}))
            .collect();
        out.push(finding(
            "parent_cap",
            json!({"parent_id": parent, "max_per_parent": cap, "ranked_ahead": ahead}),
            format!(
                "Its parent already has {cap} hits ranked above it (max_per_parent => {cap}): raise max_per_parent, or 0 for no cap."
            ),
        ));
        return Ok(out);
    }
    // neither branch ranks it within the widest window
    let wide = Request { window: (req.config.max_candidates.max(1) as usize).max(req.window), ..req.clone() };
    let mut ranks = serde_json::Map::new();
    for l in branch_lists(&wide, exec)? {
        if let Some(p) = l.hits.iter().position(|h| h.source == idx && h.item_id.trim() == item_id.trim()) {
            let branch = if l.branch == Branch::Semantic { "semantic_rank" } else { "lexical_rank" };
            ranks.entry(branch).or_insert(json!(p + 1));
        }
    }
    ranks.insert("window".into(), json!(wide.window));
    ranks.insert("depth".into(), json!(WHY_NOT_DEPTH));
    out.push(finding(
        "not_ranked",
        Value::Object(ranks),
        "The fused ranking does not reach it: neither branch ranks it high enough (the lexical branch needs one of \
         the query's words, the semantic one a vector near the query's).",
    ));
    Ok(out)
}

fn stale(
    corpus: &Corpus,
    idx: usize,
    conds: &[crate::model::Condition],
    item_id: &str,
    exec: &mut dyn Executor,
) -> Result<bool> {
    let (sql, params) = plan::similar_seed(corpus, idx, conds, item_id);
    let Some(seed) = exec.seed_item(&SeedQuery { source: idx, item_id: item_id.to_string(), sql, params })? else {
        return Ok(false);
    };
    let items = vec![(seed.item_id, seed.parent_id.unwrap_or_default())];
    let mut stale = false;
    for lookup in &plan::queued_items(corpus, &[(idx, items)]) {
        stale |= !exec.queued_items(lookup)?.is_empty();
    }
    Ok(stale)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::tests::fake::*;

    fn ask(f: &mut Fake, corpus: Arc<Corpus>, id: &str, a: Args) -> Vec<WhyNot> {
        why_not(corpus, "chunks", id, a, Config::default(), f).unwrap()
    }

    fn reasons(w: &[WhyNot]) -> Vec<&str> {
        w.iter().map(|x| x.reason).collect()
    }

    #[test]
    fn an_item_outside_the_corpus_is_answered_as_one_that_does_not_exist() {
        let c = Arc::new(crate::testing::legal());
        let mut f = default_fake();
        let missing = ask(&mut f, c.clone(), "987654321", args("hybrid"));
        let malformed = ask(&mut f, c.clone(), "x'1", args("hybrid"));
        assert_eq!(reasons(&missing), ["not_in_corpus"]);
        assert_eq!((missing[0].reason, &missing[0].detail), (malformed[0].reason, &malformed[0].detail));
        assert_eq!(missing[0].hint.replace("987654321", "ID"), malformed[0].hint.replace("'x''1'", "'ID'"));
        // the item of another corpus: the isolation probe fails like a missing item's
        f.failing_probe = Some("source_kind");
        let other = ask(&mut f, c, "3", args("hybrid"));
        assert_eq!((reasons(&other), &other[0].detail), (vec!["not_in_corpus"], &missing[0].detail));
        assert_eq!(other[0].hint.replace("'3'", "'ID'"), missing[0].hint.replace("987654321", "ID"));
    }

    #[test]
    fn each_part_of_the_searchable_contract_is_named() {
        let c = Arc::new(crate::testing::legal());
        for (marker, reason) in [("char_length", "text"), ("btrim(p.", "parent")] {
            let mut f = default_fake();
            f.failing_probe = Some(marker);
            let w = ask(&mut f, c.clone(), "3", args("hybrid"));
            assert_eq!(reasons(&w), [reason], "{marker}: {w:?}");
            assert!(!w[0].hint.is_empty());
        }
    }

    #[test]
    fn the_ranking_says_returned_below_k_capped_or_stale() {
        let c = Arc::new(crate::testing::legal());
        let mut f = default_fake();
        let w = ask(&mut f, c.clone(), "1", args("hybrid"));
        assert_eq!(reasons(&w), ["returned"]);
        assert_eq!(w[0].detail["rank"], json!(1));
        // items 31..40 share a parent: with a cap of 1, item 31 takes its place ahead of item 32
        let a = Args { max_per_parent: Some(1), ..args("semantic") };
        assert_eq!(reasons(&ask(&mut f, c.clone(), "31", a.clone())), ["returned"]);
        let w = ask(&mut f, c.clone(), "32", a);
        assert_eq!(reasons(&w), ["parent_cap"], "{w:?}");
        assert_eq!(w[0].detail["max_per_parent"], json!(1));
        assert_eq!(w[0].detail["ranked_ahead"], json!([{"source": "chunks", "item_id": "31"}]));
        // an item far down: its rank and the page that holds it
        let w = ask(&mut f, c.clone(), "60", Args { max_per_parent: None, ..args("semantic") });
        assert_eq!(reasons(&w), ["below_k"], "{w:?}");
        let rank = w[0].detail["rank"].as_u64().unwrap();
        assert!(rank > 10 && w[0].hint.contains(&format!("\"offset\" => {}", (rank - 1) / 10 * 10)), "{w:?}");
        // beyond every window: neither branch ranks it
        let w = ask(&mut f, c.clone(), "4900", Args { max_per_parent: None, ..args("semantic") });
        assert_eq!(reasons(&w), ["not_ranked"], "{w:?}");
        // (the semantic branch ranks it, far below the ranking's first WHY_NOT_DEPTH rows)
        let sem = w[0].detail.get("semantic_rank").and_then(Value::as_u64);
        assert!(sem.is_none_or(|r| r as usize > WHY_NOT_DEPTH / 2), "{w:?}");
        // the evidence filter: ranked without it, refused by both rules
        let ev = evidence_corpus(json!({"vector": {"default": {"max_distance": 0.0001, "max_gap": 0.0}}}));
        let w = ask(&mut default_fake(), ev, "5", Args { evidence: Some(true), ..args("hybrid") });
        assert_eq!(reasons(&w), ["no_evidence"], "{w:?}");
        assert!(w[0].detail["rank_without_filter"].as_u64().unwrap() <= 10);
        // a stale embedding is said first
        f.stale = vec!["1".into()];
        let w = ask(&mut f, c, "1", args("hybrid"));
        assert_eq!(reasons(&w)[0], "stale_embedding", "{w:?}");
    }
}
