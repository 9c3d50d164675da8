//! The lexical branch's index terms and scoring, between the analyser ([`crate::analysis`]),
//! BM25 ([`crate::bm25`]) and PostgreSQL's tsvector ([`crate::tsvector`]).
//!
//! - Documents: `corpus.bm25_document(text, language)` turns text into a tsvector (a generated
//!   column with a GIN index): one position per word, the word's own key labelled D, its extra
//!   keys (Hebrew forms without prefix letters, Czech prefix keys) labelled C at the same
//!   position. `tf` = positions of a key, document length = D positions (surface tokens).
//! - Queries: the same analyser gives keys with weights and counts; the search looks up each
//!   key's document frequency in the corpus' statistics, keeps the rare keys to find
//!   candidates through the GIN index (Lucene's common-terms idea: very common keys only score
//!   documents found by rarer ones), and scores candidates with [`score_tsvector`].

use std::collections::BTreeMap;

use crate::analysis::{Analyzer, KeyKind};

use crate::bm25::{self, Bm25Params};
use crate::model::Language;
use crate::tsvector::{quote_lexeme, TsVector, EXTRA_LABEL, MAX_POSITION};

/// tsvector's limits: 256 positions per lexeme, about 1 MB of lexeme bytes per value. Beyond
/// them a document's extra occurrences (or new keys) are not indexed.
const MAX_POSITIONS_PER_KEY: usize = 255;
const MAX_LEXEME_BYTES: usize = 900_000;

/// The tsvector input text for a document (`'key':1,4 'other':2C ...`).
pub fn document_tsvector(text: &str, lang: Language) -> String {
    let mut keys: BTreeMap<String, Vec<(u32, bool)>> = BTreeMap::new();
    let mut position = 0u32;
    let mut bytes = 0usize;
    Analyzer::new(lang).for_each_key(text, |key, _weight, kind| {
        if kind == KeyKind::Surface {
            position = (position + 1).min(MAX_POSITION);
        }
        let pos = position.max(1);
        match keys.get_mut(key) {
            Some(list) => {
                if list.len() < MAX_POSITIONS_PER_KEY && list.last().is_none_or(|(p, _)| *p < pos) {
                    list.push((pos, kind == KeyKind::Extra));
                }
            }
            None => {
                if bytes + key.len() <= MAX_LEXEME_BYTES {
                    bytes += key.len();
                    keys.insert(key.to_string(), vec![(pos, kind == KeyKind::Extra)]);
                }
            }
        }
    });
    let mut out = String::with_capacity(bytes * 2);
    for (key, positions) in keys {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&quote_lexeme(&key));
        out.push(':');
        for (n, (p, extra)) in positions.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(&p.to_string());
            if *extra {
                out.push(EXTRA_LABEL);
            }
        }
    }
    out
}

/// One query key with its BM25 weight (analyser weight × count in the query).
#[derive(Debug, Clone, PartialEq)]
pub struct QueryKey {
    pub key: String,
    pub weight: f64,
}

/// The query's keys for documents analysed as `lang`.
pub fn query_keys(text: &str, lang: Language) -> Vec<QueryKey> {
    Analyzer::new(lang)
        .query_terms(text)
        .into_iter()
        .map(|t| QueryKey { weight: t.weight * t.count as f64, key: t.key })
        .collect()
}

/// A key ready for scoring: its bytes and `weight · idf`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredKey {
    pub key: String,
    pub weight_idf: f64,
}

/// BM25 of one document tsvector against the query (see [`crate::bm25`] for the formula).
pub fn score_tsvector(doc: &TsVector, keys: &[ScoredKey], avg_doc_len: f64, p: Bm25Params) -> f64 {
    let mut dl: Option<f64> = None;
    let mut total = 0.0;
    for k in keys {
        if let Some(e) = doc.find(k.key.as_bytes()) {
            let len = *dl.get_or_insert_with(|| doc.surface_length() as f64);
            total += k.weight_idf * bm25::tf_norm(e.npos as f64, len, avg_doc_len, p);
        }
    }
    total
}

/// Keys found in more documents of a corpus than this get a champion list when the corpus'
/// statistics are refreshed: their documents with the highest BM25 term weight, best first, at
/// most this many (`corpus.lexical_champions`). A query made only of such common keys takes
/// its candidates from the lists' heads instead of the GIN index's posting lists, which hold
/// most of the corpus for them.
pub const CHAMPION_LIST_LEN: u64 = 1000;

/// The automatic BM25 candidate budget (`pg_corpus.bm25_candidate_budget` below 1, the
/// default): [`AUTO_BUDGET_SHARE`] of the corpus' documents, at least [`AUTO_BUDGET_MIN`]. A
/// fixed budget does not grow with the corpus: at 1M chunks (550k searchable documents) each
/// key is in ten times as many documents as at 100k, so 2,000 left overlap@10 with exhaustive
/// BM25 at 0.82, against 0.99 with 10,000 (docs/scale.md).
pub fn auto_candidate_budget(n_docs: u64) -> u64 {
    ((n_docs as f64 * AUTO_BUDGET_SHARE).ceil() as u64).max(AUTO_BUDGET_MIN)
}

/// The least automatic budget: what the whole corpus costs up to 100,000 documents.
pub const AUTO_BUDGET_MIN: u64 = 2000;
/// The automatic budget's share of the corpus' documents.
pub const AUTO_BUDGET_SHARE: f64 = 0.02;

/// The most words of a query the `ts_rank_cd` scorer ranks by. It reads no statistics, so it
/// cannot choose keys by their frequency as BM25 does: every word becomes an OR term of the
/// tsquery, each candidate is ranked against all of them, and a 4,000-word query ran 35 s.
/// Lucene refuses such a query (maxClauseCount 1,024); this scorer keeps its first words.
pub const TS_RANK_CD_MAX_WORDS: usize = 64;

/// The query text the `ts_rank_cd` scorer ranks by: its first [`TS_RANK_CD_MAX_WORDS`]
/// whitespace-separated words.
pub fn ts_rank_cd_text(text: &str) -> &str {
    match text.split_whitespace().nth(TS_RANK_CD_MAX_WORDS) {
        // the offset of the first word left out
        Some(w) => text[..(w.as_ptr() as usize - text.as_ptr() as usize)].trim_end(),
        None => text,
    }
}

/// How the lexical branch finds candidates for a query.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidatePlan {
    /// tsquery input text of the keys whose documents are candidates (ORed), found through the
    /// GIN index; None when every such key is found through its champion list instead.
    pub tsquery: Option<String>,
    /// Keys whose champion lists' first `champion_prefix` documents are candidates (when every
    /// key of the query is common, or when the rarer keys are in fewer than k documents: see
    /// [`candidate_plan`]).
    pub champions: Vec<String>,
    pub champion_prefix: u64,
    /// The champion-list items chosen as candidates ([`preselect`] over the lists' heads); the
    /// search fills it in before building the subplan.
    pub champion_items: Vec<String>,
    /// Keys that only score documents found by others.
    pub common: Vec<String>,
    /// Every key with `weight · idf`, for scoring.
    pub scored: Vec<ScoredKey>,
    /// Some documents containing query keys are not candidates (common keys only score, or
    /// champion lists are cut), so a larger budget can find more.
    pub pruned: bool,
    /// The corpus' documents its keys found through the index are in (the sum of their
    /// document frequencies: an upper bound).
    pub found: u64,
}

fn or_query<'a>(keys: impl Iterator<Item = &'a str>) -> Option<String> {
    let q: Vec<String> = keys.map(quote_lexeme).collect();
    (!q.is_empty()).then(|| q.join(" | "))
}

/// Split the query into keys that find candidates and keys that only score them, so that no
/// key hands over more than about `budget` documents:
///
/// - Keys are taken rarest first while their document frequencies add up to at most `budget`
///   (the rarest is always taken when it fits alone); they find candidates through the GIN
///   index, and the rest (the common keys) only add to the candidates' scores — Lucene's
///   common-terms idea with a bound on the work instead of a frequency cutoff.
/// - When the keys taken are in fewer than `k` documents in all, they cannot give the `k` rows
///   asked for (the search would widen its window and budget ×4 until a commoner key fits,
///   which can end by scoring most of the corpus): the common keys with a champion list (more
///   than [`CHAMPION_LIST_LEN`] documents) also find candidates through their lists' heads,
///   sharing what is left of the budget, `(budget − found) / lists` items each.
/// - When even the rarest key is common, every key finds candidates, but a key above
///   [`CHAMPION_LIST_LEN`] documents only through the head of its champion list (its
///   documents of highest BM25 term weight): `budget / keys` documents each, at most the
///   list's length. Keys below that length still use the index (at most that many documents).
///
/// On a corpus whose documents fit in the budget every key finds candidates and the ranking is
/// exact BM25. `df` gives a key's document frequency.
pub fn candidate_plan(
    keys: &[QueryKey],
    df: impl Fn(&str) -> u64,
    n_docs: u64,
    budget: u64,
    k: usize,
) -> Option<CandidatePlan> {
    if keys.is_empty() {
        return None;
    }
    let budget = budget.max(1);
    let scored: Vec<ScoredKey> = keys
        .iter()
        .map(|k| ScoredKey { key: k.key.clone(), weight_idf: k.weight * bm25::idf(n_docs, df(&k.key)) })
        .collect();
    let mut by_df: Vec<(&QueryKey, u64)> = keys.iter().map(|k| (k, df(&k.key))).collect();
    by_df.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.key.cmp(&b.0.key)));
    let mut taken = 0u64;
    let mut finders = Vec::new();
    let mut common = Vec::new();
    for (k, f) in &by_df {
        if taken.saturating_add(*f) <= budget {
            taken = taken.saturating_add(*f);
            finders.push(k.key.as_str());
        } else {
            common.push(k.key.clone());
        }
    }
    if !finders.is_empty() {
        let pruned = !common.is_empty();
        let listed: Vec<String> = if taken < k as u64 {
            common.iter().filter(|key| df(key) > CHAMPION_LIST_LEN).cloned().collect()
        } else {
            Vec::new()
        };
        let champion_prefix =
            if listed.is_empty() { 0 } else { ((budget - taken) / listed.len() as u64).clamp(1, CHAMPION_LIST_LEN) };
        return Some(CandidatePlan {
            tsquery: or_query(finders.into_iter()),
            champions: listed,
            champion_prefix,
            champion_items: Vec::new(),
            common,
            scored,
            pruned,
            found: taken,
        });
    }
    // Every key is common: champion lists' heads for the keys that have one, the index for
    // the others.
    let (listed, indexed): (Vec<_>, Vec<_>) = by_df.iter().partition(|(_, f)| *f > CHAMPION_LIST_LEN);
    let prefix = (budget / by_df.len() as u64).clamp(1, CHAMPION_LIST_LEN);
    Some(CandidatePlan {
        tsquery: or_query(indexed.iter().map(|(k, _)| k.key.as_str())),
        champions: listed.iter().map(|(k, _)| k.key.clone()).collect(),
        champion_prefix: if listed.is_empty() { 0 } else { prefix },
        champion_items: Vec::new(),
        common: Vec::new(),
        scored,
        pruned: true,
        found: indexed.iter().map(|(_, f)| *f).sum(),
    })
}

/// Keys of a plan whose champion lists are not available — none stored for the source (a list
/// is written for keys above [`CHAMPION_LIST_LEN`] documents of the corpus, which one source
/// may not hold), or none readable for the caller (row-level security hides rows of the
/// source from it, and a list names items) — find their candidates through the GIN index
/// instead: the ranking stays right, at the cost of reading their postings.
pub fn through_index(plan: &mut CandidatePlan, keys: &[String], df: impl Fn(&str) -> u64) {
    let moved: Vec<String> = plan.champions.iter().filter(|k| keys.contains(k)).cloned().collect();
    if moved.is_empty() {
        return;
    }
    plan.champions.retain(|k| !moved.contains(k));
    if plan.champions.is_empty() {
        plan.champion_prefix = 0;
    }
    let extra = or_query(moved.iter().map(String::as_str));
    plan.tsquery = match (plan.tsquery.take(), extra) {
        (Some(q), Some(e)) => Some(format!("{q} | {e}")),
        (q, e) => q.or(e),
    };
    plan.found = moved.iter().fold(plan.found, |n, k| n.saturating_add(df(k)));
    // the moved keys find candidates now: the plan is pruned only while some key still only
    // scores or comes from a list's head
    plan.common.retain(|k| !moved.contains(k));
    plan.pruned = !plan.common.is_empty() || !plan.champions.is_empty();
}

/// The head of one key's champion list: its items, best first, with their BM25 term weights
/// (`tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl))` at the refresh), and the key's `weight · idf`.
#[derive(Debug, Clone, PartialEq)]
pub struct ChampionHead {
    pub weight_idf: f64,
    pub items: Vec<String>,
    pub impacts: Vec<f64>,
}

/// Which items of the champion lists' heads can reach the top `keep`, without reading them:
/// an item's score is at least the sum of its listed impacts (`lower`) and at most that plus,
/// for every head it is missing from, the head's last impact (an item beyond a head weighs no
/// more than the head's last), plus `unlisted` (the most the query's keys without a list can
/// add). Items whose upper bound reaches the `keep`-th best lower bound are kept (Fagin's
/// threshold idea), best upper bound first, at most `cap` of them. The kept items are then
/// scored exactly from their tsvectors, so the ranking among them is exact BM25.
pub fn preselect(heads: &[ChampionHead], unlisted: f64, keep: usize, cap: usize) -> Vec<String> {
    let mut lower: BTreeMap<&str, (f64, f64)> = BTreeMap::new(); // item → (lower, cut of heads it is in)
    let mut all_cuts = 0.0;
    for h in heads {
        let n = h.items.len().min(h.impacts.len());
        if n == 0 {
            continue;
        }
        let cut = h.weight_idf * h.impacts[n - 1].max(0.0);
        all_cuts += cut;
        for (item, impact) in h.items.iter().zip(&h.impacts).take(n) {
            let e = lower.entry(item.as_str()).or_insert((0.0, 0.0));
            e.0 += h.weight_idf * impact.max(0.0);
            e.1 += cut;
        }
    }
    let mut scored: Vec<(&str, f64, f64)> =
        lower.into_iter().map(|(item, (lo, cuts_in))| (item, lo, lo + (all_cuts - cuts_in) + unlisted)).collect();
    if scored.is_empty() {
        return Vec::new();
    }
    let mut lows: Vec<f64> = scored.iter().map(|s| s.1).collect();
    lows.sort_by(|a, b| b.total_cmp(a));
    let threshold = lows[keep.clamp(1, lows.len()) - 1];
    scored.retain(|s| s.2 >= threshold);
    scored.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| b.1.total_cmp(&a.1)).then_with(|| a.0.cmp(b.0)));
    scored.truncate(cap.max(keep));
    scored.into_iter().map(|s| s.0.to_string()).collect()
}

/// Where a BM25 subplan checks the corpus predicate (isolation and searchable contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeCheck {
    /// Candidates are joined to their parents and filtered before scoring: only the corpus'
    /// own candidates are scored, at the price of reading the corpus' parents. The planner
    /// chooses the order, and may read the corpus' items through their parents instead.
    Joined,
    /// As `Joined`, planned without nested loops so that the index scan comes first: its
    /// matches in the whole table are fewer than the corpus' items, which the planner, not
    /// costing the detoasting `@@` recheck, may otherwise read through their parents (about 40
    /// ms instead of 20 at 20,000 items: docs/lexical-speed.md).
    JoinedAfterIndex,
    /// Candidates are scored first and the predicate is checked by id for each ranked row, in
    /// rank order, until the window is full: the parents of only those rows are read.
    AfterRanking,
}

/// [`ScopeCheck::AfterRanking`] from this share of the indexed table's rows in the corpus on.
/// The GIN index finds the matching rows of the whole table: checking after ranking scores the
/// other corpora's rows too (about 2 µs each) but saves joining every candidate's parent (a
/// hash of the corpus' parents, 3–4 ms at 8,000: docs/lexical-speed.md).
pub const SCOPE_AFTER_RANKING_MIN_SHARE: f64 = 0.5;

/// The corpus' share (0–1) of the rows of its source tables (`pg_class.reltuples` each): 0,
/// unknown, when a table was never analysed (negative reltuples) or all are empty.
pub fn corpus_share(documents: u64, table_rows: &[f64]) -> f64 {
    if table_rows.iter().any(|&n| n < 0.0) {
        return 0.0;
    }
    let rows: f64 = table_rows.iter().sum();
    if rows > 0.0 {
        (documents as f64 / rows).min(1.0)
    } else {
        0.0
    }
}

/// Whether the lexical branch of a source whose BM25 column has a `corpus_bm25` index ranks
/// through it, for a corpus of `documents` that is `corpus_share` of its tables' rows, and a
/// window of `window` rows. The index returns the table's ranking, and the executor skips rows
/// outside the corpus: about `window / share` rows are fetched for `window` in the corpus.
/// Scoring the corpus' own candidates instead costs about one row each: below
/// `sqrt(window · table rows)` documents the slice is the cheaper (a share of 0.63% at 1M rows
/// and a window of 40; 2% at 100k).
pub fn ranks_through_index(documents: u64, corpus_share: f64, window: usize) -> bool {
    if corpus_share <= 0.0 {
        // never analysed: nothing known of the table's size
        return true;
    }
    let table = documents as f64 / corpus_share;
    documents as f64 >= (window.max(1) as f64 * table).sqrt()
}

/// Whether a statistics refresh builds a source's champion lists: not for a source whose BM25
/// column has a `corpus_bm25` index when its corpus ranks through the index at every window a
/// search can reach (up to `max_window`: [`ranks_through_index`] holds for every smaller one),
/// since such a search never reads them. A corpus whose tables were never analysed gets them
/// (its share of the tables is unknown). A search with the index turned off finds the common
/// keys of a source without lists through its GIN index: the same answer, more rows scored.
/// `share` is the corpus' share of the rows the index ranks ([`crate::model::Source::index_share`]).
pub fn wants_champion_lists(tsv_index: bool, documents: u64, share: f64, max_window: usize) -> bool {
    !(tsv_index && share > 0.0 && ranks_through_index(documents, share, max_window))
}

/// The first page of an index scan of the lexical branch: enough rows of the table's ranking
/// that `window` of them are in a corpus that is `corpus_share` of the table unless the
/// corpus is three standard deviations short of its share among them (the rows taken as
/// independent draws), plus 8. A page that falls short makes the scan rank a four times
/// larger one from the start, so the first is sized for the unlucky case, not the mean.
pub fn index_page(window: usize, corpus_share: f64) -> i32 {
    let s = if corpus_share > 0.0 { corpus_share.min(1.0) } else { 1.0 };
    let w = window.max(1) as f64;
    // the least n with n·s − 3·√(n·s·(1 − s)) ≥ w, solved for √n
    let z = 3.0 * (s * (1.0 - s)).sqrt();
    let root = (z + (z * z + 4.0 * s * w).sqrt()) / (2.0 * s);
    ((root * root - 1e-9).ceil() as i64 + 8).clamp(1, 1 << 16) as i32
}

/// How a BM25 subplan of `plan` checks the corpus predicate. `corpus_share` is the corpus'
/// share of the source tables' rows and `documents` its searchable items; `filtered` says
/// whether the caller added filters (their selectivity is unknown, so then only plans with
/// champion lists are checked after ranking, and the planner keeps its choice otherwise).
pub fn scope_check(plan: &CandidatePlan, corpus_share: f64, documents: u64, filtered: bool) -> ScopeCheck {
    // Champion-list candidates are the corpus' own items (at its last statistics refresh), and
    // most of the plan's: its keys found through the index are either all below the budget
    // (an all-common plan) or in fewer than k documents (see candidate_plan).
    if !plan.champions.is_empty() || (!filtered && corpus_share >= SCOPE_AFTER_RANKING_MIN_SHARE) {
        ScopeCheck::AfterRanking
    } else if !filtered && corpus_share > 0.0 && (plan.found as f64 / corpus_share) < documents as f64 {
        ScopeCheck::JoinedAfterIndex
    } else {
        ScopeCheck::Joined
    }
}

/// About what scoring one GIN match costs (detoasting its tsvector and `_bm25_score`), and what
/// joining one parent of the corpus costs when the candidates are joined before scoring (the
/// hash of the corpus' parents: 3–4 ms at 8,000), in µs (docs/lexical-speed.md).
pub const SCORE_US_PER_MATCH: f64 = 2.0;
pub const JOIN_US_PER_PARENT: f64 = 0.45;

/// [`scope_check`], with the corpus' parents counted (`corpus_parents`, the planner's estimate;
/// None without a parent table): a form that joins before scoring reads every parent of the
/// corpus, so when that costs more than scoring the other corpora's matches too, the predicate
/// is checked after ranking instead. At 100k chunks a corpus of 47.5% of the parents (4,750)
/// is joined; at 1M its 47,500 parents would cost about 21 ms, against about 4.4 ms for
/// scoring the other corpus' share of a 2,000-candidate budget.
pub fn scope_check_costed(
    plan: &CandidatePlan,
    corpus_share: f64,
    documents: u64,
    filtered: bool,
    corpus_parents: Option<f64>,
) -> ScopeCheck {
    let base = scope_check(plan, corpus_share, documents, filtered);
    match (base, corpus_parents) {
        (ScopeCheck::AfterRanking, _) | (_, None) => base,
        _ if filtered || corpus_share <= 0.0 => base,
        (_, Some(parents)) => {
            let other_matches = plan.found as f64 * (1.0 / corpus_share.min(1.0) - 1.0);
            if other_matches * SCORE_US_PER_MATCH < parents.max(0.0) * JOIN_US_PER_PARENT {
                ScopeCheck::AfterRanking
            } else {
                base
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn champion_lists_are_built_unless_every_window_ranks_through_the_index() {
        // a whole table of 100,000 rows: every window up to 10,000 goes through its index
        assert!(!wants_champion_lists(true, 100_000, corpus_share(100_000, &[100_000.0]), 10_000));
        assert!(wants_champion_lists(false, 100_000, corpus_share(100_000, &[100_000.0]), 10_000), "no index");
        // a 5% slice: its default window ranks through the index, a wider one scores candidates
        assert!(ranks_through_index(5_000, 0.05, 40));
        assert!(wants_champion_lists(true, 5_000, corpus_share(5_000, &[100_000.0]), 10_000));
        assert!(!wants_champion_lists(true, 5_000, corpus_share(5_000, &[100_000.0]), 250));
        // the same slice under an index that holds its isolation ranks as a table of its own
        assert!(!ranks_through_index(5_000, 0.05, 1_000) && ranks_through_index(5_000, 1.0, 1_000));
        assert!(!wants_champion_lists(true, 5_000, 1.0, 5_000));
        // two sources' tables; a table never analysed
        assert!(!wants_champion_lists(true, 90_000, corpus_share(90_000, &[50_000.0, 50_000.0]), 10_000));
        assert!(wants_champion_lists(true, 90_000, corpus_share(90_000, &[50_000.0, -1.0]), 10_000));
        assert!(wants_champion_lists(true, 0, corpus_share(0, &[0.0]), 10_000));
    }

    #[test]
    fn an_indexed_corpus_ranks_through_the_index_unless_its_slice_is_tiny() {
        // half of a table of 200,000 rows; 1% of 1M rows; 1% and 0.1% of 200,000 rows
        assert!(ranks_through_index(100_000, 0.5, 40));
        assert!(ranks_through_index(10_000, 0.01, 40));
        assert!(!ranks_through_index(2_000, 0.01, 40));
        assert!(!ranks_through_index(200, 0.001, 40));
        assert!(ranks_through_index(10, 0.0, 40), "a table never analysed");
        assert_eq!(index_page(40, 0.0), 48);
        assert_eq!(index_page(40, 1.0), 48);
        assert_eq!(index_page(10_000, 0.0001), 1 << 16);
        // a 5% corpus: 808 rows hold 40 of it on average, and fewer for about half the queries
        let page = index_page(40, 0.05);
        assert!((1200..1400).contains(&page), "{page}");
        // the page holds `window` corpus rows three standard deviations below the mean
        for (w, s) in [(40usize, 0.5f64), (40, 0.05), (400, 0.2), (10, 0.01)] {
            let n = f64::from(index_page(w, s) - 8);
            assert!(n * s - 3.0 * (n * s * (1.0 - s)).sqrt() >= w as f64 - 1e-6, "{w} {s}");
            let m = n - 2.0;
            assert!(m * s - 3.0 * (m * s * (1.0 - s)).sqrt() < w as f64, "{w} {s}: not the least");
        }
    }

    #[test]
    fn scope_is_checked_after_ranking_for_champion_items_and_large_unfiltered_corpora() {
        let keys: Vec<QueryKey> =
            ["rare", "common"].iter().map(|k| QueryKey { key: k.to_string(), weight: 1.0 }).collect();
        let df = |k: &str| if k == "rare" { 10 } else { 50_000 };
        let mixed = candidate_plan(&keys, df, 100_000, 2000, 10).unwrap();
        let common = candidate_plan(&keys[1..], df, 100_000, 2000, 10).unwrap();
        assert!(mixed.tsquery.is_some() && common.tsquery.is_none());
        assert_eq!(mixed.found, 10);
        assert_eq!(scope_check(&mixed, 0.8, 80_000, false), ScopeCheck::AfterRanking);
        // 10 documents of the corpus: about 50 of the table, against 20,000 items of the corpus
        assert_eq!(scope_check(&mixed, 0.2, 20_000, false), ScopeCheck::JoinedAfterIndex);
        assert_eq!(scope_check(&mixed, 0.001, 5_000, false), ScopeCheck::Joined, "10,000 matches for 5,000 items");
        assert_eq!(scope_check(&mixed, 0.0, 5_000, false), ScopeCheck::Joined, "share unknown");
        assert_eq!(scope_check(&mixed, 0.8, 80_000, true), ScopeCheck::Joined, "filters of unknown selectivity");
        for (share, filtered) in [(0.0, false), (0.2, true), (1.0, true)] {
            assert_eq!(scope_check(&common, share, 1000, filtered), ScopeCheck::AfterRanking);
        }
        assert_eq!(corpus_share(800, &[1000.0]), 0.8);
        // a rare key in 10 documents cannot give 20 rows: the common key's list helps
        let short = candidate_plan(&keys, df, 100_000, 500, 20).unwrap();
        assert_eq!((short.champions.clone(), short.champion_prefix), (vec!["common".to_string()], 490));
        let long = candidate_plan(&keys, df, 100_000, 2000, 20).unwrap();
        assert_eq!(long.champion_prefix, CHAMPION_LIST_LEN, "at most a whole list");
        assert_eq!(short.tsquery, mixed.tsquery, "the rare key still finds its documents");
        assert!(mixed.champions.is_empty() && mixed.champion_prefix == 0, "10 documents can give 10 rows");
        assert_eq!(candidate_plan(&keys[1..], df, 100_000, 2000, 20).unwrap(), common);
        for (share, filtered) in [(0.0, false), (0.2, true)] {
            assert_eq!(scope_check(&short, share, 1000, filtered), ScopeCheck::AfterRanking);
        }
        let unlisted = candidate_plan(&keys, |k: &str| if k == "rare" { 10 } else { 900 }, 100_000, 100, 20).unwrap();
        assert!(unlisted.champions.is_empty(), "no list below CHAMPION_LIST_LEN documents");
        assert_eq!(corpus_share(800, &[600.0, 400.0]), 0.8);
        assert_eq!(corpus_share(800, &[500.0]), 1.0, "statistics newer than reltuples");
        assert_eq!(corpus_share(800, &[-1.0, 5000.0]), 0.0, "a table never analysed: unknown");
        assert_eq!(corpus_share(0, &[0.0]), 0.0);
    }

    #[test]
    fn many_corpus_parents_make_checking_after_ranking_cheaper() {
        let keys: Vec<QueryKey> =
            ["rare", "common"].iter().map(|k| QueryKey { key: k.to_string(), weight: 1.0 }).collect();
        let df = |k: &str| if k == "rare" { 1500 } else { 50_000 };
        let plan = candidate_plan(&keys, df, 100_000, 2000, 10).unwrap();
        assert_eq!(plan.found, 1500);
        // 47.5% of the parents: 4,750 at 100k (joined), 47,500 at 1M (after ranking)
        let base = scope_check(&plan, 0.475, 47_500, false);
        assert_ne!(base, ScopeCheck::AfterRanking);
        assert_eq!(scope_check_costed(&plan, 0.475, 47_500, false, Some(4_750.0)), base);
        assert_eq!(scope_check_costed(&plan, 0.475, 475_000, false, Some(47_500.0)), ScopeCheck::AfterRanking);
        // unknown parents, filters or share: the rule without costs
        assert_eq!(scope_check_costed(&plan, 0.475, 475_000, false, None), base);
        assert_eq!(scope_check_costed(&plan, 0.475, 475_000, true, Some(47_500.0)), ScopeCheck::Joined);
        assert_eq!(scope_check_costed(&plan, 0.0, 475_000, false, Some(47_500.0)), ScopeCheck::Joined);
        // a tiny corpus: the other corpora's matches are many, its parents few
        assert_eq!(scope_check_costed(&plan, 0.01, 1_000, false, Some(100.0)), scope_check(&plan, 0.01, 1_000, false));
    }
    use crate::tsvector::tests::encode;

    #[test]
    fn document_literal_marks_extra_keys() {
        let lit = document_tsvector("the cat and the cat", Language::Simple);
        assert_eq!(lit, "'and':3 'cat':2,5 'the':1,4");
        let he = document_tsvector("בעוגיות", Language::Hebrew);
        assert!(he.contains(":1C"), "{he}");
        assert!(he.contains(":1 ") || he.ends_with(":1"), "{he}");
    }

    #[test]
    fn huge_and_weird_documents_stay_within_tsvector_limits() {
        let many = "word ".repeat(100_000);
        let lit = document_tsvector(&many, Language::English);
        assert!(lit.matches(',').count() < MAX_POSITIONS_PER_KEY);
        let distinct: String = (0..200_000).map(|i| format!("w{i} ")).collect();
        let lit = document_tsvector(&distinct, Language::Simple);
        assert!(lit.len() < 2 * MAX_LEXEME_BYTES + 400_000);
        let odd = document_tsvector("it's a \\back'slash\\ \u{202b}שָׁלוֹם\u{202c} 😀", Language::Hebrew);
        assert!(!odd.is_empty());
    }

    #[test]
    fn scores_match_the_bm25_module() {
        // doc: a a b (+ extra key x at position 1, not counted in the length)
        let data = encode(&[("a", &[(1, 0), (2, 0)]), ("b", &[(3, 0)]), ("x", &[(1, 1)])]);
        let doc = TsVector::parse(&data).unwrap();
        let p = Bm25Params::default();
        let keys = vec![
            ScoredKey { key: "a".into(), weight_idf: 2.0 },
            ScoredKey { key: "x".into(), weight_idf: 0.5 },
            ScoredKey { key: "zz".into(), weight_idf: 9.0 },
        ];
        let want = 2.0 * bm25::tf_norm(2.0, 3.0, 4.0, p) + 0.5 * bm25::tf_norm(1.0, 3.0, 4.0, p);
        assert!((score_tsvector(&doc, &keys, 4.0, p) - want).abs() < 1e-12);
    }

    #[test]
    fn common_keys_do_not_find_candidates() {
        let keys = vec![QueryKey { key: "the".into(), weight: 1.0 }, QueryKey { key: "zebra".into(), weight: 1.0 }];
        let df = |k: &str| if k == "the" { 900 } else { 3 };
        let plan = candidate_plan(&keys, df, 1000, 100, 10).unwrap();
        assert_eq!(plan.tsquery.as_deref(), Some("'zebra'"));
        assert_eq!(plan.common, vec!["the"]);
        assert!(plan.champions.is_empty());
        assert!(plan.pruned);
        assert!(plan.scored[0].weight_idf < plan.scored[1].weight_idf);
        // a small corpus fits the budget: every key finds candidates (exact BM25)
        let small = candidate_plan(&keys, df, 1000, 2000, 10).unwrap();
        assert_eq!(small.tsquery.as_deref(), Some("'zebra' | 'the'"));
        assert!(small.common.is_empty() && !small.pruned);
        assert!(candidate_plan(&[], df, 1000, 100, 10).is_none());
    }

    #[test]
    fn preselection_keeps_every_item_that_can_reach_the_top() {
        let head = |w: f64, items: &[(&str, f64)]| ChampionHead {
            weight_idf: w,
            items: items.iter().map(|(i, _)| i.to_string()).collect(),
            impacts: items.iter().map(|(_, x)| *x).collect(),
        };
        let heads =
            vec![head(1.0, &[("a", 2.0), ("b", 1.8), ("c", 1.0)]), head(1.0, &[("b", 2.0), ("d", 1.9), ("e", 1.1)])];
        // lower: a 2.0, b 3.8, c 1.0, d 1.9, e 1.1; upper adds the missing head's cut (1.0 / 1.1)
        // keep 2: threshold 2.0 (a); c's upper 2.1 reaches it, e's upper 2.1 too
        assert_eq!(
            preselect(&heads, 0.0, 2, 100),
            vec!["b", "a", "d", "e", "c"],
            "ties on the upper bound: better lower first"
        );
        // keep 1: threshold 3.8: only b can reach it
        assert_eq!(preselect(&heads, 0.0, 1, 100), vec!["b"]);
        // keys without lists can add up to `unlisted` to anyone
        assert_eq!(preselect(&heads, 1.0, 1, 100).len(), 3);
        assert_eq!(preselect(&heads, 0.0, 2, 3), vec!["b", "a", "d"], "capped, best upper bound first");
        assert!(preselect(&[], 0.0, 10, 100).is_empty());
        // the exact top-k (by full scores) is always kept: brute force over random heads
        let mut seed = 7u64;
        let mut rnd = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as f64 / (1u64 << 31) as f64
        };
        for _ in 0..200 {
            let n_items = 30;
            let impact: Vec<Vec<f64>> = (0..3).map(|_| (0..n_items).map(|_| rnd() * 2.0).collect()).collect();
            let weights: Vec<f64> = (0..3).map(|_| 0.2 + rnd()).collect();
            let heads: Vec<ChampionHead> = (0..3)
                .map(|k| {
                    let mut order: Vec<usize> = (0..n_items).collect();
                    order.sort_by(|a, b| impact[k][*b].total_cmp(&impact[k][*a]));
                    order.truncate(8);
                    ChampionHead {
                        weight_idf: weights[k],
                        items: order.iter().map(|i| format!("i{i}")).collect(),
                        impacts: order.iter().map(|i| impact[k][*i]).collect(),
                    }
                })
                .collect();
            let in_heads: std::collections::BTreeSet<String> = heads.iter().flat_map(|h| h.items.clone()).collect();
            let score = |i: usize| (0..3).map(|k| weights[k] * impact[k][i]).sum::<f64>();
            let mut best: Vec<usize> = (0..n_items).filter(|i| in_heads.contains(&format!("i{i}"))).collect();
            best.sort_by(|a, b| score(*b).total_cmp(&score(*a)));
            let kept = preselect(&heads, 0.0, 3, 1000);
            for i in best.iter().take(3) {
                assert!(kept.contains(&format!("i{i}")), "i{i} dropped: {kept:?}");
            }
        }
    }

    #[test]
    fn the_ts_rank_cd_scorer_ranks_by_the_first_words_only() {
        assert_eq!(ts_rank_cd_text("a b  c"), "a b  c");
        let long: String = (0..4000).map(|i| format!("w{i}\u{a0}x ")).collect();
        let kept = ts_rank_cd_text(&long);
        assert_eq!(kept.split_whitespace().count(), TS_RANK_CD_MAX_WORDS);
        assert!(long.starts_with(kept) && kept.ends_with("w31\u{a0}x"), "{}", &kept[kept.len() - 20..]);
        let exact: String = (0..TS_RANK_CD_MAX_WORDS).map(|i| format!(" שלום{i}")).collect();
        assert_eq!(ts_rank_cd_text(&exact), exact);
    }

    /// Four query keys, "a" commonest, "d" below the champion list length ([`abcd_df`]).
    fn abcd() -> Vec<QueryKey> {
        ["a", "b", "c", "d"].iter().map(|k| QueryKey { key: k.to_string(), weight: 1.0 }).collect()
    }

    fn abcd_df(k: &str) -> u64 {
        match k {
            "a" => 50_000,
            "b" => 20_000,
            "c" => 3_000,
            _ => 700,
        }
    }

    #[test]
    fn keys_without_a_readable_list_go_through_the_index() {
        let (keys, df) = (abcd(), abcd_df);
        let mut plan = candidate_plan(&keys, df, 100_000, 400, 10).unwrap();
        let found = plan.found;
        through_index(&mut plan, &["b".to_string(), "x".to_string()], df);
        assert_eq!(plan.champions, vec!["c", "a"]);
        assert_eq!(plan.tsquery.as_deref(), Some("'d' | 'b'"));
        assert_eq!(plan.found, found + 20_000);
        assert_eq!(plan.champion_prefix, 100, "the other lists keep their heads");
        through_index(&mut plan, &["a".to_string(), "c".to_string()], df);
        assert!(plan.champions.is_empty());
        assert_eq!((plan.tsquery.as_deref(), plan.champion_prefix), (Some("'d' | 'b' | 'c' | 'a'"), 0));
        assert!(!plan.pruned, "every key finds candidates now");
        let before = plan.clone();
        through_index(&mut plan, &["a".to_string()], df);
        assert_eq!(plan, before, "nothing left to move");
        // a plan of listed keys only gets its first tsquery
        let mut only = candidate_plan(&keys[..2], df, 100_000, 400, 10).unwrap();
        assert!(only.tsquery.is_none());
        through_index(&mut only, &["a".to_string()], df);
        assert_eq!((only.tsquery.as_deref(), only.champions.clone()), (Some("'a'"), vec!["b".to_string()]));
    }

    #[test]
    fn all_common_queries_take_champion_heads() {
        // every key above the budget; "d" below the champion list length
        let (keys, df) = (abcd(), abcd_df);
        let plan = candidate_plan(&keys, df, 100_000, 400, 10).unwrap();
        assert_eq!(plan.champions, vec!["c", "b", "a"], "rarest first");
        assert_eq!(plan.champion_prefix, 100, "budget / keys");
        assert_eq!(plan.tsquery.as_deref(), Some("'d'"), "no list below the list length: the index");
        assert!(plan.common.is_empty() && plan.pruned);
        assert_eq!(plan.scored.len(), 4);
        // a large budget never reads beyond a list
        let wide = candidate_plan(&keys[..3], df, 100_000, 2_500, 10).unwrap();
        assert_eq!(wide.champion_prefix, 833);
        assert_eq!(wide.tsquery, None);
        let huge = candidate_plan(&keys[..1], df, 100_000, 20_000, 10).unwrap();
        assert_eq!((huge.champion_prefix, huge.champions.len()), (CHAMPION_LIST_LEN, 1));
        // a budget below the list length: keys in between use the index
        let low = candidate_plan(&keys[3..], df, 100_000, 10, 10).unwrap();
        assert_eq!((low.tsquery.as_deref(), low.champions.len(), low.champion_prefix), (Some("'d'"), 0, 0));
        // the candidates found are bounded whatever the frequencies
        for budget in [1, 10, 400, 2000, 5000, 1_000_000] {
            let p = candidate_plan(&keys, df, 100_000, budget, 10).unwrap();
            let via_index: u64 = keys
                .iter()
                .filter(|k| p.tsquery.as_deref().is_some_and(|q| q.contains(&quote_lexeme(&k.key))))
                .map(|k| df(&k.key))
                .sum();
            let via_lists = p.champions.len() as u64 * p.champion_prefix;
            assert!(via_index + via_lists <= budget.max(keys.len() as u64 * CHAMPION_LIST_LEN), "{budget}: {p:?}");
        }
    }
}
