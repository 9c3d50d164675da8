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
    trigger_function text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- The columns by attribute number: the names above are the slot's key and what it was
    -- registered with; the trigger and the worker use the columns' current names (a rename is
    -- followed by corpus._follow_item_table_changes, a drop needs CASCADE, which drops the
    -- trigger, and shows in the health check).
    id_attnum        smallint NOT NULL,
    embedding_attnum smallint NOT NULL,
    input_attnums    smallint[] NOT NULL,
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
-- The trigger. Generated per slot with the column names written in (a generic trigger would
-- have to go through to_jsonb(NEW), which prints the whole vector for every row: far too slow
-- for bulk loads). The generated function is SECURITY DEFINER so that writers of the item
-- table need no rights on the queue, with search_path pinned.
--
-- The slot records its columns by attribute number and the function is written with their
-- current names: an ALTER TABLE of the item table writes it again (corpus._follow_item_table_changes,
-- an event trigger), so RENAME COLUMN never breaks a write. (DROP COLUMN and ALTER COLUMN TYPE
-- of a slot's column are refused by PostgreSQL: the trigger depends on its columns.)
-- ------------------------------------------------------------------------------------------

-- The current name of a column of an item table (NULL once dropped).
CREATE FUNCTION corpus._slot_column(item_table regclass, attnum smallint) RETURNS name
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT a.attname FROM pg_attribute a
     WHERE a.attrelid = item_table AND a.attnum = _slot_column.attnum AND a.attnum > 0 AND NOT a.attisdropped
$$;

-- The table whose slot a firing re-embed trigger serves: the table of the trigger itself, or,
-- for a partition's clone of a partitioned table's trigger, of the trigger it was cloned from
-- (at any depth: a directly registered partition of a partitioned table serves its own slot),
-- or for a Citus shard (Citus copies the trigger to every shard, and it fires on the node
-- holding the shard) the distributed table it is a shard of. The slot is named by the table's
-- identity on this node, never by an OID written into the trigger: the same trigger serves a
-- plain table, a partition, a shard on any node, and a table after dump and restore.
CREATE FUNCTION corpus._trigger_slot_table(relid oid, trigger_name name) RETURNS oid
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel oid;
BEGIN
    WITH RECURSIVE up(tgrelid, tgparentid) AS (
        SELECT t.tgrelid, t.tgparentid FROM pg_trigger t WHERE t.tgrelid = relid AND t.tgname = trigger_name
        UNION ALL
        SELECT p.tgrelid, p.tgparentid FROM pg_trigger p JOIN up ON p.oid = up.tgparentid)
    SELECT coalesce((SELECT up.tgrelid FROM up WHERE up.tgparentid = 0), relid) INTO rel;
    IF corpus._citus_present()
       AND NOT EXISTS (SELECT 1 FROM corpus.embedding_slots s WHERE s.item_table = rel) THEN
        rel := coalesce(corpus._citus_shard_table(rel), rel);
    END IF;
    RETURN rel;
END
$$;

-- Wake the embedding workers (NOTIFY pg_corpus_embedding, the payload naming the table) for an
-- item of `slot_table` queued by the trigger on `relid` (the table, a partition of it, or a
-- Citus shard). Not from a Citus shard: its trigger runs on a worker node, in a transaction
-- Citus may commit in two phases, and PostgreSQL refuses to PREPARE a transaction that sent a
-- NOTIFY: the write would fail. Embedding workers listen on the coordinator and find those
-- items by polling (worker/README.md, README "Scaling out").
CREATE FUNCTION corpus._announce_work(slot_table oid, relid oid) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF slot_table <> relid AND corpus._citus_present() AND corpus._citus_shard_table(relid) IS NOT NULL THEN
        RETURN;
    END IF;
    PERFORM pg_notify('pg_corpus_embedding', slot_table::regclass::text);
END
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

-- A DBA's queue function reads a slot's ids with its caller's rights: refused (42804) while
-- its id or embedding column has no fitting type (corpus._slot_type_ok, NULL here).
CREATE FUNCTION corpus._require_slot_columns(slot corpus.embedding_slots, id_column name, embedding_column name)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF id_column IS NULL OR embedding_column IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '42804',
            MESSAGE = format('%s has no id column of a built-in type and pgvector embedding column for embedding column %s',
                             slot.item_table, quote_ident(slot.embedding_column)),
            DETAIL = format('It was registered with id column %s; a column of another type is never read in their place.',
                            quote_ident(slot.id_column)),
            HINT = 'Restore the columns'' types, or drop the source and register it again.';
    END IF;
END
$$;

-- (Re)write a slot's trigger function with its columns' current names; false (and nothing
-- written) when one of them was dropped.
CREATE FUNCTION corpus._write_embedding_trigger(slot corpus.embedding_slots) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    cols             record := corpus._slot_attnums(slot);
    id_column        name := corpus._slot_column(slot.item_table, cols.id_attnum);
    embedding_column name := corpus._slot_column(slot.item_table, cols.embedding_attnum);
    input_columns    name[];
    inputs_changed   text;
    body             text;
BEGIN
    SELECT array_agg(corpus._slot_column(slot.item_table, a) ORDER BY n) INTO input_columns
      FROM unnest(cols.input_attnums) WITH ORDINALITY u(a, n);
    IF id_column IS NULL OR embedding_column IS NULL OR array_position(input_columns, NULL) IS NOT NULL THEN
        RETURN false;
    END IF;
    SELECT format('(%s) IS DISTINCT FROM (%s)',
                  string_agg(format('OLD.%I', c), ', '), string_agg(format('NEW.%I', c), ', '))
      INTO inputs_changed FROM unnest(input_columns) c;

    body := format($body$
DECLARE
    -- The slot's table: TG_RELID, or for a partition whose trigger is a clone of a partitioned
    -- table's (the slot is registered on that table) the table of the trigger it was cloned
    -- from. Not the table's OID written in: a dump/restore gives the table a new OID.
    -- (assigned on the paths that touch the queue only: a row that brings its embedding
    -- should cost the trigger as little as possible)
    rel oid;
BEGIN
    -- DROP EXTENSION pg_corpus leaves this function and its trigger behind (they are created at
    -- registration, not by the extension script, so that dump and restore keep them): without
    -- the queue there is nothing to do, and the table must stay writable.
    IF to_regclass('corpus.embedding_queue') IS NULL THEN
        RETURN NULL;
    END IF;
    -- Bulk loads may defer the per-row work: SET pg_corpus.defer_embedding_queue = on, load,
    -- then SELECT corpus.corpus_embedding_enqueue(...) once. Superusers and roles granted SET
    -- on it only: the library's function (not current_setting, which would read a placeholder
    -- any role can set) has PostgreSQL check the setter's privilege.
    IF corpus._embedding_queue_deferred() THEN
        RETURN NULL;
    END IF;
    -- (DROP EXTENSION; CREATE EXTENSION leaves this trigger without its slot: the new catalog
    -- is empty. The queue inserts below check for the slot in the same statement, so a write
    -- never fails on the queue's foreign key, and cost nothing more when nothing is queued.
    -- Registering the source again adopts the trigger.)
    IF TG_OP = 'TRUNCATE' THEN
        rel := corpus._trigger_slot_table(TG_RELID, TG_NAME);
        DELETE FROM corpus.embedding_queue WHERE item_table = rel AND embedding_column = %2$L;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') AND (TG_OP = 'DELETE' OR OLD.%3$I IS DISTINCT FROM NEW.%3$I) THEN
        rel := corpus._trigger_slot_table(TG_RELID, TG_NAME);
        DELETE FROM corpus.embedding_queue
         WHERE item_table = rel AND embedding_column = %2$L AND item_id = OLD.%3$I::text;
        IF TG_OP = 'DELETE' THEN
            RETURN NULL;
        END IF;
    END IF;
    IF NEW.%4$I IS NULL THEN
        rel := corpus._trigger_slot_table(TG_RELID, TG_NAME);
        IF TG_OP = 'INSERT' OR OLD.%4$I IS NOT NULL OR %5$s THEN
            INSERT INTO corpus.embedding_queue AS q (item_table, embedding_column, item_id, reason)
            SELECT rel, %2$L, NEW.%3$I::text, 'missing'
             WHERE EXISTS (SELECT 1 FROM corpus.embedding_slots s WHERE s.item_table = rel AND s.embedding_column = %2$L)
            ON CONFLICT (item_table, embedding_column, item_id) DO UPDATE
               SET reason = 'missing', version = nextval('corpus.embedding_queue_version_seq'), enqueued_at = now(), state = 'pending',
                   claimed_by = NULL, claimed_at = NULL, lease_until = NULL, attempts = 0, last_error = NULL;
            IF FOUND THEN
                PERFORM corpus._announce_work(rel, TG_RELID);
            END IF;
        END IF;
    ELSIF TG_OP = 'UPDATE' THEN
        rel := corpus._trigger_slot_table(TG_RELID, TG_NAME);
        -- (compared as real[]: pgvector's = is not on this function's pinned search_path)
        IF OLD.%4$I::real[] IS DISTINCT FROM NEW.%4$I::real[] THEN
            -- a new embedding came in with (or after) the text: fresh
            DELETE FROM corpus.embedding_queue
             WHERE item_table = rel AND embedding_column = %2$L AND item_id = NEW.%3$I::text;
        ELSIF %5$s THEN
            INSERT INTO corpus.embedding_queue AS q (item_table, embedding_column, item_id, reason)
            SELECT rel, %2$L, NEW.%3$I::text, 'text_changed'
             WHERE EXISTS (SELECT 1 FROM corpus.embedding_slots s WHERE s.item_table = rel AND s.embedding_column = %2$L)
            ON CONFLICT (item_table, embedding_column, item_id) DO UPDATE
               SET reason = 'text_changed', version = nextval('corpus.embedding_queue_version_seq'), enqueued_at = now(), state = 'pending',
                   claimed_by = NULL, claimed_at = NULL, lease_until = NULL, attempts = 0, last_error = NULL;
            IF FOUND THEN
                PERFORM corpus._announce_work(rel, TG_RELID);
            END IF;
        END IF;
    END IF;
    RETURN NULL;
END
$body$, slot.item_table::oid, slot.embedding_column, id_column, embedding_column, inputs_changed);


    EXECUTE format('CREATE OR REPLACE FUNCTION corpus.%I() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
                    SET search_path = pg_catalog, pg_temp AS %L', slot.trigger_function, body);
    EXECUTE format('REVOKE ALL ON FUNCTION corpus.%I() FROM PUBLIC', slot.trigger_function);
    RETURN true;
END
$fn$;

CREATE FUNCTION corpus._attach_embedding_slot(item_table regclass, embedding_column name, id_column name,
                                              input_columns name[], model text, dimensions integer)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning  -- DROP TRIGGER IF EXISTS would NOTICE on every registration
AS $fn$
DECLARE
    slot          corpus.embedding_slots;
    attnum        smallint := (SELECT a.attnum FROM pg_attribute a
                                WHERE a.attrelid = item_table AND a.attname = embedding_column AND NOT a.attisdropped);
    id_attnum     smallint := (SELECT a.attnum FROM pg_attribute a
                                WHERE a.attrelid = item_table AND a.attname = id_column AND NOT a.attisdropped);
    input_attnums smallint[] := (SELECT array_agg(a.attnum ORDER BY c.n)
                                   FROM unnest(input_columns) WITH ORDINALITY c(name, n)
                                   JOIN pg_attribute a ON a.attrelid = item_table AND a.attname = c.name
                                                      AND NOT a.attisdropped);
    fname         text;
    tname         text;
BEGIN
    -- the column's slot, whatever name it was registered under (a rename keeps the attnum)
    SELECT * INTO slot FROM corpus.embedding_slots s
     WHERE s.item_table = _attach_embedding_slot.item_table AND s.embedding_attnum = attnum;
    IF FOUND THEN
        IF slot.id_attnum <> id_attnum OR slot.input_attnums <> input_attnums THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = format('embedding column "%s" of %s is already registered with id column "%s" and inputs %s',
                                 embedding_column, item_table, corpus._slot_column(item_table, slot.id_attnum),
                                 (SELECT array_agg(corpus._slot_column(item_table, a)) FROM unnest(slot.input_attnums) a)),
                HINT = 'Sources sharing an embedding column must agree on the id column and the text it is computed from.';
        END IF;
        IF model IS NOT NULL AND slot.model IS DISTINCT FROM model THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = format('embedding column "%s" of %s holds embeddings of model "%s", not "%s"',
                                 embedding_column, item_table, slot.model, model),
                HINT = 'Change the model with CALL corpus.corpus_set_embedding_model(...), which re-embeds every item.';
        END IF;
        RETURN;
    END IF;

    -- The id is turned into text in the trigger, which runs with the registering role's rights:
    -- only a built-in base type, whose casts and operators no table owner can define.
    IF NOT EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid
                    WHERE a.attrelid = item_table AND a.attnum = id_attnum
                      AND ty.typnamespace = 'pg_catalog'::regnamespace AND ty.typtype = 'b') THEN
        RAISE EXCEPTION USING ERRCODE = '42804',
            MESSAGE = format('id column "%s" of %s must have a built-in type', id_column, item_table),
            DETAIL = format('It is of type %s.', (SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
                                                  WHERE a.attrelid = item_table AND a.attnum = id_attnum)),
            HINT = 'Use an id of a built-in type such as bigint, integer, text or uuid.';
    END IF;
    IF corpus._citus_table_kind(item_table) = 'reference' THEN
        RAISE EXCEPTION USING ERRCODE = '0A000',
            MESSAGE = format('%s is a Citus reference table: pg_corpus cannot keep its embeddings fresh', item_table),
            DETAIL = 'The re-embed trigger would fire on every node''s copy of the table.',
            HINT = 'Keep items in a distributed table (create_distributed_table) or in a table of the coordinator.';
    END IF;
    fname := format('_embedding_trigger_%s_%s', item_table::oid, attnum);
    tname := format('pg_corpus_embedding_%s', attnum);
    INSERT INTO corpus.embedding_slots (item_table, embedding_column, id_column, id_type, input_columns, model,
                                        dimensions, trigger_name, trigger_function, id_attnum, embedding_attnum,
                                        input_attnums)
    VALUES (item_table, embedding_column, id_column,
            (SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
              WHERE a.attrelid = item_table AND a.attnum = id_attnum),
            input_columns, model, dimensions, tname, fname, id_attnum, attnum, input_attnums)
    RETURNING * INTO slot;
    -- OR REPLACE / IF EXISTS: a slot row deleted by hand leaves its function and trigger behind,
    -- and re-registering the source must repair that (the health check's hint).
    PERFORM corpus._write_embedding_trigger(slot);
    IF corpus._citus_table_kind(item_table) = 'distributed' THEN
        -- Citus creates the trigger on every shard, where it fires on the node that holds the
        -- shard and writes that node's queue only (corpus._trigger_slot_table): safe in the
        -- sense Citus' setting guards, which is about triggers reaching other shards.
        -- (local to this function: its SET clause restores it)
        PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    END IF;
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', tname, item_table);
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', tname || '_truncate', item_table);
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT OR DELETE OR UPDATE OF %s ON %s
                    FOR EACH ROW EXECUTE FUNCTION corpus.%I()',
                   tname,
                   (SELECT string_agg(DISTINCT quote_ident(c), ', ')
                      FROM unnest(input_columns || ARRAY[id_column, embedding_column]) c),
                   item_table, fname);
    EXECUTE format('CREATE TRIGGER %I AFTER TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION corpus.%I()',
                   tname || '_truncate', item_table, fname);
    -- Items already without an embedding are the first backlog.
    PERFORM corpus._enqueue_local(slot, true, false);
    -- On a Citus coordinator, every other node keeps a copy of the slot, and the queue of the
    -- shards it holds (the trigger writes there). Each node commits its copy on its own: a
    -- registration rolled back here leaves copies whose trigger never came (its creation is
    -- rolled back on every node with this transaction); registering again replaces them.
    IF corpus._citus_table_kind(item_table) = 'distributed' AND corpus._citus_coordinator() THEN
        -- (the workers listen here: announce the other nodes' backlog)
        IF (SELECT sum(a::bigint) FROM corpus._citus_on_other_nodes(
                format('SELECT corpus._embedding_slot_replica(%L::jsonb)', to_jsonb(slot))) a) > 0 THEN
            PERFORM pg_notify('pg_corpus_embedding', item_table::text);
        END IF;
    END IF;
END
$fn$;

-- After every ALTER TABLE: write the trigger functions of the slots on the altered tables (and
-- on the tables that inherit from them, to which a rename recurses) again, with their columns'
-- current names. Definer's rights: the table's owner may rename its columns, but the function
-- belongs to the role that registered the source. A failure is a WARNING, never a failed
-- ALTER TABLE; the health check then reports the slot.
CREATE FUNCTION corpus._follow_item_table_changes() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    slot corpus.embedding_slots;
BEGIN
    FOR slot IN
        WITH RECURSIVE altered(relid) AS (
            SELECT c.objid FROM pg_event_trigger_ddl_commands() c WHERE c.classid = 'pg_class'::regclass
            UNION
            SELECT i.inhrelid FROM pg_inherits i JOIN altered a ON i.inhparent = a.relid)
        SELECT s.* FROM corpus.embedding_slots s
         WHERE s.item_table::oid IN (SELECT relid FROM altered)
           -- only the trigger functions registration made (this runs with the extension
           -- owner's rights: a hand-written slot row must not make it create functions)
           AND s.trigger_function ~ '^_embedding_trigger_[0-9]+_[0-9]+$'
           -- the slot's own trigger on its own table calls that function
           AND EXISTS (SELECT 1 FROM pg_trigger t
                        WHERE t.tgrelid = s.item_table AND t.tgname = s.trigger_name
                          AND t.tgfoid = pg_catalog.to_regprocedure(pg_catalog.format('corpus.%I()', s.trigger_function)))
    LOOP
        BEGIN
            PERFORM corpus._write_embedding_trigger(slot);
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_corpus: could not rewrite the re-embed trigger of %.%: %', slot.item_table,
                          slot.embedding_column, SQLERRM
                  USING HINT = 'Run SELECT * FROM corpus.corpus_health_check(); for what to do.';
        END;
    END LOOP;
END
$$;
-- (an event trigger function: PostgreSQL calls it only as the event trigger, never directly)
REVOKE ALL ON FUNCTION corpus._follow_item_table_changes() FROM PUBLIC;
CREATE EVENT TRIGGER pg_corpus_follow_item_tables ON ddl_command_end WHEN TAG IN ('ALTER TABLE')
    EXECUTE FUNCTION corpus._follow_item_table_changes();

-- Remove a slot's trigger, function and queue once no source uses it any more.
CREATE FUNCTION corpus._detach_embedding_slot(item_table regclass, embedding_column name) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    slot corpus.embedding_slots;
BEGIN
    -- the slot by its registered name, or by the column that name means now
    SELECT * INTO slot FROM corpus.embedding_slots s
     WHERE s.item_table = _detach_embedding_slot.item_table
       AND (s.embedding_column = _detach_embedding_slot.embedding_column
            OR s.embedding_attnum = (SELECT a.attnum FROM pg_attribute a
                                      WHERE a.attrelid = _detach_embedding_slot.item_table
                                        AND a.attname = _detach_embedding_slot.embedding_column
                                        AND NOT a.attisdropped));
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- still used by a source that names the column by its registered or its current name
    IF EXISTS (SELECT 1 FROM corpus.sources s
                WHERE s.item_table = slot.item_table
                  AND (s.embedding_column = slot.embedding_column
                       OR s.embedding_column = corpus._slot_column(slot.item_table, slot.embedding_attnum))) THEN
        RETURN;
    END IF;
    DELETE FROM corpus.embedding_slots s
     WHERE s.item_table = slot.item_table AND s.embedding_column = slot.embedding_column;
    IF EXISTS (SELECT 1 FROM pg_class WHERE oid = item_table) THEN
        IF corpus._citus_table_kind(item_table) = 'distributed' THEN
            -- (as at registration: local to this function; sequential, so that Citus may
            -- drop the trigger function, which it created on every node, after the triggers)
            PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
            PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
        END IF;
        EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', slot.trigger_name, item_table);
        EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', slot.trigger_name || '_truncate', item_table);
    END IF;
    EXECUTE format('DROP FUNCTION IF EXISTS corpus.%I()', slot.trigger_function);
    PERFORM corpus._citus_fan_out(slot.item_table, format('SELECT corpus._embedding_slot_forget(%L, %L)',
                                                          slot.item_table::text, slot.embedding_column));
END
$$;

-- What a DBA operation that writes many queue entries (corpus_embedding_enqueue, the model
-- change's batches) takes first in its transaction: the queue's EXCLUSIVE lock, then ACCESS SHARE
-- on the item relations it reads. Every other writer of the queue takes ROW EXCLUSIVE (or ROW
-- SHARE) on it before its first entry: a user's write in the re-embed trigger, after its item's
-- row lock; a worker's claim and completion. So each of them either holds the queue already,
-- and the operation waits for it while holding nothing that writer could need, or waits for
-- the operation, which once it holds the queue waits for no entry and no item: no user's
-- transaction is ever in a cycle with it, whatever order it takes its items in, and none is
-- aborted. Such writers, of every slot, wait while the operation's transaction runs.
-- The item relations are taken without waiting: a transaction that holds one exclusively
-- (DDL, TRUNCATE) may write the queue next, so the operation then gives the queue back, waits
-- for that relation holding nothing, and starts again.
CREATE FUNCTION corpus._lock_queue(relations regclass[]) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel       regclass;
    has_queue boolean;
BEGIN
    LOOP
        has_queue := false;
        BEGIN
            LOCK TABLE corpus.embedding_queue IN EXCLUSIVE MODE;
            has_queue := true;
            IF cardinality(relations) > 0 THEN
                -- (on a Citus node the relations are shards, which Citus lets no one lock unless
                -- asked; the setting lasts until this function returns)
                IF corpus._citus_present() THEN
                    PERFORM pg_catalog.set_config('citus.enable_manual_changes_to_shards', 'on', true);
                END IF;
                EXECUTE format('LOCK TABLE %s IN ACCESS SHARE MODE NOWAIT',
                               (SELECT string_agg(r::text, ', ') FROM unnest(relations) AS r));
            END IF;
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            -- (the block's rollback gave both back; without the queue it was lock_timeout's)
            IF NOT has_queue THEN
                RAISE;
            END IF;
        END;
        FOREACH rel IN ARRAY relations LOOP
            BEGIN
                IF corpus._citus_present() THEN
                    PERFORM pg_catalog.set_config('citus.enable_manual_changes_to_shards', 'on', true);
                END IF;
                EXECUTE format('LOCK TABLE %s IN ACCESS SHARE MODE', rel);
                RAISE EXCEPTION 'waited';   -- (gives the lock back with the block)
            EXCEPTION WHEN raise_exception THEN
                NULL;
            END;
        END LOOP;
    END LOOP;
END
$$;

-- Queue the items of a slot that are in relations of this node (corpus._local_relations: the
-- table, or the shards of a distributed table placed here), in one statement per relation:
-- those without an embedding ('missing'), or every item when only_missing is false
-- ('requested' for those with one); entries already queued are renewed (a new version, pending
-- again) when `renew`, else left as they are. Announces the work.
CREATE FUNCTION corpus._enqueue_local(slot corpus.embedding_slots, only_missing boolean, renew boolean)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel       regclass;
    n         bigint;
    total     bigint := 0;
    id_column name := corpus._slot_column(slot.item_table, (corpus._slot_attnums(slot)).id_attnum);
    embedding name := corpus._slot_column(slot.item_table, (corpus._slot_attnums(slot)).embedding_attnum);
BEGIN
    PERFORM corpus._require_slot_columns(slot, id_column, embedding);
    FOR rel IN SELECT r FROM corpus._local_relations(slot.item_table) r LOOP
        EXECUTE format('INSERT INTO corpus.embedding_queue AS q (item_table, embedding_column, item_id, reason)
                        SELECT %s::oid, %L, t.%I::text, CASE WHEN t.%I IS NULL THEN ''missing'' ELSE ''requested'' END
                          FROM %s t WHERE %s
                        ON CONFLICT %s',
                       slot.item_table::oid, slot.embedding_column, id_column, embedding, rel,
                       CASE WHEN only_missing THEN format('t.%I IS NULL', embedding) ELSE 'true' END,
                       CASE WHEN renew
                            THEN '(item_table, embedding_column, item_id) DO UPDATE
                                  SET version = nextval(''corpus.embedding_queue_version_seq''), reason = EXCLUDED.reason,
                                      enqueued_at = now(), state = ''pending'', claimed_by = NULL, claimed_at = NULL,
                                      lease_until = NULL, attempts = 0, last_error = NULL'
                            ELSE 'DO NOTHING' END);
        GET DIAGNOSTICS n = ROW_COUNT;
        total := total + n;
    END LOOP;
    IF total > 0 THEN
        PERFORM pg_notify('pg_corpus_embedding', slot.item_table::text);
    END IF;
    RETURN total;
END
$$;

-- On a Citus worker: this node's copy of a slot the coordinator registered (its JSON, the
-- table named as text: the same table has another OID on every node), replacing an older
-- copy, and the first backlog of the shards placed here. With the caller's rights: the
-- registering role needs on every node the privileges it needs on the coordinator.
CREATE FUNCTION corpus._embedding_slot_replica(slot jsonb) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s corpus.embedding_slots := jsonb_populate_record(NULL::corpus.embedding_slots, slot);
BEGIN
    INSERT INTO corpus.embedding_slots AS e SELECT s.*
    ON CONFLICT (item_table, embedding_column) DO UPDATE
       SET id_column = EXCLUDED.id_column, id_type = EXCLUDED.id_type, input_columns = EXCLUDED.input_columns,
           model = EXCLUDED.model, dimensions = EXCLUDED.dimensions, trigger_name = EXCLUDED.trigger_name,
           trigger_function = EXCLUDED.trigger_function, id_attnum = EXCLUDED.id_attnum,
           embedding_attnum = EXCLUDED.embedding_attnum, input_attnums = EXCLUDED.input_attnums;
    RETURN corpus._enqueue_local(s, true, false);
END
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

-- The slot of (item_table, embedding_column), or 42704 naming it: the worker functions' lookup.
CREATE FUNCTION corpus._embedding_slot(item_table regclass, embedding_column name)
RETURNS corpus.embedding_slots
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    slot corpus.embedding_slots;
BEGIN
    -- by the name it was registered under, or by the column's current name
    SELECT * INTO slot FROM corpus.embedding_slots s
     WHERE s.item_table = _embedding_slot.item_table
       AND (s.embedding_column = _embedding_slot.embedding_column
            OR s.embedding_attnum = (SELECT a.attnum FROM pg_attribute a
                                      WHERE a.attrelid = _embedding_slot.item_table
                                        AND a.attname = _embedding_slot.embedding_column AND NOT a.attisdropped))
     ORDER BY s.embedding_column = _embedding_slot.embedding_column DESC
     LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = format('no registered embedding column "%s" on %s', embedding_column, item_table),
            HINT = 'See corpus.embedding_slots for the columns pg_corpus keeps fresh.';
    END IF;
    RETURN slot;
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
-- does not hold one huge transaction; each batch holds the queue while it runs (corpus._lock_queue).
-- A procedure: CALL it outside a transaction block. If it is interrupted, CALL it again: the slot
-- already records the new model, and it re-queues every item.
--
-- A procedure with a SET clause cannot COMMIT ("invalid transaction termination"), so the work is
-- done by two functions with the pinned search_path and the procedure only loops, pinning the
-- search_path for each of its transactions with set_config(..., is_local => true).
CREATE FUNCTION corpus._embedding_model_start(item_table regclass, embedding_column name, model text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    total bigint;
BEGIN
    IF model IS NULL OR btrim(model) = '' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'model must be a non-empty name',
            HINT = 'Name the model the way workers report it, e.g. ''multilingual-e5-small''.';
    END IF;
    PERFORM corpus._embedding_slot(item_table, embedding_column);
    UPDATE corpus.embedding_slots s SET model = _embedding_model_start.model
     WHERE s.item_table = _embedding_model_start.item_table
       AND s.embedding_column = _embedding_model_start.embedding_column;
    -- the other Citus nodes' copies of the slot record it too
    PERFORM corpus._citus_fan_out(item_table,
        format('SELECT corpus._embedding_slot_replica(%L::jsonb)',
               (SELECT to_jsonb(s) FROM corpus.embedding_slots s
                 WHERE s.item_table = _embedding_model_start.item_table
                   AND s.embedding_column = _embedding_model_start.embedding_column)));
    EXECUTE format('SELECT count(*) FROM %s', item_table) INTO total;
    RETURN total;
END
$$;

-- One batch: the next batch_size items of `relation` (the item table, or one of its shards on
-- this node: corpus._local_relations) after `after` (keyset pagination on the id's own type, so
-- each batch is an index range scan). Returns how many and the last id.
CREATE FUNCTION corpus._embedding_model_batch(item_table regclass, embedding_column name, relation regclass,
                                              after text, batch_size integer, OUT n bigint, OUT last text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    slot      corpus.embedding_slots;
    id_column name;
BEGIN
    SELECT * INTO STRICT slot FROM corpus.embedding_slots s
     WHERE s.item_table = _embedding_model_batch.item_table
       AND s.embedding_column = _embedding_model_batch.embedding_column;
    id_column := corpus._slot_column(item_table, (corpus._slot_attnums(slot)).id_attnum);
    PERFORM corpus._require_slot_columns(slot, id_column,
                                         corpus._slot_column(item_table, (corpus._slot_attnums(slot)).embedding_attnum));
    EXECUTE format('WITH batch AS (SELECT t.%1$I AS id FROM %2$s t
                                    WHERE $1 IS NULL OR t.%1$I > $1::%5$s
                                    ORDER BY t.%1$I LIMIT $2),
                        q AS (INSERT INTO corpus.embedding_queue AS q (item_table, embedding_column, item_id, reason)
                              SELECT %3$s::oid, %4$L, id::text, ''model_changed'' FROM batch
                              ON CONFLICT (item_table, embedding_column, item_id) DO UPDATE
                                 SET version = nextval(''corpus.embedding_queue_version_seq''),
                                     reason = ''model_changed'', enqueued_at = now(), state = ''pending'',
                                     claimed_by = NULL, claimed_at = NULL, lease_until = NULL, attempts = 0,
                                     last_error = NULL)
                   SELECT count(*), max(id)::text FROM batch',
                   id_column, relation, item_table::oid, slot.embedding_column,
                   (SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
                     WHERE a.attrelid = item_table AND a.attname = id_column))
       INTO n, last USING after, batch_size;
    IF n > 0 THEN
        PERFORM pg_notify('pg_corpus_embedding', item_table::text);
    END IF;
END
$$;

-- One batch of a model change on this node, for a coordinator driving it from another node:
-- `state` is where the previous batch ended ({"relation": its index among this node's
-- relations of the table, "after": the last id}, {} to begin); answers the next state with
-- the batch's size n, or {"done": true}.
CREATE FUNCTION corpus._embedding_model_step(item_table regclass, embedding_column name, state jsonb,
                                             batch_size integer) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rels  regclass[] := ARRAY(SELECT r FROM corpus._local_relations(item_table) r);
    i     integer := coalesce((state->>'relation')::integer, 1);
    after text := state->>'after';
    b     record;
BEGIN
    -- (a batch holds the queue while it runs: corpus._lock_queue)
    IF i <= coalesce(cardinality(rels), 0) THEN
        PERFORM corpus._lock_queue(rels[i:]);
    END IF;
    WHILE i <= coalesce(cardinality(rels), 0) LOOP
        SELECT * INTO b FROM corpus._embedding_model_batch(item_table, embedding_column, rels[i], after, batch_size);
        IF b.n > 0 THEN
            RETURN jsonb_build_object('relation', i, 'after', b.last, 'n', b.n);
        END IF;
        i := i + 1;
        after := NULL;
    END LOOP;
    RETURN '{"done": true}'::jsonb;
END
$$;

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
END
$$;
