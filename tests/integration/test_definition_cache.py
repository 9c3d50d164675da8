"""The per-backend cache of resolved corpus definitions: searches reuse it, and it is
never stale — a definition changed or a registered table altered in another session is seen by
the very next statement of this one, a transaction that saw the change never keeps what it built
from an older snapshot, a rolled-back change leaves nothing behind, and a role the catalog is
revoked from is not served from the cache.

Each test uses two sessions on one database: `a` searches, `b` changes things. The cache's
counters (corpus._definition_cache_stats(): hits, misses, entries of this backend) show whether
a search was served from the cache, so the tests can tell "rebuilt" from "reused".
"""
import numpy as np
import psycopg
import pytest

SEED = 1414


@pytest.fixture(scope="module")
def legal(cluster, pgc):
    conn = cluster.create_db("pgc_defcache")
    data = pgc.generate_legal_data(SEED)
    pgc.load_legal(conn, data)
    return data


@pytest.fixture
def sessions(cluster, legal):
    a = cluster.connect("pgc_defcache")
    b = cluster.connect("pgc_defcache")
    yield a, b
    # put the definition back whatever a test changed
    b.execute("SELECT corpus.corpus_alter('external_precedents', "
              "isolation => '{\"source_kind\": \"external_upload\"}')")
    a.close()
    b.close()


def stats(conn):
    return conn.execute("SELECT hits, misses, entries FROM corpus._definition_cache_stats()").fetchone()


def kinds(conn, corpus, pgc, query_vec):
    """source_kind of the parents of every hit (semantic search, k=20, no cap)."""
    rows = pgc.search(conn, corpus, query_vec, None, mode="semantic", k=20, max_per_parent=0)
    ids = [int(r["parent_id"]) for r in rows]
    assert ids, "the search found something"
    return {k for (k,) in conn.execute("SELECT DISTINCT source_kind FROM case_law WHERE id = ANY(%s)",
                                       (ids,)).fetchall()}


@pytest.fixture
def qvec(pgc):
    return pgc.random_unit_vectors(np.random.default_rng(SEED), 1, pgc.DIM)[0]


def test_searches_reuse_the_definition(sessions, pgc, qvec):
    a, _ = sessions
    kinds(a, "external_precedents", pgc, qvec)
    h0, m0, _ = stats(a)
    for _ in range(3):
        kinds(a, "external_precedents", pgc, qvec)
    h1, m1, n = stats(a)
    assert m1 == m0, "no rebuild without a change"
    assert h1 >= h0 + 3 and n >= 1


def test_a_definition_changed_in_another_session_is_seen_at_once(sessions, pgc, qvec):
    a, b = sessions
    assert kinds(a, "external_precedents", pgc, qvec) == {"external_upload"}
    b.execute("SELECT corpus.corpus_alter('external_precedents', "
              "isolation => '{\"source_kind\": \"internal_committee\"}')")
    assert kinds(a, "external_precedents", pgc, qvec) == {"internal_committee"}
    # a write to the catalog by hand (a superuser's UPDATE) invalidates as well
    b.execute("UPDATE corpus.corpora SET isolation = '{\"source_kind\": \"external_upload\"}' "
              "WHERE name = 'external_precedents'")
    assert kinds(a, "external_precedents", pgc, qvec) == {"external_upload"}


def test_an_uncommitted_change_is_private_and_a_rollback_leaves_nothing(sessions, pgc, qvec):
    a, b = sessions
    kinds(b, "external_precedents", pgc, qvec)  # b caches the definition too
    with b.transaction(force_rollback=True):
        b.execute("SELECT corpus.corpus_alter('external_precedents', "
                  "isolation => '{\"source_kind\": \"internal_committee\"}')")
        assert kinds(b, "external_precedents", pgc, qvec) == {"internal_committee"}, "own change seen"
        assert kinds(a, "external_precedents", pgc, qvec) == {"external_upload"}, "not seen by others"
    assert kinds(b, "external_precedents", pgc, qvec) == {"external_upload"}, "rolled back"
    assert kinds(a, "external_precedents", pgc, qvec) == {"external_upload"}


def test_a_repeatable_read_transaction_does_not_leave_its_old_snapshot_in_the_cache(sessions, pgc, qvec):
    a, b = sessions
    kinds(a, "external_precedents", pgc, qvec)
    with a.transaction():
        a.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        assert kinds(a, "external_precedents", pgc, qvec) == {"external_upload"}
        b.execute("SELECT corpus.corpus_alter('external_precedents', "
                  "isolation => '{\"source_kind\": \"internal_committee\"}')")
        # the transaction's snapshot still sees the old definition, whatever the cache holds
        assert kinds(a, "external_precedents", pgc, qvec) == {"external_upload"}
    # the next transaction must not be served what that snapshot built
    assert kinds(a, "external_precedents", pgc, qvec) == {"internal_committee"}


def test_ddl_on_a_registered_table_rebuilds_only_its_corpora(sessions, pgc, qvec):
    a, b = sessions
    kinds(a, "external_precedents", pgc, qvec)
    pgc.search(a, "case_documents", qvec, None, mode="semantic", filters={"practice_area": "tax"})
    _, m0, _ = stats(a)
    b.execute("CREATE TABLE IF NOT EXISTS unrelated (x int)")
    b.execute("ALTER TABLE unrelated ADD COLUMN IF NOT EXISTS y int")
    kinds(a, "external_precedents", pgc, qvec)
    _, m1, _ = stats(a)
    assert m1 == m0, "DDL on another table keeps the cache"
    b.execute("ALTER TABLE case_law ADD COLUMN IF NOT EXISTS cache_probe int")
    kinds(a, "external_precedents", pgc, qvec)
    pgc.search(a, "case_documents", qvec, None, mode="semantic", filters={"practice_area": "tax"})
    _, m2, _ = stats(a)
    assert m2 == m1 + 1, "case_law's corpus was rebuilt, case_documents (document_chunks) was not"
    b.execute("ALTER TABLE case_law DROP COLUMN cache_probe")


def test_a_renamed_column_is_followed_a_dropped_one_fails_cleanly_and_its_restoration_is_seen(sessions, pgc, qvec):
    a, b = sessions
    kinds(a, "external_precedents", pgc, qvec)
    # a rename: the cached definition is rebuilt and follows it
    b.execute("ALTER TABLE case_law RENAME COLUMN case_number TO case_no")
    try:
        assert kinds(a, "external_precedents", pgc, qvec) == {"external_upload"}
    finally:
        b.execute("ALTER TABLE case_law RENAME COLUMN case_no TO case_number")
    # a drop: the next search fails with 42703 naming the column; a column of that name again is seen
    b.execute("ALTER TABLE case_law ADD COLUMN case_number_saved text")
    b.execute("UPDATE case_law SET case_number_saved = case_number")
    b.execute("ALTER TABLE case_law DROP COLUMN case_number")
    try:
        with pytest.raises(psycopg.Error) as e:
            kinds(a, "external_precedents", pgc, qvec)
        assert e.value.sqlstate == "42703" and "case_number" in str(e.value)
    finally:
        b.execute("ALTER TABLE case_law RENAME COLUMN case_number_saved TO case_number")
    assert kinds(a, "external_precedents", pgc, qvec) == {"external_upload"}


def test_a_revoked_catalog_is_not_served_from_the_cache(sessions, pgc, qvec, cluster):
    a, b = sessions
    b.execute("DROP ROLE IF EXISTS cache_reader")
    b.execute("CREATE ROLE cache_reader")
    b.execute("GRANT SELECT ON case_law, precedent_chunks, halachot TO cache_reader")
    try:
        a.execute("SET ROLE cache_reader")
        assert kinds(a, "external_precedents", pgc, qvec) == {"external_upload"}
        b.execute("REVOKE SELECT ON corpus.corpora FROM PUBLIC")
        with pytest.raises(psycopg.Error) as e:
            kinds(a, "external_precedents", pgc, qvec)
        assert e.value.sqlstate == "42501"
    finally:
        b.execute("GRANT SELECT ON corpus.corpora TO PUBLIC")
        a.execute("RESET ROLE")
        b.execute("DROP OWNED BY cache_reader")
        b.execute("DROP ROLE cache_reader")
