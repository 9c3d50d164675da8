#!/usr/bin/env python3
r"""Every mode of the extension in one warm session, on the sizes bench/scale.py built: the
figures with the database's caches warm and no other session evicting them, next to
bench/scale.py's interleaved client figures (docs/scale.md). Reuses bench/scale.py's cache
folder, cluster start, corpora and query table, and its SQL of each method.

    .venv/bin/python bench/scale_session.py --sizes 100000,1000000 --queries 40

Prints a markdown table per size: p50/p95 (client ms) of hybrid, semantic, lexical and the
empty corpus, the per-query difference hybrid − (semantic + lexical), the hybrid/semantic and
lexical/semantic ratios, and pgbench's latency of the empty corpus' search (one client, the
query vector read from bench_queries: no client-side parsing), next to a trivial statement of
the same shape.
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import scale  # noqa: E402

METHODS = ("hybrid", "semantic", "lexical", "empty")
PGBENCH_EMPTY = f"""\\set q random(1, :nq)
SELECT * FROM corpus.corpus_hybrid_search('{scale.EMPTY}', (SELECT qvec FROM bench_queries WHERE qid = :q),
  (SELECT qtext FROM bench_queries WHERE qid = :q), k => 10);
"""
PGBENCH_TRIVIAL = """\\set q random(1, :nq)
SELECT (SELECT qvec FROM bench_queries WHERE qid = :q) IS NULL, (SELECT qtext FROM bench_queries WHERE qid = :q);
"""


def pgbench_ms(uri, script, seconds):
    """pgbench's average latency (ms) of one client running `script` for `seconds`."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script)
    try:
        with psycopg.connect(make_conninfo(uri, dbname=scale.DBNAME)) as conn:
            nq = conn.execute("SELECT count(*) FROM bench_queries").fetchone()[0]
        out = subprocess.run([str(scale.PGBENCH), "-n", "-c", "1", "-T", str(seconds), "-D", f"nq={nq}",
                              "-f", f.name, make_conninfo(uri, dbname=scale.DBNAME)],
                             capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    return float(re.search(r"latency average = ([0-9.]+) ms", out).group(1))


def measure(uri, queries, k, rounds, seconds):
    conn = psycopg.connect(make_conninfo(uri, dbname=scale.DBNAME), autocommit=True)
    qs = [{"vtext": v, "text": t} for v, t in conn.execute(
        "SELECT qvec::text, qtext FROM bench_queries ORDER BY qid LIMIT %s", (queries,)).fetchall()]
    # a warming pass, then `rounds` passes: per query every method once in a shuffled order
    times = harness.interleave_queries(
        lambda iq: {(m, iq[0]): (lambda m=m: scale.run_one(conn, m, iq[1], k)) for m in METHODS},
        list(enumerate(qs)), rounds, np.random.default_rng(0))
    conn.close()
    per_query = {m: [statistics.median(times[(m, i)]) for i in range(len(qs))] for m in METHODS}
    diff = [h - s - lx for h, s, lx in zip(per_query["hybrid"], per_query["semantic"], per_query["lexical"])]
    return per_query, diff, pgbench_ms(uri, PGBENCH_EMPTY, seconds), pgbench_ms(uri, PGBENCH_TRIVIAL, seconds)


def params(p):
    p.add_argument("--sizes", default="100000,1000000")
    p.add_argument("--queries", type=int, default=40)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--pgbench-seconds", type=int, default=10)
    p.add_argument("--shared-buffers", default="100000=2176MB,1000000=8448MB",
                   help="size=setting,…: the server's shared_buffers per size (bench/scale.py's run)")
    p.add_argument("--cache-dir", default=None)


def run(a):
    print(f"Run of {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {a.queries} queries, k = {a.k}, "
          f"{a.rounds} rounds after a warming one, one session; load average {os.getloadavg()[0]:.2f}\n")
    for size in [int(s) for s in a.sizes.split(",")]:
        buffers = dict(x.split("=", 1) for x in a.shared_buffers.split(","))
        directory = scale.cache_dir(a) / str(size)
        # the cluster is left as it was found (bench/scale.py's runs stop theirs)
        with harness.Cluster(directory, {"shared_buffers": buffers.get(str(size), "2GB")},
                             keep=harness.running(directory)) as uri:
            per_query, diff, empty_pgbench, trivial_pgbench = measure(uri, a.queries, a.k, a.rounds,
                                                                      a.pgbench_seconds)
        p50 = {m: harness.pct(v, 50) for m, v in per_query.items()}
        print(f"#### {size:,} chunks\n\n| method | p50 ms | p95 ms |\n|---|---:|---:|")
        for m in METHODS:
            print(f"| {scale.SHORT.get(m, m)} | {p50[m]:.2f} | {harness.pct(per_query[m], 95):.2f} |")
        print(f"\n- hybrid / semantic {p50['hybrid'] / p50['semantic']:.2f}×, lexical / semantic "
              f"{p50['lexical'] / p50['semantic']:.2f}×; hybrid − (semantic + lexical) per query: median "
              f"{statistics.median(diff):.2f} ms, max {max(diff):.2f} ms")
        print(f"- empty corpus by pgbench (1 client, vectors read in the database): {empty_pgbench:.3f} ms per "
              f"search; a statement reading the same two values: {trivial_pgbench:.3f} ms\n")


SPEC = harness.Spec(name="scale_session", about=__doc__.split("\n\n")[0], run=run, params=params, cluster=False,
                    smoke=["--sizes", "3000", "--queries", "4", "--rounds", "1", "--pgbench-seconds", "1",
                           "--shared-buffers", "3000=256MB", "--cache-dir",
                           str(harness.ROOT / ".pgdata" / "bench-scale-smoke")])

if __name__ == "__main__":
    harness.main(SPEC, doc=__doc__)
