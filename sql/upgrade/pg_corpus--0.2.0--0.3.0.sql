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
-- * The three changed functions are dropped and created again, so a GRANT or REVOKE of
--   EXECUTE on them made after installing is not kept: repeat it after the update.
-- * Gold queries may store extra queries (corpus.gold_queries.extra_queries), which
--   corpus_evaluate(..., extra_queries => true) fuses.
\echo Use "ALTER EXTENSION pg_corpus UPDATE TO '0.3.0'" to load this file. \quit

DROP FUNCTION corpus.corpus_hybrid_search(text, vector, text, integer, jsonb, text, integer, integer, integer,
                                          boolean, boolean);
DROP FUNCTION corpus.corpus_explain(text, vector, text, integer, jsonb, text, integer, boolean);
DROP FUNCTION corpus.corpus_evaluate(text, text[], integer, integer, integer, integer, boolean);

ALTER TABLE corpus.gold_queries ADD COLUMN extra_queries jsonb
    CONSTRAINT gold_queries_extra_queries_check
    CHECK (extra_queries IS NULL OR jsonb_typeof(extra_queries) = 'array');

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
	"filter_mode" TEXT DEFAULT 'strict' /* Option < & str > */
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
	"query_ranks" jsonb  /* JsonB */
)
STABLE PARALLEL RESTRICTED 
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
	"extra_queries" bool DEFAULT false /* Option < bool > */
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
	"query_ranks" jsonb  /* JsonB */
)
STABLE PARALLEL RESTRICTED
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
