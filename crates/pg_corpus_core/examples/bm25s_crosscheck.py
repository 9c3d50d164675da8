"""Cross-check pg_corpus' BM25 against bm25s on the tokens pg_corpus' analyser produced.

    cargo run -p pg_corpus_core --release --example bm25_dump -- \
        /work/shared/data/cranfield english /tmp/cranfield_dump.json [weights]
    /work/main/.venv/bin/python crates/pg_corpus_core/examples/bm25s_crosscheck.py \
        /tmp/cranfield_dump.json

bm25s (method="lucene": idf ln(1 + (N - df + 0.5)/(df + 0.5)), tf/(tf + k1(1 - b + b dl/avgdl)))
indexes the dumped document tokens with the dump's k1 and b; for every query, bm25s scores
the documents one query term at a time (get_scores([key]), which is what get_scores over the
whole token list adds up), and pg_corpus' score must be sum(weight * count * that) for every
document: equal zero patterns, and relative difference <= 1e-4 (bm25s stores float32).
Exit status 1 if not.
"""
import json
import os
import sys

os.environ.setdefault("DISABLE_TQDM", "1")
import bm25s  # noqa: E402
import numpy as np  # noqa: E402


def main(path):
    dump = json.load(open(path))
    docs = [d["tokens"] for d in dump["docs"]]
    r = bm25s.BM25(method="lucene", k1=dump["k1"], b=dump["b"])
    r.index(docs, show_progress=False)
    n = len(docs)
    worst, compared, mismatched_support, plain_checked = 0.0, 0, 0, 0
    plain_worst = 0.0
    for q in dump["queries"]:
        ours = np.zeros(n)
        for i, s in q["scores"]:
            ours[i] = s
        theirs = np.zeros(n)
        for key, weight, count in q["terms"]:
            if key in r.vocab_dict:
                theirs += weight * count * r.get_scores([key]).astype(np.float64)
        if not np.array_equal(ours > 0, theirs > 0):
            mismatched_support += 1
        both = (ours > 0) & (theirs > 0)
        if both.any():
            rel = np.abs(ours[both] - theirs[both]) / np.abs(theirs[both])
            worst = max(worst, float(rel.max()))
            compared += int(both.sum())
        if all(w == 1.0 for _, w, _ in q["terms"]):
            # Unweighted: also bm25s' own get_scores over the query's surface token list.
            whole = r.get_scores(q["tokens"]).astype(np.float64)
            m = whole > 0
            if m.any():
                plain_worst = max(plain_worst, float((np.abs(ours[m] - whole[m]) / whole[m]).max()))
            plain_checked += 1
    print(f"collection {dump['collection']}, language {dump['language']}, bm25s {bm25s.__version__} "
          f"method=lucene k1={dump['k1']} b={dump['b']}")
    print(f"{len(dump['queries'])} queries, {compared} (query, document) scores compared")
    print(f"queries whose set of scored documents differs: {mismatched_support}")
    print(f"largest relative difference (per-term sum): {worst:.3e}")
    if plain_checked:
        print(f"largest relative difference (bm25s get_scores over the token list, "
              f"{plain_checked} unweighted queries): {plain_worst:.3e}")
    ok = mismatched_support == 0 and worst <= 1e-4 and plain_worst <= 1e-4
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
