-- pg_corpus 0.3.0 -> 0.4.0
--
-- Behaviour moves from PL/pgSQL into the library: functions that were PL/pgSQL are redefined
-- as C functions of the same signature (their arguments, defaults, result and attributes as
-- the install script declares them).

-- The definition functions: corpora, sources and edge sets.
CREATE OR REPLACE FUNCTION corpus.corpus_create(name text, isolation jsonb DEFAULT '{}',
    required_filters text[] DEFAULT '{}', filter_fields jsonb DEFAULT '{}', description text DEFAULT NULL,
    spaces jsonb DEFAULT '{}', evidence jsonb DEFAULT '{}', must_include jsonb DEFAULT '[]',
    graph jsonb DEFAULT '{}', audit jsonb DEFAULT '{}')
RETURNS void VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_create_wrapper';
-- A corpus' ranking settings: the fusion defaults of its searches, set by corpus_alter's
-- ranking argument or by corpus_tune.
ALTER TABLE corpus.corpora ADD COLUMN ranking jsonb NOT NULL DEFAULT '{}'
    CONSTRAINT corpora_ranking_check CHECK (jsonb_typeof(ranking) = 'object');
-- The default rank constant is 20 from this release on; corpora defined before keep the 60 they
-- were searched with, so that the update changes no answer (corpus_alter(ranking => '{"rrf_k":
-- null}') adopts the new default).
UPDATE corpus.corpora SET ranking = '{"rrf_k": 60}';
DROP FUNCTION corpus.corpus_alter(text, jsonb, text[], jsonb, text, jsonb, jsonb, jsonb, jsonb, jsonb);
CREATE FUNCTION corpus.corpus_alter(name text, isolation jsonb DEFAULT NULL,
    required_filters text[] DEFAULT NULL, filter_fields jsonb DEFAULT NULL, description text DEFAULT NULL,
    spaces jsonb DEFAULT NULL, evidence jsonb DEFAULT NULL, must_include jsonb DEFAULT NULL,
    graph jsonb DEFAULT NULL, audit jsonb DEFAULT NULL, ranking jsonb DEFAULT NULL)
RETURNS void VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_alter_wrapper';
CREATE OR REPLACE FUNCTION corpus.corpus_drop(name text, if_exists boolean DEFAULT false)
RETURNS void VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_drop_wrapper';
-- corpus_add_source answers what it found: a new result type, so the function is dropped and
-- created again.
DROP FUNCTION corpus.corpus_add_source(text, text, regclass, text, text, text, text, regclass, text, text, text[],
    jsonb, jsonb, jsonb, integer, regconfig, text, float8, float8, text[], text, text, text);
CREATE FUNCTION corpus.corpus_add_source(corpus text, source text, item_table regclass,
    text_column text, embedding_column text, tsv_column text, id_column text DEFAULT 'id',
    parent_table regclass DEFAULT NULL, parent_fk text DEFAULT NULL, parent_key text DEFAULT 'id',
    parent_required text[] DEFAULT '{}', rule jsonb DEFAULT '{}', locator jsonb DEFAULT '{}',
    metadata jsonb DEFAULT '{}', min_length integer DEFAULT 50, ts_config regconfig DEFAULT 'simple',
    distance text DEFAULT 'cosine', semantic_weight float8 DEFAULT 1, lexical_weight float8 DEFAULT 1,
    embedding_inputs text[] DEFAULT NULL, embedding_model text DEFAULT NULL, language text DEFAULT NULL,
    space text DEFAULT NULL)
RETURNS TABLE (source text, table_rows bigint, items bigint, searchable bigint, below_min_length bigint,
               hidden_by_incomplete_parents bigint, excluded_by_source_rule bigint, missing_embedding bigint,
               counted text)
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'add_source_wrapper';
CREATE OR REPLACE FUNCTION corpus.corpus_drop_source(corpus text, source text)
RETURNS void VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_drop_source_wrapper';
CREATE OR REPLACE FUNCTION corpus.corpus_add_edges(corpus text, name text, edge_table regclass,
    from_source text, from_column text, to_source text, to_column text)
RETURNS void VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_add_edges_wrapper';
CREATE OR REPLACE FUNCTION corpus.corpus_drop_edges(corpus text, name text)
RETURNS void VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_drop_edges_wrapper';
CREATE OR REPLACE FUNCTION corpus.corpus_audit_purge(older_than interval, corpus text DEFAULT NULL)
RETURNS bigint VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_audit_purge_wrapper';
DROP FUNCTION corpus.corpus_list();
CREATE FUNCTION corpus.corpus_list()
RETURNS TABLE (name text, description text, isolation jsonb, required_filters text[], filter_fields jsonb,
               sources jsonb, spaces jsonb, evidence jsonb, must_include jsonb, graph jsonb, edges jsonb,
               audit jsonb, ranking jsonb)
STRICT STABLE PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_list_wrapper';
DROP FUNCTION corpus._require_object(jsonb, text);
DROP FUNCTION corpus._require_array(jsonb, text);

-- Gold sets.
CREATE OR REPLACE FUNCTION corpus.corpus_gold_set_create(name text, corpus text, level text DEFAULT 'item',
    description text DEFAULT NULL)
RETURNS void VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_gold_set_create_wrapper';
CREATE OR REPLACE FUNCTION corpus.corpus_compare_queries(run_a bigint, run_b bigint, metric text DEFAULT 'ndcg')
RETURNS TABLE (query_id text, value_a float8, value_b float8, delta float8)
STABLE PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_compare_queries_wrapper';

-- The re-embed queue's worker API; Citus claims on the other nodes through corpus._citus_claim.
CREATE FUNCTION corpus._citus_claim(wanted integer, lease interval, worker text, only_table regclass)
RETURNS SETOF corpus._claimed_item
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    node   record;
    answer jsonb;
    got    integer := 0;
BEGIN
    IF NOT corpus._citus_coordinator()
       OR (only_table IS NOT NULL AND corpus._citus_table_kind(only_table) IS DISTINCT FROM 'distributed') THEN
        RETURN;
    END IF;
    FOR node IN SELECT * FROM corpus._citus_other_nodes() LOOP
        EXIT WHEN got >= wanted;
        BEGIN
            SELECT a::jsonb INTO answer FROM corpus._citus_on_nodes(ARRAY[node.node_name], ARRAY[node.node_port],
                format('SELECT coalesce(jsonb_agg(c), ''[]'')::text FROM corpus.corpus_embedding_claim(%L::integer, %L::interval, %L, %L::regclass) c',
                       wanted - got, lease, COALESCE(worker, session_user::text || '@' || pg_backend_pid()),
                       only_table::text)) a;
        EXCEPTION WHEN connection_failure THEN
            RAISE WARNING 'pg_corpus: %', SQLERRM USING HINT = 'Its queue entries are claimed once it answers again.';
            CONTINUE;
        END;
        got := got + jsonb_array_length(answer);
        RETURN QUERY SELECT * FROM jsonb_populate_recordset(NULL::corpus._claimed_item, answer);
    END LOOP;
END
$$;
CREATE OR REPLACE FUNCTION corpus.corpus_embedding_claim(batch_size integer DEFAULT 16,
    lease interval DEFAULT '5 minutes', worker text DEFAULT NULL, only_table regclass DEFAULT NULL)
RETURNS TABLE (item_table regclass, embedding_column name, item_id text, version bigint, content text,
               model text, dimensions integer, reason text, attempts integer)
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_embedding_claim_wrapper';
CREATE OR REPLACE FUNCTION corpus.corpus_embedding_complete(item_table regclass, embedding_column name,
    item_id text, version bigint, embedding vector, model text DEFAULT NULL)
RETURNS text VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_embedding_complete_wrapper';
CREATE OR REPLACE FUNCTION corpus.corpus_embedding_fail(item_table regclass, embedding_column name,
    item_id text, version bigint, error text, max_attempts integer DEFAULT 5)
RETURNS text VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_embedding_fail_wrapper';
CREATE OR REPLACE FUNCTION corpus.corpus_embedding_release(item_table regclass, embedding_column name,
    item_id text, version bigint, worker text DEFAULT NULL)
RETURNS text VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_embedding_release_wrapper';
CREATE OR REPLACE FUNCTION corpus.corpus_embedding_retry_dead(only_table regclass DEFAULT NULL)
RETURNS bigint VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_embedding_retry_dead_wrapper';
CREATE OR REPLACE FUNCTION corpus.corpus_embedding_enqueue(item_table regclass, embedding_column name,
    only_missing boolean DEFAULT true)
RETURNS bigint VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_embedding_enqueue_wrapper';

-- Corpus definitions are read by the library's own query; a table's description stays callable.
CREATE OR REPLACE FUNCTION corpus._relation_json(rel regclass)
RETURNS jsonb STABLE PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', '_relation_json_wrapper';
DROP FUNCTION corpus._corpus_definition(text);
DROP FUNCTION corpus._snapshot_column_types(text, text);

-- The re-embed trigger is the library's: every slot's triggers call it with the slot's column,
-- and the functions generated per slot (and what wrote them) go.
DROP EVENT TRIGGER pg_corpus_follow_item_tables;
DROP FUNCTION corpus._follow_item_table_changes();
DROP FUNCTION corpus._attach_embedding_slot(regclass, name, name, name[], text, integer);
DROP FUNCTION corpus._detach_embedding_slot(regclass, name);
DROP FUNCTION corpus._write_embedding_trigger(corpus.embedding_slots);
DROP FUNCTION corpus._announce_work(oid, oid);
CREATE FUNCTION corpus._embedding_trigger() RETURNS trigger LANGUAGE c SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS 'MODULE_PATHNAME', '_embedding_trigger_wrapper';
CREATE FUNCTION corpus._embedding_triggers_renew() RETURNS bigint
LANGUAGE c AS 'MODULE_PATHNAME', '_embedding_triggers_renew_wrapper';
SELECT corpus._embedding_triggers_renew();
DROP FUNCTION corpus._embedding_triggers_renew();

-- The queue's DBA operations are the library's: a model change's steps, a slot's copy on
-- another Citus node; what only they used goes.
CREATE OR REPLACE FUNCTION corpus._embedding_slot_replica(slot jsonb)
RETURNS bigint VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', '_embedding_slot_replica_wrapper';
CREATE OR REPLACE FUNCTION corpus._embedding_model_start(item_table regclass, embedding_column name, model text)
RETURNS bigint VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', '_embedding_model_start_wrapper';
CREATE OR REPLACE FUNCTION corpus._embedding_model_step(item_table regclass, embedding_column name, state jsonb,
    batch_size integer)
RETURNS jsonb VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', '_embedding_model_step_wrapper';
DROP FUNCTION corpus._embedding_model_batch(regclass, name, regclass, text, integer);
DROP FUNCTION corpus._enqueue_local(corpus.embedding_slots, boolean, boolean);
DROP FUNCTION corpus._lock_queue(regclass[]);
DROP FUNCTION corpus._embedding_slot(regclass, name);
DROP FUNCTION corpus._require_slot_columns(corpus.embedding_slots, name, name);
DROP FUNCTION corpus._trigger_slot_table(oid, name);
CREATE OR REPLACE FUNCTION corpus._table_changes(tables oid[])
RETURNS bigint VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', '_table_changes_wrapper';
CREATE OR REPLACE FUNCTION corpus._citus_on_nodes(names text[], ports integer[], command text)
RETURNS SETOF text VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', '_citus_on_nodes_wrapper';
CREATE OR REPLACE FUNCTION corpus._citus_on_other_nodes(command text)
RETURNS SETOF text VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', '_citus_on_other_nodes_wrapper';

-- The worker API reads and writes items itself: its owner-rights accessors leave the SQL surface.
DROP FUNCTION corpus._embedding_item_text(oid, smallint, smallint[], text);
DROP FUNCTION corpus._embedding_item_lock(oid, smallint, smallint, text);
DROP FUNCTION corpus._embedding_item_store(oid, smallint, smallint, text, anyelement);
DROP FUNCTION corpus._embedding_queue_deferred();

-- Searches ask whether a text reaches a source's min_length with corpus._has_content, which
-- reads a stored text's beginning first, and the rest only when the beginning has too few
-- content characters.
CREATE FUNCTION corpus._has_content(pg_catalog.text, pg_catalog.int4) RETURNS pg_catalog.bool
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', '_has_content';

-- corpus_bm25: an index access method ranking rows by BM25 (sql/bm25_index.sql).
CREATE TYPE corpus.bm25_scoring AS (
    keys pg_catalog.text[],
    weights pg_catalog.float8[],
    avg_doc_len pg_catalog.float8,
    k1 pg_catalog.float8,
    b pg_catalog.float8,
    page_size pg_catalog.int4
);

CREATE FUNCTION corpus._bm25_distance(pg_catalog.tsvector, corpus.bm25_scoring) RETURNS pg_catalog.float8
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE COST 10
AS 'MODULE_PATHNAME', '_bm25_distance';

CREATE OPERATOR corpus.<@> (
    LEFTARG = pg_catalog.tsvector,
    RIGHTARG = corpus.bm25_scoring,
    FUNCTION = corpus._bm25_distance
);

-- (LEAKPROOF: it never raises, whatever its arguments: a scoring it cannot read holds no
-- row. Under row-level security the condition can then still be the index's.)
CREATE FUNCTION corpus._bm25_match(pg_catalog.tsvector, corpus.bm25_scoring) RETURNS pg_catalog.bool
LANGUAGE c IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE COST 10
AS 'MODULE_PATHNAME', '_bm25_match';

-- (no selectivity estimator: PostgreSQL's default, half the rows, keeps an ORDER BY ... LIMIT
-- ranking through the index, whose first rows cost the same however many rows hold a key)
CREATE OPERATOR corpus.||| (
    LEFTARG = pg_catalog.tsvector,
    RIGHTARG = corpus.bm25_scoring,
    FUNCTION = corpus._bm25_match
);

CREATE FUNCTION corpus._bm25_index_handler(internal) RETURNS index_am_handler
LANGUAGE c AS 'MODULE_PATHNAME', '_bm25_index_handler';

CREATE ACCESS METHOD corpus_bm25 TYPE INDEX HANDLER corpus._bm25_index_handler;

CREATE OPERATOR CLASS corpus.bm25_tsvector_ops
DEFAULT FOR TYPE pg_catalog.tsvector USING corpus_bm25 AS
    OPERATOR 1 corpus.<@> (pg_catalog.tsvector, corpus.bm25_scoring) FOR ORDER BY pg_catalog.float_ops,
    OPERATOR 2 corpus.||| (pg_catalog.tsvector, corpus.bm25_scoring);

-- Further key columns (USING corpus_bm25 (body_bm25, kind)): each row's value is held as a key
-- of its own, so that a condition col = v or col = ANY(array) restricts the ranking to the rows
-- holding one of the values instead of leaving them to be filtered after it.
CREATE OPERATOR CLASS corpus.bm25_text_ops
DEFAULT FOR TYPE pg_catalog.text USING corpus_bm25 AS
    OPERATOR 3 pg_catalog.= (pg_catalog.text, pg_catalog.text);
CREATE FUNCTION corpus.bm25_index_check("index" regclass, heapallindexed boolean DEFAULT true)
RETURNS TABLE (segments integer, documents bigint, terms bigint, postings bigint, pending_rows bigint, pages bigint,
               free_pages bigint, heap_rows bigint)
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'bm25_index_check_wrapper';

-- Searches and evaluations take rrf_k from the corpus' ranking settings unless the call gives it;
-- corpus_hybrid_search gains "offset" (pages of one ranking) and query_model (the model of the
-- query vector, checked against the embeddings'): a new argument list, so the function is
-- dropped and created again.
DROP FUNCTION corpus.corpus_hybrid_search(text, vector, text, integer, jsonb, text, integer, integer, integer,
    boolean, boolean, jsonb, text, jsonb, boolean, boolean);
CREATE FUNCTION corpus.corpus_hybrid_search(corpus text, query_vec vector, query_text text,
    k integer DEFAULT 10, filters jsonb DEFAULT '{}', mode text DEFAULT 'hybrid', max_per_parent integer DEFAULT 3,
    candidates integer DEFAULT NULL, rrf_k integer DEFAULT NULL, include_stale boolean DEFAULT false,
    feedback boolean DEFAULT NULL, extra_queries jsonb DEFAULT NULL, filter_mode text DEFAULT 'strict',
    query_vectors jsonb DEFAULT NULL, evidence boolean DEFAULT NULL, expand boolean DEFAULT false,
    "offset" integer DEFAULT 0, query_model text DEFAULT NULL)
RETURNS TABLE (rank integer, corpus text, source text, item_id text, parent_id text, score float8,
               semantic_rank integer, semantic_distance float8, lexical_rank integer, lexical_score float8,
               content text, locator jsonb, metadata jsonb, embedding_stale boolean, query_ranks jsonb,
               evidence jsonb, origin jsonb)
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'hybrid_search_page_wrapper';
-- corpus_hybrid_search_typed: the same search, item ids in the corpus' key type.
CREATE FUNCTION corpus.corpus_hybrid_search_typed(id_type anyelement, corpus text, query_vec vector,
    query_text text, k integer DEFAULT 10, filters jsonb DEFAULT '{}', mode text DEFAULT 'hybrid',
    max_per_parent integer DEFAULT 3, candidates integer DEFAULT NULL, rrf_k integer DEFAULT NULL,
    include_stale boolean DEFAULT false, feedback boolean DEFAULT NULL, extra_queries jsonb DEFAULT NULL,
    filter_mode text DEFAULT 'strict', query_vectors jsonb DEFAULT NULL, evidence boolean DEFAULT NULL,
    expand boolean DEFAULT false, "offset" integer DEFAULT 0, query_model text DEFAULT NULL)
RETURNS TABLE (rank integer, corpus text, source text, item_id anyelement, parent_id text, score float8,
               semantic_rank integer, semantic_distance float8, lexical_rank integer, lexical_score float8,
               content text, locator jsonb, metadata jsonb, embedding_stale boolean, query_ranks jsonb,
               evidence jsonb, origin jsonb)
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'hybrid_search_typed_wrapper';
CREATE OR REPLACE FUNCTION corpus.corpus_find_similar(corpus text, source text, item_id text,
    k integer DEFAULT 10, filters jsonb DEFAULT '{}', mode text DEFAULT 'hybrid', max_per_parent integer DEFAULT 3,
    exclude_parent boolean DEFAULT false, candidates integer DEFAULT NULL, rrf_k integer DEFAULT NULL,
    include_stale boolean DEFAULT false, filter_mode text DEFAULT 'strict')
RETURNS TABLE (rank integer, corpus text, source text, item_id text, parent_id text, score float8,
               semantic_rank integer, semantic_distance float8, lexical_rank integer, lexical_score float8,
               content text, locator jsonb, metadata jsonb, embedding_stale boolean, query_ranks jsonb,
               evidence jsonb, origin jsonb)
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_find_similar_wrapper';
CREATE OR REPLACE FUNCTION corpus.corpus_evaluate(gold_set text,
    modes text[] DEFAULT ARRAY['semantic', 'lexical', 'hybrid'], k integer DEFAULT 10,
    max_per_parent integer DEFAULT NULL, rrf_k integer DEFAULT NULL, candidates integer DEFAULT NULL,
    store boolean DEFAULT true, extra_queries boolean DEFAULT false, evidence boolean DEFAULT false,
    expand boolean DEFAULT false)
RETURNS TABLE (run_id bigint, mode text, queries integer, precision_at_k float8, recall_at_k float8,
               mrr float8, ndcg_at_k float8)
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'evaluate_wrapper';

-- corpus_tune: fusion settings chosen on a gold set by cross-validation, and their reversal.
CREATE TABLE corpus.tune_runs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    gold_set      text NOT NULL REFERENCES corpus.gold_sets (name) ON DELETE CASCADE,
    corpus        text NOT NULL,
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    tuned_by      name NOT NULL DEFAULT current_user,
    queries       integer NOT NULL,
    folds         integer NOT NULL,
    seed          bigint NOT NULL,
    baseline_ndcg float8 NOT NULL,
    tuned_ndcg    float8 NOT NULL,
    p_value       float8 NOT NULL,
    settings      jsonb NOT NULL,
    previous      jsonb NOT NULL,
    fold_settings jsonb NOT NULL,
    applied       boolean NOT NULL,
    reverted_at   timestamptz
);
SELECT pg_catalog.pg_extension_config_dump('corpus.tune_runs', '');
REVOKE ALL ON corpus.tune_runs FROM PUBLIC;
CREATE FUNCTION corpus.corpus_tune(corpus text, gold_set text, folds integer DEFAULT 5,
    budget_seconds float8 DEFAULT 600, apply boolean DEFAULT false, alpha float8 DEFAULT 0.05,
    seed bigint DEFAULT 0, k integer DEFAULT 10)
RETURNS TABLE (run_id bigint, queries integer, folds integer, baseline_ndcg float8, tuned_ndcg float8,
               gain float8, p_value float8, significant boolean, applied boolean, settings jsonb, previous jsonb)
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_tune_wrapper';
CREATE FUNCTION corpus.corpus_tune_revert(corpus text) RETURNS bigint
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_tune_revert_wrapper';

-- corpus_fetch: one item's full text and provenance under the corpus predicate.
CREATE FUNCTION corpus.corpus_fetch(corpus text, source text, item_id text, filters jsonb DEFAULT '{}')
RETURNS TABLE (corpus text, source text, item_id text, parent_id text, content text, locator jsonb,
               metadata jsonb, embedding_stale boolean)
STABLE PARALLEL RESTRICTED LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_fetch_wrapper';

-- Snippets: the passage of a text with the most query words, marked, by the BM25 analyser.
CREATE FUNCTION corpus.bm25_snippet(document text, query text, language text, max_chars integer DEFAULT 240,
    start_mark text DEFAULT '<b>', stop_mark text DEFAULT '</b>') RETURNS text
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'bm25_snippet_wrapper';
CREATE FUNCTION corpus.corpus_snippet(corpus text, source text, content text, query_text text,
    max_chars integer DEFAULT 240, start_mark text DEFAULT '<b>', stop_mark text DEFAULT '</b>') RETURNS text
STABLE PARALLEL RESTRICTED LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_snippet_wrapper';

-- corpus_why_not: the rule that keeps one item out of a search.
CREATE FUNCTION corpus.corpus_why_not(corpus text, source text, item_id text, query_vec vector DEFAULT NULL,
    query_text text DEFAULT NULL, k integer DEFAULT 10, filters jsonb DEFAULT '{}', mode text DEFAULT 'hybrid',
    max_per_parent integer DEFAULT 3, evidence boolean DEFAULT NULL, include_stale boolean DEFAULT false)
RETURNS TABLE (reason text, detail jsonb, hint text)
STABLE PARALLEL RESTRICTED LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_why_not_wrapper';

-- Sources follow renames of their columns: the attribute number of every column of their
-- tables, under its name now (what the definitions name).
UPDATE corpus.sources s
   SET column_types = s.column_types || jsonb_build_object('attnums', jsonb_build_object(
       'item', COALESCE((SELECT jsonb_object_agg(a.attname::text, a.attnum) FROM pg_catalog.pg_attribute a
                          WHERE a.attrelid = s.item_table AND a.attnum > 0 AND NOT a.attisdropped), '{}'),
       'parent', COALESCE((SELECT jsonb_object_agg(a.attname::text, a.attnum) FROM pg_catalog.pg_attribute a
                            WHERE a.attrelid = s.parent_table AND a.attnum > 0 AND NOT a.attisdropped), '{}')));

-- Who reads a corpus in full is asked of its columns by their names now (renames followed); a
-- name that is no column any more reads as no, not as an error.
CREATE OR REPLACE FUNCTION corpus._reads_in_full(item_table regclass, columns name[]) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(NOT pg_catalog.row_security_active(item_table)
                    AND (SELECT pg_catalog.bool_and(pg_catalog.has_column_privilege(item_table, a.attnum, 'SELECT'))
                           FROM pg_catalog.unnest(columns) AS c
                           LEFT JOIN pg_catalog.pg_attribute AS a
                                  ON a.attrelid = item_table AND a.attname = c AND a.attnum > 0
                                 AND NOT a.attisdropped), false)
$$;
CREATE FUNCTION corpus._current_columns(item_table regclass, recorded jsonb, columns name[]) RETURNS name[]
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.array_agg(coalesce(
               (SELECT a.attname FROM pg_catalog.pg_attribute AS a
                 WHERE a.attrelid = item_table AND a.attnum = (recorded ->> u.c::text)::smallint
                   AND a.attnum > 0 AND NOT a.attisdropped), u.c) ORDER BY u.n)
      FROM pg_catalog.unnest(columns) WITH ORDINALITY AS u(c, n)
$$;
REVOKE ALL ON FUNCTION corpus._current_columns(regclass, jsonb, name[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION corpus._current_columns(regclass, jsonb, name[]) TO PUBLIC;
CREATE OR REPLACE FUNCTION corpus._reads_corpus_in_full(corpus text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(pg_catalog.bool_and(
               corpus._reads_in_full(s.item_table, corpus._current_columns(s.item_table,
                   s.column_types #> '{attnums,item}', ARRAY[s.id_column, s.tsv_column, s.parent_fk]))
               AND (s.parent_table IS NULL OR corpus._reads_in_full(s.parent_table, corpus._current_columns(
                   s.parent_table, s.column_types #> '{attnums,parent}', ARRAY[s.parent_key])))), true)
      FROM corpus.sources AS s
     WHERE s.corpus = _reads_corpus_in_full.corpus
$$;
ALTER POLICY readers_of_the_source ON corpus.lexical_champions
    USING ((corpus, source) IN (
        SELECT s.corpus, s.name FROM corpus.sources AS s
         WHERE corpus._reads_in_full(s.item_table, corpus._current_columns(s.item_table,
                   s.column_types #> '{attnums,item}', ARRAY[s.id_column, s.tsv_column]))));
ALTER POLICY readers_of_the_table ON corpus.embedding_queue
    USING ((item_table, embedding_column) IN (
        SELECT s.item_table, s.embedding_column FROM corpus.embedding_slots AS s
         WHERE corpus._reads_in_full(s.item_table,
                   ARRAY[corpus._slot_column(s.item_table, (corpus._slot_attnums(s)).id_attnum)])));

-- corpus_alter_source: a source's mapping changed in place.
CREATE FUNCTION corpus.corpus_alter_source(corpus text, source text, text_column text DEFAULT NULL,
    embedding_column text DEFAULT NULL, tsv_column text DEFAULT NULL, id_column text DEFAULT NULL,
    parent_table regclass DEFAULT NULL, parent_fk text DEFAULT NULL, parent_key text DEFAULT NULL,
    parent_required text[] DEFAULT NULL, rule jsonb DEFAULT NULL, locator jsonb DEFAULT NULL,
    metadata jsonb DEFAULT NULL, min_length integer DEFAULT NULL, ts_config regconfig DEFAULT NULL,
    distance text DEFAULT NULL, semantic_weight double precision DEFAULT NULL,
    lexical_weight double precision DEFAULT NULL, embedding_inputs text[] DEFAULT NULL,
    embedding_model text DEFAULT NULL, language text DEFAULT NULL) RETURNS void
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_alter_source_wrapper';

-- corpus.progress: the long operations running now, as their own sessions report them.
CREATE FUNCTION corpus._progress() RETURNS TABLE (pid integer, role oid, command text, corpus text, phase text,
    done bigint, total bigint, started double precision, updated double precision)
STRICT VOLATILE PARALLEL RESTRICTED LANGUAGE c AS 'MODULE_PATHNAME', '_progress_wrapper';
CREATE VIEW corpus.progress AS
SELECT p.pid, p.role::regrole AS role, p.command, p.corpus, p.phase, p.done, p.total,
       pg_catalog.to_timestamp(p.started) AS started, pg_catalog.to_timestamp(p.updated) AS updated
  FROM corpus._progress() AS p;
GRANT SELECT ON corpus.progress TO PUBLIC;

-- The model change reports its batches in corpus.progress.
CREATE FUNCTION corpus._progress_report(command text, corpus text, phase text, done bigint, total bigint)
RETURNS void VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', '_progress_report_wrapper';
CREATE OR REPLACE PROCEDURE corpus.corpus_set_embedding_model(item_table regclass, embedding_column name, model text,
                                                   batch_size integer DEFAULT 10000)
LANGUAGE plpgsql
AS $$
DECLARE
    total bigint;
    done  bigint := 0;
    state jsonb := '{}';
    nodes text[];
    ports integer[];
    k     integer := 1;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    IF batch_size IS NULL OR batch_size < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('batch_size must be positive, got %s', batch_size),
            HINT = 'Each batch is one committed transaction; 10000 is a good size.';
    END IF;
    total := corpus._embedding_model_start(item_table, embedding_column, model);
    -- the nodes holding the table's rows: this one, and on a Citus coordinator the others
    -- (each batch there is the node's own transaction, driven from here)
    IF corpus._citus_table_kind(item_table) = 'distributed' AND corpus._citus_coordinator() THEN
        SELECT array_agg(n.node_name ORDER BY o), array_agg(n.node_port ORDER BY o) INTO nodes, ports
          FROM corpus._citus_other_nodes() WITH ORDINALITY AS n(node_name, node_port, o);
    END IF;
    COMMIT;
    LOOP
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        -- (corpus.progress; reported at the start of every transaction, which an error ends)
        PERFORM corpus._progress_report('corpus_set_embedding_model', NULL,
                                        format('queueing the items of %s.%s for model %s',
                                               item_table, embedding_column, model), done, total);
        IF k = 1 THEN
            state := corpus._embedding_model_step(item_table, embedding_column, state, batch_size);
        ELSIF k <= coalesce(cardinality(nodes), 0) + 1 THEN
            state := (SELECT a::jsonb FROM corpus._citus_on_nodes(ARRAY[nodes[k - 1]], ARRAY[ports[k - 1]],
                          format('SELECT corpus._embedding_model_step(%L::regclass, %L, %L::jsonb, %L::integer)::text',
                                 item_table::text, embedding_column, state, batch_size)) a);
        ELSE
            EXIT;
        END IF;
        IF state ? 'done' THEN
            k := k + 1;
            state := '{}';
            CONTINUE;
        END IF;
        done := done + (state->>'n')::bigint;
        IF k > 1 THEN
            PERFORM pg_notify('pg_corpus_embedding', item_table::text);   -- (the workers listen here)
        END IF;
        COMMIT;
        RAISE NOTICE 'pg_corpus: % of % items of %.% queued for model %', done, total, item_table,
                     embedding_column, model;
    END LOOP;
    PERFORM corpus._progress_report(NULL, NULL, NULL, NULL, NULL);
END
$$;

CREATE FUNCTION corpus._reanalyze_start(corpus text, source text) RETURNS bigint
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', '_reanalyze_start_wrapper';
CREATE FUNCTION corpus._reanalyze_step(corpus text, source text, state jsonb, batch_size integer)
RETURNS jsonb VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', '_reanalyze_step_wrapper';
-- Analyse the rows of a source's BM25 column again (after an update of the analyser changed stop
-- words or stemming): the rows whose stored analysis differs from what corpus.bm25_document makes
-- of their text now are rewritten, in batches of batch_size rows committed one by one, then the
-- statistics of every corpus of the table are refreshed. A procedure: CALL it outside a
-- transaction block; interrupted, CALL it again (rows already analysed are skipped). The steps
-- are the library's (corpus._reanalyze_start, corpus._reanalyze_step); it pins the search_path
-- for each of its transactions with set_config (a procedure with a SET clause cannot COMMIT).
CREATE PROCEDURE corpus.corpus_reanalyze(corpus text, source text, batch_size integer DEFAULT 10000)
LANGUAGE plpgsql
AS $$
DECLARE
    total   bigint;
    done    bigint := 0;
    changed bigint := 0;
    state   jsonb := '{}';
    c       text;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    IF batch_size IS NULL OR batch_size < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('batch_size must be positive, got %s', batch_size),
            HINT = 'Each batch is one committed transaction; 10000 is a good size.';
    END IF;
    total := corpus._reanalyze_start(corpus, source);
    COMMIT;
    LOOP
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        -- (corpus.progress; reported at the start of every transaction, which an error ends)
        PERFORM corpus._progress_report('corpus_reanalyze', corpus,
                                        format('analysing the rows of source %s again', source), done, total);
        state := corpus._reanalyze_step(corpus, source, state, batch_size);
        done := done + (state->>'n')::bigint;
        changed := changed + (state->>'changed')::bigint;
        COMMIT;
        RAISE NOTICE 'pg_corpus: % of % rows of source % of corpus % read, % analysed again', done, total, source,
                     corpus, changed;
        EXIT WHEN (state->>'done')::boolean;
    END LOOP;
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    PERFORM corpus._progress_report('corpus_reanalyze', corpus, 'refreshing the statistics', done, total);
    FOR c IN SELECT DISTINCT s.corpus FROM corpus.sources s
              WHERE s.item_table = (SELECT t.item_table FROM corpus.sources t
                                     WHERE t.corpus = corpus_reanalyze.corpus AND t.name = corpus_reanalyze.source)
              ORDER BY 1 LOOP
        BEGIN
            PERFORM * FROM corpus.corpus_refresh_lexical_stats(c);
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE USING
                MESSAGE = format('pg_corpus: the statistics of corpus %s were not refreshed: %s', c, SQLERRM),
                HINT = format('A role that may refresh them runs SELECT * FROM corpus.corpus_refresh_lexical_stats(%L);',
                              c);
        END;
    END LOOP;
    PERFORM corpus._progress_report(NULL, NULL, NULL, NULL, NULL);
END
$$;

-- Champion lists built by the library in one pass (the refresh's statement reads them).
CREATE FUNCTION corpus._champion_lists(corpus text, source text, min_df bigint, n bigint, k1 double precision,
    b double precision) RETURNS TABLE (term text, items text[], impacts double precision[])
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', '_champion_lists_wrapper';

-- Lexical statistics counted by the library in one pass (the refresh's statement reads them).
CREATE FUNCTION corpus._lexical_counts(corpus text) RETURNS TABLE (term text, df bigint, total_len bigint)
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', '_lexical_counts_wrapper';

-- Blue/green embeddings: a new column built beside the searched one, then switched to (by the
-- worker's call that finds its backlog empty, when the build asks for it).
ALTER TABLE corpus.embedding_slots ADD COLUMN switch_from name;
CREATE FUNCTION corpus.corpus_embedding_build(item_table regclass, embedding_column name, new_column name,
    model text, auto_switch boolean DEFAULT false) RETURNS bigint
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_embedding_build_wrapper';
CREATE FUNCTION corpus.corpus_embedding_switch(item_table regclass, embedding_column name, new_column name,
    force boolean DEFAULT false) RETURNS integer
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_embedding_switch_wrapper';
CREATE FUNCTION corpus.corpus_embedding_build_cancel(item_table regclass, new_column name) RETURNS void
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'corpus_embedding_build_cancel_wrapper';
