-- ==========================================================================================
-- Evaluation harness: gold sets (queries + graded judgments), runs and per-query results.
-- corpus_evaluate (Rust) runs every gold query through the real search path and stores the
-- figures here, so every ranking change can come with before/after numbers.
-- Owner-only, like writing the catalog: queries and judgments can be sensitive.
-- ==========================================================================================

CREATE TABLE corpus.gold_sets (
    name        text PRIMARY KEY
                CONSTRAINT gold_sets_name_check CHECK (name ~ '^[a-z_][a-z0-9_.-]{0,62}$'),
    corpus      text NOT NULL REFERENCES corpus.corpora (name) ON DELETE CASCADE,
    -- 'item': judgments name item ids ("item_id" or "source:item_id"); 'parent': parent ids
    level       text NOT NULL DEFAULT 'item'
                CONSTRAINT gold_sets_level_check CHECK (level IN ('item', 'parent')),
    description text,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE corpus.gold_queries (
    gold_set   text NOT NULL REFERENCES corpus.gold_sets (name) ON DELETE CASCADE,
    query_id   text NOT NULL,
    query_text text,
    query_vec  vector,
    filters    jsonb NOT NULL DEFAULT '{}'
               CONSTRAINT gold_queries_filters_check CHECK (jsonb_typeof(filters) = 'object'),
    PRIMARY KEY (gold_set, query_id),
    -- queries fused with this one when corpus_evaluate(..., extra_queries => true) runs it:
    -- corpus_hybrid_search's extra_queries (rewrites, HyDE passages' vectors, sub-questions)
    extra_queries jsonb
               CONSTRAINT gold_queries_extra_queries_check
               CHECK (extra_queries IS NULL OR jsonb_typeof(extra_queries) = 'array')
);

-- One judgment per (query, target): a duplicate is a unique violation naming both.
CREATE TABLE corpus.gold_judgments (
    gold_set text NOT NULL,
    query_id text NOT NULL,
    target   text NOT NULL,
    grade    integer NOT NULL CONSTRAINT gold_judgments_grade_check CHECK (grade >= 0),
    PRIMARY KEY (gold_set, query_id, target),
    FOREIGN KEY (gold_set, query_id) REFERENCES corpus.gold_queries (gold_set, query_id) ON DELETE CASCADE
);

CREATE TABLE corpus.eval_runs (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    gold_set          text NOT NULL REFERENCES corpus.gold_sets (name) ON DELETE CASCADE,
    corpus            text NOT NULL,
    mode              text NOT NULL,
    k                 integer NOT NULL,
    params            jsonb NOT NULL,
    extension_version text NOT NULL,
    started_at        timestamptz NOT NULL,
    finished_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    queries           integer NOT NULL,
    precision_at_k    float8 NOT NULL,
    recall_at_k       float8 NOT NULL,
    mrr               float8 NOT NULL,
    ndcg_at_k         float8 NOT NULL
);

CREATE TABLE corpus.eval_query_results (
    run_id         bigint NOT NULL REFERENCES corpus.eval_runs (id) ON DELETE CASCADE,
    query_id       text NOT NULL,
    hits           integer NOT NULL,
    relevant       integer NOT NULL,
    precision_at_k float8 NOT NULL,
    recall_at_k    float8 NOT NULL,
    mrr            float8 NOT NULL,
    ndcg_at_k      float8 NOT NULL,
    ranking        text[] NOT NULL,
    PRIMARY KEY (run_id, query_id)
);

SELECT pg_catalog.pg_extension_config_dump('corpus.gold_sets', '');
SELECT pg_catalog.pg_extension_config_dump('corpus.gold_queries', '');
SELECT pg_catalog.pg_extension_config_dump('corpus.gold_judgments', '');
SELECT pg_catalog.pg_extension_config_dump('corpus.eval_runs', '');
SELECT pg_catalog.pg_extension_config_dump('corpus.eval_query_results', '');
REVOKE ALL ON corpus.gold_sets, corpus.gold_queries, corpus.gold_judgments, corpus.eval_runs,
              corpus.eval_query_results FROM PUBLIC;

CREATE FUNCTION corpus.corpus_gold_set_create(name text, corpus text, level text DEFAULT 'item',
                                              description text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM corpus.corpora c WHERE c.name = corpus_gold_set_create.corpus) THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = format('corpus "%s" does not exist', corpus),
            HINT = 'A gold set evaluates one corpus; see corpus.corpus_list().';
    END IF;
    IF level IS NULL OR level NOT IN ('item', 'parent') THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('unknown judgment level "%s"', level),
            HINT = 'level is item (judgments name item ids) or parent (judgments name parent ids).';
    END IF;
    IF name IS NULL OR name !~ '^[a-z_][a-z0-9_.-]{0,62}$' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('invalid gold set name "%s"', name),
            HINT = 'Use lower-case letters, digits, _, . and -, starting with a letter or _.';
    END IF;
    IF EXISTS (SELECT 1 FROM corpus.gold_sets g WHERE g.name = corpus_gold_set_create.name) THEN
        RAISE EXCEPTION USING ERRCODE = '42710',
            MESSAGE = format('gold set "%s" already exists', name),
            HINT = 'Drop it first: DELETE FROM corpus.gold_sets WHERE name = ...';
    END IF;
    INSERT INTO corpus.gold_sets (name, corpus, level, description) VALUES (name, corpus, level, description);
END
$$;

-- Per-query comparison of two runs of the same gold set (the wins and losses behind
-- corpus_compare_runs).
CREATE FUNCTION corpus.corpus_compare_queries(run_a bigint, run_b bigint, metric text DEFAULT 'ndcg')
RETURNS TABLE (query_id text, value_a float8, value_b float8, delta float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF metric IS NULL OR metric NOT IN ('precision', 'recall', 'mrr', 'ndcg') THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('unknown metric "%s"', metric),
            HINT = 'metric is precision, recall, mrr or ndcg.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM corpus.eval_runs r WHERE r.id = run_a)
       OR NOT EXISTS (SELECT 1 FROM corpus.eval_runs r WHERE r.id = run_b) THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = format('evaluation run %s does not exist',
                             CASE WHEN EXISTS (SELECT 1 FROM corpus.eval_runs r WHERE r.id = run_a) THEN run_b ELSE run_a END),
            HINT = 'See SELECT id, gold_set, mode, ndcg_at_k FROM corpus.eval_runs ORDER BY id.';
    END IF;
    IF (SELECT gold_set FROM corpus.eval_runs r WHERE r.id = run_a)
       <> (SELECT gold_set FROM corpus.eval_runs r WHERE r.id = run_b) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('runs %s and %s evaluate different gold sets', run_a, run_b),
            HINT = 'Compare two runs of the same gold set.';
    END IF;
    RETURN QUERY
    SELECT a.query_id, v.va, v.vb, v.vb - v.va
      FROM corpus.eval_query_results a
      JOIN corpus.eval_query_results b ON b.query_id = a.query_id AND b.run_id = run_b
     CROSS JOIN LATERAL (
           SELECT CASE metric WHEN 'precision' THEN a.precision_at_k WHEN 'recall' THEN a.recall_at_k
                              WHEN 'mrr' THEN a.mrr ELSE a.ndcg_at_k END AS va,
                  CASE metric WHEN 'precision' THEN b.precision_at_k WHEN 'recall' THEN b.recall_at_k
                              WHEN 'mrr' THEN b.mrr ELSE b.ndcg_at_k END AS vb) v
     WHERE a.run_id = run_a
     ORDER BY v.vb - v.va, a.query_id;
END
$$;
