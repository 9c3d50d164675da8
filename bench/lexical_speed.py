#!/usr/bin/env python3
r"""Lexical branch speed: BM25 with a candidate budget against ts_rank_cd and against
the semantic branch, on a generated 100k-chunk database with a Zipf vocabulary, in one run.
(docs/lexical-speed.md)

    .venv/bin/python bench/lexical_speed.py                  # the committed run: 100k chunks
    .venv/bin/python bench/lexical_speed.py --smoke           # a tiny one, outputs in bench/out/smoke/

What it does:
 1. starts a private cluster (bench/harness.py; .pgdata/bench-lexical_speed by default)
    with shared_buffers raised so that tables and indexes fit, and creates a database with
    `CREATE EXTENSION vector; CREATE EXTENSION pg_corpus`;
 2. generates a seeded legal-schema database: `case_law(id, case_number, case_name, court,
    source_kind)` parents (CHUNKS_PER_PARENT chunks each; 80% `external_upload`, 20%
    `internal_decision`) and `precedent_chunks(id, case_law_id, chunk_index, content, embedding
    vector(DIM), content_bm25 = corpus.bm25_document(content, 'simple') and content_tsv =
    to_tsvector('simple', content), both generated and stored)`. The text: 60-150 words per
    chunk drawn from a seeded Zipf vocabulary (VOCAB synthetic words, exponent ZIPF), so the
    top words are in most chunks. Embeddings: clustered, L2-normalised (as in
    bench/filtered_ann.py). Indexes: B-tree on case_law_id and case_law.source_kind, GIN on
    both tsvector columns, HNSW (vector_cosine_ops, m=16, ef_construction=64, serial build);
 3. defines two corpora over the tables, `external` (80% of the parents) and `internal` (20%),
    with tsv_column => 'content_bm25', language => 'simple' (corpus_add_source refreshes the
    BM25 statistics), and their twins `external_tsv`, `internal_tsv` over the same rows with
    tsv_column => 'content_tsv' and no language: the old lexical setup, for ts_rank_cd;
 4. queries: MIXED seeded queries of 3-6 words, 1-3 of them from the 20 most frequent words,
    the rest drawn log-uniformly from the other ranks, and COMMON queries of 3-5 words all from
    the top 20; one query vector each (a perturbed random chunk). Per corpus and query, k=10,
    default max_per_parent, every method in its own warmed-up session, REPEATS rounds of all
    (corpus, method) pairs, each round in a new shuffled order; a query's latency is the
    median of its rounds (wall clock at the client, local socket). Methods:
      bm25            mode => 'lexical', BM25, default pg_corpus.bm25_candidate_budget (2000)
                      (the extension plans every BM25 subplan with random_page_cost <= 1.1)
      bm25_20k        the same with the budget 20000
      bm25_exhaustive the same with the budget 10^9: every key finds candidates (exact BM25)
      ts_rank_cd      mode => 'lexical' with pg_corpus.lexical_scorer = ts_rank_cd on the
                      *_tsv twin (OR of the query's lexemes, ts_rank_cd, to_tsvector column)
      semantic        mode => 'semantic' with the query vector
      hybrid          the default call: both branches (BM25, default budget), RRF
    Quality of the budget: overlap@10 of bm25 and bm25_20k with bm25_exhaustive (synthetic
    data has no judgments), and the exhaustive BM25 score mass they keep (the score of an item
    does not depend on the budget: the budget only decides which items are scored). A query
    whose keys are all above the budget gets a champion plan: its keys with a champion list
    find candidates through the items preselected from their lists' heads
    (corpus.lexical_champions), the others through the GIN index (each query's plan is read
    from corpus_explain);
 5. where the time goes: EXPLAIN (ANALYZE, BUFFERS) of every lexical subplan that
    corpus.corpus_explain prints, under the SET LOCAL settings it prints (random_page_cost 1.1
    for BM25, as the search runs it): candidates, plan, buffers; the same subplan with the BM25
    score replaced by a constant and by length(tsvector) (index + heap + join vs. detoasting
    vs. scoring), the statistics and catalog lookups the search runs before it, and the
    semantic subplan for comparison;
 6. offline (no database): exact BM25 on the generated text against the extension's first-round
    candidates and against champion lists of M chunks for every key the plan does not find
    through the index (a sensitivity check), both computed by the core's own functions
    (crates/pg_corpus_core/examples/candidate_rules.rs, run with cargo);
 7. writes bench/out/raw/lexical_speed.json (raw numbers, not committed), docs/lexical-speed.png (when
    matplotlib is installed) and the results section of docs/lexical-speed.md (between the
    `results:begin/end` markers; the hand-written analysis around them is kept).

The cluster is stopped at the end unless --keep; --reuse keeps a database loaded by an earlier
run with the same data parameters and the same installed pg_corpus SQL (the data is regenerated
in memory from the seed either way).
"""
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
from harness import log, vec_text  # noqa: E402

ROOT = h.ROOT
DBNAME = "lexical_speed"
EXT_SQL_DIR = Path("/usr/share/postgresql/15/extension")

# source_kind -> share of the parents (the last takes the rest), the corpus over it
KINDS = [("external_upload", 0.8, "external"), ("internal_decision", None, "internal")]
LANGUAGE = "simple"          # synthetic words: no stemming, no stop words (keys = words)
TOP_COMMON = 20              # "common" words: the 20 most frequent
TARGET_RATIO = 2.0           # the issue: lexical p50 at most 2x the semantic branch
BUDGET_DEFAULT, BUDGET_MID, BUDGET_EXHAUSTIVE = 2000, 20000, 1_000_000_000

METHODS = {
    "bm25": "BM25, default candidate budget (2000)",
    "bm25_20k": "BM25, candidate budget 20000",
    "bm25_exhaustive": "BM25, budget 10^9 (every key finds candidates: exact BM25)",
    "ts_rank_cd": "ts_rank_cd over an OR of the lexemes (the old path), to_tsvector column",
    "semantic": "semantic branch (HNSW or exact, as the extension decides)",
    "semantic_hnsw": "semantic branch with pg_corpus.exact_search_max_rows = 0 (always HNSW)",
    "hybrid": "hybrid (both branches, BM25 default budget, RRF)",
}
SESSION_SETTINGS = {
    "bm25": [],
    "bm25_20k": [("pg_corpus.bm25_candidate_budget", str(BUDGET_MID))],
    "bm25_exhaustive": [("pg_corpus.bm25_candidate_budget", str(BUDGET_EXHAUSTIVE))],
    "ts_rank_cd": [("pg_corpus.lexical_scorer", "ts_rank_cd")],
    "semantic": [],
    "semantic_hnsw": [("pg_corpus.exact_search_max_rows", "0")],
    "hybrid": [],
}
SHORT = {"bm25": "BM25 (budget 2000)", "bm25_20k": "BM25 (budget 20k)",
         "bm25_exhaustive": "BM25 exhaustive", "ts_rank_cd": "ts_rank_cd (old)",
         "semantic": "semantic", "semantic_hnsw": "semantic (HNSW forced)", "hybrid": "hybrid"}
LEXICAL = ("bm25", "bm25_20k", "bm25_exhaustive", "ts_rank_cd")


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------

def generate(a):
    """Seeded data: parents with a source_kind, Zipf text, clustered embeddings, queries."""
    rng = np.random.default_rng(a.seed)
    n_parents = a.rows // a.chunks_per_parent
    n_items = n_parents * a.chunks_per_parent
    kind_of = np.empty(n_parents, dtype=object)
    order = rng.permutation(n_parents)
    start = 0
    for kind, share, _ in KINDS:
        size = n_parents - start if share is None else round(share * n_parents)
        kind_of[order[start:start + size]] = kind
        start += size
    item_parent = np.repeat(np.arange(n_parents), a.chunks_per_parent)

    vocab = h.vocabulary(rng, a.vocab)
    probs = h.zipf_probabilities(a.vocab, a.zipf)
    cdf = np.cumsum(probs)
    lengths = rng.integers(a.min_words, a.max_words + 1, size=n_items)
    ranks = np.minimum(np.searchsorted(cdf, rng.random(int(lengths.sum())) * cdf[-1]),
                       a.vocab - 1)
    words = vocab[ranks]
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    content = [" ".join(words[bounds[i]:bounds[i + 1]]) for i in range(n_items)]
    del words

    # embeddings: clustered, L2-normalised (bench/harness.py clustered_embeddings)
    parent_cluster = rng.integers(a.clusters, size=n_parents)
    vecs, latent, embed = h.clustered_embeddings(rng, a.dim, a.clusters, parent_cluster, item_parent)

    # queries
    qrng = np.random.default_rng(a.seed + 1)
    queries = []

    def rare_ranks(n):
        """n distinct ranks beyond the top 20, log-uniform over [TOP_COMMON, vocab)."""
        out = []
        while len(out) < n:
            r = int(np.exp(qrng.uniform(np.log(TOP_COMMON + 1), np.log(a.vocab + 1)))) - 1
            if TOP_COMMON <= r < a.vocab and r not in out:
                out.append(r)
        return out

    for _ in range(a.mixed_queries):
        n = int(qrng.integers(3, 7))
        c = int(qrng.integers(1, min(3, n - 1) + 1))
        picked = [int(r) for r in qrng.choice(TOP_COMMON, size=c, replace=False)]
        picked += rare_ranks(n - c)
        qrng.shuffle(picked)
        queries.append(dict(kind="mixed", ranks=picked))
    for _ in range(a.common_queries):
        n = int(qrng.integers(3, 6))
        picked = [int(r) for r in qrng.choice(TOP_COMMON, size=n, replace=False)]
        queries.append(dict(kind="common", ranks=picked))
    picks = qrng.choice(n_items, size=len(queries), replace=False)
    qvecs = embed(latent[picks] + h.gaussian(qrng, len(queries), latent.shape[1], 0.4), qrng)
    for q, v in zip(queries, qvecs):
        q["text"] = " ".join(vocab[r] for r in q["ranks"])
        q["vector"] = v
    return dict(n_parents=n_parents, n_items=n_items, kind_of=kind_of, item_parent=item_parent,
                content=content, vecs=vecs, vocab=vocab, probs=probs, ranks=ranks,
                lengths=lengths, mean_words=float(lengths.mean()), queries=queries)


def data_params(a):
    return dict(rows=a.rows, dim=a.dim, chunks_per_parent=a.chunks_per_parent,
                clusters=a.clusters, vocab=a.vocab, zipf=a.zipf, min_words=a.min_words,
                max_words=a.max_words, seed=a.seed, kinds=[[k, s] for k, s, _ in KINDS],
                language=LANGUAGE, bm25_storage=a.bm25_storage, generator=1)


def extension_fingerprint():
    """Hash of the installed pg_corpus SQL: a reused database must have been created with it."""
    h = hashlib.sha256()
    for f in sorted(EXT_SQL_DIR.glob("pg_corpus*")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


SCHEMA = """
CREATE TABLE case_law (
    id          bigint PRIMARY KEY,
    case_number text NOT NULL,
    case_name   text,
    court       text,
    source_kind text NOT NULL
);
CREATE TABLE precedent_chunks (
    id           bigint NOT NULL,
    case_law_id  bigint NOT NULL,
    chunk_index  int NOT NULL,
    content      text NOT NULL,
    embedding    vector({dim}),
    content_bm25 tsvector GENERATED ALWAYS AS (corpus.bm25_document(content, '{lang}')) STORED,
    content_tsv  tsvector GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED
);
CREATE TABLE bench_meta (params jsonb NOT NULL, extension text NOT NULL);
"""
COURTS = ["supreme", "district_jerusalem", "district_tel_aviv", "appeals_committee_center"]


def copy_chunks(conn, data):
    """Binary COPY: pgvector's binary form is int16 dim, int16 unused, float4[] big-endian."""
    dim = data["vecs"].shape[1]
    head = struct.Struct(">hiqiqii")
    vec_head = struct.pack(">ihh", 4 + 4 * dim, dim, 0)
    per_parent = data["n_items"] // data["n_parents"]
    with conn.cursor() as cur, cur.copy(
            "COPY precedent_chunks (id, case_law_id, chunk_index, content, embedding) "
            "FROM STDIN (FORMAT binary)") as cp:
        cp.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
        n = data["n_items"]
        for lo in range(0, n, 5000):
            hi = min(lo + 5000, n)
            be = data["vecs"][lo:hi].astype(">f4")
            parts = []
            for i in range(lo, hi):
                text = data["content"][i].encode()
                parts.append(head.pack(5, 8, i + 1, 8, int(data["item_parent"][i]) + 1, 4,
                                       i % per_parent))
                parts.append(struct.pack(">i", len(text)) + text)
                parts.append(vec_head + be[i - lo].tobytes())
            cp.write(b"".join(parts))
        cp.write(struct.pack(">h", -1))


def load(conn, a, data):
    """Tables, COPY, indexes, ANALYZE; returns build timings in seconds."""
    timings = {}
    t = time.perf_counter()
    conn.execute(SCHEMA.format(dim=a.dim, lang=LANGUAGE))
    if a.bm25_storage != "extended":
        conn.execute("ALTER TABLE precedent_chunks ALTER COLUMN content_bm25 "
                     f"SET STORAGE {a.bm25_storage.upper()}")
    with conn.cursor() as cur, cur.copy("COPY case_law (id, case_number, case_name, court, "
                                        "source_kind) FROM STDIN") as cp:
        for p in range(data["n_parents"]):
            cp.write_row([p + 1, f"{1000 + p}/{p % 25:02d}", f"case {p + 1}",
                          COURTS[p % len(COURTS)], data["kind_of"][p]])
    copy_chunks(conn, data)     # the generated tsvector columns are computed here
    timings["copy_s"] = time.perf_counter() - t
    t = time.perf_counter()
    conn.execute("ALTER TABLE precedent_chunks ADD PRIMARY KEY (id), "
                 "ADD FOREIGN KEY (case_law_id) REFERENCES case_law (id)")
    conn.execute("CREATE INDEX case_law_source_kind_idx ON case_law (source_kind)")
    conn.execute("CREATE INDEX precedent_chunks_case_law_id_idx ON precedent_chunks (case_law_id)")
    timings["btree_s"] = time.perf_counter() - t
    conn.execute(f"SET maintenance_work_mem = '{a.maintenance_work_mem}'")
    t = time.perf_counter()
    conn.execute("CREATE INDEX precedent_chunks_bm25_idx ON precedent_chunks USING gin (content_bm25)")
    conn.execute("CREATE INDEX precedent_chunks_tsv_idx ON precedent_chunks USING gin (content_tsv)")
    timings["gin_s"] = time.perf_counter() - t
    t = time.perf_counter()
    # pgvector 0.8.0's parallel HNSW build carries a CVE: build serially.
    conn.execute("SET max_parallel_maintenance_workers = 0")
    conn.execute("CREATE INDEX precedent_chunks_embedding_idx ON precedent_chunks "
                 "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)")
    timings["hnsw_s"] = time.perf_counter() - t
    t = time.perf_counter()
    conn.execute("VACUUM ANALYZE case_law")
    conn.execute("VACUUM ANALYZE precedent_chunks")
    timings["analyze_s"] = time.perf_counter() - t
    conn.execute("INSERT INTO bench_meta VALUES (%s, %s)",
                 [json.dumps(data_params(a)), extension_fingerprint()])
    return timings


def prepare_database(uri, a, data):
    """Create (or, with --reuse, keep) the database; returns (dsn, build timings or None)."""
    dbname = DBNAME if a.bm25_storage == "extended" else f"{DBNAME}_{a.bm25_storage}"
    dsn = make_conninfo(uri, dbname=dbname)
    with psycopg.connect(uri, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                               [dbname]).fetchone()
    if a.reuse and exists:
        with psycopg.connect(dsn, autocommit=True) as conn:
            try:
                stored = conn.execute("SELECT params, extension FROM bench_meta").fetchone()
            except psycopg.Error:
                stored = None
        if stored and stored[0] == json.loads(json.dumps(data_params(a))) \
                and stored[1] == extension_fingerprint():
            log(f"reusing database {dbname}")
            return dsn, None
        log("stored database has other parameters or another pg_corpus SQL: rebuilding it")
    with h.fresh_database(uri, dbname) as conn:
        log(f"loading {data['n_items']} chunks ({a.dim}-d embeddings)")
        timings = load(conn, a, data)
    log("build: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    return dsn, timings


def corpus_names():
    """corpus -> (source_kind, tsv column, language)."""
    out = {}
    for kind, _, name in KINDS:
        out[name] = (kind, "content_bm25", LANGUAGE)
        out[f"{name}_tsv"] = (kind, "content_tsv", None)
    return out


def define_corpora(conn):
    """BM25 corpora and their ts_rank_cd twins; returns the seconds each definition took
    (corpus_add_source refreshes the corpus' lexical statistics)."""
    took = {}
    for name, (kind, tsv, language) in corpus_names().items():
        t = time.perf_counter()
        conn.execute("SELECT corpus.corpus_drop(%s, if_exists => true)", [name])
        conn.execute("SELECT corpus.corpus_create(%s, isolation => %s::jsonb)",
                     [name, json.dumps({"source_kind": kind})])
        conn.execute(
            "SELECT corpus.corpus_add_source(%s, 'chunks', 'precedent_chunks', "
            "text_column => 'content', tsv_column => %s, embedding_column => 'embedding', "
            "parent_table => 'case_law', parent_fk => 'case_law_id', "
            "parent_required => '{case_number,case_name}', "
            "locator => '{\"case_number\": \"parent.case_number\", \"chunk\": \"chunk_index\"}', "
            "metadata => '{\"court\": \"parent.court\"}', language => %s)",
            [name, tsv, language])
        took[name] = time.perf_counter() - t
    return took


def prewarm(conn):
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    conn.execute("""
        SELECT pg_prewarm(c.oid) FROM pg_class c
        WHERE c.oid IN ('case_law'::regclass, 'precedent_chunks'::regclass,
                        (SELECT reltoastrelid FROM pg_class
                          WHERE oid = 'precedent_chunks'::regclass),
                        (SELECT reltoastrelid FROM pg_class
                          WHERE oid = 'case_law'::regclass))
           OR c.oid IN (SELECT indexrelid FROM pg_index
                         WHERE indrelid IN ('case_law'::regclass, 'precedent_chunks'::regclass,
                                (SELECT reltoastrelid FROM pg_class
                                  WHERE oid = 'precedent_chunks'::regclass),
                                'corpus.lexical_stats'::regclass))
           OR c.oid = 'corpus.lexical_stats'::regclass
    """)


# --------------------------------------------------------------------------------------------
# Queries: keys, document frequencies, the candidate plan
# --------------------------------------------------------------------------------------------

def query_statistics(conn, corpus, text):
    """The query's keys with their document frequencies in the corpus, and the candidate plan
    of its BM25 subplan at the default budget as the extension prints it (corpus_explain): the
    keys that find candidates through the GIN index (its tsquery) and the champion-list items
    it takes (looked up by id)."""
    row = conn.execute("SELECT sql, params FROM corpus.corpus_explain(%s, NULL, %s, mode => 'lexical') "
                       "WHERE branch = 'lexical'", [corpus, text]).fetchone()
    docs = conn.execute("SELECT documents FROM corpus.lexical_totals WHERE corpus = %s",
                        [corpus]).fetchone()[0]
    if row is None:
        return dict(keys=[], df=[], documents=docs, plan=None)
    sql, params = row
    keys = params[0]                            # $1: every key of the query, for scoring
    df = dict(conn.execute("SELECT term, df FROM corpus.lexical_stats "
                           "WHERE corpus = %s AND term = ANY(%s)", [corpus, keys]).fetchall())
    tsquery = re.search(r"@@ \$(\d+)::tsquery", sql)
    items = re.search(r"= ANY\(\$(\d+)::text\[\]", sql)
    index_keys = re.findall(r"'((?:[^']|'')*)'", params[int(tsquery.group(1)) - 1]) if tsquery else []
    index_keys = [k.replace("''", "'") for k in index_keys]
    champion_items = len(params[int(items.group(1)) - 1]) if items else 0
    plan = ("champions" if champion_items and not index_keys
            else "index+champions" if champion_items else "index")
    return dict(keys=keys, df=[df.get(k, 0) for k in keys], documents=docs, plan=plan,
                index_keys=index_keys, scoring_only=[k for k in keys if k not in index_keys],
                index_df_sum=sum(df.get(k, 0) for k in index_keys), champion_items=champion_items)


# --------------------------------------------------------------------------------------------
# Searches
# --------------------------------------------------------------------------------------------

LEXICAL_SQL = ("SELECT item_id::bigint, lexical_score FROM corpus.corpus_hybrid_search("
               "%(corpus)s, NULL, %(text)s, k => %(k)s, mode => 'lexical')")
SEMANTIC_SQL = ("SELECT item_id::bigint, semantic_distance FROM corpus.corpus_hybrid_search("
                "%(corpus)s, %(v)s::vector, NULL, k => %(k)s, mode => 'semantic')")
HYBRID_SQL = ("SELECT item_id::bigint, score FROM corpus.corpus_hybrid_search("
              "%(corpus)s, %(v)s::vector, %(text)s, k => %(k)s)")


def search_call(method, corpus, q, vtext, k):
    if method in ("semantic", "semantic_hnsw"):
        return SEMANTIC_SQL, {"corpus": corpus, "v": vtext, "k": k}
    if method == "hybrid":
        return HYBRID_SQL, {"corpus": corpus, "v": vtext, "text": q["text"], "k": k}
    c = f"{corpus}_tsv" if method == "ts_rank_cd" else corpus
    return LEXICAL_SQL, {"corpus": c, "text": q["text"], "k": k}


def run_one(conn, method, corpus, q, vtext, k):
    query, params = search_call(method, corpus, q, vtext, k)
    rows = conn.execute(query, params, prepare=False).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


# --------------------------------------------------------------------------------------------
# Plans: where the time goes
# --------------------------------------------------------------------------------------------

def subplan(conn, corpus, q, k, mode, branch):
    """The subplan corpus_explain prints: (strategy, SET LOCALs, psycopg SQL, params)."""
    return h.explained_subplan(conn, corpus, q["vector"] if mode != "lexical" else None,
                               q["text"] if mode != "semantic" else None, k, mode, branch)


def chunk_scan(node):
    """The scan of precedent_chunks: rows it produced (after its filters: the candidates that
    reach the join and the score), rows it examined (+ removed by its filter and recheck), its
    node type and index."""
    if node.get("Relation Name") == "precedent_chunks":
        loops = node.get("Actual Loops", 1)
        rows = node.get("Actual Rows", 0) * loops
        removed = (node.get("Rows Removed by Filter", 0)
                   + node.get("Rows Removed by Index Recheck", 0)) * loops
        return dict(rows=rows, examined=rows + removed, node=node["Node Type"],
                    index=node.get("Index Name")
                    or next((c.get("Index Name") for c in node.get("Plans", [])), None))
    for c in node.get("Plans", []):
        r = chunk_scan(c)
        if r:
            return r
    return None


def sorted_rows(node):
    """Rows the top-N sort receives: the candidates that passed the corpus predicate and were
    scored (None when the plan has no Sort)."""
    if node["Node Type"] == "Sort":
        child = node["Plans"][0]
        return child.get("Actual Rows", 0) * child.get("Actual Loops", 1)
    for c in node.get("Plans", []):
        r = sorted_rows(c)
        if r is not None:
            return r
    return None


def explain(conn, sql, params, settings=(), timing=True, text=False):
    """EXPLAIN (ANALYZE, BUFFERS) under SET LOCAL settings: execution and planning ms, the
    candidates, buffers, JIT, a compact plan (and the text form when asked)."""
    out = {}
    opts = "ANALYZE, BUFFERS" + ("" if timing else ", TIMING OFF")
    with conn.transaction():
        for name, value in settings:
            conn.execute(f"SET LOCAL {name} = {value}")
        if text:
            rows = conn.execute(f"EXPLAIN ({opts}, FORMAT TEXT) {sql}", params,
                                prepare=False).fetchall()
            text_plan = "\n".join(r[0] for r in rows)
            text_plan = re.sub(r"'\{[-0-9.e, ]{200,}\}'", "'{query vector}'", text_plan)
            out["text"] = re.sub(r"'\[[-0-9.e, ]{200,}\]'", "'[query vector]'", text_plan)
        doc = conn.execute(f"EXPLAIN ({opts}, FORMAT JSON) {sql}", params,
                           prepare=False).fetchone()[0]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    top = doc[0]
    out["execution_ms"] = top["Execution Time"]
    out["planning_ms"] = top["Planning Time"]
    scan = chunk_scan(top["Plan"]) or {}
    out["candidates"] = scan.get("rows")
    out["scored"] = sorted_rows(top["Plan"])
    out["examined"] = scan.get("examined")
    out["scan"] = f"{scan.get('node')} ({scan.get('index')})" if scan else None
    out["shared_hit"] = top["Plan"].get("Shared Hit Blocks", 0)
    out["shared_read"] = top["Plan"].get("Shared Read Blocks", 0)
    out["jit_ms"] = (top.get("JIT") or {}).get("Timing", {}).get("Total")
    out["summary"] = h.plan_summary(top["Plan"])
    return out


SCORE_RE = re.compile(r"corpus\._bm25_score\((i\.\"content_bm25\"), [^\n]*?\) AS score")


def bm25_variants(sql):
    """The BM25 subplan with the score replaced: by a cheap function of the id (index, heap,
    join, contract only) and by length(tsvector) (also detoasts every candidate's tsvector).
    Neither is an index order, so the plan keeps its shape (checked: same_plan)."""
    assert SCORE_RE.search(sql), sql
    return {"constant": SCORE_RE.sub("(i.id %% 1000)::float8 AS score", sql),
            "detoast": SCORE_RE.sub(r"length(\1)::float8 AS score", sql)}


def plan_shape(summary):
    return [re.sub(r" \(rows=.*", "", line) for line in summary]


def server_ms(conn, sql, params):
    """Execution + planning ms of one statement, server side."""
    doc = conn.execute(f"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) {sql}", params,
                       prepare=False).fetchone()[0]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    return doc[0]["Execution Time"] + doc[0]["Planning Time"]


def fixed_costs(conn, corpus, q):
    """The lookups a search runs besides its subplans, server side, in ms (the statistics lookup
    is timed inside real calls: profiles())."""
    out = {}
    out["corpus_definition"] = server_ms(conn, "SELECT corpus._corpus_definition(%(c)s)",
                                         {"c": corpus})
    # the slice estimate of the semantic branch is a planner call on the corpus predicate
    row = conn.execute("SELECT sql, params FROM corpus.corpus_explain(%s, %s::vector, NULL, "
                       "k => 10, mode => 'semantic')", [corpus, vec_text(q["vector"])]).fetchone()
    body = "\n".join(l for l in row[0].splitlines() if not l.startswith("SET LOCAL"))
    fw = body[body.index("\nFROM "):]
    fw = re.split(r"\n(OFFSET 0\)|ORDER BY)", fw)[0]
    fw = re.sub(r"\n  AND NOT EXISTS \(SELECT 1 FROM corpus\.embedding_queue.*", "", fw)
    fw_sql = re.sub(r"\$(\d+)", r"%(p\1)s", fw.replace("%", "%%"))
    used = set(re.findall(r"%\((p\d+)\)s", fw_sql))
    vals = {f"p{i + 1}": v for i, v in enumerate(row[1]) if f"p{i + 1}" in used}
    doc = conn.execute(f"EXPLAIN (SUMMARY, FORMAT JSON) SELECT 1 {fw_sql}", vals,
                       prepare=False).fetchone()[0]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    out["slice_estimate_planning"] = doc[0]["Planning Time"]
    out["slice_estimate_rows"] = doc[0]["Plan"]["Plan Rows"]
    # the whole call, server side, and its part before any subplan runs (corpus_explain does
    # what the search does first: load the corpus, analyse, look up statistics / estimate the
    # slice, build the SQL); the rest of the call is the subplans, fusion and the final fetch
    lex = {"c": corpus, "t": q["text"]}
    sem = {"c": corpus, "v": vec_text(q["vector"])}
    out["lexical_call_server"] = server_ms(
        conn, "SELECT * FROM corpus.corpus_hybrid_search(%(c)s, NULL, %(t)s, k => 10, "
        "mode => 'lexical')", lex)
    out["lexical_explain_call"] = server_ms(
        conn, "SELECT * FROM corpus.corpus_explain(%(c)s, NULL, %(t)s, k => 10, "
        "mode => 'lexical')", lex)
    out["semantic_call_server"] = server_ms(
        conn, "SELECT * FROM corpus.corpus_hybrid_search(%(c)s, %(v)s::vector, NULL, k => 10, "
        "mode => 'semantic')", sem)
    out["semantic_explain_call"] = server_ms(
        conn, "SELECT * FROM corpus.corpus_explain(%(c)s, %(v)s::vector, NULL, k => 10, "
        "mode => 'semantic')", sem)
    t = time.perf_counter()
    for _ in range(20):
        conn.execute("SELECT 1").fetchall()
    out["client_round_trip"] = (time.perf_counter() - t) / 20 * 1000
    return out


PART_PATTERNS = [            # (part, pattern of the nested statement's text), first match wins
    ("corpus_definition", re.compile(r"corpus\._corpus_definition")),
    ("stats_lookup", re.compile(r"FROM corpus\.lexical_stats")),
    ("reltuples", re.compile(r"pg_catalog\.pg_class")),
    ("fetch", re.compile(r"AS locator")),
    ("subplan", re.compile(r"_bm25_score|ts_rank_cd|OPERATOR\(\"public\"\.<=>\)"
                           r"|OPERATOR\(corpus\.<@>\)")),
    ("queue_lookup", re.compile(r"FROM corpus\.embedding_queue AS eq|corpus\._item_queued\(")),
]


def call_profile(conn, log_path, sql, params):
    """Durations of the statements a call runs inside (auto_explain with nested statements,
    durations only: no ANALYZE), read back from the cluster's server log: ms per part."""
    conn.execute("SET auto_explain.log_min_duration = 0")
    start = log_path.stat().st_size
    conn.execute(sql, params, prepare=False).fetchall()
    conn.execute("SET auto_explain.log_min_duration = -1")
    with open(log_path, "rb") as f:
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    parts, top = {}, None
    for entry in re.split(r"\n(?=\d{4}-\d\d-\d\d )", text):
        m = re.search(r"duration: ([0-9.]+) ms  plan:\n(.*)", entry, re.S)
        if not m:
            continue
        ms = float(m.group(1))
        try:
            query = json.loads(m.group(2))["Query Text"] or ""
        except (ValueError, KeyError):
            continue
        if "corpus.corpus_hybrid_search" in query:
            top = ms
            continue
        for name, pat in PART_PATTERNS:
            if pat.search(query):
                parts[name] = parts.get(name, 0.0) + ms
                break
    parts["total"] = top
    return parts


def profiles(dsn, log_path, data, corpora, a):
    """Per corpus and query, the parts of a lexical (BM25, default budget) and a semantic call."""
    out = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("LOAD 'auto_explain'")
        conn.execute("SET auto_explain.log_nested_statements = on")
        conn.execute("SET auto_explain.log_analyze = off")
        conn.execute("SET auto_explain.log_format = json")
        for c in corpora:
            rows = []
            for q in data["queries"]:
                vtext = vec_text(q["vector"])
                r = {}
                for meth in ("bm25", "semantic"):
                    sql, params = search_call(meth, c, q, vtext, a.k)
                    conn.execute(sql, params, prepare=False).fetchall()    # warm
                    runs = [call_profile(conn, log_path, sql, params) for _ in range(3)]
                    r[meth] = {k: float(np.median([x.get(k) or 0.0 for x in runs]))
                               for k in set().union(*runs)}
                rows.append(r)
            out[c] = rows
    return out


def where_the_time_goes(dsn, data, corpora, a, stats):
    """EXPLAIN the subplans: every query's BM25 (default budget) subplan with its variants, the
    semantic subplan, a few ts_rank_cd and exhaustive subplans, and the fixed lookups."""
    out = {}
    first_common = next((qi for qi, q in enumerate(data["queries"]) if q["kind"] == "common"),
                        None)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for c in corpora:
            rows = []
            for qi, q in enumerate(data["queries"]):
                r = {"query": qi, "kind": q["kind"], "plan": stats[c][qi]["plan"]}
                # every subplan under the SET LOCALs corpus_explain prints (BM25:
                # random_page_cost 1.1), as the search runs it
                _, settings, sql, values = subplan(conn, c, q, a.k, "lexical", "lexical")
                r["bm25"] = explain(conn, sql, values, settings,
                                    text=(qi in (0, first_common)))
                r["bm25"]["settings"] = settings
                r["bm25"]["champion_subplan"] = 'i."id" = ANY(' in sql   # champion-list items by id
                for name, vsql in bm25_variants(sql).items():
                    r[f"bm25_{name}"] = explain(conn, vsql, values, settings, timing=False)
                    r[f"bm25_{name}"]["same_plan"] = (plan_shape(r[f"bm25_{name}"]["summary"])
                                                      == plan_shape(r["bm25"]["summary"]))
                r["bm25_timing_off"] = explain(conn, sql, values, settings, timing=False)
                strategy, settings, ssql, svalues = subplan(conn, c, q, a.k, "semantic",
                                                            "semantic")
                r["semantic"] = explain(conn, ssql, svalues, settings, text=(qi == 0))
                r["semantic"]["strategy"] = strategy
                if qi < a.explain_slow:
                    with conn.transaction():
                        conn.execute("SET LOCAL pg_corpus.lexical_scorer = ts_rank_cd")
                        _, tsettings, tsql, tvalues = subplan(conn, f"{c}_tsv", q, a.k,
                                                              "lexical", "lexical")
                    r["ts_rank_cd"] = explain(conn, tsql, tvalues, tsettings, text=(qi == 0))
                    with conn.transaction():
                        conn.execute("SET LOCAL pg_corpus.bm25_candidate_budget = "
                                     f"{BUDGET_EXHAUSTIVE}")
                        _, esettings, esql, evalues = subplan(conn, c, q, a.k, "lexical",
                                                              "lexical")
                    r["bm25_exhaustive"] = explain(conn, esql, evalues, esettings)
                r["fixed"] = fixed_costs(conn, c, q)
                rows.append(r)
            out[c] = rows
            log(f"  EXPLAIN {c}: {len(rows)} queries")
        # the SQL text of one BM25 subplan, for the document
        _, _, sql, _ = subplan(conn, corpora[0], data["queries"][0], a.k, "lexical", "lexical")
        out["bm25_sql_example"] = sql.replace("%%", "%")
        out["toast"] = dict(conn.execute("""
            SELECT 'avg_bm25_tsvector_bytes', round(avg(pg_column_size(content_bm25)))::text
              FROM precedent_chunks
            UNION ALL SELECT 'avg_tsv_bytes', round(avg(pg_column_size(content_tsv)))::text
              FROM precedent_chunks
            UNION ALL SELECT 'avg_content_bytes', round(avg(pg_column_size(content)))::text
              FROM precedent_chunks
            UNION ALL SELECT 'heap', pg_size_pretty(pg_relation_size('precedent_chunks'))
            UNION ALL SELECT 'toast', pg_size_pretty(pg_relation_size(
                (SELECT reltoastrelid FROM pg_class WHERE oid = 'precedent_chunks'::regclass)))
            UNION ALL SELECT 'gin_bm25', pg_size_pretty(pg_relation_size('precedent_chunks_bm25_idx'))
            UNION ALL SELECT 'gin_tsv', pg_size_pretty(pg_relation_size('precedent_chunks_tsv_idx'))
            UNION ALL SELECT 'hnsw', pg_size_pretty(pg_relation_size('precedent_chunks_embedding_idx'))
        """).fetchall())
        # which values are stored out of line (an external TOAST pointer's first byte is 0x01),
        # from the raw heap pages (a sample of at most 3000 pages)
        conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        row = conn.execute("""
            SELECT count(*), count(*) FILTER (WHERE get_byte(d[6], 0) = 1),
                   count(*) FILTER (WHERE get_byte(d[7], 0) = 1),
                   count(*) FILTER (WHERE get_byte(d[5], 0) = 1),
                   count(*) FILTER (WHERE get_byte(d[4], 0) = 1)
              FROM generate_series(0, least(3000, pg_relation_size('precedent_chunks') / 8192 - 1)::int) b,
                   LATERAL heap_page_items(get_raw_page('precedent_chunks', b)) h,
                   LATERAL tuple_data_split('precedent_chunks'::regclass, h.t_data, h.t_infomask,
                                            h.t_infomask2, h.t_bits) d
             WHERE h.lp_flags = 1""").fetchone()
        out["toast"].update(bm25_rows=row[0], bm25_external=row[1], tsv_external=row[2],
                            embedding_external=row[3], content_external=row[4])
    return out


# --------------------------------------------------------------------------------------------
# Offline: other ways to find candidates, on the generated text (the core's own functions)
# --------------------------------------------------------------------------------------------

CHAMPIONS = (50, 100, 250, 500)     # champion list lengths of the sensitivity rows


def simulate_candidates(data, a):
    """What bounds the work of all-common queries, and at what quality? Exact BM25 over each
    corpus' chunks against the extension's first-round candidate plan and against champion
    lists of M chunks for every key the plan does not find through the index: the Rust example
    crates/pg_corpus_core/examples/candidate_rules.rs computes both with the core's functions
    (its header has the rules) on the generated text, written here to bench/out/raw/.
    Returns per corpus and query class: candidates (mean, max), overlap@10 (mean, min) and
    the exact score mass kept."""
    raw = Path(a.raw).parent / "lexical_speed_candidates"
    raw.mkdir(parents=True, exist_ok=True)
    corpus_of = {kind: name for kind, _, name in KINDS}
    with open(raw / "docs.tsv", "w") as f:
        for i, text in enumerate(data["content"]):
            f.write(f"{corpus_of[data['kind_of'][data['item_parent'][i]]]}\t{i + 1}\t{text}\n")
    with open(raw / "queries.tsv", "w") as f:
        for q in data["queries"]:
            f.write(f"{q['kind']}\t{q['text']}\n")
    env = {**os.environ, "CARGO_TARGET_DIR": os.environ.get(
        "CARGO_TARGET_DIR", str(Path.home() / ".cache" / "pg_corpus" / "target-bench"))}
    subprocess.run(["cargo", "run", "-q", "--release", "-p", "pg_corpus_core", "--example",
                    "candidate_rules", "--", str(raw / "docs.tsv"), str(raw / "queries.tsv"),
                    str(raw / "rules.json"), "--budget", str(BUDGET_DEFAULT), "--k", str(a.k),
                    "--window", str(max(20, 4 * a.k)), "--lists", ",".join(map(str, CHAMPIONS)),
                    "--language", LANGUAGE], cwd=ROOT, env=env, check=True)
    out = json.loads((raw / "rules.json").read_text())
    summary = {}
    for corpus, rows in out.items():
        summary[corpus] = {}
        for g in ("all", "mixed", "common"):
            sel = [r for r in rows if (g == "all" or r["class"] == g) and r["rules"]]
            if not sel:
                continue
            summary[corpus][g] = {
                name: dict(candidates_mean=float(np.mean([r["rules"][name]["candidates"] for r in sel])),
                           candidates_max=int(max(r["rules"][name]["candidates"] for r in sel)),
                           overlap_mean=float(np.mean([r["rules"][name]["overlap"] for r in sel])),
                           overlap_min=float(min(r["rules"][name]["overlap"] for r in sel)),
                           score_mass_mean=float(np.mean([r["rules"][name]["score_mass"] for r in sel])))
                for name in sel[0]["rules"]}
    return dict(per_query=out, summary=summary)


# --------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------

def measure(dsn, data, corpora, a):
    """Every (corpus, method) pair on every query, interleaved (bench/harness.py interleave): a
    query's latency is the median of its rounds."""
    conns = {m: h.session(dsn, SESSION_SETTINGS[m]) for m in METHODS}
    vtexts = [vec_text(q["vector"]) for q in data["queries"]]
    tasks = [(c, m) for c in corpora for m in METHODS]
    rng = np.random.default_rng(a.seed + 2)
    queries = data["queries"]
    log(f"warm-up: {a.warmup} queries x {len(tasks)} (corpus, method) pairs")
    for qi in range(a.warmup):
        for c, m in tasks:
            run_one(conns[m], m, c, queries[qi % len(queries)], vtexts[qi % len(queries)], a.k)
    results = {c: {m: dict(latency_ms=[], latency_runs_ms=[], answers=[]) for m in METHODS}
               for c in corpora}
    t0 = time.perf_counter()
    for qi, q in enumerate(queries):
        calls = {(c, m): (lambda c=c, m=m: run_one(conns[m], m, c, q, vtexts[qi], a.k))
                 for c, m in tasks}
        times, answers = h.interleave(calls, a.repeats, rng)
        for (c, m), rows in answers.items():
            r = results[c][m]
            r["latency_runs_ms"].append(times[(c, m)])
            r["latency_ms"].append(float(np.median(times[(c, m)])))
            r["answers"].append(rows)
        if (qi + 1) % 10 == 0:
            log(f"  {qi + 1}/{len(queries)} queries ({time.perf_counter() - t0:.0f} s)")
    for conn in conns.values():
        conn.close()
    return results


def overlap(a_rows, b_rows, k):
    a_ids = {i for i, _ in a_rows[:k]}
    b_ids = {i for i, _ in b_rows[:k]}
    return len(a_ids & b_ids) / max(1, min(k, len(b_ids)))


def score_mass(a_rows, b_rows, k):
    """Sum of the (exact) BM25 scores of a's top-k over that of the exhaustive top-k b."""
    total = sum(s for _, s in b_rows[:k])
    return sum(s for _, s in a_rows[:k]) / total if total > 0 else 1.0


def summarise(results, data, corpora, a):
    kinds = [q["kind"] for q in data["queries"]]
    groups = {"all": [True] * len(kinds), "mixed": [k == "mixed" for k in kinds],
              "common": [k == "common" for k in kinds]}
    out = {}
    for c in corpora:
        out[c] = {}
        sem = results[c]["semantic"]["latency_ms"]
        hnsw = results[c]["semantic_hnsw"]["latency_ms"]
        exh = results[c]["bm25_exhaustive"]["answers"]
        for m in METHODS:
            lat = results[c][m]["latency_ms"]
            out[c][m] = {}
            for g, mask in groups.items():
                sel = [x for x, keep in zip(lat, mask) if keep]
                if not sel:
                    continue
                sem_sel = [x for x, keep in zip(sem, mask) if keep]
                hnsw_sel = [x for x, keep in zip(hnsw, mask) if keep]
                row = dict(p50_ms=h.pct(sel, 50), p95_ms=h.pct(sel, 95), mean_ms=float(np.mean(sel)),
                           max_ms=float(np.max(sel)), n=len(sel),
                           ratio_to_semantic_p50=h.pct(sel, 50) / h.pct(sem_sel, 50),
                           ratio_to_semantic_hnsw_p50=h.pct(sel, 50) / h.pct(hnsw_sel, 50))
                if m.startswith("bm25"):
                    ans = [x for x, keep in zip(results[c][m]["answers"], mask) if keep]
                    ref = [x for x, keep in zip(exh, mask) if keep]
                    ov = [overlap(x, y, a.k) for x, y in zip(ans, ref)]
                    sm = [score_mass(x, y, a.k) for x, y in zip(ans, ref)]
                    row.update(overlap_mean=float(np.mean(ov)), overlap_min=float(np.min(ov)),
                               score_mass_mean=float(np.mean(sm)),
                               score_mass_min=float(np.min(sm)),
                               rows_min=int(min(len(x) for x in ans)))
                if m in LEXICAL or m.startswith("semantic"):
                    row["rows_min"] = int(min(len(x) for x, keep in
                                              zip(results[c][m]["answers"], mask) if keep))
                out[c][m][g] = row
    return out


def profile_summary(profile, data):
    """Means over the queries of each part of a call (auto_explain durations), by class."""
    out = {}
    for c, rows in profile.items():
        out[c] = {}
        for g in ("all", "mixed", "common"):
            sel = [r for r, q in zip(rows, data["queries"]) if g == "all" or q["kind"] == g]
            if not sel:
                continue
            out[c][g] = {}
            for meth in ("bm25", "semantic"):
                keys = set().union(*(r[meth].keys() for r in sel))
                mean = {k: float(np.mean([r[meth].get(k, 0.0) for r in sel])) for k in keys}
                # what the nested statements do not account for: Rust (analysis, fusion),
                # planning of the nested statements, SPI (means, so that the parts add up)
                mean["other"] = mean.get("total", 0.0) - sum(
                    v for k, v in mean.items() if k != "total")
                mean["total_median"] = float(np.median([r[meth].get("total", 0.0) for r in sel]))
                out[c][g][meth] = mean
    return out


def per_candidate(rows, min_scored=200):
    """Per-row costs from the subplan and its variants, medians over the queries that score at
    least min_scored rows (same plan shape only): the constant-score variant per row the index
    hands over (index, heap, corpus predicate, parent join, sort; fixed costs included), and
    per scored row what detoasting the tsvector and computing BM25 add."""
    sel = [r for r in rows if (r["bm25"]["scored"] or 0) >= min_scored
           and r["bm25_constant"].get("same_plan") and r["bm25_detoast"].get("same_plan")]
    if not sel:
        return None

    def med(vals):
        return float(np.median(vals))

    return dict(
        queries=len(sel),
        reach_us_per_index_row=med([r["bm25_constant"]["execution_ms"] * 1000
                                    / max(1, r["bm25"]["candidates"]) for r in sel]),
        detoast_us_per_scored_row=med([(r["bm25_detoast"]["execution_ms"]
                                        - r["bm25_constant"]["execution_ms"]) * 1000
                                       / r["bm25"]["scored"] for r in sel]),
        score_us_per_scored_row=med([(r["bm25_timing_off"]["execution_ms"]
                                      - r["bm25_detoast"]["execution_ms"]) * 1000
                                     / r["bm25"]["scored"] for r in sel]),
        total_us_per_scored_row=med([r["bm25_timing_off"]["execution_ms"] * 1000
                                     / r["bm25"]["scored"] for r in sel]))


def breakdown(explains, corpora, data):
    """Medians over the queries of one class: the search's wall clock against its parts."""
    out = {}
    for c in corpora:
        rows = explains[c]
        plans = {r["query"]: r["plan"] for r in rows}

        def out_plan(r):
            return plans[r["query"]]
        out[c] = {}
        for g in ("all", "mixed", "common"):
            sel = [r for r in rows if g == "all" or r["kind"] == g]
            if not sel:
                continue

            def med(f):
                vals = [f(r) for r in sel]
                vals = [v for v in vals if v is not None]
                return float(np.median(vals)) if vals else None

            out[c][g] = dict(
                candidates=med(lambda r: r["bm25"]["candidates"]),
                candidates_max=max(r["bm25"]["candidates"] or 0 for r in sel),
                examined=med(lambda r: r["bm25"]["examined"]),
                scored=med(lambda r: r["bm25"]["scored"]),
                same_plan=all(r["bm25_constant"].get("same_plan") and
                              r["bm25_detoast"].get("same_plan") for r in sel),
                champion_plans=sum(1 for r in sel if out_plan(r) != "index"),
                lexical_call_server_ms=med(lambda r: r["fixed"]["lexical_call_server"]),
                lexical_explain_call_ms=med(lambda r: r["fixed"]["lexical_explain_call"]),
                semantic_call_server_ms=med(lambda r: r["fixed"]["semantic_call_server"]),
                semantic_explain_call_ms=med(lambda r: r["fixed"]["semantic_explain_call"]),
                per_candidate_us=per_candidate(sel),
                subplan_exec_ms=med(lambda r: r["bm25_timing_off"]["execution_ms"]),
                subplan_plan_ms=med(lambda r: r["bm25_timing_off"]["planning_ms"]),
                constant_score_exec_ms=med(lambda r: r["bm25_constant"]["execution_ms"]),
                detoast_exec_ms=med(lambda r: r["bm25_detoast"]["execution_ms"]),
                shared_hit=med(lambda r: r["bm25"]["shared_hit"]),
                shared_read=med(lambda r: r["bm25"]["shared_read"]),
                semantic_exec_ms=med(lambda r: r["semantic"]["execution_ms"]),
                semantic_plan_ms=med(lambda r: r["semantic"]["planning_ms"]),
                corpus_definition_ms=med(lambda r: r["fixed"]["corpus_definition"]),
                slice_estimate_planning_ms=med(lambda r: r["fixed"]["slice_estimate_planning"]),
                client_round_trip_ms=med(lambda r: r["fixed"]["client_round_trip"]),
                ts_rank_cd_exec_ms=med(lambda r: (r.get("ts_rank_cd") or {}).get("execution_ms")),
                ts_rank_cd_candidates=med(lambda r: (r.get("ts_rank_cd") or {}).get("candidates")),
                exhaustive_exec_ms=med(lambda r: (r.get("bm25_exhaustive") or {}).get("execution_ms")),
                exhaustive_candidates=med(
                    lambda r: (r.get("bm25_exhaustive") or {}).get("candidates")),
                jit_used=any((r["bm25"].get("jit_ms") or 0) > 0 for r in sel),
                scans=sorted({r["bm25"]["scan"] or "?" for r in sel}),
                champion_scans=sorted({r["bm25"]["scan"] or "?" for r in sel
                                       if out_plan(r) != "index"}),
            )
    return out


# --------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------

SETTINGS = ("shared_buffers", "jit", "max_parallel_workers_per_gather", "work_mem", "hnsw.ef_search",
            "pg_corpus.bm25_candidate_budget", "pg_corpus.lexical_scorer",
            "pg_corpus.exact_search_max_rows", "random_page_cost")


def machine_info(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        return h.machine(conn, SETTINGS)


fmt_ms = h.fmt_ms


def results_markdown(out):
    a, s, m = out["args"], out["summary"], out["machine"]
    corpora = out["corpora"]
    label = out["corpus_label"]
    lines = [
        f"Run of {out['finished']} ({out['runtime_s'] / 60:.0f} min in all), "
        f"`{out['command']}`: {out['data']['n_items']:,} chunks under "
        f"{out['data']['n_parents']:,} parents, {a['dim']}-d embeddings, text of "
        f"{a['min_words']}–{a['max_words']} words per chunk (mean {out['data']['mean_words']:.0f}) "
        f"from {a['vocab']:,} synthetic words with Zipf exponent {a['zipf']:g} (the most "
        f"frequent word is {out['data']['top_word_share'] * 100:.0f}% of all tokens; the 20th "
        f"is in {out['data']['df_rank20'] * 100:.0f}% of the chunks), "
        f"{a['mixed_queries']} mixed + {a['common_queries']} all-common queries, k = {a['k']}, "
        f"{a['repeats']} interleaved rounds per query (a query's latency is its median).",
        "",
        f"Machine: {m.get('cpu', '?')}, {m.get('cpus')} cores, {m.get('ram_gb', '?')} GB, "
        f"PostgreSQL {m.get('postgres')}, pgvector {m['extensions'].get('vector')}, pg_corpus "
        f"{m['extensions'].get('pg_corpus')} (library installed {out['library_installed']}"
        + ("" if not out.get("library_reinstalled_during_run") else
           ", REINSTALLED during the run: " + ", ".join(
               f"{k} {v}" for k, v in out["library_by_phase"].items()))
        + f", "
        f"commit {m.get('commit')}), shared_buffers {m['settings'].get('shared_buffers')}, "
        f"jit {m['settings'].get('jit')}; tables and indexes prewarmed. Load average "
        f"{out['load_before']} before, {out['load_after']} after: other work shared the two "
        "cores, so compare ratios measured in the same run rather than absolute milliseconds.",
        "",
        "| corpus (chunks) | method | queries | p50 ms | p95 ms | max ms | × semantic p50 "
        "| × HNSW semantic p50 | overlap@10 with exhaustive (min) | BM25 score mass kept (min) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in corpora:
        for meth in METHODS:
            for g in ("all", "mixed", "common"):
                r = s[c][meth].get(g)
                if r is None:
                    continue
                ov = (f"{r['overlap_mean']:.3f} ({r['overlap_min']:.1f})"
                      if "overlap_mean" in r else "")
                sm = (f"{r['score_mass_mean']:.3f} ({r['score_mass_min']:.2f})"
                      if "score_mass_mean" in r else "")
                ratio = "1" if meth == "semantic" else f"{r['ratio_to_semantic_p50']:.1f}"
                ratio_h = ("1" if meth == "semantic_hnsw"
                           else f"{r['ratio_to_semantic_hnsw_p50']:.1f}")
                name = SHORT[meth] if g == "all" else ""
                corpus = f"{label[c]} ({out['corpus_rows'][c]:,})" if (
                    meth == "bm25" and g == "all") else ""
                lines.append(f"| {corpus} | {name} | {g} ({r['n']}) | {fmt_ms(r['p50_ms'])} | "
                             f"{fmt_ms(r['p95_ms'])} | {fmt_ms(r['max_ms'])} | {ratio} | {ratio_h} | {ov} | {sm} |")
    lines += [
        "",
        f"Target: lexical p50 ≤ {TARGET_RATIO:g}× the semantic branch's p50.",
        "",
    ]
    for c in corpora:
        r = s[c]["bm25"]
        verdict = []
        for g in ("all", "mixed", "common"):
            if g in r:
                x = r[g]["ratio_to_semantic_p50"]
                h = r[g]["ratio_to_semantic_hnsw_p50"]
                verdict.append(f"{g} {x:.1f}× ({'met' if x <= TARGET_RATIO else 'missed'}; "
                               f"{h:.1f}× the HNSW path)")
        strategy = out["explains"][c][0]["semantic"]["strategy"]
        est = out["explains"][c][0]["fixed"]["slice_estimate_rows"]
        lines.append(f"- {label[c]}: BM25 (budget 2000) / semantic p50 = " + ", ".join(verdict)
                     + f". The extension searched this corpus' embeddings {strategy}ly"
                     .replace("hnsw_iterativelyly", "with HNSW (iterative scan)")
                     .replace("hnsw_iteratively", "with HNSW (iterative scan)")
                     + f" (slice estimated at {est:,.0f} rows, actually "
                     f"{out['corpus_rows'][c]:,}; exact search up to "
                     f"{out['machine']['settings'].get('pg_corpus.exact_search_max_rows')}).")
    shorts = []
    for c in corpora:
        for meth in LEXICAL:
            n = [len(x) for x in out["raw"][c][meth]["answers"]]
            short = [x for x in n if x < a["k"]]
            if short:
                shorts.append(f"{label[c]} {SHORT[meth]}: {len(short)} of {len(n)} queries "
                              f"({', '.join(map(str, short))} rows)")
    lines += ["", "Queries answered with fewer than k rows: "
              + ("; ".join(shorts) if shorts else "none") + "."]
    lines += ["", "Where the time of the BM25 call (default budget) goes: medians over the "
              "queries of EXPLAIN (ANALYZE, TIMING OFF) of the subplan corpus_explain prints, "
              "under the settings it prints (`SET LOCAL random_page_cost = 1.1`, as the search "
              "runs it), the same with the score replaced by a constant (index + heap + parent join + "
              "contract) and by `length(tsvector)` (+ detoasting the tsvector), and EXPLAIN "
              "ANALYZE of the whole call (server side):", "",
              "| corpus | queries (champion plans) | rows out of the chunk scan (max) | rows read "
              "| rows scored | subplan exec | planning | score → constant | score → length(tsv) | "
              "call, server | call p50, client |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in corpora:
        for g in ("all", "mixed", "common"):
            b = out["breakdown"][c].get(g)
            if b is None:
                continue
            lines.append(
                f"| {label[c]} | {g} ({b['champion_plans']}) | {b['candidates']:,.0f} "
                f"({b['candidates_max']:,}) | {b['examined']:,.0f} | {b['scored'] or 0:,.0f} | "
                f"{fmt_ms(b['subplan_exec_ms'])} | {fmt_ms(b['subplan_plan_ms'])} | "
                f"{fmt_ms(b['constant_score_exec_ms'])} | {fmt_ms(b['detoast_exec_ms'])} | "
                f"{fmt_ms(b['lexical_call_server_ms'])} | {fmt_ms(s[c]['bm25'][g]['p50_ms'])} |")
    scans = []
    for c in corpora:
        b = out["breakdown"][c]["all"]
        scans.append(f"{label[c]}: {', '.join(b['scans'])}"
                     + (f" (champion plans: {', '.join(b['champion_scans'])})"
                        if b["champion_scans"] else ""))
    lines += ["", "How the BM25 subplans reach the chunks (node (index) of the precedent_chunks "
              "scan): " + "; ".join(scans) + "."]
    lines += ["", "Cost per row (medians over the queries scoring at least 200 rows, plan shape "
              "unchanged by the variants): the constant-score variant per row the GIN index hands "
              "over (index, heap, text-length contract, parent join, sort — and the fixed part of "
              "the statement), and per scored row what detoasting the tsvector and computing "
              "BM25 add:", "",
              "| corpus | queries | µs per index row (constant score) | + µs per scored row: "
              "detoast | + BM25 score | subplan µs per scored row |",
              "|---|---:|---:|---:|---:|---:|"]
    for c in corpora:
        pc = out["breakdown"][c]["all"]["per_candidate_us"]
        if not pc:
            continue
        lines.append(f"| {label[c]} | {pc['queries']} | {pc['reach_us_per_index_row']:.1f} | "
                     f"{pc['detoast_us_per_scored_row']:.1f} | {pc['score_us_per_scored_row']:.1f} | "
                     f"{pc['total_us_per_scored_row']:.1f} |")
    lines += ["", "The statements a call runs inside it (durations logged by auto_explain with "
              "nested statements, no ANALYZE; means over the queries, so that the parts add "
              "up; the median total is in brackets). \"other\" is the "
              "call's total less these: the Rust side (analysis, candidate plan, fusion), "
              "planning of the nested statements (among them the semantic branch's slice "
              "estimate), SPI, and auto_explain's own output:", "",
              "| corpus | call | queries | corpus definition | stats lookup / reltuples | "
              "subplan | final fetch | other | total (server) |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for c in corpora:
        for meth in ("bm25", "semantic"):
            for g in ("all", "mixed", "common"):
                p = out["profile_summary"][c].get(g, {}).get(meth)
                if p is None or (meth == "semantic" and g != "all"):
                    continue
                look = p.get("stats_lookup", 0.0) + p.get("reltuples", 0.0)
                lines.append(
                    f"| {label[c] if g == 'all' else ''} | {SHORT[meth] if g == 'all' else ''} | "
                    f"{g} | {fmt_ms(p.get('corpus_definition'))} | {fmt_ms(look)} | "
                    f"{fmt_ms(p.get('subplan'))} | {fmt_ms(p.get('fetch'))} | "
                    f"{fmt_ms(p.get('other'))} | {fmt_ms(p.get('total'))} "
                    f"({fmt_ms(p.get('total_median'))}) |")
    rt = [out["breakdown"][c]["all"]["client_round_trip_ms"] for c in corpora]
    sl = [out["breakdown"][c]["all"]["slice_estimate_planning_ms"] for c in corpora]
    lines += ["", f"Planning the semantic branch's slice estimate: {fmt_ms(max(sl))} ms; a "
              f"client round trip (`SELECT 1`): {max(rt):.2f} ms."]
    st = out["storage"]
    lines += ["", f"Storage: content_bm25 `{out['args']['bm25_storage']}`, mean stored size "
              f"{st['avg_bm25_tsvector_bytes']} B (content_tsv {st['avg_tsv_bytes']} B, content "
              f"{st['avg_content_bytes']} B); of {st['bm25_rows']} rows, "
              f"{st['bm25_external']} keep content_bm25 out of line (TOAST) and "
              f"{st['tsv_external']} content_tsv; heap {st['heap']}, TOAST {st['toast']}, GIN "
              f"{st['gin_bm25']} (bm25) and {st['gin_tsv']} (tsv), HNSW {st['hnsw']}."]
    lines += ["", f"The old path and exhaustive BM25 on the first {a['explain_slow']} queries "
              "(EXPLAIN ANALYZE medians):", ""]
    for c in corpora:
        b = out["breakdown"][c]["all"]
        lines.append(f"- {label[c]}: ts_rank_cd subplan {fmt_ms(b['ts_rank_cd_exec_ms'])} ms over "
                     f"{b['ts_rank_cd_candidates'] or 0:,.0f} matching chunks; exhaustive BM25 "
                     f"{fmt_ms(b['exhaustive_exec_ms'])} ms over "
                     f"{b['exhaustive_candidates'] or 0:,.0f} candidates.")
    sim = out["simulation"]["summary"]
    lines += ["", "Offline, on the generated text (crates/pg_corpus_core/examples/candidate_rules.rs: "
              "the core's analyser, exact BM25 and candidate plan, no per-parent cap): the "
              "extension's first-round candidates (budget 2000: the documents of the keys the "
              "plan finds through the index, and the items preselected from the heads of the "
              "champion lists of the keys it finds through their lists) against, as a "
              "sensitivity check, champion lists of M chunks for every key the plan does not find "
              "through the index, added to the documents of those it does. A query left short of "
              "k rows by a pruned plan is searched again with a 4× window and budget, which the "
              "first row does not model, so the measured overlap above can be higher:", "",
              "| corpus | queries | candidate rule | candidates mean (max) | overlap@10 with "
              "exact (min) | score mass kept |", "|---|---|---|---:|---:|---:|"]
    names = {"budget": "the extension (budget 2000)"}
    names.update({f"champions_{m}": f"champion lists for every key not found through the index, M = {m} each"
                  for m in CHAMPIONS})
    for c in corpora:
        for g in ("mixed", "common"):
            for name, title in names.items():
                r = sim[c].get(g, {}).get(name)
                if r is None:
                    continue
                lines.append(f"| {label[c]} | {g} | {title} | {r['candidates_mean']:,.0f} "
                             f"({r['candidates_max']:,}) | {r['overlap_mean']:.3f} "
                             f"({r['overlap_min']:.1f}) | {r['score_mass_mean']:.3f} |")
    lines += ["", "Per-query candidate plans at the default budget (corpus_explain) are in the raw "
              f"JSON (`queries`). Plans of the first query ({out['queries'][0]['text']!r}, "
              f"{label[corpora[0]]}):", "", "```"]
    first = out["explains"][corpora[0]][0]
    lines += first["bm25"].get("text", "").splitlines()
    lines += ["```", "", "```"]
    lines += first["semantic"].get("text", "").splitlines()
    lines += ["```"]
    champ = next((r for r in out["explains"][corpora[0]] if r["bm25"].get("text")
                  and r["plan"] != "index"), None)
    if champ is not None:
        qtext = out["queries"][champ["query"]]["text"]
        plan = out["queries"][champ["query"]][corpora[0]]
        lines += ["", f"The BM25 subplan of the first all-common query ({qtext!r}, "
                  f"{label[corpora[0]]}): {plan['champion_items']} items preselected from the "
                  "champion lists' heads"
                  + (f", the GIN index for {', '.join(plan['index_keys'])}"
                     if plan.get("index_keys") else "") + ":", "", "```"]
        lines += champ["bm25"]["text"].splitlines()
        lines += ["```"]
    return "\n".join(lines)


def compact(out):
    """Keep the JSON reviewable: plan summaries only for the subplans as the search runs them
    (the score-replaced and timing-off variants keep their numbers, not their plans)."""
    for c in out["corpora"]:
        for r in out["explains"][c]:
            for key in ("bm25_constant", "bm25_detoast", "bm25_timing_off"):
                if key in r:
                    r[key].pop("summary", None)
    return out


PLOT_LABEL = {"bm25": "BM25\nbudget\n2000", "bm25_20k": "BM25\nbudget\n20k",
              "bm25_exhaustive": "BM25\nexhaus-\ntive", "ts_rank_cd": "ts_rank\n_cd\n(old)",
              "semantic": "seman-\ntic", "semantic_hnsw": "seman-\ntic\nHNSW", "hybrid": "hybrid"}


def write_plot(path, out):
    corpora, label = out["corpora"], out["corpus_label"]
    kinds = [q["kind"] for q in out["queries"]]
    with h.figure(path, len(corpora) + 1, (6 * (len(corpora) + 1), 5)) as fa:
        if fa is None:
            return
        fig, axes = fa
        for ax, c in zip(axes, corpora):
            raw = out["raw"][c]
            for i, meth in enumerate(METHODS):
                lat = raw[meth]["latency_ms"]
                for kind, marker, colour in (("mixed", "o", "C0"), ("common", "x", "C3")):
                    ys = [y for y, k in zip(lat, kinds) if k == kind]
                    xs = i + (np.random.default_rng(i).random(len(ys)) - 0.5) * 0.4
                    ax.scatter(xs, ys, s=10, marker=marker, alpha=0.6, color=colour,
                               label=(f"{kind} queries" if i == 0 else None))
                ax.hlines(np.median(lat), i - 0.3, i + 0.3, color="black", lw=2,
                          label="p50" if i == 0 else None)
            sem = np.median(raw["semantic"]["latency_ms"])
            ax.axhline(sem * TARGET_RATIO, color="red", ls="--", lw=1,
                       label=f"{TARGET_RATIO:g}× semantic p50")
            ax.set_yscale("log")
            ax.set_xticks(range(len(METHODS)), [PLOT_LABEL[m] for m in METHODS], fontsize=8)
            ax.set_ylabel("ms per call (median of rounds)")
            ax.set_title(f"{label[c]} corpus ({out['corpus_rows'][c]:,} chunks): latency per query",
                         fontsize=10)
            ax.legend(fontsize=7, loc="best")
        ax = axes[-1]
        for ci, c in enumerate(corpora):
            rows = out["explains"][c]
            for key, marker, name in (("bm25_timing_off", "o", "BM25 budget 2000"),
                                      ("bm25_exhaustive", "^", "BM25 exhaustive"),
                                      ("ts_rank_cd", "s", "ts_rank_cd")):
                pts = [((r.get(key) or {}).get("scored"), (r.get(key) or {}).get("execution_ms"))
                       for r in rows]
                pts = [(x, y) for x, y in pts if x and y]
                if pts:
                    ax.scatter(*zip(*pts), s=14, marker=marker, color=f"C{ci}", alpha=0.7,
                               label=f"{label[c]}: {name}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("chunks scored by the lexical subplan (rows into its sort)")
        ax.set_ylabel("subplan execution, ms (EXPLAIN ANALYZE)")
        ax.set_title("lexical subplan time against chunks scored", fontsize=10)
        ax.legend(fontsize=7)
        fig.suptitle(f"Lexical branch speed: {out['data']['n_items']:,} chunks, Zipf "
                     f"{out['args']['zipf']:g} over {out['args']['vocab']:,} words, k=10, "
                     f"content_bm25 storage {out['args']['bm25_storage']}")


# --------------------------------------------------------------------------------------------

def params(p):
    p.add_argument("--rows", type=int, default=100_000, help="chunks (default 100000)")
    p.add_argument("--dim", type=int, default=384,
                   help="embedding dimensions (default 384, as tests/fixtures/legal_schema.sql)")
    p.add_argument("--chunks-per-parent", type=int, default=10)
    p.add_argument("--clusters", type=int, default=300)
    p.add_argument("--vocab", type=int, default=50_000, help="distinct words (default 50000)")
    p.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent (default 1.1)")
    p.add_argument("--min-words", type=int, default=60)
    p.add_argument("--max-words", type=int, default=150)
    p.add_argument("--mixed-queries", type=int, default=50)
    p.add_argument("--common-queries", type=int, default=15)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--warmup", type=int, default=5, help="warm-up queries (not timed)")
    p.add_argument("--repeats", type=int, default=3,
                   help="timed rounds per query; its latency is their median")
    p.add_argument("--explain-slow", type=int, default=8,
                   help="queries whose ts_rank_cd and exhaustive subplans are EXPLAINed")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--bm25-storage", default="main", choices=["extended", "main"],
                   help="storage of content_bm25 (default main, as the README recommends: it "
                        "keeps the tsvector in the row when it can; extended is PostgreSQL's "
                        "default for tsvector)")
    p.add_argument("--shared-buffers", default="1GB")
    p.add_argument("--maintenance-work-mem", default="1GB")
    p.add_argument("--reuse", action="store_true",
                   help="keep a database loaded by an earlier run with the same parameters")


def run(a):
    started = time.perf_counter()
    load_before = os.getloadavg()
    log(f"generating {a.rows} chunks, vocabulary {a.vocab}, Zipf {a.zipf} (seed {a.seed})")
    data = generate(a)
    cluster = h.Cluster(a.dir, {"shared_buffers": a.shared_buffers}, keep=a.keep)
    uri = cluster.start()
    corpora = [name for _, _, name in KINDS]
    try:
        dsn, build = prepare_database(uri, a, data)
        with psycopg.connect(dsn, autocommit=True) as conn:
            log("defining corpora (corpus_add_source refreshes the lexical statistics)")
            define_s = define_corpora(conn)
            prewarm(conn)
            qstats = {c: [query_statistics(conn, c, q["text"]) for q in data["queries"]]
                      for c in corpora}
            rows = {c: conn.execute(
                "SELECT documents FROM corpus.lexical_totals WHERE corpus = %s",
                [c]).fetchone()[0] for c in corpora}
            rank20_df = conn.execute(
                "SELECT df FROM corpus.lexical_stats WHERE corpus = %s AND term = %s",
                [corpora[0], data["vocab"][TOP_COMMON - 1]]).fetchone()[0]
        # every phase opens its sessions afresh; a backend keeps the library it loaded first
        library = {"timed": h.installed_build()}
        results = measure(dsn, data, corpora, a)
        log("EXPLAIN (ANALYZE, BUFFERS): where the time goes")
        library["explain"] = h.installed_build()
        explains = where_the_time_goes(dsn, data, corpora, a, qstats)
        log("nested statement durations (auto_explain)")
        library["profile"] = h.installed_build()
        profile = profiles(dsn, cluster.server_log, data, corpora, a)
        machine = machine_info(dsn)
    finally:
        if not a.keep:
            cluster.stop()
    library["end"] = h.installed_build()
    if len(set(library.values())) > 1:
        log(f"WARNING: the pg_corpus library was reinstalled during the run: {library}")
    log("offline: other candidate rules on the generated text")
    simulation = simulate_candidates(data, a)
    summary = summarise(results, data, corpora, a)
    label = {c: f"{(share or 1 - sum(s for _, s, _ in KINDS if s)) * 100:g}%"
             for _, share, c in KINDS}
    queries = []
    for qi, q in enumerate(data["queries"]):
        queries.append(dict(kind=q["kind"], text=q["text"], ranks=q["ranks"],
                            **{c: qstats[c][qi] for c in corpora}))
    out = dict(
        finished=h.now(),
        command=a.command,
        args={k: (os.path.relpath(v, ROOT) if k in ("dir", "raw", "markdown", "plot") and v
                  else v) for k, v in vars(a).items()},
        machine=machine, build_s=build, define_corpora_s=define_s,
        library_installed=library["timed"], library_by_phase=library,
        library_reinstalled_during_run=len(set(library.values())) > 1,
        load_before=" ".join(f"{x:.2f}" for x in load_before),
        load_after=" ".join(f"{x:.2f}" for x in os.getloadavg()),
        data=dict(n_items=data["n_items"], n_parents=data["n_parents"],
                  mean_words=data["mean_words"], top_word_share=float(data["probs"][0]),
                  df_rank20=rank20_df / rows[corpora[0]],
                  top_words=list(data["vocab"][:TOP_COMMON])),
        corpora=corpora, corpus_rows=rows, corpus_label=label, methods=METHODS,
        summary=summary, breakdown=breakdown(explains, corpora, data),
        profile=profile, profile_summary=profile_summary(profile, data),
        simulation=simulation,
        storage=explains["toast"], bm25_sql_example=explains["bm25_sql_example"],
        queries=queries,
        explains={c: explains[c] for c in corpora},
        raw={c: {m: dict(latency_ms=results[c][m]["latency_ms"],
                         latency_runs_ms=results[c][m]["latency_runs_ms"],
                         answers=results[c][m]["answers"]) for m in METHODS}
             for c in corpora})
    out["runtime_s"] = time.perf_counter() - started
    h.write_raw(a.raw, compact(out))
    if a.markdown:
        h.write_results_section(a.markdown, "bench/lexical_speed.py", results_markdown(out),
                                "Lexical branch speed")
    if a.plot:
        write_plot(Path(a.plot), out)
    log(f"done in {out['runtime_s'] / 60:.1f} min: {a.raw}, {a.markdown}, {a.plot}")
    print(results_markdown(out))


SPEC = h.Spec(name="lexical_speed", about=__doc__.split("\n\n")[0], run=run, params=params,
              outputs=h.page_outputs("lexical_speed", "lexical-speed"),
              smoke=["--rows", "3000", "--dim", "32", "--vocab", "2000", "--clusters", "20",
                     "--mixed-queries", "4", "--common-queries", "2", "--warmup", "1",
                     "--repeats", "1", "--explain-slow", "1", "--shared-buffers", "256MB",
                     "--maintenance-work-mem", "256MB"])

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
