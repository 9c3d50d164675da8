"""A DBA operation that queues items never aborts a user's write, and queues every item.

`corpus_embedding_enqueue` and `corpus_set_embedding_model` write the queue rows of many items;
the re-embed trigger of a user's UPDATE writes the queue row of its item. The schedule below
deadlocked when the DBA operation upserted queue rows in item order while a user transaction
held the queue row of a later item: the user updates item A (its trigger queues A), the DBA
operation starts (queues B, then waits for A), the user updates item B (its trigger waits for
the DBA operation's B): a cycle, found by the session that waited last, the user's (40P01).
Every session runs with deadlock_timeout = 10ms, so a cycle is found at once."""
import threading
import time

import psycopg
import pytest

N_ITEMS = 8
A, B = 2, 1          # the user takes A before B; the DBA operations go in item order, B before A
DEADLOCK_TIMEOUT = "10ms"

OPERATIONS = {
    "set_embedding_model": "CALL corpus.corpus_set_embedding_model(%(table)s, 'emb', %(model)s, batch_size => 100)",
    "enqueue_every_item": "SELECT corpus.corpus_embedding_enqueue(%(table)s, 'emb', only_missing => false)",
    "enqueue_missing": "SELECT corpus.corpus_embedding_enqueue(%(table)s, 'emb')",
}
# (table, updated relation of A, of B): a partitioned table's partitions are written directly
TABLES = {"plain": ("locks_items", "locks_items", "locks_items"),
          "partitioned": ("locks_parts", "locks_parts_high", "locks_parts_low")}
ALTER = "ALTER TABLE locks_items ALTER COLUMN doc_id SET DEFAULT 0"
# the user's statements before the DBA operation starts, and after it waits for the user
SCHEDULES = {
    "update_a_then_b": (["update A"], ["update B"]),
    # DDL after the first write: it waits for whatever lock the operation holds on the table
    "update_a_alter_update_b": (["update A"], [ALTER, "update B"]),
    # DDL before the first write: the operation must not hold the queue while it waits for it
    "alter_update_a_update_b": ([ALTER], ["update A", "update B"]),
}


@pytest.fixture(scope="module")
def db(cluster):
    conn = cluster.create_db("pgc_dba_write_locks")
    conn.execute("""
        CREATE TABLE locks_items (id int PRIMARY KEY, doc_id int NOT NULL, body text NOT NULL,
                                  tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
                                  emb vector(3));
        CREATE TABLE locks_parts (id int PRIMARY KEY, doc_id int NOT NULL, body text NOT NULL,
                                  tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
                                  emb vector(3)) PARTITION BY RANGE (id);
        CREATE TABLE locks_parts_low PARTITION OF locks_parts FOR VALUES FROM (MINVALUE) TO (2);
        CREATE TABLE locks_parts_high PARTITION OF locks_parts FOR VALUES FROM (2) TO (MAXVALUE);""")
    for table, _, _ in TABLES.values():
        conn.execute("SELECT corpus.corpus_create(%s)", [table])
        conn.execute("""SELECT corpus.corpus_add_source(%s, 'items', %s, text_column => 'body', tsv_column => 'tsv',
                            embedding_column => 'emb', parent_fk => 'doc_id', min_length => 5)""", [table, table])
    return conn


def fill(db, table, with_embedding):
    """N_ITEMS items, with embeddings (nothing queued) or without (each queued as missing)."""
    db.execute(f"TRUNCATE {table}")
    db.execute("DELETE FROM corpus.embedding_queue")
    db.execute(f"""INSERT INTO {table} (id, doc_id, body, emb)
                   SELECT i, i, 'item number ' || i || ' with some words', CASE WHEN %s THEN '[1,2,3]'::vector END
                     FROM generate_series(1, %s) AS i""", [with_embedding, N_ITEMS])


def queue(db, table):
    return dict(db.execute("SELECT item_id::int, version FROM corpus.embedding_queue "
                           "WHERE item_table = %s::regclass AND state = 'pending'", [table]).fetchall())


def wait_until_waiting_for_a_lock(db, pid, timeout=10.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if db.execute("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0]:
            return
        time.sleep(0.01)
    raise AssertionError("the DBA operation never waited for the user's transaction")


def run_schedule(cluster, db, operation, table_kind, schedule):
    """The user's transaction and the DBA operation of `schedule`; the SQLSTATEs of their
    failures (None: success)."""
    table, rel_a, rel_b = TABLES[table_kind]
    statements = {"update A": (f"UPDATE {rel_a} SET body = 'item A, changed by the user' WHERE id = %s", [A]),
                  "update B": (f"UPDATE {rel_b} SET body = 'item B, changed by the user' WHERE id = %s", [B])}
    user = cluster.connect(db.info.dbname, autocommit=False)
    dba = cluster.connect(db.info.dbname)
    for conn in (user, dba):
        conn.execute(f"SET deadlock_timeout = '{DEADLOCK_TIMEOUT}'")
    user.commit()
    outcome = {}

    def run_dba():
        try:
            dba.execute(OPERATIONS[operation], {"table": table, "model": f"model-{time.monotonic_ns()}"})
            outcome["dba"] = None
        except psycopg.Error as e:
            outcome["dba"] = e.sqlstate

    before, after = SCHEDULES[schedule]
    try:
        for step in before:
            user.execute(*statements.get(step, (step,)))
        t = threading.Thread(target=run_dba)
        t.start()
        wait_until_waiting_for_a_lock(db, dba.info.backend_pid)
        # past the DBA operation's own deadlock check: a cycle closed now is found by the user
        time.sleep(0.2)
        try:
            for step in after:
                user.execute(*statements.get(step, (step,)))
            user.commit()
            outcome["user"] = None
        except psycopg.Error as e:
            user.rollback()
            outcome["user"] = e.sqlstate
        t.join(30)
        assert not t.is_alive(), "the DBA operation never finished"
        return outcome
    finally:
        user.close()
        dba.close()


# every schedule on the plain table; the partitioned table's partitions written one by one
CASES = [("plain", s) for s in SCHEDULES] + [("partitioned", "update_a_then_b")]


@pytest.mark.parametrize("table_kind, schedule", CASES, ids=[f"{t}-{s}" for t, s in CASES])
@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_a_dba_operation_never_aborts_a_users_write_and_queues_every_item(cluster, db, operation, table_kind,
                                                                         schedule):
    table = TABLES[table_kind][0]
    fill(db, table, with_embedding=operation != "enqueue_missing")
    before = queue(db, table)
    outcome = run_schedule(cluster, db, operation, table_kind, schedule)
    assert outcome["user"] is None, f"the user's transaction failed with {outcome['user']}"
    assert outcome["dba"] is None, f"the DBA operation failed with {outcome['dba']}"
    bodies = dict(db.execute(f"SELECT id, body FROM {table} WHERE id IN (%s, %s)", [A, B]).fetchall())
    assert bodies == {A: "item A, changed by the user", B: "item B, changed by the user"}
    after = queue(db, table)
    assert sorted(after) == list(range(1, N_ITEMS + 1)), "every item is queued"
    assert all(after[i] > before.get(i, 0) for i in after), "every entry is renewed"
