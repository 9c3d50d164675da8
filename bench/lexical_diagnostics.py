#!/usr/bin/env python3
"""Two diagnostics quoted in docs/lexical-speed.md's verdict, on the database that
bench/lexical_speed.py leaves in its cluster folder (run it first; this script starts the
cluster if it is stopped, and leaves it as it found it):

 1. the text-length check of the searchable contract, per candidate: EXPLAIN (ANALYZE, TIMING
    OFF) of the first mixed query's GIN scan on the 80% corpus, with and without
    `char_length(btrim(content)) >= 50`;
 2. cutting champion-list heads by their known weights: for every all-common query of the run,
    the share of the exact BM25 top 10 (budget 10^9) among the N head items of highest lower
    bound (sum of their listed weights × idf), N = 80 … all.

    .venv/bin/python bench/lexical_speed.py --keep      # or any earlier run of it
    .venv/bin/python bench/lexical_diagnostics.py
"""
import argparse
import json
import math
import subprocess
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=str(ROOT / ".pgdata" / "lexical-speed"))
    ap.add_argument("--db", default="lexical_speed_main")
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "lexical_speed.json"))
    a = ap.parse_args()
    pgcluster = str(ROOT / "scripts" / "pgcluster.sh")
    was_running = subprocess.run(["bash", pgcluster, "uri", a.dir], capture_output=True, text=True).returncode == 0
    uri = subprocess.run(["bash", pgcluster, "start", a.dir], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()[-1]
    try:
        run(psycopg.connect(make_conninfo(uri, dbname=a.db), autocommit=True), json.load(open(a.json)))
    finally:
        if not was_running:
            subprocess.run(["bash", pgcluster, "stop", a.dir], capture_output=True)


def exec_ms(conn, sql, params):
    with conn.transaction():
        conn.execute("SET LOCAL random_page_cost = 1.1")
        plan = conn.execute("EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) " + sql, params).fetchone()[0]
    return plan[0]["Execution Time"], plan[0]["Plan"]["Actual Rows"]


def run(conn, d):
    queries = d["queries"]
    mixed = next(q for q in queries if q["kind"] == "mixed")["external"]
    tsq = " | ".join(f"'{k}'" for k in mixed["finders"])
    base = "SELECT i.id FROM precedent_chunks i WHERE i.content_bm25 @@ %s::tsquery"
    checked = base + " AND char_length(btrim(content)) >= 50"
    for _ in range(2):  # warm: the heap and the text's TOAST pages
        exec_ms(conn, base, [tsq])
        exec_ms(conn, checked, [tsq])
    ms, rows = exec_ms(conn, base, [tsq])
    ms_text, _ = exec_ms(conn, checked, [tsq])
    print(f"1. GIN candidates of {tsq!r}: {rows} rows; scan {ms:.1f} ms, "
          f"with the text-length check {ms_text:.1f} ms")
    print("2. all-common queries: share of the exact top 10 among the N head items of highest lower bound")
    cuts = [80, 160, 320, 640, None]
    for corpus in ("external", "internal"):
        n_docs = conn.execute("SELECT documents FROM corpus.lexical_totals WHERE corpus = %s",
                              [corpus]).fetchone()[0]
        share = {n: [] for n in cuts}
        for q in (q for q in queries if q["kind"] == "common"):
            info = q[corpus]
            keys, dfs = info["keys"], info["df"]
            prefix = min(1000, max(1, 2000 // len(keys)))  # lexical.rs: budget / keys
            words = q["text"].split()
            w = {k: words.count(k) * math.log(1 + (n_docs - f + 0.5) / (f + 0.5)) for k, f in zip(keys, dfs)}
            lower = {}
            for term, items, impacts in conn.execute(
                    "SELECT term, items[1:%s], impacts[1:%s] FROM corpus.lexical_champions "
                    "WHERE corpus = %s AND term = ANY(%s)", [prefix, prefix, corpus, keys]):
                for i, x in zip(items, impacts):
                    lower[i] = lower.get(i, 0.0) + w[term] * x
            conn.execute("SET pg_corpus.bm25_candidate_budget = 1000000000")
            exact = {r[0] for r in conn.execute(
                "SELECT item_id FROM corpus.corpus_hybrid_search(%s, NULL, %s, mode => 'lexical', k => 10)",
                [corpus, q["text"]])}
            conn.execute("RESET pg_corpus.bm25_candidate_budget")
            order = sorted(lower, key=lambda i: -lower[i])
            for n in cuts:
                share[n].append(len(set(order[:n]) & exact) / 10)
        print("   " + corpus + ": " + ", ".join(
            f"N={n or 'all'} {sum(v) / len(v):.3f} (min {min(v):.1f})" for n, v in share.items()))


if __name__ == "__main__":
    main()
