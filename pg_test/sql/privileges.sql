-- The catalog lives in a schema PUBLIC cannot create in; only privileged roles change it.
BEGIN;
\set ON_ERROR_ROLLBACK on
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION pg_corpus;
SELECT has_schema_privilege('public', 'corpus', 'CREATE') AS public_can_create,
       has_schema_privilege('public', 'corpus', 'USAGE') AS public_can_use;
SELECT c.relname,
       has_table_privilege('public', c.oid, 'SELECT') AS public_select,
       has_table_privilege('public', c.oid, 'INSERT') AS public_insert,
       has_table_privilege('public', c.oid, 'UPDATE') AS public_update,
       has_table_privilege('public', c.oid, 'DELETE') AS public_delete
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'corpus' AND c.relkind = 'r' ORDER BY 1;
-- Two SECURITY DEFINER functions in the extension script: the event trigger that follows renames
-- of item tables' columns (PostgreSQL calls it only as an event trigger), and _item_queued, which
-- tells a Citus shard whether one of its items is queued, only for a session whose user may read
-- the item's table (searches ask it about their own hits); the re-embed triggers
-- generated at registration are too, with search_path pinned: see embedding_queue.sql. Every SQL or PL/pgSQL
-- function pins search_path, except bm25_document (it must stay inlinable for generated
-- columns; it runs with the caller's rights and names everything schema-qualified) and the
-- procedure corpus_set_embedding_model (a procedure with SET cannot COMMIT; it pins
-- search_path with set_config in each of its steps).
SELECT p.proname AS security_definer, p.prorettype::regtype AS returns FROM pg_proc p
  JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'corpus' AND p.prosecdef ORDER BY 1;
SELECT p.proname AS without_pinned_search_path
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'corpus' AND p.prolang <> (SELECT oid FROM pg_language WHERE lanname = 'c')
   AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) s WHERE s LIKE 'search_path=%')
 ORDER BY 1;
-- Volatility as declared.
SELECT p.proname, p.provolatile, p.proparallel, p.proisstrict
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'corpus' ORDER BY 1;
CREATE ROLE corpus_regress_user;
SET ROLE corpus_regress_user;
SELECT corpus.corpus_create('sneaky');
INSERT INTO corpus.corpora (name) VALUES ('sneaky');
SELECT count(*) FROM corpus.corpora;
RESET ROLE;
ROLLBACK;
