-- ==========================================================================================
-- corpus_bm25: an index over a BM25 tsvector column that returns rows best first,
--   CREATE INDEX ON t USING corpus_bm25 (body_bm25);
-- for WHERE body_bm25 OPERATOR(corpus.|||) s ORDER BY body_bm25 OPERATOR(corpus.<@>) s, where s
-- is ROW(keys, weights, avg_doc_len, k1, b, page)::corpus.bm25_scoring (|||: the row holds one
-- of the keys; <@>: minus the BM25 score). The index serves no scan without the ||| condition,
-- since it holds no row without a key. The search builds the scoring from the corpus'
-- statistics and uses the index where the source's column has one.
-- ==========================================================================================
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
