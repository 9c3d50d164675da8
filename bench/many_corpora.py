"""Whole-database DBA operations with many small corpora: corpus_refresh_lexical_stats() and
corpus_health_check() over N corpora sharing one item and one parent table (one isolation value
each), timed in one run, and what one corpus costs of each.

    .venv/bin/python bench/many_corpora.py [--corpora 300] [--items 20]

Writes bench/results/many_corpora.md.
"""
import sys
import time
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402

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


def params(p):
    p.add_argument("--corpora", type=int, default=300)
    p.add_argument("--items", type=int, default=20, help="items per corpus and source")
    p.add_argument("--sources", type=int, default=2, help="item tables, each a source of every corpus")
    p.add_argument("--rounds", type=int, default=2)


CASES = [("corpus_refresh_lexical_stats() (every corpus)", "SELECT * FROM corpus.corpus_refresh_lexical_stats()"),
         ("corpus_refresh_lexical_stats('c0') (one corpus)", "SELECT * FROM corpus.corpus_refresh_lexical_stats('c0')"),
         ("corpus_health_check() (every corpus)", "SELECT * FROM corpus.corpus_health_check()"),
         ("corpus_health_check('c0') (one corpus)", "SELECT * FROM corpus.corpus_health_check('c0')")]


def run(a):
    started = h.now()
    with h.Cluster(a.dir, keep=a.keep) as uri, h.fresh_database(uri, DBNAME) as conn:
        t = time.monotonic()
        load(conn, a.corpora, a.items, a.sources)
        h.log(f"loaded {a.corpora} corpora in {time.monotonic() - t:.1f} s")
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_corpus'").fetchone()[0]
        results = []
        for name, query in CASES:
            times, rows = [], []
            for _ in range(a.rounds):
                ms, rows = h.timed(lambda: conn.execute(query).fetchall())
                times.append(ms / 1000)
            results.append((name, f"{min(times):.2f} s", f"{max(times):.2f} s", len(rows)))
            h.log(f"{name}: {min(times):.2f} s .. {max(times):.2f} s, {len(rows)} rows")
    text = "\n".join([
        "# Whole-database DBA operations with many corpora", "",
        f"`{a.command}` ({started}, pg_corpus {version}): {a.corpora} corpora, each with {a.sources} "
        f"sources of {a.items} items in item tables and a parent table they all share (one isolation value "
        f"per corpus); best and worst of {a.rounds} runs, one client, warm cache.", "",
        h.table(["operation", "best", "worst", "rows"], results)]) + "\n"
    Path(a.out).write_text(text)
    h.log(f"wrote {a.out}")


SPEC = h.Spec(name="many_corpora", about=__doc__.split("\n")[0], run=run, params=params,
              outputs={"--out": h.RESULTS / "many_corpora.md"},
              smoke=["--corpora", "5", "--items", "5", "--rounds", "1"])

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
