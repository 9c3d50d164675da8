-- An item table carrying its own copy of the isolation column (for per-corpus partial indexes)
-- is filtered on both copies: a drifting copy can hide an item, never leak it.
BEGIN;
\set ON_ERROR_ROLLBACK on
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION pg_corpus;
CREATE TABLE case_law (id int PRIMARY KEY, case_number text, source_kind text NOT NULL);
CREATE TABLE chunks (id int PRIMARY KEY, case_law_id int NOT NULL REFERENCES case_law (id),
                     source_kind text NOT NULL,          -- the denormalised copy
                     content text NOT NULL, emb vector(2),
                     content_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED);
INSERT INTO case_law VALUES (1, 'ext-1', 'external_upload'), (2, 'int-1', 'internal_committee');
INSERT INTO chunks VALUES
    (1, 1, 'external_upload',    'external chunk about leases', '[1, 0]'),
    (2, 2, 'internal_committee', 'internal chunk about leases', '[1, 0]'),
    (3, 2, 'external_upload',    'drifted copy: internal parent, external label, leases', '[1, 0]'),
    (4, 1, 'internal_committee', 'drifted copy: external parent, internal label, leases', '[1, 0]');
SELECT corpus.corpus_create('external_precedents', isolation => '{"source_kind": "external_upload"}');
SELECT corpus.corpus_add_source('external_precedents', 'chunks', 'chunks', text_column => 'content',
    embedding_column => 'emb', tsv_column => 'content_tsv', parent_table => 'case_law',
    parent_fk => 'case_law_id', min_length => 1);
-- only item 1: items 3 and 4 disagree between the copies and are hidden
SELECT m AS mode, array_agg(item_id ORDER BY rank) AS hits
  FROM unnest(ARRAY['hybrid', 'semantic', 'lexical']) m,
       corpus.corpus_hybrid_search('external_precedents', '[1, 0]', 'leases', mode => m)
 GROUP BY m ORDER BY m;
-- both copies in every subplan
SELECT branch, sql LIKE '%p."source_kind" = $%' AND sql LIKE '%i."source_kind" = $%' AS both_copies
  FROM corpus.corpus_explain('external_precedents', '[1, 0]', 'leases');
ROLLBACK;
