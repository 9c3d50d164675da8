"""A bounded soak of the legal database: searchers, a writer, an embedding worker and a DBA
(statistics refreshes, corpus_alter) at once, for a fixed time. Used by test_soak.py (short, in
CI) and bench/soak.py (longer, more clients, its figures committed).

What it checks, while running and at the end:
- no statement fails (any error of any client is recorded);
- every search returns only items of its corpus (the parent's source_kind), and no hit it
  calls fresh is in the re-embed queue in the search's own snapshot (REPEATABLE READ);
- nothing is lost: after the writer stops and the worker drains the queue, every item the
  writer touched holds the embedding of its current text (the worker embeds a text as a
  deterministic function of it), and nothing is left queued.
"""
import hashlib
import random
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import psycopg

DIM = 384
KIND = {"external_precedents": "external_upload", "internal_decisions": "internal_committee"}
INPUT = {"precedent_chunks": "content", "halachot": "rule"}


def embed(text):
    """The soak's embedding model: a unit vector determined by the text alone."""
    seed = int(hashlib.sha256(text.encode()).hexdigest()[:15], 16)
    v = np.random.default_rng(seed).standard_normal(DIM)
    return (v / np.linalg.norm(v)).astype(np.float32)


def vec_text(v):
    return "[" + ",".join(f"{x:.9g}" for x in v) + "]"


@dataclass
class Stats:
    searches: int = 0
    hits_checked: int = 0
    writes: int = 0
    stored: int = 0
    requeued: int = 0
    refreshes: int = 0
    alters: int = 0
    latencies_ms: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    leaks: list = field(default_factory=list)
    stale_served: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, **kw):
        with self.lock:
            for k, v in kw.items():
                if isinstance(getattr(self, k), list):
                    getattr(self, k).append(v)
                else:
                    setattr(self, k, getattr(self, k) + v)


def guarded(stats, name, fn):
    def run():
        try:
            fn()
        except Exception as e:      # recorded, and the soak fails on it
            stats.add(errors=f"{name}: {type(e).__name__}: {e}")
    return run


def searcher(dsn, stop, stats, seed, queries):
    rng = random.Random(seed)
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            corpus = rng.choice(list(KIND))
            vtext, text = rng.choice(queries)
            mode = rng.choice(["hybrid", "semantic", "lexical"])
            t = time.perf_counter()
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                rows = conn.execute(
                    "SELECT s.source, s.item_id, s.embedding_stale, c.source_kind "
                    "FROM corpus.corpus_hybrid_search(%s, %s::vector, %s, k => 10, mode => %s) s "
                    "JOIN case_law c ON c.id = s.parent_id::bigint",
                    [corpus, vtext if mode != "lexical" else None, text if mode != "semantic" else None, mode],
                ).fetchall()
                table = {"chunks": "precedent_chunks", "halachot": "halachot"}
                fresh = [(table[s], i) for s, i, stale, _ in rows if not stale]
                queued = conn.execute(
                    "SELECT q.item_table::text, q.item_id FROM corpus.embedding_queue q "
                    "JOIN unnest(%s::text[], %s::text[]) AS h(t, i) ON q.item_table = h.t::regclass AND q.item_id = h.i",
                    [[f[0] for f in fresh], [f[1] for f in fresh]],
                ).fetchall()
            stats.add(searches=1, hits_checked=len(rows), latencies_ms=(time.perf_counter() - t) * 1000)
            for s, i, _, kind in rows:
                if kind != KIND[corpus]:
                    stats.add(leaks=(corpus, s, i, kind))
            for q in queued:
                stats.add(stale_served=(corpus, q))


def writer(dsn, stop, stats, seed, touched):
    rng = random.Random(seed)
    with psycopg.connect(dsn, autocommit=True) as conn:
        chunks = [r[0] for r in conn.execute("SELECT id FROM precedent_chunks ORDER BY id")]
        halachot = [r[0] for r in conn.execute("SELECT id FROM halachot ORDER BY id")]
        cases = [r[0] for r in conn.execute("SELECT id FROM case_law ORDER BY id")]
        next_id = 10_000_000 + seed * 100_000
        while not stop.is_set():
            action = rng.random()
            word = f"soakword{rng.randrange(50)} w{rng.randrange(10**6)}"
            if action < 0.5:
                i = rng.choice(chunks)
                conn.execute("UPDATE precedent_chunks SET content = content || ' ' || %s WHERE id = %s", [word, i])
                touched.add(("precedent_chunks", i))
            elif action < 0.7:
                i = rng.choice(halachot)
                conn.execute("UPDATE halachot SET rule = rule || ' ' || %s WHERE id = %s", [word, i])
                touched.add(("halachot", i))
            elif action < 0.9:
                next_id += 1
                conn.execute(
                    "INSERT INTO precedent_chunks (id, case_law_id, chunk_index, content) VALUES (%s, %s, 0, %s)",
                    [next_id, rng.choice(cases), f"a new soak chunk about {word} with enough words to be searchable"])
                chunks.append(next_id)
                touched.add(("precedent_chunks", next_id))
            else:
                try:                       # a change rolled back queues nothing
                    with conn.transaction():
                        i = rng.choice(chunks)
                        conn.execute("UPDATE precedent_chunks SET content = 'rolled back' WHERE id = %s", [i])
                        conn.execute("SELECT 1/0")
                except psycopg.errors.DivisionByZero:
                    pass
            stats.add(writes=1)
            time.sleep(0.002)


def worker(dsn, stop, stats, drain):
    """Claims, embeds and completes until `stop`, then until the queue is empty (`drain`)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            rows = conn.execute("SELECT item_table::text, embedding_column, item_id, version, content "
                                "FROM corpus.corpus_embedding_claim(batch_size => 16, lease => '1 minute', "
                                "worker => 'soak')").fetchall()
            if not rows:
                if stop.is_set() and drain.is_set():
                    return
                time.sleep(0.05)
                continue
            for table, column, item, version, content in rows:
                r = conn.execute("SELECT corpus.corpus_embedding_complete(%s::regclass, %s, %s, %s, %s::vector)",
                                 [table, column, item, version, vec_text(embed(content))]).fetchone()[0]
                if r == "stored":
                    stats.add(stored=1)
                elif r == "requeued":
                    stats.add(requeued=1)


def dba(dsn, stop, stats, seed, every):
    rng = random.Random(seed)
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.wait(every):
            corpus = rng.choice(list(KIND))
            if rng.random() < 0.7:
                conn.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats(%s)", [corpus])
                stats.add(refreshes=1)
            else:
                conn.execute("SELECT corpus.corpus_alter(%s, description => %s)", [corpus, f"soak {time.time()}"])
                stats.add(alters=1)


def run(dsn, seconds, searchers=3, writers=1, workers=1, dbas=2, seed=0, dba_every=1.0):
    """The soak; returns (stats, problems at the end: a list of strings)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        queries = conn.execute(
            "SELECT embedding::text, left(content, 60) FROM precedent_chunks "
            "WHERE embedding IS NOT NULL ORDER BY id LIMIT 40").fetchall()
    stats, stop, drain, touched = Stats(), threading.Event(), threading.Event(), set()
    threads = [threading.Thread(target=guarded(stats, f"searcher {i}", lambda i=i: searcher(
        dsn, stop, stats, seed + i, queries))) for i in range(searchers)]
    threads += [threading.Thread(target=guarded(stats, f"writer {i}", lambda i=i: writer(
        dsn, stop, stats, seed + 100 + i, touched))) for i in range(writers)]
    threads += [threading.Thread(target=guarded(stats, f"dba {i}", lambda i=i: dba(
        dsn, stop, stats, seed + 200 + i, dba_every))) for i in range(dbas)]
    work = [threading.Thread(target=guarded(stats, f"worker {i}", lambda: worker(dsn, stop, stats, drain)))
            for i in range(workers)]
    for t in threads + work:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(120)
    drain.set()
    for t in work:
        t.join(300)
    problems = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM corpus.embedding_queue").fetchone()[0]
        if left:
            problems.append(f"{left} items still queued after the worker drained the queue")
        for table, item in sorted(touched):
            row = conn.execute(f"SELECT {INPUT[table]}, embedding::real[] FROM {table} WHERE id = %s",
                               [item]).fetchone()
            if row is None:
                continue
            text, emb = row
            if emb is None or float(np.dot(np.asarray(emb, dtype=np.float32), embed(text))) < 0.9999:
                problems.append(f"{table} {item}: its embedding is not that of its current text")
    return stats, problems
