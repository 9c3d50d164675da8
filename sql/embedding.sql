-- ==========================================================================================
-- Embedding freshness: a queue of items whose embedding is missing or describes old text,
-- kept by a trigger that source registration attaches, and the functions a worker uses.
--
-- An item is STALE while it has a row in corpus.embedding_queue: the trigger puts it there in
-- the same transaction as the text change (so a rolled-back change queues nothing), and the
-- row leaves when a new embedding is stored. The semantic branch skips queued items unless the
-- caller passes include_stale => true. The queue is an ordinary WAL-logged table: it survives
-- crashes and restarts with the data it describes.
-- ==========================================================================================

-- One "embedding slot" per (item table, embedding column): the sources of several corpora can
-- share a table (precedent_chunks serves two corpora) and then share its slot, trigger and model.
CREATE TABLE corpus.embedding_slots (
    item_table       regclass NOT NULL,
    embedding_column name NOT NULL,
    id_column        name NOT NULL,
    id_type          text NOT NULL,          -- format_type of the id column: casts keep its index usable
    input_columns    name[] NOT NULL,
    model            text,
    dimensions       integer NOT NULL,
    trigger_name     name NOT NULL,
    trigger_function text NOT NULL,        -- the function its triggers call, in schema corpus
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- The columns by attribute number: the names above are the slot's key and what it was
    -- registered with; the trigger and the worker use the columns' current names (a rename
    -- needs no action; a drop needs CASCADE, which drops the trigger, and shows in the health
    -- check).
    id_attnum        smallint NOT NULL,
    embedding_attnum smallint NOT NULL,
    input_attnums    smallint[] NOT NULL,
    -- A build that becomes current by itself (corpus_embedding_build(..., auto_switch => true)):
    -- the column whose sources switch to this one once no item waits for it.
    switch_from      name,
    PRIMARY KEY (item_table, embedding_column)
);

-- Versions come from one sequence, so an item's version never repeats, even after its queue row
-- was deleted (embedding stored) and created again (text changed): a worker's late result for
-- old text can never match a newer entry.
CREATE SEQUENCE corpus.embedding_queue_version_seq;

CREATE TABLE corpus.embedding_queue (
    item_table       regclass NOT NULL,
    embedding_column name NOT NULL,
    item_id          text NOT NULL,
    -- missing: no embedding; text_changed: the text changed after it was embedded;
    -- model_changed: the slot's model changed; requested: corpus_embedding_enqueue
    reason           text NOT NULL,
    enqueued_at      timestamptz NOT NULL DEFAULT now(),
    -- renewed (from the sequence) by every change of the item's text: a worker's result for
    -- another version is refused
    version          bigint NOT NULL DEFAULT nextval('corpus.embedding_queue_version_seq'),
    state            text NOT NULL DEFAULT 'pending'
                     CONSTRAINT embedding_queue_state_check CHECK (state IN ('pending', 'claimed', 'dead')),
    claimed_by       text,
    claimed_at       timestamptz,
    lease_until      timestamptz,
    attempts         integer NOT NULL DEFAULT 0,
    last_error       text,
    PRIMARY KEY (item_table, embedding_column, item_id),
    FOREIGN KEY (item_table, embedding_column) REFERENCES corpus.embedding_slots ON DELETE CASCADE
);
-- Workers claim the oldest available items first.
-- (enqueued_at, item_id): the claim's ORDER BY. FOR UPDATE puts LockRows between Limit and Sort,
-- so without the full order in an index every claim sorts the whole queue (100 ms at 100k rows).
CREATE INDEX embedding_queue_claim_idx ON corpus.embedding_queue (enqueued_at, item_id) WHERE state <> 'dead';

SELECT pg_catalog.pg_extension_config_dump('corpus.embedding_slots', '');
SELECT pg_catalog.pg_extension_config_dump('corpus.embedding_queue', '');
SELECT pg_catalog.pg_extension_config_dump('corpus.embedding_queue_version_seq', '');
REVOKE ALL ON corpus.embedding_slots, corpus.embedding_queue FROM PUBLIC;
-- enqueue and the model change run with the caller's rights and draw versions
GRANT USAGE ON SEQUENCE corpus.embedding_queue_version_seq TO PUBLIC;
GRANT SELECT ON corpus.embedding_slots TO PUBLIC;
-- Everything but the worker's name and its error messages, and only the rows of tables a role
-- reads in full (row-level security: sql/access.sql); searches look up the state of their own
-- hits with the extension owner's rights.
GRANT SELECT (item_table, embedding_column, item_id, reason, enqueued_at, version, state, claimed_at,
              lease_until, attempts) ON corpus.embedding_queue TO PUBLIC;

COMMENT ON TABLE corpus.embedding_queue IS
    'pg_corpus: items whose embedding is missing or stale; NOTIFY pg_corpus_embedding announces new work';

-- ------------------------------------------------------------------------------------------
-- The trigger: the library's corpus._embedding_trigger('<registered embedding column>') on every
-- slot's table (src/trigger.rs). It resolves the slot's columns by their current names once per
-- statement and compares values byte for byte. SECURITY DEFINER so that writers of the item
-- table need no rights on the queue, with search_path pinned. A rename of a slot's column is
-- followed with no action; DROP COLUMN and ALTER COLUMN TYPE of one are refused by PostgreSQL
-- (the trigger depends on its columns).
-- ------------------------------------------------------------------------------------------
CREATE FUNCTION corpus._embedding_trigger() RETURNS trigger
LANGUAGE c SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', '_embedding_trigger_wrapper';

-- The current name of a column of an item table (NULL once dropped).
CREATE FUNCTION corpus._slot_column(item_table regclass, attnum smallint) RETURNS name
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT a.attname FROM pg_attribute a
     WHERE a.attrelid = item_table AND a.attnum = _slot_column.attnum AND a.attnum > 0 AND NOT a.attisdropped
$$;

-- Whether a slot's id or embedding column has a type whose conversions no table owner wrote
-- (the re-embed trigger and the DBA's queue functions convert them with another role's
-- rights): the id a built-in base type, the embedding pgvector's vector.
CREATE FUNCTION corpus._slot_type_ok(item_table regclass, attnum smallint, kind text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce((SELECT CASE WHEN kind = 'embedding'
                                 THEN t.typname = 'vector'
                                      AND t.typnamespace = (SELECT e.extnamespace FROM pg_extension e
                                                             WHERE e.extname = 'vector')
                                 ELSE t.typnamespace = 'pg_catalog'::regnamespace AND t.typtype = 'b' END
                       FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
                      WHERE a.attrelid = item_table AND a.attnum = _slot_type_ok.attnum AND a.attnum > 0
                        AND NOT a.attisdropped), false)
$$;

-- A slot's id or embedding column now: the live column of its registered name, else the one
-- of its registered number, whichever first has a fitting type (corpus._slot_type_ok); NULL
-- when neither has.
CREATE FUNCTION corpus._slot_attnum(item_table regclass, registered name, registered_attnum smallint, kind text)
RETURNS smallint
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.n FROM (SELECT a.attnum, 1 FROM pg_attribute a
                      WHERE a.attrelid = item_table AND a.attname = registered AND a.attnum > 0
                        AND NOT a.attisdropped
                     UNION ALL SELECT registered_attnum, 2) AS c(n, o)
     WHERE corpus._slot_type_ok(item_table, c.n, kind)
     ORDER BY c.o LIMIT 1
$$;

-- A slot's columns now: by the name it was registered with while a live column has that name
-- (a dump/restore renumbers the columns after a dropped one), else by its attribute number (a
-- rename keeps the number); an id or embedding column only while its type fits
-- (corpus._slot_type_ok), else NULL: a column of another type added under the registered
-- name after a rename is never taken for it. The trigger, claim and complete all resolve
-- columns here.
CREATE FUNCTION corpus._slot_attnums(slot corpus.embedding_slots, OUT id_attnum smallint,
                                     OUT embedding_attnum smallint, OUT input_attnums smallint[])
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT corpus._slot_attnum(slot.item_table, slot.id_column, slot.id_attnum, 'id'),
           corpus._slot_attnum(slot.item_table, slot.embedding_column, slot.embedding_attnum, 'embedding'),
           (SELECT array_agg(coalesce((SELECT a.attnum FROM pg_attribute a WHERE a.attrelid = slot.item_table
                                          AND a.attname = slot.input_columns[u.n] AND a.attnum > 0
                                          AND NOT a.attisdropped), u.attnum) ORDER BY u.n)
              FROM unnest(slot.input_attnums) WITH ORDINALITY u(attnum, n))
$$;

-- On a Citus worker: forget this node's copy of a slot (and its queue entries).
CREATE FUNCTION corpus._embedding_slot_forget(item_table text, embedding_column name) RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH gone AS (DELETE FROM corpus.embedding_slots s
                   WHERE s.item_table = pg_catalog.to_regclass(_embedding_slot_forget.item_table)
                     AND s.embedding_column = _embedding_slot_forget.embedding_column RETURNING 1)
    SELECT count(*) FROM gone
$$;

-- Whether an item of a table is queued for re-embedding on this node (in `state`, or in any
-- state when it is NULL): on Citus, what a search and the health check ask each shard about
-- its own rows (crate plan::queued_items, run with the caller's rights, so Citus connects to
-- the shards as the caller), the table named as text (its OID differs between nodes). The
-- extension owner's rights, answering only a caller the queue's own policy would show the
-- entry to (sql/access.sql): SELECT on the slot's id column and no row-level security on the
-- table for it (the role SET ROLE chose, else the session's user: a definer function's
-- current_user is its owner). Anyone else learns nothing from here (false).
CREATE FUNCTION corpus._item_queued(item_table text, embedding_column text, item_id text, state text)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (
        SELECT 1
          FROM corpus.embedding_queue q
          JOIN corpus.embedding_slots s ON s.item_table = q.item_table AND s.embedding_column = q.embedding_column
          JOIN pg_catalog.pg_class c ON c.oid = q.item_table
          CROSS JOIN (SELECT CASE WHEN pg_catalog.current_setting('role') = 'none' THEN session_user::text
                                  ELSE pg_catalog.current_setting('role') END::name AS who) AS w
         WHERE q.item_table = pg_catalog.to_regclass(_item_queued.item_table)
           AND q.embedding_column = _item_queued.embedding_column::name
           AND q.item_id = _item_queued.item_id
           AND (_item_queued.state IS NULL OR q.state = _item_queued.state)
           AND pg_catalog.has_column_privilege(w.who, q.item_table,
                   corpus._slot_column(q.item_table, (corpus._slot_attnums(s)).id_attnum)::text, 'SELECT')
           AND (NOT c.relrowsecurity
                OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                            WHERE r.rolname = w.who AND (r.rolsuper OR r.rolbypassrls))
                OR (NOT c.relforcerowsecurity AND pg_catalog.pg_has_role(w.who, c.relowner, 'USAGE'))))
$$;

-- What this node says of itself for the health check's `citus` row: its address, its pg_corpus
-- version, pgvector's iterative-scan setting (a database default from ALTER DATABASE, read
-- before pgvector is loaded), and its slots of distributed tables.
CREATE FUNCTION corpus._citus_node_facts() RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object(
        'host', coalesce(pg_catalog.inet_server_addr()::text, 'local'),
        'port', pg_catalog.current_setting('port'),
        'pg_corpus', (SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname = 'pg_corpus'),
        'iterative_scan', pg_catalog.current_setting('hnsw.iterative_scan', true),
        'slots', (SELECT coalesce(jsonb_agg(s.item_table::text || '.' || s.embedding_column
                                            ORDER BY s.item_table::text, s.embedding_column), '[]'::jsonb)
                    FROM corpus.embedding_slots s
                   WHERE corpus._citus_table_kind(s.item_table) = 'distributed'))
$$;

-- On a Citus coordinator: its own facts and every other node's (corpus._citus_node_facts).
CREATE FUNCTION corpus._citus_health(OUT coordinator jsonb, OUT nodes jsonb)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT corpus._citus_node_facts(),
           coalesce((SELECT jsonb_agg(corpus._citus_node_facts_of(n.node_name, n.node_port))
                       FROM corpus._citus_other_nodes() n), '[]'::jsonb)
$$;

-- Another node's facts (corpus._citus_node_facts), or {"host", "port", "unreachable": the
-- error} when it cannot be asked.
CREATE FUNCTION corpus._citus_node_facts_of(node_name text, node_port integer) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT a::jsonb FROM corpus._citus_on_nodes(ARRAY[node_name], ARRAY[node_port],
                                                        'SELECT corpus._citus_node_facts()::text') a);
EXCEPTION WHEN OTHERS THEN
    RETURN jsonb_build_object('host', node_name, 'port', node_port::text, 'unreachable', SQLERRM);
END
$$;

-- The health check's figures of a slot's queue: the age of its oldest live entry and its
-- expired leases, on a Citus coordinator over every node's queue (with the caller's rights:
-- the queue's policies apply).
CREATE FUNCTION corpus._queue_figures(item_table regclass, embedding_column name,
                                      OUT oldest_seconds bigint, OUT expired_leases bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    SELECT coalesce(extract(epoch FROM now() - min(q.enqueued_at) FILTER (WHERE q.state <> 'dead')), 0)::bigint,
           count(*) FILTER (WHERE q.state = 'claimed' AND q.lease_until < now())
      INTO oldest_seconds, expired_leases
      FROM corpus.embedding_queue q
     WHERE q.item_table = _queue_figures.item_table AND q.embedding_column = _queue_figures.embedding_column;
    SELECT greatest(oldest_seconds, max((a::jsonb->>'oldest_seconds')::bigint)),
           expired_leases + coalesce(sum((a::jsonb->>'expired_leases')::bigint), 0)
      INTO oldest_seconds, expired_leases
      FROM corpus._citus_fan_out(item_table,
               format('SELECT row_to_json(f)::text FROM corpus._queue_figures(%L::regclass, %L) f',
                      item_table::text, embedding_column)) a;
END
$$;

-- On a Citus coordinator, a worker API statement for a distributed table's items, run on the
-- other nodes (each node's answer); nothing for any other table or node.
CREATE FUNCTION corpus._citus_fan_out(item_table regclass, command text) RETURNS SETOF text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF corpus._citus_table_kind(item_table) = 'distributed' AND corpus._citus_coordinator() THEN
        RETURN QUERY SELECT * FROM corpus._citus_on_other_nodes(command);
    END IF;
END
$$;

-- ------------------------------------------------------------------------------------------
-- Worker API (claim, complete, fail, release, retry, enqueue): the library's (src/queue.rs),
-- with the caller's rights; what only SQL expresses for it on Citus is here.
-- ------------------------------------------------------------------------------------------

-- A claimed item as another Citus node's claim answers it (JSON rows of this type).
CREATE TYPE corpus._claimed_item AS (item_table regclass, embedding_column name, item_id text, version bigint,
                                     content text, model text, dimensions integer, reason text, attempts integer);

-- On a Citus coordinator, a claim of the queue entries of distributed tables on the other nodes,
-- node after node (each in its own transaction) until `wanted` items are claimed; a node that
-- cannot be reached is skipped with a WARNING (its items wait for the next claim). The worker API
-- itself is the library's (corpus_embedding_claim).
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

-- Record a new embedding model for a slot: every item becomes stale and is queued, in batches
-- of batch_size committed one by one (progress is reported as NOTICEs), so that a large table
-- does not hold one huge transaction; each batch holds the queue while it runs. A procedure:
-- CALL it outside a transaction block. If it is interrupted, CALL it again: the slot already
-- records the new model, and it re-queues every item. The steps are the library's
-- (corpus._embedding_model_start, corpus._embedding_model_step); a procedure with a SET clause
-- cannot COMMIT, so it pins the search_path for each of its transactions with set_config.
CREATE PROCEDURE corpus.corpus_set_embedding_model(item_table regclass, embedding_column name, model text,
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
