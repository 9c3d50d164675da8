"""pg_corpus on a streaming hot standby: every search mode and corpus_explain answer exactly as
on the primary, definitions changed on the primary reach the standby's cached definitions as
they are replayed, the health check judges nothing the standby cannot know (its statistics
counters are its own) and never tells the user to run what a standby refuses, and the DBA
functions that write refuse with 25006 and a hint.

The module runs its own small primary (a copy of the shared test cluster would carry every
other module's databases) and a standby made with pg_basebackup -R (scripts/pgcluster.sh)."""
import os
import shutil
import subprocess
import time

import numpy as np
import psycopg
import pytest
from psycopg.rows import dict_row

from conftest import PGCLUSTER, ROOT, Cluster

BASE = os.environ.get("PG_CORPUS_TEST_DIR") or str(ROOT / ".pgdata" / "test")
PRIMARY_DIR, STANDBY_DIR = BASE + "-standby-primary", BASE + "-standby"


def pgcluster(*args):
    res = subprocess.run(["bash", str(PGCLUSTER), *args], capture_output=True, text=True, timeout=180)
    if res.returncode != 0:
        pytest.fail(f"pgcluster.sh {' '.join(args)} failed:\n{res.stdout}\n{res.stderr}", pytrace=False)
    return (res.stdout.strip().splitlines() or [""])[-1]


def wait_for_replay(primary, standby, timeout=30):
    lsn = primary.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if standby.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [lsn]).fetchone()[0]:
            return
        time.sleep(0.05)
    pytest.fail(f"the standby did not replay up to {lsn} within {timeout} s")


@pytest.fixture(scope="module")
def pair(pgc):
    for d in (STANDBY_DIR, PRIMARY_DIR):
        subprocess.run(["bash", str(PGCLUSTER), "stop", d], capture_output=True, timeout=180)
        shutil.rmtree(d, ignore_errors=True)
    primary = Cluster(PRIMARY_DIR, pgcluster("start", PRIMARY_DIR))
    conn = primary.create_db("pgc_standby")
    data = pgc.generate_legal_data(seed=31, n_cases=60, n_documents=15)
    pgc.load_legal(conn, data)
    conn.execute("SELECT corpus.corpus_refresh_lexical_stats()")
    conn.execute("CHECKPOINT")
    standby = Cluster(STANDBY_DIR, pgcluster("standby", STANDBY_DIR, PRIMARY_DIR))
    sconn = standby.connect("pgc_standby")
    assert sconn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
    wait_for_replay(conn, sconn)
    try:
        yield conn, sconn, data
    finally:
        for c in (primary, standby):
            for x in c._conns:
                x.close()
        pgcluster("stop", STANDBY_DIR)
        pgcluster("stop", PRIMARY_DIR)
        shutil.rmtree(STANDBY_DIR, ignore_errors=True)
        shutil.rmtree(PRIMARY_DIR, ignore_errors=True)


def queries(data, pgc, n=6):
    rng = np.random.default_rng(11)
    out = []
    for corpus, table in (("external_precedents", "precedent_chunks"), ("internal_decisions", "precedent_chunks"),
                          ("case_documents", "document_chunks")):
        for _ in range(n):
            row = data[table][int(rng.integers(len(data[table])))]
            words = " ".join(row["content"].split()[2:6])
            filters = {"practice_area": row["practice_area"]} if corpus == "case_documents" else None
            for mode in ("hybrid", "semantic", "lexical"):
                out.append(dict(corpus=corpus, query_vec=row["embedding"], query_text=words, mode=mode,
                                **({"filters": filters} if filters else {})))
    return out


def test_every_search_mode_answers_on_the_standby_as_on_the_primary(pair, pgc):
    primary, standby, data = pair
    for q in queries(data, pgc):
        on_primary = pgc.search(primary, **q)
        assert on_primary or q["mode"] == "lexical", q
        assert pgc.search(standby, **q) == on_primary, q


def test_corpus_explain_is_the_same_on_the_standby(pair, pgc):
    primary, standby, data = pair
    row = data["precedent_chunks"][3]
    sql = "SELECT to_jsonb(e) FROM corpus.corpus_explain('external_precedents', %s::vector, %s) e"
    args = [pgc.vec_text(row["embedding"]), " ".join(row["content"].split()[:3])]
    on_primary = primary.execute(sql, args).fetchall()
    assert on_primary and standby.execute(sql, args).fetchall() == on_primary


def test_definitions_changed_on_the_primary_reach_a_cached_standby_session(pair, pgc):
    primary, standby, data = pair
    row = data["precedent_chunks"][5]
    q = dict(corpus="external_precedents", query_vec=row["embedding"], query_text=None, mode="semantic")
    before = pgc.search(standby, **q)          # this session now holds the definition
    assert before
    primary.execute("SELECT corpus.corpus_alter('external_precedents', description => 'changed on the primary')")
    primary.execute("SELECT corpus.corpus_create('standby_new')")
    wait_for_replay(primary, standby)
    assert standby.execute("SELECT description FROM corpus.corpus_list() WHERE name = 'external_precedents'"
                           ).fetchone()[0] == "changed on the primary"
    # a source dropped on the primary: the standby session that cached the corpus sees it go
    q2 = dict(corpus="internal_decisions", query_vec=row["embedding"], query_text=None, mode="semantic")
    cached = pgc.search(standby, **q2)
    primary.execute("SELECT corpus.corpus_drop_source('internal_decisions', 'chunks')")
    # (searches racing the replay answer from either side of the change, never fail)
    for _ in range(20):
        assert pgc.search(standby, **q2)
    wait_for_replay(primary, standby)
    after = {r["source"] for r in pgc.search(standby, **q2)}
    assert "chunks" in {r["source"] for r in cached} and "chunks" not in after
    assert standby.execute("SELECT count(*) FROM corpus.corpus_list() WHERE name = 'standby_new'").fetchone()[0] == 1


def test_the_dba_functions_that_write_refuse_on_the_standby_with_25006(pair):
    _, standby, _ = pair
    for sql in ("SELECT corpus.corpus_refresh_lexical_stats()",
                "SELECT corpus.corpus_refresh_lexical_stats('external_precedents')",
                "SELECT corpus.corpus_create('on_standby')",
                "SELECT corpus.corpus_embedding_enqueue('precedent_chunks', 'embedding')",
                "SELECT * FROM corpus.corpus_embedding_claim()"):
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction) as e:
            standby.execute(sql)
        assert e.value.diag.sqlstate == "25006", sql
        if "refresh" in sql:
            assert "primary" in e.value.diag.message_hint, e.value.diag.message_hint


def test_the_health_check_on_the_standby_judges_only_what_it_can_know(pair):
    primary, standby, _ = pair
    # many writes on the primary: its counters say the statistics are stale, the standby's say nothing
    primary.execute("UPDATE precedent_chunks SET content = content || ' x' WHERE id % 2 = 0")
    wait_for_replay(primary, standby)
    with standby.cursor(row_factory=dict_row) as cur:
        rows = cur.execute("SELECT * FROM corpus.corpus_health_check()").fetchall()
    assert rows
    for r in rows:
        assert r["status"] != "fail", r
        assert "corpus_refresh_lexical_stats" not in (r["hint"] or ""), r
        assert "XX" not in str(r["detail"] or ""), r
    lexical = [r for r in rows if r["check"] == "lexical_statistics"]
    assert lexical and all(r["status"] == "ok" for r in lexical), lexical


def test_an_audited_search_on_the_standby_is_served_and_counted_not_logged(pair, pgc):
    primary, standby, data = pair
    primary.execute("""SELECT corpus.corpus_alter('case_documents', audit => '{"enabled": true}')""")
    try:
        wait_for_replay(primary, standby)
        before = primary.execute("SELECT count(*) FROM corpus.search_audit").fetchone()[0]
        row = data["document_chunks"][2]
        q = dict(corpus="case_documents", query_vec=row["embedding"], query_text=None, mode="semantic",
                 filters={"practice_area": row["practice_area"]})
        on_standby = pgc.search(standby, **q)
        assert on_standby and on_standby == pgc.search(primary, **q)
        h = standby.execute("SELECT status, detail FROM corpus.corpus_health_check('case_documents') "
                            "WHERE \"check\" = 'audit_log'").fetchone()
        assert h[0] == "warn" and h[1]["skipped_in_this_session"] >= 1
        # the primary's search was logged, the standby's was not
        assert primary.execute("SELECT count(*) FROM corpus.search_audit").fetchone()[0] == before + 1
    finally:
        primary.execute("SELECT corpus.corpus_alter('case_documents', audit => '{}')")
