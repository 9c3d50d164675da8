-- pg_corpus 0.2.0 -> 0.3.0
--
-- * Multi-query fusion: corpus_hybrid_search and corpus_explain take extra_queries (a JSON
--   array of {text, vector, weight, label}); every hit says which queries ranked it
--   (query_ranks), every explained subplan which query it searches for (query). Their result
--   types change, so both are dropped and created again (CREATE OR REPLACE cannot add a column).
-- * Their C functions, and corpus_evaluate's, have new symbols (*_v3_wrapper): the old symbols
--   keep the old arguments and columns, so a database still at 0.2.0 keeps working with this
--   library until it is updated.
-- * corpus_find_similar: a search by one of the corpus' own items, never returning it.
-- * Lenient filters: searches take filter_mode ('strict' or 'lenient': invalid conditions
--   dropped and reported), filter fields may declare allowed values or a range, and
--   corpus_check_filters says what a search keeps and drops.
-- * Named embedding spaces: corpus.corpora.spaces, corpus.sources.space; corpus_create,
--   corpus_alter (spaces) and corpus_add_source (space) take them, corpus_list shows them,
--   searches take query_vectors (one vector per space).
-- * The result side (seeds/002, seeds/003): the evidence filter (corpus.corpora.evidence,
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
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
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
     WHERE c.name = corpus_name
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
AS 'MODULE_PATHNAME', 'corpus_explain_v3_wrapper';

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
AS 'MODULE_PATHNAME', 'corpus_hybrid_search_v3_wrapper';

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
AS 'MODULE_PATHNAME', 'corpus_evaluate_v3_wrapper';

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
