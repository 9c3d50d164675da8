-- ==========================================================================================
-- pg_corpus catalog: corpus and source definitions.
--
-- Definitions are data. PUBLIC may read them (searches run with the caller's rights and read
-- the definition), only the extension owner and the roles it grants write privileges to may
-- change them. The definition functions below run with the caller's rights (no SECURITY
-- DEFINER), so table privileges are the access control, and every function pins search_path.
--
-- Shape checks and the resolution of every column against the live tables happen in one place,
-- the Rust core (corpus._validate_corpus -> pg_corpus_core::resolve), which the search path
-- uses too: a definition that would fail at search time fails when it is made.
-- ==========================================================================================

-- pg_corpus reads every text as UTF-8 (analysers, BM25 documents, the content rule): it is
-- installed only in a UTF8 database, where PostgreSQL guarantees every text value is valid UTF-8.
DO $$
BEGIN
    IF pg_catalog.getdatabaseencoding() OPERATOR(pg_catalog.<>) 'UTF8' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'feature_not_supported',
            MESSAGE = pg_catalog.format('pg_corpus requires a UTF8 database; database %I is encoded %s',
                                        pg_catalog.current_database(), pg_catalog.getdatabaseencoding()),
            DETAIL = 'pg_corpus reads text as UTF-8: its analysers, BM25 documents and content rule.',
            HINT = 'Install pg_corpus in a database created with ENCODING ''UTF8'' (CREATE DATABASE ... ENCODING ''UTF8'' TEMPLATE template0).';
    END IF;
END
$$;

-- ------------------------------------------------------------------------------------------
-- Citus. pg_corpus runs on a Citus coordinator and its workers, with the extension in every
-- node's database (Citus creates it on the workers). These functions are the only ones that
-- read Citus' metadata (through dynamic SQL: its tables exist only with Citus); without Citus
-- they answer "a table of this node", and nothing else changes. README "Scaling out".
-- ------------------------------------------------------------------------------------------
CREATE FUNCTION corpus._citus_present() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')
$$;

-- How Citus keeps a table: 'distributed' (sharded: hash-distributed, or a single shard),
-- 'reference' (a full copy on every node), or NULL (a table of this node only, also a Citus
-- local table's shell).
CREATE FUNCTION corpus._citus_table_kind(rel regclass) RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    kind text;
BEGIN
    IF rel IS NULL OR NOT corpus._citus_present() THEN
        RETURN NULL;
    END IF;
    EXECUTE 'SELECT CASE WHEN p.repmodel = ''t'' THEN ''reference''
                         WHEN p.partmethod <> ''n'' OR p.colocationid <> 0 THEN ''distributed'' END
               FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = $1'
       INTO kind USING rel;
    RETURN kind;
END
$$;

-- The distribution column of a distributed table ('' for a single-shard table, which has
-- none); NULL for any other table.
CREATE FUNCTION corpus._citus_distribution_column(rel regclass) RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    col text;
BEGIN
    IF corpus._citus_table_kind(rel) IS DISTINCT FROM 'distributed' THEN
        RETURN NULL;
    END IF;
    EXECUTE 'SELECT coalesce(CASE WHEN p.partkey IS NOT NULL
                                  THEN pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) END, '''')
               FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = $1'
       INTO col USING rel;
    RETURN col;
END
$$;

-- The relations on this node that hold rows of `rel`: the table itself, or for a distributed
-- or reference table its shards placed on this node (none on a coordinator without shards).
CREATE FUNCTION corpus._local_relations(rel regclass) RETURNS SETOF regclass
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF corpus._citus_table_kind(rel) IS NULL THEN
        RETURN NEXT rel;
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'SELECT x.r FROM (SELECT corpus._citus_shard_relation(s.logicalrelid, s.shardid) AS r, s.shardid
                            FROM pg_catalog.pg_dist_shard s
                            JOIN pg_catalog.pg_dist_placement pl ON pl.shardid = s.shardid
                           WHERE s.logicalrelid = $1
                             AND pl.groupid = (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)) x
          WHERE x.r IS NOT NULL ORDER BY x.shardid'
        USING rel;
END
$$;

-- A shard of a distributed table, as a relation of this node (NULL: not here). Citus'
-- shard_name leaves the schema out for public.
CREATE FUNCTION corpus._citus_shard_relation(logical regclass, shard bigint) RETURNS regclass
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    name text;
BEGIN
    EXECUTE 'SELECT pg_catalog.shard_name($1, $2)' INTO name USING logical, shard;
    IF (SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         WHERE c.oid = logical) = 'public' THEN
        name := 'public.' || name;
    END IF;
    RETURN pg_catalog.to_regclass(name);
END
$$;

-- The distributed table a shard of this node belongs to (NULL: not a shard).
CREATE FUNCTION corpus._citus_shard_table(relid oid) RETURNS oid
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    shard   bigint := substring((SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = relid)
                                FROM '_([0-9]{1,18})$')::bigint;   -- (a bigint, whatever the name)
    logical oid;
BEGIN
    IF shard IS NULL OR NOT corpus._citus_present() THEN
        RETURN NULL;
    END IF;
    EXECUTE 'SELECT s.logicalrelid FROM pg_catalog.pg_dist_shard s
              WHERE s.shardid = $1 AND corpus._citus_shard_relation(s.logicalrelid, s.shardid) = $2::pg_catalog.regclass'
       INTO logical USING shard, relid;
    RETURN logical;
END
$$;

-- What this node is in a Citus cluster: 'coordinator' (of a cluster with other nodes: the
-- worker API and the definition functions then reach the queue entries and slot copies kept
-- on them), 'worker' (the catalog of corpora is not kept here), 'alone' (a coordinator without
-- other nodes), NULL without Citus.
CREATE FUNCTION corpus._citus_node_role() RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    node_role text;
BEGIN
    IF NOT corpus._citus_present() THEN
        RETURN NULL;
    END IF;
    EXECUTE 'SELECT CASE WHEN (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g) <> 0 THEN ''worker''
                         WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_dist_node n
                                       WHERE n.isactive AND n.noderole = ''primary'' AND n.groupid <> 0)
                         THEN ''coordinator'' ELSE ''alone'' END'
       INTO node_role;
    RETURN node_role;
END
$$;

CREATE FUNCTION corpus._citus_coordinator() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(corpus._citus_node_role() = 'coordinator', false)
$$;

-- Run a statement here and answer its first column as text, or the error it raised as JSON
-- ({"error": {sqlstate, message, detail, hint}}): what corpus._citus_on_other_nodes sends to
-- each node, so that a node's error reaches the caller with its own SQLSTATE.
CREATE FUNCTION corpus._citus_run_here(command text) RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    result text;
    st     text;
    msg    text;
    det    text;
    hin    text;
BEGIN
    EXECUTE command INTO result;
    RETURN pg_catalog.jsonb_build_object('result', result)::text;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
                            hin = PG_EXCEPTION_HINT;
    RETURN pg_catalog.jsonb_build_object('error', pg_catalog.jsonb_build_object(
               'sqlstate', st, 'message', msg, 'detail', det, 'hint', hin))::text;
END
$$;

-- The other active primary nodes of the Citus cluster (none without Citus).
CREATE FUNCTION corpus._citus_other_nodes(OUT node_name text, OUT node_port integer) RETURNS SETOF record
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT corpus._citus_present() THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE 'SELECT n.nodename::text, n.nodeport::integer FROM pg_catalog.pg_dist_node n
                           WHERE n.isactive AND n.noderole = ''primary''
                             AND n.groupid <> (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)
                           ORDER BY n.nodeid';
END
$$;

-- (the worker API and the definition functions call these with the caller's rights)

CREATE TABLE corpus.corpora (
    name             text PRIMARY KEY
                     CONSTRAINT corpora_name_check CHECK (name ~ '^[a-z_][a-z0-9_]{0,62}$'),
    description      text,
    isolation        jsonb NOT NULL DEFAULT '{}'
                     CONSTRAINT corpora_isolation_check CHECK (jsonb_typeof(isolation) = 'object'),
    required_filters text[] NOT NULL DEFAULT '{}',
    filter_fields    jsonb NOT NULL DEFAULT '{}'
                     CONSTRAINT corpora_filter_fields_check CHECK (jsonb_typeof(filter_fields) = 'object'),
    created_at       timestamptz NOT NULL DEFAULT now(),
    created_by       name NOT NULL DEFAULT current_user,
    -- named embedding spaces (0.3.0): {"name": {"dimensions": n, "model": "...", "weight": w}}
    spaces           jsonb NOT NULL DEFAULT '{}'
                     CONSTRAINT corpora_spaces_check CHECK (jsonb_typeof(spaces) = 'object'),
    -- the evidence filter (0.3.0): {"enabled", "rare_share", "min_coverage", "vector": {space: {...}}}
    evidence         jsonb NOT NULL DEFAULT '{}'
                     CONSTRAINT corpora_evidence_check CHECK (jsonb_typeof(evidence) = 'object'),
    -- must-include classes (0.3.0): [{"name", "source", "filters", "top"}]
    must_include     jsonb NOT NULL DEFAULT '[]'
                     CONSTRAINT corpora_must_include_check CHECK (jsonb_typeof(must_include) = 'array'),
    -- graph expansion limits (0.3.0): {"seeds", "max_added", "hop_penalty"}
    graph            jsonb NOT NULL DEFAULT '{}'
                     CONSTRAINT corpora_graph_check CHECK (jsonb_typeof(graph) = 'object'),
    -- the search audit log (0.3.0): {"enabled": bool, "query_text": bool}
    audit            jsonb NOT NULL DEFAULT '{}'
                     CONSTRAINT corpora_audit_check CHECK (jsonb_typeof(audit) = 'object'),
    -- fusion defaults of its searches (0.4.0): {"rrf_k", "window", "feedback"}
    ranking          jsonb NOT NULL DEFAULT '{}'
                     CONSTRAINT corpora_ranking_check CHECK (jsonb_typeof(ranking) = 'object')
);
COMMENT ON TABLE corpus.corpora IS 'pg_corpus: one row per corpus (isolation predicate, filters)';

CREATE TABLE corpus.sources (
    corpus           text NOT NULL REFERENCES corpus.corpora (name) ON DELETE CASCADE,
    name             text NOT NULL
                     CONSTRAINT sources_name_check CHECK (name ~ '^[a-z_][a-z0-9_]{0,62}$'),
    item_table       regclass NOT NULL,
    id_column        name NOT NULL,
    text_column      name NOT NULL,
    tsv_column       name NOT NULL,
    embedding_column name NOT NULL,
    -- the text columns the embedding is computed from (re-embed when they change)
    embedding_inputs name[] NOT NULL,
    distance         text NOT NULL DEFAULT 'cosine',
    parent_table     regclass,
    parent_fk        name NOT NULL,
    parent_key       name NOT NULL DEFAULT 'id',
    parent_required  text[] NOT NULL DEFAULT '{}',
    rule             jsonb NOT NULL DEFAULT '{}',
    locator          jsonb NOT NULL DEFAULT '{}',
    metadata         jsonb NOT NULL DEFAULT '{}',
    min_length       integer NOT NULL DEFAULT 50,
    ts_config        regconfig NOT NULL DEFAULT 'simple',
    -- pg_corpus analyser language when tsv_column is built by corpus.bm25_document
    language         text,
    semantic_weight  float8 NOT NULL DEFAULT 1,
    lexical_weight   float8 NOT NULL DEFAULT 1,
    -- the column types when the source was defined (or the corpus last altered): the health
    -- check reports a retype that still validates as catalog drift; and under "attnums" the
    -- attribute number of every name the definition has used, so that renames are followed
    column_types     jsonb NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- the embedding space of the source (0.3.0); NULL: the corpus' default space
    space            text,
    PRIMARY KEY (corpus, name)
);
COMMENT ON TABLE corpus.sources IS 'pg_corpus: one row per item table registered in a corpus';

-- Citation edges a search with expand => true follows (0.3.0): rows of edge_table say that
-- item from_column (of from_source) cites item to_column (of to_source); only that direction
-- is followed.
CREATE TABLE corpus.edges (
    corpus      text NOT NULL REFERENCES corpus.corpora (name) ON DELETE CASCADE,
    name        text NOT NULL
                CONSTRAINT edges_name_check CHECK (name ~ '^[a-z_][a-z0-9_]{0,62}$'),
    edge_table  regclass NOT NULL,
    from_source text NOT NULL,
    from_column name NOT NULL,
    to_source   text NOT NULL,
    to_column   name NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (corpus, name),
    FOREIGN KEY (corpus, from_source) REFERENCES corpus.sources (corpus, name) ON DELETE CASCADE,
    FOREIGN KEY (corpus, to_source) REFERENCES corpus.sources (corpus, name) ON DELETE CASCADE
);
COMMENT ON TABLE corpus.edges IS 'pg_corpus: citation edge sets a search may expand along';

-- The search audit log (0.3.0): one row per search of a corpus whose
-- audit is enabled, written by the search in the caller's transaction with the rights of the
-- extension's owner. Nobody else may read or change it until the owner grants it: GRANT SELECT
-- to the auditor role, DELETE (or corpus_audit_purge's EXECUTE) to whoever applies retention.
CREATE TABLE corpus.search_audit (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    logged_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    role        name NOT NULL,
    session_role name NOT NULL,
    corpus      text NOT NULL,
    function    text NOT NULL,
    mode        text NOT NULL,
    k           integer NOT NULL,
    filters     jsonb NOT NULL,
    query_hash  text NOT NULL,
    query_text  text,
    results     jsonb NOT NULL,
    options     jsonb NOT NULL,
    latency_ms  float8 NOT NULL
);
CREATE INDEX search_audit_logged_at ON corpus.search_audit (logged_at);
CREATE INDEX search_audit_corpus ON corpus.search_audit (corpus, logged_at);
COMMENT ON TABLE corpus.search_audit IS 'pg_corpus: the search audit log (corpora with audit enabled)';
REVOKE ALL ON corpus.search_audit FROM PUBLIC;

-- pg_dump must keep the user's definitions.
SELECT pg_catalog.pg_extension_config_dump('corpus.corpora', '');
SELECT pg_catalog.pg_extension_config_dump('corpus.sources', '');
SELECT pg_catalog.pg_extension_config_dump('corpus.edges', '');
SELECT pg_catalog.pg_extension_config_dump('corpus.search_audit', '');

-- Lock the catalog down: read for everyone, write for the owner (and whom it grants).
REVOKE ALL ON SCHEMA corpus FROM PUBLIC;
GRANT USAGE ON SCHEMA corpus TO PUBLIC;
REVOKE ALL ON corpus.corpora, corpus.sources, corpus.edges FROM PUBLIC;
GRANT SELECT ON corpus.corpora, corpus.sources, corpus.edges TO PUBLIC;

-- Every backend keeps resolved definitions in a cache (src/spi/catalog.rs; the rules are in
-- pg_corpus_core::engine::cache). Statement triggers on both tables (corpus._catalog_changed,
-- created with the function in src/spi/catalog.rs) send an invalidation for any write, by the
-- definition functions or by hand: other backends drop their cached definitions when the
-- writing transaction commits, this one at its next command (and again if it aborts).
