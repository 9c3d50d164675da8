"""Hybrid (RRF) parameter sweep on HeQ val and Cranfield: nDCG@10 of corpus_evaluate in hybrid
mode for rrf_k in {10, 30, 60, 100}, per-source branch weights (semantic, lexical) in
{(1, 1), (1, 1.3), (1.3, 1)}, and candidate windows {10, 20, 100} at rrf_k 60. Prints one line
per setting; nothing is stored (store => false). Run (about 15 min on 2 cores):

    .venv/bin/python bench/hybrid_sweep.py [--data ../shared/data]
    .venv/bin/python bench/hybrid_sweep.py --smoke     # rrf_k 60 only

The sets are loaded with scripts/load_beir.py and pg_corpus' analyser (hebrew / english), as
bench/quality_report.py does; the figures quoted in the closing note of the first session
(HeQ 0.943 at rrf_k 10, Cranfield at most 0.393) came from this sweep.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
import harness as h  # noqa: E402
import load_beir  # noqa: E402

SETS = {"heq": ("heq-val", "hebrew"), "cran": ("cranfield", "english")}


def params(p):
    p.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    p.add_argument("--rrf-k", default="10,30,60,100", help="comma-separated rrf_k values")
    p.add_argument("--candidates", default="10,20,100", help="comma-separated windows at rrf_k 60")


def run(a):
    with h.Cluster(a.dir, keep=a.keep) as uri, h.fresh_database(uri, "sweep") as c:
        for name, (folder, language) in SETS.items():
            load_beir.load_beir(c, a.data / folder, corpus=name, gold_set=name, create_schema=True, language=language)

        def ndcg(gold, rrf_k=60, weights=(1.0, 1.0), candidates=None):
            c.execute("UPDATE corpus.sources SET semantic_weight = %s, lexical_weight = %s "
                      "WHERE corpus = %s", (*weights, gold))
            return c.execute(
                "SELECT ndcg_at_k FROM corpus.corpus_evaluate(%s, modes => '{hybrid}', k => 10, "
                "max_per_parent => NULL::int, rrf_k => %s, candidates => %s, store => false)",
                (gold, rrf_k, candidates)).fetchone()[0]

        for gold in SETS:
            for rrf_k in (int(x) for x in a.rrf_k.split(",") if x):
                for weights in ((1, 1), (1, 1.3), (1.3, 1)):
                    print(gold, f"rrf_k={rrf_k}", f"weights={weights}", f"{ndcg(gold, rrf_k, weights):.4f}", flush=True)
            for cand in (int(x) for x in a.candidates.split(",") if x):
                print(gold, "rrf_k=60", f"candidates={cand}", f"{ndcg(gold, candidates=cand):.4f}", flush=True)


SPEC = h.Spec(name="hybrid_sweep", about=__doc__.splitlines()[0], run=run, params=params,
              smoke=["--rrf-k", "60", "--candidates", "20"])

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
