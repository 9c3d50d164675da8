#!/usr/bin/env python3
"""Load the demo sample (demo/sample/) into a fresh database and define the three corpora.

    python demo/load_sample.py URI [--dbname pg_corpus_demo]

URI is any database of the target cluster (e.g. what `scripts/pgcluster.sh start DIR` prints).
The database DBNAME is dropped (with FORCE: open sessions on it are ended) and created anew, so
running this twice gives the same result. Steps: tests/fixtures/legal_schema.sql (creates the
extensions; its lexical columns are built by the analyser), COPY of the fixture,
legal_indexes.sql, legal_corpora.sql (language => 'hebrew' on every source), then a gold set per
corpus from the sample's labelled queries (`sample-<corpus>`) and the evidence filter's vector
thresholds calibrated on it, as a deployment would on its own questions.

Prints the URI of the loaded database on stdout (progress goes to stderr).
"""
import argparse
import json
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "demo" / "sample"
FIXTURES = ROOT / "tests" / "fixtures"

# Table -> (columns in COPY order, their types). Generated tsvector columns are left out.
TABLES = {
    "case_law": (["id", "case_number", "case_name", "court", "source_kind", "practice_area",
                  "headnote", "summary", "tags"],
                 ["int8", "text", "text", "text", "text", "text", "text", "text", "text[]"]),
    "precedent_chunks": (["id", "case_law_id", "chunk_index", "page_number", "content"],
                         ["int8", "int8", "int4", "int4", "text"]),
    "halachot": (["id", "case_law_id", "rule", "supporting_quote", "page_number", "review_status"],
                 ["int8", "int8", "text", "text", "int4", "text"]),
    "document_chunks": (["id", "document_id", "case_id", "practice_area", "page_number", "section",
                         "content"],
                        ["int8", "int8", "int8", "text", "int4", "text", "text"]),
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def with_dbname(uri, dbname):
    """The same connection string pointing at another database (URI form kept when given)."""
    if uri.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(uri)
        return urlunsplit(parts._replace(path="/" + quote(dbname)))
    return make_conninfo(uri, dbname=dbname)


def vector_text(row):
    # str() of a numpy float32 is its shortest round-trip form, so the stored vector is exact.
    return "[" + ",".join(map(str, row)) + "]"


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def recreate_database(uri, dbname):
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))


def copy_table(conn, table):
    columns, types = TABLES[table]
    rows = read_jsonl(SAMPLE / f"{table}.jsonl")
    vec_file = SAMPLE / f"{table}.npy"
    vectors = np.load(vec_file) if vec_file.exists() else None
    if vectors is not None:
        assert len(vectors) == len(rows), f"{vec_file}: {len(vectors)} vectors for {len(rows)} rows"
        columns, types = columns + ["embedding"], types + ["text"]  # text form, parsed by pgvector
    stmt = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns)))
    with conn.cursor() as cur, cur.copy(stmt) as copy:
        copy.set_types(types)
        for i, row in enumerate(rows):
            values = [row[c] for c in TABLES[table][0]]
            if vectors is not None:
                values.append(vector_text(vectors[i]))
            copy.write_row(values)
    return len(rows)


def calibrate_evidence(conn):
    """A gold set per corpus from the sample's labelled queries, and the evidence filter's vector
    thresholds calibrated on it (corpus_calibrate_evidence, applied)."""
    queries = read_jsonl(SAMPLE / "queries.jsonl")
    vectors = np.load(SAMPLE / "queries.npy")
    for corpus in sorted({q["corpus"] for q in queries}):
        gold = f"sample-{corpus}"
        conn.execute("SELECT corpus.corpus_gold_set_create(%s, %s)", [gold, corpus])
        for q, vec in zip(queries, vectors):
            if q["corpus"] != corpus:
                continue
            conn.execute("INSERT INTO corpus.gold_queries (gold_set, query_id, query_text, query_vec, filters) "
                         "VALUES (%s, %s, %s, %s::vector, %s)",
                         [gold, q["id"], q["text"], vector_text(vec), json.dumps(q["filters"])])
            for target in q["relevant"]:
                conn.execute("INSERT INTO corpus.gold_judgments (gold_set, query_id, target, grade) "
                             "VALUES (%s, %s, %s, 1)", [gold, q["id"], target])
        row = conn.execute("SELECT max_distance, max_gap FROM corpus.corpus_calibrate_evidence(%s, quantile => 1, "
                           "apply => true)", [gold]).fetchone()
        log(f"  corpus {corpus:20} evidence thresholds max_distance {row[0]:.4f}, max_gap {row[1]:.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("uri", help="libpq URI of any database of the cluster")
    ap.add_argument("--dbname", default="pg_corpus_demo", help="database to (re)create")
    args = ap.parse_args()

    started = time.monotonic()
    demo_uri = with_dbname(args.uri, args.dbname)
    recreate_database(args.uri, args.dbname)
    log(f"created database {args.dbname}")
    with psycopg.connect(demo_uri) as conn:
        # Whole scripts without parameters: psycopg sends them as one simple query.
        conn.execute((FIXTURES / "legal_schema.sql").read_text())
        for table in TABLES:
            log(f"  {table:17} {copy_table(conn, table):4} rows")
        conn.commit()
        # After the load: HNSW builds are faster on full tables; the script also ANALYZEs.
        conn.execute((FIXTURES / "legal_indexes.sql").read_text())
        conn.commit()
        conn.execute((FIXTURES / "legal_corpora.sql").read_text())
        conn.commit()
        calibrate_evidence(conn)
        conn.commit()
        for name, source, language in conn.execute(
                "SELECT corpus, name, coalesce(language, 'none: ' || ts_config::text) FROM corpus.sources ORDER BY 1, 2"):
            log(f"  corpus {name:20} source {source:9} analyser {language}")
    log(f"loaded in {time.monotonic() - started:.1f} s")
    print(demo_uri)


if __name__ == "__main__":
    try:
        main()
    except psycopg.Error as e:
        diag = e.diag
        log(f"load_sample: {diag.sqlstate or ''} {diag.message_primary or e}")
        if diag.message_hint:
            log(f"hint: {diag.message_hint}")
        if diag.sqlstate in ("0A000", "58P01") and "pg_corpus" in str(e):  # not installed
            log("pg_corpus is not installed in this server: run `make install` first.")
        sys.exit(1)
