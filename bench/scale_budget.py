#!/usr/bin/env python3
r"""BM25 candidate budget against overlap@10 with exhaustive BM25, on a size bench/scale.py
built (the overlap target is missed at 1M with the default budget). Reuses
bench/scale.py's cache folder, cluster start and query table; the extension does the work
(mode => 'lexical' under SET pg_corpus.bm25_candidate_budget), nothing is re-implemented.

    .venv/bin/python bench/scale_budget.py --size 1000000 --queries 40   # docs/scale.md's table

Prints a markdown table: budget, mean and min overlap@10 with budget 10^9, lexical p50 (ms).
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402

EXHAUSTIVE = 1_000_000_000
SQL = ("SELECT item_id FROM corpus.corpus_hybrid_search(%s, NULL, %s, k => %s, mode => 'lexical') "
       "ORDER BY rank")


def top(conn, corpus, budget, text, k):
    conn.execute(f"SET pg_corpus.bm25_candidate_budget = {int(budget)}")
    t = time.perf_counter()
    ids = [r[0] for r in conn.execute(SQL, (corpus, text, k)).fetchall()]
    return ids, (time.perf_counter() - t) * 1000


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=1_000_000)
    p.add_argument("--queries", type=int, default=40)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--budgets", default="2000,5000,10000,20000,50000")
    p.add_argument("--corpus", default=scale.MAIN)
    p.add_argument("--shared-buffers", default="8448MB")
    p.add_argument("--cache-dir", default=None)
    a = p.parse_args(argv)
    directory = scale.cache_dir(a) / str(a.size)
    uri = scale.start_cluster(directory, {"shared_buffers": a.shared_buffers})
    conn = psycopg.connect(make_conninfo(uri, dbname=scale.DBNAME), autocommit=True)
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
    conn.close()


if __name__ == "__main__":
    main()
