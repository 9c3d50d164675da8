-- The re-embed trigger, queue and worker protocol, within one transaction (commit visibility,
-- NOTIFY, concurrency and crashes are tested out of process in tests/integration).
BEGIN;
\set ON_ERROR_ROLLBACK on
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION pg_corpus;
CREATE TABLE docs (id bigint PRIMARY KEY, title text, body text NOT NULL, page int, emb vector(2),
                   body_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED);
INSERT INTO docs VALUES (1, 'T1', 'first document about apples', 1, '[1, 0]'),
                        (2, 'T2', 'second document about pears', 1, NULL);
SELECT corpus.corpus_create('d');
SELECT corpus.corpus_add_source('d', 'docs', 'docs', text_column => 'body', embedding_column => 'emb',
    tsv_column => 'body_tsv', parent_fk => 'id', min_length => 1, embedding_inputs => '{title,body}',
    embedding_model => 'toy-2d');
SELECT item_table, embedding_column, id_column, id_type, input_columns, model, dimensions FROM corpus.embedding_slots;
-- registration queued the item that has no embedding yet
SELECT item_id, reason, version, state FROM corpus.embedding_queue ORDER BY item_id;
-- the library's trigger function, the slot's column as argument: SECURITY DEFINER with
-- search_path pinned
SELECT t.tgname, p.proname, p.prosecdef, p.proconfig, encode(t.tgargs, 'escape') AS args
  FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid WHERE t.tgrelid = 'docs'::regclass AND NOT t.tgisinternal
 ORDER BY 1;
-- called other than as registration makes it, it refuses (0A000)
\set VERBOSITY terse
SELECT corpus._embedding_trigger();
CREATE TABLE misfired (id int);
CREATE TRIGGER before_insert BEFORE INSERT ON misfired FOR EACH ROW EXECUTE FUNCTION corpus._embedding_trigger('emb');
INSERT INTO misfired VALUES (1);
DROP TRIGGER before_insert ON misfired;
CREATE TRIGGER per_statement AFTER INSERT ON misfired FOR EACH STATEMENT EXECUTE FUNCTION corpus._embedding_trigger('emb');
INSERT INTO misfired VALUES (1);
DROP TABLE misfired;
\set VERBOSITY default
-- inserts: with an embedding nothing happens, without one the item is queued
INSERT INTO docs VALUES (3, 'T3', 'third document about plums', 2, '[0, 1]'), (4, 'T4', 'fourth', 2, NULL);
-- a text change marks the embedding stale; an unrelated change does not
UPDATE docs SET body = 'first document about green apples' WHERE id = 1;
UPDATE docs SET page = 9 WHERE id = 3;
-- an input column other than the text column counts too
UPDATE docs SET title = 'T3 renamed' WHERE id = 3;
SELECT item_id, reason, version, state FROM corpus.embedding_queue ORDER BY item_id;
-- coalesced: a second change of the same item bumps its version, no second row
UPDATE docs SET body = 'first document about red apples' WHERE id = 1;
SELECT item_id, reason, version FROM corpus.embedding_queue WHERE item_id = '1';
-- searches skip stale embeddings unless asked, and say which hits are stale
SELECT item_id, embedding_stale FROM corpus.corpus_hybrid_search('d', '[1, 0]', NULL, mode => 'semantic');
SELECT item_id, embedding_stale FROM corpus.corpus_hybrid_search('d', '[1, 0]', NULL, mode => 'semantic',
                                                                 include_stale => true);
SELECT item_id, embedding_stale FROM corpus.corpus_hybrid_search('d', NULL, 'apples', mode => 'lexical');
-- an update that brings its own embedding is fresh
UPDATE docs SET body = 'third document about sweet plums', title = 'T3', emb = '[0.1, 0.9]' WHERE id = 3;
SELECT item_id FROM corpus.embedding_queue ORDER BY item_id;
-- the worker protocol
SELECT item_id, version, content, model, dimensions, reason, attempts
  FROM corpus.corpus_embedding_claim(batch_size => 2, worker => 'w1') ORDER BY item_id;
-- (versions come from one sequence: they never repeat for an item)
SELECT version AS v2 FROM corpus.embedding_queue WHERE item_id = '2' \gset
SELECT item_id, state, claimed_by FROM corpus.embedding_queue ORDER BY item_id;
-- a claimed item is not claimed twice while its lease runs
SELECT count(*) FROM corpus.corpus_embedding_claim(batch_size => 10, worker => 'w2') WHERE item_id IN ('1', '2');
-- wrong dimension, wrong model, NULL: clear errors
SELECT corpus.corpus_embedding_complete('docs', 'emb', '2', :v2, '[1, 2, 3]', 'toy-2d');
SELECT corpus.corpus_embedding_complete('docs', 'emb', '2', :v2, '[1, 2]', 'other-model');
SELECT corpus.corpus_embedding_complete('docs', 'emb', '2', :v2, NULL);
-- the text changed after the claim: the result is refused and the item stays queued
UPDATE docs SET body = 'second document about ripe pears' WHERE id = 2;
SELECT corpus.corpus_embedding_complete('docs', 'emb', '2', :v2, '[0.5, 0.5]', 'toy-2d');
SELECT item_id, version > :v2 AS newer_version, state FROM corpus.embedding_queue WHERE item_id = '2';
-- a current result is stored and the item leaves the queue
SELECT corpus.corpus_embedding_complete('docs', 'emb', '1', (SELECT version FROM corpus.embedding_queue WHERE item_id = '1'),
                                        '[0.9, 0.1]', 'toy-2d');
SELECT id, emb FROM docs WHERE id = 1;
SELECT corpus.corpus_embedding_complete('docs', 'emb', '1', 3, '[0.9, 0.1]');
-- failures count: item 4 was claimed once (by w2 above); below max_attempts it goes back to
-- pending, at max_attempts it becomes a dead letter, which is not claimed again until retried
SELECT version AS v4 FROM corpus.embedding_queue WHERE item_id = '4' \gset
SELECT corpus.corpus_embedding_fail('docs', 'emb', '4', :v4, 'model timeout', max_attempts => 2) AS state_after_fail;
SELECT item_id, attempts FROM corpus.corpus_embedding_claim(worker => 'w3') ORDER BY item_id;
SELECT corpus.corpus_embedding_fail('docs', 'emb', '4', :v4, 'model timeout again', max_attempts => 2) AS state_after_fail;
SELECT item_id, state, attempts, last_error FROM corpus.embedding_queue WHERE item_id = '4';
SELECT count(*) FROM corpus.corpus_embedding_claim(worker => 'w4', lease => '1 second') WHERE item_id = '4';
SELECT corpus.corpus_embedding_retry_dead();
SELECT item_id, state, attempts FROM corpus.embedding_queue WHERE item_id = '4';
-- bulk loads can defer the per-row work and queue everything in one statement
SET LOCAL pg_corpus.defer_embedding_queue = on;
INSERT INTO docs SELECT g, 'B', 'bulk document ' || g, 1, NULL FROM generate_series(10, 14) g;
SELECT count(*) AS queued_during_deferred_load FROM corpus.embedding_queue WHERE item_id::int >= 10;
SELECT corpus.corpus_embedding_enqueue('docs', 'emb');
SET LOCAL pg_corpus.defer_embedding_queue = off;
-- deleting an item removes its queue entry; TRUNCATE empties the slot's queue
DELETE FROM docs WHERE id = 10;
SELECT count(*) FROM corpus.embedding_queue WHERE item_id = '10';
TRUNCATE docs;
SELECT count(*) FROM corpus.embedding_queue;
-- errors
SELECT * FROM corpus.corpus_embedding_claim(batch_size => 0);
SELECT corpus.corpus_embedding_complete('docs', 'body_tsv', '1', 1, '[1, 0]');
-- dropping the last source that uses the slot removes its trigger and queue
SELECT corpus.corpus_drop_source('d', 'docs');
SELECT count(*) AS slots FROM corpus.embedding_slots;
SELECT count(*) AS queue FROM corpus.embedding_queue;
SELECT tgname FROM pg_trigger WHERE tgrelid = 'docs'::regclass AND NOT tgisinternal;
ROLLBACK;
