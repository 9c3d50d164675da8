#!/usr/bin/env python3
"""Filtered approximate search: does the semantic branch starve, lose recall or slow down when a
corpus is a small slice of a shared table? (docs/filtered-ann.md)

    .venv/bin/python bench/filtered_ann.py                  # the committed run: 100k x 1024-d
    .venv/bin/python bench/filtered_ann.py --smoke          # a tiny one, outputs in bench/out/smoke/

What it does:
 1. starts a private cluster (bench/harness.py; .pgdata/bench-filtered_ann by default) with
    shared_buffers raised so that the table and the HNSW indexes fit, and creates a database with
    `CREATE EXTENSION vector; CREATE EXTENSION pg_corpus`;
 2. generates a seeded legal-schema database: `case_law` parents (--chunks-per-parent chunks
    each) whose `source_kind` cuts the table into slices of 1%, 5%, 20%, 50% and the rest (24%),
    and `precedent_chunks` with clustered, L2-normalised embeddings of low intrinsic dimension
    (topic centre -> parent -> chunk in a 32-d latent space, mapped to --dim dimensions; see
    bench/harness.py clustered_embeddings); loads them with binary COPY; builds the B-tree
    indexes, an HNSW index (vector_cosine_ops, m=16, ef_construction=64, serial build) and, for
    the sql_partial strategy only, one partial HNSW index per slice on a copy of source_kind
    denormalised into precedent_chunks;
 3. defines one corpus per slice (isolation {"source_kind": ...}) and one unfiltered corpus
    (isolation {}) over the same tables;
 4. for --queries query vectors (random chunks, perturbed), k=10, semantic mode, no per-parent cap,
    measures per corpus and strategy: latency, recall@10 against the exact top-10 (numpy over the
    corpus' items), rows returned and rows from outside the corpus. Strategies:
      ext_default    corpus.corpus_hybrid_search(..., mode => 'semantic'), default settings
      ext_hnsw       the same with pg_corpus.exact_search_max_rows = 0 (HNSW + iterative scan)
      ext_hnsw_nosort  ext_hnsw with SET enable_sort = off, so that the planner cannot trade
                     the index for a sort of the slice (what the HNSW path would cost if the
                     extension kept the planner on the index)
      ext_exact      corpus_hybrid_search with pg_corpus.exact_search_max_rows = 100000000
      sql_plain      the plain SQL a service would write (join + ORDER BY <=> LIMIT 40),
                     pgvector defaults: hnsw.ef_search = 40, no iterative scan
      sql_iterative  the same with SET hnsw.iterative_scan = relaxed_order
      sql_partial    the per-corpus index alternative: `WHERE c.source_kind = ...` on a copy of
                     the parent's source_kind denormalised into precedent_chunks, served by a
                     partial HNSW index per slice (a partial index cannot reference the parent
                     table), pgvector defaults
    Every strategy has its own warmed-up session; per query the (corpus, strategy) pairs run
    --repeats times, each round in a new shuffled order, so that machine noise hits all of them
    alike; a query's latency is the median of its runs;
 5. records EXPLAIN (ANALYZE, BUFFERS) of each subplan (the SQL corpus.corpus_explain prints, run
    under the SET LOCALs it prints) and of the plain SQL;
 6. writes bench/out/raw/filtered_ann.json (raw numbers, not committed), docs/filtered-ann.png, and the results
    section of docs/filtered-ann.md (between the `results:begin/end` markers; the hand-written
    reasoning around them is kept).

The plot needs matplotlib (bench/requirements.txt); without it the rest still runs.
The cluster is stopped at the end unless --keep; --reuse keeps a database loaded by an earlier
run with the same data parameters (the data is regenerated in memory from the seed either way).
"""
import json
import os
import re
import struct
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
from harness import gaussian, log, vec_text  # noqa: E402

ROOT = h.ROOT
DBNAME = "filtered_ann"

# source_kind -> share of the parents (the last one takes the rest), and the corpus over it.
SLICES = [("registry", 0.01, "slice1"),
          ("external_upload", 0.05, "slice5"),
          ("district_court", 0.20, "slice20"),
          ("internal_committee", 0.50, "slice50"),
          ("archive", None, None)]
UNFILTERED = "unfiltered"
LATENT_DIM = h.LATENT_DIM
STRATEGIES = {
    "ext_default": "corpus_hybrid_search, default settings",
    "ext_hnsw": "corpus_hybrid_search, exact_search_max_rows = 0 (HNSW + iterative scan)",
    "ext_hnsw_nosort": "the same with enable_sort = off: the planner cannot leave the index",
    "ext_exact": "corpus_hybrid_search, exact_search_max_rows = 1e8 (exact)",
    "sql_plain": "plain join + ORDER BY <=> LIMIT 40, pgvector defaults",
    "sql_iterative": "plain join + ORDER BY <=> LIMIT 40, hnsw.iterative_scan = relaxed_order",
    "sql_partial": "ORDER BY <=> LIMIT 40 on a denormalised source_kind with a partial HNSW "
                   "index per slice, pgvector defaults",
}
SESSION_SETTINGS = {
    "ext_default": [],
    "ext_hnsw": [("pg_corpus.exact_search_max_rows", "0")],
    "ext_hnsw_nosort": [("pg_corpus.exact_search_max_rows", "0"), ("enable_sort", "off")],
    "ext_exact": [("pg_corpus.exact_search_max_rows", "100000000")],
    "sql_plain": [],
    "sql_iterative": [("hnsw.iterative_scan", "relaxed_order")],
    "sql_partial": [],
}
SQL_LIMIT = 40          # what the service asks for: 4*k candidates, as the extension does
RECALL_TARGET, LATENCY_TARGET = 0.95, 2.0
TIE_EPS = 1e-6          # distances within this of the exact k-th count as ties (float32 sums)
REFERENCE = (UNFILTERED, "ext_hnsw")   # "an unfiltered search": HNSW over the whole table

COURTS = ["supreme", "district_jerusalem", "district_tel_aviv", "appeals_committee_center"]
AREAS = ["planning", "betterment_levy", "compensation", "expropriation"]


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------

def generate(a):
    """Seeded data: parents with a source_kind and a topic, chunks near their parent's topic,
    queries near random chunks. Everything is recomputed identically from the seed."""
    rng = np.random.default_rng(a.seed)
    n_parents = a.rows // a.chunks_per_parent
    n_items = n_parents * a.chunks_per_parent
    # parent -> source_kind: a random permutation cut into the slice shares
    kind_of = np.empty(n_parents, dtype=object)
    order = rng.permutation(n_parents)
    start = 0
    for kind, share, _ in SLICES:
        size = n_parents - start if share is None else round(share * n_parents)
        kind_of[order[start:start + size]] = kind
        start += size
    parent_cluster = rng.integers(a.clusters, size=n_parents)
    item_parent = np.repeat(np.arange(n_parents), a.chunks_per_parent)
    vecs, latent, embed = h.clustered_embeddings(rng, a.dim, a.clusters, parent_cluster, item_parent)
    # chunk text: 12-20 pseudo-words (always >= 50 characters: the searchable contract)
    syllables = [c + v for c in "bdfgklmnprstv" for v in "aeiou"]
    vocab = np.array(["".join(rng.choice(syllables, size=rng.integers(2, 5)))
                      for _ in range(2000)])
    words = vocab[rng.integers(len(vocab), size=(n_items, 20))]
    lengths = rng.integers(12, 21, size=n_items)
    content = [" ".join(words[i, :lengths[i]]) for i in range(n_items)]
    # queries: perturbed random chunks of the whole table (the same queries for every corpus)
    qrng = np.random.default_rng(a.seed + 1)
    picks = qrng.choice(n_items, size=a.queries, replace=False)
    queries = embed(latent[picks] + gaussian(qrng, a.queries, latent.shape[1], 0.4), qrng)
    return dict(n_parents=n_parents, n_items=n_items, kind_of=kind_of,
                parent_cluster=parent_cluster, item_parent=item_parent, vecs=vecs,
                content=content, queries=queries)


def data_params(a):
    """What the loaded database depends on (--reuse compares it); bump `generator` or `schema`
    when the generated data or the DDL changes."""
    return dict(rows=a.rows, dim=a.dim, chunks_per_parent=a.chunks_per_parent,
                clusters=a.clusters, seed=a.seed, slices=[[k, s] for k, s, _ in SLICES],
                generator=5, schema=2)


SCHEMA = """
CREATE TABLE case_law (
    id            bigint PRIMARY KEY,
    case_number   text NOT NULL,
    case_name     text,
    court         text,
    source_kind   text NOT NULL,
    practice_area text
);
CREATE TABLE precedent_chunks (
    id          bigint NOT NULL,
    case_law_id bigint NOT NULL,
    chunk_index int NOT NULL,
    page_number int,
    source_kind text NOT NULL,   -- copy of case_law.source_kind, only for the partial indexes
    content     text NOT NULL,
    content_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED,
    embedding   vector({dim})
);
CREATE TABLE bench_meta (params jsonb NOT NULL);
"""


def copy_chunks(conn, data):
    """Binary COPY: pgvector's binary form is int16 dim, int16 unused, float4[] big-endian."""
    dim = data["vecs"].shape[1]
    head = struct.Struct(">hiqiqiiii")
    kinds = {k: k.encode() for k, _, _ in SLICES}
    vec_head = struct.pack(">ihh", 4 + 4 * dim, dim, 0)
    with conn.cursor() as cur, cur.copy(
            "COPY precedent_chunks (id, case_law_id, chunk_index, page_number, source_kind, "
            "content, embedding) FROM STDIN (FORMAT binary)") as cp:
        cp.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
        n, per_parent = data["n_items"], data["n_items"] // data["n_parents"]
        for lo in range(0, n, 5000):
            hi = min(lo + 5000, n)
            be = data["vecs"][lo:hi].astype(">f4")
            parts = []
            for i in range(lo, hi):
                text = data["content"][i].encode()
                chunk = i % per_parent
                parent = int(data["item_parent"][i])
                kind = kinds[data["kind_of"][parent]]
                parts.append(head.pack(7, 8, i + 1, 8, parent + 1, 4, chunk, 4, chunk // 2 + 1))
                parts.append(struct.pack(">i", len(kind)) + kind)
                parts.append(struct.pack(">i", len(text)) + text)
                parts.append(vec_head + be[i - lo].tobytes())
            cp.write(b"".join(parts))
        cp.write(struct.pack(">h", -1))


def load(conn, a, data):
    """Tables, binary COPY, indexes, ANALYZE; returns build timings in seconds."""
    timings = {}
    t = time.perf_counter()
    conn.execute(SCHEMA.format(dim=a.dim))
    with conn.cursor() as cur, cur.copy("COPY case_law (id, case_number, case_name, court, "
                                        "source_kind, practice_area) FROM STDIN") as cp:
        for p in range(data["n_parents"]):
            cp.write_row([p + 1, f"{1000 + p}/{p % 25:02d}", f"case {p + 1}",
                          COURTS[p % len(COURTS)], data["kind_of"][p], AREAS[p % len(AREAS)]])
    copy_chunks(conn, data)
    timings["copy_s"] = time.perf_counter() - t
    t = time.perf_counter()
    conn.execute("ALTER TABLE precedent_chunks ADD PRIMARY KEY (id), "
                 "ADD FOREIGN KEY (case_law_id) REFERENCES case_law (id)")
    conn.execute("CREATE INDEX case_law_source_kind_idx ON case_law (source_kind)")
    conn.execute("CREATE INDEX precedent_chunks_case_law_id_idx "
                 "ON precedent_chunks (case_law_id)")
    timings["btree_s"] = time.perf_counter() - t
    t = time.perf_counter()
    # pgvector 0.8.0's parallel HNSW build carries a CVE: build serially.
    conn.execute("SET max_parallel_maintenance_workers = 0")
    conn.execute(f"SET maintenance_work_mem = '{a.maintenance_work_mem}'")
    conn.execute("CREATE INDEX precedent_chunks_embedding_idx ON precedent_chunks "
                 "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)")
    timings["hnsw_s"] = time.perf_counter() - t
    t = time.perf_counter()
    for kind, _, corpus in SLICES:
        if corpus:
            conn.execute(f"CREATE INDEX precedent_chunks_embedding_{corpus}_idx "
                         "ON precedent_chunks USING hnsw (embedding vector_cosine_ops) "
                         f"WITH (m = 16, ef_construction = 64) WHERE source_kind = '{kind}'")
    timings["partial_hnsw_s"] = time.perf_counter() - t
    t = time.perf_counter()
    conn.execute("VACUUM ANALYZE case_law")
    conn.execute("VACUUM ANALYZE precedent_chunks")
    timings["analyze_s"] = time.perf_counter() - t
    conn.execute("INSERT INTO bench_meta VALUES (%s)", [json.dumps(data_params(a))])
    return timings


def prepare_database(uri, a, data):
    """Create (or, with --reuse, keep) the database; returns (dsn, build timings or None)."""
    dsn = make_conninfo(uri, dbname=DBNAME)
    with psycopg.connect(uri, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                               [DBNAME]).fetchone()
    if a.reuse and exists:
        with psycopg.connect(dsn, autocommit=True) as conn:
            try:
                stored = conn.execute("SELECT params FROM bench_meta").fetchone()[0]
            except psycopg.Error:
                stored = None
        if stored == json.loads(json.dumps(data_params(a))):
            log(f"reusing database {DBNAME} (pg_corpus recreated: the installed build may be new)")
            with psycopg.connect(dsn, autocommit=True) as conn:
                h.recreate_extension(conn)
            return dsn, None
        log("stored database has other parameters: rebuilding it")
    with h.fresh_database(uri, DBNAME) as conn:
        log(f"loading {data['n_items']} chunks of {a.dim} dimensions")
        timings = load(conn, a, data)
    log("build: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    return dsn, timings


def define_corpora(conn):
    """One corpus per slice plus the unfiltered one, all over precedent_chunks / case_law."""
    corpora = [(name, {"source_kind": kind}) for kind, _, name in SLICES if name]
    corpora.append((UNFILTERED, {}))
    for name, isolation in corpora:
        conn.execute("SELECT corpus.corpus_drop(%s, if_exists => true)", [name])
        conn.execute("SELECT corpus.corpus_create(%s, isolation => %s::jsonb)",
                     [name, json.dumps(isolation)])
        conn.execute(
            "SELECT corpus.corpus_add_source(%s, 'chunks', 'precedent_chunks', "
            "text_column => 'content', tsv_column => 'content_tsv', "
            "embedding_column => 'embedding', parent_table => 'case_law', "
            "parent_fk => 'case_law_id', "
            "locator => '{\"case_number\": \"parent.case_number\", \"page\": \"page_number\"}')",
            [name])
    return [name for name, _ in corpora]


def prewarm(conn):
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    conn.execute("""
        SELECT pg_prewarm(c.oid) FROM pg_class c
        WHERE c.oid IN ('case_law'::regclass, 'precedent_chunks'::regclass,
                        (SELECT reltoastrelid FROM pg_class
                          WHERE oid = 'precedent_chunks'::regclass))
           OR c.oid IN (SELECT indexrelid FROM pg_index
                         WHERE indrelid IN ('case_law'::regclass, 'precedent_chunks'::regclass))
    """)


# --------------------------------------------------------------------------------------------
# Ground truth
# --------------------------------------------------------------------------------------------

def members(data, corpus):
    if corpus == UNFILTERED:
        return np.ones(data["n_items"], dtype=bool)
    kind = next(k for k, _, name in SLICES if name == corpus)
    return data["kind_of"][data["item_parent"]] == kind


def exact_truth(data, mask, k):
    """Per query: (ids of the exact top-k in the corpus, exact k-th distance), float64."""
    ids = np.nonzero(mask)[0]
    sub = data["vecs"][ids].astype(np.float64)
    out = []
    for q in data["queries"].astype(np.float64):
        d = 1.0 - (sub @ q) / (np.linalg.norm(sub, axis=1) * np.linalg.norm(q))
        top = np.argsort(d, kind="stable")[:k]
        out.append((set((ids[top] + 1).tolist()), float(d[top[-1]])))
    return out


def cosine_distance(data, ids, q):
    v = data["vecs"][np.asarray(ids, dtype=np.int64) - 1].astype(np.float64)
    q = q.astype(np.float64)
    return 1.0 - (v @ q) / (np.linalg.norm(v, axis=1) * np.linalg.norm(q))


def recall_at_k(data, got_ids, q, truth, k):
    """|returned ∩ exact top-k| / k, where a returned item whose distance ties the exact k-th
    (within TIE_EPS) counts as a true neighbour."""
    if not got_ids:
        return 0.0
    true_ids, kth = truth
    d = cosine_distance(data, got_ids, q)
    hits = sum(1 for i, di in zip(got_ids, d) if i in true_ids or di <= kth + TIE_EPS)
    return min(hits, k) / k


# --------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------

def kind_of_corpus(corpus):
    return next((k for k, _, name in SLICES if name == corpus), None)


def plain_sql(corpus, strategy="sql_plain"):
    """The SQL a Python service would write: the parent join filters the slice; or, for
    sql_partial, the denormalised column that a partial index per slice can serve."""
    select = "SELECT c.id, c.embedding <=> %(v)s::vector AS distance FROM precedent_chunks c"
    order = f"ORDER BY c.embedding <=> %(v)s::vector LIMIT {SQL_LIMIT}"
    if corpus == UNFILTERED:
        return f"{select} {order}"
    if strategy == "sql_partial":
        return f"{select} WHERE c.source_kind = %(kind)s {order}"
    return (f"{select} JOIN case_law p ON p.id = c.case_law_id "
            f"WHERE p.source_kind = %(kind)s {order}")


SEARCH_SQL = ("SELECT item_id::bigint FROM corpus.corpus_hybrid_search(%(corpus)s, %(v)s::vector, "
              "NULL, k => %(k)s, mode => 'semantic', max_per_parent => 0)")


def run_one(conn, strategy, corpus, qtext, k):
    """Run one search; returns the ids in the order that counts for top-k."""
    if strategy.startswith("ext_"):
        sql, params = SEARCH_SQL, {"corpus": corpus, "v": qtext, "k": k}
    else:
        sql, params = plain_sql(corpus, strategy), {"v": qtext, "kind": kind_of_corpus(corpus)}
    rows = conn.execute(sql, params, prepare=False).fetchall()
    if strategy.startswith("sql_"):
        # the service's top-k: its candidates by distance (relaxed_order may return them
        # slightly out of order; pgvector's docs re-sort them the same way)
        rows = sorted(rows, key=lambda r: (r[1], r[0]))
    return [r[0] for r in rows]


# --------------------------------------------------------------------------------------------
# Plans
# --------------------------------------------------------------------------------------------

def ann_indexes(node):
    """Names of the HNSW indexes (full or partial) a plan scans."""
    name = node.get("Index Name") or ""
    own = [name] if name.startswith("precedent_chunks_embedding") else []
    return own + [n for c in node.get("Plans", []) for n in ann_indexes(c)]


def explain(conn, sql, params, settings=()):
    """EXPLAIN (ANALYZE, BUFFERS) in text and JSON, under SET LOCAL settings."""
    out = {}
    with conn.transaction():
        for name, value in settings:
            conn.execute(f"SET LOCAL {name} = {value}")
        for fmt in ("TEXT", "JSON"):
            rows = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT {fmt}) {sql}",
                                params, prepare=False).fetchall()
            if fmt == "TEXT":   # the query vector's literal shortened
                out["text"] = re.sub(r"'\[[^\]]*\]'::vector", "'[query vector]'::vector",
                                     "\n".join(r[0] for r in rows))
            else:
                doc = rows[0][0]
                doc = json.loads(doc) if isinstance(doc, str) else doc
                out["execution_ms"] = doc[0]["Execution Time"]
                out["planning_ms"] = doc[0]["Planning Time"]
                out["summary"] = h.plan_summary(doc[0]["Plan"])
                out["ann_indexes"] = ann_indexes(doc[0]["Plan"])
                out["uses_hnsw"] = bool(out["ann_indexes"])
                out["plan_rows"] = doc[0]["Plan"]["Plan Rows"]
    return out


def extension_subplan(conn, corpus, qvec, k):
    """The semantic subplan corpus_explain prints: (strategy, SET LOCALs, SQL, params)."""
    return h.explained_subplan(conn, corpus, qvec, None, k, "semantic", "semantic")


def slice_estimate(conn, exact_sql, values):
    """The planner's estimate of the slice, from the FROM/WHERE of the exact subplan (the same
    FROM/WHERE the extension's slice estimate plans)."""
    inner = exact_sql.split("FROM (\n", 1)[1].rsplit("\nOFFSET 0)", 1)[0]
    inner = re.sub(r"^SELECT .*?\nFROM", "SELECT 1\nFROM", inner, count=1, flags=re.S)
    used = {m for m in re.findall(r"%\((p\d+)\)s", inner)}
    doc = conn.execute(f"EXPLAIN (FORMAT JSON) {inner}",
                       {k: v for k, v in values.items() if k in used}).fetchone()[0]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    return doc[0]["Plan"]["Plan Rows"], inner


# --------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------

def measure(dsn, data, corpora, a):
    conns = {s: h.session(dsn, SESSION_SETTINGS[s]) for s in STRATEGIES}
    qtexts = [vec_text(q) for q in data["queries"]]
    truths = {c: exact_truth(data, members(data, c), a.k) for c in corpora}
    in_corpus = {c: set((np.nonzero(members(data, c))[0] + 1).tolist()) for c in corpora}
    tasks = [(c, s) for c in corpora for s in STRATEGIES]
    rng = np.random.default_rng(a.seed + 2)

    log(f"warm-up: {a.warmup} queries x {len(tasks)} (corpus, strategy) pairs")
    build = h.installed_build()     # the library every session has loaded from now on
    for qi in range(a.warmup):
        for c, s in tasks:
            run_one(conns[s], s, c, qtexts[qi % len(qtexts)], a.k)

    results = {c: {s: dict(latency_ms=[], latency_runs_ms=[], recall=[], rows=[], foreign=[])
                   for s in STRATEGIES} for c in corpora}
    t0 = time.perf_counter()
    for qi, (q, qtext) in enumerate(zip(data["queries"], qtexts)):
        calls = {(c, s): (lambda c=c, s=s: run_one(conns[s], s, c, qtext, a.k)) for c, s in tasks}
        times, answers = h.interleave(calls, a.repeats, rng)   # the same answer every time: check one
        for (c, s), ids in answers.items():
            r = results[c][s]
            r["latency_runs_ms"].append(times[(c, s)])
            r["latency_ms"].append(float(np.median(times[(c, s)])))
            r["rows"].append(len(ids))
            r["foreign"].append(sum(1 for i in ids if i not in in_corpus[c]))
            r["recall"].append(recall_at_k(data, ids[:a.k], q, truths[c][qi], a.k))
        if (qi + 1) % 10 == 0:
            log(f"  {qi + 1}/{len(qtexts)} queries ({time.perf_counter() - t0:.0f} s)")

    log("EXPLAIN (ANALYZE, BUFFERS) of every subplan")
    plans, estimates = {}, {}
    q0 = data["queries"][0]
    for c in corpora:
        plans[c] = {}
        for s in STRATEGIES:
            conn = conns[s]
            if s.startswith("ext_"):
                strategy, settings, sql, values = extension_subplan(conn, c, q0, a.k)
                p = explain(conn, sql, values, settings)
                p.update(strategy=strategy,
                         settings=dict(SESSION_SETTINGS[s]) | dict(settings))
                if strategy == "exact" and c not in estimates:
                    est, _ = slice_estimate(conn, sql, values)
                    estimates[c] = est
            else:
                p = explain(conn, plain_sql(c, s), {"v": qtexts[0], "kind": kind_of_corpus(c)})
                p.update(strategy="hnsw" if p["uses_hnsw"] else "exact",
                         settings=dict(SESSION_SETTINGS[s]))
            plans[c][s] = p
    for c in corpora:   # corpora no strategy ran exact for (forced exact always does)
        estimates.setdefault(c, None)
    # what the extension would see without the min-length condition (isolation only)
    iso_estimates = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for c in corpora:
            kind = kind_of_corpus(c)
            sql = ("SELECT 1 FROM precedent_chunks i JOIN case_law p ON p.id = i.case_law_id "
                   "WHERE i.embedding IS NOT NULL"
                   + (" AND p.source_kind = %(kind)s" if kind else ""))
            doc = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", {"kind": kind}).fetchone()[0]
            doc = json.loads(doc) if isinstance(doc, str) else doc
            iso_estimates[c] = doc[0]["Plan"]["Plan Rows"]
    for conn in conns.values():
        conn.close()
    return results, plans, estimates, iso_estimates, build


def summarise(results, corpora, k):
    ref_c, ref_s = REFERENCE
    ref = float(np.percentile(results[ref_c][ref_s]["latency_ms"], 50))
    plain_ref = float(np.percentile(results[UNFILTERED]["sql_plain"]["latency_ms"], 50))
    out = {}
    for c in corpora:
        out[c] = {}
        for s in STRATEGIES:
            r = results[c][s]
            lat = np.array(r["latency_ms"])
            wanted = k if s.startswith("ext_") else SQL_LIMIT
            p50 = float(np.percentile(lat, 50))
            out[c][s] = dict(
                p50_ms=p50, p95_ms=float(np.percentile(lat, 95)), mean_ms=float(lat.mean()),
                # against the unfiltered search of the same kind: the extension's, or plain SQL's
                ratio_p50=p50 / (ref if s.startswith("ext_") else plain_ref),
                ratio_p50_ext=p50 / ref, ratio_p50_plain=p50 / plain_ref,
                recall_mean=float(np.mean(r["recall"])), recall_min=float(np.min(r["recall"])),
                rows_min=int(np.min(r["rows"])), rows_mean=float(np.mean(r["rows"])),
                rows_wanted=wanted, short_queries=int(sum(n < wanted for n in r["rows"])),
                foreign_rows=int(np.sum(r["foreign"])))
    return out, ref, plain_ref


def exact_cost_model(summary, sizes, ref):
    """Exact search cost per slice row, from the forced-exact p50s of the two smallest slices
    (there the slice is reached through the B-tree indexes, as the exact path intends), and
    the slice sizes where exact search stops meeting the latency target and stops being faster
    than the HNSW path kept on the index (linear interpolation between measured slices)."""
    by_size = sorted(summary, key=lambda c: sizes[c])
    (c1, c2) = by_size[:2]
    b = (summary[c2]["ext_exact"]["p50_ms"] - summary[c1]["ext_exact"]["p50_ms"]) / (
        sizes[c2] - sizes[c1])
    a = summary[c1]["ext_exact"]["p50_ms"] - b * sizes[c1]
    within = (LATENCY_TARGET * ref - a) / b if b > 0 else float("inf")
    crossover = None
    for lo, hi in zip(by_size, by_size[1:]):
        d_lo = summary[lo]["ext_exact"]["p50_ms"] - summary[lo]["ext_hnsw_nosort"]["p50_ms"]
        d_hi = summary[hi]["ext_exact"]["p50_ms"] - summary[hi]["ext_hnsw_nosort"]["p50_ms"]
        if d_lo <= 0 < d_hi:
            crossover = sizes[lo] + (sizes[hi] - sizes[lo]) * (-d_lo) / (d_hi - d_lo)
            break
        if d_lo > 0 and lo == by_size[0]:
            crossover = 0.0         # HNSW is faster even at the smallest slice
            break
    return dict(fit_slices=[c1, c2], intercept_ms=a, ms_per_1000_rows=b * 1000,
                rows_within_target=within, crossover_rows=crossover)


# --------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------

SETTINGS = ("shared_buffers", "jit", "max_parallel_workers_per_gather", "work_mem", "hnsw.ef_search",
            "hnsw.iterative_scan", "hnsw.max_scan_tuples", "pg_corpus.exact_search_max_rows",
            "pg_corpus.ann_max_scan_tuples")


def machine_info(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        info = h.machine(conn, SETTINGS)
        info["sizes"] = dict(conn.execute("""
            SELECT 'precedent_chunks', pg_size_pretty(pg_table_size('precedent_chunks'))
            UNION ALL
            SELECT 'hnsw_full', pg_size_pretty(pg_relation_size('precedent_chunks_embedding_idx'))
            UNION ALL
            SELECT 'hnsw_partial', pg_size_pretty(sum(pg_relation_size(indexrelid)))
              FROM pg_index JOIN pg_class ON pg_class.oid = indexrelid
             WHERE relname LIKE 'precedent\\_chunks\\_embedding\\_slice%'
        """).fetchall())
    return info


SHORT = {"ext_default": "extension, default", "ext_hnsw": "extension, HNSW forced",
         "ext_hnsw_nosort": "extension, HNSW forced + enable_sort off",
         "ext_exact": "extension, exact forced", "sql_plain": "plain SQL",
         "sql_iterative": "plain SQL + iterative",
         "sql_partial": "plain SQL, partial index per slice"}


def path_label(plan):
    """What the plan really did: the HNSW index or a scan of the slice (exact)."""
    if not plan["uses_hnsw"]:
        return "exact"
    full = "precedent_chunks_embedding_idx"
    return "HNSW" if full in plan["ann_indexes"] else "partial HNSW"


def check(s, row, k):
    fails = []
    if row["recall_mean"] < RECALL_TARGET:
        fails.append("recall")
    if s.startswith("ext_") and row["rows_min"] < k:
        fails.append("rows")
    if s.startswith("sql_") and row["rows_min"] < SQL_LIMIT:
        fails.append("rows")
    if row["ratio_p50"] > LATENCY_TARGET:
        fails.append("latency")
    return "ok" if not fails else ", ".join(fails)


def results_markdown(out):
    a, m, summary = out["args"], out["machine"], out["summary"]
    sizes, label = out["corpus_rows"], out["corpus_label"]
    lines = [
        f"Run of {out['finished']} — {out['data']['n_items']:,} chunks × {a['dim']} dimensions "
        f"({out['data']['n_parents']:,} parents × {a['chunks_per_parent']}), "
        f"{a['clusters']} clusters, {a['queries']} queries, k = {a['k']}, semantic mode, "
        "`max_per_parent => 0`.",
        "",
        "Reproduce (the run took " + f"{out['runtime_s'] / 60:.0f} min"
        + (", loading and index builds included" if out["build_s"] else
           ", on a database kept from an earlier run with the same parameters") + "):",
        "",
        "```sh",
        out["command"],
        "```",
        "",
    ]
    if out["build_s"]:
        b = out["build_s"]
        lines += [f"Load and build: binary COPY {b['copy_s']:.0f} s, HNSW index (serial) "
                  f"{b['hnsw_s']:.0f} s, partial HNSW indexes {b['partial_hnsw_s']:.0f} s.", ""]
    lines += [
        f"Machine: {m.get('cpu', '?')}, {m['cpus']} cores, {m.get('ram_gb', '?')} GB RAM; "
        f"PostgreSQL {m['postgres']}, pgvector {m['extensions'].get('vector')}, "
        f"pg_corpus {m['extensions'].get('pg_corpus')} (release build installed "
        f"{out['build_in_use']}, work tree at {m.get('commit', '?')}"
        + ("" if out["build_in_use"] == out["build_at_end"] else
           f"; a new build was installed during the run ({out['build_at_end']}), the timed "
           "sessions kept the one they had loaded") + "); "
        f"shared_buffers {m['settings'].get('shared_buffers')}, "
        f"jit {m['settings'].get('jit')}, "
        f"max_parallel_workers_per_gather {m['settings'].get('max_parallel_workers_per_gather')}. "
        f"Table (heap + TOAST) {m['sizes'].get('precedent_chunks')}, HNSW index "
        f"{m['sizes'].get('hnsw_full')}, the partial HNSW indexes together "
        f"{m['sizes'].get('hnsw_partial')}; all prewarmed into shared buffers. "
        f"Load average {out['load_before']} before, {out['load_after']} after. The machine has "
        "two cores and other work may run on it concurrently: latencies are wall-clock from the "
        "client (local socket), every strategy ran in its own warmed-up session, each query "
        f"ran {a['repeats']} rounds of all (corpus, strategy) pairs, every round in a new "
        "shuffled order, so noise hits all of them alike, and a query's latency is the median "
        "of its runs; compare ratios rather than absolute milliseconds.",
        "",
        "The ratio column compares with \"an unfiltered search\" of the same kind, measured in "
        "the same run: for the extension, the unfiltered corpus on the HNSW path (p50 "
        f"{out['reference_p50_ms']:.1f} ms); for plain SQL, `ORDER BY <=> LIMIT {SQL_LIMIT}` "
        f"over the whole table (p50 {out['plain_reference_p50_ms']:.1f} ms). The difference "
        "between the two is the extension's fixed cost per call (catalog, slice estimate, "
        "fusion, final fetch).",
        "",
        "| slice (chunks) | strategy | path | p50 ms | p95 ms | × unfiltered | recall@10 "
        "(min) | min rows | targets |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for c in summary:
        for s in STRATEGIES:
            r, p = summary[c][s], out["plans"][c][s]
            rows = f"{r['rows_min']}/{r['rows_wanted']}"
            lines.append(
                f"| {label[c]} ({sizes[c]:,}) | {SHORT[s]} | {path_label(p)} | "
                f"{r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['ratio_p50']:.1f} | "
                f"{r['recall_mean']:.3f} ({r['recall_min']:.1f}) | {rows} | "
                f"{check(s, r, a['k'])} |")
    lines += [
        "",
        f"Targets (the issue): recall@10 ≥ {RECALL_TARGET}, always k rows "
        f"({SQL_LIMIT} for the plain SQL, which asks for {SQL_LIMIT}), p50 ≤ "
        f"{LATENCY_TARGET:g}× unfiltered. Recall is |returned ∩ exact top-10| / 10, the exact "
        "top-10 computed by numpy (float64) over the corpus' chunks; for the plain SQL it is the "
        f"recall of the 10 nearest of its ≤ {SQL_LIMIT} rows. Rows from outside the corpus: "
        f"{sum(r['foreign_rows'] for c in summary for r in summary[c].values())} in all runs.",
        "",
        "The extension's slice estimate (what it compares with "
        "`pg_corpus.exact_search_max_rows`) against the real slice size:",
        "",
        "| slice | chunks | planner estimate used by the extension | estimate with the "
        "isolation predicate only | default strategy |",
        "|---|---:|---:|---:|---|",
    ]
    for c in summary:
        est = out["slice_estimates"].get(c)
        lines.append(f"| {label[c]} | {sizes[c]:,} | "
                     f"{'?' if est is None else f'{est:,.0f}'} | "
                     f"{out['isolation_estimates'][c]:,.0f} | "
                     f"{out['plans'][c]['ext_default']['strategy']} |")
    fit = out["exact_cost_model"]
    cross = fit["crossover_rows"]
    lines += [
        "",
        f"Exact search cost, from the forced-exact p50s of the {label[fit['fit_slices'][0]]} "
        f"and {label[fit['fit_slices'][1]]} slices (reached through the B-tree indexes): "
        f"{fit['intercept_ms']:.1f} ms + {fit['ms_per_1000_rows']:.2f} ms per 1,000 slice "
        f"rows, so exact search stays within {LATENCY_TARGET:g}× unfiltered up to about "
        f"{max(fit['rows_within_target'], 0):,.0f} slice rows; it is faster than the HNSW path "
        "kept on the index (enable_sort off) up to about "
        + ("? rows (no crossover between the measured slices)" if cross is None
           else f"{cross:,.0f} slice rows") + ".",
        "",
        "Plans of the first query (EXPLAIN ANALYZE; full text in the JSON):",
        "",
    ]
    for c in summary:
        for s in STRATEGIES:
            p = out["plans"][c][s]
            sets = ", ".join(f"{k}={v}" for k, v in p["settings"].items())
            lines.append(f"- {label[c]}, {SHORT[s]}: {p['strategy']}"
                         + (f" [{sets}]" if sets else "")
                         + f", {p['execution_ms']:.1f} ms — "
                         + " → ".join(x.strip() for x in p["summary"][:4]))
    return "\n".join(lines)


def write_plot(path, out):
    summary, label = out["summary"], out["corpus_label"]
    corpora, strategies = list(summary), list(STRATEGIES)
    x = np.arange(len(corpora))
    width = 0.8 / len(strategies)
    with h.figure(path, 3, (16, 6), rect=(0, 0.1, 1, 1)) as fa:
        if fa is None:
            return
        fig, axes = fa
        panels = [("p50 latency, ms (bar) and p95 (tick), log scale", "p50_ms"),
                  ("mean recall@10", "recall_mean"),
                  ("fewest rows returned / rows asked for", "rows_frac")]
        for ax, (title, key) in zip(axes, panels):
            for i, s in enumerate(strategies):
                r = [summary[c][s] for c in corpora]
                vals = [v["rows_min"] / v["rows_wanted"] if key == "rows_frac" else v[key]
                        for v in r]
                xs = x + (i - (len(strategies) - 1) / 2) * width
                ax.bar(xs, vals, width, label=SHORT[s])
                if key == "p50_ms":
                    ax.scatter(xs, [v["p95_ms"] for v in r], marker="_", color="black", s=60,
                               zorder=3)
            ax.set_xticks(x, [f"{label[c]}\n({out['corpus_rows'][c]:,})" for c in corpora])
            ax.set_title(title, fontsize=10)
            if key == "p50_ms":
                ax.set_yscale("log")
                ax.axhline(out["reference_p50_ms"] * LATENCY_TARGET, color="red", ls="--", lw=1,
                           label=f"{LATENCY_TARGET:g}× the extension's unfiltered search")
            elif key == "recall_mean":
                low = min(v["recall_mean"] for c in corpora for v in summary[c].values())
                ax.set_ylim(min(0.9, np.floor(low * 10) / 10), 1.005)
                ax.axhline(RECALL_TARGET, color="red", ls="--", lw=1)
            else:
                ax.set_ylim(0, 1.05)
                ax.axhline(1.0, color="red", ls="--", lw=1)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=9)
        fig.suptitle(f"Filtered ANN: {out['data']['n_items']:,} chunks × {out['args']['dim']}-d, "
                     f"k={out['args']['k']}, {out['args']['queries']} queries per cell")


# --------------------------------------------------------------------------------------------

def params(p):
    p.add_argument("--rows", type=int, default=100_000, help="chunks (default 100000)")
    p.add_argument("--dim", type=int, default=1024, help="dimensions (default 1024)")
    p.add_argument("--chunks-per-parent", type=int, default=10)
    p.add_argument("--clusters", type=int, default=300)
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--warmup", type=int, default=5, help="warm-up queries (not timed)")
    p.add_argument("--repeats", type=int, default=3,
                   help="timed runs per query and strategy; its latency is their median")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--shared-buffers", default="4GB",
                   help="enough for the table and all HNSW indexes (default 4GB)")
    p.add_argument("--maintenance-work-mem", default="2GB")
    p.add_argument("--reuse", action="store_true",
                   help="keep a database loaded by an earlier run with the same parameters")
    p.add_argument("--render-only", action="store_true",
                   help="measure nothing: rewrite the markdown section and the plot from --raw")


def write_markdown(path, out):
    h.write_results_section(path, "bench/filtered_ann.py", results_markdown(out), "Filtered approximate search")


def run(a):
    if a.render_only:
        out = json.loads(Path(a.raw).read_text())
        write_markdown(a.markdown, out)
        write_plot(Path(a.plot), out)
        return
    started = time.perf_counter()
    load_before = os.getloadavg()
    log(f"generating {a.rows} x {a.dim} (seed {a.seed})")
    data = generate(a)
    cluster = h.Cluster(a.dir, {"shared_buffers": a.shared_buffers}, keep=a.keep)
    uri = cluster.start()
    try:
        dsn, build_times = prepare_database(uri, a, data)
        with psycopg.connect(dsn, autocommit=True) as conn:
            corpora = define_corpora(conn)
            prewarm(conn)
        results, plans, estimates, iso_estimates, build = measure(dsn, data, corpora, a)
        machine = machine_info(dsn)
    finally:
        if not a.keep:
            cluster.stop()
    summary, ref, plain_ref = summarise(results, corpora, a.k)
    sizes = {c: int(members(data, c).sum()) for c in corpora}
    label = {c: "100%" if c == UNFILTERED else
             f"{next(s for _, s, n in SLICES if n == c) * 100:g}%" for c in corpora}
    out = dict(
        finished=h.now(),
        command=a.command, args=vars(a), machine=machine, build_s=build_times,
        build_in_use=build, build_at_end=h.installed_build(),
        load_before=" ".join(f"{x:.2f}" for x in load_before),
        load_after=" ".join(f"{x:.2f}" for x in os.getloadavg()),
        data=dict(n_items=data["n_items"], n_parents=data["n_parents"]),
        corpus_rows=sizes, corpus_label=label, strategies=STRATEGIES,
        reference=list(REFERENCE), reference_p50_ms=ref, plain_reference_p50_ms=plain_ref,
        summary=summary, slice_estimates=estimates, isolation_estimates=iso_estimates,
        exact_cost_model=exact_cost_model(summary, sizes, ref),
        plans=plans, raw=results)
    out["runtime_s"] = time.perf_counter() - started
    h.write_raw(a.raw, out)
    write_markdown(a.markdown, out)
    write_plot(Path(a.plot), out)
    log(f"done in {out['runtime_s'] / 60:.1f} min: {a.raw}, {a.markdown}, {a.plot}")
    print(results_markdown(out))


SPEC = h.Spec(name="filtered_ann", about=__doc__.split("\n\n")[0], run=run, params=params,
              outputs=h.page_outputs("filtered_ann", "filtered-ann"),
              smoke=["--rows", "3000", "--dim", "32", "--clusters", "20", "--queries", "4",
                     "--warmup", "1", "--repeats", "1", "--shared-buffers", "256MB",
                     "--maintenance-work-mem", "256MB"])

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
