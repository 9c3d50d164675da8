-- Operations outside a search: find-similar, the filter check, the health check, evidence
-- calibration, a worker's release, the model change and the refresh of every corpus (both
-- procedures commit per step: this file runs outside a transaction block and cleans up).
\set SHOW_CONTEXT never
\set VERBOSITY terse
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_corpus;
CREATE TABLE ops (id int PRIMARY KEY, court text NOT NULL, body text NOT NULL, emb vector(2),
                  body_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED);
INSERT INTO ops VALUES (1, 'a', 'apples and pears in the orchard', '[1, 0]'),
                       (2, 'a', 'pears grow on old trees', '[0.8, 0.6]'),
                       (3, 'b', 'the court ruled on apples', '[0, 1]');
SELECT corpus.corpus_create('ops', filter_fields => '{"court": "text"}');
SELECT corpus.corpus_add_source('ops', 'ops', 'ops', text_column => 'body', embedding_column => 'emb',
    tsv_column => 'body_tsv', parent_fk => 'id', min_length => 1, embedding_model => 'm1',
    metadata => '{"court": "court"}');

-- find-similar: the item's own vector and text, the item itself left out
SELECT rank, item_id, semantic_rank IS NOT NULL AS semantic
  FROM corpus.corpus_find_similar('ops', 'ops', '1', k => 2, mode => 'semantic');
SELECT rank, item_id FROM corpus.corpus_find_similar('ops', 'ops', '2', k => 5, filters => '{"court": "a"}');
SELECT * FROM corpus.corpus_find_similar('ops', 'ops', 'missing');
SELECT * FROM corpus.corpus_find_similar('ops', 'nope', '1');

-- the filter check: which conditions a search keeps, and why the others are dropped
SELECT field, accepted, condition, reason, sqlstate
  FROM corpus.corpus_check_filters('ops', '{"court": "a", "year": 2020, "court2": {"op": "x"}}') ORDER BY field;
SELECT * FROM corpus.corpus_check_filters('ops', '{"court": "a"}', filter_mode => 'sloppy');

-- the health check of one corpus: every check once per source, none failing here
SELECT "check", status FROM corpus.corpus_health_check('ops') WHERE status = 'fail' ORDER BY 1;
SELECT count(DISTINCT "check") > 5 AS many_checks FROM corpus.corpus_health_check('ops');
SELECT * FROM corpus.corpus_health_check('no-such-corpus');

-- evidence calibration from a gold set: thresholds proposed, not applied unless asked
SELECT corpus.corpus_gold_set_create('ops-gold', 'ops');
INSERT INTO corpus.gold_queries (gold_set, query_id, query_text, query_vec) VALUES
    ('ops-gold', 'q1', 'apples', '[1, 0]'), ('ops-gold', 'q2', 'trees', '[0.8, 0.6]');
INSERT INTO corpus.gold_judgments VALUES ('ops-gold', 'q1', '1', 1), ('ops-gold', 'q2', '2', 1);
SELECT space, model, answerable, applied FROM corpus.corpus_calibrate_evidence('ops-gold');
SELECT evidence FROM corpus.corpora WHERE name = 'ops';
SELECT * FROM corpus.corpus_calibrate_evidence('ops-gold', quantile => 2);

-- a worker's release: its claimed item is pending again, for another worker
UPDATE ops SET emb = NULL WHERE id = 3;
SELECT item_id FROM corpus.corpus_embedding_claim(1, worker => 'w1');
SELECT corpus.corpus_embedding_release('ops', 'emb', '3', version, worker => 'w2')
  FROM corpus.embedding_queue WHERE item_id = '3';
SELECT corpus.corpus_embedding_release('ops', 'emb', '3', version, worker => 'w1')
  FROM corpus.embedding_queue WHERE item_id = '3';
SELECT item_id, state, claimed_by IS NULL AS unclaimed FROM corpus.embedding_queue;

-- a model change: every item queued in committed batches, one NOTICE each
CALL corpus.corpus_set_embedding_model('ops', 'emb', 'm2', batch_size => 2);
SELECT model FROM corpus.embedding_slots;
SELECT item_id, reason, state FROM corpus.embedding_queue ORDER BY item_id;
CALL corpus.corpus_set_embedding_model('ops', 'emb', 'm3', batch_size => 0);
CALL corpus.corpus_set_embedding_model('ops', 'emb', ' ');
CALL corpus.corpus_set_embedding_model('ops', 'nope', 'm3');
SELECT model FROM corpus.embedding_slots;

-- every corpus' statistics, one transaction per corpus
DELETE FROM corpus.lexical_totals;
CALL corpus.corpus_refresh_lexical_stats_each();
SELECT corpus, documents FROM corpus.lexical_totals;
CALL corpus.corpus_refresh_lexical_stats_each(stale_fraction => 2);
CALL corpus.corpus_refresh_lexical_stats_each(only_stale => NULL);

SELECT corpus.corpus_drop('ops');
DROP TABLE ops;
DROP EXTENSION pg_corpus;
DROP EXTENSION vector;
