"""Whole-database DBA operations over many corpora: a refresh of every corpus keeps the others
when one fails (and the procedure form commits each corpus), and the health check and the
refresh of every corpus grow linearly with the corpora sharing the tables, not with their
square (figures at 300 corpora: bench/many_corpora.py)."""
import time

import psycopg
import pytest
from psycopg.types.json import Jsonb

BODY = "the committee reviewed appeal {} about a building permit and its conditions"


def make(conn, first, count, table="items", per=4):
    """`count` corpora c<first>..., each a slice (kind = its name) of `table` and `parents`."""
    parents, items = [], []
    for c in range(first, first + count):
        parents.append((c, f"c{c}", f"case {c}"))
        items += [(c * 100 + i, c, BODY.format(c * 100 + i), f"[1,{i},{c % 7}]") for i in range(per)]
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO parents VALUES (%s, %s, %s)", parents)
        cur.executemany(f"INSERT INTO {table} (id, parent_id, body, emb) VALUES (%s, %s, %s, %s)", items)
    for c in range(first, first + count):
        conn.execute("SELECT corpus.corpus_create(%s, isolation => %s)", [f"c{c}", Jsonb({"kind": f"c{c}"})])
        conn.execute(f"""SELECT corpus.corpus_add_source(%s, 'items', '{table}', text_column => 'body',
                            tsv_column => 'tsv', embedding_column => 'emb', parent_table => 'parents',
                            parent_fk => 'parent_id', parent_required => '{{title}}', min_length => 10)""",
                     [f"c{c}"])


@pytest.fixture
def db(cluster):
    conn = cluster.create_db("pgc_many_corpora")
    conn.execute("CREATE TABLE parents (id bigint PRIMARY KEY, kind text NOT NULL, title text NOT NULL)")
    conn.execute("CREATE INDEX ON parents (kind)")
    for t in ("items", "other_items"):
        conn.execute(f"""CREATE TABLE {t} (id bigint PRIMARY KEY, parent_id bigint NOT NULL, body text NOT NULL,
                           tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED, emb vector(3))""")
        conn.execute(f"CREATE INDEX ON {t} (parent_id)")
    yield conn
    conn.close()


def refreshed(conn):
    return {r[0] for r in conn.execute("SELECT corpus FROM corpus.lexical_totals").fetchall()}


def test_a_failing_corpus_does_not_cost_the_others_their_refresh(db):
    make(db, 0, 3)
    make(db, 3, 1, table="other_items")
    db.execute("DELETE FROM corpus.lexical_totals")
    db.execute("ALTER TABLE other_items DROP COLUMN tsv")     # corpus c3 can no longer be resolved
    warnings = []
    db.add_notice_handler(lambda d: warnings.append((d.message_primary, d.message_detail, d.message_hint))
                          if d.severity_nonlocalized == "WARNING" else None)
    rows = {r[0]: r[3] for r in db.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats()").fetchall()}
    assert rows == {"c0": True, "c1": True, "c2": True, "c3": False}
    assert refreshed(db) == {"c0", "c1", "c2"}
    [(message, detail, hint)] = warnings
    assert "c3" in message and "42703" in detail and "corpus_refresh_lexical_stats('c3')" in hint
    # one corpus named: its error is the error
    with pytest.raises(psycopg.errors.UndefinedColumn):
        db.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats('c3')")


def test_the_procedure_commits_each_corpus(cluster, db):
    make(db, 0, 3)
    db.execute("DELETE FROM corpus.lexical_totals")
    db.execute("CALL corpus.corpus_refresh_lexical_stats_each()")
    assert refreshed(db) == {"c0", "c1", "c2"}
    # each corpus' statistics were written by a transaction of their own
    assert db.execute("SELECT count(DISTINCT xmin::text) FROM corpus.lexical_totals").fetchone()[0] == 3
    with pytest.raises(psycopg.errors.InvalidTransactionTermination):
        with db.transaction():
            db.execute("CALL corpus.corpus_refresh_lexical_stats_each()")
    db.execute("UPDATE items SET body = body || ' amended' WHERE parent_id = 1")
    db.execute("CALL corpus.corpus_refresh_lexical_stats_each(only_stale => true, stale_fraction => 0.01)")
    assert refreshed(db) == {"c0", "c1", "c2"}


def elapsed(conn, sql):
    best = None
    for _ in range(2):
        t = time.monotonic()
        conn.execute(sql).fetchall()
        best = min(best or 1e9, time.monotonic() - t)
    return best


def test_whole_database_operations_grow_linearly_with_the_corpora(db):
    """Four times the corpora over the same shared tables cost about four times as much (a
    cost per corpus that grew with the tables, every corpus' share of them, would be 16)."""
    make(db, 0, 15)
    db.execute("ANALYZE")
    small = [elapsed(db, "SELECT * FROM corpus.corpus_health_check()"),
             elapsed(db, "SELECT * FROM corpus.corpus_refresh_lexical_stats()")]
    make(db, 15, 45)
    db.execute("ANALYZE")
    large = [elapsed(db, "SELECT * FROM corpus.corpus_health_check()"),
             elapsed(db, "SELECT * FROM corpus.corpus_refresh_lexical_stats()")]
    for what, s, l in zip(("health check", "refresh"), small, large):
        assert l / s < 8, f"{what}: {s:.3f} s for 15 corpora, {l:.3f} s for 60"
