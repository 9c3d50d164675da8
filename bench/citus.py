#!/usr/bin/env python3
r"""Citus against one node: the same legal rows in a single-node database and on a
Citus coordinator with two workers (all on this machine), searches of every mode interleaved,
p50 latency per system and their ratio, and the work each search gives the shards.
(docs/citus.md)

    .venv/bin/python bench/citus.py                          # 2,000 cases (about 12k chunks), 8 and 32 shards
    .venv/bin/python bench/citus.py --smoke                  # 50 cases, 4 shards, outputs in bench/out/smoke/

What it does:
 1. starts a Citus cluster (tests/integration/citus_support.py: scripts/citus_cluster.sh,
    coordinator + 2 workers on loopback, in --citus-dir) and a single-node cluster
    (bench/harness.py, --single-dir); Citus must be installed (scripts/citus.sh);
 2. generates the legal rows with the integration tests' generator (tests/integration/
    conftest.py generate_legal_data: --cases parents, their chunks and halachot, --cases / 5
    documents) and loads them with the tests' loaders: legal_schema.sql, legal_indexes.sql and
    legal_corpora.sql on the single node; the same with legal_distribute.sql on Citus, once
    per --shard-counts (shards per table: 32 is Citus' default, 8 four per worker core);
 3. runs --queries queries (a vector near a random chunk's, three of its words) in each mode
    (hybrid, semantic, lexical) on each corpus of the legal system, single node and Citus
    interleaved query by query (bench/harness.py interleave), --repeats rounds, after one warm-up
    pass; p50 and p90 per mode and system, and the Citus/single-node ratio of the p50s, for each
    shard count;
 4. the per-shard work of one search per mode: each subplan corpus_explain prints, run on the
    coordinator under EXPLAIN (ANALYZE, FORMAT JSON) with citus.explain_all_tasks: the tasks
    (shards) it ran on and the rows they returned to the coordinator, against the rows the
    subplan returns (its LIMIT).
The three servers share the machine's cores: the ratio is an upper bound for a cluster whose
nodes have their own machines, and a measure of the fixed cost Citus adds per statement.
Writes docs/citus.md and bench/out/raw/citus.json (not committed).
"""
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import citus_support as cs  # noqa: E402
import conftest as fx  # noqa: E402
import harness as h  # noqa: E402

CORPORA = {"external_precedents": {}, "internal_decisions": {},
           "case_documents": {"filters": {"practice_area": "planning"}}}
MODES = ["hybrid", "semantic", "lexical"]


def queries(data, n, seed):
    return [(fx.vec_text(v), text) for v, text in cs.near_chunk_queries(data, n, seed, fx.unit)]


def timed_search(conn, corpus, vec, text, mode):
    kw = dict(CORPORA[corpus], mode=mode)
    sql, params = fx.search_sql(corpus=corpus, query_vec=None if mode == "lexical" else vec,
                                query_text=None if mode == "semantic" else text, **kw)
    return len(conn.execute(sql, params).fetchall())


def shard_work(conn, corpus, vec, text, mode):
    """Each subplan of one search on the coordinator: (branch, source, strategy, tasks, rows
    the tasks returned, rows the subplan returned)."""
    vector = [float(x) for x in vec.strip("[]").split(",")]
    out = []
    for source, branch, strategy, _, body, values in h.explained_subplans(
            conn, corpus, None if mode == "lexical" else vector, None if mode == "semantic" else text,
            10, mode, CORPORA[corpus].get("filters")):
        with conn.transaction():
            conn.execute("SET LOCAL citus.explain_all_tasks = on")
            doc = conn.execute("EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) " + body, values).fetchone()[0]
        tasks, task_rows = 0, 0

        def walk(node):
            nonlocal tasks, task_rows
            job = node.get("Distributed Query", {}).get("Job")
            if job:
                tasks += job.get("Task Count", 0)
                for t in job.get("Tasks", []):
                    for plan in t.get("Remote Plan", []):
                        for p in (plan if isinstance(plan, list) else [plan]):
                            task_rows += p.get("Plan", {}).get("Actual Rows", 0)
            for child in node.get("Plans", []):
                walk(child)
        walk(doc[0]["Plan"])
        out.append(dict(branch=branch, source=source, strategy=strategy, tasks=tasks,
                        task_rows=task_rows, returned=doc[0]["Plan"].get("Actual Rows", 0)))
    return out



def params(p):
    p.add_argument("--cases", type=int, default=2000)
    p.add_argument("--queries", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--shard-counts", default="8,32", help="comma-separated shard counts to measure")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--citus-dir", default=str(ROOT / ".pgdata" / "citus-bench"))
    p.add_argument("--single-dir", default=str(ROOT / ".pgdata" / "citus-bench-single"))


def run(a):
    started = time.time()
    data = fx.generate_legal_data(a.seed, n_cases=a.cases, n_documents=max(a.cases // 5, 10))
    sizes = {t: len(rows) for t, rows in data.items()}
    rng = np.random.default_rng(a.seed + 2)
    with h.Cluster(a.single_dir) as uri, h.fresh_database(uri, "pgc_citus_bench") as single:
        fx.load_legal(single, data)
        citus = cs.CitusCluster.start(a.citus_dir)
        try:
            qs = queries(data, a.queries, a.seed + 1)
            runs = []
            for shards in [int(x) for x in a.shard_counts.split(",")]:
                load_ms, dist = h.timed(lambda: citus.create_db(f"pgc_citus_bench_{shards}", shard_count=shards))
                load_ms += h.timed(lambda: cs.load_legal_distributed(dist, data, fx.copy_rows, fx.LEGAL_COLUMNS))[0]
                summary = measure({"single": single, "citus": dist}, qs, a.repeats, rng)
                vec, text = qs[0]
                work = {m: shard_work(dist, "external_precedents", vec, text, m) for m in MODES}
                with dist.transaction():
                    dist.execute("SET LOCAL pg_corpus.exact_search_max_rows = 10")
                    work["semantic (approximate)"] = shard_work(dist, "external_precedents", vec, text, "semantic")
                runs.append(dict(shard_count=shards, summary=summary, shard_work=work,
                                 load_seconds=round(load_ms / 1000, 1)))
                dist.close()
        finally:
            citus.close()
            citus.stop()
    result = dict(cases=a.cases, rows=sizes, queries=a.queries, repeats=a.repeats, corpora=list(CORPORA),
                  runs=runs, total_seconds=round(time.time() - started, 1),
                  machine=dict(cores=str(os.cpu_count())), command=a.command.removeprefix(".venv/bin/python "))
    h.write_raw(a.raw, result)
    Path(a.markdown).write_text(markdown(result))
    print(markdown(result))


def measure(systems, qs, repeats, rng):
    """p50/p90 per mode and system: per corpus and query, every (system, mode) interleaved,
    `repeats` rounds, after a warm-up."""
    times = {(s, m): [] for s in systems for m in MODES}
    for corpus in CORPORA:                              # warm-up
        for vec, text in qs[:3]:
            for m in MODES:
                for conn in systems.values():
                    timed_search(conn, corpus, vec, text, m)
    for corpus in CORPORA:
        for vec, text in qs:
            calls = {(s, m): (lambda conn=conn, m=m: timed_search(conn, corpus, vec, text, m))
                     for s, conn in systems.items() for m in MODES}
            for key, ms in h.interleave(calls, repeats, rng)[0].items():
                times[key] += ms
    summary = []
    for m in MODES:
        one, many = times[("single", m)], times[("citus", m)]
        summary.append(dict(mode=m, searches=len(one), single_p50=statistics.median(one),
                            single_p90=h.pct(one, 90), citus_p50=statistics.median(many),
                            citus_p90=h.pct(many, 90),
                            ratio_p50=statistics.median(many) / statistics.median(one)))
    return summary


def markdown(r):
    lines = [
        "# Citus against one node",
        "",
        f"`.venv/bin/python {r['command'].strip()}` (bench/citus.py; raw figures in bench/out/raw/citus.json, not committed).",
        "",
        f"The legal system's rows ({r['rows']['case_law']:,} cases, {r['rows']['precedent_chunks']:,} chunks, "
        f"{r['rows']['halachot']:,} halachot, {r['rows']['document_chunks']:,} document chunks, 384-d) in a "
        "single-node database and on a Citus coordinator with two workers (distributed as README \"Scaling "
        f"out\" shows), all on one machine with {r['machine']['cores']} cores. {r['queries']} queries x "
        f"{len(r['corpora'])} corpora x {r['repeats']} rounds per mode, the two systems and three modes "
        "interleaved query by query (each round in a new shuffled order) after a warm-up.",
        "",
        "| shards per table | mode | searches | single node p50 (ms) | p90 | Citus p50 (ms) | p90 | Citus / single p50 |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run in r["runs"]:
        for s in run["summary"]:
            lines.append(f"| {run['shard_count']} | {s['mode']} | {s['searches']} | {s['single_p50']:.1f} | "
                         f"{s['single_p90']:.1f} | {s['citus_p50']:.1f} | {s['citus_p90']:.1f} | "
                         f"{s['ratio_p50']:.2f}x |")
    for run in r["runs"]:
        lines += ["", f"Per-shard work of one search of external_precedents, {run['shard_count']} shards per table "
                  "(EXPLAIN ANALYZE of each subplan corpus_explain prints, run on the coordinator):", "",
                  "| search | branch | source | strategy | shards (tasks) | rows the shards returned | rows kept |",
                  "|---|---|---|---|---:|---:|---:|"]
        for search, subplans in run["shard_work"].items():
            for p in subplans:
                lines.append(f"| {search} | {p['branch']} | {p['source']} | {p['strategy']} | {p['tasks']} | "
                             f"{p['task_rows']} | {p['returned']} |")
    lines += ["", "Reading: every branch is one statement per source that Citus sends to every shard of the "
              "table (the corpus predicate selects rows on all of them: a corpus is not a shard key); each "
              "shard returns at most the subplan's LIMIT rows (ids, parent ids and distances or scores), and "
              "the coordinator merges them. So a search costs, per statement, one planning and one execution "
              "on every shard: the ratio grows with the shard count at this size, and the three servers "
              "share the machine's cores (on a cluster whose nodes have their own machines the shards run "
              "in parallel).", ""]
    return "\n".join(lines)


SPEC = h.Spec(name="citus", about=__doc__.split("\n\n")[0], run=run, params=params, cluster=False,
              outputs=h.page_outputs("citus", "citus", plot=False),
              smoke=["--cases", "50", "--queries", "2", "--repeats", "1", "--shard-counts", "4"])

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
