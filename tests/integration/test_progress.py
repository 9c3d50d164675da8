"""corpus.progress: a long operation's phase, readable from another session while it runs, as
pg_stat_progress_* shows PostgreSQL's own; gone when it ends (on error too); another role's
operations shown only to members of pg_read_all_stats. Once an operation has run for a second
each phase is also a NOTICE with its counts.

The refresh is held in its first phase deterministically: another session holds the advisory
lock that serialises refreshes of one corpus."""
import threading
import time

import psycopg
import pytest

SEED = 77
EXT = "external_precedents"
LOCK_CLASS = 0x70676372


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_progress")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=30, n_documents=6))
    conn.execute("DROP ROLE IF EXISTS progress_reader")
    conn.execute("CREATE ROLE progress_reader")
    yield conn
    conn.execute("DROP ROLE IF EXISTS progress_reader")


def rows_of(conn, pid):
    return conn.execute("SELECT command, corpus, phase, done, total, started <= updated FROM corpus.progress "
                        "WHERE pid = %s", [pid]).fetchall()


def test_a_refresh_is_seen_from_another_session_until_it_ends(cluster, db):
    holder, watcher = cluster.connect(db.info.dbname), cluster.connect(db.info.dbname)
    worker = cluster.connect(db.info.dbname)
    pid = worker.execute("SELECT pg_backend_pid()").fetchone()[0]
    notices = []   # (message, detail): a notice's fields are readable only inside the handler
    worker.add_notice_handler(lambda d: notices.append((d.message_primary, d.message_detail)))
    holder.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", [LOCK_CLASS, EXT])
    result = {}
    thread = threading.Thread(target=lambda: result.update(
        rows=worker.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats(%s)", [EXT]).fetchall()))
    thread.start()
    try:
        # (the call's own row first, then its statement-by-statement refresh, held in its first phase)
        seen = []
        for _ in range(200):
            seen = rows_of(watcher, pid)
            if seen and seen[0][0] == "statistics refresh":
                break
            time.sleep(0.05)
        assert seen, "the running refresh is not in corpus.progress"
        (command, corpus, phase, done, total, ordered), = seen
        assert (command, corpus, phase, done) == ("statistics refresh", EXT,
                                                  "waiting for other refreshes of the corpus", 0)
        assert total >= 5 and ordered
        # another role does not see the superuser's operation; pg_read_all_stats does
        watcher.execute("SET ROLE progress_reader")
        assert rows_of(watcher, pid) == []
        watcher.execute("RESET ROLE")
        db.execute("GRANT pg_read_all_stats TO progress_reader")
        watcher.execute("SET ROLE progress_reader")
        assert len(rows_of(watcher, pid)) == 1
        watcher.execute("RESET ROLE")
        time.sleep(1.2)   # past a second: the next phases are also NOTICEs
    finally:
        holder.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", [LOCK_CLASS, EXT])
        thread.join(60)
        db.execute("REVOKE pg_read_all_stats FROM progress_reader")
    assert result["rows"][0][0] == EXT and result["rows"][0][3] is True
    assert rows_of(watcher, pid) == []
    said = [m for m, _ in notices if m and m.startswith(f'statistics refresh of corpus "{EXT}": ')]
    assert any("counting terms and documents (2 of " in m for m in said), notices
    assert all('"kind":"progress"' in d.replace(" ", "") for m, d in notices if m in said)


def test_a_failed_operation_leaves_no_progress_behind(cluster, db):
    conn = cluster.connect(db.info.dbname)
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    with pytest.raises(psycopg.Error) as e:
        conn.execute("""SELECT corpus.corpus_add_source(%s, 'broken', 'precedent_chunks', text_column => 'no_such',
                         tsv_column => 'content_tsv', embedding_column => 'embedding', parent_fk => 'case_law_id')""",
                     [EXT])
    assert e.value.sqlstate == "42703"
    assert rows_of(db, pid) == []
    # a short operation says nothing beyond its result
    notices = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary))
    conn.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats(%s)", [EXT]).fetchall()
    assert not [n for n in notices if n and "statistics refresh" in n]
    assert rows_of(db, pid) == []


def test_a_model_change_reports_its_batches_and_an_error_ends_them(cluster, db):
    """The model change is a procedure committing batch after batch: held in a batch by a lock
    on the queue, it is seen with its counts; interrupted (lock timeout), it is gone."""
    holder, watcher = cluster.connect(db.info.dbname), cluster.connect(db.info.dbname)
    worker = cluster.connect(db.info.dbname)
    pid = worker.execute("SELECT pg_backend_pid()").fetchone()[0]
    total = db.execute("SELECT count(*) FROM halachot").fetchone()[0]
    holder.execute("BEGIN")
    holder.execute("LOCK TABLE corpus.embedding_queue IN ACCESS EXCLUSIVE MODE")
    result = {}

    def change(model):
        try:
            worker.execute("CALL corpus.corpus_set_embedding_model('halachot', 'embedding', %s, batch_size => 50)",
                           [model])
            result["ok"] = True
        except psycopg.Error as e:
            result["error"] = e.sqlstate

    thread = threading.Thread(target=change, args=("model-b",))
    thread.start()
    try:
        seen = []
        for _ in range(200):
            seen = rows_of(watcher, pid)
            if seen:
                break
            time.sleep(0.05)
        (command, corpus, phase, done, n, ordered), = seen
        assert (command, corpus, done, n) == ("corpus_set_embedding_model", None, 0, total), seen
        assert "halachot" in phase and "model-b" in phase and ordered
    finally:
        holder.execute("ROLLBACK")
        thread.join(120)
    assert result == {"ok": True} and rows_of(watcher, pid) == []
    # interrupted in a batch: the error ends its progress too
    worker.execute("SET lock_timeout = '200ms'")
    holder.execute("BEGIN")
    holder.execute("LOCK TABLE corpus.embedding_queue IN ACCESS EXCLUSIVE MODE")
    try:
        change("model-c")
    finally:
        holder.execute("ROLLBACK")
    assert result.get("error") == "55P03" and rows_of(watcher, pid) == []
