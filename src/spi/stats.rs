//! Lexical statistics: what a search reads of them, and the refresh that writes them. Every
//! statement is built by the core (`pg_corpus_core::statistics`, `plan::lexical_stats_sql`,
//! `plan::lexical_champions_sql`); this module runs them.

use pg_corpus_core::engine::{ChampionList, ChampionRequest, TermStats};
use pg_corpus_core::health::LexicalFacts;
use pg_corpus_core::statistics::{self, Refresh};
use pg_corpus_core::CoreError;
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;

use super::{datums, spi_failure};

/// Document frequencies of `terms` in a corpus' statistics, with its totals: one round trip.
pub fn term_stats(corpus: &str, terms: &[String]) -> Result<TermStats, CoreError> {
    super::select_saved(
        statistics::TERM_STATS,
        &[DatumWithOid::from(corpus), DatumWithOid::from(terms.to_vec())],
        |table| {
            let mut out = TermStats::default();
            for row in table {
                let n = row.get::<i64>(2)?.unwrap_or(0).max(0) as u64;
                match row.get::<String>(1)? {
                    None => out.documents = n,
                    Some(t) if t.is_empty() => out.total_length = n,
                    Some(t) => {
                        out.df.insert(t, n);
                    }
                }
            }
            Ok(out)
        },
    )
}

/// The heads of champion lists of several sources (those the caller may read: row-level
/// security), in one round trip; one list of lists per request, in order.
pub fn champion_heads(corpus: &str, requests: &[ChampionRequest]) -> Result<Vec<Vec<ChampionList>>, CoreError> {
    let (mut sources, mut terms, mut prefixes, mut owners) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, r) in requests.iter().enumerate() {
        for t in &r.terms {
            sources.push(r.source.clone());
            terms.push(t.clone());
            prefixes.push(r.prefix.min(i32::MAX as u64) as i32);
            owners.push(i as i32);
        }
    }
    let mut out: Vec<Vec<ChampionList>> = vec![Vec::new(); requests.len()];
    super::select_saved(
        statistics::CHAMPION_HEADS,
        &[
            DatumWithOid::from(corpus),
            DatumWithOid::from(sources),
            DatumWithOid::from(terms),
            DatumWithOid::from(prefixes),
            DatumWithOid::from(owners),
        ],
        |table| {
            for row in table {
                let req = row.get::<i32>(1)?.unwrap_or(-1);
                let Some(slot) = usize::try_from(req).ok().and_then(|r| out.get_mut(r)) else { continue };
                slot.push(ChampionList {
                    term: row.get::<String>(2)?.unwrap_or_default(),
                    items: row.get::<Vec<Option<String>>>(3)?.unwrap_or_default().into_iter().flatten().collect(),
                    impacts: row
                        .get::<Vec<Option<f64>>>(4)?
                        .unwrap_or_default()
                        .into_iter()
                        .map(|x| x.unwrap_or(0.0))
                        .collect(),
                });
            }
            Ok(())
        },
    )?;
    Ok(out)
}

/// Whether the current role may read every source of a corpus in full, and so its statistics
/// (`corpus._reads_corpus_in_full`, sql/access.sql).
pub fn reads_corpus_in_full(corpus: &str) -> Result<bool, CoreError> {
    super::select_saved(statistics::READS_IN_FULL, &[DatumWithOid::from(corpus)], |table| {
        Ok(table.first().get_one::<bool>()?.unwrap_or(false))
    })
}

/// Where a corpus' lexical statistics stand (its staleness is the core's rule).
pub fn lexical_state(corpus: &str, tables: &[i64]) -> Result<LexicalFacts, CoreError> {
    let mut tables = tables.to_vec();
    tables.sort_unstable();
    // (the same for every corpus of these tables: read once per whole-database operation)
    let changes = super::table_memo(format!("changes\u{0}{tables:?}"), || {
        let sql = statistics::changes_sql(super::has_function("corpus._table_changes(oid[])"));
        Spi::connect(|client| {
            client.select(sql, Some(1), &[DatumWithOid::from(tables.clone())])?.first().get_one::<i64>()
        })
        .map(|n| serde_json::json!(n.unwrap_or(0)))
        .map_err(spi_failure)
    })?;
    Spi::connect(|client| {
        let row = client.select(statistics::STATE, Some(1), &[DatumWithOid::from(corpus)])?.first();
        let refreshed = row.get::<bool>(1)?.unwrap_or(false);
        Ok(LexicalFacts {
            refreshed,
            documents: row.get::<i64>(2)?.unwrap_or(0),
            terms: row.get::<i64>(3)?.unwrap_or(0),
            total_length: row.get::<i64>(4)?.unwrap_or(0),
            changes_at_refresh: row.get::<i64>(5)?.unwrap_or(0),
            reset_since: refreshed && row.get::<bool>(6)?.unwrap_or(false),
            changes_now: changes.as_i64().unwrap_or(0),
        })
    })
    .map_err(spi_failure)
}

/// Run a statistics refresh (`pg_corpus_core::statistics::refresh`) in order; its totals
/// statement returns (documents, terms).
pub fn refresh_lexical_stats(refresh: &Refresh, progress: &crate::progress::Progress) -> Result<(i64, i64), CoreError> {
    Spi::connect_mut(|client| {
        let mut totals = (None, None);
        let n = refresh.statements.len() as i64;
        for (i, (sql, params)) in refresh.statements.iter().enumerate() {
            progress.phase(refresh.phases.get(i).map_or("refreshing", String::as_str), Some(i as i64), Some(n));
            let table = client.update(sql.as_str(), None, &datums(params))?;
            if i == refresh.totals {
                totals = table.first().get_two::<i64, i64>()?;
            }
        }
        Ok((totals.0.unwrap_or(0), totals.1.unwrap_or(0)))
    })
    .map_err(spi_failure)
}

/// Refresh one corpus' statistics in a subtransaction of its own ([`statistics::REFRESH_ONE`]):
/// (documents, terms, refreshed), all None when it failed (PostgreSQL reported a WARNING).
pub fn refresh_one(
    corpus: &str,
    only_stale: bool,
    stale_fraction: f64,
) -> Result<(Option<i64>, Option<i64>, Option<bool>), CoreError> {
    Spi::connect_mut(|client| {
        let args = [DatumWithOid::from(corpus), DatumWithOid::from(only_stale), DatumWithOid::from(stale_fraction)];
        let table = client.update(statistics::REFRESH_ONE, None, &args)?;
        let row = table.first();
        Ok((row.get::<i64>(1)?, row.get::<i64>(2)?, row.get::<bool>(3)?))
    })
    .map_err(spi_failure)
}

/// Forget a corpus' statistics (it has no source left).
pub fn clear_lexical_stats(corpus: &str) -> Result<(), CoreError> {
    Spi::connect_mut(|client| {
        for (sql, params) in statistics::clear(corpus) {
            client.update(sql.as_str(), None, &datums(&params))?;
        }
        Ok(())
    })
    .map_err(spi_failure)
}

/// Inserted + updated + deleted rows of these tables (pg_stat_all_tables' flushed counters, plus
/// this transaction's own changes, flushed at its commit): what staleness is judged by. A Citus
/// distributed table's rows are on its shards, whose counters are on the nodes holding them: on
/// the coordinator, every node's are added up (each node counts the shards placed on it).
pub fn table_changes(tables: &[i64]) -> Result<i64, CoreError> {
    let args = [DatumWithOid::from(tables.to_vec())];
    let one = |sql: &str| -> Result<i64, CoreError> {
        Spi::connect(|client| client.select(sql, Some(1), &args)?.first().get_one::<i64>())
            .map(Option::unwrap_or_default)
            .map_err(spi_failure)
    };
    let here = one(
        "SELECT coalesce(sum(s.n_tup_ins + s.n_tup_upd + s.n_tup_del
                             + pg_stat_get_xact_tuples_inserted(s.relid)
                             + pg_stat_get_xact_tuples_updated(s.relid)
                             + pg_stat_get_xact_tuples_deleted(s.relid)), 0)::int8
           FROM pg_stat_all_tables s
          WHERE s.relid IN (SELECT r::oid FROM unnest($1::int8[]::oid[]) AS t, corpus._local_relations(t::regclass) AS r)",
    )?;
    // (a reference table's changes are its placement's here; only distributed tables have
    // shards elsewhere, and only they are named to the other nodes)
    let elsewhere = one(
        "SELECT coalesce(sum(a::bigint), 0)::int8
           FROM (SELECT array_agg(t::regclass::text) AS names FROM unnest($1::int8[]::oid[]) AS t
                  WHERE corpus._citus_table_kind(t::regclass) = 'distributed') AS d,
                corpus._citus_on_other_nodes(format('SELECT corpus._table_changes(%L::text[]::regclass[]::oid[])', d.names)) AS a
          WHERE d.names IS NOT NULL AND corpus._citus_coordinator()",
    )?;
    Ok(here + elsewhere)
}

/// Build source `idx`'s champion lists in one pass (`pg_corpus_core::champions`): the corpus'
/// common keys and average length from its statistics, then its searchable items through a
/// cursor, each detoasted BM25 value freed once weighed. None when a search with windows up to
/// `max_window` never reads them (`lexical::wants_champion_lists`).
pub fn champion_lists(
    corpus: &pg_corpus_core::model::Corpus,
    idx: usize,
    min_df: u64,
    n: usize,
    params: pg_corpus_core::bm25::Bm25Params,
    max_window: usize,
) -> Result<Vec<pg_corpus_core::champions::ChampionList>, CoreError> {
    use pg_corpus_core::champions::Builder;
    let collation = pg_sys::DEFAULT_COLLATION_OID;
    let cmp = |a: &str, b: &str| -> std::cmp::Ordering {
        // SAFETY: two valid UTF-8 strings and their lengths; the default collation.
        let r = unsafe {
            pg_sys::varstr_cmp(a.as_ptr().cast(), a.len() as i32, b.as_ptr().cast(), b.len() as i32, collation)
        };
        r.cmp(&0)
    };
    let (sql, args) = pg_corpus_core::plan::lexical_docs_sql(corpus, idx, true);
    let tables: Vec<i64> = corpus.sources.iter().map(|s| s.item.oid).collect();
    let table_rows = super::search::reltuples(&tables)?;
    Spi::connect(|client| {
        let name = DatumWithOid::from(corpus.name.as_str());
        let (documents, avgdl) = client
            .select(
                "SELECT t.documents, greatest(t.total_length::float8 / greatest(t.documents, 1), 1) \
                 FROM corpus.lexical_totals t WHERE t.corpus = $1",
                None,
                &[name],
            )?
            .first()
            .get_two::<i64, f64>()?;
        let documents = u64::try_from(documents.unwrap_or(0)).unwrap_or(0);
        let src = &corpus.sources[idx];
        let share = src.index_share(pg_corpus_core::lexical::corpus_share(documents, &table_rows));
        if !pg_corpus_core::lexical::wants_champion_lists(src.tsv_index, documents, share, max_window) {
            return Ok(Vec::new());
        }
        let avgdl = avgdl.unwrap_or(1.0);
        let mut common = Vec::new();
        for row in client.select(
            "SELECT s.term FROM corpus.lexical_stats s WHERE s.corpus = $1 AND s.df > $2",
            None,
            &[DatumWithOid::from(corpus.name.as_str()), DatumWithOid::from(min_df as i64)],
        )? {
            if let Some(t) = row.get::<String>(1)? {
                common.push(t);
            }
        }
        let mut builder = Builder::new(common, n, avgdl, params);
        each_document(client, &sql, &args, |id, doc| {
            if let (Some(id), Some(doc)) = (id, doc) {
                builder.add(id, doc, &cmp);
            }
        })?;
        Ok(builder.finish(&cmp))
    })
    .map_err(spi_failure)
}

/// A corpus' lexical statistics counted in one pass over every source's searchable items
/// (`statistics::Counts`): the rows of `plan::lexical_stats_sql`.
pub fn lexical_counts(corpus: &pg_corpus_core::model::Corpus) -> Result<statistics::Counts, CoreError> {
    let mut counts = statistics::Counts::default();
    Spi::connect(|client| {
        for idx in 0..corpus.sources.len() {
            let (sql, args) = pg_corpus_core::plan::lexical_docs_sql(corpus, idx, false);
            each_document(client, &sql, &args, |_, doc| counts.add(doc))?;
        }
        Ok(())
    })
    .map_err(spi_failure)?;
    Ok(counts)
}

/// Every row of `sql` (id as text, BM25 column) through a cursor: the id and the parsed
/// document (None for NULL or a malformed value), each detoasted value freed once `f` saw it.
fn each_document(
    client: &pgrx::spi::SpiClient<'_>,
    sql: &str,
    args: &[pg_corpus_core::sql::Param],
    mut f: impl FnMut(Option<String>, Option<&pg_corpus_core::tsvector::TsVector>),
) -> pgrx::spi::SpiResult<()> {
    let datums = datums(args);
    let mut cursor = client.try_open_cursor(sql, &datums)?;
    loop {
        // (each batch is freed once read: SPI keeps fetched rows until the connection ends)
        // SAFETY: the table of the previous fetch, no longer referenced (NULL before the first).
        unsafe { pg_sys::SPI_freetuptable(pg_sys::SPI_tuptable) };
        let mut table = cursor.fetch(5000)?;
        if table.is_empty() {
            return Ok(());
        }
        while table.next().is_some() {
            let id = table.get::<String>(1)?;
            let Some(datum) = table.get_datum_by_ordinal(2)? else {
                f(id, None);
                continue;
            };
            // SAFETY: the row's tsvector datum, detoasted (a copy only when it was toasted or
            // compressed, freed below) and read in place.
            unsafe {
                let raw = datum.cast_mut_ptr::<pg_sys::varlena>();
                let plain = pg_sys::pg_detoast_datum(raw);
                let len = pgrx::varlena::varsize_any(plain);
                let bytes = std::slice::from_raw_parts(plain as *const u8, len);
                f(id, pg_corpus_core::tsvector::TsVector::parse(bytes).as_ref());
                if plain != raw {
                    pg_sys::pfree(plain.cast());
                }
            }
        }
    }
}
