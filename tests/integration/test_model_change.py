"""A model change without an outage, on a labelled set: the HeQ fixture's embeddings are rebuilt
with "another model" (a random rotation of every vector: distances among new vectors are the old
ones, between a new and an old vector meaningless, as between two real models) in a new column
by a worker, while the old column serves every search; the build switches by itself when its
backlog is empty. nDCG@10 is measured before, halfway through and after the switch (with the
queries embedded by the new model), and query vectors declared as another model's than the
embeddings they would be compared with are refused. A server killed during the build or during
the switch loses nothing: the build resumes and the switch happened entirely or not at all."""
import importlib.util
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLD = ROOT / "tests" / "fixtures" / "gold" / "heq-val"
PGCLUSTER = ROOT / "scripts" / "pgcluster.sh"
OLD, NEW = "e5-small", "e5-rotated"
MODES = ("semantic", "hybrid")


def _loader():
    spec = importlib.util.spec_from_file_location("load_beir", ROOT / "scripts" / "load_beir.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


load_beir = _loader()
ROTATION = np.linalg.qr(np.random.default_rng(29).normal(size=(384, 384)))[0]


def vec_text(v):
    return "[" + ",".join(f"{x:.7g}" for x in v) + "]"


def rotated(text):
    return vec_text(ROTATION @ np.array(json.loads(text), dtype=np.float64))


def load(conn):
    load_beir.load_beir(conn, GOLD, corpus="heq", gold_set="heq", create_schema=True)
    # the loader records no model: the slot says which model its vectors came from
    conn.execute("UPDATE corpus.embedding_slots SET model = %s WHERE item_table = 'precedent_chunks'::regclass",
                 [OLD])
    conn.execute("ALTER TABLE precedent_chunks ADD COLUMN embedding_v2 vector(384)")


def ndcg(conn, gold_set):
    rows = conn.execute("SELECT mode, ndcg_at_k FROM corpus.corpus_evaluate(%s, modes => %s::text[], k => 10, "
                        "max_per_parent => NULL::int, store => false)", [gold_set, list(MODES)]).fetchall()
    return dict(rows)


def work(conn, limit=None):
    """The re-embed worker with the new model: claims the new column's items and stores the
    rotation of their vectors. Returns how many it stored."""
    stored = 0
    while limit is None or stored < limit:
        batch = 50 if limit is None else min(50, limit - stored)
        rows = conn.execute("SELECT item_table::text, embedding_column::text, item_id, version, model "
                            "FROM corpus.corpus_embedding_claim(batch_size => %s)", [batch]).fetchall()
        if not rows:
            break
        for table, column, item_id, version, model in rows:
            assert (column, model) == ("embedding_v2", NEW)
            old = conn.execute("SELECT embedding::text FROM precedent_chunks WHERE id = %s", [int(item_id)]).fetchone()[0]
            outcome = conn.execute("SELECT corpus.corpus_embedding_complete(%s::regclass, %s, %s, %s, %s::vector, %s)",
                                   [table, column, item_id, version, rotated(old), NEW]).fetchone()[0]
            assert outcome == "stored", outcome
            stored += 1
    return stored


def column_of(conn):
    return conn.execute("SELECT embedding_column::text FROM corpus.sources WHERE corpus = 'heq'").fetchone()[0]


def search_error(conn, vec, model):
    with pytest.raises(psycopg.Error) as e:
        conn.execute("SELECT * FROM corpus.corpus_hybrid_search('heq', %s::vector, 'מה', query_model => %s)",
                     [vec, model])
    return e.value


@pytest.fixture(scope="module")
def db(cluster):
    conn = cluster.create_db("pgc_model_change")
    load(conn)
    return conn


def test_a_model_change_keeps_ndcg_and_switches_when_built(db):
    query = db.execute("SELECT query_vec::text FROM corpus.gold_queries WHERE gold_set = 'heq' "
                       "ORDER BY query_id LIMIT 1").fetchone()[0]
    before = ndcg(db, "heq")
    assert before["semantic"] > 0.5 and before["hybrid"] > 0.5, before
    total = db.execute("SELECT corpus.corpus_embedding_build('precedent_chunks', 'embedding', 'embedding_v2', %s, "
                       "auto_switch => true)", [NEW]).fetchone()[0]
    assert total == db.execute("SELECT count(*) FROM precedent_chunks").fetchone()[0] > 200

    # halfway: every search answers as before, none ranks an item without its embedding
    assert work(db, limit=total // 2) == total // 2
    notices = []
    db.add_notice_handler(lambda d: notices.append(d.message_primary))
    assert ndcg(db, "heq") == before
    stale = db.execute("SELECT count(*) FROM corpus.corpus_hybrid_search('heq', %s::vector, 'מה', k => 50) "
                       "WHERE embedding_stale", [query]).fetchone()[0]
    assert stale == 0 and not [m for m in notices if m and "without their embeddings" in m], notices
    assert column_of(db) == "embedding"
    # a query embedded by the model being built is refused on the old embeddings, with the switch
    e = search_error(db, rotated(query), NEW)
    assert e.sqlstate == "22023" and f"'{NEW}'" in e.diag.message_primary and f"'{OLD}'" in e.diag.message_primary
    assert "corpus_embedding_switch(" in e.diag.message_hint and "'embedding_v2')" in e.diag.message_hint
    assert "query_model NULL" in e.diag.message_hint
    assert db.execute("SELECT count(*) FROM corpus.corpus_hybrid_search('heq', %s::vector, 'מה', query_model => %s)",
                      [query, OLD]).fetchone()[0] > 0
    # the health check shows the build, which switches by itself
    detail, hint = db.execute("""SELECT detail, hint FROM corpus.corpus_health_check('heq')
                                  WHERE "check" = 'embeddings'""").fetchone()
    building = detail["building"][0]
    assert (building["column"], building["auto_switch"], building["percent"]) == ("embedding_v2", True, 100 * (total // 2) // total), building
    assert "by themselves" in hint

    # the rest: the call that stores the last embedding makes the new column current
    assert work(db) == total - total // 2
    assert column_of(db) == "embedding_v2"
    assert db.execute("SELECT count(*) FROM corpus.embedding_slots WHERE item_table = 'precedent_chunks'::regclass "
                      "AND embedding_column = 'embedding'").fetchone()[0] == 0

    # after: the same quality with the queries embedded by the new model
    db.execute("SELECT corpus.corpus_gold_set_create('heq-v2', 'heq', 'parent')")
    for qid, text, vec in db.execute("SELECT query_id, query_text, query_vec::text FROM corpus.gold_queries "
                                     "WHERE gold_set = 'heq'").fetchall():
        db.execute("INSERT INTO corpus.gold_queries (gold_set, query_id, query_text, query_vec) "
                   "VALUES ('heq-v2', %s, %s, %s::vector)", [qid, text, rotated(vec)])
    db.execute("INSERT INTO corpus.gold_judgments (gold_set, query_id, target, grade) "
               "SELECT 'heq-v2', query_id, target, grade FROM corpus.gold_judgments WHERE gold_set = 'heq'")
    after = ndcg(db, "heq-v2")
    for mode in MODES:
        assert abs(after[mode] - before[mode]) < 0.01, (mode, before, after)
    # the old model's queries no longer fit the embeddings: what declaring the model prevents
    assert ndcg(db, "heq")["semantic"] < before["semantic"] / 2
    e = search_error(db, query, OLD)
    assert e.sqlstate == "22023" and f"model '{NEW}'" in e.diag.message_hint, e.diag.message_hint
    assert "switch" not in e.diag.message_hint


def start(directory):
    res = subprocess.run(["bash", str(PGCLUSTER), "start", directory], capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip().splitlines()[-1]


def test_a_server_killed_during_the_build_or_the_switch_loses_nothing(pgc):
    directory = tempfile.mkdtemp(prefix="pg_corpus_model_crash_")
    try:
        conn = psycopg.connect(start(directory), autocommit=True)
        conn.execute("CREATE EXTENSION vector; CREATE EXTENSION pg_corpus")
        load(conn)
        query = conn.execute("SELECT query_vec::text FROM corpus.gold_queries ORDER BY query_id LIMIT 1").fetchone()[0]
        before = conn.execute("SELECT item_id FROM corpus.corpus_hybrid_search('heq', %s::vector, 'מה', k => 20)",
                              [query]).fetchall()
        total = conn.execute("SELECT corpus.corpus_embedding_build('precedent_chunks', 'embedding', 'embedding_v2', "
                             "%s)", [NEW]).fetchone()[0]
        work(conn, limit=100)
        conn.execute("CHECKPOINT")
        work(conn, limit=20)  # these only in the WAL
        # a worker dies with a claimed batch and a stored embedding it never committed
        open_tx = psycopg.connect(conn.info.dsn)
        claimed = open_tx.execute("SELECT item_id, version FROM corpus.corpus_embedding_claim(batch_size => 5)").fetchall()
        assert len(claimed) == 5
        pgc.kill_9_postmaster(directory)
        for c in (conn, open_tx):
            c.close()
        conn = psycopg.connect(start(directory), autocommit=True)
        waiting = conn.execute("SELECT count(*) FROM corpus.embedding_queue WHERE embedding_column = 'embedding_v2'"
                               ).fetchone()[0]
        assert waiting == total - 120
        assert conn.execute("SELECT count(*) FROM precedent_chunks WHERE embedding_v2 IS NOT NULL").fetchone()[0] == 120
        assert column_of(conn) == "embedding"
        assert conn.execute("SELECT item_id FROM corpus.corpus_hybrid_search('heq', %s::vector, 'מה', k => 20)",
                            [query]).fetchall() == before
        # the claim died with its worker: its items are claimed again once the lease ends
        conn.execute("UPDATE corpus.embedding_queue SET lease_until = now() WHERE state = 'claimed'")
        assert work(conn) == total - 120

        # killed while the switch's transaction is open: nothing of it happened
        switching = psycopg.connect(conn.info.dsn)
        assert switching.execute("SELECT corpus.corpus_embedding_switch('precedent_chunks', 'embedding', "
                                 "'embedding_v2')").fetchone()[0] == 1
        pgc.kill_9_postmaster(directory)
        for c in (conn, switching):
            c.close()
        conn = psycopg.connect(start(directory), autocommit=True)
        assert column_of(conn) == "embedding"
        assert conn.execute("SELECT count(*) FROM corpus.embedding_slots").fetchone()[0] == 2
        assert conn.execute("SELECT item_id FROM corpus.corpus_hybrid_search('heq', %s::vector, 'מה', k => 20)",
                            [query]).fetchall() == before
        assert conn.execute("SELECT corpus.corpus_embedding_switch('precedent_chunks', 'embedding', 'embedding_v2')"
                            ).fetchone()[0] == 1
        assert column_of(conn) == "embedding_v2"
        after = conn.execute("SELECT item_id FROM corpus.corpus_hybrid_search('heq', %s::vector, 'מה', k => 20, "
                             "query_model => %s)", [rotated(query), NEW]).fetchall()
        assert len(set(after) & set(before)) >= 18, (before, after)
        conn.close()
    finally:
        subprocess.run(["bash", str(PGCLUSTER), "stop", directory], capture_output=True, timeout=180)
        subprocess.run(["rm", "-rf", directory])
