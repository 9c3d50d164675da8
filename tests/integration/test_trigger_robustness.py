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
    # the table's triggers call the extension's function: dropping it alone is refused, naming them
    with pytest.raises(psycopg.errors.DependentObjectsStillExist) as e:
        db.execute("DROP EXTENSION pg_corpus")
    assert "pg_corpus_embedding_" in (e.value.diag.message_detail or ""), e.value.diag.message_detail
    db.execute("DROP EXTENSION pg_corpus CASCADE")
    db.execute("CREATE EXTENSION pg_corpus")
    # CASCADE took the triggers with it: the table is as it was before registration
    assert db.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'notes'::regclass "
                      "AND NOT tgisinternal").fetchone()[0] == 0
    db.execute("INSERT INTO notes (id, pid, body) VALUES (2, 1, %s)", [LONG.format(2)])
    db.execute("UPDATE notes SET body = %s WHERE id = 1", [LONG.format("again")])
    db.execute("DELETE FROM notes WHERE id = 2")
    db.execute("TRUNCATE notes")
    assert queue(db, "notes") == {}
    # registering again puts the triggers back: changes are queued again
    db.execute("INSERT INTO notes (id, pid, body, emb) VALUES (3, 1, %s, '[1,2,3]')", [LONG.format(3)])
    register(db, "notes_c", "notes")
    db.execute("UPDATE notes SET body = %s WHERE id = 3", [LONG.format("new")])
    assert queue(db, "notes") == {"3": "text_changed"}


def test_a_trigger_whose_slot_row_is_gone_never_fails_a_write(db):
    """A slot row deleted by hand (its queue goes with it) leaves the triggers in place: writes
    of every kind still work and queue nothing until the source is registered again."""
    db.execute("""CREATE TABLE orphan (id int PRIMARY KEY, pid int NOT NULL, body text NOT NULL,
                      tsv tsvector, emb vector(3))""")
    register(db, "orphan_c", "orphan")
    db.execute("DELETE FROM corpus.embedding_slots WHERE item_table = 'orphan'::regclass")
    db.execute("INSERT INTO orphan (id, pid, body) VALUES (1, 1, %s)", [LONG.format(1)])
    db.execute("UPDATE orphan SET body = %s, emb = NULL WHERE id = 1", [LONG.format("x")])
    db.execute("DELETE FROM orphan WHERE id = 1")
    db.execute("TRUNCATE orphan")
    assert queue(db, "orphan") == {}


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


def test_renaming_a_registered_column_never_breaks_a_write_and_the_worker_follows(db):
    """RENAME COLUMN of the text, embedding and id columns (the slot names them by attnum; the
    event trigger writes the trigger function again): every write still works and is queued,
    the worker claims and stores by the new names, and the source follows them: no drift in the
    health check, searches find rows by the new names, and registering again reuses the slot."""
    db.execute("""CREATE TABLE renamed (id int PRIMARY KEY, pid int NOT NULL, body text NOT NULL,
                      tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED, emb vector(3))""")
    db.execute("INSERT INTO renamed (id, pid, body, emb) VALUES (1, 1, %s, '[1,2,3]')", [LONG.format(1)])
    register(db, "renamed_c", "renamed")
    db.execute('ALTER TABLE renamed RENAME COLUMN body TO "Body text"')
    db.execute('ALTER TABLE renamed RENAME COLUMN emb TO embedding')
    db.execute('ALTER TABLE renamed RENAME COLUMN id TO "item""id"')
    db.execute('INSERT INTO renamed ("item""id", pid, "Body text") VALUES (2, 1, %s)', [LONG.format(2)])
    db.execute('UPDATE renamed SET "Body text" = %s WHERE "item""id" = 1', [LONG.format("changed")])
    assert queue(db, "renamed") == {"1": "text_changed", "2": "missing"}
    claimed = {r[0]: (r[1], r[2]) for r in db.execute(
        "SELECT item_id, version, content FROM corpus.corpus_embedding_claim(10, only_table => 'renamed')")}
    assert claimed["1"][1] == LONG.format("changed") and claimed["2"][1] == LONG.format(2)
    # the queue keeps the column's registered name; the new name finds the slot too
    for item, (version, _) in claimed.items():
        assert db.execute("SELECT corpus.corpus_embedding_complete('renamed', 'emb', %s, %s, '[0,1,0]')",
                          [item, version]).fetchone()[0] == "stored"
    assert db.execute('SELECT count(*) FROM renamed WHERE embedding IS NULL').fetchone()[0] == 0
    assert db.execute("SELECT corpus.corpus_embedding_enqueue('renamed', 'embedding', only_missing => false)"
                      ).fetchone()[0] == 2
    db.execute('DELETE FROM renamed WHERE "item""id" = 2')
    db.execute("TRUNCATE renamed")
    assert queue(db, "renamed") == {}
    # the source follows the renames: no drift, and searches find the new rows by the new names
    drift = db.execute("SELECT status, detail->>'sqlstate' FROM corpus.corpus_health_check() "
                       "WHERE corpus = 'renamed_c' AND \"check\" = 'catalog_drift'").fetchall()
    assert drift == [("ok", None)]
    db.execute('INSERT INTO renamed ("item""id", pid, "Body text") VALUES (5, 1, %s)', [LONG.format(5)])
    assert queue(db, "renamed") == {"5": "missing"}
    hits = db.execute("SELECT item_id FROM corpus.corpus_hybrid_search('renamed_c', NULL, %s, 5, mode => 'lexical')",
                      [LONG.format(5)]).fetchall()
    assert ("5",) in hits
    # registered again under the new names, it reuses the slot (and its queue) and searches
    db.execute("SELECT corpus.corpus_drop_source('renamed_c', 'items')")
    db.execute("""SELECT corpus.corpus_add_source('renamed_c', 'items', 'renamed', text_column => 'Body text',
                      tsv_column => 'tsv', embedding_column => 'embedding', id_column => 'item"id',
                      parent_fk => 'pid', min_length => 5)""")
    assert db.execute("SELECT count(*) FROM corpus.embedding_slots WHERE item_table = 'renamed'::regclass"
                      ).fetchone()[0] == 1
    assert queue(db, "renamed") == {"5": "missing"}
    hits = db.execute("SELECT item_id FROM corpus.corpus_hybrid_search('renamed_c', NULL, %s, 5, mode => 'lexical')",
                      [LONG.format(5)]).fetchall()
    assert ("5",) in hits


def test_a_rename_on_a_parent_table_is_followed_on_its_registered_partition(db):
    db.execute("""CREATE TABLE ptree (id int, pid int NOT NULL, region text NOT NULL, body text NOT NULL,
                      tsv tsvector, emb vector(3), PRIMARY KEY (id, region)) PARTITION BY LIST (region);
                  CREATE TABLE ptree_n PARTITION OF ptree FOR VALUES IN ('n');""")
    register(db, "ptree_c", "ptree_n")
    db.execute("ALTER TABLE ptree RENAME COLUMN body TO content")
    db.execute("INSERT INTO ptree (id, pid, region, content) VALUES (1, 1, 'n', %s)", [LONG.format(1)])
    db.execute("UPDATE ptree SET content = %s, emb = '[1,1,1]' WHERE id = 1", [LONG.format("x")])
    db.execute("UPDATE ptree SET content = %s WHERE id = 1", [LONG.format("y")])
    assert queue(db, "ptree_n") == {"1": "text_changed"}


def test_dropping_a_registered_column_needs_cascade_and_then_writes_still_work(db):
    db.execute("""CREATE TABLE dropped (id int PRIMARY KEY, pid int NOT NULL, body text NOT NULL, extra text,
                      tsv tsvector, emb vector(3))""")
    db.execute("INSERT INTO dropped (id, pid, body) VALUES (1, 1, %s)", [LONG.format(1)])
    db.execute("SELECT corpus.corpus_create('dropped_c')")
    db.execute("""SELECT corpus.corpus_add_source('dropped_c', 'items', 'dropped', text_column => 'body',
                      tsv_column => 'tsv', embedding_column => 'emb', parent_fk => 'pid', min_length => 5,
                      embedding_inputs => ARRAY['body', 'extra'])""")
    with pytest.raises(psycopg.errors.DependentObjectsStillExist):
        db.execute("ALTER TABLE dropped DROP COLUMN extra")
    db.execute("ALTER TABLE dropped DROP COLUMN extra CASCADE")
    db.execute("INSERT INTO dropped (id, pid, body) VALUES (2, 1, %s)", [LONG.format(2)])
    db.execute("UPDATE dropped SET body = 'x' WHERE id = 1")
    # the worker does not stall on the slot: its items become dead letters; the health check
    # reports the broken registration
    assert db.execute("SELECT count(*) FROM corpus.corpus_embedding_claim(10, only_table => 'dropped')"
                      ).fetchone()[0] == 0
    assert db.execute("SELECT DISTINCT state FROM corpus.embedding_queue WHERE item_table = 'dropped'::regclass"
                      ).fetchall() == [("dead",)]
    rows = db.execute("SELECT status, detail->>'sqlstate' FROM corpus.corpus_health_check() "
                      "WHERE corpus = 'dropped_c' AND \"check\" = 'catalog_drift'").fetchall()
    assert rows == [("fail", "42703")], rows


def test_one_library_trigger_serves_every_slot_and_registration_creates_no_function(db):
    """Every slot's triggers call the extension's own function (SECURITY DEFINER, search_path
    pinned) with the slot's column as argument; registering a source defines no function."""
    before = db.execute("SELECT count(*) FROM pg_proc").fetchone()[0]
    db.execute("""CREATE TABLE shared (id int PRIMARY KEY, pid int NOT NULL, body text NOT NULL,
                      tsv tsvector, emb vector(3), emb2 vector(3))""")
    register(db, "shared_c", "shared")
    db.execute("""SELECT corpus.corpus_add_source('shared_c', 'items2', 'shared', text_column => 'body',
                      tsv_column => 'tsv', embedding_column => 'emb2', parent_fk => 'pid', min_length => 5)""")
    assert db.execute("SELECT count(*) FROM pg_proc").fetchone()[0] == before
    rows = db.execute("""SELECT t.tgname, p.proname, p.prosecdef, p.proconfig, d.deptype,
                                encode(t.tgargs, 'escape')
                           FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
                           LEFT JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                                                AND d.refclassid = 'pg_extension'::regclass
                          WHERE t.tgrelid = 'shared'::regclass AND NOT t.tgisinternal
                          ORDER BY t.tgname""").fetchall()
    assert [(r[0], r[5]) for r in rows] == [
        ("pg_corpus_embedding_5", "emb\\000"), ("pg_corpus_embedding_5_truncate", "emb\\000"),
        ("pg_corpus_embedding_6", "emb2\\000"), ("pg_corpus_embedding_6_truncate", "emb2\\000")], rows
    assert {(r[1], r[2], tuple(r[3]), r[4]) for r in rows} == {
        ("_embedding_trigger", True, ("search_path=pg_catalog, pg_temp",), "e")}
    db.execute("INSERT INTO shared (id, pid, body, emb) VALUES (1, 1, %s, '[1,2,3]')", [LONG.format(1)])
    assert db.execute("SELECT embedding_column, reason FROM corpus.embedding_queue "
                      "WHERE item_table = 'shared'::regclass").fetchall() == [("emb2", "missing")]


def test_a_slot_row_edited_to_name_a_column_of_an_owner_defined_type_runs_no_cast(db):
    """The trigger turns ids into text with its owner's rights: a slot row pointed by hand at a
    column whose cast to text a table owner wrote makes the trigger do nothing, never run it."""
    db.execute("""CREATE TYPE pair AS (a int, b int);
                  CREATE FUNCTION pair_text(pair) RETURNS text LANGUAGE plpgsql AS
                      $$ BEGIN RAISE EXCEPTION 'the owner''s cast ran'; END $$;
                  CREATE CAST (pair AS text) WITH FUNCTION pair_text(pair);
                  CREATE TABLE planted (id int PRIMARY KEY, pid int NOT NULL, body text NOT NULL,
                      tsv tsvector, emb vector(3), alt pair)""")
    register(db, "planted_c", "planted")
    db.execute("""UPDATE corpus.embedding_slots SET id_column = 'alt',
                      id_attnum = (SELECT attnum FROM pg_attribute WHERE attrelid = 'planted'::regclass
                                    AND attname = 'alt')
                   WHERE item_table = 'planted'::regclass""")
    db.execute("INSERT INTO planted (id, pid, body, alt) VALUES (1, 1, %s, '(1,2)')", [LONG.format(1)])
    db.execute("UPDATE planted SET body = %s WHERE id = 1", [LONG.format("x")])
    db.execute("DELETE FROM planted WHERE id = 1")
    assert queue(db, "planted") == {}


def test_an_id_of_a_type_a_table_owner_defines_is_refused(db):
    """The re-embed trigger turns the id into text with the registering role's rights: an id
    of a type whose casts a table owner could define (an enum, a domain) is refused."""
    db.execute("CREATE TYPE kind AS ENUM ('a', 'b')")
    db.execute("""CREATE TABLE enum_ids (id kind PRIMARY KEY, pid int NOT NULL, body text NOT NULL,
                      tsv tsvector, emb vector(3))""")
    db.execute("SELECT corpus.corpus_create('enum_c')")
    with pytest.raises(psycopg.errors.DatatypeMismatch) as e:
        db.execute("""SELECT corpus.corpus_add_source('enum_c', 'items', 'enum_ids', text_column => 'body',
                          tsv_column => 'tsv', embedding_column => 'emb', parent_fk => 'pid', min_length => 5)""")
    assert "built-in type" in e.value.diag.message_primary and e.value.diag.message_hint
    assert db.execute("SELECT count(*) FROM corpus.sources WHERE corpus = 'enum_c'").fetchone()[0] == 0
