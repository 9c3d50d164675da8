"""A write to a user's table never fails because of pg_corpus' re-embed trigger: after
DROP EXTENSION + CREATE EXTENSION (the trigger outlives its slot), and on a partitioned table
(the trigger fires on each partition; the slot is the partitioned table's)."""
import psycopg
import pytest

LONG = "a text long enough to be searchable, about {} and more words here"


def queue(conn, table):
    return {r[0]: r[1] for r in conn.execute(
        "SELECT item_id, reason FROM corpus.embedding_queue WHERE item_table = %s::regclass", [table])}


def register(conn, corpus, table):
    conn.execute("SELECT corpus.corpus_create(%s)", [corpus])
    conn.execute("""SELECT corpus.corpus_add_source(%s, 'items', %s, text_column => 'body', tsv_column => 'tsv',
                        embedding_column => 'emb', parent_fk => 'pid', min_length => 5)""", [corpus, table])


@pytest.fixture
def db(cluster):
    conn = cluster.create_db("pgc_trigger_robustness")
    yield conn


def test_writes_survive_the_extension_being_dropped_and_created_again(db):
    db.execute("""CREATE TABLE notes (id int PRIMARY KEY, pid int NOT NULL, body text NOT NULL,
                      tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED, emb vector(3))""")
    db.execute("INSERT INTO notes (id, pid, body, emb) VALUES (1, 1, %s, '[1,2,3]')", [LONG.format(1)])
    register(db, "notes_c", "notes")
    db.execute("UPDATE notes SET body = %s WHERE id = 1", [LONG.format("changed")])
    assert queue(db, "notes") == {"1": "text_changed"}
    db.execute("DROP EXTENSION pg_corpus CASCADE")
    db.execute("CREATE EXTENSION pg_corpus")
    # the triggers are still there (created at registration), the new catalog is empty
    assert db.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'notes'::regclass "
                      "AND NOT tgisinternal").fetchone()[0] >= 1
    db.execute("INSERT INTO notes (id, pid, body) VALUES (2, 1, %s)", [LONG.format(2)])
    db.execute("UPDATE notes SET body = %s WHERE id = 1", [LONG.format("again")])
    db.execute("DELETE FROM notes WHERE id = 2")
    db.execute("TRUNCATE notes")
    assert queue(db, "notes") == {}
    # registering again adopts the trigger: changes are queued again
    db.execute("INSERT INTO notes (id, pid, body, emb) VALUES (3, 1, %s, '[1,2,3]')", [LONG.format(3)])
    register(db, "notes_c", "notes")
    db.execute("UPDATE notes SET body = %s WHERE id = 3", [LONG.format("new")])
    assert queue(db, "notes") == {"3": "text_changed"}


def test_a_partitioned_table_is_kept_fresh_through_its_partitions(db):
    db.execute("""CREATE TABLE parts (id int, pid int NOT NULL, region text NOT NULL, body text NOT NULL,
                      tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED, emb vector(3),
                      PRIMARY KEY (id, region)) PARTITION BY LIST (region);
                  CREATE TABLE parts_n PARTITION OF parts FOR VALUES IN ('n');
                  CREATE TABLE parts_s PARTITION OF parts FOR VALUES IN ('s');""")
    db.execute("INSERT INTO parts (id, pid, region, body, emb) VALUES (1, 1, 'n', %s, '[1,2,3]'), "
               "(2, 1, 's', %s, NULL)", [LONG.format(1), LONG.format(2)])
    register(db, "parts_c", "parts")
    assert queue(db, "parts") == {"2": "missing"}
    # writes through the parent and straight into a partition
    db.execute("INSERT INTO parts (id, pid, region, body) VALUES (3, 1, 'n', %s)", [LONG.format(3)])
    db.execute("INSERT INTO parts_s (id, pid, region, body) VALUES (4, 1, 's', %s)", [LONG.format(4)])
    db.execute("UPDATE parts SET body = %s WHERE id = 1", [LONG.format("changed")])
    assert queue(db, "parts") == {"1": "text_changed", "2": "missing", "3": "missing", "4": "missing"}
    # the worker stores an embedding: fresh again, and the search serves it
    item = db.execute("SELECT version FROM corpus.embedding_queue WHERE item_id = '3'").fetchone()[0]
    assert db.execute("SELECT corpus.corpus_embedding_complete('parts', 'emb', '3', %s, '[3,2,1]')",
                      [item]).fetchone()[0] == "stored"
    assert "3" not in queue(db, "parts")
    hits = db.execute("SELECT item_id, embedding_stale FROM corpus.corpus_hybrid_search('parts_c', '[3,2,1]', NULL, "
                      "mode => 'semantic', include_stale => true)").fetchall()
    assert ("3", False) in hits and ("1", True) in hits
    db.execute("DELETE FROM parts WHERE id = 4")
    assert "4" not in queue(db, "parts")
