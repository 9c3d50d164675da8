"""Hybrid (RRF) parameter sweep on HeQ val and Cranfield: nDCG@10 of corpus_evaluate in hybrid
mode for rrf_k in {10, 30, 60, 100}, per-source branch weights (semantic, lexical) in
{(1, 1), (1, 1.3), (1.3, 1)}, and candidate windows {10, 20, 100} at rrf_k 60. Prints one line
per setting; nothing is stored (store => false). Run (about 15 min on 2 cores):

    .venv/bin/python bench/hybrid_sweep.py [--data ../shared/data] [--dir .pgdata/sweep]

The sets are loaded with scripts/load_beir.py and pg_corpus' analyser (hebrew / english), as
bench/quality_report.py does; the figures quoted in the closing note of the first session
(HeQ 0.943 at rrf_k 10, Cranfield at most 0.393) came from this sweep.
"""
import argparse
import subprocess
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import load_beir  # noqa: E402

SETS = {"heq": ("heq-val", "hebrew"), "cran": ("cranfield", "english")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--dir", type=Path, default=ROOT / ".pgdata" / "sweep")
    args = ap.parse_args()
    pgcluster = ["bash", str(ROOT / "scripts" / "pgcluster.sh")]
    uri = subprocess.run(pgcluster + ["start", str(args.dir)], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()[-1]
    try:
        with psycopg.connect(uri, autocommit=True) as admin:
            admin.execute("DROP DATABASE IF EXISTS sweep WITH (FORCE)")
            admin.execute("CREATE DATABASE sweep")
        with psycopg.connect(uri.rsplit("/", 1)[0] + "/sweep", autocommit=True) as c:
            c.execute("CREATE EXTENSION vector")
            c.execute("CREATE EXTENSION pg_corpus")
            for name, (folder, language) in SETS.items():
                load_beir.load_beir(c, args.data / folder, corpus=name, gold_set=name,
                                    create_schema=True, language=language)

            def ndcg(gold, rrf_k=60, weights=(1.0, 1.0), candidates=None):
                c.execute("UPDATE corpus.sources SET semantic_weight = %s, lexical_weight = %s "
                          "WHERE corpus = %s", (*weights, gold))
                return c.execute(
                    "SELECT ndcg_at_k FROM corpus.corpus_evaluate(%s, modes => '{hybrid}', k => 10, "
                    "max_per_parent => NULL::int, rrf_k => %s, candidates => %s, store => false)",
                    (gold, rrf_k, candidates)).fetchone()[0]

            for gold in SETS:
                for rrf_k in (10, 30, 60, 100):
                    for weights in ((1, 1), (1, 1.3), (1.3, 1)):
                        print(gold, f"rrf_k={rrf_k}", f"weights={weights}",
                              f"{ndcg(gold, rrf_k, weights):.4f}", flush=True)
                for cand in (10, 20, 100):
                    print(gold, "rrf_k=60", f"candidates={cand}", f"{ndcg(gold, candidates=cand):.4f}",
                          flush=True)
    finally:
        subprocess.run(pgcluster + ["stop", str(args.dir)], check=False)


if __name__ == "__main__":
    main()
