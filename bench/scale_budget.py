#!/usr/bin/env python3
r"""BM25 candidate budget against overlap@10 with exhaustive BM25, on a size bench/scale.py
built (the overlap target is missed at 1M with the default budget). Reuses
bench/scale.py's cache folder, cluster start and query table; the extension does the work
(mode => 'lexical' under SET pg_corpus.bm25_candidate_budget), nothing is re-implemented.

    .venv/bin/python bench/scale_budget.py --size 1000000 --queries 40   # docs/scale.md's table

    .venv/bin/python bench/scale_budget.py --smoke      # on the size bench/scale.py --smoke built

Prints a markdown table: budget, mean and min overlap@10 with budget 10^9, lexical p50 (ms).
"""
import statistics
import sys
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
import scale  # noqa: E402

EXHAUSTIVE = 1_000_000_000
SQL = ("SELECT item_id FROM corpus.corpus_hybrid_search(%s, NULL, %s, k => %s, mode => 'lexical') "
       "ORDER BY rank")


def top(conn, corpus, budget, text, k):
    conn.execute(f"SET pg_corpus.bm25_candidate_budget = {int(budget)}")
    ms, rows = h.timed(lambda: conn.execute(SQL, (corpus, text, k)).fetchall())
    return [r[0] for r in rows], ms


def params(p):
    p.add_argument("--size", type=int, default=1_000_000)
    p.add_argument("--queries", type=int, default=40)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--budgets", default="2000,5000,10000,20000,50000")
    p.add_argument("--corpus", default=scale.MAIN)
    p.add_argument("--shared-buffers", default="8448MB")
    p.add_argument("--cache-dir", default=None)


def run(a):
    directory = scale.cache_dir(a) / str(a.size)
    # the cluster is left as it was found (bench/scale.py's runs stop theirs)
    with h.Cluster(directory, {"shared_buffers": a.shared_buffers}, keep=h.running(directory)) as uri, \
            psycopg.connect(h.dsn(uri, scale.DBNAME), autocommit=True) as conn:
        qs = conn.execute("SELECT qid, qtext FROM bench_queries ORDER BY qid LIMIT %s", (a.queries,)).fetchall()
        exact = {q: top(conn, a.corpus, EXHAUSTIVE, text, a.k)[0] for q, text in qs}
        print(f"{a.size:,} items, corpus {a.corpus}, {len(qs)} queries, k = {a.k}\n")
        print("| budget | overlap@10 mean | min | lexical p50 |\n|---:|---:|---:|---:|")
        for b in [int(x) for x in a.budgets.split(",")]:
            overlap, latency = [], []
            for q, text in qs:
                top(conn, a.corpus, b, text, a.k)  # warm
                ids, ms = top(conn, a.corpus, b, text, a.k)
                overlap.append(len(set(ids) & set(exact[q])) / a.k)
                latency.append(ms)
            print(f"| {b:,} | {statistics.mean(overlap):.3f} | {min(overlap):.1f} | {statistics.median(latency):.1f} ms |")


SPEC = h.Spec(name="scale_budget", about=__doc__.split("\n\n")[0], run=run, params=params, cluster=False,
              smoke=["--size", "3000", "--queries", "4", "--budgets", "100,2000", "--shared-buffers", "256MB",
                     "--cache-dir", str(h.ROOT / ".pgdata" / "bench-scale-smoke")])

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
