-- Corpus catalog: definitions are validated against the real tables when they are made.
BEGIN;
\set ON_ERROR_ROLLBACK on
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION pg_corpus;

CREATE TABLE cases (id int PRIMARY KEY, kind text NOT NULL, title text, year int);
CREATE TABLE notes (
    id int PRIMARY KEY,
    case_id int NOT NULL REFERENCES cases (id),
    body text NOT NULL,
    body_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
    emb vector(3),
    loose vector,
    page int
);

SELECT corpus.corpus_create('public_notes', isolation => '{"kind": "public"}',
                            filter_fields => '{"year": "integer"}', description => 'notes of public cases');
SELECT corpus.corpus_add_source('public_notes', 'notes', 'notes', text_column => 'body',
    embedding_column => 'emb', tsv_column => 'body_tsv', parent_table => 'cases', parent_fk => 'case_id',
    parent_required => '{title}', locator => '{"page": "page", "title": "parent.title"}', min_length => 5);
SELECT name, isolation, required_filters, filter_fields, jsonb_array_length(sources) AS sources
  FROM corpus.corpus_list();

-- Every mistake names the problem and says what to do.
SELECT corpus.corpus_create('public_notes');                          -- exists
SELECT corpus.corpus_create('Bad Name');                              -- invalid name
SELECT corpus.corpus_create('x', isolation => '{"kind": []}');        -- empty value list
SELECT corpus.corpus_create('x', filter_fields => '{"kind": "text"}', isolation => '{"kind": "a"}');
SELECT corpus.corpus_create('x', filter_fields => '{"year": "float"}');
SELECT corpus.corpus_create('x', required_filters => '{year}');       -- not declared
SELECT corpus.corpus_add_source('nope', 's', 'notes', 'body', 'emb', 'body_tsv', parent_fk => 'case_id');
SELECT corpus.corpus_add_source('public_notes', 'notes', 'notes', 'body', 'emb', 'body_tsv', parent_fk => 'case_id');
SELECT corpus.corpus_add_source('public_notes', 's2', 'no_such_table', 'body', 'emb', 'body_tsv', parent_fk => 'case_id');
SELECT corpus.corpus_add_source('public_notes', 's2', 'notes', 'text', 'emb', 'body_tsv', parent_fk => 'case_id',
    parent_table => 'cases');
SELECT corpus.corpus_add_source('public_notes', 's2', 'notes', 'body', 'body', 'body_tsv', parent_fk => 'case_id',
    parent_table => 'cases');
SELECT corpus.corpus_add_source('public_notes', 's2', 'notes', 'body', 'loose', 'body_tsv', parent_fk => 'case_id',
    parent_table => 'cases');
SELECT corpus.corpus_add_source('public_notes', 's2', 'notes', 'body', 'emb', 'body', parent_fk => 'case_id',
    parent_table => 'cases');
SELECT corpus.corpus_add_source('public_notes', 's2', 'notes', 'body', 'emb', 'body_tsv', parent_fk => 'case_id',
    parent_table => 'cases', locator => '{"p": "parent.pages"}');
SELECT corpus.corpus_add_source('public_notes', 's2', 'notes', 'body', 'emb', 'body_tsv', parent_fk => 'case_id',
    parent_table => 'cases', distance => 'manhattan');
SELECT corpus.corpus_add_source('public_notes', 's2', 'notes', 'body', 'emb', 'body_tsv', parent_fk => 'body',
    parent_table => 'cases');
-- the isolation column must exist on every source's parent
SELECT corpus.corpus_alter('public_notes', isolation => '{"visibility": "public"}');
-- a failed definition leaves nothing behind
SELECT count(*) AS sources FROM corpus.sources;

SELECT corpus.corpus_drop_source('public_notes', 'nope');
SELECT corpus.corpus_drop('nope');
SELECT corpus.corpus_drop('nope', if_exists => true);
SELECT corpus.corpus_drop_source('public_notes', 'notes');
SELECT corpus.corpus_drop('public_notes');
SELECT count(*) FROM corpus.corpus_list();
ROLLBACK;
