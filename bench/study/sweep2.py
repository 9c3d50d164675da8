"""Joint sweep: vector PRF x RM3 lists, fused in several list structures (RRF k 60, weights 1).
Prints TSV: structure  params  heq  cranfield."""
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prf_study import SETS, WINDOW, Collection, evaluate, rrf, rm3_weights, vector_prf  # noqa

VP = list(itertools.product(["hyb"], [2, 3, 5], [0.5, 1.0]))
RM = list(itertools.product(["hyb", "lex"], [3, 5, 10], [10, 20, 40], [0.5, 0.7]))
res = {}
for n in SETS:
    c = Collection(n)
    sem, lex = c.semantic(), c.lexical()
    L = dict(sem=sem, lex=lex, hyb=rrf([sem, lex], top=WINDOW))
    vps = {p: c.semantic(vector_prf(c, L[p[0]], m=p[1], beta=p[2])) for p in VP}
    rms = {p: c.lexical(rm3_weights(c, L[p[0]], m=p[1], n_terms=p[2], alpha=p[3], doc_weight="uniform")) for p in RM}
    for vp, rm in itertools.product(VP, RM):
        key = f"vprf fb={vp[0]} m={vp[1]} beta={vp[2]} | rm3 fb={rm[0]} m={rm[1]} terms={rm[2]} alpha={rm[3]}"
        for s, lists in [("RRF(vPRF,RM3)", [vps[vp], rms[rm]]),
                         ("RRF(vPRF,lex,RM3)", [vps[vp], lex, rms[rm]]),
                         ("RRF(sem,vPRF,lex,RM3)", [sem, vps[vp], lex, rms[rm]])]:
            res.setdefault((s, key), {})[n] = evaluate(c, rrf(lists))
    print(n, "done", file=sys.stderr, flush=True)
for (s, key), v in res.items():
    print(f"{s}\t{key}\t{v['heq-val']:.4f}\t{v['cranfield']:.4f}")
