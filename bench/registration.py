"""Registration and the health check of one large source: corpus_add_source over a table of N
items (a parent per ten items, English text of 40 words from a Zipf vocabulary with its
corpus_bm25-analysed column and a GIN index, 32-d embeddings, 5% of them missing), timed with
its phases as another session sees them in corpus.progress; then corpus_health_check of that
corpus, and what registration found.

    .venv/bin/python bench/registration.py [--items 1000000]

Writes bench/results/registration.md.
"""
import sys
import threading
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402

DBNAME = "pg_corpus_registration"
DIM = 32


def load(conn, items, vocabulary):
    parents = max(1, items // 10)
    conn.execute(f"""
        CREATE TABLE parents (id bigint PRIMARY KEY, kind text NOT NULL, title text);
        CREATE TABLE items (id bigint PRIMARY KEY, parent_id bigint NOT NULL REFERENCES parents (id),
                            body text NOT NULL,
                            tsv tsvector GENERATED ALWAYS AS (corpus.bm25_document(body, 'english')) STORED,
                            emb vector({DIM}));
        SET pg_corpus.defer_embedding_queue = on;""")
    conn.execute("INSERT INTO parents SELECT p, CASE WHEN p %% 2 = 0 THEN 'a' ELSE 'b' END, "
                 "CASE WHEN p %% 97 = 0 THEN NULL ELSE 'case ' || p END FROM generate_series(1, %s) p", [parents])
    # a Zipf-like draw: the rank is floor(V ^ random()) (the log of the rank is uniform)
    conn.execute(f"""
        INSERT INTO items (id, parent_id, body, emb)
        SELECT i, 1 + i %% %(parents)s,
               (SELECT string_agg((%(vocab)s::text[])[floor(power(cardinality(%(vocab)s::text[]), random()))::int],
                                  ' ') FROM generate_series(1, 40) WHERE i > 0),
               CASE WHEN i %% 20 = 0 THEN NULL ELSE
                   (SELECT array_agg(random() - 0.5)::vector({DIM}) FROM generate_series(1, {DIM}) WHERE i > 0) END
          FROM generate_series(1, %(items)s) i""", {"parents": parents, "vocab": [str(w) for w in vocabulary], "items": items})
    conn.execute("RESET pg_corpus.defer_embedding_queue")
    conn.execute("CREATE INDEX ON items (parent_id); CREATE INDEX ON items USING gin (tsv)")
    conn.execute("VACUUM ANALYZE")


def watch(dsn, pid, stop, phases):
    """Poll corpus.progress from another session: (phase, first seen, last seen) in order, the
    phases of the statistics refresh a registration runs included."""
    with psycopg.connect(dsn, autocommit=True) as c:
        while not stop.is_set():
            for (phase,) in c.execute("SELECT command || ': ' || phase FROM corpus.progress WHERE pid = %s", [pid]):
                now = time.monotonic()
                if phases and phases[-1][0] == phase:
                    phases[-1][2] = now
                else:
                    phases.append([phase, now, now])
            time.sleep(0.05)


def params(p):
    p.add_argument("--items", type=int, default=1_000_000)


def run(a):
    started = h.now()
    import numpy as np
    vocabulary = h.vocabulary(np.random.default_rng(20261203), 20_000)
    with h.Cluster(a.dir, keep=a.keep) as uri, h.fresh_database(uri, DBNAME) as conn:
        t = time.monotonic()
        load(conn, a.items, vocabulary)
        h.log(f"loaded {a.items} items in {time.monotonic() - t:.1f} s")
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_corpus'").fetchone()[0]
        conn.execute("SELECT corpus.corpus_create('big', isolation => '{\"kind\": [\"a\", \"b\"]}')")
        stop, phases = threading.Event(), []
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        watcher = threading.Thread(target=watch, args=(h.dsn(uri, DBNAME), pid, stop, phases))
        watcher.start()
        t0 = time.monotonic()
        with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
            found = cur.execute("""SELECT * FROM corpus.corpus_add_source('big', 'items', 'items',
                                       text_column => 'body', tsv_column => 'tsv', embedding_column => 'emb',
                                       parent_table => 'parents', parent_fk => 'parent_id',
                                       parent_required => '{title}', language => 'english', min_length => 10)"""
                                ).fetchone()
        register = time.monotonic() - t0
        stop.set()
        watcher.join()
        h.log(f"registration: {register:.1f} s, {found}")
        health_s = []
        for _ in range(2):
            ms, rows = h.timed(lambda: conn.execute("SELECT * FROM corpus.corpus_health_check('big')").fetchall())
            health_s.append(ms / 1000)
        h.log(f"health check: {min(health_s):.1f} s .. {max(health_s):.1f} s")
    phase_rows = [(p, f"{last - first:.1f} s" if last > first else "< 0.1 s", f"{first - t0:.1f} s")
                  for p, first, last in phases]
    text = "\n".join([
        "# Registration and the health check of one large source", "",
        f"`{a.command}` ({started}, pg_corpus {version}): {a.items:,} items under {max(1, a.items // 10):,} "
        f"parents (1% without a title), 40 words each from a 20,000-word Zipf vocabulary analysed by "
        f"`corpus.bm25_document(body, 'english')` with a GIN index, {DIM}-d embeddings (5% missing, queued at "
        "registration), no HNSW index; one corpus holding every item. One client, warm cache.", "",
        h.table(["operation", "time"], [("corpus_add_source", f"{register:.1f} s"),
                                        ("corpus_health_check('big'), best of 2", f"{min(health_s):.1f} s"),
                                        ("corpus_health_check('big'), worst of 2", f"{max(health_s):.1f} s")]),
        "", "Registration's phases as another session saw them in `corpus.progress` (polled every 50 ms):", "",
        h.table(["phase", "seen for", "first seen after"], phase_rows), "",
        "What it found (its answer):", "",
        h.table(list(found), [list(found.values())])]) + "\n"
    Path(a.out).write_text(text)
    h.log(f"wrote {a.out}")


SPEC = h.Spec(name="registration", about=__doc__.split("\n")[0], run=run, params=params,
              outputs={"--out": h.RESULTS / "registration.md"}, smoke=["--items", "2000"])

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
