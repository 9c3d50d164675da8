//! SQL functions of the lexical branch: the analyser (document and query side), BM25 scoring of
//! a tsvector, and the per-corpus statistics. The math is in `pg_corpus_core::{analysis, bm25,
//! lexical, tsvector}`.

use pg_corpus_core::analysis::Language;
use pg_corpus_core::bm25::Bm25Params;
use pg_corpus_core::lexical::{self, ScoredKey};
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

/// BM25 of a document tsvector: `keys` with their `weight · idf` (the search computes them from
/// the corpus statistics), the corpus' mean document length, k1 and b.
#[pg_extern(immutable, strict, parallel_safe)]
fn _bm25_score(document: TsVectorArg, keys: Vec<String>, weights: Vec<f64>, avg_doc_len: f64, k1: f64, b: f64) -> f64 {
    let Some(doc) = TsVector::parse(&document.0) else { return 0.0 };
    let scored: Vec<ScoredKey> =
        keys.into_iter().zip(weights).map(|(key, weight_idf)| ScoredKey { key, weight_idf }).collect();
    lexical::score_tsvector(&doc, &scored, avg_doc_len, Bm25Params { k1, b })
}

/// A document's BM25 length: its positions labelled D (surface tokens).
#[pg_extern(immutable, strict, parallel_safe)]
fn _bm25_length(document: TsVectorArg) -> i64 {
    TsVector::parse(&document.0).map_or(0, |d| d.surface_length() as i64)
}

/// Recompute the lexical statistics (document frequencies, document count, total length) of one
/// corpus or of all, over each corpus' own searchable items.
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_refresh_lexical_stats(
    corpus: default!(Option<&str>, "NULL"),
    only_stale: default!(bool, false),
    stale_fraction: default!(f64, 0.1),
) -> TableIterator<'static, (name!(corpus, String), name!(documents, i64), name!(terms, i64), name!(refreshed, bool))> {
    let rows = spi::pinned_search_path(|| -> Result<Vec<(String, i64, i64, bool)>, CoreError> {
        if !(0.0..=1.0).contains(&stale_fraction) {
            return Err(CoreError::new(
                SqlState::InvalidParameterValue,
                format!("stale_fraction must be between 0 and 1, got {stale_fraction}"),
                "It is the share of the corpus' documents changed since the last refresh that makes statistics stale.",
            ));
        }
        let mut out = Vec::new();
        for name in spi::load_corpus_names(corpus)? {
            let c = spi::load_corpus(&name)?;
            let tables: Vec<i64> = c
                .sources
                .iter()
                .flat_map(|s| std::iter::once(s.item.oid).chain(s.parent.as_ref().map(|p| p.oid)))
                .collect();
            let state = spi::lexical_state(&name, &tables)?;
            if only_stale && !state.is_stale(stale_fraction) {
                out.push((name, state.documents, state.terms, false));
                continue;
            }
            if c.sources.is_empty() {
                spi::clear_lexical_stats(&name)?;
                out.push((name, 0, 0, true));
                continue;
            }
            let (sql, params) = plan::lexical_stats_sql(&c);
            let bm25 = Bm25Params::new(gucs::BM25_K1.get(), gucs::BM25_B.get())?;
            let champions: Vec<(String, String, Vec<pg_corpus_core::sql::Param>)> = (0..c.sources.len())
                .map(|idx| {
                    let (sql, params) = plan::lexical_champions_sql(
                        &c,
                        idx,
                        lexical::CHAMPION_LIST_LEN,
                        lexical::CHAMPION_LIST_LEN,
                        bm25,
                    );
                    (c.sources[idx].name.clone(), sql, params)
                })
                .collect();
            let (documents, terms) = spi::refresh_lexical_stats(&name, &sql, &params, state.changes_now, &champions)?;
            out.push((name, documents, terms, true));
        }
        Ok(out)
    })
    .or_raise();
    TableIterator::new(rows)
}
