#!/usr/bin/env python3
"""What the search audit log costs (docs/audit.md): p50 of `corpus_hybrid_search` on a corpus
that logs its searches against the same corpus that does not, interleaved query by query in one
session (target: at most 5% of a search's p50).

    .venv/bin/python bench/audit_cost.py          # writes docs/audit.md

Each labelled set is loaded by scripts/load_beir.py as corpus A; corpus B is the same definition
(the same source over the same rows, registered from A's catalog row) with
`audit => '{"enabled": true}'`. Every gold query is searched on A and on B, in a new shuffled
order per query and round (bench/harness.py interleave_queries), in hybrid, semantic and lexical
mode; the log rows B wrote are counted, so the measurement cannot
pass without logging.
"""
import statistics
import sys
from pathlib import Path

import numpy as np
from psycopg.types.json import Jsonb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
import load_beir  # noqa: E402
import harness as h  # noqa: E402
import quality_report as qr  # noqa: E402

DBNAME = "audit_bench"
K = 10
SEARCH = "SELECT count(*) FROM corpus.corpus_hybrid_search(%s, %s::vector, %s, k => %s, mode => %s)"
# corpus_add_source's arguments that load_beir sets, with their SQL types
SOURCE_COLUMNS = {"item_table": "regclass", "text_column": "text", "embedding_column": "text", "tsv_column": "text",
                  "id_column": "text", "parent_table": "regclass", "parent_fk": "text", "parent_key": "text",
                  "parent_required": "text[]", "rule": "jsonb", "locator": "jsonb", "metadata": "jsonb",
                  "min_length": "integer", "ts_config": "regconfig", "distance": "text", "language": "text"}


def clone_logged(conn, corpus):
    """Corpus `<corpus>_logged`: the same isolation and source as `corpus`, with the audit log on."""
    logged = f"{corpus}_logged"
    conn.execute("SELECT corpus.corpus_drop(%s, if_exists => true)", [logged])
    iso = conn.execute("SELECT isolation FROM corpus.corpora WHERE name = %s", [corpus]).fetchone()[0]
    conn.execute("SELECT corpus.corpus_create(%s, isolation => %s, audit => %s)",
                 [logged, Jsonb(iso), Jsonb({"enabled": True})])
    row = conn.execute(f"SELECT name, {', '.join(c + '::text' for c in SOURCE_COLUMNS)} FROM corpus.sources "
                       "WHERE corpus = %s", [corpus]).fetchone()
    args = ", ".join(f"{c} => %s::{t}" for c, t in SOURCE_COLUMNS.items())
    conn.execute(f"SELECT corpus.corpus_add_source(%s, %s, {args})", [logged, row[0], *row[1:]])
    return logged


def measure(conn, folder, corpus, gold, language, queries_n, rounds):
    load_beir.load_beir(conn, folder, corpus=corpus, gold_set=gold, create_schema=True, log=qr.log, language=language)
    logged = clone_logged(conn, corpus)
    queries = conn.execute("SELECT query_text, query_vec::text FROM corpus.gold_queries WHERE gold_set = %s "
                           "ORDER BY query_id LIMIT %s", [gold, queries_n]).fetchall()
    before = conn.execute("SELECT count(*) FROM corpus.search_audit").fetchone()[0]
    out = {}
    # the last run: hybrid with synchronous_commit = off in the session, which shows how much of
    # the cost is the WAL flush that committing a write (the row) needs
    rng = np.random.default_rng(0)
    for mode, sync in (("hybrid", True), ("semantic", True), ("lexical", True), ("hybrid", False)):
        conn.execute(f"SET synchronous_commit = {'on' if sync else 'off'}")
        times = h.interleave_queries(
            lambda q: {c: (lambda c=c: conn.execute(SEARCH, (c, q[1], q[0], K, mode)).fetchone())
                       for c in (corpus, logged)}, queries, rounds, rng)
        label = mode if sync else f"{mode}, synchronous_commit = off"
        out[label] = (statistics.median(times[corpus]), statistics.median(times[logged]))
        qr.log(f"{gold} {label}: plain {out[label][0]:.2f} ms, logged {out[label][1]:.2f} ms")
    conn.execute("RESET synchronous_commit")
    rows = conn.execute("SELECT count(*) FROM corpus.search_audit").fetchone()[0] - before
    expected = 4 * (rounds + 1) * len(queries)
    assert rows == expected, f"the logged corpus wrote {rows} rows, {expected} searches ran"
    return out, rows


def write(path, results, command, started, seconds, info):
    lines = ["# What the search audit log costs", "",
             "p50 of `corpus_hybrid_search` on a corpus with `audit => '{\"enabled\": true}'` against the same "
             "corpus without it (the same source over the same rows), interleaved query by query in one session; "
             "bench/audit_cost.py's docstring has the method. Target: the log costs at most 5% of a search's p50.",
             "", "```sh", command, "```", "", f"Run of {started:%Y-%m-%d %H:%M} UTC, {seconds / 60:.1f} min; {info}.",
             "", "| set | mode | p50 ms, no log | p50 ms, logged | Δ ms | logged / no log | target ≤ 1.05 |",
             "|---|---|---:|---:|---:|---:|---|"]
    for name, (out, rows) in results.items():
        for mode, (a, b) in out.items():
            lines.append(f"| {name} | {mode} | {a:.2f} | {b:.2f} | {b - a:+.2f} | {b / a:.3f} | "
                         f"{'met' if b / a <= 1.05 else 'missed'} |")
    lines += ["", "Every search of the logged corpus wrote its row (" + ", ".join(
        f"{name}: {rows} rows" for name, (_, rows) in results.items()) + "). A row costs one INSERT (the results' "
              "ids and the arguments as jsonb, a sha256, two index entries) with the switch to the owner's rights, "
              "in the caller's transaction, whose commit then flushes the WAL as any write's does; the "
              "`synchronous_commit = off` rows show how much of the difference that flush is. The cost is about "
              "the same absolute time for every search, so its share is largest for the fastest searches.", ""]
    path.write_text("\n".join(lines))


def info(a, version, pg):
    return f"PostgreSQL {pg}, pg_corpus {version}, k = {K}, {a.queries} queries per set, {a.rounds} rounds"


SPEC = qr.labelled_spec("audit_cost", DBNAME, __doc__, "audit.md", write=write, info=info,
                        measure=lambda conn, folder, corpus, gold, lang, a: measure(
                            conn, folder, corpus, gold, lang, a.queries, a.rounds),
                        options={"--queries": (100, 5), "--rounds": (3, 1)})

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
