-- ==========================================================================================
-- Who may read what pg_corpus stores about items.
--
-- The statistics, champion lists and re-embed queue describe items: their terms, which items
-- hold a word, which items changed and when. A role reads such rows directly only when it may
-- read what they describe IN FULL: SELECT on the columns they are computed from, and no
-- row-level security hiding rows of those tables from it (row_security_active). Everything
-- else is served through the search itself, which reads these tables with the extension
-- owner's rights (src/spi/access.rs), only for values the caller's own query produced: the
-- document frequencies of its query keys in a corpus whose sources it may read, the champion
-- items of its common keys (not at all for a source under row-level security), and the
-- queue state of the hits its own subplans returned.
--
-- What a searcher can still infer: the document frequency of its own query keys in a corpus
-- it may search, counted over all of the corpus' items (also those row-level security hides
-- from it) -- through the BM25 scores it gets back and the plan corpus_explain shows. BM25
-- needs the corpus' frequencies to rank, and computing them per role at query time would mean
-- reading every posting of every key. A tenant split that must not share even that belongs in
-- separate corpora (each has its own statistics), which is what isolation is for.
-- ==========================================================================================

-- Whether the current role may read these columns of a table, every row of it (a name that is
-- no column of the table: no).
CREATE FUNCTION corpus._reads_in_full(item_table regclass, columns name[]) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(NOT pg_catalog.row_security_active(item_table)
                    AND (SELECT pg_catalog.bool_and(pg_catalog.has_column_privilege(item_table, a.attnum, 'SELECT'))
                           FROM pg_catalog.unnest(columns) AS c
                           LEFT JOIN pg_catalog.pg_attribute AS a
                                  ON a.attrelid = item_table AND a.attname = c AND a.attnum > 0
                                 AND NOT a.attisdropped), false)
$$;

-- The columns a source definition names, by their names now: a name recorded with its
-- attribute number (corpus.sources.column_types' "attnums") is the live column of that
-- number, so renames are followed; any other name is taken as it is.
CREATE FUNCTION corpus._current_columns(item_table regclass, recorded jsonb, columns name[]) RETURNS name[]
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.array_agg(coalesce(
               (SELECT a.attname FROM pg_catalog.pg_attribute AS a
                 WHERE a.attrelid = item_table AND a.attnum = (recorded ->> u.c::text)::smallint
                   AND a.attnum > 0 AND NOT a.attisdropped), u.c) ORDER BY u.n)
      FROM pg_catalog.unnest(columns) WITH ORDINALITY AS u(c, n)
$$;

-- Whether the current role may read every source of a corpus in full: the item tables' id and
-- text search columns, and the parent tables' keys (what the statistics are computed from).
-- A corpus without sources has no items: everyone reads all of them.
CREATE FUNCTION corpus._reads_corpus_in_full(corpus text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(pg_catalog.bool_and(
               corpus._reads_in_full(s.item_table, corpus._current_columns(s.item_table,
                   s.column_types #> '{attnums,item}', ARRAY[s.id_column, s.tsv_column, s.parent_fk]))
               AND (s.parent_table IS NULL OR corpus._reads_in_full(s.parent_table, corpus._current_columns(
                   s.parent_table, s.column_types #> '{attnums,parent}', ARRAY[s.parent_key])))), true)
      FROM corpus.sources AS s
     WHERE s.corpus = _reads_corpus_in_full.corpus
$$;

-- The corpora the current role reads in full. The policies below ask for them (and for the
-- sources and slots they admit) in uncorrelated subqueries: PostgreSQL runs each once per
-- statement and looks every row up in its result, so the checks run once per corpus, source or
-- slot, never once per row. (A policy calling the check with the row's value would run it for
-- every row: SQL functions with a SET clause are never inlined.) Every statistics row's corpus
-- is in corpus.corpora (a foreign key).
CREATE FUNCTION corpus._corpora_read_in_full() RETURNS SETOF text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.name FROM corpus.corpora AS c WHERE corpus._reads_corpus_in_full(c.name)
$$;

REVOKE ALL ON FUNCTION corpus._reads_in_full(regclass, name[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION corpus._reads_corpus_in_full(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION corpus._current_columns(regclass, jsonb, name[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION corpus._corpora_read_in_full() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION corpus._reads_in_full(regclass, name[]) TO PUBLIC;
GRANT EXECUTE ON FUNCTION corpus._reads_corpus_in_full(text) TO PUBLIC;
GRANT EXECUTE ON FUNCTION corpus._current_columns(regclass, jsonb, name[]) TO PUBLIC;
GRANT EXECUTE ON FUNCTION corpus._corpora_read_in_full() TO PUBLIC;

-- Statistics: a corpus' whole vocabulary with document frequencies.
ALTER TABLE corpus.lexical_stats ENABLE ROW LEVEL SECURITY;
ALTER TABLE corpus.lexical_totals ENABLE ROW LEVEL SECURITY;
CREATE POLICY readers_of_the_corpus ON corpus.lexical_stats
    USING (corpus IN (SELECT corpus._corpora_read_in_full()))
    WITH CHECK (corpus IN (SELECT corpus._corpora_read_in_full()));
CREATE POLICY readers_of_the_corpus ON corpus.lexical_totals
    USING (corpus IN (SELECT corpus._corpora_read_in_full()))
    WITH CHECK (corpus IN (SELECT corpus._corpora_read_in_full()));

-- Champion lists: which items of a source hold a word. Read: the lists of a source whose item
-- ids and index terms the role reads in full; written: those of a corpus it reads in full.
ALTER TABLE corpus.lexical_champions ENABLE ROW LEVEL SECURITY;
CREATE POLICY readers_of_the_source ON corpus.lexical_champions
    USING ((corpus, source) IN (
        SELECT s.corpus, s.name FROM corpus.sources AS s
         WHERE corpus._reads_in_full(s.item_table, corpus._current_columns(s.item_table,
                   s.column_types #> '{attnums,item}', ARRAY[s.id_column, s.tsv_column]))))
    WITH CHECK (corpus IN (SELECT corpus._corpora_read_in_full()));

-- The re-embed queue: which items of which table changed, and when. Workers (roles granted
-- UPDATE on the queue, as the worker API asks) see all of it; other roles the rows of the
-- tables they read in full.
ALTER TABLE corpus.embedding_queue ENABLE ROW LEVEL SECURITY;
CREATE POLICY workers ON corpus.embedding_queue
    USING ((SELECT pg_catalog.has_table_privilege('corpus.embedding_queue', 'UPDATE')
                   OR pg_catalog.has_table_privilege('corpus.embedding_queue', 'DELETE')))
    WITH CHECK (true);
CREATE POLICY readers_of_the_table ON corpus.embedding_queue FOR SELECT
    USING ((item_table, embedding_column) IN (
        SELECT s.item_table, s.embedding_column FROM corpus.embedding_slots AS s
         WHERE corpus._reads_in_full(s.item_table,
                   ARRAY[corpus._slot_column(s.item_table, (corpus._slot_attnums(s)).id_attnum)])));
