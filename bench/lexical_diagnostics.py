#!/usr/bin/env python3
"""The cost of the searchable contract's text check per BM25 candidate, quoted in
docs/lexical-speed.md and crates/pg_corpus_core/src/plan.rs: EXPLAIN (ANALYZE, TIMING OFF) of the
GIN scan of the first mixed query's index keys (as corpus_explain prints its BM25 subplan) on the
80% corpus of bench/lexical_speed.py's database, with and without the text-length check.

    .venv/bin/python bench/lexical_speed.py --keep      # or any earlier run of it
    .venv/bin/python bench/lexical_diagnostics.py

Runs against the database bench/lexical_speed.py leaves in its cluster folder (starting the
cluster if it is stopped, and leaving it as it found it), with the queries of its raw JSON.
"""
import json
import sys
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
import lexical_speed as ls  # noqa: E402


def params(p):
    p.add_argument("--dir", default=str(h.ROOT / ".pgdata" / "bench-lexical_speed"),
                   help="bench/lexical_speed.py's cluster folder")
    p.add_argument("--db", default="lexical_speed_main")
    p.add_argument("--corpus", default="external")
    p.add_argument("--raw", default=str(ls.SPEC.outputs["--raw"]), help="bench/lexical_speed.py's raw JSON")


def exec_ms(conn, sql, args):
    plan = h.explain_json(conn, sql, args, [("random_page_cost", "1.1")], timing=False)
    return plan["Execution Time"], plan["Plan"]["Actual Rows"]


def run(a):
    queries = json.loads(Path(a.raw).read_text())["queries"]
    with h.Cluster(a.dir, keep=h.running(a.dir)) as uri, psycopg.connect(h.dsn(uri, a.db), autocommit=True) as conn:
        text = next(q for q in queries if q["kind"] == "mixed")["text"]
        keys = ls.query_statistics(conn, a.corpus, text)["index_keys"]
        tsq = " | ".join("'" + k.replace("'", "''") + "'" for k in keys)
        base = "SELECT i.id FROM precedent_chunks i WHERE i.content_bm25 @@ %s::tsquery"
        checked = base + " AND char_length(btrim(content)) >= 50"
        for _ in range(2):  # warm: the heap and the text's TOAST pages
            exec_ms(conn, base, [tsq])
            exec_ms(conn, checked, [tsq])
        ms, rows = exec_ms(conn, base, [tsq])
        ms_text, _ = exec_ms(conn, checked, [tsq])
    print(f"GIN candidates of {tsq!r}: {rows} rows; scan {ms:.1f} ms, with the text-length check {ms_text:.1f} ms")


SPEC = h.Spec(name="lexical_diagnostics", about=__doc__.split("\n\n")[0], run=run, params=params,
              cluster=False, smoke=["--raw", str(h.OUT / "smoke" / "lexical_speed" / "lexical_speed.json")])

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
