"""DBA operations on a corpus that must not fail for reasons of their own: concurrent statistics
refreshes (and corpus_alter, which refreshes) of one corpus, and NULL arguments of the refresh."""
import threading

import psycopg
import pytest


@pytest.fixture(scope="module")
def db(cluster):
    conn = cluster.create_db("pgc_dba_ops")
    conn.execute("""
        CREATE TABLE notes (id int PRIMARY KEY, doc_id int NOT NULL, body text NOT NULL,
                            tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
                            embedding vector(3))""")
    conn.execute("""INSERT INTO notes (id, doc_id, body, embedding) SELECT i, i / 4, 'note ' || i || ' with words alpha beta w' || (i % 37),
                           '[1,2,3]' FROM generate_series(1, 400) AS i""")
    conn.execute("SELECT corpus.corpus_create('dba_notes')")
    conn.execute("""SELECT corpus.corpus_add_source('dba_notes', 'notes', 'notes', text_column => 'body',
                        tsv_column => 'tsv', embedding_column => 'embedding', parent_fk => 'doc_id',
                        min_length => 5)""")
    yield conn
    conn.execute("SELECT corpus.corpus_drop('dba_notes')")
    conn.execute("DROP TABLE notes")


@pytest.mark.parametrize("second", [
    "SELECT * FROM corpus.corpus_refresh_lexical_stats('dba_notes')",
    "SELECT corpus.corpus_alter('dba_notes', description => 'altered')",
])
def test_a_second_refresh_waits_for_the_first_and_replaces_its_rows(cluster, db, second):
    first = cluster.connect(db.info.dbname, autocommit=False)
    other = cluster.connect(db.info.dbname, autocommit=False)
    first.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats('dba_notes')")
    db.execute("INSERT INTO notes (id, doc_id, body, embedding) VALUES (1000, 1, 'a new note with a brandnewword', '[1,2,3]')")
    errors, done = [], threading.Event()

    def run():
        try:
            other.execute(second)
            other.commit()
        except psycopg.Error as e:   # 23505 before the refreshes were serialised
            errors.append(e)
            other.rollback()
        done.set()

    t = threading.Thread(target=run)
    t.start()
    assert not done.wait(1.0), "the second refresh waits for the first one's transaction"
    first.commit()
    t.join(30)
    try:
        assert done.is_set() and errors == []
        df = db.execute("SELECT df FROM corpus.lexical_stats WHERE corpus = 'dba_notes' AND term = 'brandnewword'")
        assert df.fetchall() == [(1,)], "the second refresh saw the row committed before it ran"
        assert db.execute("SELECT documents FROM corpus.lexical_totals WHERE corpus = 'dba_notes'").fetchone() == (401,)
    finally:
        db.execute("DELETE FROM notes WHERE id = 1000")
        first.close()
        other.close()


@pytest.mark.parametrize("args", ["'dba_notes', only_stale => NULL", "'dba_notes', stale_fraction => NULL",
                                  "NULL, NULL, NULL"])
def test_null_arguments_of_the_refresh_are_refused_with_22004(db, args):
    with pytest.raises(psycopg.errors.NullValueNotAllowed) as e:
        db.execute(f"SELECT * FROM corpus.corpus_refresh_lexical_stats({args})")
    assert "must not be NULL" in e.value.diag.message_primary and e.value.diag.message_hint
