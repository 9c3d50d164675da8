-- ==========================================================================================
-- Lexical helpers used by the lexical subplan.
-- ==========================================================================================

-- The query's lexemes ORed together. An AND query (plainto_tsquery, as most hybrid-search
-- recipes use) finds almost nothing for natural-language questions: nDCG@10 0.002 on HeQ val
-- against 0.559 for OR. client_min_messages hides the NOTICE that
-- PostgreSQL prints for a query of stop words only.
CREATE FUNCTION corpus._or_tsquery(config regconfig, query text) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
AS $$
    SELECT CASE WHEN numnode(q) = 0 THEN q
                ELSE replace(q::text, ' & ', ' | ')::tsquery END
      FROM plainto_tsquery(config, query) AS q
$$;

-- ==========================================================================================
-- BM25: per-corpus statistics. Document frequencies and lengths are computed over each
-- corpus' own searchable items (the corpus predicate included), so a corpus' scores never
-- depend on another corpus' documents. corpus.corpus_refresh_lexical_stats() recomputes them;
-- corpus_add_source / corpus_alter refresh them, the reference worker refreshes stale ones
-- (more than 10% of the documents changed, by pg_stat_all_tables), and
-- corpus_health_check() reports staleness.
-- ==========================================================================================
CREATE TABLE corpus.lexical_stats (
    corpus text NOT NULL REFERENCES corpus.corpora (name) ON DELETE CASCADE,
    term   text NOT NULL,
    df     bigint NOT NULL,
    PRIMARY KEY (corpus, term)
);

CREATE TABLE corpus.lexical_totals (
    corpus             text PRIMARY KEY REFERENCES corpus.corpora (name) ON DELETE CASCADE,
    documents          bigint NOT NULL,
    total_length       bigint NOT NULL,
    terms              bigint NOT NULL,
    refreshed_at       timestamptz NOT NULL,
    -- inserted + updated + deleted rows of the corpus' tables at refresh (pg_stat_all_tables)
    changes_at_refresh bigint NOT NULL,
    -- the database's statistics reset time then: a later pg_stat_reset() makes the counters
    -- above meaningless, whatever they climb back to
    stats_reset_at     timestamptz
);

REVOKE ALL ON corpus.lexical_stats, corpus.lexical_totals FROM PUBLIC;
-- rows only of the corpora a role reads in full (row-level security: sql/access.sql); searches
-- read the statistics of their own query keys with the extension owner's rights
GRANT SELECT ON corpus.lexical_stats, corpus.lexical_totals TO PUBLIC;

-- ==========================================================================================
-- BM25: champion lists. For every key in more than 1000 of a corpus' documents (lexical.rs,
-- CHAMPION_LIST_LEN), each source's 1000 searchable items of highest BM25 term weight, best
-- first. A query made only of such common keys takes its candidates from the heads of these
-- lists instead of posting lists that hold most of the corpus.
-- Written with the statistics, in the same transaction; items added since the last refresh
-- are found by such queries only after the next one.
--
-- A list says which items contain a word, so a role reads a source's lists only when it may
-- read that source's item ids and index terms itself, every row of them (sql/access.sql).
-- ==========================================================================================
CREATE TABLE corpus.lexical_champions (
    corpus text NOT NULL,
    source text NOT NULL,
    term   text NOT NULL,
    -- item ids (as text), best first, and their BM25 term weights (at the refresh's k1, b and
    -- mean length): the search bounds scores with them before reading any item
    items   text[] NOT NULL,
    impacts float8[] NOT NULL,
    PRIMARY KEY (corpus, term, source),
    FOREIGN KEY (corpus, source) REFERENCES corpus.sources (corpus, name) ON DELETE CASCADE
);

REVOKE ALL ON corpus.lexical_champions FROM PUBLIC;
GRANT SELECT ON corpus.lexical_champions TO PUBLIC;
-- Row-level security on this table: sql/access.sql.

-- One corpus' refresh in a subtransaction of its own: its error becomes a WARNING (with the
-- corpus, its SQLSTATE and message) and NULL, so a refresh of every corpus keeps the others.
CREATE FUNCTION corpus._refresh_lexical_stats_one(corpus_name text, only_stale boolean, stale_fraction float8,
                                                  OUT documents bigint, OUT terms bigint, OUT refreshed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    state   text;
    message text;
BEGIN
    SELECT r.documents, r.terms, r.refreshed INTO documents, terms, refreshed
      FROM corpus.corpus_refresh_lexical_stats(corpus_name, only_stale, stale_fraction) AS r;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
    RAISE WARNING USING
        MESSAGE = format('the BM25 statistics of corpus %s were not refreshed: %s', quote_literal(corpus_name), message),
        DETAIL = format('SQLSTATE %s; the other corpora are refreshed.', state),
        HINT = format('Refresh it alone to see the whole error: SELECT * FROM corpus.corpus_refresh_lexical_stats(%s);',
                      quote_literal(corpus_name));
    documents := NULL;
    terms := NULL;
    refreshed := NULL;
END
$$;

-- Every corpus' statistics, one committed transaction per corpus: a long refresh holds no
-- lock or snapshot across corpora, and a corpus that fails (WARNING) loses nothing of the
-- others. CALL it outside a transaction block.
CREATE PROCEDURE corpus.corpus_refresh_lexical_stats_each(only_stale boolean DEFAULT false,
                                                          stale_fraction float8 DEFAULT 0.1)
LANGUAGE plpgsql
AS $$
DECLARE
    names text[];
    one   text;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    IF only_stale IS NULL OR stale_fraction IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004',
            MESSAGE = format('corpus_refresh_lexical_stats_each: %s must not be NULL',
                             CASE WHEN only_stale IS NULL THEN 'only_stale' ELSE 'stale_fraction' END),
            HINT = 'Leave the argument out for its default (only_stale false, stale_fraction 0.1).';
    END IF;
    IF NOT stale_fraction BETWEEN 0 AND 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('stale_fraction must be between 0 and 1, got %s', stale_fraction),
            HINT = 'It is the share of the corpus'' documents changed since the last refresh that makes statistics stale.';
    END IF;
    SELECT coalesce(array_agg(c.name ORDER BY c.name), '{}') INTO names FROM corpus.corpora AS c;
    FOREACH one IN ARRAY names LOOP
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        -- (a corpus dropped since the list was read is skipped)
        PERFORM corpus._refresh_lexical_stats_one(c.name, only_stale, stale_fraction)
           FROM corpus.corpora AS c WHERE c.name = one;
        COMMIT;
    END LOOP;
END
$$;
