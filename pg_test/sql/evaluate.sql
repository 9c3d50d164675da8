-- The evaluation harness on a tiny corpus whose metrics can be checked by hand.
BEGIN;
\set ON_ERROR_ROLLBACK on
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION pg_corpus;
CREATE TABLE docs (id int PRIMARY KEY, kind text NOT NULL, body text NOT NULL,
                   body_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
                   emb vector(2));
INSERT INTO docs (id, kind, body, emb) VALUES
    (1, 'a', 'apples and pears',   '[1, 0]'),
    (2, 'a', 'apples and plums',   '[0.9, 0.1]'),
    (3, 'a', 'cherries',           '[0, 1]'),
    (4, 'b', 'apples elsewhere',   '[1, 0]');
SELECT corpus.corpus_create('fruit', isolation => '{"kind": "a"}');
SELECT corpus.corpus_add_source('fruit', 'docs', 'docs', text_column => 'body', embedding_column => 'emb',
    tsv_column => 'body_tsv', parent_fk => 'id', min_length => 1);
SELECT corpus.corpus_gold_set_create('fruit-gold', 'fruit', description => 'hand-made');
INSERT INTO corpus.gold_queries (gold_set, query_id, query_text, query_vec) VALUES
    ('fruit-gold', 'q1', 'apples', '[1, 0]'),
    ('fruit-gold', 'q2', 'cherries', '[0, 1]'),
    ('fruit-gold', 'q3', 'nothing matches', NULL);
INSERT INTO corpus.gold_judgments VALUES
    ('fruit-gold', 'q1', '2', 2), ('fruit-gold', 'q1', '1', 1), ('fruit-gold', 'q1', '4', 3),
    ('fruit-gold', 'q2', '3', 1),
    ('fruit-gold', 'q3', '3', 1);
-- a duplicate judgment is refused
INSERT INTO corpus.gold_judgments VALUES ('fruit-gold', 'q1', '2', 1);
-- semantic needs a vector for every query
SELECT * FROM corpus.corpus_evaluate('fruit-gold', modes => '{semantic}', k => 2);
-- q1 lexical: 1 and 2 tie on ts_rank_cd, id breaks the tie → [1, 2]; doc 4 (grade 3) is in
-- another corpus, so it is never retrieved: recall 2/3, nDCG = (1 + 2/log2 3) / (3 + 2/log2 3)
-- q2: [3] → P@2 = 0.5, recall 1, MRR 1, nDCG 1; q3: no hits → all 0.
SELECT mode, queries, round(precision_at_k::numeric, 6) AS p, round(recall_at_k::numeric, 6) AS r,
       round(mrr::numeric, 6) AS mrr, round(ndcg_at_k::numeric, 6) AS ndcg
  FROM corpus.corpus_evaluate('fruit-gold', modes => '{lexical,hybrid}', k => 2);
SELECT round(((1 + 2 / log(2, 3)) / (3 + 2 / log(2, 3)) + 1 + 0) / 3, 6) AS expected_lexical_ndcg;
SELECT r.mode, q.query_id, q.hits, q.relevant, q.ranking, round(q.ndcg_at_k::numeric, 6) AS ndcg
  FROM corpus.eval_query_results q JOIN corpus.eval_runs r ON r.id = q.run_id ORDER BY r.id, q.query_id;
SELECT metric, queries, round(mean_a::numeric, 6) AS a, round(mean_b::numeric, 6) AS b, wins, losses, ties,
       p_value > 0.05 AS not_significant
  FROM corpus.corpus_compare_runs((SELECT min(id) FROM corpus.eval_runs), (SELECT max(id) FROM corpus.eval_runs));
SELECT * FROM corpus.corpus_compare_queries((SELECT min(id) FROM corpus.eval_runs), (SELECT max(id) FROM corpus.eval_runs), 'f1');
SELECT * FROM corpus.corpus_evaluate('no-such-set');
SELECT * FROM corpus.corpus_compare_runs(-1, -2);
ROLLBACK;
