"""Two choices behind the shipped feedback and the quality report's lexical_weight rows, offline
(same machinery as prf_study.py; results in weights.md):

 1. RM3's feedback-document weights in the "best joint" method: equal (as shipped) or 1/(60 + rank);
 2. the lexical lists' RRF weight, for plain hybrid and for the joint method.

    OMP_NUM_THREADS=1 .venv/bin/python bench/study/weights.py > bench/study/weights.md
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prf_study import WINDOW, Collection, evaluate, rrf, rm3_weights, vector_prf  # noqa: E402

WEIGHTS = [1.0, 1.2, 1.5, 1.8, 2.0, 2.5]
print("| set | method | " + " | ".join(f"lexical weight {w}" for w in WEIGHTS) + " |")
print("|---|---|" + "---:|" * len(WEIGHTS))
for name in ["heq-val", "cranfield"]:
    c = Collection(name)
    sem, lex = c.semantic(), c.lexical()
    hyb = rrf([sem, lex], top=WINDOW)
    vp = c.semantic(vector_prf(c, hyb, m=3, beta=0.5))
    rm = {d: c.lexical(rm3_weights(c, hyb, m=10, n_terms=20, alpha=0.5, doc_weight=d))
          for d in ("uniform", "rank")}
    rows = {"hybrid RRF(sem, lex)": [sem, lex],
            "joint RRF(vPRF, lex, RM3), equal document weights": [vp, lex, rm["uniform"]],
            "joint RRF(vPRF, lex, RM3), documents weighted 1/(60+rank)": [vp, lex, rm["rank"]]}
    for label, lists in rows.items():
        figs = [evaluate(c, rrf(lists, weights=[1.0] + [w] * (len(lists) - 1))) for w in WEIGHTS]
        print(f"| {name} | {label} | " + " | ".join(f"{x:.4f}" for x in figs) + " |")
