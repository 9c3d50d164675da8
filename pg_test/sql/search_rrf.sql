-- corpus_hybrid_search end to end on a tiny corpus whose fusion can be checked by hand.
BEGIN;
\set ON_ERROR_ROLLBACK on
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION pg_corpus;
CREATE TABLE cases (id int PRIMARY KEY, kind text NOT NULL, title text);
CREATE TABLE notes (
    id int PRIMARY KEY,
    case_id int NOT NULL REFERENCES cases (id),
    body text NOT NULL,
    body_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
    emb vector(3),
    page int
);
INSERT INTO cases VALUES (1, 'public', 'Alpha'), (2, 'public', 'Beta'), (3, 'secret', 'Gamma'),
                         (4, 'public', '   ');
INSERT INTO notes (id, case_id, body, emb, page) VALUES
    (1, 1, 'the zebra crossing rule',          '[1, 0, 0]',     1),
    (2, 1, 'zebra zebra zebra appeals',        '[0.9, 0.1, 0]', 2),
    (3, 1, 'unrelated words only here',        '[0.8, 0.2, 0]', 3),
    (4, 1, 'another unrelated note',           '[0.7, 0.3, 0]', 4),
    (5, 2, 'a zebra in a different case',      '[0, 1, 0]',     1),
    (6, 2, 'tiny',                             '[1, 0, 0]',     2),   -- below min_length
    (7, 3, 'zebra secret of the other corpus', '[1, 0, 0]',     1),   -- other corpus
    (8, 4, 'zebra in a case without a title',  '[1, 0, 0]',     1),   -- incomplete parent
    (9, 2, 'no embedding yet but zebra',       NULL,            3);
SELECT corpus.corpus_create('public_notes', isolation => '{"kind": "public"}');
SELECT corpus.corpus_add_source('public_notes', 'notes', 'notes', text_column => 'body',
    embedding_column => 'emb', tsv_column => 'body_tsv', parent_table => 'cases', parent_fk => 'case_id',
    parent_required => '{title}', locator => '{"page": "page", "title": "parent.title"}', min_length => 10);

-- Semantic ranks: 1,2,3,4,5 (6 too short, 7 other corpus, 8 incomplete, 9 no embedding).
-- Lexical ranks (BM25 of zebra, rule; six searchable documents): 1 (both words), 2 (zebra x3),
-- then 9 and 5 (zebra once; 9 is shorter). RRF with k = 20: item 1 = 2/21, item 2 = 2/22.
SELECT rank, item_id, parent_id, round(score::numeric, 6) AS score, semantic_rank, lexical_rank,
       round(semantic_distance::numeric, 4) AS dist, round(lexical_score::numeric, 4) AS lex, locator
  FROM corpus.corpus_hybrid_search('public_notes', '[1, 0, 0]', 'zebra rule', k => 10, max_per_parent => 0);
-- the cap: at most 2 per parent, and still k rows when they exist
SELECT rank, item_id, parent_id FROM corpus.corpus_hybrid_search('public_notes', '[1, 0, 0]', 'zebra rule',
       k => 4, max_per_parent => 2);
SELECT rank, item_id FROM corpus.corpus_hybrid_search('public_notes', '[1, 0, 0]', NULL, k => 3, mode => 'semantic');
SELECT rank, item_id FROM corpus.corpus_hybrid_search('public_notes', NULL, 'zebra', k => 3, mode => 'lexical');
-- PostgreSQL's ts_rank_cd stays selectable for comparison
SET LOCAL pg_corpus.lexical_scorer = 'ts_rank_cd';
SELECT rank, item_id, round(lexical_score::numeric, 4) AS ts_rank_cd
  FROM corpus.corpus_hybrid_search('public_notes', NULL, 'zebra rule', k => 4, mode => 'lexical');
RESET pg_corpus.lexical_scorer;
-- weights: a source's semantic list counted twice as much
UPDATE corpus.sources SET semantic_weight = 2;
SELECT rank, item_id, round(score::numeric, 6) AS score
  FROM corpus.corpus_hybrid_search('public_notes', '[1, 0, 0]', 'zebra rule', k => 3, max_per_parent => 0);
-- the subplans, as run (table oids differ between runs: shown as <oid>)
SELECT source, branch, strategy, sql,
       (SELECT jsonb_agg(CASE WHEN jsonb_typeof(p) = 'number' AND p::text::numeric >= 16384
                              THEN to_jsonb('<oid>'::text) ELSE p END)
          FROM jsonb_array_elements(params) p) AS params
  FROM corpus.corpus_explain('public_notes', '[1, 0, 0]', 'zebra rule', k => 3);
ROLLBACK;
