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

-- corpus_tune's runs: what it measured and chose, and the settings it replaced (to revert).
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
    -- chosen on every query: {"rrf_k", "window", "feedback", "weights": {source: {...}}}
    settings      jsonb NOT NULL,
    -- the corpus' settings when the run started, in the same shape
    previous      jsonb NOT NULL,
    -- per fold: its queries and the setting chosen on the other folds
    fold_settings jsonb NOT NULL,
    applied       boolean NOT NULL,
    reverted_at   timestamptz
);

SELECT pg_catalog.pg_extension_config_dump('corpus.gold_sets', '');
SELECT pg_catalog.pg_extension_config_dump('corpus.gold_queries', '');
SELECT pg_catalog.pg_extension_config_dump('corpus.gold_judgments', '');
SELECT pg_catalog.pg_extension_config_dump('corpus.eval_runs', '');
SELECT pg_catalog.pg_extension_config_dump('corpus.eval_query_results', '');
SELECT pg_catalog.pg_extension_config_dump('corpus.tune_runs', '');
REVOKE ALL ON corpus.gold_sets, corpus.gold_queries, corpus.gold_judgments, corpus.eval_runs,
              corpus.eval_query_results, corpus.tune_runs FROM PUBLIC;
