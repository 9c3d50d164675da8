"""The report's table: every method at RRF k 60, weights 1, one parameter setting for both sets,
with a paired randomisation test against the hybrid baseline (10,000 trials, two-sided), and the
one-at-a-time sensitivity of the two shortlisted methods.

    OMP_NUM_THREADS=1 /work/main/.venv/bin/python bench/study/report.py
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prf_study import (SETS, WINDOW, K, Collection, evaluate, rrf, rm3_weights, dfr_weights,  # noqa
                       rocchio_weights, vector_prf)


def p_value(a, b, trials=10_000, seed=42):
    rng = np.random.default_rng(seed)
    d = b - a
    obs = abs(d.mean())
    signs = rng.choice([-1.0, 1.0], size=(trials, len(d)))
    return float((np.abs((signs * d).mean(1)) >= obs - 1e-12).mean())


def methods(c):
    sem, lex = c.semantic(), c.lexical()
    hyb = rrf([sem, lex], top=WINDOW)
    L = {"sem": sem, "lex": lex, "hyb": hyb}
    vp = lambda fb, m, beta: c.semantic(vector_prf(c, L[fb], m=m, beta=beta))  # noqa
    rm = lambda fb, m, t, a: c.lexical(rm3_weights(c, L[fb], m=m, n_terms=t, alpha=a, doc_weight="uniform"))  # noqa
    kl = lambda fb, m, t, b: c.lexical(dfr_weights(c, L[fb], m=m, n_terms=t, method="kl", beta=b))  # noqa
    top = lambda x: [r[:K] for r in x]  # noqa
    rm_t = rm("hyb", 10, 10, 0.5)          # Anserini defaults, feedback = first-round hybrid
    rm_l3 = rm("lex", 3, 20, 0.7)
    vp_t = vp("hyb", 3, 1.0)
    vp_h = vp("hyb", 3, 0.5)
    rm_h = rm("hyb", 10, 20, 0.5)
    yield "semantic (e5 cosine)", top(sem)
    yield "lexical (BM25, pg_corpus analyser)", top(lex)
    yield "hybrid RRF(sem, lex) — baseline", top(hyb)
    yield "A. RM3-lex alone [fb hyb top10, 10 terms, α0.5]", top(rm_t)
    yield "A. RRF(sem, RM3-lex) [same]", rrf([sem, rm_t])
    yield "A'. RRF(sem, KL-lex) [fb hyb top10, 20 terms, β0.4]", rrf([sem, kl("hyb", 10, 20, 0.4)])
    yield "B. vPRF alone [fb hyb top3, β1]", top(vp_t)
    yield "B. RRF(vPRF, lex) [fb hyb top3, β1]", rrf([vp_t, lex])
    yield "B. RRF(vPRF, lex) [fb hyb top3, β0.5]", rrf([vp_h, lex])
    yield "C. RRF(vPRF, RM3-lex) [β1; fb hyb 10/10/0.5]", rrf([vp_t, rm_t])
    yield "C. RRF(sem, lex, RM3-lex) [fb hyb 10/10/0.5]", rrf([sem, lex, rm_t])
    yield "C. RRF(sem, lex, RM3-lex) [fb lex 3/20/0.7] (best HeQ)", rrf([sem, lex, rm_l3])
    yield "C. RRF(sem, lex, vPRF, RM3-lex) [β1; fb hyb 10/10/0.5]", rrf([sem, lex, vp_t, rm_t])
    yield "C. RRF(vPRF, lex, RM3-lex) [β0.5; fb hyb 10/20/0.5] (best joint)", rrf([vp_h, lex, rm_h])


def sensitivity(c):
    sem, lex = c.semantic(), c.lexical()
    hyb = rrf([sem, lex], top=WINDOW)
    L = {"sem": sem, "lex": lex, "hyb": hyb}
    base = dict(vfb="hyb", vm=3, beta=0.5, rfb="hyb", rm=10, terms=20, alpha=0.5)
    grid = dict(vfb=["sem"], vm=[1, 2, 5, 10], beta=[0.25, 0.75, 1.0, 1.5], rfb=["lex"], rm=[3, 5, 20],
                terms=[10, 40], alpha=[0.3, 0.7])
    out = {}

    def run(p):
        v = c.semantic(vector_prf(c, L[p["vfb"]], m=p["vm"], beta=p["beta"]))
        r = c.lexical(rm3_weights(c, L[p["rfb"]], m=p["rm"], n_terms=p["terms"], alpha=p["alpha"], doc_weight="uniform"))
        return evaluate(c, rrf([v, lex, r]))
    out["(chosen)"] = run(base)
    for k, vals in grid.items():
        for v in vals:
            out[f"{k}={v}"] = run({**base, k: v})
    return out


def main():
    per, sens = {}, {}
    for n in SETS:
        c = Collection(n)
        for name, runs in methods(c):
            per.setdefault(name, {})[n] = evaluate(c, runs, per_query=True)
        sens[n] = sensitivity(c)
    base = "hybrid RRF(sem, lex) — baseline"
    print("| method | HeQ val | p vs hybrid | Cranfield | p vs hybrid |")
    print("|---|---|---|---|---|")
    for name, v in per.items():
        cells = []
        for n in ("heq-val", "cranfield"):
            cells.append(f"{v[n].mean():.4f}")
            cells.append("—" if name == base or name.startswith(("semantic", "lexical")) else f"{p_value(per[base][n], v[n]):.4f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nSensitivity of RRF(vPRF, lex, RM3-lex), one parameter changed at a time from "
          "vPRF fb=hyb m=3 β=0.5, RM3 fb=hyb m=10 terms=20 α=0.5:\n")
    print("| change | HeQ val | Cranfield |")
    print("|---|---|---|")
    for k in sens["heq-val"]:
        print(f"| {k} | {sens['heq-val'][k]:.4f} | {sens['cranfield'][k]:.4f} |")


if __name__ == "__main__":
    main()
