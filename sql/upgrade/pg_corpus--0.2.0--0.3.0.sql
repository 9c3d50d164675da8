-- pg_corpus 0.2.0 -> 0.3.0
--
-- * Multi-query fusion: corpus_hybrid_search and corpus_explain take extra_queries (a JSON
--   array of {text, vector, weight, label}); every hit says which queries ranked it
--   (query_ranks), every explained subplan which query it searches for (query). Their result
--   types change, so both are dropped and created again (CREATE OR REPLACE cannot add a column).
-- * Their C functions, and corpus_evaluate's, have new symbols (hybrid_search_wrapper,
--   explain_wrapper, evaluate_wrapper): the old symbols keep the old arguments and columns,
--   so a database still at 0.2.0 keeps working with this library until it is updated.
-- * corpus_find_similar: a search by one of the corpus' own items, never returning it.
-- * Lenient filters: searches take filter_mode ('strict' or 'lenient': invalid conditions
--   dropped and reported), filter fields may declare allowed values or a range, and
--   corpus_check_filters says what a search keeps and drops.
-- * Named embedding spaces: corpus.corpora.spaces, corpus.sources.space; corpus_create,
--   corpus_alter (spaces) and corpus_add_source (space) take them, corpus_list shows them,
--   searches take query_vectors (one vector per space).
-- * The result side: the evidence filter (corpus.corpora.evidence,
--   searches' evidence argument and column, corpus_calibrate_evidence), must-include classes
--   (corpus.corpora.must_include), citation-graph expansion (corpus.edges, corpus_add_edges,
--   corpus_drop_edges, corpus.corpora.graph, searches' expand argument); every hit says how it
--   came in (origin). The search audit log: corpus.corpora.audit, corpus.search_audit,
--   corpus_audit_purge; corpus_hybrid_search and corpus_find_similar become VOLATILE PARALLEL
--   UNSAFE (they write the log of corpora that keep one).
-- * The changed functions are dropped and created again, so a GRANT or REVOKE of
--   EXECUTE on them made after installing is not kept: repeat it after the update.
-- * Gold queries may store extra queries (corpus.gold_queries.extra_queries), which
--   corpus_evaluate(..., extra_queries => true) fuses.
\echo Use "ALTER EXTENSION pg_corpus UPDATE TO '0.3.0'" to load this file. \quit

DROP FUNCTION corpus.corpus_hybrid_search(text, vector, text, integer, jsonb, text, integer, integer, integer,
                                          boolean, boolean);
DROP FUNCTION corpus.corpus_explain(text, vector, text, integer, jsonb, text, integer, boolean);
DROP FUNCTION corpus.corpus_evaluate(text, text[], integer, integer, integer, integer, boolean);

DROP FUNCTION corpus.corpus_create(text, jsonb, text[], jsonb, text);
DROP FUNCTION corpus.corpus_alter(text, jsonb, text[], jsonb, text);
DROP FUNCTION corpus.corpus_add_source(text, text, regclass, text, text, text, text, regclass, text, text, text[],
                                       jsonb, jsonb, jsonb, integer, regconfig, text, float8, float8, text[], text, text);
DROP FUNCTION corpus.corpus_list();

ALTER TABLE corpus.corpora ADD COLUMN spaces jsonb NOT NULL DEFAULT '{}'
    CONSTRAINT corpora_spaces_check CHECK (jsonb_typeof(spaces) = 'object');
ALTER TABLE corpus.sources ADD COLUMN space text;
ALTER TABLE corpus.corpora ADD COLUMN evidence jsonb NOT NULL DEFAULT '{}'
    CONSTRAINT corpora_evidence_check CHECK (jsonb_typeof(evidence) = 'object');
ALTER TABLE corpus.corpora ADD COLUMN must_include jsonb NOT NULL DEFAULT '[]'
    CONSTRAINT corpora_must_include_check CHECK (jsonb_typeof(must_include) = 'array');
ALTER TABLE corpus.corpora ADD COLUMN graph jsonb NOT NULL DEFAULT '{}'
    CONSTRAINT corpora_graph_check CHECK (jsonb_typeof(graph) = 'object');
ALTER TABLE corpus.corpora ADD COLUMN audit jsonb NOT NULL DEFAULT '{}'
    CONSTRAINT corpora_audit_check CHECK (jsonb_typeof(audit) = 'object');

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
SELECT pg_catalog.pg_extension_config_dump('corpus.search_audit', '');

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
SELECT pg_catalog.pg_extension_config_dump('corpus.edges', '');
REVOKE ALL ON corpus.edges FROM PUBLIC;
GRANT SELECT ON corpus.edges TO PUBLIC;
CREATE TRIGGER definitions_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON corpus.edges
    FOR EACH STATEMENT EXECUTE FUNCTION corpus._catalog_changed();

ALTER TABLE corpus.gold_queries ADD COLUMN extra_queries jsonb
    CONSTRAINT gold_queries_extra_queries_check
    CHECK (extra_queries IS NULL OR jsonb_typeof(extra_queries) = 'array');

CREATE OR REPLACE FUNCTION corpus._corpus_definition(corpus_name text) RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- (PL/pgSQL: its plan is kept for the session, an SQL function's is made at every call)
    RETURN (
    SELECT jsonb_build_object(
        'name', c.name,
        'description', c.description,
        'isolation', c.isolation,
        'required_filters', to_jsonb(c.required_filters),
        'filter_fields', c.filter_fields,
        'spaces', c.spaces,
        'evidence', c.evidence,
        'must_include', c.must_include,
        'graph', c.graph,
        'audit', c.audit,
        'edges', COALESCE((
            SELECT jsonb_agg(jsonb_build_object(
                       'name', e.name,
                       'table', corpus._relation_json(e.edge_table),
                       'table_oid', e.edge_table::oid::bigint,
                       'from_source', e.from_source,
                       'from_column', e.from_column::text,
                       'to_source', e.to_source,
                       'to_column', e.to_column::text) ORDER BY e.name)
              FROM corpus.edges e
             WHERE e.corpus = c.name), '[]'::jsonb),
        -- searches measure text with corpus._content_length (absent from older catalogs)
        'content_function', true,
        'vector_schema', (SELECT n.nspname::text FROM pg_extension e
                            JOIN pg_namespace n ON n.oid = e.extnamespace
                           WHERE e.extname = 'vector'),
        'sources', COALESCE((
            SELECT jsonb_agg(jsonb_build_object(
                       'name', s.name,
                       'item', corpus._relation_json(s.item_table),
                       'item_oid', s.item_table::oid::bigint,
                       'id_column', s.id_column::text,
                       'text_column', s.text_column::text,
                       'tsv_column', s.tsv_column::text,
                       'embedding_column', s.embedding_column::text,
                       'embedding_inputs', to_jsonb(s.embedding_inputs::text[]),
                       'distance', s.distance,
                       'parent', CASE WHEN s.parent_table IS NULL THEN NULL
                                      ELSE corpus._relation_json(s.parent_table) END,
                       'parent_oid', s.parent_table::oid::bigint,
                       'parent_fk', s.parent_fk::text,
                       'parent_key', s.parent_key::text,
                       'parent_required', to_jsonb(s.parent_required),
                       'rule', s.rule,
                       'locator', s.locator,
                       'metadata', s.metadata,
                       'min_length', s.min_length,
                       'ts_config', s.ts_config::oid::bigint,
                       'language', s.language,
                       'semantic_weight', s.semantic_weight,
                       'lexical_weight', s.lexical_weight,
                       'column_types', s.column_types,
                       'space', s.space)
                     ORDER BY s.name)
              FROM corpus.sources s
             WHERE s.corpus = c.name), '[]'::jsonb))
      FROM corpus.corpora c
     WHERE c.name = corpus_name);
END
$$;

CREATE FUNCTION corpus.corpus_create(
    name             text,
    isolation        jsonb  DEFAULT '{}',
    required_filters text[] DEFAULT '{}',
    filter_fields    jsonb  DEFAULT '{}',
    description      text   DEFAULT NULL,
    spaces           jsonb  DEFAULT '{}',
    evidence         jsonb  DEFAULT '{}',
    must_include     jsonb  DEFAULT '[]',
    graph            jsonb  DEFAULT '{}',
    audit            jsonb  DEFAULT '{}'
) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF name IS NULL OR name !~ '^[a-z_][a-z0-9_]{0,62}$' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('invalid corpus name "%s"', name),
            HINT = 'A corpus name is a lower-case identifier: letters, digits and _, at most 63 characters.';
    END IF;
    PERFORM corpus._require_object(isolation, 'isolation');
    PERFORM corpus._require_object(filter_fields, 'filter_fields');
    PERFORM corpus._require_object(spaces, 'spaces');
    PERFORM corpus._require_object(evidence, 'evidence');
    PERFORM corpus._require_array(must_include, 'must_include');
    PERFORM corpus._require_object(graph, 'graph');
    PERFORM corpus._require_object(audit, 'audit');
    IF EXISTS (SELECT 1 FROM corpus.corpora c WHERE c.name = corpus_create.name) THEN
        RAISE EXCEPTION USING ERRCODE = '42710',
            MESSAGE = format('corpus "%s" already exists', name),
            HINT = 'Use corpus.corpus_alter to change it, or corpus.corpus_drop first.';
    END IF;
    INSERT INTO corpus.corpora (name, description, isolation, required_filters, filter_fields, spaces,
                                evidence, must_include, graph, audit)
    VALUES (name, description, COALESCE(isolation, '{}'), COALESCE(required_filters, '{}'),
            COALESCE(filter_fields, '{}'), COALESCE(spaces, '{}'), COALESCE(evidence, '{}'),
            COALESCE(must_include, '[]'), COALESCE(graph, '{}'), COALESCE(audit, '{}'));
    PERFORM corpus._validate_corpus(name);
END
$$;

CREATE FUNCTION corpus.corpus_add_source(
    corpus           text,
    source           text,
    item_table       regclass,
    text_column      text,
    embedding_column text,
    tsv_column       text,
    id_column        text      DEFAULT 'id',
    parent_table     regclass  DEFAULT NULL,
    parent_fk        text      DEFAULT NULL,
    parent_key       text      DEFAULT 'id',
    parent_required  text[]    DEFAULT '{}',
    rule             jsonb     DEFAULT '{}',
    locator          jsonb     DEFAULT '{}',
    metadata         jsonb     DEFAULT '{}',
    min_length       integer   DEFAULT 50,
    ts_config        regconfig DEFAULT 'simple',
    distance         text      DEFAULT 'cosine',
    semantic_weight  float8    DEFAULT 1,
    lexical_weight   float8    DEFAULT 1,
    embedding_inputs text[]    DEFAULT NULL,
    embedding_model  text      DEFAULT NULL,
    language         text      DEFAULT NULL,
    space            text      DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM corpus.corpora c WHERE c.name = corpus) THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = format('corpus "%s" does not exist', corpus),
            HINT = 'Create it with corpus.corpus_create, or see corpus.corpus_list().';
    END IF;
    IF source IS NULL OR source !~ '^[a-z_][a-z0-9_]{0,62}$' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('invalid source name "%s"', source),
            HINT = 'A source name is a lower-case identifier: letters, digits and _, at most 63 characters.';
    END IF;
    IF EXISTS (SELECT 1 FROM corpus.sources s WHERE s.corpus = corpus_add_source.corpus
                                                   AND s.name = source) THEN
        RAISE EXCEPTION USING ERRCODE = '42710',
            MESSAGE = format('source "%s" is already registered in corpus "%s"', source, corpus),
            HINT = 'Use corpus.corpus_drop_source first to redefine it.';
    END IF;
    IF item_table IS NULL OR text_column IS NULL OR embedding_column IS NULL
       OR tsv_column IS NULL OR id_column IS NULL OR parent_fk IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004',
            MESSAGE = 'item_table, id_column, text_column, embedding_column, tsv_column and parent_fk are required',
            HINT = 'parent_fk names the item column that holds the parent id (the capping and provenance key).';
    END IF;
    IF cardinality(embedding_inputs) = 0 OR array_position(embedding_inputs, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'embedding_inputs must name at least one column, and no NULL',
            HINT = 'Name the text columns the embedding is computed from, or leave embedding_inputs out to use text_column.';
    END IF;
    INSERT INTO corpus.sources AS s (corpus, name, item_table, id_column, text_column, tsv_column,
        embedding_column, embedding_inputs, distance, parent_table, parent_fk, parent_key, parent_required, rule,
        locator, metadata, min_length, ts_config, language, semantic_weight, lexical_weight, space)
    VALUES (corpus, source, item_table, id_column, text_column, tsv_column, embedding_column,
        COALESCE(embedding_inputs, ARRAY[text_column])::name[],
        COALESCE(distance, 'cosine'), parent_table, parent_fk, COALESCE(parent_key, 'id'),
        COALESCE(parent_required, '{}'), COALESCE(rule, '{}'), COALESCE(locator, '{}'),
        COALESCE(metadata, '{}'), COALESCE(min_length, 50), COALESCE(ts_config, 'simple'), language,
        COALESCE(semantic_weight, 1), COALESCE(lexical_weight, 1), space);
    PERFORM corpus._validate_corpus(corpus);
    -- only the new source: another source's retype stays visible as drift
    PERFORM corpus._snapshot_column_types(corpus, source);
    -- Keep the embeddings honest: the re-embed trigger and queue (sql/embedding.sql).
    PERFORM corpus._attach_embedding_slot(item_table, embedding_column::name, id_column::name,
        COALESCE(embedding_inputs, ARRAY[text_column])::name[], embedding_model,
        (SELECT a.atttypmod FROM pg_attribute a WHERE a.attrelid = item_table AND a.attname = embedding_column));
    -- BM25 statistics over the corpus' new extent
    PERFORM corpus.corpus_refresh_lexical_stats(corpus);
END
$$;

CREATE FUNCTION corpus.corpus_alter(
    name             text,
    isolation        jsonb  DEFAULT NULL,
    required_filters text[] DEFAULT NULL,
    filter_fields    jsonb  DEFAULT NULL,
    description      text   DEFAULT NULL,
    spaces           jsonb  DEFAULT NULL,
    evidence         jsonb  DEFAULT NULL,
    must_include     jsonb  DEFAULT NULL,
    graph            jsonb  DEFAULT NULL,
    audit            jsonb  DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM corpus._require_object(isolation, 'isolation');
    PERFORM corpus._require_object(filter_fields, 'filter_fields');
    PERFORM corpus._require_object(spaces, 'spaces');
    PERFORM corpus._require_object(evidence, 'evidence');
    PERFORM corpus._require_array(must_include, 'must_include');
    PERFORM corpus._require_object(graph, 'graph');
    PERFORM corpus._require_object(audit, 'audit');
    UPDATE corpus.corpora c
       SET isolation        = COALESCE(corpus_alter.isolation, c.isolation),
           required_filters = COALESCE(corpus_alter.required_filters, c.required_filters),
           filter_fields    = COALESCE(corpus_alter.filter_fields, c.filter_fields),
           description      = COALESCE(corpus_alter.description, c.description),
           spaces           = COALESCE(corpus_alter.spaces, c.spaces),
           evidence         = COALESCE(corpus_alter.evidence, c.evidence),
           must_include     = COALESCE(corpus_alter.must_include, c.must_include),
           graph            = COALESCE(corpus_alter.graph, c.graph),
           audit            = COALESCE(corpus_alter.audit, c.audit)
     WHERE c.name = corpus_alter.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = format('corpus "%s" does not exist', name),
            HINT = 'See corpus.corpus_list() for the defined corpora.';
    END IF;
    PERFORM corpus._validate_corpus(name);
    PERFORM corpus._snapshot_column_types(name);
    PERFORM corpus.corpus_refresh_lexical_stats(name);
END
$$;

CREATE FUNCTION corpus.corpus_list()
RETURNS TABLE (name text, description text, isolation jsonb, required_filters text[],
               filter_fields jsonb, sources jsonb, spaces jsonb, evidence jsonb, must_include jsonb,
               graph jsonb, edges jsonb, audit jsonb)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.name, c.description, c.isolation, c.required_filters, c.filter_fields,
           COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'source', s.name,
                        'item_table', s.item_table::text,
                        'id_column', s.id_column, 'text_column', s.text_column,
                        'tsv_column', s.tsv_column, 'embedding_column', s.embedding_column,
                        'distance', s.distance,
                        'parent_table', s.parent_table::text, 'parent_fk', s.parent_fk,
                        'parent_key', s.parent_key, 'parent_required', s.parent_required,
                        'rule', s.rule, 'locator', s.locator, 'metadata', s.metadata,
                        'min_length', s.min_length, 'ts_config', s.ts_config::text, 'language', s.language,
                        'semantic_weight', s.semantic_weight,
                        'lexical_weight', s.lexical_weight,
                       'column_types', s.column_types, 'space', s.space) ORDER BY s.name)
                       FROM corpus.sources s WHERE s.corpus = c.name), '[]'::jsonb),
           c.spaces, c.evidence, c.must_include, c.graph,
           COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'name', e.name, 'edge_table', e.edge_table::text,
                        'from_source', e.from_source, 'from_column', e.from_column,
                        'to_source', e.to_source, 'to_column', e.to_column) ORDER BY e.name)
                       FROM corpus.edges e WHERE e.corpus = c.name), '[]'::jsonb),
           c.audit
      FROM corpus.corpora c
     ORDER BY c.name
$$;

CREATE FUNCTION corpus."corpus_explain"(
	"corpus" TEXT, /* Option < & str > */
	"query_vec" vector DEFAULT NULL, /* Option < Vector > */
	"query_text" TEXT DEFAULT NULL, /* Option < & str > */
	"k" INT DEFAULT 10, /* Option < i32 > */
	"filters" jsonb DEFAULT '{}', /* Option < JsonbText > */
	"mode" TEXT DEFAULT 'hybrid', /* Option < & str > */
	"candidates" INT DEFAULT NULL, /* Option < i32 > */
	"include_stale" bool DEFAULT false, /* Option < bool > */
	"extra_queries" jsonb DEFAULT NULL, /* Option < JsonbText > */
	"filter_mode" TEXT DEFAULT 'strict', /* Option < & str > */
	"query_vectors" jsonb DEFAULT NULL, /* Option < JsonbText > */
	"evidence" bool DEFAULT NULL /* Option < bool > */
) RETURNS TABLE (
	"source" TEXT,  /* String */
	"branch" TEXT,  /* String */
	"strategy" TEXT,  /* String */
	"sql" TEXT,  /* String */
	"params" jsonb,  /* JsonB */
	"query" TEXT  /* String */
)
STABLE PARALLEL RESTRICTED 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'explain_wrapper';

CREATE FUNCTION corpus."corpus_hybrid_search"(
	"corpus" TEXT, /* Option < & str > */
	"query_vec" vector, /* Option < Vector > */
	"query_text" TEXT, /* Option < & str > */
	"k" INT DEFAULT 10, /* Option < i32 > */
	"filters" jsonb DEFAULT '{}', /* Option < JsonbText > */
	"mode" TEXT DEFAULT 'hybrid', /* Option < & str > */
	"max_per_parent" INT DEFAULT 3, /* Option < i32 > */
	"candidates" INT DEFAULT NULL, /* Option < i32 > */
	"rrf_k" INT DEFAULT 60, /* Option < i32 > */
	"include_stale" bool DEFAULT false, /* Option < bool > */
	"feedback" bool DEFAULT NULL, /* Option < bool > */
	"extra_queries" jsonb DEFAULT NULL, /* Option < JsonbText > */
	"filter_mode" TEXT DEFAULT 'strict', /* Option < & str > */
	"query_vectors" jsonb DEFAULT NULL, /* Option < JsonbText > */
	"evidence" bool DEFAULT NULL, /* Option < bool > */
	"expand" bool DEFAULT false /* Option < bool > */
) RETURNS TABLE (
	"rank" INT,  /* i32 */
	"corpus" TEXT,  /* String */
	"source" TEXT,  /* String */
	"item_id" TEXT,  /* String */
	"parent_id" TEXT,  /* String */
	"score" double precision,  /* f64 */
	"semantic_rank" INT,  /* Option < i32 > */
	"semantic_distance" double precision,  /* Option < f64 > */
	"lexical_rank" INT,  /* Option < i32 > */
	"lexical_score" double precision,  /* Option < f64 > */
	"content" TEXT,  /* Option < String > */
	"locator" jsonb,  /* JsonB */
	"metadata" jsonb,  /* JsonB */
	"embedding_stale" bool,  /* bool */
	"query_ranks" jsonb,  /* JsonB */
	"evidence" jsonb,  /* Option < JsonB > */
	"origin" jsonb  /* Option < JsonB > */
)
VOLATILE PARALLEL UNSAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'hybrid_search_wrapper';

CREATE FUNCTION corpus."corpus_evaluate"(
	"gold_set" TEXT, /* Option < & str > */
	"modes" TEXT[] DEFAULT ARRAY['semantic', 'lexical', 'hybrid'], /* :: std :: option :: Option < Vec < Option < String > > > */
	"k" INT DEFAULT 10, /* Option < i32 > */
	"max_per_parent" INT DEFAULT NULL, /* Option < i32 > */
	"rrf_k" INT DEFAULT 60, /* Option < i32 > */
	"candidates" INT DEFAULT NULL, /* Option < i32 > */
	"store" bool DEFAULT true, /* Option < bool > */
	"extra_queries" bool DEFAULT false, /* Option < bool > */
	"evidence" bool DEFAULT false, /* Option < bool > */
	"expand" bool DEFAULT false /* Option < bool > */
) RETURNS TABLE (
	"run_id" bigint,  /* Option < i64 > */
	"mode" TEXT,  /* String */
	"queries" INT,  /* i32 */
	"precision_at_k" double precision,  /* f64 */
	"recall_at_k" double precision,  /* f64 */
	"mrr" double precision,  /* f64 */
	"ndcg_at_k" double precision  /* f64 */
)
VOLATILE PARALLEL UNSAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'evaluate_wrapper';

-- The searchable contract measures text with the content rule: Unicode white space,
-- invisible and control characters are not content (searches of this catalog use it).
CREATE FUNCTION corpus."_content_length"(
	"text" TEXT /* &str */
) RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_content_length_wrapper';

CREATE FUNCTION corpus."corpus_find_similar"(
	"corpus" TEXT, /* Option < & str > */
	"source" TEXT, /* Option < & str > */
	"item_id" TEXT, /* Option < & str > */
	"k" INT DEFAULT 10, /* Option < i32 > */
	"filters" jsonb DEFAULT '{}', /* Option < JsonbText > */
	"mode" TEXT DEFAULT 'hybrid', /* Option < & str > */
	"max_per_parent" INT DEFAULT 3, /* Option < i32 > */
	"exclude_parent" bool DEFAULT false, /* Option < bool > */
	"candidates" INT DEFAULT NULL, /* Option < i32 > */
	"rrf_k" INT DEFAULT 60, /* Option < i32 > */
	"include_stale" bool DEFAULT false, /* Option < bool > */
	"filter_mode" TEXT DEFAULT 'strict' /* Option < & str > */
) RETURNS TABLE (
	"rank" INT,  /* i32 */
	"corpus" TEXT,  /* String */
	"source" TEXT,  /* String */
	"item_id" TEXT,  /* String */
	"parent_id" TEXT,  /* String */
	"score" double precision,  /* f64 */
	"semantic_rank" INT,  /* Option < i32 > */
	"semantic_distance" double precision,  /* Option < f64 > */
	"lexical_rank" INT,  /* Option < i32 > */
	"lexical_score" double precision,  /* Option < f64 > */
	"content" TEXT,  /* Option < String > */
	"locator" jsonb,  /* JsonB */
	"metadata" jsonb,  /* JsonB */
	"embedding_stale" bool,  /* bool */
	"query_ranks" jsonb,  /* JsonB */
	"evidence" jsonb,  /* Option < JsonB > */
	"origin" jsonb  /* Option < JsonB > */
)
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'corpus_find_similar_wrapper';

CREATE FUNCTION corpus."corpus_check_filters"(
	"corpus" TEXT, /* Option < & str > */
	"filters" jsonb, /* Option < JsonbText > */
	"filter_mode" TEXT DEFAULT 'lenient' /* Option < & str > */
) RETURNS TABLE (
	"field" TEXT,  /* String */
	"accepted" bool,  /* bool */
	"condition" jsonb,  /* JsonB */
	"reason" TEXT,  /* Option < String > */
	"sqlstate" TEXT  /* Option < String > */
)
STABLE PARALLEL RESTRICTED
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'corpus_check_filters_wrapper';

CREATE FUNCTION corpus."corpus_calibrate_evidence"(
	"gold_set" TEXT, /* Option < & str > */
	"quantile" double precision DEFAULT 0.95, /* Option < f64 > */
	"apply" bool DEFAULT false, /* Option < bool > */
	"candidates" INT DEFAULT 100 /* Option < i32 > */
) RETURNS TABLE (
	"space" TEXT,  /* String */
	"model" TEXT,  /* Option < String > */
	"max_distance" double precision,  /* f64 */
	"max_gap" double precision,  /* f64 */
	"answerable" INT,  /* i32 */
	"kept" double precision,  /* f64 */
	"unanswerable" INT,  /* i32 */
	"rejected" double precision,  /* f64 */
	"applied" bool  /* bool */
)
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'corpus_calibrate_evidence_wrapper';

CREATE FUNCTION corpus._require_array(value jsonb, argument text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NOT NULL AND jsonb_typeof(value) <> 'array' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('%s must be a jsonb array, got a %s', argument, jsonb_typeof(value)),
            HINT = format('Pass an array, e.g. %s => ''[]''.', argument);
    END IF;
END
$$;

CREATE FUNCTION corpus.corpus_add_edges(
    corpus      text,
    name        text,
    edge_table  regclass,
    from_source text,
    from_column text,
    to_source   text,
    to_column   text
) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM corpus.corpora c WHERE c.name = corpus_add_edges.corpus) THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = format('corpus "%s" does not exist', corpus),
            HINT = 'Create it with corpus.corpus_create, or see corpus.corpus_list().';
    END IF;
    IF name IS NULL OR name !~ '^[a-z_][a-z0-9_]{0,62}$' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('invalid edge set name "%s"', name),
            HINT = 'An edge set name is a lower-case identifier: letters, digits and _, at most 63 characters.';
    END IF;
    IF edge_table IS NULL OR from_source IS NULL OR from_column IS NULL OR to_source IS NULL
       OR to_column IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004',
            MESSAGE = 'edge_table, from_source, from_column, to_source and to_column are required',
            HINT = 'A row of edge_table says that item from_column of from_source cites item to_column of to_source.';
    END IF;
    FOR i IN 1..2 LOOP
        IF NOT EXISTS (SELECT 1 FROM corpus.sources s WHERE s.corpus = corpus_add_edges.corpus
                          AND s.name = CASE i WHEN 1 THEN from_source ELSE to_source END) THEN
            RAISE EXCEPTION USING ERRCODE = '42704',
                MESSAGE = format('source "%s" is not registered in corpus "%s"',
                                 CASE i WHEN 1 THEN from_source ELSE to_source END, corpus),
                HINT = 'Edges join two sources of the corpus: see its sources in corpus.corpus_list().';
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM corpus.edges e WHERE e.corpus = corpus_add_edges.corpus AND e.name = corpus_add_edges.name) THEN
        RAISE EXCEPTION USING ERRCODE = '42710',
            MESSAGE = format('edge set "%s" is already registered in corpus "%s"', name, corpus),
            HINT = 'Use corpus.corpus_drop_edges first to redefine it.';
    END IF;
    INSERT INTO corpus.edges (corpus, name, edge_table, from_source, from_column, to_source, to_column)
    VALUES (corpus, name, edge_table, from_source, from_column, to_source, to_column);
    PERFORM corpus._validate_corpus(corpus);
END
$$;

CREATE FUNCTION corpus.corpus_drop_edges(corpus text, name text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM corpus.edges e WHERE e.corpus = corpus_drop_edges.corpus AND e.name = corpus_drop_edges.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = format('edge set "%s" is not registered in corpus "%s"', name, corpus),
            HINT = 'See the edge sets of each corpus in corpus.corpus_list().';
    END IF;
END
$$;

CREATE FUNCTION corpus.corpus_audit_purge(older_than interval, corpus text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n bigint;
BEGIN
    IF older_than IS NULL OR older_than < interval '0' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('older_than must be a non-negative interval, got %s', COALESCE(older_than::text, 'NULL')),
            HINT = 'Pass how old the rows to delete are, e.g. corpus.corpus_audit_purge(interval ''90 days'').';
    END IF;
    DELETE FROM corpus.search_audit a
     WHERE a.logged_at < clock_timestamp() - older_than
       AND (corpus_audit_purge.corpus IS NULL OR a.corpus = corpus_audit_purge.corpus);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- ---- The side tables' row-level security ----

-- The policies check what a role reads in full once per statement (uncorrelated subqueries
-- over the corpora, sources and slots), not once per row.
CREATE FUNCTION corpus._corpora_read_in_full() RETURNS SETOF text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.name FROM corpus.corpora AS c WHERE corpus._reads_corpus_in_full(c.name)
$$;

REVOKE ALL ON FUNCTION corpus._corpora_read_in_full() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION corpus._corpora_read_in_full() TO PUBLIC;

ALTER POLICY readers_of_the_corpus ON corpus.lexical_stats
    USING (corpus IN (SELECT corpus._corpora_read_in_full()))
    WITH CHECK (corpus IN (SELECT corpus._corpora_read_in_full()));
ALTER POLICY readers_of_the_corpus ON corpus.lexical_totals
    USING (corpus IN (SELECT corpus._corpora_read_in_full()))
    WITH CHECK (corpus IN (SELECT corpus._corpora_read_in_full()));
ALTER POLICY readers_of_the_source ON corpus.lexical_champions
    USING ((corpus, source) IN (
        SELECT s.corpus, s.name FROM corpus.sources AS s
         WHERE corpus._reads_in_full(s.item_table, ARRAY[s.id_column, s.tsv_column])))
    WITH CHECK (corpus IN (SELECT corpus._corpora_read_in_full()));
ALTER POLICY workers ON corpus.embedding_queue
    USING ((SELECT pg_catalog.has_table_privilege('corpus.embedding_queue', 'UPDATE')
                   OR pg_catalog.has_table_privilege('corpus.embedding_queue', 'DELETE')));
ALTER POLICY readers_of_the_table ON corpus.embedding_queue
    USING ((item_table, embedding_column) IN (
        SELECT s.item_table, s.embedding_column FROM corpus.embedding_slots AS s
         WHERE corpus._reads_in_full(s.item_table, ARRAY[s.id_column])));

-- ---- Citus ----

-- * Citus: a distributed source's subplans are pushed down whole, the queue of a distributed
--   table's items is kept on the nodes holding its shards (the re-embed trigger resolves a shard
--   to its table), every node keeps a copy of the slot, and the worker API, the health check and
--   the model change reach the other nodes from the coordinator (README "Scaling out").
-- * The re-embed trigger functions no longer NOTIFY from a Citus shard (corpus._announce_work):
--   every slot's trigger function is written again.

CREATE FUNCTION corpus._citus_present() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')
$$;

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

CREATE FUNCTION corpus._citus_on_nodes(names text[], ports integer[], command text) RETURNS SETOF text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r      record;
    answer jsonb;
    msg    text;
    st     text;
    det    text;
    hin    text;
BEGIN
    IF cardinality(names) IS NULL OR cardinality(names) = 0 THEN
        RETURN;
    END IF;
    FOR r IN EXECUTE 'SELECT m.node_name, m.node_port, m.success, m.result
                        FROM pg_catalog.master_run_on_worker($1, $2, $3, false) m'
             USING names, ports,
                   array_fill(pg_catalog.format('SELECT corpus._citus_run_here(%L)', command),
                              ARRAY[cardinality(names)])
    LOOP
        IF NOT r.success THEN
            RAISE EXCEPTION USING ERRCODE = '08006',
                MESSAGE = pg_catalog.format('pg_corpus could not run its statement on Citus node %s:%s: %s',
                                            r.node_name, r.node_port, r.result),
                HINT = 'Every node needs the pg_corpus extension and the caller''s role; see README "Scaling out".';
        END IF;
        answer := r.result::jsonb;
        IF answer ? 'error' THEN
            msg := pg_catalog.format('on Citus node %s:%s: %s', r.node_name, r.node_port, answer->'error'->>'message');
            st := answer->'error'->>'sqlstate';
            det := nullif(answer->'error'->>'detail', '');
            hin := nullif(answer->'error'->>'hint', '');
            -- (RAISE takes no NULL option)
            IF det IS NULL AND hin IS NULL THEN
                RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg;
            ELSIF det IS NULL THEN
                RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg, HINT = hin;
            ELSIF hin IS NULL THEN
                RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg, DETAIL = det;
            ELSE
                RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg, DETAIL = det, HINT = hin;
            END IF;
        END IF;
        RETURN NEXT answer->>'result';
    END LOOP;
END
$$;

CREATE FUNCTION corpus._citus_on_other_nodes(command text) RETURNS SETOF text
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT corpus._citus_on_nodes(a.names, a.ports, command)
      FROM (SELECT array_agg(n.node_name ORDER BY n.o) AS names, array_agg(n.node_port ORDER BY n.o) AS ports
              FROM corpus._citus_other_nodes() WITH ORDINALITY AS n(node_name, node_port, o)) AS a
$$;

CREATE OR REPLACE FUNCTION corpus._relation_json(rel regclass) RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- (PL/pgSQL: its plan is kept for the session, an SQL function's is made at every call)
    RETURN (
    SELECT jsonb_build_object(
        'oid', c.oid::bigint,
        'schema', n.nspname::text,
        'name', c.relname::text,
        'kind', c.relkind::text,
        'distribution', corpus._citus_distribution_column(c.oid),
        'columns', COALESCE((
            SELECT jsonb_object_agg(a.attname::text, jsonb_build_object(
                       'type', format_type(a.atttypid, a.atttypmod),
                       'typname', t.typname::text,
                       'category', t.typcategory::text,
                       'typmod', a.atttypmod,
                       'not_null', a.attnotnull,
                       'base_type', format_type(b.oid, -1),
                       'base_typname', b.typname::text,
                       'base_schema', bn.nspname::text,
                       'builtin', b.oid < 16384))
              FROM pg_attribute a
              JOIN pg_type t ON t.oid = a.atttypid
              -- the type under any domains: what values are compared and cast as
              CROSS JOIN LATERAL (
                  WITH RECURSIVE d(oid, typtype, typbasetype, depth) AS (
                      SELECT t.oid, t.typtype, t.typbasetype, 0
                      UNION ALL
                      SELECT u.oid, u.typtype, u.typbasetype, d.depth + 1
                        FROM d JOIN pg_type u ON u.oid = d.typbasetype
                       WHERE d.typtype = 'd' AND d.depth < 64)
                  SELECT d.oid FROM d WHERE d.typtype <> 'd' ORDER BY d.depth LIMIT 1) AS bt
              JOIN pg_type b ON b.oid = bt.oid
              JOIN pg_namespace bn ON bn.oid = b.typnamespace
             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '{}'::jsonb))
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = rel);
END
$$;

CREATE FUNCTION corpus._table_changes(tables oid[]) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n bigint;
BEGIN
    SELECT coalesce(sum(s.n_tup_ins + s.n_tup_upd + s.n_tup_del
                        + pg_stat_get_xact_tuples_inserted(s.relid)
                        + pg_stat_get_xact_tuples_updated(s.relid)
                        + pg_stat_get_xact_tuples_deleted(s.relid)), 0)::bigint
      INTO n
      FROM pg_stat_all_tables s
     WHERE s.relid IN (SELECT r::oid FROM unnest(tables) t, corpus._local_relations(t::regclass) r);
    -- (a reference table's changes are its placement's here; only distributed tables have
    -- shards elsewhere, and only they are named to the other nodes)
    IF corpus._citus_coordinator()
       AND EXISTS (SELECT 1 FROM unnest(tables) t WHERE corpus._citus_table_kind(t::regclass) = 'distributed') THEN
        n := n + coalesce((SELECT sum(a::bigint) FROM corpus._citus_on_other_nodes(
                 format('SELECT corpus._table_changes(%L::text[]::regclass[]::oid[])',
                        (SELECT array_agg(t::regclass::text) FROM unnest(tables) t
                          WHERE corpus._citus_table_kind(t::regclass) = 'distributed'))) a), 0);
    END IF;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION corpus._trigger_slot_table(relid oid, trigger_name name) RETURNS oid
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
CREATE OR REPLACE FUNCTION corpus._slot_attnums(slot corpus.embedding_slots, OUT id_attnum smallint,
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

CREATE OR REPLACE FUNCTION corpus._write_embedding_trigger(slot corpus.embedding_slots) RETURNS boolean
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

CREATE OR REPLACE FUNCTION corpus._attach_embedding_slot(item_table regclass, embedding_column name, id_column name,
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

CREATE OR REPLACE FUNCTION corpus._detach_embedding_slot(item_table regclass, embedding_column name) RETURNS void
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

CREATE FUNCTION corpus._embedding_slot_forget(item_table text, embedding_column name) RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH gone AS (DELETE FROM corpus.embedding_slots s
                   WHERE s.item_table = pg_catalog.to_regclass(_embedding_slot_forget.item_table)
                     AND s.embedding_column = _embedding_slot_forget.embedding_column RETURNING 1)
    SELECT count(*) FROM gone
$$;

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

CREATE FUNCTION corpus._citus_health(OUT coordinator jsonb, OUT nodes jsonb)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT corpus._citus_node_facts(),
           coalesce((SELECT jsonb_agg(corpus._citus_node_facts_of(n.node_name, n.node_port))
                       FROM corpus._citus_other_nodes() n), '[]'::jsonb)
$$;

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

CREATE TYPE corpus._claimed_item AS (item_table regclass, embedding_column name, item_id text, version bigint,
                                     content text, model text, dimensions integer, reason text, attempts integer);

CREATE OR REPLACE FUNCTION corpus.corpus_embedding_claim(batch_size integer DEFAULT 16,
                                              lease interval DEFAULT '5 minutes',
                                              worker text DEFAULT NULL,
                                              only_table regclass DEFAULT NULL)
RETURNS TABLE (item_table regclass, embedding_column name, item_id text, version bigint, content text,
               model text, dimensions integer, reason text, attempts integer)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r       record;
    slot    corpus.embedding_slots;
    cols    record;
    txt     text;
    got     integer := 0;
    node    record;
    answer  jsonb;
    claimed corpus._claimed_item;
BEGIN
    IF batch_size IS NULL OR batch_size < 1 OR batch_size > 10000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('batch_size must be between 1 and 10000, got %s', batch_size),
            HINT = 'Claim what one embedding call can take, typically 16 to 256 items.';
    END IF;
    IF lease IS NULL OR lease <= interval '0' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('lease must be a positive interval, got %s', lease),
            HINT = 'The lease is how long a claimed item stays yours, e.g. ''5 minutes''.';
    END IF;
    FOR r IN
        WITH picked AS (
            SELECT q.item_table, q.embedding_column, q.item_id
              FROM corpus.embedding_queue q
             WHERE (q.state = 'pending' OR (q.state = 'claimed' AND q.lease_until < clock_timestamp()))
               AND (only_table IS NULL OR q.item_table = only_table)
             ORDER BY q.enqueued_at, q.item_id
             LIMIT batch_size
               FOR UPDATE SKIP LOCKED)
        UPDATE corpus.embedding_queue q
           SET state = 'claimed', claimed_by = COALESCE(worker, session_user::text || '@' || pg_backend_pid()),
               claimed_at = clock_timestamp(), lease_until = clock_timestamp() + lease,
               attempts = q.attempts + 1
          FROM picked
         WHERE (q.item_table, q.embedding_column, q.item_id) = (picked.item_table, picked.embedding_column, picked.item_id)
        RETURNING q.*
    LOOP
        SELECT * INTO slot FROM corpus.embedding_slots s
         WHERE s.item_table = r.item_table AND s.embedding_column = r.embedding_column;
        cols := corpus._slot_attnums(slot);
        IF corpus._slot_column(r.item_table, cols.id_attnum) IS NULL
           OR EXISTS (SELECT 1 FROM unnest(cols.input_attnums) a WHERE corpus._slot_column(r.item_table, a) IS NULL) THEN
            -- a column of the slot was dropped (with CASCADE, which dropped its trigger too):
            -- nothing to embed from; a dead letter the health check reports
            UPDATE corpus.embedding_queue q
               SET state = 'dead', claimed_by = NULL, claimed_at = NULL, lease_until = NULL,
                   last_error = 'a column the embedding is computed from was dropped'
             WHERE (q.item_table, q.embedding_column, q.item_id) = (r.item_table, r.embedding_column, r.item_id);
            CONTINUE;
        END IF;
        -- read as the table's owner once this role's privileges are checked (src/worker.rs):
        -- the tenant's policies and functions never run with the worker's rights
        txt := corpus._embedding_item_text(r.item_table::oid, cols.id_attnum, cols.input_attnums, r.item_id);
        IF txt IS NULL THEN
            -- the item is gone: nothing to embed
            DELETE FROM corpus.embedding_queue q
             WHERE (q.item_table, q.embedding_column, q.item_id) = (r.item_table, r.embedding_column, r.item_id);
            CONTINUE;
        END IF;
        item_table := r.item_table; embedding_column := r.embedding_column; item_id := r.item_id;
        version := r.version; content := txt; model := slot.model; dimensions := slot.dimensions;
        reason := r.reason; attempts := r.attempts;
        got := got + 1;
        RETURN NEXT;
    END LOOP;
    -- On a Citus coordinator, the queue entries of distributed tables are on the nodes holding
    -- their shards: claimed there, node after node, until the batch is full (oldest first on
    -- each node, not across them).
    IF got < batch_size AND corpus._citus_coordinator()
       AND (only_table IS NULL OR corpus._citus_table_kind(only_table) = 'distributed') THEN
        FOR node IN SELECT * FROM corpus._citus_other_nodes() LOOP
            EXIT WHEN got >= batch_size;
            -- (each node claims in its own transaction; one that cannot be reached is skipped:
            -- its items wait for the next claim)
            BEGIN
                SELECT a::jsonb INTO answer FROM corpus._citus_on_nodes(ARRAY[node.node_name], ARRAY[node.node_port],
                    format('SELECT coalesce(jsonb_agg(c), ''[]'')::text FROM corpus.corpus_embedding_claim(%L::integer, %L::interval, %L, %L::regclass) c',
                           batch_size - got, lease, COALESCE(worker, session_user::text || '@' || pg_backend_pid()),
                           only_table::text)) a;
            EXCEPTION WHEN connection_failure THEN
                RAISE WARNING 'pg_corpus: %', SQLERRM
                      USING HINT = 'Its queue entries are claimed once it answers again.';
                CONTINUE;
            END;
            FOR claimed IN SELECT * FROM jsonb_populate_recordset(NULL::corpus._claimed_item, answer) LOOP
                item_table := claimed.item_table; embedding_column := claimed.embedding_column;
                item_id := claimed.item_id; version := claimed.version; content := claimed.content;
                model := claimed.model; dimensions := claimed.dimensions; reason := claimed.reason;
                attempts := claimed.attempts;
                got := got + 1;
                RETURN NEXT;
            END LOOP;
        END LOOP;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION corpus.corpus_embedding_complete(item_table regclass, embedding_column name, item_id text,
                                                 version bigint, embedding vector, model text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q    corpus.embedding_queue;
    slot corpus.embedding_slots;
    cols record;
BEGIN
    slot := corpus._embedding_slot(item_table, embedding_column);
    IF embedding IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'embedding is NULL',
            DETAIL = '{"kind": "bad_vector"}',
            HINT = 'Report a failed item with corpus.corpus_embedding_fail instead.';
    END IF;
    -- (array_length of the real[] cast: pgvector's functions are not on the pinned search_path)
    IF array_length(embedding::real[], 1) <> slot.dimensions THEN
        RAISE EXCEPTION USING ERRCODE = '22000',
            MESSAGE = format('embedding has %s dimensions, %s.%s has %s', array_length(embedding::real[], 1), item_table,
                             embedding_column, slot.dimensions),
            HINT = 'The worker embeds with a different model than the column was declared for.';
    END IF;
    IF model IS NOT NULL AND slot.model IS NOT NULL AND model <> slot.model THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('embedding of model "%s" offered for %s.%s, which holds model "%s"', model,
                             item_table, embedding_column, slot.model),
            HINT = 'Configure the worker with the model the source records, or change the source''s model.';
    END IF;
    -- Lock the item row before the queue row, the order in which the (AFTER UPDATE) trigger of a
    -- concurrent writer takes them; the opposite order deadlocks with that writer.
    -- (as the table's owner once this role's privileges are checked, like the store below:
    -- the tenant's triggers on its table run with the tenant's rights, src/worker.rs)
    cols := corpus._slot_attnums(slot);
    PERFORM corpus._embedding_item_lock(item_table::oid, cols.id_attnum, cols.embedding_attnum, item_id);
    SELECT * INTO q FROM corpus.embedding_queue e
     WHERE e.item_table = corpus_embedding_complete.item_table
       AND e.embedding_column = corpus_embedding_complete.embedding_column
       AND e.item_id = corpus_embedding_complete.item_id
       FOR UPDATE;
    IF NOT FOUND THEN
        -- On a Citus coordinator: the entry of a distributed table's item is on the node
        -- holding its shard, which stores the embedding there (its own transaction)
        RETURN coalesce((SELECT a FROM corpus._citus_fan_out(item_table,
                    format('SELECT corpus.corpus_embedding_complete(%L::regclass, %L, %L, %L::bigint, %L, %L)',
                           item_table::text, embedding_column, item_id, version, embedding::text, model)) a
                  WHERE a <> 'not_queued' LIMIT 1), 'not_queued');
    END IF;
    IF q.version <> corpus_embedding_complete.version THEN
        -- The text changed after the claim; the trigger already made the item pending again (and
        -- another worker may hold a claim of the new version: leave the row alone).
        RETURN 'requeued';
    END IF;
    PERFORM corpus._embedding_item_store(item_table::oid, cols.id_attnum, cols.embedding_attnum, item_id, embedding);
    DELETE FROM corpus.embedding_queue e
     WHERE e.item_table = q.item_table AND e.embedding_column = q.embedding_column AND e.item_id = q.item_id;
    RETURN 'stored';
END
$$;

CREATE OR REPLACE FUNCTION corpus.corpus_embedding_fail(item_table regclass, embedding_column name, item_id text,
                                             version bigint, error text, max_attempts integer DEFAULT 5)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q corpus.embedding_queue;
BEGIN
    UPDATE corpus.embedding_queue e
       SET state = CASE WHEN e.attempts >= max_attempts THEN 'dead' ELSE 'pending' END,
           claimed_by = NULL, claimed_at = NULL, lease_until = NULL, last_error = error
     WHERE e.item_table = corpus_embedding_fail.item_table
       AND e.embedding_column = corpus_embedding_fail.embedding_column
       AND e.item_id = corpus_embedding_fail.item_id
       AND e.version = corpus_embedding_fail.version
    RETURNING * INTO q;
    IF NOT FOUND THEN
        RETURN coalesce((SELECT a FROM corpus._citus_fan_out(item_table,
                    format('SELECT corpus.corpus_embedding_fail(%L::regclass, %L, %L, %L::bigint, %L, %L::integer)',
                           item_table::text, embedding_column, item_id, version, error, max_attempts)) a
                  WHERE a <> 'not_queued' LIMIT 1), 'not_queued');
    END IF;
    RETURN q.state;
END
$$;

CREATE OR REPLACE FUNCTION corpus.corpus_embedding_release(item_table regclass, embedding_column name, item_id text,
                                                version bigint, worker text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE corpus.embedding_queue e
       SET state = 'pending', claimed_by = NULL, claimed_at = NULL, lease_until = NULL,
           attempts = greatest(e.attempts - 1, 0)
     WHERE e.item_table = corpus_embedding_release.item_table
       AND e.embedding_column = corpus_embedding_release.embedding_column
       AND e.item_id = corpus_embedding_release.item_id
       AND e.version = corpus_embedding_release.version
       AND e.state = 'claimed'
       AND (worker IS NULL OR e.claimed_by = worker);
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM corpus._citus_fan_out(item_table,
                       format('SELECT corpus.corpus_embedding_release(%L::regclass, %L, %L, %L::bigint, %L)',
                              item_table::text, embedding_column, item_id, version, worker)) a
                    WHERE a = 'released') THEN
            PERFORM pg_notify('pg_corpus_embedding', item_table::text);
            RETURN 'released';
        END IF;
        RETURN 'not_claimed';
    END IF;
    PERFORM pg_notify('pg_corpus_embedding', item_table::text);
    RETURN 'released';
END
$$;

CREATE OR REPLACE FUNCTION corpus.corpus_embedding_retry_dead(only_table regclass DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t regclass;
    k bigint;
    n bigint := 0;
BEGIN
    FOR t, k IN
        WITH retried AS (
            UPDATE corpus.embedding_queue q SET state = 'pending', attempts = 0, enqueued_at = now()
             WHERE q.state = 'dead' AND (only_table IS NULL OR q.item_table = only_table)
            RETURNING q.item_table)
        SELECT r.item_table, count(*) FROM retried r GROUP BY r.item_table
    LOOP
        PERFORM pg_notify('pg_corpus_embedding', t::text);   -- wake the workers
        n := n + k;
    END LOOP;
    IF corpus._citus_coordinator()
       AND (only_table IS NULL OR corpus._citus_table_kind(only_table) = 'distributed') THEN
        k := coalesce((SELECT sum(a::bigint) FROM corpus._citus_on_other_nodes(
                 format('SELECT corpus.corpus_embedding_retry_dead(%L::regclass)', only_table::text)) a), 0);
        IF k > 0 THEN
            PERFORM pg_notify('pg_corpus_embedding', coalesce(only_table::text, ''));
        END IF;
        n := n + k;
    END IF;
    RETURN n;
END
$$;

-- DBA operations that queue many items (corpus_embedding_enqueue, the model change's
-- batches) take the queue's EXCLUSIVE lock first (corpus._lock_queue): a user's write that
-- queues an item waits for them instead of being a deadlock's victim.
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

CREATE OR REPLACE FUNCTION corpus.corpus_embedding_enqueue(item_table regclass, embedding_column name,
                                                only_missing boolean DEFAULT true)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    slot   corpus.embedding_slots;
    n      bigint;
    remote bigint;
BEGIN
    slot := corpus._embedding_slot(item_table, embedding_column);
    -- On a Citus coordinator, first the nodes holding the shards of a distributed table (each
    -- in its own transaction, which waits for its node's writers): this transaction holds no
    -- queue while it waits for them.
    -- (only_missing NULL: every item, as a CASE on it always read)
    remote := coalesce((SELECT sum(a::bigint) FROM corpus._citus_fan_out(item_table,
                  format('SELECT corpus.corpus_embedding_enqueue(%L::regclass, %L, %L)',
                         item_table::text, slot.embedding_column, coalesce(only_missing, false))) a), 0);
    PERFORM corpus._lock_queue(ARRAY(SELECT r FROM corpus._local_relations(item_table) AS r));
    n := corpus._enqueue_local(slot, coalesce(only_missing, false), true);
    IF remote > 0 THEN
        PERFORM pg_notify('pg_corpus_embedding', item_table::text);   -- (the workers listen here)
    END IF;
    RETURN n + remote;
END
$$;

CREATE OR REPLACE FUNCTION corpus._embedding_model_start(item_table regclass, embedding_column name, model text)
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

DROP FUNCTION corpus._embedding_model_batch(regclass, name, text, integer);

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

-- Write every slot's trigger function again with the 0.3.0 body. The functions belong to the
-- registering role, not to the extension (dump and restore keep them with their triggers), and
-- an extension script may replace only its own objects: each joins the extension for its
-- rewrite and leaves it again.
DO $$
DECLARE
    slot corpus.embedding_slots;
BEGIN
    FOR slot IN SELECT * FROM corpus.embedding_slots LOOP
        IF pg_catalog.to_regprocedure(pg_catalog.format('corpus.%I()', slot.trigger_function)) IS NULL THEN
            CONTINUE;   -- the health check reports the missing trigger
        END IF;
        EXECUTE pg_catalog.format('ALTER EXTENSION pg_corpus ADD FUNCTION corpus.%I()', slot.trigger_function);
        PERFORM corpus._write_embedding_trigger(slot);
        EXECUTE pg_catalog.format('ALTER EXTENSION pg_corpus DROP FUNCTION corpus.%I()', slot.trigger_function);
    END LOOP;
END
$$;

-- One corpus' refresh in a subtransaction of its own: its error becomes a WARNING (with the
-- corpus, its SQLSTATE and message) and NULL, so a refresh of every corpus keeps the others.
CREATE FUNCTION corpus._refresh_lexical_stats_one(corpus_name text, only_stale boolean, stale_fraction float8,
                                                  OUT documents bigint, OUT terms bigint, OUT refreshed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    state   text;
    message text;
BEGIN
    SELECT r.documents, r.terms, r.refreshed INTO documents, terms, refreshed
      FROM corpus.corpus_refresh_lexical_stats(corpus_name, only_stale, stale_fraction) AS r;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
    RAISE WARNING USING
        MESSAGE = format('the BM25 statistics of corpus %s were not refreshed: %s', quote_literal(corpus_name), message),
        DETAIL = format('SQLSTATE %s; the other corpora are refreshed.', state),
        HINT = format('Refresh it alone to see the whole error: SELECT * FROM corpus.corpus_refresh_lexical_stats(%s);',
                      quote_literal(corpus_name));
    documents := NULL;
    terms := NULL;
    refreshed := NULL;
END
$$;

-- Every corpus' statistics, one committed transaction per corpus: a long refresh holds no
-- lock or snapshot across corpora, and a corpus that fails (WARNING) loses nothing of the
-- others. CALL it outside a transaction block.
CREATE PROCEDURE corpus.corpus_refresh_lexical_stats_each(only_stale boolean DEFAULT false,
                                                          stale_fraction float8 DEFAULT 0.1)
LANGUAGE plpgsql
AS $$
DECLARE
    names text[];
    one   text;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    IF only_stale IS NULL OR stale_fraction IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004',
            MESSAGE = format('corpus_refresh_lexical_stats_each: %s must not be NULL',
                             CASE WHEN only_stale IS NULL THEN 'only_stale' ELSE 'stale_fraction' END),
            HINT = 'Leave the argument out for its default (only_stale false, stale_fraction 0.1).';
    END IF;
    IF NOT stale_fraction BETWEEN 0 AND 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('stale_fraction must be between 0 and 1, got %s', stale_fraction),
            HINT = 'It is the share of the corpus'' documents changed since the last refresh that makes statistics stale.';
    END IF;
    SELECT coalesce(array_agg(c.name ORDER BY c.name), '{}') INTO names FROM corpus.corpora AS c;
    FOREACH one IN ARRAY names LOOP
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        -- (a corpus dropped since the list was read is skipped)
        PERFORM corpus._refresh_lexical_stats_one(c.name, only_stale, stale_fraction)
           FROM corpus.corpora AS c WHERE c.name = one;
        COMMIT;
    END LOOP;
END
$$;
