#!/usr/bin/env python3
"""Per-query latencies of two runs of bench/lexical_speed.py (their JSON results), for the
queries named: each query's BM25 (default budget) latency in both runs, and as a multiple of
its run's semantic p50 (the machine is shared, so only ratios within a run compare). The
figures quoted in docs/lexical-speed.md's verdict for single queries come from here:

    git show 46891ff:bench/results/lexical_speed.json > /tmp/lexical_speed_before.json
    git show ae22888:bench/results/lexical_speed.json > /tmp/lexical_speed_after.json
    .venv/bin/python bench/lexical_speed_compare.py /tmp/lexical_speed_before.json \\
        /tmp/lexical_speed_after.json --corpus internal --queries 3 42 44 10 14 16 20 21 25 49

Runs made since write their raw JSON to bench/out/raw/lexical_speed.json (not committed).
"""
import argparse
import json
import statistics


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--corpus", default="internal", help="external (80%%) or internal (20%%)")
    ap.add_argument("--queries", type=int, nargs="+", required=True, help="query numbers (0-based)")
    a = ap.parse_args()
    runs = [json.load(open(path)) for path in (a.before, a.after)]
    texts = [r["queries"][q]["text"] for r in runs for q in a.queries]
    if texts[:len(a.queries)] != texts[len(a.queries):]:
        raise SystemExit("the two runs did not ask the same queries")
    sem = [statistics.median(r["raw"][a.corpus]["semantic"]["latency_ms"]) for r in runs]
    print(f"{a.corpus}: semantic p50 {sem[0]:.1f} ms before, {sem[1]:.1f} ms after\n")
    print("| query | text | before ms | after ms | before × semantic | after × semantic |")
    print("|---:|---|---:|---:|---:|---:|")
    for q in a.queries:
        lat = [r["raw"][a.corpus]["bm25"]["latency_ms"][q] for r in runs]
        print(f"| {q} | {runs[1]['queries'][q]['text']} | {lat[0]:.1f} | {lat[1]:.1f} | "
              f"{lat[0] / sem[0]:.1f} | {lat[1] / sem[1]:.1f} |")


if __name__ == "__main__":
    main()
