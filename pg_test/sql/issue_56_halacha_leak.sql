-- Seed 000, task #56: halachot of the internal corpus leaked into external searches because the
-- halacha branch did not carry the source_kind filter. Both sources of both corpora must.
BEGIN;
\set ON_ERROR_ROLLBACK on
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION pg_corpus;
CREATE TABLE case_law (id int PRIMARY KEY, case_number text, case_name text, source_kind text);
CREATE TABLE halachot (id int PRIMARY KEY, case_law_id int REFERENCES case_law (id), rule text,
    supporting_quote text, review_status text,
    rule_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', rule)) STORED, embedding vector(2));
INSERT INTO case_law VALUES (1, 'ext-1', 'External', 'external_upload'),
                            (2, 'int-1', 'Internal', 'internal_committee');
INSERT INTO halachot (id, case_law_id, rule, supporting_quote, review_status, embedding) VALUES
    (1, 1, 'an external rule about leases and tenants of shops', 'q1', 'approved', '[0, 1]'),
    (2, 2, 'the internal rule: silent renewal of a lease binds', 'q2', 'approved', '[1, 0]');
SELECT corpus.corpus_create(c, isolation => jsonb_build_object('source_kind', k))
  FROM (VALUES ('external_precedents', 'external_upload'), ('internal_decisions', 'internal_committee')) v(c, k);
SELECT corpus.corpus_add_source(c, 'halachot', 'halachot', text_column => 'rule', embedding_column => 'embedding',
    tsv_column => 'rule_tsv', parent_table => 'case_law', parent_fk => 'case_law_id',
    rule => '{"review_status": "approved"}', locator => '{"quote": "supporting_quote"}')
  FROM (VALUES ('external_precedents'), ('internal_decisions')) v(c);
-- The internal halacha is the best match on both branches; the external search must not see it.
SELECT m AS mode, array_agg(item_id ORDER BY rank) AS external_hits
  FROM unnest(ARRAY['hybrid', 'semantic', 'lexical']) m,
       corpus.corpus_hybrid_search('external_precedents', '[1, 0]', 'silent renewal lease rule', mode => m)
 GROUP BY m ORDER BY m;
SELECT m AS mode, array_agg(item_id ORDER BY rank) AS internal_hits
  FROM unnest(ARRAY['hybrid', 'semantic', 'lexical']) m,
       corpus.corpus_hybrid_search('internal_decisions', '[0, 1]', 'leases tenants shops rule', mode => m)
 GROUP BY m ORDER BY m;
-- Callers cannot widen the corpus through filters.
SELECT * FROM corpus.corpus_hybrid_search('external_precedents', '[1, 0]', 'lease',
                                          filters => '{"source_kind": "internal_committee"}');
ROLLBACK;
