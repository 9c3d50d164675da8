"""Offline study: pseudo-relevance feedback lists for pg_corpus' RRF hybrid (see README.md here).

    OMP_NUM_THREADS=1 /work/main/.venv/bin/python bench/study/prf_study.py [--sweep]

Reproduces the extension's semantic / lexical / hybrid figures from pg_corpus_core's own keys
(bench/study/keydump, built once into $CARGO_TARGET_DIR) and measures PRF variants, all fused
with plain RRF (k 60, weights 1, ties: best branch rank, then id).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytrec_eval

HERE = Path(__file__).resolve().parent
DATA = Path("/work/shared/data")
CACHE = Path(os.environ.get("HOME", "/tmp")) / ".cache/pg_corpus/study"
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", Path(os.environ.get("HOME", "/tmp")) / ".cache/pg_corpus/target"))
SETS = {"heq-val": "hebrew", "cranfield": "english"}
K1, B = 1.2, 0.75
WINDOW, RRF_K, K = 40, 60, 10


sys.path.insert(0, str(HERE.parent.parent / "scripts"))
from load_beir import _read_jsonl as read_jsonl, doc_content  # noqa: E402  the loader's reading rules


class Collection:
    def __init__(self, name):
        self.name = name
        folder = DATA / name
        docs = read_jsonl(folder / "corpus.jsonl")
        queries = read_jsonl(folder / "queries.jsonl")
        self.qrels = {}
        for i, line in enumerate(open(folder / "qrels.tsv", encoding="utf-8")):
            c = line.rstrip("\n").split("\t")
            if len(c) < 3 or (i == 0 and c[0] in ("query-id", "query_id", "qid")):
                continue
            self.qrels.setdefault(c[0], {})[c[1]] = int(c[2])
        self.doc_ids = [str(d["_id"]) for d in docs]
        self.texts = [doc_content(d) for d in docs]
        qidx = [i for i, q in enumerate(queries) if str(q["_id"]) in self.qrels]
        self.qids = [str(queries[i]["_id"]) for i in qidx]
        qtexts = [queries[i]["text"] for i in qidx]
        dv = np.load(folder / "corpus.e5s.npy").astype(np.float64)
        qv = np.load(folder / "queries.e5s.npy").astype(np.float64)[qidx]
        self.dv = dv / np.linalg.norm(dv, axis=1, keepdims=True).clip(1e-12)
        self.qv = qv / np.linalg.norm(qv, axis=1, keepdims=True).clip(1e-12)
        nonempty = [len(t.strip()) for t in self.texts if t.strip()]
        min_length = min(50, min(nonempty))
        self.searchable = np.array([len(t.strip()) >= min_length for t in self.texts])
        self._keys(qtexts)

    def _keys(self, qtexts):
        CACHE.mkdir(parents=True, exist_ok=True)
        inp, out = CACHE / f"{self.name}.texts.json", CACHE / f"{self.name}.keys.json"
        if not out.exists():
            json.dump({"docs": self.texts, "queries": qtexts}, open(inp, "w", encoding="utf-8"), ensure_ascii=False)
            exe = TARGET / "release/study_keydump"
            if not exe.exists():
                subprocess.run(["cargo", "build", "--release", "--offline", "--manifest-path",
                                str(HERE / "keydump/Cargo.toml")], check=True,
                               env={**os.environ, "CARGO_TARGET_DIR": str(TARGET)})
            subprocess.run([str(exe), str(inp), SETS[self.name], str(out)], check=True)
        dump = json.load(open(out, encoding="utf-8"))
        vocab = {}
        for d in dump["docs"]:
            for k in d["tf"]:
                vocab.setdefault(k, len(vocab))
        self.vocab = vocab
        self.inv_vocab = list(vocab)
        n, v = len(self.texts), len(vocab)
        tf = np.zeros((n, v))
        for i, d in enumerate(dump["docs"]):
            for k, c in d["tf"].items():
                tf[i, vocab[k]] = c
        dl = np.array([d["len"] for d in dump["docs"]], dtype=float)
        s = self.searchable
        tf[~s] = 0.0
        self.tf, self.dl = tf, dl
        self.n_docs = int(s.sum())
        self.avgdl = dl[s].sum() / self.n_docs
        df = (tf > 0).sum(0)
        self.df = df
        self.idf = np.log(1 + (self.n_docs - df + 0.5) / (df + 0.5))
        norm = K1 * (1 - B + B * dl / self.avgdl)
        self.tfn = tf / (tf + norm[:, None])  # 0 where tf is 0
        # query weight vectors over the vocabulary (keys absent from every document score 0)
        self.qw = np.zeros((len(qtexts), v))
        self.qkeys = dump["queries"]
        for i, q in enumerate(dump["queries"]):
            for k, w in q.items():
                if k in vocab:
                    self.qw[i, vocab[k]] += w

    # ---- branches -------------------------------------------------------------------------
    def bm25(self, weights):
        """Scores of every document for a query weight vector (rows: queries)."""
        return (self.tfn @ (weights * self.idf).T).T

    def ranked(self, scores, larger=True, window=WINDOW, positive=True):
        """Top `window` document numbers per row, best first, ties by id (file order)."""
        out = []
        n = scores.shape[1]
        ids = np.arange(n)
        for row in scores:
            mask = self.searchable.copy()
            if positive:
                mask &= row > 0
            cand = ids[mask]
            key = -row[cand] if larger else row[cand]
            order = np.lexsort((cand, key))
            out.append(cand[order][:window].tolist())
        return out

    def semantic(self, qv=None, window=WINDOW):
        qv = self.qv if qv is None else qv
        dist = 1.0 - qv @ self.dv.T
        return self.ranked(dist, larger=False, window=window, positive=False)

    def lexical(self, weights=None, window=WINDOW):
        weights = self.qw if weights is None else weights
        return self.ranked(self.bm25(weights), window=window)


def rrf(lists_per_query, k=RRF_K, weights=None, top=K):
    """lists_per_query: [list_a, list_b, ...] each a per-query list of doc numbers."""
    nq = len(lists_per_query[0])
    weights = weights or [1.0] * len(lists_per_query)
    out = []
    for q in range(nq):
        score, best = {}, {}
        for w, lists in zip(weights, lists_per_query):
            for r, d in enumerate(lists[q], 1):
                score[d] = score.get(d, 0.0) + w / (k + r)
                best[d] = min(best.get(d, 1 << 30), r)
        order = sorted(score, key=lambda d: (-score[d], best[d], d))
        out.append(order[:top])
    return out


def evaluate(c, runs, per_query=False):
    run = {}
    for qid, docs in zip(c.qids, runs):
        run[qid] = {c.doc_ids[d]: float(len(docs) - i) for i, d in enumerate(docs[:K])}
    ev = pytrec_eval.RelevanceEvaluator(c.qrels, {"ndcg_cut_10"})
    res = ev.evaluate(run)
    vals = np.array([res[q]["ndcg_cut_10"] if q in res else 0.0 for q in c.qids])
    return vals if per_query else float(vals.mean())


# ---- feedback ---------------------------------------------------------------------------------
def rm3_weights(c, fb_lists, m=10, n_terms=10, alpha=0.5, doc_weight="rank", exclude_query=False,
                min_df=1):
    """RM3 query weight vectors.

    Feedback model RM1: P(t|R) ∝ Σ_{d in top m} w_d · tf(t,d)/|d|, d's weight w_d = 1/(60+rank)
    ("rank") or uniform ("uniform"); keep the n_terms most probable keys (ties: key order), L1
    normalise; original query weights L1-normalised; q' = alpha·q + (1-alpha)·fb.
    """
    out = np.zeros_like(c.qw)
    p_td = c.tf / np.maximum(c.tf.sum(1, keepdims=True), 1.0)
    for q, lst in enumerate(fb_lists):
        docs = lst[:m]
        if not docs:
            out[q] = c.qw[q]
            continue
        if doc_weight == "rank":
            w = np.array([1.0 / (RRF_K + r) for r in range(1, len(docs) + 1)])
        else:
            w = np.ones(len(docs))
        fb = w @ p_td[docs]
        if exclude_query:
            fb[c.qw[q] > 0] = 0
        fb[c.df < min_df] = 0
        if n_terms < len(fb):
            keep = np.argsort(-fb, kind="stable")[:n_terms]
            z = np.zeros_like(fb)
            z[keep] = fb[keep]
            fb = z
        fb = fb / fb.sum() if fb.sum() > 0 else fb
        qn = c.qw[q] / c.qw[q].sum() if c.qw[q].sum() > 0 else c.qw[q]
        out[q] = alpha * qn + (1 - alpha) * fb
    return out


def rocchio_weights(c, fb_lists, m=10, n_terms=10, alpha=1.0, beta=0.75):
    """Lexical Rocchio on BM25 document vectors: fb = mean over top m of tfn·idf, n_terms best keys
    (query keys included), each vector max-normalised; q' = alpha·q/max(q) + beta·fb/max(fb)."""
    out = np.zeros_like(c.qw)
    for q, lst in enumerate(fb_lists):
        docs = lst[:m]
        if not docs:
            out[q] = c.qw[q]
            continue
        fb = (c.tfn[docs] * c.idf).mean(0)
        keep = np.argsort(-fb, kind="stable")[:n_terms]
        z = np.zeros_like(fb)
        z[keep] = fb[keep]
        qn = c.qw[q] / c.qw[q].max() if c.qw[q].max() > 0 else c.qw[q]
        out[q] = alpha * qn + beta * z / z.max()
    return out


def dfr_weights(c, fb_lists, m=3, n_terms=10, method="bo1", beta=1.0):
    """Terrier-style query expansion (Amati's DFR Bo1, or Carpineto's KL) on the top m documents.

    tf_R(t): the key's count summed over the m feedback documents; cf(t): its count in the
    collection; N searchable documents; T_R, T_C total key counts of the feedback set and of
    the collection.
      Bo1: w(t) = tf_R · log2((1 + λ)/λ) + log2(1 + λ),  λ = cf(t)/N
      KL:  w(t) = P_R · log2(P_R / P_C),  P_R = tf_R/T_R, P_C = cf/T_C
    The n_terms best keys (query keys may be among them) are kept; q' = q/max(q) + beta·w/max(w)
    (Terrier: original weight qtf/max qtf, expansion weight normalised by the best key's).
    """
    cf = c.tf.sum(0)
    tc = cf.sum()
    out = np.zeros_like(c.qw)
    for q, lst in enumerate(fb_lists):
        docs = lst[:m]
        qn = c.qw[q] / c.qw[q].max() if c.qw[q].max() > 0 else c.qw[q]
        if not docs:
            out[q] = qn
            continue
        tfr = c.tf[docs].sum(0)
        w = np.zeros_like(tfr)
        nz = tfr > 0
        if method == "bo1":
            lam = cf[nz] / c.n_docs
            w[nz] = tfr[nz] * np.log2((1 + lam) / lam) + np.log2(1 + lam)
        else:
            pr = tfr[nz] / tfr.sum()
            pc = cf[nz] / tc
            w[nz] = np.maximum(pr * np.log2(pr / pc), 0.0)
        keep = np.argsort(-w, kind="stable")[:n_terms]
        z = np.zeros_like(w)
        z[keep] = w[keep]
        out[q] = qn + (beta * z / z.max() if z.max() > 0 else 0)
    return out


def vector_prf(c, fb_lists, m=3, beta=1.0):
    """Rocchio in embedding space: q' = normalise(q + beta·mean(top m doc vectors))."""
    out = np.zeros_like(c.qv)
    for q, lst in enumerate(fb_lists):
        docs = lst[:m]
        v = c.qv[q].copy()
        if docs:
            v = v + beta * c.dv[docs].mean(0)
        out[q] = v / np.linalg.norm(v)
    return out


def main():
    sweep = "--sweep" in sys.argv
    cols = {}
    rows = []

    def add(name, c, runs):
        v = evaluate(c, runs)
        cols.setdefault(name, {})[c.name] = v
        if name not in rows:
            rows.append(name)

    for name in SETS:
        c = Collection(name)
        sem, lex = c.semantic(), c.lexical()
        hyb_full = rrf([sem, lex], top=WINDOW)
        hyb = [h[:K] for h in hyb_full]
        add("semantic (e5 cosine)", c, [s[:K] for s in sem])
        add("lexical (BM25, pg_corpus analyser)", c, [l[:K] for l in lex])
        add("hybrid RRF(sem, lex) — baseline", c, hyb)

        # 1. RM3 on the lexical side
        rm3_lex = c.lexical(rm3_weights(c, lex))
        rm3_hyb = c.lexical(rm3_weights(c, hyb_full))
        add("RM3 lexical alone (fb: lexical top 10, 10 terms, α 0.5)", c, [l[:K] for l in rm3_lex])
        add("RM3 lexical alone (fb: hybrid top 10, 10 terms, α 0.5)", c, [l[:K] for l in rm3_hyb])
        add("RRF(sem, RM3-lex[fb lex])", c, rrf([sem, rm3_lex]))
        add("RRF(sem, RM3-lex[fb hyb])", c, rrf([sem, rm3_hyb]))
        # Rocchio lexical
        roc_hyb = c.lexical(rocchio_weights(c, hyb_full))
        add("Rocchio lexical alone (fb: hybrid top 10, 10 terms)", c, [l[:K] for l in roc_hyb])
        add("RRF(sem, Rocchio-lex[fb hyb])", c, rrf([sem, roc_hyb]))

        # 2. vector PRF
        vq_sem = c.semantic(vector_prf(c, sem, m=3, beta=1.0))
        vq_hyb = c.semantic(vector_prf(c, hyb_full, m=3, beta=1.0))
        add("vector PRF alone (fb: semantic top 3, β 1)", c, [s[:K] for s in vq_sem])
        add("vector PRF alone (fb: hybrid top 3, β 1)", c, [s[:K] for s in vq_hyb])
        add("RRF(vPRF[fb hyb], lex)", c, rrf([vq_hyb, lex]))
        add("RRF(vPRF[fb hyb], RM3-lex[fb hyb])", c, rrf([vq_hyb, rm3_hyb]))

        # 3. extra lists
        add("RRF(sem, lex, RM3-lex[fb hyb])", c, rrf([sem, lex, rm3_hyb]))
        add("RRF(sem, lex, vPRF[fb hyb])", c, rrf([sem, lex, vq_hyb]))
        add("RRF(sem, lex, vPRF[fb hyb], RM3-lex[fb hyb])", c, rrf([sem, lex, vq_hyb, rm3_hyb]))

    print("| method | HeQ val | Cranfield |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r} | {cols[r].get('heq-val', float('nan')):.4f} | {cols[r].get('cranfield', float('nan')):.4f} |")


if __name__ == "__main__":
    main()
