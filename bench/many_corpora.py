"""Whole-database DBA operations with many small corpora: corpus_refresh_lexical_stats() and
corpus_health_check() over N corpora sharing one item and one parent table (one isolation value
each), timed in one run, and what one corpus costs of each.

    .venv/bin/python bench/many_corpora.py [--corpora 300] [--items 20]

Starts a private cluster in .pgdata/many (scripts/pgcluster.sh), writes
bench/results/many_corpora.md.
"""
import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import quality_report as qr  # noqa: E402

DBNAME = "pg_corpus_many"
DIM = 8
WORDS = ("appeal permit committee building tenant contract court decision planning zoning license "
         "municipal hearing objection expert witness evidence ruling judgment order").split()


def load(conn, corpora, items, sources=2):
    rng = np.random.default_rng(20261202)
    conn.execute("""
        CREATE TABLE parents (id bigint PRIMARY KEY, kind text NOT NULL, title text NOT NULL);
        CREATE INDEX ON parents (kind);""")
    tables = [f"items{s}" if s else "items" for s in range(sources)]
    for t in tables:
        conn.execute(f"""
            CREATE TABLE {t} (id bigint PRIMARY KEY, parent_id bigint NOT NULL REFERENCES parents (id),
                              body text NOT NULL,
                              tsv tsvector GENERATED ALWAYS AS (corpus.bm25_document(body, 'english')) STORED,
                              emb vector(8));
            CREATE INDEX ON {t} (parent_id);
            CREATE INDEX ON {t} USING gin (tsv);""")
    parents, rows = [], []
    for c in range(corpora):
        for p in range(max(1, items // 5)):
            parents.append((c * 1000 + p, f"c{c}", f"case {c}-{p}"))
        for i in range(items):
            body = " ".join(rng.choice(WORDS, size=30))
            vec = "[" + ",".join(f"{x:.4f}" for x in rng.normal(size=DIM)) + "]"
            rows.append((c * 100000 + i, c * 1000 + i % max(1, items // 5), body, vec))
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO parents VALUES (%s, %s, %s)", parents)
        for t in tables:
            cur.executemany(f"INSERT INTO {t} (id, parent_id, body, emb) VALUES (%s, %s, %s, %s::vector)", rows)
    for t in tables:
        conn.execute(f"CREATE INDEX ON {t} USING hnsw (emb vector_cosine_ops)")
    conn.execute("ANALYZE")
    for c in range(corpora):
        conn.execute("SELECT corpus.corpus_create(%s, isolation => %s)",
                     [f"c{c}", psycopg.types.json.Jsonb({"kind": f"c{c}"})])
        for t in tables:
            conn.execute("""SELECT corpus.corpus_add_source(%s, %s, %s, text_column => 'body',
                                tsv_column => 'tsv', embedding_column => 'emb', parent_table => 'parents',
                                parent_fk => 'parent_id', parent_required => '{title}', language => 'english',
                                min_length => 10)""", [f"c{c}", t, t])


def timed(conn, sql, rounds):
    out = []
    for _ in range(rounds):
        t = time.monotonic()
        rows = conn.execute(sql).fetchall()
        out.append(time.monotonic() - t)
    return min(out), max(out), rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpora", type=int, default=300)
    ap.add_argument("--items", type=int, default=20, help="items per corpus and source")
    ap.add_argument("--sources", type=int, default=2, help="item tables, each a source of every corpus")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dir", type=Path, default=ROOT / ".pgdata" / "many")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "many_corpora.md")
    a = ap.parse_args(argv)
    started = datetime.now(timezone.utc)
    uri = qr.pgcluster("start", a.dir)
    try:
        with qr.fresh_database(uri, DBNAME) as conn:
            t = time.monotonic()
            load(conn, a.corpora, a.items, a.sources)
            qr.log(f"loaded {a.corpora} corpora in {time.monotonic() - t:.1f} s")
            version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_corpus'").fetchone()[0]
            cases = [
                ("corpus_refresh_lexical_stats() (every corpus)",
                 "SELECT * FROM corpus.corpus_refresh_lexical_stats()"),
                ("corpus_refresh_lexical_stats('c0') (one corpus)",
                 "SELECT * FROM corpus.corpus_refresh_lexical_stats('c0')"),
                ("corpus_health_check() (every corpus)", "SELECT * FROM corpus.corpus_health_check()"),
                ("corpus_health_check('c0') (one corpus)", "SELECT * FROM corpus.corpus_health_check('c0')"),
            ]
            results = []
            for name, sql in cases:
                lo, hi, rows = timed(conn, sql, a.rounds)
                results.append((name, lo, hi, len(rows)))
                qr.log(f"{name}: {lo:.2f} s .. {hi:.2f} s, {len(rows)} rows")
    finally:
        qr.pgcluster("stop", a.dir)
    lines = [
        "# Whole-database DBA operations with many corpora",
        "",
        f"`.venv/bin/python bench/many_corpora.py --corpora {a.corpora} --items {a.items} --sources {a.sources}` "
        f"({started:%Y-%m-%d %H:%M} UTC, pg_corpus {version}): {a.corpora} corpora, each with {a.sources} "
        f"sources of {a.items} items in item tables and a parent table they all share (one isolation value "
        f"per corpus); "
        f"best and worst of {a.rounds} runs, one client, warm cache.",
        "",
        "| operation | best | worst | rows |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {n} | {lo:.2f} s | {hi:.2f} s | {r} |" for n, lo, hi, r in results]
    a.out.write_text("\n".join(lines) + "\n")
    qr.log(f"wrote {a.out}")


if __name__ == "__main__":
    main()
