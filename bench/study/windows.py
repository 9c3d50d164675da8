"""The per-branch window (`candidates`) of the RRF fusion, offline (same machinery as
prf_study.py; results in windows.md): plain hybrid RRF(sem, lex) and the shipped feedback
(RRF of vector PRF, BM25 and RM3; equal RM3 document weights), each branch cut at W items
before fusion, W = 20 … 100. The extension's default is max(20, 4k) = 40 for k = 10.

    OMP_NUM_THREADS=1 .venv/bin/python bench/study/windows.py > bench/study/windows.md
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prf_study import Collection, evaluate, rrf, rm3_weights, vector_prf  # noqa: E402

WINDOWS = [20, 40, 60, 80, 100, 150]
print("| set | method | " + " | ".join(f"window {w}" for w in WINDOWS) + " |")
print("|---|---|" + "---:|" * len(WINDOWS))
for name in ["heq-val", "cranfield"]:
    c = Collection(name)
    plain, joint = [], []
    for w in WINDOWS:
        sem, lex = c.semantic(window=w), c.lexical(window=w)
        hyb = rrf([sem, lex], top=w)
        vp = c.semantic(vector_prf(c, hyb, m=3, beta=0.5), window=w)
        rm = c.lexical(rm3_weights(c, hyb, m=10, n_terms=20, alpha=0.5, doc_weight="uniform"), window=w)
        plain.append(evaluate(c, rrf([sem, lex])))
        joint.append(evaluate(c, rrf([vp, lex, rm])))
    print(f"| {name} | hybrid RRF(sem, lex) | " + " | ".join(f"{x:.4f}" for x in plain) + " |")
    print(f"| {name} | feedback RRF(vPRF, lex, RM3) | " + " | ".join(f"{x:.4f}" for x in joint) + " |")
