#!/usr/bin/env python3
r"""The corpus_bm25 index against pg_textsearch 1.4.0 (Timescale's BM25 index access method) and
a GIN + ts_rank_cd baseline, side by side on PostgreSQL 18, in one interleaved run.
(docs/lexical-index.md)

    .venv/bin/python bench/lexical_index.py                       # 100k documents
    .venv/bin/python bench/lexical_index.py --docs 1000000        # adds the 1M tables
    .venv/bin/python bench/lexical_index.py --smoke               # tiny: proves the script works

Needs the PostgreSQL 18 of scripts/pg18.sh (`scripts/pg18.sh setup`) with pg_textsearch 1.4.0
built into it from ../shared/anchors/pg_textsearch-1.4.0.tar.gz (`make PG_CONFIG=… install`,
see ../shared/anchors/README.md); --pgbin points at its bin folder. The cluster is private
(scripts/pgcluster.sh through bench/harness.py's Cluster) with shared_preload_libraries =
'pg_textsearch', its data outside the clone (--cache-dir).

What it does, per size N (--docs):
 1. data (seeded): N documents of 30–120 words from a Zipf vocabulary (bench/harness.py's
    vocabulary() pseudo-words and zipf_probabilities(), --vocab words, exponent --zipf); a
    seeded 5% of the rows have kind 'slice', the rest 'main'. Queries: --per-length each of 1,
    2, 3, 5 and 8 distinct words drawn from the same Zipf distribution (another seed);
 2. one table `docs` (id, kind, body, body_bm25 = corpus.bm25_document(body, 'english') STORED
    with STORAGE MAIN, body_tsv = to_tsvector('english', body) STORED, an all-NULL vector(3) the
    source definition needs), loaded by COPY; indexes built one by one, serially
    (max_parallel_maintenance_workers = 0 for every method: pg_textsearch can build in
    parallel, pg_corpus cannot, and the machine has 2 shared cores), each timed and measured
    (pg_relation_size): GIN on body_bm25 (pg_corpus' other lexical paths use it), corpus_bm25 on
    body_bm25 with kind as a further key column (what the health check recommends for a corpus
    isolated by kind: the slice ranks its own rows), pg_textsearch's bm25 on body (text_config 'english'), GIN on body_tsv. The
    analyser's own time (corpus.bm25_document over every row, which COPY pays in the generated
    column while pg_textsearch analyses inside its build) is timed apart;
 3. corpora: 'whole' (isolation {"kind": ["main", "slice"]}: every row) and 'slice5'
    (isolation {"kind": "slice"}), one source each over docs (language 'english'); the
    corpus_add_source of 'whole' is the registration time;
 4. one client, per query every method once in a new shuffled order (bench/harness.py
    interleave_queries: --warmup untimed passes, --rounds timed ones), top-10:
      pg_corpus        SELECT item_id FROM corpus.corpus_hybrid_search('whole', NULL, q, k => 10,
                       mode => 'lexical')
      pg_corpus_slice  the same on 'slice5'
      pg_textsearch    SELECT id FROM docs ORDER BY body <@> to_bm25query(q, 'docs_body_ts')
                       LIMIT 10
      pg_textsearch_slice  the same WHERE kind = 'slice' (its README: a post-filter of its top-k)
      ts_rank_cd       SELECT id FROM docs WHERE body_tsv @@ to_tsquery('english', 'w1 | w2 …')
                       ORDER BY ts_rank_cd(body_tsv, tsq) DESC LIMIT 10
    a query's latency is the median of its rounds; p50/p95 over the queries of each length.
    Statements are sent unprepared (a custom plan each time): psycopg's automatic prepare of a
    statement run 5 times makes pg_textsearch's query 2.4x slower (a generic plan).
    Once per query: the rows each method returned, how many slice rows match at all (the
    pg_corpus analyser's keys OR-ed over body_bm25), top-10 overlap of pg_corpus whole with
    pg_textsearch, corpus_explain's strategy for each corpus, and the server-side time
    (EXPLAIN (ANALYZE) planning + execution) of each method, medians; and for
    --exact-per-length queries of each length, per corpus, the bm25_index subplan's top-40
    (ids and scores) against the same statement with index scans off (exhaustive);
 5. insert throughput: three fresh tables, each with one index (corpus_bm25 on its generated
    BM25 column; pg_textsearch's bm25 on body; GIN on its generated to_tsvector column), each
    getting --insert-rows new documents in batches of --insert-batch, one transaction a batch,
    batches interleaved round-robin across the three tables; rows/s.

Results of every size run are kept in --json and all of them written to --markdown (the tables),
the generated section of docs/lexical-index.md (--section) and --plot (p50 by query length).
Figures are ratios within one run on a shared machine, not absolute speeds.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402

PG18_BIN = "/var/tmp/pg_corpus/pg18/pgserver/pginstall/bin"
LENGTHS = (1, 2, 3, 5, 8)
K = 10
DBNAME = "lexical_index"
TS_INDEX = "docs_body_ts"
# the 1M run: ts_rank_cd takes seconds a query there, and the table wants more shared buffers
LARGE = ["--docs", "1000000", "--ts-rank-per-length", "0", "--shared-buffers", "4GB"]

METHODS = ("pg_corpus", "pg_corpus_slice", "pg_textsearch", "pg_textsearch_slice", "ts_rank_cd")
LABEL = {
    "pg_corpus": "pg_corpus (whole table)",
    "pg_corpus_slice": "pg_corpus (5% slice corpus)",
    "pg_textsearch": "pg_textsearch",
    "pg_textsearch_slice": "pg_textsearch WHERE kind = 'slice'",
    "ts_rank_cd": "GIN + ts_rank_cd (OR query)",
}
SQL = {
    "pg_corpus": "SELECT item_id::bigint FROM corpus.corpus_hybrid_search('whole', NULL, %(q)s, "
                 "k => 10, mode => 'lexical')",
    "pg_corpus_slice": "SELECT item_id::bigint FROM corpus.corpus_hybrid_search('slice5', NULL, "
                       "%(q)s, k => 10, mode => 'lexical')",
    "pg_textsearch": f"SELECT id FROM docs ORDER BY body <@> to_bm25query(%(q)s, '{TS_INDEX}') "
                     "LIMIT 10",
    "pg_textsearch_slice": f"SELECT id FROM docs WHERE kind = 'slice' "
                           f"ORDER BY body <@> to_bm25query(%(q)s, '{TS_INDEX}') LIMIT 10",
    "ts_rank_cd": "SELECT id FROM docs, to_tsquery('english', %(orq)s) AS tsq "
                  "WHERE body_tsv @@ tsq ORDER BY ts_rank_cd(body_tsv, tsq) DESC, id LIMIT 10",
}
SLICE_MATCHES = """
SELECT count(*) FROM (
  SELECT 1 FROM docs
   WHERE kind = 'slice'
     AND body_bm25 @@ (SELECT string_agg(quote_literal(key), ' | ')::tsquery
                         FROM corpus.bm25_query(%(q)s, 'english'))
   LIMIT 10) AS m"""

SCHEMA = """
CREATE TABLE docs (
    id        bigint PRIMARY KEY,
    kind      text NOT NULL,
    body      text NOT NULL,
    body_bm25 tsvector GENERATED ALWAYS AS (corpus.bm25_document(body, 'english')) STORED,
    body_tsv  tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED,
    embedding vector(3)
);
ALTER TABLE docs ALTER COLUMN body_bm25 SET STORAGE MAIN;
CREATE TABLE bench_meta (params jsonb NOT NULL);
"""
INDEXES = [  # (key, label, statement)
    ("gin_bm25", "GIN on body_bm25 (pg_corpus' other paths)",
     "CREATE INDEX docs_bm25_gin ON docs USING gin (body_bm25)"),
    ("corpus_bm25", "corpus_bm25 on body_bm25 with kind as a key column",
     "CREATE INDEX docs_bm25_idx ON docs USING corpus_bm25 (body_bm25, kind)"),
    ("pg_textsearch", "pg_textsearch bm25 on body",
     f"CREATE INDEX {TS_INDEX} ON docs USING bm25 (body) WITH (text_config = 'english')"),
    ("gin_tsv", "GIN on to_tsvector('english', body)",
     "CREATE INDEX docs_tsv_gin ON docs USING gin (body_tsv)"),
]
INDEX_NAME = {"gin_bm25": "docs_bm25_gin", "corpus_bm25": "docs_bm25_idx",
              "pg_textsearch": TS_INDEX, "gin_tsv": "docs_tsv_gin"}

INSERT_TABLES = {  # method -> DDL of a table carrying only that index
    "corpus_bm25": """
        CREATE TABLE ins_corpus (id bigint PRIMARY KEY, kind text NOT NULL, body text NOT NULL,
            body_bm25 tsvector GENERATED ALWAYS AS (corpus.bm25_document(body, 'english')) STORED);
        ALTER TABLE ins_corpus ALTER COLUMN body_bm25 SET STORAGE MAIN;
        CREATE INDEX ON ins_corpus USING corpus_bm25 (body_bm25, kind);""",
    "pg_textsearch": """
        CREATE TABLE ins_ts (id bigint PRIMARY KEY, kind text NOT NULL, body text NOT NULL);
        CREATE INDEX ins_ts_body ON ins_ts USING bm25 (body) WITH (text_config = 'english');""",
    "gin": """
        CREATE TABLE ins_gin (id bigint PRIMARY KEY, kind text NOT NULL, body text NOT NULL,
            body_tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED);
        CREATE INDEX ON ins_gin USING gin (body_tsv);""",
}
CHECK_COLUMNS = ("segments", "documents", "terms", "postings", "pending rows", "pages", "free pages",
                 "heap rows")
INSERT_TABLE = {"corpus_bm25": "ins_corpus", "pg_textsearch": "ins_ts", "gin": "ins_gin"}
INSERT_LABEL = {"corpus_bm25": "corpus_bm25 (generated bm25_document column)",
                "pg_textsearch": "pg_textsearch bm25", "gin": "GIN (generated to_tsvector column)"}


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------

class Text:
    """The seeded Zipf text model: documents and queries."""

    def __init__(self, a):
        rng = np.random.default_rng(a.seed)
        self.vocab = h.vocabulary(rng, a.vocab)
        self.probs = h.zipf_probabilities(a.vocab, a.zipf)
        self.cdf = np.cumsum(self.probs)
        self.a = a

    def documents(self, rng: np.random.Generator, n: int) -> list[str]:
        lengths = rng.integers(self.a.min_words, self.a.max_words + 1, size=n)
        ranks = np.minimum(np.searchsorted(self.cdf, rng.random(int(lengths.sum())) * self.cdf[-1]),
                           len(self.vocab) - 1)
        words = self.vocab[ranks]
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        return [" ".join(words[bounds[i]:bounds[i + 1]]) for i in range(n)]

    def queries(self, rng: np.random.Generator, per_length: int) -> list[dict]:
        out = []
        for length in LENGTHS:
            for _ in range(per_length):
                ranks = rng.choice(len(self.vocab), size=length, replace=False, p=self.probs)
                words = [str(self.vocab[r]) for r in ranks]
                out.append(dict(length=length, nth=len([x for x in out if x["length"] == length]),
                                q=" ".join(words), orq=" | ".join(words), ranks=[int(r) for r in ranks]))
        return out


def data_params(a) -> dict:
    return dict(docs=a.docs, vocab=a.vocab, zipf=a.zipf, min_words=a.min_words,
                max_words=a.max_words, slice_share=a.slice_share, seed=a.seed, generator=1)


def load(conn, a, text: Text) -> dict:
    """docs by COPY in chunks of 50k (the generated columns computed there), its indexes one by
    one; timings (s) and sizes (bytes)."""
    rng = np.random.default_rng(a.seed + 10)
    kinds = np.where(rng.random(a.docs) < a.slice_share, "slice", "main")
    conn.execute(SCHEMA)
    t = time.perf_counter()
    for lo in range(0, a.docs, 50_000):
        hi = min(lo + 50_000, a.docs)
        bodies = text.documents(rng, hi - lo)
        with conn.cursor() as cur, cur.copy("COPY docs (id, kind, body) FROM STDIN") as cp:
            for i, body in enumerate(bodies):
                cp.write_row([lo + i + 1, kinds[lo + i], body])
        h.log(f"  copied {hi:,} rows")
    out = {"copy_s": time.perf_counter() - t}
    conn.execute("VACUUM ANALYZE docs")
    conn.execute("SET max_parallel_maintenance_workers = 0")
    conn.execute(f"SET maintenance_work_mem = '{a.maintenance_work_mem}'")
    build, size = {}, {}
    for key, _, stmt in INDEXES:
        t = time.perf_counter()
        conn.execute(stmt)
        build[key] = time.perf_counter() - t
        size[key] = h.value(conn, "SELECT pg_relation_size(%s::regclass)", [INDEX_NAME[key]])
        h.log(f"  {key}: {build[key]:.1f} s, {size[key] / 2**20:.1f} MiB")
    # the analyser's share of the generated column (COPY pays it; pg_textsearch's build
    # analyses inside), and PostgreSQL's english parser for the same rows
    t = time.perf_counter()
    h.value(conn, "SELECT sum(length(corpus.bm25_document(body, 'english'))) FROM docs")
    out["analyse_bm25_s"] = time.perf_counter() - t
    t = time.perf_counter()
    h.value(conn, "SELECT sum(length(to_tsvector('english', body))) FROM docs")
    out["analyse_tsv_s"] = time.perf_counter() - t
    conn.execute("VACUUM ANALYZE docs")
    out.update(build=build, size=size,
               table_bytes=h.value(conn, "SELECT pg_table_size('docs')"),
               slice_rows=int((kinds == "slice").sum()))
    return out


def define_corpora(conn) -> dict:
    """'whole' and 'slice5'; seconds each corpus_add_source took."""
    took = {}
    for name, iso in (("whole", {"kind": ["main", "slice"]}), ("slice5", {"kind": "slice"})):
        conn.execute("SELECT corpus.corpus_drop(%s, if_exists => true)", [name])
        conn.execute("SELECT corpus.corpus_create(%s, isolation => %s::jsonb)", [name, json.dumps(iso)])
        t = time.perf_counter()
        conn.execute("SELECT corpus.corpus_add_source(%s, 'docs', 'docs', text_column => 'body', "
                     "tsv_column => 'body_bm25', embedding_column => 'embedding', parent_fk => 'id', "
                     "language => 'english')", [name])
        took[name] = time.perf_counter() - t
    return took


def build_ranking_indexes(conn, a) -> dict:
    """A reused database's corpus_bm25 and pg_textsearch indexes built again, as load() builds
    them (the index definition or the installed build may be new): (seconds, bytes) each, so
    that the build and size rows compare two builds of one run."""
    conn.execute("SET max_parallel_maintenance_workers = 0")
    conn.execute(f"SET maintenance_work_mem = '{a.maintenance_work_mem}'")
    out = {}
    for key, _, stmt in INDEXES:
        if key not in ("corpus_bm25", "pg_textsearch"):
            continue
        conn.execute(f"DROP INDEX IF EXISTS {INDEX_NAME[key]}")
        t = time.perf_counter()
        conn.execute(stmt)
        out[key] = (time.perf_counter() - t,
                    h.value(conn, "SELECT pg_relation_size(%s::regclass)", [INDEX_NAME[key]]))
        h.log(f"  {key}: {out[key][0]:.1f} s, {out[key][1] / 2**20:.1f} MiB (built again)")
    return out


def prepare(uri, a, text: Text) -> tuple[str, dict | None]:
    """The database for this size, built afresh or (--reuse, same parameters) kept."""
    dsn = h.dsn(uri, f"{DBNAME}_{a.docs}")
    if a.reuse:
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                stored = conn.execute("SELECT params FROM bench_meta").fetchone()
                build = conn.execute("SELECT build FROM bench_build").fetchone()
            if stored and stored[0] == json.loads(json.dumps(data_params(a))) and build:
                h.log(f"reusing database {DBNAME}_{a.docs} (pg_corpus recreated and its corpora defined "
                      "again: the installed build may be new)")
                with psycopg.connect(dsn, autocommit=True) as conn:
                    h.recreate_extension(conn, rebuild=False)
                    rebuilt = build_ranking_indexes(conn, a)
                    define_corpora(conn)
                for key in rebuilt:
                    build[0]["build"][key], build[0]["size"][key] = rebuilt[key]
                return dsn, build[0]
        except psycopg.Error:
            pass
    with h.fresh_database(uri, f"{DBNAME}_{a.docs}", ("vector", "pg_corpus", "pg_textsearch")) as conn:
        h.log(f"loading {a.docs:,} documents")
        build = load(conn, a, text)
        build["register_s"] = define_corpora(conn)
        conn.execute("INSERT INTO bench_meta VALUES (%s)", [json.dumps(data_params(a))])
        conn.execute("CREATE TABLE bench_build (build jsonb NOT NULL)")
        conn.execute("INSERT INTO bench_build VALUES (%s)", [json.dumps(build)])
    return dsn, build


# --------------------------------------------------------------------------------------------
# Queries
# --------------------------------------------------------------------------------------------

def run_queries(dsn: str, a, queries: list[dict]) -> dict:
    conns = {m: h.session(dsn) for m in METHODS}
    for m in METHODS:
        conns[m].execute("SET max_parallel_workers_per_gather = 0")   # one core per query, all alike
    rng = np.random.default_rng(a.seed + 3)

    def measured(i) -> tuple[str, ...]:
        """ts_rank_cd reads every matching tsvector (about a second a query at 100k rows): it
        runs on the first --ts-rank-per-length queries of each length only."""
        return tuple(m for m in METHODS if m != "ts_rank_cd" or queries[i]["nth"] < a.ts_rank_per_length)

    def calls_of(i):
        q = queries[i]
        # unprepared (prepare=False), each a custom plan: psycopg's automatic server-side prepare
        # after 5 runs of one statement slows pg_textsearch's query 2.4x (1.8 -> 4.5 ms p50 on
        # 2-word queries at 100k) and speeds pg_corpus' up 1.25x (3.5 -> 2.8 ms)
        return {m: (lambda m=m: conns[m].execute(SQL[m], q, prepare=False).fetchall()) for m in measured(i)}

    per_query: dict[str, list[list[float]]] = {m: [[] for _ in queries] for m in METHODS}
    for r in range(a.warmup + a.rounds):
        for i in range(len(queries)):
            ms, _ = h.interleave(calls_of(i), 1, rng)
            if r >= a.warmup:
                for m in ms:
                    per_query[m][i].extend(ms[m])
        h.log(f"  pass {r + 1}/{a.warmup + a.rounds} done")
    latency = {m: [statistics.median(x) if x else None for x in per_query[m]] for m in METHODS}

    # once per query: rows, overlap, matches in the slice, strategies, server-side time
    c = conns["pg_corpus"]
    rows = {m: [] for m in METHODS}
    overlap, slice_matches = [], []
    strategy = {"whole": {}, "slice5": {}}
    server = {m: [] for m in METHODS}
    planning: dict[str, list] = {m: [] for m in METHODS}
    for i, q in enumerate(queries):
        ids = {m: [r[0] for r in conns[m].execute(SQL[m], q, prepare=False).fetchall()] for m in measured(i)}
        for m in METHODS:
            rows[m].append(len(ids[m]) if m in ids else None)
        overlap.append(len(set(ids["pg_corpus"]) & set(ids["pg_textsearch"])))
        slice_matches.append(h.value(c, SLICE_MATCHES, q))
        for corpus in strategy:
            st = ",".join(sorted(r[0] for r in c.execute(
                "SELECT strategy FROM corpus.corpus_explain(%s, NULL, %s, k => 10, mode => 'lexical') "
                "WHERE branch = 'lexical'", [corpus, q["q"]]).fetchall())) or "none"
            strategy[corpus][st] = strategy[corpus].get(st, 0) + 1
        for m in METHODS:
            doc = h.explain_json(conns[m], SQL[m], q, analyze=True) if a.explain and m in measured(i) else None
            server[m].append(doc["Planning Time"] + doc["Execution Time"] if doc else None)
            planning[m].append(doc["Planning Time"] if doc else None)
    plan_text = {}
    q = next(x for x in queries if x["length"] == 3)
    for m in ("pg_textsearch", "pg_textsearch_slice", "ts_rank_cd"):
        plan_text[m] = h.plan_summary(h.explain_json(conns[m], SQL[m], q)["Plan"])
    for corpus in ("whole", "slice5"):
        subs = h.explained_subplans(c, corpus, None, q["q"], K, "lexical")
        for _, branch, strat, settings, sql_, values in subs:
            if branch == "lexical":
                plan_text[f"{corpus} ({strat})"] = h.plan_summary(
                    h.explain_json(c, sql_, values, settings=settings)["Plan"])
    for conn in conns.values():
        conn.close()
    return dict(latency=latency, rows=rows, overlap=overlap, slice_matches=slice_matches,
                strategy=strategy, server=server, planning=planning, plans=plan_text)


def run_checks(dsn: str, a, queries: list[dict]) -> dict:
    """Exactness: for --exact-per-length queries of each length, per corpus, the lexical subplan
    as corpus_explain prints it (strategy bm25_index) against the same statement with index scans
    off, where PostgreSQL computes the operator on every row and sorts: top-40 ids and scores.
    Then bm25_index_check of the docs table's corpus_bm25 index (without the heap comparison)."""
    exact: dict = {"checked": 0, "differing": [], "strategies": {}}
    with h.session(dsn) as c:
        for corpus in ("whole", "slice5"):
            for q in queries:
                if q["nth"] >= a.exact_per_length:
                    continue
                strat, settings, sql_, values = h.explained_subplan(c, corpus, None, q["q"], K, "lexical",
                                                                     "lexical")
                exact["strategies"][strat] = exact["strategies"].get(strat, 0) + 1
                got = {}
                for name, extra in (("index", []), ("exhaustive", [("enable_indexscan", "off"),
                                                                    ("enable_bitmapscan", "off")])):
                    with c.transaction():
                        for k, v in list(settings) + extra:
                            c.execute("SELECT set_config(%s, %s, true)", [k, str(v)])
                        got[name] = [(r[0], round(float(r[2]), 9))
                                     for r in c.execute(sql_, values, prepare=False).fetchall()]
                exact["checked"] += 1
                if got["index"] != got["exhaustive"]:
                    exact["differing"].append(dict(corpus=corpus, q=q["q"], **got))
        t = time.perf_counter()
        check = [None if x is None else int(x) for x in c.execute(
            "SELECT * FROM corpus.bm25_index_check('docs_bm25_idx', heapallindexed => false)").fetchone()]
        check_s = time.perf_counter() - t
    return dict(exact=exact, index_check=check, index_check_s=check_s)


# --------------------------------------------------------------------------------------------
# Inserts
# --------------------------------------------------------------------------------------------

def run_inserts(dsn: str, a, text: Text) -> dict:
    rng = np.random.default_rng(a.seed + 20)
    bodies = text.documents(rng, a.insert_rows)
    kinds = np.where(rng.random(a.insert_rows) < a.slice_share, "slice", "main").tolist()
    with h.session(dsn) as conn:
        for m, ddl in INSERT_TABLES.items():
            conn.execute(f"DROP TABLE IF EXISTS {INSERT_TABLE[m]}")
            conn.execute(ddl)
    conns = {m: psycopg.connect(dsn) for m in INSERT_TABLES}        # not autocommit
    spent = {m: 0.0 for m in INSERT_TABLES}
    batches: dict[str, list[float]] = {m: [] for m in INSERT_TABLES}
    order_rng = np.random.default_rng(a.seed + 21)
    names = list(INSERT_TABLES)
    for lo in range(0, a.insert_rows, a.insert_batch):
        hi = min(lo + a.insert_batch, a.insert_rows)
        ids = list(range(lo + 1, hi + 1))
        for j in order_rng.permutation(len(names)):
            m = names[j]
            t = time.perf_counter()
            with conns[m].transaction():
                conns[m].execute(f"INSERT INTO {INSERT_TABLE[m]} (id, kind, body) "
                                 "SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[])",
                                 [ids, kinds[lo:hi], bodies[lo:hi]])
            spent[m] += time.perf_counter() - t
            batches[m].append((time.perf_counter() - t) * 1000)
    for conn in conns.values():
        conn.close()
    out = {m: dict(rows=a.insert_rows, seconds=spent[m], rows_per_s=a.insert_rows / spent[m],
                   batch_ms={"p50": h.pct(batches[m], 50), "p99": h.pct(batches[m], 99),
                             "max": max(batches[m])})
           for m in INSERT_TABLES}
    with h.session(dsn) as conn:
        out["corpus_bm25"]["index_check"] = [list(r) for r in conn.execute(
            "SELECT * FROM corpus.bm25_index_check("
            "(SELECT indexrelid::regclass FROM pg_index WHERE indrelid = 'ins_corpus'::regclass "
            "AND indexrelid::regclass::text <> 'ins_corpus_pkey'))").fetchall()]
        for m in INSERT_TABLES:
            out[m]["index_bytes"] = h.value(
                conn, "SELECT sum(pg_relation_size(indexrelid))::bigint FROM pg_index WHERE indrelid = %s::regclass "
                "AND NOT indisprimary", [INSERT_TABLE[m]])
    return out


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

def summarise(run: dict, queries: list[dict]) -> dict:
    lengths = [q["length"] for q in queries]
    lat = run["latency"]
    by_len = {}
    for L in list(LENGTHS) + ["all"]:
        idx = [i for i, x in enumerate(lengths) if L == "all" or x == L]
        by_len[str(L)] = {m: {"p50": h.pct([lat[m][i] for i in idx if lat[m][i] is not None], 50),
                              "p95": h.pct([lat[m][i] for i in idx if lat[m][i] is not None], 95),
                              "n": sum(1 for i in idx if lat[m][i] is not None)} for m in METHODS}
    rows = run["rows"]
    sm = run["slice_matches"]
    short = {m: sum(1 for r, s in zip(rows[m], sm) if r is not None and r < min(K, s)) for m in METHODS}
    fewer_than_10 = {m: sum(1 for r in rows[m] if r is not None and r < K) for m in METHODS}
    measured = {m: sum(1 for r in rows[m] if r is not None) for m in METHODS}
    return dict(by_length=by_len, short_of_matches=short, fewer_than_10=fewer_than_10, measured=measured,
                slice_queries_with_10_matches=sum(1 for s in sm if s >= K),
                overlap_mean=float(np.mean(run["overlap"])) / K,
                overlap_by_length={str(L): float(np.mean([o for o, x in zip(run["overlap"], lengths)
                                                          if x == L])) / K for L in LENGTHS},
                server_p50={str(L): {m: h.pct([x for x, n in zip(v, lengths) if x is not None
                                               and (L == "all" or n == L)], 50)
                                     for m, v in run["server"].items()}
                            for L in list(LENGTHS) + ["all"]},
                planning_p50={m: h.pct([x for x in v if x is not None], 50)
                              for m, v in run.get("planning", {}).items()},
                strategy=run["strategy"])


def targets(res: dict) -> list[tuple[str, str, str]]:
    """(target, measured, met/missed) rows for every size measured."""
    out = []
    sizes = sorted(res["sizes"], key=int)
    for n in sizes:
        r = res["sizes"][n]
        bl = r["summary"]["by_length"]
        label = f"{int(n):,}"
        for L in LENGTHS:
            limit = 1.5 if L == 8 else 1.2
            x = h.ratio(bl[str(L)]["pg_corpus"]["p50"], bl[str(L)]["pg_textsearch"]["p50"])
            out.append((f"{label}: pg_corpus p50 ≤ {limit}× pg_textsearch, {L} word{'s' * (L > 1)}",
                        f"{x:.2f}×", "met" if x <= limit else "missed"))
        worst = max(h.ratio(bl[str(L)]["pg_corpus_slice"]["p50"], bl[str(L)]["pg_textsearch"]["p50"])
                    for L in LENGTHS)
        out.append((f"{label}: 5% slice p50 ≤ 1.5× pg_textsearch whole-table, every length",
                    f"worst {worst:.2f}×", "met" if worst <= 1.5 else "missed"))
        short = r["summary"]["short_of_matches"]["pg_corpus_slice"]
        out.append((f"{label}: 5% slice always k rows (when k match)",
                    f"{short} of {len(r['queries'])} short", "met" if short == 0 else "missed"))
        b = r["build"]
        x = h.ratio(b["build"]["corpus_bm25"], b["build"]["pg_textsearch"])
        out.append((f"{label}: index build ≤ 1.5× pg_textsearch's", f"{x:.2f}×", "met" if x <= 1.5 else "missed"))
        x = h.ratio(b["size"]["corpus_bm25"], b["size"]["pg_textsearch"])
        out.append((f"{label}: index size ≤ 1.5× pg_textsearch's", f"{x:.2f}×", "met" if x <= 1.5 else "missed"))
        if int(n) == 100_000:
            s = b["register_s"]["whole"]
            out.append(("registration of a 100k source ≤ 5 s", f"{s:.1f} s", "met" if s <= 5 else "missed"))
    if "100000" in res["sizes"] and "1000000" in res["sizes"]:
        runs = [res["sizes"][n] for n in ("100000", "1000000")]
        commits = [r.get("commit") for r in runs]
        if commits[0] and commits[0] == commits[1] and not commits[0].endswith("-dirty"):
            small, big = (r["summary"]["by_length"] for r in runs)
            worst = max(h.ratio(big[str(L)]["pg_corpus"]["p50"], small[str(L)]["pg_corpus"]["p50"])
                        for L in LENGTHS)
            out.append(("lexical p50 growth 100k → 1M ≤ 1.5×, every length", f"worst {worst:.2f}×",
                        "met" if worst <= 1.5 else "missed"))
        else:
            # a growth compares one code's speed at two sizes: runs of different code say nothing
            out.append(("lexical p50 growth 100k → 1M ≤ 1.5×, every length",
                        f"the runs measured different code ({commits[0] or 'unrecorded'} at 100k, "
                        f"{commits[1] or 'unrecorded'} at 1M)", "not judged"))
    return out


def render(res: dict) -> str:
    parts = []
    for n in sorted(res["sizes"], key=int):
        r = res["sizes"][n]
        s = r["summary"]
        b = r["build"]
        bl = s["by_length"]
        parts.append(f"### {int(n):,} documents\n")
        tr = r.get("ts_rank_per_length")
        parts.append(f"Run {r['when']} (code of {r.get('commit', 'an unrecorded commit')}); "
                     f"{len(r['queries'])} queries ({r['per_length']} of each length; "
                     + (f"ts_rank_cd on the first {tr} of each length only" if tr else "ts_rank_cd not run")
                     + "), "
                     f"median of {r['rounds']} interleaved rounds per query after {r['warmup']} "
                     f"warm-up pass(es); slice: {b['slice_rows']:,} rows. Latency at the client "
                     "(local socket), ms.\n")
        rows = []
        for L in list(LENGTHS) + ["all"]:
            d = bl[str(L)]
            rows.append([f"{L} word{'s' * (L != 1)}" if L != "all" else "all"]
                        + [f"{h.fmt_ms(d[m]['p50'])} / {h.fmt_ms(d[m]['p95'])}" for m in METHODS]
                        + [f"{h.ratio(d['pg_corpus']['p50'], d['pg_textsearch']['p50']):.2f}×",
                           f"{h.ratio(d['pg_corpus_slice']['p50'], d['pg_textsearch']['p50']):.2f}×"])
        parts.append(h.table(["query", *(f"{LABEL[m]} p50 / p95" for m in METHODS),
                              "pg_corpus / pg_textsearch p50", "slice / pg_textsearch p50"], rows))
        parts.append("")
        sp = s["server_p50"]
        if any(v == v for v in sp["all"].values()):
            parts.append("Server-side time, EXPLAIN (ANALYZE) Planning Time + Execution Time, p50 in ms (one "
                         "run per query; for pg_corpus the whole search function, its subplans' planning "
                         "included in its execution):\n")
            parts.append(h.table(["query", *(LABEL[m] for m in METHODS), "pg_corpus / pg_textsearch"],
                                 [[f"{L} word{'s' * (L != 1)}" if L != "all" else "all"]
                                  + [h.fmt_ms(sp[str(L)][m]) for m in METHODS]
                                  + [f"{h.ratio(sp[str(L)]['pg_corpus'], sp[str(L)]['pg_textsearch']):.2f}×"]
                                  for L in list(LENGTHS) + ["all"]]))
            if s.get("planning_p50"):
                parts.append("\nof which Planning Time, p50 over all queries: " + ", ".join(
                    f"{LABEL[m]} {h.fmt_ms(v)}" for m, v in s["planning_p50"].items()) + ".")
            parts.append("")
        nq = len(r["queries"])
        parts.append(h.table(
            ["rows returned", *(LABEL[m] for m in METHODS)],
            [["queries with fewer than 10 rows"] + [f"{s['fewer_than_10'][m]} / {s['measured'][m]}"
                                                     for m in METHODS],
             ["… fewer than min(10, slice matches)¹"] + [
                 f"{s['short_of_matches'][m]} / {s['measured'][m]}" if m.endswith("slice") else "–"
                 for m in METHODS]]))
        parts.append(f"\n¹ slice queries where at least 10 slice rows match: "
                     f"{s['slice_queries_with_10_matches']} / {nq}. Top-10 overlap of pg_corpus (whole) "
                     f"with pg_textsearch: {s['overlap_mean']:.2f} on average ("
                     + ", ".join(f"{L} words {v:.2f}" for L, v in s["overlap_by_length"].items())
                     + "); the analysers differ (pg_corpus' english analyser against PostgreSQL's "
                     "english configuration) and so do their BM25 statistics. pg_corpus strategy "
                     "(corpus_explain): "
                     + "; ".join(f"{c}: " + ", ".join(f"{k} {v}" for k, v in st.items())
                                 for c, st in s["strategy"].items()) + ".")
        ck = r.get("checks")
        if ck:
            ex = ck["exact"]
            parts.append(
                f"Exactness: the lexical subplan as corpus_explain prints it (strategies "
                f"{ex['strategies']}) against the same statement with index scans off (the operator "
                f"computed on every row, then sorted), top-{4 * K} ids and scores: "
                f"{len(ex['differing'])} of {ex['checked']} (query, corpus) pairs differ. "
                f"bm25_index_check('docs_bm25_idx', heapallindexed => false) in {ck['index_check_s']:.1f} s: "
                + ", ".join(f"{n} {v:,}" for n, v in zip(CHECK_COLUMNS, ck["index_check"]) if v is not None)
                + f" (checked {ck['when']}).\n")
        else:
            parts.append("")
        rows = []
        for key, label, _ in INDEXES:
            rows.append([label, f"{b['build'][key]:.1f}", f"{b['size'][key] / 2**20:.1f}"])
        parts.append(h.table(["index (serial build)", "build s", "size MiB"], rows))
        parts.append(
            f"\ncorpus_bm25 / pg_textsearch: build {h.ratio(b['build']['corpus_bm25'], b['build']['pg_textsearch']):.2f}×, "
            f"size {h.ratio(b['size']['corpus_bm25'], b['size']['pg_textsearch']):.2f}×. COPY of the rows "
            f"(both generated columns) {b['copy_s']:.1f} s; the analysers alone over every row: "
            f"corpus.bm25_document {b['analyse_bm25_s']:.1f} s, to_tsvector('english') "
            f"{b['analyse_tsv_s']:.1f} s (pg_textsearch's build analyses the text itself; the "
            f"corpus_bm25 build reads the generated column, so its build plus the analyser is "
            f"{b['build']['corpus_bm25'] + b['analyse_bm25_s']:.1f} s against "
            f"{b['build']['pg_textsearch']:.1f} s). Registration (corpus_add_source, with its BM25 "
            f"statistics): whole {b['register_s']['whole']:.1f} s, slice5 {b['register_s']['slice5']:.1f} s.\n")
        ins = r["inserts"]
        parts.append(h.table(["insert (batches of %d, one transaction each)" % r["insert_batch"],
                              "rows", "s", "rows/s", "batch ms p50 / p99 / max", "index MiB after"],
                             [[INSERT_LABEL[m], f"{ins[m]['rows']:,}", f"{ins[m]['seconds']:.1f}",
                               f"{ins[m]['rows_per_s']:,.0f}",
                               " / ".join(h.fmt_ms(ins[m]["batch_ms"][x]) for x in ("p50", "p99", "max"))
                               if "batch_ms" in ins[m] else "–",
                               f"{int(ins[m]['index_bytes']) / 2**20:.1f}"]
                              for m in INSERT_TABLES]))
        parts.append("\nEach into an empty table carrying that one index, batches interleaved across "
                     "the three tables; the time includes each method's analysis (generated column or "
                     "inside the index). bm25_index_check after the inserts (segments, documents, "
                     "terms, postings, pending rows, pages, free pages, heap rows): "
                     f"{ins['corpus_bm25']['index_check']}.\n")
        parts.append("Plans of one 3-word query:\n\n```text")
        for name, lines in r["plans"].items():
            parts.append(f"-- {name}")
            parts.extend(lines)
        parts.append("```\n")
    parts.append("### Targets\n")
    parts.append(h.table(["target", "measured", ""], targets(res), align="lrl"))
    m = res["machine"]
    parts.append(f"\nMachine: {m.get('cpu', '?')}, {m.get('cpus')} CPUs (shared with other work, load "
                 f"{m.get('load')} at the end), {m.get('ram_gb')} GB; PostgreSQL {m.get('postgres')}, "
                 f"{m.get('extensions')}; commit {m.get('commit')}. The machine is shared and noisy: "
                 "read the figures as ratios between methods measured in the same run, not as "
                 "absolute speeds.\n")
    parts.append(f"Reproduce: `{res['command']}` (each size's run is kept in the JSON and every "
                 "output is written from all of them).\n")
    return "\n".join(parts)


def plot(res: dict, path: str) -> None:
    sizes = sorted(res["sizes"], key=int)
    with h.figure(path, len(sizes), (6.0 * len(sizes), 4.2)) as fa:
        if fa is None:
            return
        fig, axes = fa
        for ax, n in zip(axes, sizes):
            bl = res["sizes"][n]["summary"]["by_length"]
            for m in METHODS:
                ax.plot(LENGTHS, [bl[str(L)][m]["p50"] for L in LENGTHS], marker="o", label=LABEL[m])
            ax.set_yscale("log")
            ax.set_xticks(LENGTHS)
            ax.set_xlabel("query words")
            ax.set_ylabel("p50 latency, ms (log)")
            ax.set_title(f"top-10 BM25, {int(n):,} documents, PostgreSQL 18")
            ax.grid(True, which="both", alpha=0.3)
        axes[0].legend(fontsize=8)


# --------------------------------------------------------------------------------------------

def run(a) -> None:
    os.environ["PGBIN"] = a.pgbin
    text = Text(a)
    queries = text.queries(np.random.default_rng(a.seed + 1), a.per_length)
    settings = {"shared_preload_libraries": "pg_textsearch", "shared_buffers": a.shared_buffers,
                "autovacuum": "off", "jit": "off"}
    directory = Path(a.cache_dir) / "cluster"
    res = json.loads(Path(a.json).read_text()) if Path(a.json).exists() and not a.smoke else {"sizes": {}}
    if a.render_only:
        return write_outputs(a, res)
    if a.checks_only:
        if str(a.docs) not in res["sizes"]:
            sys.exit(f"--checks-only: {a.json} has no run of {a.docs} documents")
        a.reuse = True
        with h.Cluster(directory, settings, keep=a.keep) as uri:
            dsn, _ = prepare(uri, a, text)
            h.log("checks")
            res["sizes"][str(a.docs)]["checks"] = dict(run_checks(dsn, a, queries), when=h.now())
        return write_outputs(a, res)
    with h.Cluster(directory, settings, keep=a.keep) as uri:
        dsn, build = prepare(uri, a, text)
        with h.session(dsn) as conn:
            if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm'").fetchone():
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
                conn.execute("SELECT pg_prewarm(c.oid) FROM pg_class c WHERE c.oid IN ('docs'::regclass) "
                         "OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'docs'::regclass)")
            # without pg_prewarm (the wheel has none), the warm-up passes read the pages in
        h.log(f"queries: {len(queries)} × {len(METHODS)} methods × {a.warmup + a.rounds} passes")
        q = run_queries(dsn, a, queries)
        h.log("checks")
        checks = dict(run_checks(dsn, a, queries), when=h.now())
        h.log("inserts")
        ins = run_inserts(dsn, a, text)
        with h.session(dsn) as conn:
            mach = h.machine(conn)
            mach["extensions"] = dict(conn.execute(
                "SELECT extname, extversion FROM pg_extension WHERE extname IN "
                "('vector', 'pg_corpus', 'pg_textsearch')").fetchall())
    outputs = tuple(str(Path(x).resolve().relative_to(h.ROOT)) for x in (a.json, a.markdown, a.section, a.plot)
                    if Path(x).resolve().is_relative_to(h.ROOT))
    mach["commit"] = h.git_commit(outputs)
    entry = dict(when=h.now(), commit=mach["commit"], per_length=a.per_length, rounds=a.rounds, warmup=a.warmup,
                 ts_rank_per_length=a.ts_rank_per_length,
                 insert_batch=a.insert_batch, params=data_params(a), build=build, inserts=ins,
                 queries=[{k: v for k, v in x.items() if k != "orq"} for x in queries],
                 raw=q, plans=q["plans"], checks=checks)
    entry["summary"] = summarise(q, queries)
    res["sizes"][str(a.docs)] = entry
    res["machine"] = mach
    write_outputs(a, res)


def _rounded(x):
    """Floats to 3 decimals (ms and s: the JSON stays small)."""
    if isinstance(x, float):
        return round(x, 3)
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return x


def write_outputs(a, res: dict) -> None:
    """The JSON, the markdown, the page's generated section and the plot, from every size run."""
    res["command"] = (h.command(SPEC, []) + "; " + h.command(SPEC, LARGE)
                      if "1000000" in res["sizes"] else h.command(SPEC, []))
    Path(a.json).write_text(h.dump_json(_rounded(res)))
    body = render(res)
    Path(a.markdown).write_text("# corpus_bm25 against pg_textsearch (bench/lexical_index.py)\n\n" + body)
    h.write_results_section(a.section, "bench/lexical_index.py", body, "The corpus_bm25 index")
    plot(res, a.plot)
    for line in targets(res):
        h.log(" | ".join(line))
    h.log(f"wrote {a.markdown}, {a.json}, {a.section}, {a.plot}")


def params(p) -> None:
    p.add_argument("--docs", type=int, default=100_000, help="documents (default 100000)")
    p.add_argument("--per-length", type=int, default=40, help="queries of each length (default 40)")
    p.add_argument("--ts-rank-per-length", type=int, default=8,
                   help="queries of each length ts_rank_cd runs on (default 8; 0: none)")
    p.add_argument("--exact-per-length", type=int, default=4,
                   help="queries of each length whose index ranking is compared with a sequential "
                        "scan's, per corpus (default 4)")
    p.add_argument("--rounds", type=int, default=3, help="timed passes over the queries (default 3)")
    p.add_argument("--warmup", type=int, default=1, help="untimed passes first (default 1)")
    p.add_argument("--vocab", type=int, default=50_000, help="distinct words (default 50000)")
    p.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent (default 1.1)")
    p.add_argument("--min-words", type=int, default=30)
    p.add_argument("--max-words", type=int, default=120)
    p.add_argument("--slice-share", type=float, default=0.05)
    p.add_argument("--insert-rows", type=int, default=10_000)
    p.add_argument("--insert-batch", type=int, default=100)
    p.add_argument("--no-explain", dest="explain", action="store_false",
                   help="skip EXPLAIN ANALYZE of every query")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--shared-buffers", default="2GB")
    p.add_argument("--maintenance-work-mem", default="1GB")
    p.add_argument("--pgbin", default=os.environ.get("PGBIN", PG18_BIN),
                   help=f"PostgreSQL 18's bin folder (default {PG18_BIN})")
    p.add_argument("--cache-dir", default="/var/tmp/pg_corpus/lexical-index",
                   help="the cluster's folder, outside the clone (readable by the postgres OS user)")
    p.add_argument("--reuse", action="store_true", help="keep a database built with the same parameters")
    p.add_argument("--keep", action="store_true", help="leave the cluster running")
    p.add_argument("--checks-only", action="store_true",
                   help="only the exactness and bm25_index_check of a kept --docs database (its run in "
                        "--json gets them), then the outputs again")
    p.add_argument("--render-only", action="store_true", help="only write the outputs again from --json")


SPEC = h.Spec(
    name="lexical_index",
    about="corpus_bm25 against pg_textsearch 1.4.0 and GIN + ts_rank_cd on PostgreSQL 18",
    run=run, params=params, cluster=False,
    outputs={"--json": h.RESULTS / "lexical_index.json", "--markdown": h.RESULTS / "lexical_index.md",
             "--section": h.ROOT / "docs" / "lexical-index.md", "--plot": h.ROOT / "docs" / "lexical-index.png"},
    smoke=("--docs", "3000", "--per-length", "3", "--rounds", "1", "--insert-rows", "300",
           "--cache-dir", "/var/tmp/pg_corpus/lexical-index-smoke"),
)

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
