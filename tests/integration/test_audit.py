"""The search audit log: opt-in per corpus, one row per search with
who searched, what and what came back, written in the caller's transaction (rolled back with
it; a failed search writes none), skipped and counted in a read-only transaction, readable only
by a role the owner grants it to, with a retention function and a health-check row."""
import hashlib
import json

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

SEED = 4242
EXT, INT = "external_precedents", "internal_decisions"
READER, AUDITOR = "pgc_audit_reader", "pgc_audit_auditor"
TEXT = "בית המשפט"


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_audit")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=40, n_documents=6))
    conn.execute("SELECT corpus.corpus_alter(%s, audit => %s)", [EXT, Jsonb({"enabled": True})])
    for r in (READER, AUDITOR):
        conn.execute(f"DROP ROLE IF EXISTS {r}")
        conn.execute(f"CREATE ROLE {r}")
    conn.execute(f"GRANT SELECT ON precedent_chunks, halachot, case_law, document_chunks TO {READER}")
    conn.execute(f"GRANT SELECT ON corpus.search_audit TO {AUDITOR}")
    yield conn
    pgc.drop_roles(conn, [READER, AUDITOR])


def vec(conn):
    return conn.execute("SELECT embedding::text FROM precedent_chunks WHERE embedding IS NOT NULL ORDER BY id LIMIT 1"
                        ).fetchone()[0]


def search(conn, corpus, v, text, **kw):
    args = "".join(f", {k} => %({k})s" for k in kw)
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(f"SELECT * FROM corpus.corpus_hybrid_search(%(c)s, %(v)s::vector, %(t)s{args}) ORDER BY rank",
                           dict(c=corpus, v=v, t=text, **kw)).fetchall()


def last_rows(conn, n=1):
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM corpus.search_audit ORDER BY id DESC LIMIT %s", [n]).fetchall()


def count(conn):
    return conn.execute("SELECT count(*) FROM corpus.search_audit").fetchone()[0]


def test_a_search_writes_one_row_with_who_what_and_the_results(db, pgc):
    v = vec(db)
    before = count(db)
    db.execute(f"SET ROLE {READER}")
    try:
        rows = search(db, EXT, v, TEXT, k=5, filters=Jsonb({"court": "בית המשפט העליון"}))
    finally:
        db.execute("RESET ROLE")
    assert count(db) == before + 1
    a = last_rows(db)[0]
    assert (a["role"], a["corpus"], a["function"], a["mode"], a["k"]) == (READER, EXT, "corpus_hybrid_search", "hybrid", 5)
    assert a["filters"] == {"court": "בית המשפט העליון"}
    assert a["results"] == [{"rank": r["rank"], "source": r["source"], "item_id": r["item_id"]} for r in rows]
    assert a["query_text"] is None, "the text is stored only when configured"
    assert len(a["query_hash"]) == 64 and a["latency_ms"] > 0
    # the same query hashes the same, another query differently
    search(db, EXT, v, TEXT, k=5, filters=Jsonb({"court": "בית המשפט העליון"}))
    search(db, EXT, v, TEXT + " עליון", k=5)
    b, c = last_rows(db, 2)[1], last_rows(db, 2)[0]
    assert b["query_hash"] == a["query_hash"] != c["query_hash"]


def test_the_text_is_stored_when_configured_and_other_corpora_are_not_logged(db):
    db.execute("SELECT corpus.corpus_alter(%s, audit => %s)", [EXT, Jsonb({"enabled": True, "query_text": True})])
    try:
        search(db, EXT, None, TEXT, mode="lexical")
        assert last_rows(db)[0]["query_text"] == TEXT
    finally:
        db.execute("SELECT corpus.corpus_alter(%s, audit => %s)", [EXT, Jsonb({"enabled": True})])
    before = count(db)
    search(db, INT, None, TEXT, mode="lexical")
    assert count(db) == before


def test_find_similar_is_logged_with_its_item(db):
    item = db.execute("SELECT p.id::text FROM precedent_chunks p JOIN case_law c ON c.id = p.case_law_id "
                      "WHERE c.source_kind = 'external_upload' AND p.embedding IS NOT NULL ORDER BY p.id LIMIT 1"
                      ).fetchone()[0]
    rows = db.execute("SELECT item_id FROM corpus.corpus_find_similar(%s, 'chunks', %s, k => 3)", [EXT, item]).fetchall()
    a = last_rows(db)[0]
    assert a["function"] == "corpus_find_similar" and a["options"]["item"] == {"source": "chunks", "item_id": item}
    assert [r["item_id"] for r in a["results"]] == [r[0] for r in rows]


def test_the_row_is_rolled_back_with_the_callers_transaction(db, cluster):
    conn = cluster.connect(db.info.dbname, autocommit=False)
    try:
        before = count(db)
        search(conn, EXT, None, TEXT, mode="lexical")
        conn.rollback()
        assert count(db) == before
        search(conn, EXT, None, TEXT, mode="lexical")
        conn.commit()
        assert count(db) == before + 1
    finally:
        conn.close()


def test_a_failed_search_writes_no_row(db):
    before = count(db)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        search(db, EXT, None, TEXT, filters=Jsonb({"source_kind": "internal_committee"}))
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        search(db, EXT, None, TEXT, k=0)
    assert count(db) == before


def test_a_read_only_transaction_is_served_skipped_and_counted(db, cluster):
    conn = cluster.connect(db.info.dbname, autocommit=False)
    try:
        before = count(db)
        conn.execute("SET TRANSACTION READ ONLY")
        rows = search(conn, EXT, None, TEXT, mode="lexical")
        assert rows
        with conn.cursor(row_factory=dict_row) as cur:
            h = cur.execute("SELECT * FROM corpus.corpus_health_check(%s) WHERE \"check\" = 'audit_log'", [EXT]).fetchall()
        conn.rollback()
        assert count(db) == before
        assert len(h) == 1 and h[0]["status"] == "warn" and h[0]["detail"]["skipped_in_this_session"] >= 1
        assert "read-only" in h[0]["hint"]
    finally:
        conn.close()
    with db.cursor(row_factory=dict_row) as cur:
        h = cur.execute("SELECT * FROM corpus.corpus_health_check(%s) WHERE \"check\" = 'audit_log'", [EXT]).fetchone()
    assert h["status"] == "ok" and h["count"] == count(db) and h["detail"]["newest"]


def test_only_a_granted_role_reads_the_log_and_nobody_forges_it(db):
    db.execute(f"SET ROLE {READER}")
    try:
        for sql in ["SELECT * FROM corpus.search_audit",
                    "INSERT INTO corpus.search_audit (role, session_role, corpus, function, mode, k, filters, query_hash, "
                    "results, options, latency_ms) VALUES ('x', 'x', 'x', 'x', 'x', 1, '{}', 'x', '[]', '{}', 1)",
                    "DELETE FROM corpus.search_audit",
                    "SELECT corpus.corpus_audit_purge(interval '0')"]:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                db.execute(sql)
        # the reader's own searches are logged all the same, and its health check does not show the log
        with db.cursor(row_factory=dict_row) as cur:
            h = cur.execute("SELECT * FROM corpus.corpus_health_check(%s) WHERE \"check\" = 'audit_log'", [EXT]).fetchone()
        assert h["detail"]["readable"] is False
    finally:
        db.execute("RESET ROLE")
    db.execute(f"SET ROLE {AUDITOR}")
    try:
        assert db.execute("SELECT count(*) FROM corpus.search_audit").fetchone()[0] > 0
    finally:
        db.execute("RESET ROLE")


def test_retention_deletes_old_rows(db):
    search(db, EXT, None, TEXT, mode="lexical")
    total = count(db)
    db.execute("UPDATE corpus.search_audit SET logged_at = logged_at - interval '100 days' "
               "WHERE id IN (SELECT id FROM corpus.search_audit ORDER BY id LIMIT 2)")
    assert db.execute("SELECT corpus.corpus_audit_purge(interval '90 days', %s)", [INT]).fetchone()[0] == 0
    assert db.execute("SELECT corpus.corpus_audit_purge(interval '90 days')").fetchone()[0] == 2
    assert count(db) == total - 2
    with pytest.raises(psycopg.errors.InvalidParameterValue) as e:
        db.execute("SELECT corpus.corpus_audit_purge(interval '-1 day')")
    assert e.value.diag.message_hint


@pytest.mark.parametrize("bad", [{"enabled": "yes"}, {"other": True}, []])
def test_bad_settings_are_refused(db, bad):
    with pytest.raises(psycopg.errors.InvalidParameterValue) as e:
        db.execute("SELECT corpus.corpus_alter(%s, audit => %s)", [EXT, Jsonb(bad)])
    assert e.value.diag.message_hint
