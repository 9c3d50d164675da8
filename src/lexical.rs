//! SQL functions of the lexical branch: the analyser (document and query side), BM25 scoring of
//! a tsvector, and the per-corpus statistics. The math is in `pg_corpus_core::{analysis, bm25,
//! lexical, tsvector}`.

use pg_corpus_core::bm25::Bm25Params;
use pg_corpus_core::lexical::{self, ScoredKey};
use pg_corpus_core::model::Language;
use pg_corpus_core::tsvector::TsVector;
use pg_corpus_core::{plan, CoreError, SqlState};
use pgrx::prelude::*;

use crate::error::OrRaise;
use crate::gucs;
use crate::spi;
use crate::vector::TsVectorArg;

/// The tsvector input text of a document's index terms (wrapped by corpus.bm25_document).
#[pg_extern(immutable, strict, parallel_safe)]
fn _bm25_document_text(document: &str, language: &str) -> String {
    let lang = Language::parse(language).or_raise();
    lexical::document_tsvector(document, lang)
}

/// The query-side analysis: the keys a query looks up, with their BM25 weights and counts.
#[pg_extern(immutable, strict, parallel_safe)]
fn bm25_query(
    query: &str,
    language: &str,
) -> TableIterator<'static, (name!(key, String), name!(weight, f64), name!(count, i32))> {
    let lang = Language::parse(language).or_raise();
    let terms = pg_corpus_core::analysis::query_terms(query, lang);
    TableIterator::new(terms.into_iter().map(|t| (t.key, t.weight, t.count as i32)))
}

/// The passage of `document` (at most `max_chars` characters) holding the most words of
/// `query`, each wrapped in `start_mark` / `stop_mark`, analysed as `language` (the BM25
/// column's analyser, so that the words marked are the words that matched).
#[pg_extern(immutable, strict, parallel_safe)]
fn bm25_snippet(
    document: &str,
    query: &str,
    language: &str,
    max_chars: default!(i32, 240),
    start_mark: default!(&str, "'<b>'"),
    stop_mark: default!(&str, "'</b>'"),
) -> String {
    let lang = Language::parse(language).or_raise();
    let opts = pg_corpus_core::snippet::SnippetOptions::new(max_chars, start_mark, stop_mark).or_raise();
    pg_corpus_core::snippet::snippet(&pg_corpus_core::analysis::Analyzer::new(lang), document, query, &opts)
}

/// BM25 of a document tsvector: `keys` with their `weight · idf` (the search computes them from
/// the corpus statistics), the corpus' mean document length, k1 and b.
#[pg_extern(immutable, strict, parallel_safe)]
fn _bm25_score(
    document: TsVectorArg,
    keys: Array<'_, &str>,
    weights: Array<'_, f64>,
    avg_doc_len: f64,
    k1: f64,
    b: f64,
    fcinfo: pg_sys::FunctionCallInfo,
) -> f64 {
    let Some(doc) = TsVector::parse(document.bytes()) else { return 0.0 };
    let p = Bm25Params { k1, b };
    // SAFETY: fcinfo is this call's, with the three arguments above (strict: none is NULL).
    match unsafe { cached_score_query(fcinfo) } {
        Some(query) => lexical::score_tsvector(&doc, &query.keys, avg_doc_len, p),
        None => {
            let query = ScoreQuery::new(&keys, &weights);
            // SAFETY: as above; the cache takes the query only when the call has a call site.
            let query = unsafe { cache_score_query(fcinfo, query) };
            lexical::score_tsvector(&doc, &query.keys, avg_doc_len, p)
        }
    }
}

/// The query side of `_bm25_score` (its keys with their weights), kept for the call site in
/// `fn_extra` so that the arrays are not converted again for every scored row. When the call
/// site's keys and weights are constants or bind parameters (`get_fn_expr_arg_stable`: the
/// search's subplans bind them as $n), it is used as it is; otherwise only while their
/// argument bytes equal the ones it was built from (pg_jsonschema's call-site cache does the
/// same).
#[derive(Clone)]
struct ScoreQuery {
    keys_raw: Vec<u8>,
    weights_raw: Vec<u8>,
    stable: bool,
    keys: Vec<ScoredKey>,
}

impl ScoreQuery {
    /// NULL keys are skipped and NULL weights count as 0; extra elements of the longer array
    /// are ignored. The argument bytes are filled in when the query is cached.
    fn new(keys: &Array<'_, &str>, weights: &Array<'_, f64>) -> ScoreQuery {
        let keys = keys
            .iter()
            .zip(weights.iter())
            .filter_map(|(k, w)| k.map(|k| ScoredKey { key: k.to_string(), weight_idf: w.unwrap_or(0.0) }))
            .collect();
        ScoreQuery { keys_raw: Vec::new(), weights_raw: Vec::new(), stable: false, keys }
    }
}

/// The bytes of a varlena argument, detoasted (no copy when it is not toasted).
///
/// # Safety
/// `d` must be a non-NULL varlena datum.
pub(crate) unsafe fn varlena_bytes<'a>(d: pg_sys::Datum) -> &'a [u8] {
    unsafe { detoasted_bytes(pg_sys::pg_detoast_datum_packed(d.cast_mut_ptr())) }
}

/// The data of a detoasted varlena (possibly with a short header).
///
/// # Safety
/// `ptr` must be a detoasted varlena that outlives the slice.
pub(crate) unsafe fn detoasted_bytes<'a>(ptr: *mut pg_sys::varlena) -> &'a [u8] {
    unsafe {
        std::slice::from_raw_parts(pgrx::varlena::vardata_any(ptr) as *const u8, pgrx::varlena::varsize_any_exhdr(ptr))
    }
}

/// The call site's cached query, when its arguments are the ones it was built from.
///
/// # Safety
/// `fcinfo` must be a `_bm25_score` call's, its arguments 1 and 2 non-NULL arrays.
unsafe fn cached_score_query<'a>(fcinfo: pg_sys::FunctionCallInfo) -> Option<&'a ScoreQuery> {
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if flinfo.is_null() || (*flinfo).fn_extra.is_null() {
            return None;
        }
        let cached = &*((*flinfo).fn_extra as *const ScoreQuery);
        if cached.stable {
            return Some(cached);
        }
        let args = (*fcinfo).args.as_slice(3);
        (varlena_bytes(args[1].value) == cached.keys_raw.as_slice()
            && varlena_bytes(args[2].value) == cached.weights_raw.as_slice())
        .then_some(cached)
    }
}

/// Keep `query` (built from this call's arguments) as the call site's cached query, replacing
/// an older one; without a call site it is only returned.
///
/// # Safety
/// As [`cached_score_query`].
unsafe fn cache_score_query<'a>(
    fcinfo: pg_sys::FunctionCallInfo,
    mut query: ScoreQuery,
) -> std::borrow::Cow<'a, ScoreQuery> {
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if flinfo.is_null() {
            return std::borrow::Cow::Owned(query);
        }
        let args = (*fcinfo).args.as_slice(3);
        query.stable = pg_sys::get_fn_expr_arg_stable(flinfo, 1) && pg_sys::get_fn_expr_arg_stable(flinfo, 2);
        if !query.stable {
            query.keys_raw = varlena_bytes(args[1].value).to_vec();
            query.weights_raw = varlena_bytes(args[2].value).to_vec();
        }
        let slot = (*flinfo).fn_extra as *mut ScoreQuery;
        if slot.is_null() {
            // dropped with the call site's memory context (fn_mcxt), which outlives fn_extra's uses
            let kept = pgrx::PgMemoryContexts::For((*flinfo).fn_mcxt).leak_and_drop_on_delete(query);
            (*flinfo).fn_extra = kept.cast();
            std::borrow::Cow::Borrowed(&*kept)
        } else {
            *slot = query;
            std::borrow::Cow::Borrowed(&*slot)
        }
    }
}

/// A document's BM25 length: its positions labelled D (surface tokens).
#[pg_extern(immutable, strict, parallel_safe)]
fn _bm25_length(document: TsVectorArg) -> i64 {
    TsVector::parse(document.bytes()).map_or(0, |d| d.surface_length() as i64)
}

/// Recompute the lexical statistics (document frequencies, document count, total length) of one
/// corpus or of all, over each corpus' own searchable items.
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_refresh_lexical_stats(
    corpus: default!(Option<&str>, "NULL"),
    only_stale: default!(Option<bool>, false),
    stale_fraction: default!(Option<f64>, 0.1),
) -> TableIterator<'static, (name!(corpus, String), name!(documents, i64), name!(terms, i64), name!(refreshed, bool))> {
    const F: &str = "corpus_refresh_lexical_stats";
    let rows = spi::pinned_search_path(|| spi::with_table_memo(|| -> Result<Vec<(String, i64, i64, bool)>, CoreError> {
        let only_stale = crate::search::required(only_stale, F, "only_stale")?;
        let stale_fraction = crate::search::required(stale_fraction, F, "stale_fraction")?;
        // SAFETY: reads the recovery state of this server.
        if unsafe { pgrx::pg_sys::RecoveryInProgress() } {
            return Err(CoreError::new(
                SqlState::ReadOnlySqlTransaction,
                "cannot refresh lexical statistics on a server in recovery (a hot standby)",
                "Refresh them on the primary: the statistics are ordinary tables, and the standby receives them by replication.",
            ));
        }
        if !(0.0..=1.0).contains(&stale_fraction) {
            return Err(CoreError::new(
                SqlState::InvalidParameterValue,
                format!("stale_fraction must be between 0 and 1, got {stale_fraction}"),
                "It is the share of the corpus' documents changed since the last refresh that makes statistics stale.",
            ));
        }
        let mut out = Vec::new();
        let progress = crate::progress::Progress::start(F, corpus);
        // Every corpus: each in a subtransaction of its own (its error a WARNING, the others
        // kept), through the catalog's function when it has one.
        if corpus.is_none() && spi::has_function("corpus._refresh_lexical_stats_one(text,boolean,double precision)") {
            let names = spi::catalog::load_corpus_names(None)?;
            for (i, name) in names.iter().enumerate() {
                progress.phase(&format!("corpus {name}"), Some(i as i64), Some(names.len() as i64));
                let (documents, terms, refreshed) = spi::stats::refresh_one(name, only_stale, stale_fraction)?;
                out.push((name.clone(), documents.unwrap_or(0), terms.unwrap_or(0), refreshed.unwrap_or(false)));
            }
            return Ok(out);
        }
        for name in spi::catalog::load_corpus_names(corpus)? {
            let c = spi::catalog::load_corpus(&name)?;
            let tables: Vec<i64> = c
                .sources
                .iter()
                .flat_map(|s| std::iter::once(s.item.oid).chain(s.parent.as_ref().map(|p| p.oid)))
                .collect();
            let state = spi::stats::lexical_state(&name, &tables)?;
            if only_stale && !state.is_stale(stale_fraction) {
                out.push((name, state.documents, state.terms, false));
                continue;
            }
            if c.sources.is_empty() {
                spi::stats::clear_lexical_stats(&name)?;
                out.push((name, 0, 0, true));
                continue;
            }
            let bm25 = Bm25Params::new(gucs::BM25_K1.get(), gucs::BM25_B.get())?;
            // (a catalog of an earlier release, until ALTER EXTENSION UPDATE, has no one-pass builder)
            let one_pass = spi::has_function("corpus._champion_lists(text,text,bigint,bigint,double precision,double precision)");
            let champions = (0..c.sources.len())
                .map(|idx| {
                    let build = if one_pass { plan::lexical_champions_call } else { plan::lexical_champions_sql };
                    let q = build(&c, idx, lexical::CHAMPION_LIST_LEN, lexical::CHAMPION_LIST_LEN, bm25);
                    (c.sources[idx].name.clone(), q)
                })
                .collect();
            let counts = if spi::has_function("corpus._lexical_counts(text)") {
                plan::lexical_counts_call(&c)
            } else {
                plan::lexical_stats_sql(&c)
            };
            let refresh = pg_corpus_core::statistics::refresh(&name, counts, state.changes_now, champions);
            let statements = crate::progress::Progress::start("statistics refresh", Some(&name));
            let (documents, terms) = spi::stats::refresh_lexical_stats(&refresh, &statements)?;
            drop(statements);
            out.push((name, documents, terms, true));
        }
        Ok(out)
    }))
    .or_raise();
    TableIterator::new(rows)
}

/// Inserted + updated + deleted rows of these tables, on a Citus coordinator over every node
/// (what the statistics' staleness is judged by; the coordinator asks the other nodes here).
#[pg_extern(volatile, parallel_unsafe)]
fn _table_changes(tables: Option<Vec<Option<pg_sys::Oid>>>) -> i64 {
    let tables: Vec<i64> = tables.unwrap_or_default().into_iter().flatten().map(|o| i64::from(o.to_u32())).collect();
    spi::pinned_search_path(|| spi::stats::table_changes(&tables)).or_raise()
}

/// The champion lists of one source of a corpus built in one pass over its searchable items
/// (`plan::lexical_champions_call`; the statistics of the corpus written first): for every key
/// in more than `min_df` documents, the `n` items of highest BM25 term weight, ties broken by
/// item id in the database's collation, as `ORDER BY w DESC, id` would. None for a source
/// that ranks through its `corpus_bm25` index at every window up to `pg_corpus.max_candidates`
/// (`lexical::wants_champion_lists`).
#[pg_extern(volatile, parallel_unsafe)]
fn _champion_lists(
    corpus: &str,
    source: &str,
    min_df: i64,
    n: i64,
    k1: f64,
    b: f64,
) -> TableIterator<'static, (name!(term, String), name!(items, Vec<String>), name!(impacts, Vec<f64>))> {
    let lists = spi::pinned_search_path(|| -> Result<Vec<pg_corpus_core::champions::ChampionList>, CoreError> {
        let c = spi::catalog::load_corpus(corpus)?;
        let Some(idx) = c.sources.iter().position(|s| s.name == source) else {
            return Err(pg_corpus_core::registry::no_source(corpus, source, "See corpus.corpus_list()."));
        };
        let params = Bm25Params::new(k1, b)?;
        let max_window = gucs::MAX_CANDIDATES.get().max(1) as usize;
        spi::stats::champion_lists(&c, idx, u64::try_from(min_df).unwrap_or(0), n.max(1) as usize, params, max_window)
    })
    .or_raise();
    TableIterator::new(lists.into_iter().map(|l| (l.term, l.items, l.impacts)))
}

/// A corpus' lexical statistics counted in one pass over its searchable items
/// (`plan::lexical_counts_call`, which the refresh writes to corpus.lexical_stats and
/// corpus.lexical_totals): (term, df, NULL) per key, then (NULL, documents, total length).
#[pg_extern(volatile, strict, parallel_unsafe)]
fn _lexical_counts(
    corpus: &str,
) -> TableIterator<'static, (name!(term, Option<String>), name!(df, i64), name!(total_len, Option<i64>))> {
    let counts = spi::pinned_search_path(|| -> Result<pg_corpus_core::statistics::Counts, CoreError> {
        spi::stats::lexical_counts(&*spi::catalog::load_corpus(corpus)?)
    })
    .or_raise();
    TableIterator::new(counts.rows())
}
