-- The analyser as SQL functions, BM25 with per-corpus statistics, and their isolation.
BEGIN;
\set ON_ERROR_ROLLBACK on
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION pg_corpus;
-- document side (index terms, extra keys labelled C) and query side of the same analyser
SELECT corpus.bm25_document('העוגיות בעוגיות של סבתא', 'hebrew');
SELECT * FROM corpus.bm25_query('בעוגיות', 'hebrew') ORDER BY key;
SELECT corpus.bm25_document('Paní Nováková dala psa panu Novákovi', 'czech');
SELECT * FROM corpus.bm25_query('Novák', 'czech') ORDER BY key;
SELECT corpus.bm25_document('Die Straße und die Bücher', 'german');
SELECT corpus.bm25_document('', 'english'), corpus.bm25_document(NULL, 'english');
SELECT corpus.bm25_document('x', 'klingon');

CREATE TABLE kinds (id int PRIMARY KEY, kind text NOT NULL);
CREATE TABLE notes (
    id int PRIMARY KEY,
    kind_id int NOT NULL REFERENCES kinds (id),
    body text NOT NULL,
    emb vector(2),
    body_bm25 tsvector GENERATED ALWAYS AS (corpus.bm25_document(body, 'english')) STORED
);
CREATE INDEX ON notes USING gin (body_bm25);
INSERT INTO kinds VALUES (1, 'a'), (2, 'b');
INSERT INTO notes (id, kind_id, body, emb)
SELECT g, CASE WHEN g <= 4 THEN 1 ELSE 2 END,
       CASE g WHEN 1 THEN 'the running dogs of the village'
              WHEN 2 THEN 'a dog runs'
              WHEN 3 THEN 'cats sleeping in the sun'
              WHEN 4 THEN 'the village council'
              ELSE 'dogs dogs dogs everywhere in corpus b ' || g END,
       '[1, 0]'
  FROM generate_series(1, 10) g;
SELECT corpus.corpus_create(c, isolation => jsonb_build_object('kind', k))
  FROM (VALUES ('ca', 'a'), ('cb', 'b')) v(c, k);
SELECT corpus.corpus_add_source(c, 'notes', 'notes', text_column => 'body', embedding_column => 'emb',
    tsv_column => 'body_bm25', language => 'english', parent_table => 'kinds', parent_fk => 'kind_id',
    min_length => 1)
  FROM (VALUES ('ca'), ('cb')) v(c);
-- statistics are per corpus: "dog" is in 2 of corpus a's 4 documents and in all 6 of b's
SELECT corpus, documents, total_length, terms FROM corpus.lexical_totals ORDER BY corpus;
SELECT corpus, term, df FROM corpus.lexical_stats WHERE term IN ('dog', 'villag', 'the') ORDER BY corpus, term;
-- stemming meets "runs" and "running", "dogs" and "dog"
SELECT rank, item_id, round(lexical_score::numeric, 4) AS bm25
  FROM corpus.corpus_hybrid_search('ca', NULL, 'dog running', mode => 'lexical');
-- the other corpus' documents never count: its own ranking of the same words
SELECT rank, item_id FROM corpus.corpus_hybrid_search('cb', NULL, 'dog running', mode => 'lexical', k => 3);
-- new documents count after a refresh (staleness is measured from pg_stat counters, which only
-- move at commit: tests/integration covers the only_stale policy and the health check)
INSERT INTO notes (id, kind_id, body, emb) SELECT g, 1, 'village dog ' || g, '[0, 1]' FROM generate_series(11, 20) g;
SELECT corpus, documents, refreshed FROM corpus.corpus_refresh_lexical_stats('ca');
SELECT corpus, term, df FROM corpus.lexical_stats WHERE term = 'dog' ORDER BY corpus;
-- the candidate budget never costs rows: with a budget of one document the keys are pruned,
-- and the search widens (budget with it) until k rows or every match is found
SELECT count(*) AS default_budget FROM corpus.corpus_hybrid_search('ca', NULL, 'dog running council', mode => 'lexical', k => 12, max_per_parent => 0);
SET LOCAL pg_corpus.bm25_candidate_budget = 1;
SELECT count(*) AS budget_1 FROM corpus.corpus_hybrid_search('ca', NULL, 'dog running council', mode => 'lexical', k => 12, max_per_parent => 0);
RESET pg_corpus.bm25_candidate_budget;
SELECT * FROM corpus.corpus_refresh_lexical_stats(stale_fraction => 2);
-- _bm25_score keeps its query side per call site: arguments that change from row to row (NULL
-- keys skipped, NULL weights 0) still score by the formula. Note 1 has dl 3 (run, dog, villag),
-- each once: a matching key adds weight · 1 / (1 + 1.2 · (0.25 + 0.75 · 3/5)) = weight / 1.84.
SELECT v.n, round(corpus._bm25_score(n.body_bm25, v.keys, v.weights, 5, 1.2, 0.75)::numeric, 6) AS score,
       round((v.matching / 1.84)::numeric, 6) AS expected
  FROM notes n,
       (VALUES (1, '{dog}'::text[], '{1}'::float8[], 1), (2, '{dog}', '{2}', 2), (3, '{villag,dog}', '{1,1}', 2),
               (4, '{dog}', '{2}', 2), (5, ARRAY[NULL, 'dog'], '{5,1}', 1), (6, '{dog}', ARRAY[NULL]::float8[], 0),
               (7, '{cat,dog}', '{3,1}', 1)) v(n, keys, weights, matching)
 WHERE n.id = 1 ORDER BY v.n;
ROLLBACK;
