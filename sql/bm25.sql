-- ==========================================================================================
-- The document side of pg_corpus' analyser, fit for a generated column and a GIN index:
--   ALTER TABLE t ADD COLUMN body_bm25 tsvector
--       GENERATED ALWAYS AS (corpus.bm25_document(body, 'hebrew')) STORED;
--   CREATE INDEX ON t USING gin (body_bm25);
-- and register the source with tsv_column => 'body_bm25', language => 'hebrew'. Queries go
-- through the same analyser (corpus.bm25_query shows what a query looks up).
-- ==========================================================================================
CREATE FUNCTION corpus.bm25_document(document text, language text) RETURNS pg_catalog.tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT corpus._bm25_document_text(document, language)::pg_catalog.tsvector $$;

-- Analyse the rows of a source's BM25 column again (after an update of the analyser changed stop
-- words or stemming): the rows whose stored analysis differs from what corpus.bm25_document makes
-- of their text now are rewritten, in batches of batch_size rows committed one by one, then the
-- statistics of every corpus of the table are refreshed. A procedure: CALL it outside a
-- transaction block; interrupted, CALL it again (rows already analysed are skipped). The steps
-- are the library's (corpus._reanalyze_start, corpus._reanalyze_step); it pins the search_path
-- for each of its transactions with set_config (a procedure with a SET clause cannot COMMIT).
CREATE PROCEDURE corpus.corpus_reanalyze(corpus text, source text, batch_size integer DEFAULT 10000)
LANGUAGE plpgsql
AS $$
DECLARE
    total   bigint;
    done    bigint := 0;
    changed bigint := 0;
    state   jsonb := '{}';
    c       text;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    IF batch_size IS NULL OR batch_size < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('batch_size must be positive, got %s', batch_size),
            HINT = 'Each batch is one committed transaction; 10000 is a good size.';
    END IF;
    total := corpus._reanalyze_start(corpus, source);
    COMMIT;
    LOOP
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        -- (corpus.progress; reported at the start of every transaction, which an error ends)
        PERFORM corpus._progress_report('corpus_reanalyze', corpus,
                                        format('analysing the rows of source %s again', source), done, total);
        state := corpus._reanalyze_step(corpus, source, state, batch_size);
        done := done + (state->>'n')::bigint;
        changed := changed + (state->>'changed')::bigint;
        COMMIT;
        RAISE NOTICE 'pg_corpus: % of % rows of source % of corpus % read, % analysed again', done, total, source,
                     corpus, changed;
        EXIT WHEN (state->>'done')::boolean;
    END LOOP;
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    PERFORM corpus._progress_report('corpus_reanalyze', corpus, 'refreshing the statistics', done, total);
    FOR c IN SELECT DISTINCT s.corpus FROM corpus.sources s
              WHERE s.item_table = (SELECT t.item_table FROM corpus.sources t
                                     WHERE t.corpus = corpus_reanalyze.corpus AND t.name = corpus_reanalyze.source)
              ORDER BY 1 LOOP
        BEGIN
            PERFORM * FROM corpus.corpus_refresh_lexical_stats(c);
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE USING
                MESSAGE = format('pg_corpus: the statistics of corpus %s were not refreshed: %s', c, SQLERRM),
                HINT = format('A role that may refresh them runs SELECT * FROM corpus.corpus_refresh_lexical_stats(%L);',
                              c);
        END;
    END LOOP;
    PERFORM corpus._progress_report(NULL, NULL, NULL, NULL, NULL);
END
$$;
