"""Parameter sweeps for prf_study.py (same data, same fusion). Prints TSV rows:
variant  params  heq  cranfield."""
import itertools
import sys

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from prf_study import SETS, WINDOW, K, Collection, evaluate, rrf, rm3_weights, vector_prf, rocchio_weights  # noqa

cs = {n: Collection(n) for n in SETS}
base = {}
for n, c in cs.items():
    sem, lex = c.semantic(), c.lexical()
    base[n] = dict(sem=sem, lex=lex, hyb=rrf([sem, lex], top=WINDOW))
    print(n, "vocab", len(c.vocab), "docs", c.tf.shape[0], "queries", len(c.qids), file=sys.stderr)


def both(fn):
    return tuple(evaluate(cs[n], fn(cs[n], base[n])) for n in ("heq-val", "cranfield"))


def show(tag, params, r):
    print(f"{tag}\t{params}\t{r[0]:.4f}\t{r[1]:.4f}", flush=True)


which = sys.argv[1] if len(sys.argv) > 1 else "all"
if which in ("vprf", "all"):
    for fb, m, beta in itertools.product(["hyb", "sem"], [1, 2, 3, 5, 10], [0.25, 0.5, 0.75, 1.0, 1.5]):
        cache = {}

        def vp(c, b):
            key = c.name
            if key not in cache:
                cache[key] = c.semantic(vector_prf(c, b[fb], m=m, beta=beta))
            return cache[key]
        show("vPRF alone", f"fb={fb} m={m} beta={beta}", both(lambda c, b: [x[:K] for x in vp(c, b)]))
        show("RRF(vPRF,lex)", f"fb={fb} m={m} beta={beta}", both(lambda c, b: rrf([vp(c, b), b["lex"]])))
        show("RRF(sem,lex,vPRF)", f"fb={fb} m={m} beta={beta}", both(lambda c, b: rrf([b["sem"], b["lex"], vp(c, b)])))
if which in ("rm3", "all"):
    for fb, m, nt, alpha, dw in itertools.product(["hyb", "lex"], [3, 5, 10, 20], [10, 20, 40], [0.3, 0.5, 0.7], ["rank", "uniform"]):
        cache = {}

        def rl(c, b):
            if c.name not in cache:
                cache[c.name] = c.lexical(rm3_weights(c, b[fb], m=m, n_terms=nt, alpha=alpha, doc_weight=dw))
            return cache[c.name]
        p = f"fb={fb} m={m} terms={nt} alpha={alpha} dw={dw}"
        show("RM3 alone", p, both(lambda c, b: [x[:K] for x in rl(c, b)]))
        show("RRF(sem,RM3)", p, both(lambda c, b: rrf([b["sem"], rl(c, b)])))
        show("RRF(sem,lex,RM3)", p, both(lambda c, b: rrf([b["sem"], b["lex"], rl(c, b)])))
