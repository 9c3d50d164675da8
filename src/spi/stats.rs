//! Lexical statistics: what a search reads of them, and the refresh that writes them. The
//! refresh's queries are planned by `pg_corpus_core::plan` (`lexical_stats_sql`,
//! `lexical_champions_sql`).

use pg_corpus_core::engine::{ChampionList, ChampionRequest, TermStats};
use pg_corpus_core::sql::Param;
use pg_corpus_core::CoreError;
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;

use super::{datums, spi_failure};

/// Document frequencies of `terms` in a corpus' statistics, with its totals: one round trip.
pub fn term_stats(corpus: &str, terms: &[String]) -> Result<TermStats, CoreError> {
    super::select_saved(
        "SELECT s.term, s.df FROM corpus.lexical_stats s WHERE s.corpus = $1 AND s.term = ANY($2::text[])
         UNION ALL
         SELECT NULL, t.documents FROM corpus.lexical_totals t WHERE t.corpus = $1
         UNION ALL
         SELECT '', t.total_length FROM corpus.lexical_totals t WHERE t.corpus = $1",
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
        "SELECT r.req, c.term, c.items[1:r.n], c.impacts[1:r.n]
           FROM unnest($2::text[], $3::text[], $4::int4[], $5::int4[]) AS r(source, term, n, req)
           JOIN corpus.lexical_champions c ON c.corpus = $1 AND c.source = r.source AND c.term = r.term
          ORDER BY r.req, c.term",
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

/// Where a corpus' lexical statistics stand.
pub struct LexicalState {
    pub refreshed: bool,
    pub documents: i64,
    pub terms: i64,
    pub total_length: i64,
    pub changes_at_refresh: i64,
    /// Inserted + updated + deleted rows of the corpus' tables now (pg_stat_all_tables).
    pub changes_now: i64,
    /// The database's statistics were reset since the refresh.
    pub reset_since: bool,
}

impl LexicalState {
    /// Stale when never refreshed, or when more rows changed since than `fraction` of the
    /// documents (at least one).
    pub fn is_stale(&self, fraction: f64) -> bool {
        !self.refreshed
            || self.counters_reset()
            || (self.changes_now - self.changes_at_refresh) as f64 > (fraction * self.documents as f64).max(0.5)
    }

    /// The statistics counters went backwards (reset, crash recovery, restored backup): the
    /// changes since the refresh cannot be known.
    pub fn counters_reset(&self) -> bool {
        self.refreshed && (self.reset_since || self.changes_now < self.changes_at_refresh)
    }
}

pub fn lexical_state(corpus: &str, tables: &[i64]) -> Result<LexicalState, CoreError> {
    Spi::connect(|client| {
        let row = client
            .select(
                "SELECT t.corpus IS NOT NULL, t.documents, t.terms, t.total_length, t.changes_at_refresh,
                        t.stats_reset_at IS DISTINCT FROM pg_catalog.pg_stat_get_db_stat_reset_time(
                            (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())),
                        -- flushed counters, plus this transaction's own changes (flushed at its commit)
                        (SELECT coalesce(sum(s.n_tup_ins + s.n_tup_upd + s.n_tup_del
                                             + pg_catalog.pg_stat_get_xact_tuples_inserted(s.relid)
                                             + pg_catalog.pg_stat_get_xact_tuples_updated(s.relid)
                                             + pg_catalog.pg_stat_get_xact_tuples_deleted(s.relid)), 0)::int8
                           FROM pg_catalog.pg_stat_all_tables s WHERE s.relid = ANY($2::int8[]::oid[]))
                   FROM (SELECT 1) AS one LEFT JOIN corpus.lexical_totals t ON t.corpus = $1",
                None,
                &[DatumWithOid::from(corpus), DatumWithOid::from(tables.to_vec())],
            )?
            .first();
        let refreshed = row.get::<bool>(1)?.unwrap_or(false);
        Ok(LexicalState {
            refreshed,
            documents: row.get::<i64>(2)?.unwrap_or(0),
            terms: row.get::<i64>(3)?.unwrap_or(0),
            total_length: row.get::<i64>(4)?.unwrap_or(0),
            changes_at_refresh: row.get::<i64>(5)?.unwrap_or(0),
            reset_since: refreshed && row.get::<bool>(6)?.unwrap_or(false),
            changes_now: row.get::<i64>(7)?.unwrap_or(0),
        })
    })
    .map_err(spi_failure)
}

/// Replace a corpus' statistics with the result of `stats_sql` (plan::lexical_stats_sql), then
/// its champion lists with the results of `champions` (source name, plan::lexical_champions_sql),
/// which read the statistics just written.
pub fn refresh_lexical_stats(
    corpus: &str,
    stats_sql: &str,
    params: &[Param],
    changes: i64,
    champions: &[(String, String, Vec<Param>)],
) -> Result<(i64, i64), CoreError> {
    let n = params.len();
    let mut all = params.to_vec();
    all.push(Param::Text(corpus.to_string()));
    all.push(Param::Int(changes));
    let name = format!("${}", n + 1);
    let changes_p = format!("${}", n + 2);
    Spi::connect_mut(|client| {
        client.update("DELETE FROM corpus.lexical_stats WHERE corpus = $1", None, &[DatumWithOid::from(corpus)])?;
        let row = client
            .update(
                &format!(
                    "WITH s AS MATERIALIZED ({stats_sql}),
                          ins AS (INSERT INTO corpus.lexical_stats (corpus, term, df)
                                  SELECT {name}::text, term, df FROM s WHERE term IS NOT NULL RETURNING 1),
                          tot AS (INSERT INTO corpus.lexical_totals AS t
                                      (corpus, documents, total_length, terms, refreshed_at, changes_at_refresh,
                                       stats_reset_at)
                                  SELECT {name}::text, s.df, s.total_len, (SELECT count(*) FROM ins), now(), {changes_p}::int8,
                                         pg_catalog.pg_stat_get_db_stat_reset_time(
                                             (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database()))
                                    FROM s WHERE s.term IS NULL
                                  ON CONFLICT (corpus) DO UPDATE
                                     SET documents = EXCLUDED.documents, total_length = EXCLUDED.total_length,
                                         terms = EXCLUDED.terms, refreshed_at = EXCLUDED.refreshed_at,
                                         changes_at_refresh = EXCLUDED.changes_at_refresh,
                                         stats_reset_at = EXCLUDED.stats_reset_at
                                  RETURNING documents, terms)
                     SELECT documents, terms FROM tot"
                ),
                None,
                &datums(&all),
            )?
            .first()
            .get_two::<i64, i64>()?;
        client.update("DELETE FROM corpus.lexical_champions WHERE corpus = $1", None, &[DatumWithOid::from(corpus)])?;
        for (source, sql, params) in champions {
            let mut all = params.to_vec();
            all.push(Param::Text(corpus.to_string()));
            all.push(Param::Text(source.clone()));
            client.update(
                &format!(
                    "INSERT INTO corpus.lexical_champions (corpus, source, term, items, impacts)
                     SELECT ${}::text, ${}::text, c.term, c.items, c.impacts FROM ({sql}) AS c",
                    params.len() + 1,
                    params.len() + 2
                ),
                None,
                &datums(&all),
            )?;
        }
        Ok((row.0.unwrap_or(0), row.1.unwrap_or(0)))
    })
    .map_err(spi_failure)
}

/// Forget a corpus' statistics (it has no source left).
pub fn clear_lexical_stats(corpus: &str) -> Result<(), CoreError> {
    Spi::connect_mut(|client| {
        client.update("DELETE FROM corpus.lexical_stats WHERE corpus = $1", None, &[DatumWithOid::from(corpus)])?;
        client.update("DELETE FROM corpus.lexical_totals WHERE corpus = $1", None, &[DatumWithOid::from(corpus)])?;
        client.update("DELETE FROM corpus.lexical_champions WHERE corpus = $1", None, &[DatumWithOid::from(corpus)])?;
        Ok(())
    })
    .map_err(spi_failure)
}
