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
