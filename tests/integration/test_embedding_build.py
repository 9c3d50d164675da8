"""Blue/green embeddings: corpus_embedding_build fills a new vector column beside the one searches
rank by (its own slot, model, trigger and backlog) while every search answers as before — never
lexical-only because of the change —; corpus_embedding_switch makes the new column current for
every source of every corpus at once, refused while items wait unless forced; the old column's
slot and queue go with the switch."""
import psycopg
import pytest
from psycopg.rows import dict_row

SEED = 3131
EXT = "external_precedents"


@pytest.fixture
def db(cluster, pgc):
    conn = cluster.create_db("pgc_embedding_build")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=30, n_documents=6))
    dim = conn.execute("SELECT vector_dims(embedding) FROM precedent_chunks LIMIT 1").fetchone()[0]
    conn.execute(f"ALTER TABLE precedent_chunks ADD COLUMN embedding_v2 vector({dim})")
    return conn


def searches(db, pgc):
    vec, text = db.execute("SELECT embedding::text, left(content, 30) FROM precedent_chunks "
                           "WHERE embedding IS NOT NULL ORDER BY id LIMIT 1").fetchone()
    return {(corpus, mode): pgc.search(db, corpus, vec, text, mode=mode, k=8)
            for corpus in (EXT, "internal_decisions") for mode in ("hybrid", "semantic")}


def slots(db):
    return dict(db.execute("SELECT embedding_column::text, model FROM corpus.embedding_slots "
                           "WHERE item_table = 'precedent_chunks'::regclass").fetchall())


def queued(db, column):
    return db.execute("SELECT count(*) FROM corpus.embedding_queue WHERE item_table = 'precedent_chunks'::regclass "
                      "AND embedding_column = %s", [column]).fetchone()[0]


def test_searches_answer_as_before_during_the_build_and_switch_at_once(db, pgc):
    before = searches(db, pgc)
    rows = db.execute("SELECT count(*) FROM precedent_chunks").fetchone()[0]
    old_queue = queued(db, "embedding")
    n = db.execute("SELECT corpus.corpus_embedding_build('precedent_chunks', 'embedding', 'embedding_v2', "
                   "'model-v2')").fetchone()[0]
    assert n == rows == queued(db, "embedding_v2")
    assert slots(db)["embedding_v2"] == "model-v2" and "embedding" in slots(db)
    # during the build: the same answers, nothing ranked without its embedding
    notices = []
    db.add_notice_handler(lambda d: notices.append(d.message_primary))
    assert searches(db, pgc) == before
    assert not [m for m in notices if m and "without their embeddings" in m]
    assert queued(db, "embedding") == old_queue
    # the health check says how far the build is and what to run when it is done
    with db.cursor(row_factory=dict_row) as cur:
        emb = cur.execute("""SELECT status, detail, hint FROM corpus.corpus_health_check(%s)
                              WHERE "check" = 'embeddings' AND source = 'chunks'""", [EXT]).fetchone()
    assert emb["status"] == "warn" and emb["detail"]["building"][0]["column"] == "embedding_v2", emb
    assert "corpus_embedding_switch(" in emb["hint"] and "Building" in emb["hint"]
    # a text change queues the item for both columns; the switch waits for the new one
    item = before[EXT, "hybrid"][0]["item_id"]
    db.execute("UPDATE precedent_chunks SET content = content || ' נוסף' WHERE id = %s", [int(item)])
    assert queued(db, "embedding") == old_queue + 1
    with pytest.raises(psycopg.Error) as e:
        db.execute("SELECT corpus.corpus_embedding_switch('precedent_chunks', 'embedding', 'embedding_v2')")
    assert e.value.sqlstate == "55000" and f"{rows} items wait" in e.value.diag.message_primary
    assert e.value.diag.message_hint

    # the worker stores the new embeddings (here: the same vectors, as a model of the same space
    # would); items without an embedding still wait in both columns, so the switch is forced
    db.execute("UPDATE precedent_chunks SET embedding_v2 = embedding WHERE embedding IS NOT NULL")
    nulls = db.execute("SELECT count(*) FROM precedent_chunks WHERE embedding IS NULL").fetchone()[0]
    assert queued(db, "embedding_v2") == nulls
    assert db.execute("SELECT corpus.corpus_embedding_switch('precedent_chunks', 'embedding', 'embedding_v2', "
                      "force => true)").fetchone()[0] == 2
    with db.cursor(row_factory=dict_row) as cur:
        columns = {(r["corpus"], r["name"]): r["embedding_column"] for r in cur.execute(
            "SELECT corpus, name, embedding_column::text FROM corpus.sources WHERE item_table = "
            "'precedent_chunks'::regclass").fetchall()}
    assert set(columns.values()) == {"embedding_v2"} and len(columns) == 2
    # the old column's slot and queue are gone; the new one is what searches rank by
    assert set(slots(db)) == {"embedding_v2"} and queued(db, "embedding") == 0
    after = searches(db, pgc)
    for key, rows_before in before.items():
        if key[1] == "semantic":
            assert [r["item_id"] for r in after[key]] == [r["item_id"] for r in rows_before], key
    plan = db.execute("SELECT sql FROM corpus.corpus_explain(%s, %s::vector, NULL, mode => 'semantic') "
                      "WHERE source = 'chunks'", [EXT, db.execute(
                          "SELECT embedding_v2::text FROM precedent_chunks LIMIT 1").fetchone()[0]]).fetchone()[0]
    assert "embedding_v2" in plan


def test_a_build_is_cancelled_and_a_searched_column_is_no_build(db):
    db.execute("SELECT corpus.corpus_embedding_build('precedent_chunks', 'embedding', 'embedding_v2', 'model-v2')")
    assert queued(db, "embedding_v2") > 0
    with pytest.raises(psycopg.Error) as e:
        db.execute("SELECT corpus.corpus_embedding_build_cancel('precedent_chunks', 'embedding')")
    assert e.value.sqlstate == "55000" and e.value.diag.message_hint
    db.execute("SELECT corpus.corpus_embedding_build_cancel('precedent_chunks', 'embedding_v2')")
    assert "embedding_v2" not in slots(db) and queued(db, "embedding_v2") == 0
    # the column is the user's: still there, and writable without a trigger of ours
    db.execute("UPDATE precedent_chunks SET embedding_v2 = embedding WHERE id = (SELECT min(id) FROM precedent_chunks)")
    assert queued(db, "embedding_v2") == 0


def test_a_build_outlives_unrelated_definition_changes(db):
    db.execute("SELECT corpus.corpus_embedding_build('precedent_chunks', 'embedding', 'embedding_v2', 'model-v2')")
    db.execute("SELECT corpus.corpus_drop('case_documents')")
    assert "embedding_v2" in slots(db)


@pytest.mark.parametrize("call, state", [
    ("corpus_embedding_build('precedent_chunks', 'embedding', 'embedding', 'm')", "42710"),
    ("corpus_embedding_build('precedent_chunks', 'no_such_slot', 'embedding_v2', 'm')", "42704"),
    ("corpus_embedding_build('precedent_chunks', 'embedding', 'no_such_column', 'm')", "42703"),
    ("corpus_embedding_build('precedent_chunks', 'embedding', 'embedding_v2', NULL)", "22023"),
    ("corpus_embedding_switch('precedent_chunks', 'embedding', 'embedding_v2')", "42704"),
])
def test_bad_builds_and_switches_are_refused(db, call, state):
    with pytest.raises(psycopg.Error) as e:
        db.execute(f"SELECT corpus.{call}")
    assert e.value.sqlstate == state and e.value.diag.message_hint, e.value
    assert "embedding_v2" not in slots(db)


def test_an_automatic_switch_that_fails_warns_and_never_fails_the_worker(db):
    # an 8-dimensional column cannot replace one the halachot's 384-dimensional embeddings
    # share a space with: the switch fails, the worker's calls do not
    db.execute("ALTER TABLE precedent_chunks ADD COLUMN embedding_small vector(8)")
    db.execute("UPDATE precedent_chunks SET embedding = (SELECT embedding FROM precedent_chunks "
               "WHERE embedding IS NOT NULL LIMIT 1) WHERE embedding IS NULL")
    db.execute("SELECT corpus.corpus_embedding_build('precedent_chunks', 'embedding', 'embedding_small', 'tiny', "
               "auto_switch => true)")
    warnings = []
    db.add_notice_handler(lambda d: warnings.append((d.severity_nonlocalized, d.message_primary, d.message_hint)))
    while True:
        rows = db.execute("SELECT item_table::text, embedding_column::text, item_id, version "
                          "FROM corpus.corpus_embedding_claim(batch_size => 100, only_table => 'precedent_chunks')").fetchall()
        if not rows:
            break
        for table, column, item_id, version in rows:
            assert column == "embedding_small"
            assert db.execute("SELECT corpus.corpus_embedding_complete(%s::regclass, %s, %s, %s, %s::vector, 'tiny')",
                              [table, column, item_id, version, "[" + ",".join(["0.5"] * 8) + "]"]
                              ).fetchone()[0] == "stored"
    failed = [w for w in warnings if w[0] == "WARNING" and "switching searches to them failed" in (w[1] or "")]
    assert failed and "corpus_embedding_switch(" in failed[0][2], warnings
    assert db.execute("SELECT count(*) FROM corpus.sources WHERE item_table = 'precedent_chunks'::regclass "
                      "AND embedding_column = 'embedding_small'").fetchone()[0] == 0
    assert "embedding" in slots(db) and "embedding_small" in slots(db)
    # the next claim tries again (and warns again); the manual switch names the cause
    warnings.clear()
    db.execute("SELECT * FROM corpus.corpus_embedding_claim()")
    assert [w for w in warnings if w[0] == "WARNING"]
    with pytest.raises(psycopg.Error) as e:
        db.execute("SELECT corpus.corpus_embedding_switch('precedent_chunks', 'embedding', 'embedding_small')")
    assert e.value.sqlstate == "42804" and "dimensional" in e.value.diag.message_primary
