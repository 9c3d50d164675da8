-- The definition functions (corpus_create, corpus_alter, corpus_list, corpus_add_source,
-- corpus_drop_source, corpus_add_edges, corpus_drop_edges, corpus_drop, corpus_audit_purge):
-- what each writes, and the error (message and hint) of every mistake it refuses.
BEGIN;
\set ON_ERROR_ROLLBACK on
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION pg_corpus;
CREATE TABLE parents (id int PRIMARY KEY, title text NOT NULL, tenant text NOT NULL);
CREATE TABLE items (id int PRIMARY KEY, parent_id int NOT NULL REFERENCES parents, body text NOT NULL,
                    body_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
                    emb vector(2));
CREATE TABLE cites (citing int NOT NULL, cited int NOT NULL);
INSERT INTO parents VALUES (1, 'first', 'a'), (2, 'second', 'b');
INSERT INTO items (id, parent_id, body, emb) VALUES (1, 1, 'apples and pears', '[1, 0]'),
                                                   (2, 2, 'plums', '[0, 1]');

-- corpus_create: names, argument shapes, duplicates
SELECT corpus.corpus_create('Tenant');
SELECT corpus.corpus_create(NULL);
SELECT corpus.corpus_create('t', isolation => '[1]');
SELECT corpus.corpus_create('t', must_include => '{}');
SELECT corpus.corpus_create('t', audit => 'null');
SELECT corpus.corpus_create('t', isolation => '{"tenant": "a"}', description => 'tenant a',
                            filter_fields => '{"title": "text"}');
SELECT corpus.corpus_create('t');
SELECT name, description, isolation, required_filters, filter_fields, sources, edges FROM corpus.corpus_list();

-- corpus_add_source: the corpus, the source name, required arguments, embedding inputs
SELECT corpus.corpus_add_source('nope', 'items', 'items', 'body', 'emb', 'body_tsv', parent_fk => 'parent_id');
SELECT corpus.corpus_add_source('t', 'Items', 'items', 'body', 'emb', 'body_tsv', parent_fk => 'parent_id');
SELECT corpus.corpus_add_source('t', 'items', 'items', 'body', 'emb', 'body_tsv');
SELECT corpus.corpus_add_source('t', 'items', 'items', 'body', 'emb', 'body_tsv', parent_fk => 'parent_id',
                                embedding_inputs => '{}');
SELECT corpus.corpus_add_source('t', 'items', 'items', 'body', 'emb', 'body_tsv', parent_fk => 'parent_id',
                                parent_table => 'parents', parent_required => '{title}', min_length => 1);
SELECT corpus.corpus_add_source('t', 'items', 'items', 'body', 'emb', 'body_tsv', parent_fk => 'parent_id');
SELECT s->>'source' AS source, s->>'item_table' AS item_table, s->>'ts_config' AS ts_config,
       s->'parent_required' AS parent_required, s->>'min_length' AS min_length
  FROM corpus.corpus_list() l, jsonb_array_elements(l.sources) s;
SELECT item_table, embedding_column, input_columns, dimensions FROM corpus.embedding_slots;

-- corpus_alter: shapes, an unknown corpus, a change that stays
SELECT corpus.corpus_alter('t', graph => '"x"');
SELECT corpus.corpus_alter('nope', description => 'x');
SELECT corpus.corpus_alter('t', description => 'tenant a, altered');
SELECT description, isolation FROM corpus.corpus_list();

-- corpus_add_edges / corpus_drop_edges
SELECT corpus.corpus_add_edges('nope', 'cites', 'cites', 'items', 'citing', 'items', 'cited');
SELECT corpus.corpus_add_edges('t', 'Cites', 'cites', 'items', 'citing', 'items', 'cited');
SELECT corpus.corpus_add_edges('t', 'cites', NULL, 'items', 'citing', 'items', 'cited');
SELECT corpus.corpus_add_edges('t', 'cites', 'cites', 'items', 'citing', 'other', 'cited');
SELECT corpus.corpus_add_edges('t', 'cites', 'cites', 'items', 'citing', 'items', 'cited');
SELECT corpus.corpus_add_edges('t', 'cites', 'cites', 'items', 'citing', 'items', 'cited');
SELECT e->>'name' AS name, e->>'edge_table' AS edge_table FROM corpus.corpus_list() l, jsonb_array_elements(l.edges) e;
SELECT corpus.corpus_drop_edges('t', 'other');
SELECT corpus.corpus_drop_edges('t', 'cites');

-- corpus_audit_purge
SELECT corpus.corpus_audit_purge(interval '-1 day');
SELECT corpus.corpus_audit_purge(NULL);
SELECT corpus.corpus_audit_purge(interval '90 days', 't');

-- corpus_drop_source / corpus_drop: the slot goes with its last source
SELECT corpus.corpus_drop_source('t', 'other');
SELECT corpus.corpus_drop_source('t', 'items');
SELECT count(*) AS slots FROM corpus.embedding_slots;
SELECT corpus.corpus_drop('nope');
SELECT corpus.corpus_drop('nope', if_exists => true);
SELECT corpus.corpus_drop('t');
SELECT count(*) AS corpora FROM corpus.corpus_list();
ROLLBACK;
