//! The SQL of the lexical statistics besides the corpus' own queries in [`crate::plan`]: the
//! statements of a refresh (which wrap `plan::lexical_stats_sql` and `plan::lexical_champions_sql`),
//! of forgetting a corpus' statistics, and the reads of a search and of the health check. The
//! extension runs them in order; values are parameters.

use crate::sql::Param;

/// One statement and its parameters.
pub type Statement = (String, Vec<Param>);

/// The statements of a corpus' statistics refresh, in order, in one transaction: the old
/// statistics go, the new ones and their totals are written from `stats` (returning
/// `documents, terms`: the statement at [`Refresh::totals`]), then the champion lists from
/// each source's query in `champions` (source name, `plan::lexical_champions_sql`), which read
/// the statistics just written.
pub struct Refresh {
    pub statements: Vec<Statement>,
    pub totals: usize,
}

pub fn refresh(corpus: &str, stats: Statement, changes: i64, champions: Vec<(String, Statement)>) -> Refresh {
    let (stats_sql, mut params) = stats;
    let name = format!("${}", params.len() + 1);
    let changes_p = format!("${}", params.len() + 2);
    params.push(Param::Text(corpus.to_string()));
    params.push(Param::Int(changes));
    let mut statements = vec![delete("lexical_stats", corpus)];
    statements.push((
        format!(
            "WITH s AS MATERIALIZED ({stats_sql}),
      ins AS (INSERT INTO corpus.lexical_stats (corpus, term, df)
              SELECT {name}::text, term, df FROM s WHERE term IS NOT NULL RETURNING 1),
      tot AS (INSERT INTO corpus.lexical_totals AS t
                  (corpus, documents, total_length, terms, refreshed_at, changes_at_refresh, stats_reset_at)
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
        params,
    ));
    let totals = statements.len() - 1;
    statements.push(delete("lexical_champions", corpus));
    for (source, (sql, mut params)) in champions {
        let (c, s) = (params.len() + 1, params.len() + 2);
        params.push(Param::Text(corpus.to_string()));
        params.push(Param::Text(source));
        statements.push((
            format!(
                "INSERT INTO corpus.lexical_champions (corpus, source, term, items, impacts)
SELECT ${c}::text, ${s}::text, c.term, c.items, c.impacts FROM ({sql}) AS c"
            ),
            params,
        ));
    }
    Refresh { statements, totals }
}

fn delete(table: &str, corpus: &str) -> Statement {
    (format!("DELETE FROM corpus.{table} WHERE corpus = $1"), vec![Param::Text(corpus.to_string())])
}

/// The statements that forget a corpus' statistics (it has no source left).
pub fn clear(corpus: &str) -> Vec<Statement> {
    ["lexical_stats", "lexical_totals", "lexical_champions"].iter().map(|t| delete(t, corpus)).collect()
}

/// A search's read of its keys' statistics: parameters (corpus text, terms text[]); rows
/// (term, df), with NULL term for the documents and '' for the total length.
pub const TERM_STATS: &str =
    "SELECT s.term, s.df FROM corpus.lexical_stats s WHERE s.corpus = $1 AND s.term = ANY($2::text[])
UNION ALL
SELECT NULL, t.documents FROM corpus.lexical_totals t WHERE t.corpus = $1
UNION ALL
SELECT '', t.total_length FROM corpus.lexical_totals t WHERE t.corpus = $1";

/// The heads of champion lists of several sources: parameters (corpus, sources text[],
/// terms text[], prefixes int4[], request numbers int4[]); rows (request, term, items, impacts).
pub const CHAMPION_HEADS: &str = "SELECT r.req, c.term, c.items[1:r.n], c.impacts[1:r.n]
  FROM unnest($2::text[], $3::text[], $4::int4[], $5::int4[]) AS r(source, term, n, req)
  JOIN corpus.lexical_champions c ON c.corpus = $1 AND c.source = r.source AND c.term = r.term
 ORDER BY r.req, c.term";

/// Where a corpus' statistics stand: parameters (corpus, its tables' OIDs int8[]); one row
/// (refreshed, documents, terms, total_length, changes_at_refresh, reset_since, changes_now).
pub const STATE: &str = "SELECT t.corpus IS NOT NULL, t.documents, t.terms, t.total_length, t.changes_at_refresh,
       t.stats_reset_at IS DISTINCT FROM pg_catalog.pg_stat_get_db_stat_reset_time(
           (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())),
       -- flushed counters, plus this transaction's own changes (flushed at its commit)
       (SELECT coalesce(sum(s.n_tup_ins + s.n_tup_upd + s.n_tup_del
                            + pg_catalog.pg_stat_get_xact_tuples_inserted(s.relid)
                            + pg_catalog.pg_stat_get_xact_tuples_updated(s.relid)
                            + pg_catalog.pg_stat_get_xact_tuples_deleted(s.relid)), 0)::int8
          FROM pg_catalog.pg_stat_all_tables s WHERE s.relid = ANY($2::int8[]::oid[]))
  FROM (SELECT 1) AS one LEFT JOIN corpus.lexical_totals t ON t.corpus = $1";

#[cfg(test)]
mod tests {
    use super::*;

    fn placeholders_match(sql: &str, params: &[Param]) {
        for n in 1..=params.len() {
            assert!(sql.contains(&format!("${n}")), "${n} unused in {sql}");
        }
        assert!(!sql.contains(&format!("${}", params.len() + 1)), "{sql}");
    }

    #[test]
    fn a_refresh_numbers_its_parameters_after_the_wrapped_queries() {
        let stats = (
            "SELECT $1::text AS term, 1::int8 AS df, NULL::int8 AS total_len".to_string(),
            vec![Param::Text("x".into())],
        );
        let champions = vec![(
            "chunks".to_string(),
            (
                "SELECT $1 AS term, $2 AS items, $3 AS impacts".to_string(),
                vec![Param::Int(1), Param::Int(2), Param::Int(3)],
            ),
        )];
        let r = refresh("legal", stats, 42, champions);
        assert_eq!(r.statements.len(), 4);
        assert_eq!(r.totals, 1);
        for (sql, params) in &r.statements {
            placeholders_match(sql, params);
        }
        assert_eq!(r.statements[1].1[1..], [Param::Text("legal".into()), Param::Int(42)]);
        assert_eq!(r.statements[3].1[3..], [Param::Text("legal".into()), Param::Text("chunks".into())]);
        assert!(clear("legal").iter().all(|(sql, p)| sql.starts_with("DELETE FROM corpus.lexical_") && p.len() == 1));
    }
}
