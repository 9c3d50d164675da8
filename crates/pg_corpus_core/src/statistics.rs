//! The SQL of the lexical statistics besides the corpus' own queries in [`crate::plan`]: the
//! statements of a refresh (which wrap `plan::lexical_stats_sql` or its one-pass [`Counts`], and
//! the champion lists' statements), of forgetting a corpus' statistics, and the reads of a search
//! and of the health check. The extension runs them in order; values are parameters.

use std::collections::HashMap;

use crate::model::Corpus;
use crate::sql::Param;
use crate::tsvector::TsVector;

/// One statement and its parameters.
pub type Statement = (String, Vec<Param>);

/// A corpus' lexical statistics counted in one pass over its documents: each key's document
/// frequency, the number of documents and their total BM25 length; the rows of
/// `plan::lexical_stats_sql` without the sort of every posting its GROUP BY needs.
#[derive(Debug, Default)]
pub struct Counts {
    df: HashMap<Box<[u8]>, u64>,
    documents: u64,
    total_length: u64,
}

impl Counts {
    /// One document of the corpus (a NULL BM25 value counts as a document without keys).
    pub fn add(&mut self, doc: Option<&TsVector>) {
        self.documents += 1;
        let Some(doc) = doc else { return };
        self.total_length += u64::from(doc.surface_length());
        for i in 0..doc.len() {
            let Some((lexeme, _)) = doc.entry_tf(i) else { continue };
            match self.df.get_mut(lexeme) {
                Some(n) => *n += 1,
                None => {
                    self.df.insert(lexeme.into(), 1);
                }
            }
        }
    }

    /// `plan::lexical_stats_sql`'s rows: (term, df, NULL) per key, then (NULL, documents,
    /// total length).
    pub fn rows(self) -> impl Iterator<Item = (Option<String>, i64, Option<i64>)> {
        let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let totals = (None, clamp(self.documents), Some(clamp(self.total_length)));
        self.df
            .into_iter()
            .map(move |(k, n)| (Some(String::from_utf8_lossy(&k).into_owned()), clamp(n), None))
            .chain(std::iter::once(totals))
    }
}

/// The statements of a corpus' statistics refresh, in order, in one transaction: the old
/// statistics go, the new ones and their totals are written from `stats` (returning
/// `documents, terms`: the statement at [`Refresh::totals`]), then the champion lists from
/// each source's query in `champions` (source name, `plan::lexical_champions_sql`), which read
/// the statistics just written.
pub struct Refresh {
    pub statements: Vec<Statement>,
    pub totals: usize,
    /// What each statement does, for progress reports.
    pub phases: Vec<String>,
}

pub fn refresh(corpus: &str, stats: Statement, changes: i64, champions: Vec<(String, Statement)>) -> Refresh {
    let (stats_sql, mut params) = stats;
    let name = format!("${}", params.len() + 1);
    let changes_p = format!("${}", params.len() + 2);
    params.push(Param::Text(corpus.to_string()));
    params.push(Param::Int(changes));
    let mut statements = vec![lock(corpus), delete("lexical_stats", corpus)];
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
    let mut phases: Vec<String> = [
        "waiting for other refreshes of the corpus",
        "clearing the statistics",
        "counting terms and documents",
        "clearing the champion lists",
    ]
    .map(String::from)
    .to_vec();
    for (source, (sql, mut params)) in champions {
        phases.push(format!("champion lists of source {source}"));
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
    Refresh { statements, totals, phases }
}

/// The advisory lock (classid [`LOCK_CLASS`], the corpus name's hash) that makes refreshes of
/// one corpus wait for each other until the end of the transaction: two at once each deleted
/// the old rows and inserted new ones, and the second insert failed with 23505 (a refresh's
/// delete does not see rows inserted after its snapshot). The statements after it take new
/// snapshots (READ COMMITTED), so the second refresh replaces the first one's rows.
fn lock(corpus: &str) -> Statement {
    (
        format!("SELECT pg_catalog.pg_advisory_xact_lock({LOCK_CLASS}, pg_catalog.hashtext($1))"),
        vec![Param::Text(corpus.to_string())],
    )
}

/// pg_corpus' advisory lock class ('pgcr').
pub const LOCK_CLASS: i32 = 0x7067_6372;

fn delete(table: &str, corpus: &str) -> Statement {
    (format!("DELETE FROM corpus.{table} WHERE corpus = $1"), vec![Param::Text(corpus.to_string())])
}

/// The statements that forget a corpus' statistics (it has no source left).
pub fn clear(corpus: &str) -> Vec<Statement> {
    std::iter::once(lock(corpus))
        .chain(["lexical_stats", "lexical_totals", "lexical_champions"].iter().map(|t| delete(t, corpus)))
        .collect()
}

/// One corpus' refresh in a subtransaction of its own, its error a WARNING and NULLs
/// (parameters: corpus text, only_stale boolean, stale_fraction float8). Columns: documents,
/// terms, refreshed.
pub const REFRESH_ONE: &str = "SELECT r.documents, r.terms, r.refreshed \
     FROM corpus._refresh_lexical_stats_one($1::text, $2::boolean, $3::float8) AS r";

/// Whether the current role may read a corpus' statistics itself (parameter: corpus text).
pub const READS_IN_FULL: &str = "SELECT corpus._reads_corpus_in_full($1::text)";

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

/// Where a corpus' statistics stand: parameter (corpus); one row (refreshed, documents, terms,
/// total_length, changes_at_refresh, reset_since).
pub const STATE: &str = "SELECT t.corpus IS NOT NULL, t.documents, t.terms, t.total_length, t.changes_at_refresh,
       t.stats_reset_at IS DISTINCT FROM pg_catalog.pg_stat_get_db_stat_reset_time(
           (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database()))
  FROM (SELECT 1) AS one LEFT JOIN corpus.lexical_totals t ON t.corpus = $1";

/// The rows changed in tables so far: parameter (their OIDs int8[]); one value,
/// `corpus._table_changes`, on a Citus coordinator over every node's shards, or for a database
/// still at a release before it (`table_changes_function` false) this node's counters of the
/// tables, flushed plus this transaction's own changes.
pub fn changes_sql(table_changes_function: bool) -> &'static str {
    if table_changes_function {
        "SELECT corpus._table_changes($1::int8[]::oid[])"
    } else {
        "SELECT coalesce(sum(s.n_tup_ins + s.n_tup_upd + s.n_tup_del
                            + pg_catalog.pg_stat_get_xact_tuples_inserted(s.relid)
                            + pg_catalog.pg_stat_get_xact_tuples_updated(s.relid)
                            + pg_catalog.pg_stat_get_xact_tuples_deleted(s.relid)), 0)::int8
          FROM pg_catalog.pg_stat_all_tables s WHERE s.relid = ANY($1::int8[]::oid[])"
    }
}

/// Columns a role needs SELECT on, per table (its OID, its qualified name).
#[derive(Debug, Clone, PartialEq)]
pub struct NeededColumns {
    pub table: i64,
    pub name: String,
    pub columns: Vec<String>,
}

/// What a role must be allowed to read for a search to read a corpus' statistics on its behalf
/// (sql/access.sql): every source's item id, text search and parent key columns and its parent
/// table's key, the columns the statistics are computed from. (Row-level security is not
/// asked: a searcher under it gets the statistics of its own query keys; sql/access.sql says
/// what that discloses.)
pub fn statistics_columns(corpus: &Corpus) -> Vec<NeededColumns> {
    let mut out: Vec<NeededColumns> = Vec::new();
    let mut need = |oid: i64, schema: &str, name: &str, cols: Vec<String>| match out.iter_mut().find(|n| n.table == oid)
    {
        Some(n) => {
            for c in cols {
                if !n.columns.contains(&c) {
                    n.columns.push(c);
                }
            }
        }
        None => out.push(NeededColumns { table: oid, name: crate::sql::qualified(schema, name), columns: cols }),
    };
    for src in &corpus.sources {
        let item = vec![src.id.column.clone(), src.tsv.column.clone(), src.parent_fk.column.clone()];
        need(src.item.oid, &src.item.schema, &src.item.name, item);
        if let (Some(p), Some(key)) = (&src.parent, &src.parent_key) {
            need(p.oid, &p.schema, &p.name, vec![key.column.clone()]);
        }
    }
    out
}

/// The error of a search whose caller may not read `table`'s `column` (so neither the corpus'
/// statistics on its behalf).
pub fn statistics_denied(corpus: &str, missing: &NeededColumns, column: &str) -> crate::error::CoreError {
    crate::error::CoreError::new(
        crate::error::SqlState::InsufficientPrivilege,
        format!("permission denied to search corpus \"{corpus}\""),
        format!(
            "Grant the role SELECT on the corpus' tables, e.g. GRANT SELECT ON {} TO role; (the item id, text search and parent key columns suffice).",
            missing.name
        ),
    )
    .with_detail(format!(
        "The corpus' lexical statistics are read for roles that may read every source's item ids and text search columns; this role may not read column {} of {}.",
        crate::sql::ident(column),
        missing.name
    ))
}

#[cfg(test)]
mod tests {
    use super::{statistics_columns, statistics_denied};

    #[test]
    fn reading_statistics_needs_every_sources_id_text_search_and_parent_key_columns() {
        let c = crate::testing::legal();
        let needed = statistics_columns(&c);
        let names: Vec<(&str, Vec<&str>)> =
            needed.iter().map(|n| (n.name.as_str(), n.columns.iter().map(String::as_str).collect())).collect();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(names.iter().any(|(t, _)| t.ends_with("\"case_law\"")));
        for src in &c.sources {
            let item = needed.iter().find(|n| n.table == src.item.oid).unwrap();
            for col in [&src.id.column, &src.tsv.column, &src.parent_fk.column] {
                assert!(item.columns.contains(col), "{col} of {}", item.name);
            }
        }
        let e = statistics_denied(&c.name, &needed[0], "weird\"col");
        assert_eq!(e.state.code(), "42501");
        assert!(e.detail.unwrap().contains("\"weird\"\"col\""), "identifiers quoted");
        assert!(e.hint.contains(&needed[0].name));
    }
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
        assert_eq!(r.statements.len(), 5);
        assert_eq!(r.totals, 2);
        for (sql, params) in &r.statements {
            placeholders_match(sql, params);
        }
        assert_eq!(r.statements[2].1[1..], [Param::Text("legal".into()), Param::Int(42)]);
        assert_eq!(r.statements[4].1[3..], [Param::Text("legal".into()), Param::Text("chunks".into())]);
        // every refresh and clear of a corpus first takes the corpus' advisory lock
        let cleared = clear("legal");
        for (sql, p) in [&r.statements[0], &cleared[0]] {
            assert!(sql.starts_with("SELECT pg_catalog.pg_advisory_xact_lock(1885823858, "), "{sql}");
            assert_eq!(p, &vec![Param::Text("legal".into())]);
        }
        assert!(cleared[1..].iter().all(|(sql, p)| sql.starts_with("DELETE FROM corpus.lexical_") && p.len() == 1));
    }

    #[test]
    fn counts_are_the_group_by_of_every_documents_keys() {
        use crate::tsvector::tests::encode;
        let mut rng = 11u64;
        let mut next = || {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (rng >> 33) as usize
        };
        let keys = ["alef", "bet", "gimel", "dalet", "he", "vav", "zayin"];
        let (mut docs, mut counts) = (Vec::new(), Counts::default());
        for _ in 0..200 {
            let mut words: Vec<(&str, Vec<(u16, u8)>)> = Vec::new();
            for (j, k) in keys.iter().enumerate() {
                if next() % (j + 2) == 0 {
                    // labels D (0) and C (1): only D positions make the length
                    words.push((k, (0..1 + next() % 4).map(|p| ((p + 1) as u16, (next() % 2) as u8)).collect()));
                }
            }
            words.sort_by(|a, b| crate::tsvector::compare(a.0.as_bytes(), b.0.as_bytes()));
            let refs: Vec<(&str, &[(u16, u8)])> = words.iter().map(|(w, p)| (*w, p.as_slice())).collect();
            docs.push(if next() % 10 == 0 { None } else { Some(encode(&refs)) });
        }
        for d in &docs {
            counts.add(d.as_deref().map(|b| TsVector::parse(b).expect("valid")).as_ref());
        }
        let mut want: HashMap<String, i64> = HashMap::new();
        let mut length = 0i64;
        for d in docs.iter().flatten() {
            let v = TsVector::parse(d).expect("valid");
            length += i64::from(v.surface_length());
            for i in 0..v.len() {
                let e = v.entry(i).expect("entry");
                *want.entry(String::from_utf8(e.lexeme.to_vec()).expect("utf-8")).or_default() += 1;
            }
        }
        let mut got: HashMap<String, i64> = HashMap::new();
        let mut totals = Vec::new();
        for (term, n, len) in counts.rows() {
            match term {
                Some(t) => {
                    assert_eq!(len, None);
                    assert!(got.insert(t, n).is_none(), "one row per key");
                }
                None => totals.push((n, len)),
            }
        }
        assert_eq!(got, want);
        assert_eq!(totals, vec![(200, Some(length))]);
        assert!(length > 0 && want.len() == keys.len());
    }
}
