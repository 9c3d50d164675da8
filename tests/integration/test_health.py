"""corpus_health_check(): for every check, create the defect, see warn/fail with the
right count, repair it, see ok. A healthy demo database returns only ok rows.

Layout. A template database (`pgc_health_tpl`) holds the legal schema with a small, fully healthy
data set generated here (every item searchable, every locator filled, every index present, BM25
statistics refreshed), so every count below is known by construction and asserted exactly. Each
test gets its own copy (CREATE DATABASE ... TEMPLATE, ~0.2 s; a copy starts with zeroed table
statistics counters, so its BM25 statistics are refreshed once more, see
test_lexical_statistics_in_a_copy_of_the_database), breaks one thing, checks the rows, repairs it
the way the row's hint says (the hint's statements are executed verbatim, one by one as psql
would, where it is SQL) and checks that the rows are ok again. Two tests use their own databases: the demo sample
(demo/load_sample.py) and a 250,000-row table for the sampling path.

Checks whose status is not under test are ignored in "everything is ok again" assertions only
where the defect's repair legitimately touches them: `version` (pgvector 0.8.0 here) and
`lexical_statistics` (its staleness counter counts every row write, and the tiny tables here pass
its 10% threshold with a handful of updates).

What cannot be created honestly from SQL, and where it is covered instead:
* a subplan without the corpus predicate (the static half of isolation_audit): only by changing
  code; the core's unit test `static_audit_accepts_generated_subplans_and_rejects_others`
  (crates/pg_corpus_core/src/health.rs) strips the predicate and swaps its value. Here: the
  static counters (4 subplans per source, no failures) on real corpora.
* a leaking search: `test_isolation_audit_reports_a_real_leak` uses a data/schema defect that
  makes the generated predicate match rows whose isolation value is not the declared one (a
  nondeterministic collation on the isolation column), and checks independently that the search
  really returns them. `test_search_and_audit_under_a_hostile_search_path` plants an operator
  that an unqualified `=` would resolve to under the caller's search_path; the generated SQL runs
  under search_path = pg_catalog, pg_temp, so neither the search nor the audit may be affected.
* NaN/Infinity in a vector (embeddings.non_finite): pgvector refuses them on every input path.
* a wrong-dimension embedding: the column type vector(n) refuses it; a dimensionless column is
  refused at definition time (catalog_drift covers a column retyped afterwards).

Every discrepancy found while writing these tests (hostile search_path, trigger states,
partial/invalid indexes, per-corpus queue counts, column-level grants, retype drift, counter
resets, ...) was fixed in the extension; the tests pin the fixed behaviour.
"""
import json
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg.rows import dict_row

SEED = 5005
DIM = 384
TEMPLATE = "pgc_health_tpl"
KNOWN_CHECKS = {"version", "privileges", "catalog_drift", "evidence", "analysis", "isolation_audit", "lexical_statistics",
                "embeddings", "searchable_contract", "indexes", "reembed_queue"}
PER_CORPUS = ["catalog_drift", "evidence", "isolation_audit"]
PER_SOURCE = ["embeddings", "searchable_contract", "indexes", "reembed_queue", "analysis"]
LEGAL = ["external_precedents", "internal_decisions"]
SOURCES = {"external_precedents": ["chunks", "halachot"],
           "internal_decisions": ["chunks", "halachot"],
           "case_documents": ["documents"]}
IGNORE = {"version", "lexical_statistics"}
ROLE = "pgc_health_writer"
FIXTURES_DIR = Path(__file__).resolve().parents[1] / "fixtures"

# --------------------------------------------------------------------------------------------
# Data: 12 cases (odd ids external_upload, even internal_committee), 4 chunks and 2 approved
# halachot per case (+1 pending halacha on case 1), 3 documents x 4 chunks. Every text >= 60
# characters, every locator column filled, every case complete.
# --------------------------------------------------------------------------------------------
N_CASES = 12
EXTERNAL = [c for c in range(1, N_CASES + 1) if c % 2 == 1]
INTERNAL = [c for c in range(1, N_CASES + 1) if c % 2 == 0]
CHUNKS_PER_CASE = 4
HALACHOT_PER_CASE = 2
PENDING_HALACHA = 1019  # case 1, review_status 'pending'


def chunk_ids(case):
    return [100 * case + j for j in range(CHUNKS_PER_CASE)]


def halacha_ids(case):
    return [1000 + 10 * case + j for j in range(HALACHOT_PER_CASE)]


def generate(pgc):
    rng = np.random.default_rng(SEED)
    tg = pgc.TextGen(SEED + 1)

    def text():
        t = tg.text(12, 20)
        while len(t) < 60:
            t += " " + tg.text(2, 4)
        return t

    def emb(topic):
        return pgc.unit(topic + rng.standard_normal(DIM) * 0.05)

    data = {"case_law": [], "precedent_chunks": [], "halachot": [], "document_chunks": []}
    for c in range(1, N_CASES + 1):
        data["case_law"].append(dict(
            id=c, case_number=f"CN {c}/24", case_name=f"Plaintiff {c} v. State",
            court=pgc.COURTS[c % len(pgc.COURTS)],
            source_kind="external_upload" if c % 2 else "internal_committee",
            practice_area=pgc.PRACTICE_AREAS[c % len(pgc.PRACTICE_AREAS)],
            headnote=text(), summary=text(), tags=["t"]))
        topic = pgc.random_unit_vectors(rng, 1, DIM)[0]
        for j, cid in enumerate(chunk_ids(c)):
            data["precedent_chunks"].append(dict(
                id=cid, case_law_id=c, chunk_index=j, page_number=j + 1, content=text(),
                embedding=emb(topic)))
        hals = [(h, "approved") for h in halacha_ids(c)]
        if c == 1:
            hals.append((PENDING_HALACHA, "pending"))
        for h, status in hals:
            data["halachot"].append(dict(
                id=h, case_law_id=c, rule=text(), supporting_quote=text()[:40],
                page_number=int(rng.integers(1, 20)), review_status=status, embedding=emb(topic)))
    for d in range(1, 4):
        topic = pgc.random_unit_vectors(rng, 1, DIM)[0]
        for j in range(4):
            data["document_chunks"].append(dict(
                id=5000 + 10 * d + j, document_id=d, case_id=d,
                practice_area=pgc.PRACTICE_AREAS[d % len(pgc.PRACTICE_AREAS)], page_number=j + 1,
                section=pgc.SECTIONS[j % len(pgc.SECTIONS)], content=text(), embedding=emb(topic)))
    return data




def has_function(conn, name):
    return conn.execute("SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = %s AND "
                        "pronamespace = 'corpus'::regnamespace)", (name,)).fetchone()[0]


def refresh_lexical_stats(conn):
    """BM25 statistics (corpus_refresh_lexical_stats), when this build has them. Pending
    table statistics are flushed first: the staleness counter reads pg_stat_all_tables."""
    if has_function(conn, "corpus_refresh_lexical_stats"):
        flush_stats(conn)
        conn.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats()")


def flush_stats(conn):
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")  # the flush happens when the backend goes idle
    time.sleep(1.1)
    conn.execute("SELECT pg_stat_clear_snapshot()")


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def template(cluster, pgc):
    conn = cluster.create_db(TEMPLATE)
    pgc.run_sql_file(conn, pgc.FIXTURES / "legal_schema.sql")
    data = generate(pgc)
    for table, cols in pgc.LEGAL_COLUMNS.items():
        pgc.copy_rows(conn, table, cols, data[table])
    pgc.run_sql_file(conn, pgc.FIXTURES / "legal_indexes.sql")
    pgc.run_sql_file(conn, pgc.FIXTURES / "legal_corpora.sql")
    refresh_lexical_stats(conn)
    conn.close()
    return TEMPLATE


def copy_template(cluster, template, name="pgc_health_t"):
    with psycopg.connect(cluster.uri, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    if name not in cluster._dbs:
        cluster._dbs.append(name)
    return cluster.connect(name)


@pytest.fixture
def raw_copy(cluster, template):
    """A fresh copy of the healthy template, exactly as CREATE DATABASE ... TEMPLATE leaves it."""
    conn = copy_template(cluster, template)
    yield conn
    conn.close()


@pytest.fixture
def db(cluster, template):
    """A fresh copy of the healthy template, as an autocommit connection. The copy's table
    statistics counters start at zero, below the BM25 baseline recorded in the template
    (lexical_statistics: "counters were reset"), so its statistics are refreshed once more."""
    conn = copy_template(cluster, template)
    if has_function(conn, "corpus_refresh_lexical_stats"):
        conn.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats()")
    yield conn
    conn.close()


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def health(conn, corpus=None, **kw):
    """All rows of corpus_health_check(corpus), with the invariants every row must satisfy."""
    with conn.cursor(row_factory=dict_row) as cur:
        if corpus is None and not kw.get("explicit_null"):
            cur.execute('SELECT "check", corpus, source, status, count, detail, hint '
                        'FROM corpus.corpus_health_check()')
        else:
            cur.execute('SELECT "check", corpus, source, status, count, detail, hint '
                        'FROM corpus.corpus_health_check(%s)', (corpus,))
        rows = cur.fetchall()
    for r in rows:
        assert r["check"] in KNOWN_CHECKS, r
        assert r["status"] in ("ok", "warn", "fail"), r
        assert r["count"] is not None and r["count"] >= 0, r
        assert isinstance(r["detail"], dict), r
        if r["status"] != "ok":
            assert (r["hint"] or "").strip(), f"non-ok row without a hint: {r}"
    keys = [(r["check"], r["corpus"], r["source"]) for r in rows]
    assert len(keys) == len(set(keys)), f"duplicate rows: {keys}"
    return rows


def row(rows, check, corpus=None, source=None):
    found = [r for r in rows if r["check"] == check and r["corpus"] == corpus
             and r["source"] == source]
    assert len(found) == 1, f"expected one {check}/{corpus}/{source} row, got {found}"
    return found[0]


def not_ok(rows, ignore=IGNORE):
    return [r for r in rows if r["status"] != "ok" and r["check"] not in ignore]


def assert_all_ok(conn, ignore=IGNORE):
    rows = health(conn)
    bad = not_ok(rows, ignore)
    assert not bad, "expected only ok rows, got:\n" + "\n".join(
        f"  {r['check']} {r['corpus']} {r['source']}: {r['status']} {r['count']} "
        f"{json.dumps(r['detail'], ensure_ascii=False)[:400]} -- {r['hint']}" for r in bad)
    return rows


def expect(rows, check, corpus, source, status, count):
    r = row(rows, check, corpus, source)
    assert (r["status"], r["count"]) == (status, count), \
        f"{check}/{corpus}/{source}: expected {status} {count}, got {r['status']} {r['count']} " \
        f"{json.dumps(r['detail'], ensure_ascii=False)} -- {r['hint']}"
    return r


def only_these_fail(rows, expected_keys, ignore=IGNORE):
    """Exactly the rows named in expected_keys are not ok (apart from the ignored checks)."""
    got = {(r["check"], r["corpus"], r["source"]) for r in not_ok(rows, ignore)}
    assert got == set(expected_keys), f"not-ok rows: {sorted(got, key=str)}"


@contextmanager
def deferred_queue(conn):
    """Writes that the re-embed trigger ignores (bulk-load mode)."""
    conn.execute("SET pg_corpus.defer_embedding_queue = on")
    try:
        yield
    finally:
        conn.execute("RESET pg_corpus.defer_embedding_queue")


def embeddings_of(conn, table, ids):
    return dict(conn.execute(f"SELECT id::text, embedding::text FROM {table} WHERE id = ANY(%s)",
                             (list(ids),)).fetchall())


def run_worker(conn, table, vectors):
    """Claim everything queued for `table` and store `vectors[item_id]` (the worker protocol)."""
    claimed = conn.execute(
        "SELECT item_id, version FROM corpus.corpus_embedding_claim(1000, only_table => %s)",
        (table,)).fetchall()
    for item_id, version in claimed:
        res = conn.execute(
            "SELECT corpus.corpus_embedding_complete(%s, 'embedding', %s, %s, %s::vector)",
            (table, item_id, version, vectors[item_id])).fetchone()[0]
        assert res == "stored", (item_id, res)
    return len(claimed)


def queue_size(conn, table):
    return conn.execute("SELECT count(*) FROM corpus.embedding_queue WHERE item_table = %s::regclass",
                        (table,)).fetchone()[0]


def hint_sql(hint):
    """The SQL statements of a hint (the part from the first SQL keyword on)."""
    m = re.search(r"\b(SET|CREATE|REINDEX|REVOKE|DROP|SELECT|ALTER|UPDATE)\b", hint)
    assert m, f"no SQL in hint: {hint}"
    return hint[m.start():]


def hint_statements(hint):
    """The complete statements (each ending in ';', quotes respected) of a hint's SQL; trailing
    prose without a ';' is dropped."""
    sql, out, cur, quote = hint_sql(hint), [], "", None
    for ch in sql:
        cur += ch
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == ";":
            out.append(cur.strip())
            cur = ""
    assert out, f"no complete statement in hint: {hint}"
    return out


def run_hint(conn, hint):
    """Run a hint's statements one by one, as psql would (CREATE/DROP INDEX CONCURRENTLY cannot
    run in the implicit transaction of a multi-statement query)."""
    statements = hint_statements(hint)
    for st in statements:
        conn.execute(st)
    return statements


def expected_keys():
    keys = {("version", None, None), ("privileges", None, None)}
    for corpus, sources in SOURCES.items():
        keys |= {(c, corpus, None) for c in PER_CORPUS}
        keys |= {(c, corpus, s) for c in PER_SOURCE for s in sources}
    return keys


# ============================================================================================
# Shape, corpus argument, healthy baseline
# ============================================================================================


def test_result_columns_and_healthy_baseline(db):
    cur = db.execute('SELECT * FROM corpus.corpus_health_check() LIMIT 0')
    names = [d.name for d in cur.description]
    assert names == ["check", "corpus", "source", "status", "count", "detail", "hint"]
    types = db.execute(
        "SELECT format_type(t, NULL) FROM unnest(("
        "SELECT proallargtypes FROM pg_proc WHERE proname = 'corpus_health_check' "
        "AND pronamespace = 'corpus'::regnamespace)) t").fetchall()
    assert [t[0] for t in types] == ["text", "text", "text", "text", "text", "bigint", "jsonb",
                                     "text"]
    rows = assert_all_ok(db, ignore={"version"})
    keys = {(r["check"], r["corpus"], r["source"]) for r in rows}
    assert expected_keys() <= keys, sorted(expected_keys() - keys, key=str)
    extra = keys - expected_keys()
    assert {k[0] for k in extra} <= {"lexical_statistics"}, extra
    # the baseline figures, known by construction
    ext = row(rows, "searchable_contract", "external_precedents", "chunks")["detail"]
    assert (ext["slice_items"], ext["searchable"]) == (len(EXTERNAL) * 4, len(EXTERNAL) * 4)
    hal = row(rows, "searchable_contract", "external_precedents", "halachot")["detail"]
    assert (hal["slice_items"], hal["searchable"], hal["excluded_by_source_rule"]) == \
        (len(EXTERNAL) * 2 + 1, len(EXTERNAL) * 2, 1)
    assert row(rows, "embeddings", "case_documents", "documents")["detail"]["searchable"] == 12
    for r in rows:
        if r["status"] == "ok":
            assert r["hint"] is None, r
    # the detail keys of the rows whose shape changed last
    q = row(rows, "reembed_queue", "external_precedents", "halachot")
    assert set(q["detail"]) == {"queued", "dead_letters", "table_oldest_seconds",
                                "table_expired_leases", "slots", "enabled_triggers", "trigger_name", "sampling"}, q
    assert (q["detail"]["queued"], q["detail"]["dead_letters"], q["detail"]["slots"],
            q["detail"]["enabled_triggers"]) == (0, 0, 1, 1), q
    assert row(rows, "indexes", "case_documents", "documents")["detail"]["partial_indexes"] == []
    for corpus in SOURCES:
        assert row(rows, "catalog_drift", corpus)["detail"]["retyped"] == []
        lex = [r for r in rows if r["check"] == "lexical_statistics" and r["corpus"] == corpus]
        assert all(r["detail"]["counters_reset"] is False for r in lex), lex


def test_corpus_argument_filters_rows(db):
    rows = health(db, "case_documents")
    assert {r["corpus"] for r in rows} == {None, "case_documents"}
    assert {(r["check"], r["source"]) for r in rows if r["corpus"] is None} == \
        {("version", None), ("privileges", None)}
    assert {(r["check"], r["source"]) for r in rows if r["corpus"]} >= \
        {(c, None) for c in PER_CORPUS} | {(c, "documents") for c in PER_SOURCE}
    all_rows = health(db)
    assert {(r["check"], r["corpus"], r["source"]) for r in health(db, None, explicit_null=True)} \
        == {(r["check"], r["corpus"], r["source"]) for r in all_rows}


@pytest.mark.parametrize("name", ["no_such_corpus", ""])
def test_unknown_corpus_is_42704(db, name):
    with pytest.raises(psycopg.Error) as ei:
        db.execute("SELECT * FROM corpus.corpus_health_check(%s)", (name,))
    e = ei.value
    assert e.sqlstate == "42704", (e.sqlstate, e.diag.message_primary)
    assert name in (e.diag.message_primary or "")
    assert (e.diag.message_hint or "").strip()
    assert db.execute("SELECT 1").fetchone()[0] == 1


# ============================================================================================
# version
# ============================================================================================


def _vtuple(v):
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def test_version_row_reports_pgvector_cve(db):
    installed, pgvector = db.execute(
        "SELECT (SELECT extversion FROM pg_extension WHERE extname = 'pg_corpus'), "
        "       (SELECT extversion FROM pg_extension WHERE extname = 'vector')").fetchone()
    r = row(health(db), "version")
    assert r["detail"]["installed"] == installed
    assert r["detail"]["library"] == installed  # the loaded library matches: no fail
    assert r["detail"]["pgvector"] == pgvector
    if _vtuple(pgvector) < (0, 8, 2):
        assert (r["status"], r["count"]) == ("warn", 1), r
        assert "CVE-2026-3172" in r["hint"] and "max_parallel_maintenance_workers = 0" in r["hint"]
    else:
        assert (r["status"], r["count"], r["hint"]) == ("ok", 0, None), r


def test_version_mismatch_and_pgvector_thresholds(db):
    """The library cannot be swapped in a test; the installed version recorded in pg_extension
    can (superuser catalog update, in a throwaway database): that is exactly the state after
    installing a new library without ALTER EXTENSION ... UPDATE."""
    library = row(health(db), "version")["detail"]["library"]
    pgvector = db.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    try:
        db.execute("UPDATE pg_extension SET extversion = '0.0.1' WHERE extname = 'pg_corpus'")
        db.execute("UPDATE pg_extension SET extversion = '0.8.2' WHERE extname = 'vector'")
        r = row(health(db), "version")
        assert (r["status"], r["count"]) == ("fail", 1), r
        assert f"ALTER EXTENSION pg_corpus UPDATE TO '{library}'" in r["hint"], r["hint"]
        assert r["detail"]["installed"] == "0.0.1" and r["detail"]["library"] == library
        db.execute("UPDATE pg_extension SET extversion = %s WHERE extname = 'pg_corpus'",
                   (library,))
        for version, status in [("0.8.1", "warn"), ("0.7.4", "warn"), ("0.8.2", "ok"),
                                ("0.10.0", "ok"), ("1.0.0", "ok")]:
            db.execute("UPDATE pg_extension SET extversion = %s WHERE extname = 'vector'",
                       (version,))
            r = row(health(db), "version")
            assert (r["status"], r["count"]) == (status, 0 if status == "ok" else 1), (version, r)
        db.execute("UPDATE pg_extension SET extversion = '0.0.1' WHERE extname = 'pg_corpus'")
        db.execute("UPDATE pg_extension SET extversion = '0.8.0' WHERE extname = 'vector'")
        r = row(health(db), "version")
        assert (r["status"], r["count"]) == ("fail", 2), r  # both findings counted
    finally:
        db.execute("UPDATE pg_extension SET extversion = %s WHERE extname = 'pg_corpus'",
                   (library,))
        db.execute("UPDATE pg_extension SET extversion = %s WHERE extname = 'vector'", (pgvector,))
    test_version_row_reports_pgvector_cve(db)


# ============================================================================================
# privileges
# ============================================================================================


def test_privileges(db, role):
    r = expect(health(db), "privileges", None, None, "ok", 0)
    assert r["detail"] == {"public_can_create": False, "catalog_writers": []}

    db.execute("GRANT CREATE ON SCHEMA corpus TO PUBLIC")
    r = expect(health(db), "privileges", None, None, "fail", 1)
    assert r["detail"]["public_can_create"] is True
    assert r["hint"] == "REVOKE CREATE ON SCHEMA corpus FROM PUBLIC;"
    db.execute(r["hint"])  # the hint repairs it
    expect(health(db), "privileges", None, None, "ok", 0)

    db.execute("GRANT INSERT ON corpus.corpora TO PUBLIC")
    r = expect(health(db), "privileges", None, None, "fail", 1)
    assert r["detail"]["catalog_writers"] == [
        {"table": "corpora", "column": None, "grantee": "PUBLIC", "privilege": "INSERT"}]
    db.execute("GRANT UPDATE ON corpus.corpora, corpus.sources TO PUBLIC")
    db.execute("GRANT INSERT ON corpus.sources TO PUBLIC")
    r = expect(health(db), "privileges", None, None, "fail", 4)
    assert "REVOKE" in r["hint"] and "FROM PUBLIC" in r["hint"]
    db.execute(r["hint"])
    expect(health(db), "privileges", None, None, "ok", 0)

    db.execute(f"GRANT INSERT, DELETE ON corpus.sources TO {role}")
    r = expect(health(db), "privileges", None, None, "warn", 2)
    assert sorted((w["table"], w["grantee"], w["privilege"]) for w in r["detail"]["catalog_writers"]) \
        == [("sources", role, "DELETE"), ("sources", role, "INSERT")]
    assert "REVOKE" in r["hint"]

    # both kinds at once: fail, every finding counted
    db.execute("GRANT CREATE ON SCHEMA corpus TO PUBLIC")
    db.execute("GRANT TRUNCATE ON corpus.corpora TO PUBLIC")
    expect(health(db), "privileges", None, None, "fail", 1 + 1 + 2)

    db.execute("REVOKE CREATE ON SCHEMA corpus FROM PUBLIC")
    db.execute("REVOKE TRUNCATE ON corpus.corpora FROM PUBLIC")
    db.execute(f"REVOKE ALL ON corpus.sources FROM {role}")
    expect(health(db), "privileges", None, None, "ok", 0)
    # read access is not a finding
    db.execute(f"GRANT SELECT ON corpus.corpora, corpus.sources TO {role}")
    expect(health(db), "privileges", None, None, "ok", 0)

    # the third definition table: the embedding slots (which trigger guards which column)
    db.execute(f"GRANT UPDATE ON corpus.embedding_slots TO {role}")
    r = expect(health(db), "privileges", None, None, "warn", 1)
    assert r["detail"]["catalog_writers"] == [
        {"table": "embedding_slots", "column": None, "grantee": role, "privilege": "UPDATE"}]
    db.execute(f"REVOKE UPDATE ON corpus.embedding_slots FROM {role}")
    expect(health(db), "privileges", None, None, "ok", 0)


def test_privileges_documented_worker_role_is_not_a_finding(db, role):
    """sql/embedding.sql documents the re-embed worker's grant
    (GRANT SELECT, UPDATE, DELETE ON corpus.embedding_queue TO embedder). A worker cannot
    redefine a corpus: only corpus.corpora, corpus.sources and corpus.embedding_slots are looked
    at; the queue, the BM25 statistics and the evaluation tables are written by workers and
    evaluators by design."""
    db.execute(f"GRANT SELECT, UPDATE, DELETE ON corpus.embedding_queue TO {role}")
    db.execute(f"GRANT INSERT, UPDATE, DELETE ON corpus.lexical_stats, corpus.lexical_totals, "
               f"corpus.eval_runs TO {role}")
    r = expect(health(db), "privileges", None, None, "ok", 0)
    assert r["detail"]["catalog_writers"] == [], r


def test_privileges_public_may_not_write_the_queue_or_the_statistics(db):
    """Exempting the worker's documented grant does not make PUBLIC's write access harmless:
    anyone who can DELETE from corpus.embedding_queue makes stale embeddings look fresh (the
    semantic branch then serves them, embeddings.stale reads 0); anyone who can UPDATE
    corpus.lexical_totals/lexical_stats skews every BM25 score of a corpus."""
    db.execute("GRANT DELETE ON corpus.embedding_queue TO PUBLIC")
    db.execute("GRANT UPDATE ON corpus.lexical_totals TO PUBLIC")
    r = row(health(db), "privileges")
    assert (r["status"], r["count"]) == ("fail", 2), r


def test_privileges_column_level_grant_on_the_isolation_column(db, role):
    """GRANT UPDATE (isolation) ON corpus.corpora TO ... lets the grantee rewrite a corpus'
    isolation predicate; the grant is in pg_attribute.attacl, not pg_class.relacl."""
    db.execute("GRANT UPDATE (isolation) ON corpus.corpora TO PUBLIC")
    db.execute(f"GRANT UPDATE (isolation) ON corpus.corpora TO {role}")
    r = row(health(db), "privileges")
    assert (r["status"], r["count"]) == ("fail", 2), r


# ============================================================================================
# catalog_drift
# ============================================================================================


def _drift_fails(rows, corpus, sqlstate, mentions, still_judged=()):
    """The corpus' drift row fails; the sources that still resolve (`still_judged`) keep every
    check of theirs, the corpus' audit says it could not run, and no other source has a row."""
    r = expect(rows, "catalog_drift", corpus, None, "fail", 1)
    assert r["detail"]["sqlstate"] == sqlstate, r
    assert mentions in r["detail"]["error"], r
    assert r["hint"]
    mine = [x for x in rows if x["corpus"] == corpus]
    assert {x["source"] for x in mine if x["source"]} == set(still_judged), mine
    if still_judged:
        for source in still_judged:
            assert set(PER_SOURCE) <= {x["check"] for x in mine if x["source"] == source}
        audit = row(rows, "isolation_audit", corpus, None)
        assert audit["status"] == "fail" and mentions in audit["detail"]["blocked_by"], audit
    else:
        assert {x["check"] for x in mine} == {"catalog_drift"}
    return r


def test_catalog_drift_renamed_column(db):
    """A rename is followed (the source knows its columns by attribute number): no drift, every
    check as before, and the locator still reads the renamed column."""
    db.execute("ALTER TABLE halachot RENAME COLUMN supporting_quote TO quote")
    try:
        rows = assert_all_ok(db)
        assert expected_keys() <= {(r["check"], r["corpus"], r["source"]) for r in rows}
    finally:
        db.execute("ALTER TABLE halachot RENAME COLUMN quote TO supporting_quote")
    assert_all_ok(db)


def test_catalog_drift_renamed_isolation_column(db):
    db.execute("ALTER TABLE case_law RENAME COLUMN source_kind TO kind")
    try:
        rows = assert_all_ok(db)
        # the isolation audit still ran its probes against the renamed column
        for corpus in LEGAL:
            assert row(rows, "isolation_audit", corpus, None)["status"] == "ok"
    finally:
        db.execute("ALTER TABLE case_law RENAME COLUMN kind TO source_kind")
    assert_all_ok(db)


def test_catalog_drift_retyped_column(db):
    db.execute("ALTER TABLE document_chunks ALTER COLUMN case_id TYPE text")
    rows = health(db)
    _drift_fails(rows, "case_documents", "42804", "case_id")
    only_these_fail(rows, {("catalog_drift", "case_documents", None)})
    db.execute("ALTER TABLE document_chunks ALTER COLUMN case_id TYPE bigint USING case_id::bigint")
    assert_all_ok(db)


def test_catalog_drift_dropped_column(db):
    pages = db.execute("SELECT id, page_number FROM halachot").fetchall()
    db.execute("ALTER TABLE halachot DROP COLUMN page_number")
    rows = health(db)
    for corpus in LEGAL:
        # the chunks source does not map halachot's column: every check of it still runs
        _drift_fails(rows, corpus, "42703", "page_number", still_judged={"chunks"})
    db.execute("ALTER TABLE halachot ADD COLUMN page_number int")
    with db.cursor() as cur:
        cur.executemany("UPDATE halachot SET page_number = %s WHERE id = %s",
                        [(p, i) for i, p in pages])
    assert_all_ok(db)


def test_catalog_drift_dropped_table(db):
    db.execute("""
        CREATE TABLE scratch_items (id bigint PRIMARY KEY, doc bigint NOT NULL, body text NOT NULL,
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED, emb vector(3));
        CREATE INDEX ON scratch_items (doc);
        CREATE INDEX ON scratch_items USING gin (tsv);
        CREATE INDEX ON scratch_items USING hnsw (emb vector_cosine_ops);
        INSERT INTO scratch_items (id, doc, body, emb)
        SELECT g, g, 'scratch item number ' || g || ' with enough text to be searchable here',
               ARRAY[1, g, 2]::real[]::vector FROM generate_series(1, 5) g;
        SELECT corpus.corpus_create('scratch');
    """)
    add = ("SELECT corpus.corpus_add_source('scratch', 'items', 'scratch_items', "
           "text_column => 'body', tsv_column => 'tsv', embedding_column => 'emb', "
           "parent_fk => 'doc')")
    db.execute(add)
    refresh_lexical_stats(db)
    assert_all_ok(db)
    db.execute("DROP TABLE scratch_items")
    rows = health(db)
    r = expect(rows, "catalog_drift", "scratch", None, "fail", 1)
    assert r["detail"]["error"], r
    assert {x["check"] for x in rows if x["corpus"] == "scratch"} == {"catalog_drift"}
    only_these_fail(rows, {("catalog_drift", "scratch", None)})
    # repair: the table is back, the source is defined again
    db.execute("""
        CREATE TABLE scratch_items (id bigint PRIMARY KEY, doc bigint NOT NULL, body text NOT NULL,
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED, emb vector(3));
        CREATE INDEX ON scratch_items (doc);
        CREATE INDEX ON scratch_items USING gin (tsv);
        CREATE INDEX ON scratch_items USING hnsw (emb vector_cosine_ops);
        INSERT INTO scratch_items (id, doc, body, emb)
        SELECT g, g, 'scratch item number ' || g || ' with enough text to be searchable here',
               ARRAY[1, g, 2]::real[]::vector FROM generate_series(1, 5) g;
    """)
    db.execute("SELECT corpus.corpus_drop_source('scratch', 'items')")
    db.execute(add)
    refresh_lexical_stats(db)
    rows = assert_all_ok(db)
    expect(rows, "catalog_drift", "scratch", None, "ok", 0)
    expect(rows, "reembed_queue", "scratch", "items", "ok", 0)


RETYPED_PAGE = {"source": "chunks", "table": "item", "column": "page_number",
                "defined_as": "integer", "now": "text"}


def test_catalog_drift_retype_that_still_validates(db):
    """The issue: "a registered column dropped, renamed or retyped since the corpus was defined".
    page_number (a locator column) int -> text still resolves, but every hit's locator changes
    from {"page": 3} to {"page": "3"} under the clients' feet. The types are snapshotted at
    corpus_add_source / corpus_alter (corpus.sources.column_types)."""
    db.execute("ALTER TABLE precedent_chunks ALTER COLUMN page_number TYPE text")
    rows = health(db)
    for corpus in LEGAL:
        r = expect(rows, "catalog_drift", corpus, None, "fail", 1)
        assert r["detail"]["retyped"] == [RETYPED_PAGE], r
        assert f"SELECT corpus.corpus_alter('{corpus}');" in r["hint"], r["hint"]
        # the corpus still resolves: its other rows are judged as usual
        assert {x["check"] for x in rows if x["corpus"] == corpus} >= set(PER_CORPUS + PER_SOURCE)
    only_these_fail(rows, {("catalog_drift", c, None) for c in LEGAL})
    # a retyped parent column too (a filter and metadata column): listed, and counted, once per
    # source that uses it (both sources of the corpus share case_law)
    db.execute("ALTER TABLE case_law ALTER COLUMN court TYPE varchar(200)")
    r = expect(health(db), "catalog_drift", LEGAL[0], None, "fail", 3)
    assert sorted((x["source"], x["table"], x["column"], x["now"])
                  for x in r["detail"]["retyped"]) == [
        ("chunks", "item", "page_number", "text"),
        ("chunks", "parent", "court", "character varying(200)"),
        ("halachot", "parent", "court", "character varying(200)")], r
    db.execute("ALTER TABLE case_law ALTER COLUMN court TYPE text")

    # repair 1: accept the new type for one corpus (the hint); the other still reports it
    run_hint(db, row(health(db), "catalog_drift", LEGAL[0])["hint"])
    rows = health(db)
    expect(rows, "catalog_drift", LEGAL[0], None, "ok", 0)
    expect(rows, "catalog_drift", LEGAL[1], None, "fail", 1)
    # repair 2: restore the type; now the accepting corpus reports it (integer != text)
    db.execute("ALTER TABLE precedent_chunks ALTER COLUMN page_number TYPE integer "
               "USING page_number::integer")
    rows = health(db)
    expect(rows, "catalog_drift", LEGAL[1], None, "ok", 0)
    r = expect(rows, "catalog_drift", LEGAL[0], None, "fail", 1)
    assert r["detail"]["retyped"] == [dict(RETYPED_PAGE, defined_as="text", now="integer")], r
    run_hint(db, r["hint"])
    assert_all_ok(db)


def test_catalog_drift_retype_survives_re_registering_another_source(db):
    """A retype is accepted by corpus_alter(name), i.e. on purpose. Re-registering an unrelated
    source of the same corpus (e.g. the reembed_queue hint's repair) must not accept it too."""
    db.execute("ALTER TABLE precedent_chunks ALTER COLUMN page_number TYPE text")
    db.execute("SELECT corpus.corpus_drop_source('external_precedents', 'halachot')")
    db.execute(add_source_sql("external_precedents", "halachot"))
    r = row(health(db), "catalog_drift", "external_precedents")
    assert (r["status"], r["count"], r["detail"]["retyped"]) == ("fail", 1, [RETYPED_PAGE]), r


# ============================================================================================
# isolation_audit
# ============================================================================================


def test_isolation_audit_healthy(db):
    rows = health(db)
    for corpus in LEGAL:
        # one corpus: 3 probes from each source's foreign items; every probe has a vector and
        # text: 3 modes; every corpus at once: 2 probes per source, their hybrid searches
        for rows_of, probes, modes in ((health(db, corpus), 6, ["hybrid", "semantic", "lexical"]),
                                       (rows, 4, ["hybrid"])):
            r = expect(rows_of, "isolation_audit", corpus, None, "ok", 0)
            d = r["detail"]
            assert (d["probes"], d["searches"], d["modes"]) == (probes, probes * len(modes), modes), d
            assert 13 * probes * len(modes) <= d["hits_checked"] <= probes * len(modes) * 20, d
            assert d["leaks"] == [] and d["static_failures"] == [], d
            assert d["static_subplans_checked"] == 8, d  # exact, approximate, lexical, fetch x 2
    d = expect(rows, "isolation_audit", "case_documents", None, "ok", 0)["detail"]
    assert d["isolation"].startswith("none"), d
    assert (d["probes"], d["searches"], d["static_subplans_checked"]) == (0, 0, 4), d


def test_isolation_audit_item_side_isolation_with_required_filter(db):
    """A corpus isolated on an item column with a required scope filter: the audit takes the
    filter value from the corpus' own items and still probes."""
    db.execute("""SELECT corpus.corpus_create('planning_docs',
                      isolation => '{"practice_area": "compensation"}',
                      required_filters => '{section}', filter_fields => '{"section": "text"}')""")
    db.execute("""SELECT corpus.corpus_add_source('planning_docs', 'documents', 'document_chunks',
                      text_column => 'content', tsv_column => 'content_tsv',
                      embedding_column => 'embedding', parent_fk => 'document_id')""")
    r = expect(health(db, "planning_docs"), "isolation_audit", "planning_docs", None, "ok", 0)
    d = r["detail"]
    assert d["probes"] == 3 and d["searches"] == 9 and d["hits_checked"] > 0, d
    assert d["static_subplans_checked"] == 4 and d["static_failures"] == [], d


def _leak_ids(conn, relabelled):
    rows = conn.execute(
        "SELECT 'chunks', id::text FROM precedent_chunks WHERE case_law_id = ANY(%s) "
        "UNION ALL SELECT 'halachot', id::text FROM halachot WHERE case_law_id = ANY(%s)",
        (relabelled, relabelled)).fetchall()
    return set(rows)


def test_isolation_audit_reports_a_real_leak(db, pgc):
    """A defect outside pg_corpus's code that makes the corpus predicate let foreign rows in: the
    isolation column gets a case-insensitive (nondeterministic) collation and internal cases are
    relabelled 'External_Upload'. The generated `p.source_kind = 'external_upload'` now matches
    them although the corpus declares the value 'external_upload'. The audit's verifier reads
    the parents' values and compares them with the declared ones, so it must fail; the test
    checks independently that the search really returns those items."""
    try:
        db.execute("CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', "
                   "deterministic = false)")
    except psycopg.errors.FeatureNotSupported:
        pytest.skip("this PostgreSQL is built without ICU (the PostgreSQL 18 wheel): no nondeterministic collation")
    db.execute("ALTER TABLE case_law ALTER COLUMN source_kind TYPE text COLLATE ci")
    relabelled = INTERNAL[1:]  # one internal case stays: the probes come from it
    db.execute("UPDATE case_law SET source_kind = 'External_Upload' WHERE id = ANY(%s)",
               (relabelled,))
    leaking = _leak_ids(db, relabelled)

    rows = health(db)
    r = row(rows, "isolation_audit", "external_precedents")
    assert r["status"] == "fail", r
    d = r["detail"]
    assert d["static_failures"] == [], d
    assert d["leaks"], d
    assert r["count"] >= len(d["leaks"]) and len(d["leaks"]) == min(r["count"], 20), r
    for leak in d["leaks"]:
        assert (leak["source"], leak["item_id"]) in leaking, leak
        assert leak["parent"]["iso_0"] == "External_Upload", leak
        assert leak["mode"] in ("hybrid", "semantic", "lexical"), leak
    assert "corpus_list" in r["hint"] or "isolation" in r["hint"], r["hint"]
    # the internal corpus is not affected: its items never show up elsewhere
    expect(rows, "isolation_audit", "internal_decisions", None, "ok", 0)

    # independent confirmation: the search itself returns the relabelled items
    probe = db.execute("SELECT embedding::text FROM precedent_chunks WHERE case_law_id = %s "
                       "LIMIT 1", (INTERNAL[0],)).fetchone()[0]
    hits = pgc.search(db, "external_precedents", probe, None, k=20, mode="semantic",
                      max_per_parent=0)
    assert {(h["source"], h["item_id"]) for h in hits} & leaking

    # repair: the values are the declared ones again
    db.execute("UPDATE case_law SET source_kind = 'internal_committee' WHERE id = ANY(%s)",
               (relabelled,))
    expect(health(db), "isolation_audit", "external_precedents", None, "ok", 0)
    db.execute('ALTER TABLE case_law ALTER COLUMN source_kind TYPE text COLLATE "default"')
    assert_all_ok(db)


def test_search_and_audit_under_a_hostile_search_path(db, pgc, cluster):
    """Someone who can create objects in a schema that precedes pg_catalog in a caller's
    search_path (here: public, pg_catalog) plants `public.=(text, text)` that is true for the
    external corpus' isolation value. The generated SQL writes `=` unqualified, so
    (1) corpus_hybrid_search must still not return foreign items (invariant 1), and
    (2) the health check run in that session must see the same as in a clean session (its own
    queries use `=` too: the probes, the corpus filter, the privilege listing)."""
    db.execute("""
        CREATE FUNCTION public.pgc_hostile_eq(a text, b text) RETURNS boolean
            LANGUAGE sql IMMUTABLE
            AS $$ SELECT a OPERATOR(pg_catalog.=) b OR b OPERATOR(pg_catalog.=) 'external_upload' $$;
        CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.pgc_hostile_eq);
    """)
    text = db.execute("SELECT content FROM precedent_chunks WHERE case_law_id = %s LIMIT 1",
                      (INTERNAL[0],)).fetchone()[0]
    internal_ids = {str(i) for c in INTERNAL for i in chunk_ids(c)}
    hostile = cluster.connect(db.info.dbname)
    try:
        hostile.execute("SET search_path = public, pg_catalog")
        hits = pgc.search(hostile, "external_precedents", None, text, k=20, mode="lexical")
        foreign = [h["item_id"] for h in hits if h["source"] == "chunks"
                   and h["item_id"] in internal_ids]
        h_rows = health(hostile, "external_precedents")
    finally:
        hostile.close()
    problems = []
    if foreign:
        problems.append(f"search of external_precedents returned {len(foreign)} internal items "
                        f"under search_path = public, pg_catalog")
    corpora = {r["corpus"] for r in h_rows}
    if corpora != {None, "external_precedents"}:
        problems.append(f"corpus_health_check('external_precedents') returned rows of {corpora}")
    a_clean = row(health(db, "external_precedents"), "isolation_audit", "external_precedents")
    a_host = [r for r in h_rows if r["check"] == "isolation_audit"
              and r["corpus"] == "external_precedents"]
    if not a_host or (a_host[0]["status"], a_host[0]["detail"].get("probes")) != \
            (a_clean["status"], a_clean["detail"]["probes"]):
        problems.append(f"isolation_audit differs: clean {a_clean['status']} "
                        f"probes={a_clean['detail']['probes']}, hostile "
                        f"{[(x['status'], x['detail'].get('probes')) for x in a_host]}")
    assert not problems, "\n".join(problems)


# ============================================================================================
# embeddings
# ============================================================================================


def test_embeddings_missing(db):
    case = EXTERNAL[1]
    ids = chunk_ids(case)
    vectors = embeddings_of(db, "precedent_chunks", ids)
    with deferred_queue(db):
        db.execute("UPDATE precedent_chunks SET embedding = NULL WHERE case_law_id = %s", (case,))
    rows = health(db)
    r = expect(rows, "embeddings", "external_precedents", "chunks", "warn", len(ids))
    assert (r["detail"]["missing"], r["detail"]["stale"]) == (len(ids), 0), r
    assert r["detail"]["searchable"] == len(EXTERNAL) * 4
    assert "worker" in r["hint"]
    only_these_fail(rows, {("embeddings", "external_precedents", "chunks")})
    expect(rows, "reembed_queue", "external_precedents", "chunks", "ok", 0)  # deferred: not queued

    # the documented way out of a deferred load: enqueue, then the worker
    n = db.execute("SELECT corpus.corpus_embedding_enqueue('precedent_chunks', 'embedding')").fetchone()[0]
    assert n == len(ids)
    rows = health(db)
    expect(rows, "embeddings", "external_precedents", "chunks", "warn", len(ids))
    q = expect(rows, "reembed_queue", "external_precedents", "chunks", "ok", len(ids))
    assert (q["detail"]["queued"], q["detail"]["dead_letters"]) == (len(ids), 0)
    # the queue belongs to the table, the counts to the corpus: the other corpus has none of them
    expect(rows, "reembed_queue", "internal_decisions", "chunks", "ok", 0)
    assert run_worker(db, "precedent_chunks", vectors) == len(ids)
    assert_all_ok(db)


def test_embeddings_missing_without_deferral_only_counts_searchable_items(db):
    """A NULL embedding on an item that is not searchable anyway (a pending halacha) is not
    backlog of the corpus; on an approved one it is. The trigger queues both; the reembed_queue
    row counts the corpus' searchable items with a queue entry, so it too counts 1."""
    ids = [halacha_ids(EXTERNAL[0])[0], PENDING_HALACHA]
    vectors = embeddings_of(db, "halachot", ids)
    db.execute("UPDATE halachot SET embedding = NULL WHERE id = ANY(%s)", (ids,))
    rows = health(db)
    r = expect(rows, "embeddings", "external_precedents", "halachot", "warn", 1)
    assert r["detail"]["missing"] == 1
    q = expect(rows, "reembed_queue", "external_precedents", "halachot", "ok", 1)
    assert q["detail"]["queued"] == 1
    assert queue_size(db, "halachot") == 2
    run_worker(db, "halachot", vectors)
    assert_all_ok(db)


def test_embeddings_stale(db):
    ids = chunk_ids(EXTERNAL[2])[:2]
    vectors = embeddings_of(db, "precedent_chunks", ids)
    db.execute("UPDATE precedent_chunks SET content = content || ' amended by the registrar' "
               "WHERE id = ANY(%s)", (ids,))
    rows = health(db)
    r = expect(rows, "embeddings", "external_precedents", "chunks", "warn", 2)
    assert (r["detail"]["stale"], r["detail"]["missing"]) == (2, 0), r
    assert "worker" in r["hint"]
    q = expect(rows, "reembed_queue", "external_precedents", "chunks", "ok", 2)
    assert q["detail"]["queued"] == 2
    only_these_fail(rows, {("embeddings", "external_precedents", "chunks")})
    assert run_worker(db, "precedent_chunks", vectors) == 2
    assert_all_ok(db)


def test_embeddings_zero_vector(db):
    item = chunk_ids(INTERNAL[0])[1]
    vectors = embeddings_of(db, "precedent_chunks", [item])
    db.execute("UPDATE precedent_chunks SET embedding = %s::vector WHERE id = %s",
               ("[" + ",".join(["0"] * DIM) + "]", item))
    rows = health(db)
    r = expect(rows, "embeddings", "internal_decisions", "chunks", "fail", 1)
    assert r["detail"]["zero_vectors"] == 1 and r["detail"]["non_finite"] == 0, r
    only_these_fail(rows, {("embeddings", "internal_decisions", "chunks")})
    # the hint is the targeted repair: clear exactly the zero vectors; the trigger queues them
    assert run_hint(db, r["hint"]) == [
        'UPDATE "public"."precedent_chunks" SET "embedding" = NULL '
        'WHERE "public".vector_norm("embedding") = 0;']
    rows = health(db)
    r = expect(rows, "embeddings", "internal_decisions", "chunks", "warn", 1)
    assert (r["detail"]["zero_vectors"], r["detail"]["missing"]) == (0, 1), r
    expect(rows, "reembed_queue", "internal_decisions", "chunks", "ok", 1)
    assert queue_size(db, "precedent_chunks") == 1
    assert run_worker(db, "precedent_chunks", vectors) == 1
    assert_all_ok(db)


@pytest.mark.parametrize("expr", ["'[1,NaN,2]'::vector", "'[1,Infinity,2]'::vector",
                                  "ARRAY[1, 'NaN', 2]::real[]::vector",
                                  "ARRAY[1, '-Infinity', 2]::real[]::vector"])
def test_embeddings_non_finite_cannot_be_stored(db, expr):
    """embeddings.non_finite cannot be created here: pgvector refuses NaN/Infinity on input.
    If this starts to pass through, give the non_finite count a defect-and-repair test."""
    with pytest.raises(psycopg.errors.DataException):
        db.execute(f"SELECT {expr}")


# ============================================================================================
# searchable_contract
# ============================================================================================


def test_searchable_contract_incomplete_parents(db):
    a, b = EXTERNAL[1], EXTERNAL[2]
    db.execute("UPDATE case_law SET case_name = '' WHERE id = %s", (a,))
    rows = health(db)
    r = expect(rows, "searchable_contract", "external_precedents", "chunks", "warn", 4)
    d = r["detail"]
    assert (d["incomplete_parents"], d["items_hidden_by_incomplete_parents"]) == (1, 4), d
    assert d["searchable"] == len(EXTERNAL) * 4 - 4
    assert "case_name" in r["hint"]
    r = expect(rows, "searchable_contract", "external_precedents", "halachot", "warn", 2)
    assert r["detail"]["incomplete_parents"] == 1
    only_these_fail(rows, {("searchable_contract", "external_precedents", s)
                           for s in ("chunks", "halachot")})
    # NULL and blank count the same; two parents now
    db.execute("UPDATE case_law SET case_name = '   ' WHERE id = %s", (b,))
    db.execute("UPDATE case_law SET case_name = NULL WHERE id = %s", (a,))
    r = expect(health(db), "searchable_contract", "external_precedents", "chunks", "warn", 8)
    assert r["detail"]["incomplete_parents"] == 2
    db.execute("UPDATE case_law SET case_name = 'Repaired ' || id WHERE id IN (%s, %s)", (a, b))
    assert_all_ok(db)


def test_searchable_contract_hidden_items_are_those_the_parent_alone_hides(db):
    """"parents failing the completeness rule and how many items that hides": case 1 has two
    approved halachot and one pending; the pending one is hidden by the source rule whatever
    the parent, so blanking case 1 hides 2 halachot, not 3."""
    db.execute("UPDATE case_law SET case_name = '' WHERE id = 1")
    r = row(health(db), "searchable_contract", "external_precedents", "halachot")
    assert (r["status"], r["detail"]["items_hidden_by_incomplete_parents"], r["count"]) == \
        ("warn", 2, 2), r


def test_searchable_contract_short_text_of_an_excluded_item_is_no_finding(db):
    """A pending halacha is never returned (source rule); its text being short hides nothing."""
    with deferred_queue(db):
        db.execute("UPDATE halachot SET rule = 'short' WHERE id = %s", (PENDING_HALACHA,))
    r = row(health(db), "searchable_contract", "external_precedents", "halachot")
    assert (r["status"], r["count"], r["detail"]["below_min_length"]) == ("ok", 0, 0), r


def test_searchable_contract_counts_add_up_and_name_the_items(db):
    """An item is counted once, by the first rule it fails (source rule, parent, min_length):
    the slice is the searchable items plus those three counts; each finding names its lowest
    ids."""
    a, b = EXTERNAL[1], EXTERNAL[2]
    hidden = chunk_ids(a)
    with deferred_queue(db):
        db.execute("UPDATE case_law SET case_name = '' WHERE id = %s", (a,))
        # short text under an incomplete parent: hidden by the parent, not counted twice
        db.execute("UPDATE precedent_chunks SET content = 'too short' WHERE id = %s", (hidden[0],))
        db.execute("UPDATE precedent_chunks SET content = 'short too' WHERE id = %s", (chunk_ids(b)[1],))
        db.execute("UPDATE precedent_chunks SET embedding = NULL WHERE id = %s", (chunk_ids(b)[2],))
        rows = health(db)
    d = row(rows, "searchable_contract", "external_precedents", "chunks")["detail"]
    assert d["slice_items"] == (d["searchable"] + d["below_min_length"] + d["items_hidden_by_incomplete_parents"]
                                + d["excluded_by_source_rule"]), d
    assert (d["below_min_length"], d["items_hidden_by_incomplete_parents"]) == (1, len(hidden)), d
    assert d["sample_ids"] == {"below_min_length": [str(chunk_ids(b)[1])],
                               "items_hidden_by_incomplete_parents": [str(i) for i in sorted(hidden)][:5]}, d
    emb = row(rows, "embeddings", "external_precedents", "chunks")
    assert emb["detail"]["sample_ids"]["missing_embedding"] == [str(chunk_ids(b)[2])], emb["detail"]
    assert "detail.sample_ids" in emb["hint"]


def test_add_source_answers_what_it_found_as_the_health_check_counts_it(db):
    a, b = EXTERNAL[1], EXTERNAL[2]
    with deferred_queue(db):
        db.execute("UPDATE case_law SET case_name = '' WHERE id = %s", (a,))
        db.execute("UPDATE precedent_chunks SET content = 'short too' WHERE id = %s", (chunk_ids(b)[1],))
        db.execute("UPDATE precedent_chunks SET embedding = NULL WHERE id = %s", (chunk_ids(b)[2],))
    db.execute("SELECT corpus.corpus_drop_source('external_precedents', 'chunks')")
    with db.cursor(row_factory=dict_row) as cur:
        found = cur.execute(add_source_sql("external_precedents", "chunks").replace("SELECT corpus.", "SELECT * FROM corpus.")
                            ).fetchall()
    assert len(found) == 1, found
    f = found[0]
    d = row(health(db), "searchable_contract", "external_precedents", "chunks")["detail"]
    assert (f["source"], f["counted"]) == ("chunks", "exactly")
    assert (f["items"], f["searchable"], f["below_min_length"], f["hidden_by_incomplete_parents"],
            f["excluded_by_source_rule"]) == (d["slice_items"], d["searchable"], d["below_min_length"],
                                              d["items_hidden_by_incomplete_parents"], d["excluded_by_source_rule"])
    assert (f["below_min_length"], f["hidden_by_incomplete_parents"], f["missing_embedding"]) == \
        (1, CHUNKS_PER_CASE, 1), f
    assert f["items"] == f["searchable"] + 1 + CHUNKS_PER_CASE
    assert f["table_rows"] is None or f["table_rows"] >= f["items"]


def test_searchable_contract_short_text(db):
    item, padded = chunk_ids(EXTERNAL[0])[0], chunk_ids(EXTERNAL[0])[1]
    before = dict(db.execute("SELECT id, content FROM precedent_chunks WHERE id IN (%s, %s)",
                             (item, padded)).fetchall())
    with deferred_queue(db):
        db.execute("UPDATE precedent_chunks SET content = 'too short' WHERE id = %s", (item,))
        rows = health(db)
        r = expect(rows, "searchable_contract", "external_precedents", "chunks", "warn", 1)
        assert r["detail"]["below_min_length"] == 1
        assert "min_length" in r["hint"]
        only_these_fail(rows, {("searchable_contract", "external_precedents", "chunks")})
        # 60 spaces + 5 letters: short after trim
        db.execute("UPDATE precedent_chunks SET content = repeat(' ', 60) || 'short' WHERE id = %s",
                   (padded,))
        r = expect(health(db), "searchable_contract", "external_precedents", "chunks", "warn", 2)
        assert r["detail"]["searchable"] == len(EXTERNAL) * 4 - 2
        for i, content in before.items():
            db.execute("UPDATE precedent_chunks SET content = %s WHERE id = %s", (content, i))
    assert_all_ok(db)


def test_searchable_contract_orphans(db):
    case = EXTERNAL[3]
    parent = db.execute("SELECT * FROM case_law WHERE id = %s", (case,)).fetchone()
    db.execute("SET session_replication_role = replica")  # foreign keys not enforced
    try:
        db.execute("DELETE FROM case_law WHERE id = %s", (case,))
    finally:
        db.execute("RESET session_replication_role")
    rows = health(db)
    # the parent is gone, so the items belong to no corpus: every corpus on the table sees them
    for corpus in LEGAL:
        r = expect(rows, "searchable_contract", corpus, "chunks", "warn", CHUNKS_PER_CASE)
        assert r["detail"]["orphans"] == CHUNKS_PER_CASE, r
        assert "DELETE" in r["hint"] or "parent" in r["hint"]
        r = expect(rows, "searchable_contract", corpus, "halachot", "warn", HALACHOT_PER_CASE)
        assert r["detail"]["orphans"] == HALACHOT_PER_CASE, r
    only_these_fail(rows, {("searchable_contract", c, s) for c in LEGAL
                           for s in ("chunks", "halachot")})
    with db.cursor() as cur:
        cur.execute("INSERT INTO case_law VALUES (" + ", ".join(["%s"] * len(parent)) + ")",
                    parent)
    assert_all_ok(db)


def test_searchable_contract_unresolved_locators(db):
    chunks = chunk_ids(EXTERNAL[4])[:2]
    hal = halacha_ids(EXTERNAL[4])[0]
    saved_pages = dict(db.execute("SELECT id, page_number FROM precedent_chunks WHERE id = ANY(%s)",
                                  (chunks,)).fetchall())
    saved_quotes = dict(db.execute("SELECT id, supporting_quote FROM halachot WHERE id IN (%s, %s)",
                                   (hal, PENDING_HALACHA)).fetchall())
    db.execute("UPDATE precedent_chunks SET page_number = NULL WHERE id = ANY(%s)", (chunks,))
    db.execute("UPDATE halachot SET supporting_quote = NULL WHERE id = %s", (hal,))
    # a pending halacha is never returned: its missing quote is not a finding
    db.execute("UPDATE halachot SET supporting_quote = NULL WHERE id = %s", (PENDING_HALACHA,))
    rows = health(db)
    r = expect(rows, "searchable_contract", "external_precedents", "chunks", "warn", 2)
    assert r["detail"]["unresolved_locators"] == 2
    assert "locator" in r["hint"]
    r = expect(rows, "searchable_contract", "external_precedents", "halachot", "warn", 1)
    assert r["detail"]["unresolved_locators"] == 1
    only_these_fail(rows, {("searchable_contract", "external_precedents", s)
                           for s in ("chunks", "halachot")})
    for i, p in saved_pages.items():
        db.execute("UPDATE precedent_chunks SET page_number = %s WHERE id = %s", (p, i))
    for i, q in saved_quotes.items():
        db.execute("UPDATE halachot SET supporting_quote = %s WHERE id = %s", (q, i))
    assert_all_ok(db)


def test_searchable_contract_counts_add_up(db):
    """Several findings on one source: count is their sum, the status the worst."""
    c = INTERNAL[2]
    ids = chunk_ids(c)
    with deferred_queue(db):
        db.execute("UPDATE precedent_chunks SET content = 'tiny' WHERE id = %s", (chunk_ids(INTERNAL[3])[0],))
        db.execute("UPDATE precedent_chunks SET page_number = NULL WHERE id = %s", (chunk_ids(INTERNAL[4])[0],))
    db.execute("UPDATE case_law SET case_name = NULL WHERE id = %s", (c,))
    r = expect(health(db), "searchable_contract", "internal_decisions", "chunks", "warn", len(ids) + 2)
    d = r["detail"]
    assert (d["items_hidden_by_incomplete_parents"], d["below_min_length"],
            d["unresolved_locators"], d["orphans"]) == (len(ids), 1, 1, 0), d


# ============================================================================================
# indexes
# ============================================================================================


def test_indexes_missing_ann_index(db):
    db.execute("DROP INDEX precedent_chunks_embedding_idx")
    rows = health(db)
    for corpus in LEGAL:
        r = expect(rows, "indexes", corpus, "chunks", "warn", 1)
        assert r["detail"]["ann_index"] is None
        assert "USING hnsw" in r["hint"] and "vector_cosine_ops" in r["hint"], r["hint"]
        assert "max_parallel_maintenance_workers = 0" in r["hint"]
    only_these_fail(rows, {("indexes", c, "chunks") for c in LEGAL})
    run_hint(db, row(rows, "indexes", LEGAL[0], "chunks")["hint"])
    assert_all_ok(db)


def test_indexes_wrong_operator_class(db):
    db.execute("DROP INDEX halachot_embedding_idx")
    db.execute("SET max_parallel_maintenance_workers = 0")
    db.execute("CREATE INDEX halachot_l2_idx ON halachot USING hnsw (embedding vector_l2_ops)")
    rows = health(db)
    for corpus in LEGAL:
        r = expect(rows, "indexes", corpus, "halachot", "fail", 1)
        assert r["detail"]["ann_index"] == "halachot_l2_idx"
        assert r["detail"]["ann_opclass_expected"] == "vector_cosine_ops"
        assert "vector_l2_ops" in r["hint"] and "vector_cosine_ops" in r["hint"], r["hint"]
    only_these_fail(rows, {("indexes", c, "halachot") for c in LEGAL})
    # the hint drops the wrong index and builds the right one
    statements = run_hint(db, row(rows, "indexes", LEGAL[0], "halachot")["hint"])
    assert statements[0] == 'DROP INDEX CONCURRENTLY public.halachot_l2_idx;', statements
    assert_all_ok(db)


def test_indexes_missing_gin_index(db):
    db.execute("DROP INDEX document_chunks_tsv_idx")
    rows = health(db)
    r = expect(rows, "indexes", "case_documents", "documents", "warn", 1)
    assert r["detail"]["lexical_gin_index"] is False
    assert "USING gin" in r["hint"] and "content_tsv" in r["hint"]
    only_these_fail(rows, {("indexes", "case_documents", "documents")})
    run_hint(db, r["hint"])
    assert_all_ok(db)


def test_indexes_missing_parent_key_index(db):
    db.execute("DROP INDEX halachot_case_law_id_idx")
    rows = health(db)
    for corpus in LEGAL:
        r = expect(rows, "indexes", corpus, "halachot", "warn", 1)
        assert r["detail"]["parent_key_index"] is False
        assert "case_law_id" in r["hint"]
    run_hint(db, row(rows, "indexes", LEGAL[0], "halachot")["hint"])
    assert_all_ok(db)


def test_indexes_several_findings_add_up(db):
    db.execute("DROP INDEX precedent_chunks_embedding_idx")
    db.execute("DROP INDEX precedent_chunks_tsv_idx")
    db.execute("DROP INDEX precedent_chunks_case_law_id_idx")
    r = expect(health(db), "indexes", "external_precedents", "chunks", "warn", 3)
    assert r["detail"]["indexes"] == ["precedent_chunks_bm25_idx", "precedent_chunks_pkey"]


def test_indexes_missing_bm25_index(db):
    db.execute("DROP INDEX document_chunks_bm25_idx")
    rows = health(db)
    r = expect(rows, "indexes", "case_documents", "documents", "warn", 1)
    assert r["detail"]["lexical_bm25_index"] is False
    assert "USING corpus_bm25" in r["hint"] and "content_tsv" in r["hint"]
    only_these_fail(rows, {("indexes", "case_documents", "documents")})
    run_hint(db, r["hint"])
    assert_all_ok(db)


def test_indexes_invalid_index(db):
    """CREATE UNIQUE INDEX CONCURRENTLY that fails on a duplicate leaves an invalid index."""
    with pytest.raises(psycopg.errors.UniqueViolation):
        db.execute("CREATE UNIQUE INDEX CONCURRENTLY chunk_index_uq ON precedent_chunks (chunk_index)")
    assert db.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = 'chunk_index_uq'::regclass"
                      ).fetchone()[0] is False
    rows = health(db)
    for corpus in LEGAL:
        r = expect(rows, "indexes", corpus, "chunks", "fail", 1)
        assert r["detail"]["invalid_indexes"] == ["chunk_index_uq"]
        assert "duplicates, for a unique index" in r["hint"], r["hint"]
        assert hint_statements(r["hint"]) == [
            "DROP INDEX CONCURRENTLY public.chunk_index_uq;",
            "CREATE UNIQUE INDEX CONCURRENTLY chunk_index_uq ON public.precedent_chunks "
            "USING btree (chunk_index);"], r["hint"]
    only_these_fail(rows, {("indexes", c, "chunks") for c in LEGAL})
    # as the hint says, the rebuild fails again while the duplicates are there
    drop, create = hint_statements(row(rows, "indexes", LEGAL[0], "chunks")["hint"])
    db.execute(drop)
    with pytest.raises(psycopg.errors.UniqueViolation):
        db.execute(create)
    expect(health(db), "indexes", LEGAL[0], "chunks", "fail", 1)
    # chunk_index is unique per case only: the index itself was the mistake
    db.execute(drop)
    assert_all_ok(db)


@pytest.fixture
def flaky_indexes(db):
    """Two invalid indexes that can be rebuilt: their expression fails while a setting is on."""
    db.execute("""
        CREATE FUNCTION public.pgc_flaky(i int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
        BEGIN
            IF current_setting('pgc_test.fail', true) = 'on' THEN RAISE EXCEPTION 'flaky'; END IF;
            RETURN i;
        END $$""")
    db.execute("SET pgc_test.fail = on")
    for name in ("flaky_a", "flaky_b"):
        with pytest.raises(psycopg.errors.RaiseException):
            db.execute(f"CREATE INDEX CONCURRENTLY {name} ON precedent_chunks (public.pgc_flaky(chunk_index))")
    db.execute("RESET pgc_test.fail")
    return ["flaky_a", "flaky_b"]


def test_indexes_invalid_index_hint_repairs_it(db, flaky_indexes):
    """Each non-ok row's hint tells the DBA what to run: with two invalid indexes the hint must
    still be runnable SQL (REINDEX takes one index per statement)."""
    r = expect(health(db), "indexes", "external_precedents", "chunks", "fail", 2)
    assert sorted(r["detail"]["invalid_indexes"]) == flaky_indexes
    # one DROP INDEX CONCURRENTLY + CREATE INDEX CONCURRENTLY pair per invalid index
    statements = run_hint(db, r["hint"])
    assert [st.split(" ON ")[0] for st in statements] == [
        "DROP INDEX CONCURRENTLY public.flaky_a;", "CREATE INDEX CONCURRENTLY flaky_a",
        "DROP INDEX CONCURRENTLY public.flaky_b;", "CREATE INDEX CONCURRENTLY flaky_b"], statements
    assert db.execute("SELECT count(*) FROM pg_index WHERE indexrelid IN "
                      "('flaky_a'::regclass, 'flaky_b'::regclass) AND indisvalid").fetchone()[0] == 2
    assert_all_ok(db)


def test_indexes_invalid_gin_index_does_not_cover_the_corpus(db):
    """An invalid index is ignored by queries, so an invalid GIN index on the tsvector is two
    findings: the invalid index, and no (usable) GIN index. The build is made to fail honestly:
    CREATE INDEX CONCURRENTLY waits for a writer of the table and runs into statement_timeout."""
    db.execute("DROP INDEX document_chunks_tsv_idx")
    writer = psycopg.connect(db.info.dsn)  # a transaction holding RowExclusiveLock
    try:
        writer.execute("UPDATE document_chunks SET section = section WHERE id = 5010")
        db.execute("SET statement_timeout = '1s'")
        with pytest.raises(psycopg.errors.QueryCanceled):
            db.execute("CREATE INDEX CONCURRENTLY document_chunks_tsv_idx ON document_chunks "
                       "USING gin (content_tsv)")
        db.execute("RESET statement_timeout")
    finally:
        writer.rollback()
        writer.close()
    rows = health(db)
    r = expect(rows, "indexes", "case_documents", "documents", "fail", 2)
    d = r["detail"]
    assert (d["invalid_indexes"], d["lexical_gin_index"]) == (["document_chunks_tsv_idx"], False), d
    only_these_fail(rows, {("indexes", "case_documents", "documents")})
    assert run_hint(db, r["hint"]) == [
        "DROP INDEX CONCURRENTLY public.document_chunks_tsv_idx;",
        "CREATE INDEX CONCURRENTLY document_chunks_tsv_idx ON public.document_chunks "
        "USING gin (content_tsv);"]
    assert_all_ok(db)


def test_indexes_partial_ann_index_does_not_cover_the_corpus(db):
    """"cover each corpus the way the design needs": a partial HNSW index whose predicate the
    corpus' searches do not imply is never used by them; it is not the corpus' ANN index."""
    db.execute("DROP INDEX document_chunks_embedding_idx")
    db.execute("SET max_parallel_maintenance_workers = 0")
    db.execute("CREATE INDEX document_chunks_partial_idx ON document_chunks "
               "USING hnsw (embedding vector_cosine_ops) WHERE document_id = 1")
    rows = health(db)
    r = expect(rows, "indexes", "case_documents", "documents", "warn", 1)
    d = r["detail"]
    assert (d["ann_index"], d["partial_indexes"]) == (None, ["document_chunks_partial_idx"]), d
    assert "USING hnsw" in r["hint"]
    only_these_fail(rows, {("indexes", "case_documents", "documents")})
    run_hint(db, r["hint"])
    rows = assert_all_ok(db)
    # the partial index may stay: it is listed, it is not a finding
    d = row(rows, "indexes", "case_documents", "documents")["detail"]
    assert d["partial_indexes"] == ["document_chunks_partial_idx"] and d["ann_index"], d


def test_indexes_partial_gin_and_parent_key_indexes_do_not_cover_the_corpus(db):
    db.execute("DROP INDEX document_chunks_tsv_idx")
    db.execute("DROP INDEX document_chunks_document_id_idx")
    db.execute("CREATE INDEX dc_tsv_partial ON document_chunks USING gin (content_tsv) "
               "WHERE section = 'ruling'")
    db.execute("CREATE INDEX dc_doc_partial ON document_chunks (document_id) WHERE page_number > 1")
    r = expect(health(db), "indexes", "case_documents", "documents", "warn", 2)
    d = r["detail"]
    assert (d["lexical_gin_index"], d["parent_key_index"]) == (False, False), d
    assert sorted(d["partial_indexes"]) == ["dc_doc_partial", "dc_tsv_partial"], d
    # every finding's fix in one hint: the GIN index and the parent key's
    assert len(run_hint(db, r["hint"])) == 2
    assert_all_ok(db)


# ============================================================================================
# reembed_queue
# ============================================================================================


def test_reembed_queue_dead_letter(db):
    item = halacha_ids(EXTERNAL[0])[1]
    vectors = embeddings_of(db, "halachot", [item])
    db.execute("UPDATE halachot SET embedding = NULL WHERE id = %s", (item,))
    claimed = db.execute("SELECT item_id, version FROM corpus.corpus_embedding_claim(10, "
                         "only_table => 'halachot')").fetchall()
    assert [c[0] for c in claimed] == [str(item)]
    state = db.execute("SELECT corpus.corpus_embedding_fail('halachot', 'embedding', %s, %s, "
                       "'model timeout', max_attempts => 1)", claimed[0]).fetchone()[0]
    assert state == "dead"
    rows = health(db)
    # count = the corpus' queued items; a dead letter is still queued (state 'dead')
    r = expect(rows, "reembed_queue", "external_precedents", "halachot", "warn", 1)
    assert (r["detail"]["dead_letters"], r["detail"]["queued"]) == (1, 1), r
    assert "corpus_embedding_retry_dead" in r["hint"]
    expect(rows, "embeddings", "external_precedents", "halachot", "warn", 1)  # missing
    # retry: back in the queue, no longer a finding of the queue
    assert db.execute("SELECT corpus.corpus_embedding_retry_dead()").fetchone()[0] == 1
    rows = health(db)
    r = expect(rows, "reembed_queue", "external_precedents", "halachot", "ok", 1)
    assert (r["detail"]["dead_letters"], r["detail"]["queued"]) == (0, 1)
    assert run_worker(db, "halachot", vectors) == 1
    assert_all_ok(db)


def test_reembed_queue_rows_are_per_corpus(db):
    """The rows are (corpus, source): a dead letter of an external halacha is not a finding of
    internal_decisions (the embeddings check already counts per corpus slice)."""
    item = halacha_ids(EXTERNAL[0])[1]
    db.execute("UPDATE halachot SET embedding = NULL WHERE id = %s", (item,))
    claimed = db.execute("SELECT item_id, version FROM corpus.corpus_embedding_claim(10, "
                         "only_table => 'halachot')").fetchall()
    db.execute("SELECT corpus.corpus_embedding_fail('halachot', 'embedding', %s, %s, 'x', "
               "max_attempts => 1)", claimed[0])
    rows = health(db)
    expect(rows, "reembed_queue", "external_precedents", "halachot", "warn", 1)
    expect(rows, "reembed_queue", "internal_decisions", "halachot", "ok", 0)


def test_reembed_queue_old_entries(db):
    ids = chunk_ids(INTERNAL[1])[:3]
    vectors = embeddings_of(db, "precedent_chunks", ids)
    db.execute("UPDATE precedent_chunks SET content = content || ' (corrected)' WHERE id = ANY(%s)",
               (ids,))
    expect(health(db), "reembed_queue", "internal_decisions", "chunks", "ok", 3)
    db.execute("UPDATE corpus.embedding_queue SET enqueued_at = now() - interval '2 hours' "
               "WHERE item_table = 'precedent_chunks'::regclass")
    rows = health(db)
    r = expect(rows, "reembed_queue", "internal_decisions", "chunks", "warn", 3)
    assert r["detail"]["table_oldest_seconds"] >= 7200 and r["detail"]["queued"] == 3, r
    assert "worker" in r["hint"]
    # the age is the table's, but only a corpus with queued items warns about it
    other = row(rows, "reembed_queue", "external_precedents", "chunks")
    assert other["detail"]["queued"] == 0 and other["detail"]["table_oldest_seconds"] >= 7200
    assert run_worker(db, "precedent_chunks", vectors) == 3
    assert_all_ok(db)


def test_reembed_queue_old_entries_of_another_corpus(db):
    """Only internal items wait; the external corpus has nothing queued. Its row is warn with
    count 0 today: either it is not a finding of this corpus (ok), or count says what it is."""
    ids = chunk_ids(INTERNAL[1])[:3]
    db.execute("UPDATE precedent_chunks SET content = content || ' (corrected)' WHERE id = ANY(%s)",
               (ids,))
    db.execute("UPDATE corpus.embedding_queue SET enqueued_at = now() - interval '2 hours'")
    r = row(health(db), "reembed_queue", "external_precedents", "chunks")
    assert r["status"] == "ok" or r["count"] >= 1, r


def _slot(db, table):
    return db.execute("SELECT trigger_name, trigger_function FROM corpus.embedding_slots "
                      "WHERE item_table = %s::regclass", (table,)).fetchone()


ADD_DOCUMENTS = """SELECT corpus.corpus_add_source('case_documents', 'documents', 'document_chunks',
    text_column => 'content', tsv_column => 'content_tsv', embedding_column => 'embedding',
    parent_fk => 'document_id',
    locator  => '{"document_id": "document_id", "page": "page_number", "section": "section", "chunk_id": "id"}',
    metadata => '{"practice_area": "practice_area", "case_id": "case_id"}')"""


def add_source_sql(corpus, source):
    """The corpus_add_source statement of tests/fixtures/legal_corpora.sql for (corpus, source)."""
    sql = (FIXTURES_DIR / "legal_corpora.sql").read_text()
    start = sql.index(f"SELECT corpus.corpus_add_source('{corpus}', '{source}'")
    return sql[start:sql.index(";", start) + 1]


def test_reembed_queue_missing_slot(db):
    """A slot row deleted by hand leaves its trigger and function behind; the hint's
    re-registration (drop the source, add it again as before) must repair that."""
    db.execute("DELETE FROM corpus.embedding_slots WHERE item_table = 'document_chunks'::regclass")
    rows = health(db)
    r = expect(rows, "reembed_queue", "case_documents", "documents", "fail", 1)
    assert (r["detail"]["slots"], r["detail"]["enabled_triggers"]) == (0, 0), r
    assert "SELECT corpus.corpus_drop_source('case_documents', 'documents');" in r["hint"]
    assert "corpus.corpus_add_source(" in r["hint"]
    only_these_fail(rows, {("reembed_queue", "case_documents", "documents")})
    db.execute("SELECT corpus.corpus_drop_source('case_documents', 'documents')")
    db.execute(ADD_DOCUMENTS)
    rows = assert_all_ok(db)
    r = row(rows, "reembed_queue", "case_documents", "documents")
    assert (r["detail"]["slots"], r["detail"]["enabled_triggers"]) == (1, 1), r
    # and the re-attached trigger works: a text change is queued
    db.execute("UPDATE document_chunks SET content = content || ' amended' WHERE id = 5010")
    expect(health(db), "reembed_queue", "case_documents", "documents", "ok", 1)


@pytest.mark.parametrize("how", [
    "drop", "disable",
    "replica",
])
def test_reembed_queue_trigger_gone_or_disabled(db, how):
    """Invariant 5 rests on the trigger: without it text changes silently leave old embeddings
    in use. A dropped trigger is repaired by re-registering the source, a disabled one by
    ENABLE TRIGGER (both named by the hint)."""
    trigger, _ = _slot(db, "document_chunks")
    if how == "drop":
        db.execute(f'DROP TRIGGER "{trigger}" ON document_chunks')
    elif how == "disable":
        db.execute(f'ALTER TABLE document_chunks DISABLE TRIGGER "{trigger}"')
    else:
        db.execute(f'ALTER TABLE document_chunks ENABLE REPLICA TRIGGER "{trigger}"')
    # what is at stake: a text change is not queued (undone again: the check cannot see it, and
    # neither repair queues it afterwards)
    original = db.execute("SELECT content FROM document_chunks WHERE id = 5011").fetchone()[0]
    db.execute("UPDATE document_chunks SET content = content || ' amended' WHERE id = 5011")
    assert queue_size(db, "document_chunks") == 0
    db.execute("UPDATE document_chunks SET content = %s WHERE id = 5011", (original,))
    rows = health(db)
    r = expect(rows, "reembed_queue", "case_documents", "documents", "fail", 1)
    assert (r["detail"]["slots"], r["detail"]["enabled_triggers"]) == (1, 0), r
    assert "SELECT corpus.corpus_drop_source('case_documents', 'documents');" in r["hint"]
    enable = re.search(r"ALTER TABLE \S+ ENABLE TRIGGER [^;]+;", r["hint"])
    assert enable, r["hint"]
    only_these_fail(rows, {("reembed_queue", "case_documents", "documents")})
    if how == "drop":
        db.execute("SELECT corpus.corpus_drop_source('case_documents', 'documents')")
        db.execute(ADD_DOCUMENTS)
    else:
        db.execute(enable.group(0))
    assert_all_ok(db)


def test_reembed_queue_disabled_trigger_hint_as_the_table_owner(db, role):
    """The table's owner (not a superuser) runs the hint on precedent_chunks, which has a foreign
    key to case_law: ALTER TABLE ... ENABLE TRIGGER ALL is 42501 '"RI_ConstraintTrigger_..." is
    a system trigger'. ENABLE TRIGGER <the slot's trigger> would do (and would not re-enable
    other triggers disabled on purpose)."""
    trigger, _ = _slot(db, "precedent_chunks")
    db.execute(f"ALTER TABLE precedent_chunks OWNER TO {role}")
    try:
        db.execute(f'ALTER TABLE precedent_chunks DISABLE TRIGGER "{trigger}"')
        r = expect(health(db), "reembed_queue", "external_precedents", "chunks", "fail", 1)
        enable = re.search(r"ALTER TABLE \S+ ENABLE TRIGGER [^;]+;", r["hint"]).group(0)
        db.execute(f"SET ROLE {role}")
        try:
            db.execute(enable)
        finally:
            db.execute("RESET ROLE")
        expect(health(db), "reembed_queue", "external_precedents", "chunks", "ok", 0)
    finally:
        db.execute("ALTER TABLE precedent_chunks OWNER TO CURRENT_USER")


# ============================================================================================
# lexical_statistics (BM25; only when this build has them)
# ============================================================================================


def test_lexical_statistics(db):
    if not has_function(db, "corpus_refresh_lexical_stats"):
        pytest.skip("this build has no BM25 statistics")
    refresh_lexical_stats(db)  # counted from this database's own table counters
    expect(health(db), "lexical_statistics", "case_documents", None, "ok", 0)
    with deferred_queue(db):
        db.execute("UPDATE document_chunks SET content = content || ' revised' WHERE document_id = 1")
    flush_stats(db)
    r = row(health(db), "lexical_statistics", "case_documents")
    assert r["status"] == "warn" and r["count"] == 4, r
    assert (r["detail"]["rows_changed_since_refresh"], r["detail"]["counters_reset"]) == (4, False)
    assert run_hint(db, r["hint"]) == [
        "SELECT * FROM corpus.corpus_refresh_lexical_stats('case_documents');"]
    expect(health(db), "lexical_statistics", "case_documents", None, "ok", 0)


def test_lexical_statistics_count_changes_of_the_refreshing_transaction(db):
    """The baseline includes the refreshing session's own changes not yet flushed to the
    statistics collector (pg_stat_get_xact_tuples_*): load, then refresh right away, no flush."""
    if not has_function(db, "corpus_refresh_lexical_stats"):
        pytest.skip("this build has no BM25 statistics")
    with deferred_queue(db):
        db.execute("UPDATE document_chunks SET content = content || ' revised'")
    db.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats('case_documents')")
    expect(health(db), "lexical_statistics", "case_documents", None, "ok", 0)
    flush_stats(db)  # now flushed: the same changes, still not counted twice
    expect(health(db), "lexical_statistics", "case_documents", None, "ok", 0)
    with db.transaction():  # and inside one transaction
        with deferred_queue(db):
            db.execute("UPDATE document_chunks SET content = content || ' again'")
        db.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats('case_documents')")
    flush_stats(db)
    expect(health(db), "lexical_statistics", "case_documents", None, "ok", 0)


def test_lexical_statistics_after_a_statistics_reset(db):
    """The staleness counter is pg_stat_all_tables' n_tup_ins + n_tup_upd + n_tup_del. Those
    counters go back to zero on pg_stat_reset(), after a crash or immediate shutdown, and in a
    database created from a template or restored from a dump; changes made after that must
    still be seen (here: every document rewritten)."""
    if not has_function(db, "corpus_refresh_lexical_stats"):
        pytest.skip("this build has no BM25 statistics")
    with deferred_queue(db):  # some history: the counters stand at 3 x 12 updates
        for _ in range(3):
            db.execute("UPDATE document_chunks SET section = section")
    refresh_lexical_stats(db)
    db.execute("SELECT pg_stat_reset()")
    with deferred_queue(db):
        db.execute("UPDATE document_chunks SET content = content || ' rewritten'")
    flush_stats(db)
    r = expect(health(db), "lexical_statistics", "case_documents", None, "warn", 1)
    assert r["detail"]["counters_reset"] is True, r
    assert "counters were reset" in r["hint"], r["hint"]
    run_hint(db, r["hint"])
    r = expect(health(db), "lexical_statistics", "case_documents", None, "ok", 0)
    assert r["detail"]["counters_reset"] is False, r


def test_lexical_statistics_in_a_copy_of_the_database(raw_copy):
    """CREATE DATABASE ... TEMPLATE copies corpus.lexical_totals but not the table statistics
    counters: every corpus of the copy reports them as reset until refreshed."""
    if not has_function(raw_copy, "corpus_refresh_lexical_stats"):
        pytest.skip("this build has no BM25 statistics")
    rows = health(raw_copy)
    only_these_fail(rows, {("lexical_statistics", c, None) for c in SOURCES}, ignore={"version"})
    for corpus in SOURCES:
        r = expect(rows, "lexical_statistics", corpus, None, "warn", 1)
        assert r["detail"]["counters_reset"] is True, r
        run_hint(raw_copy, r["hint"])
    assert_all_ok(raw_copy, ignore={"version"})


def test_lexical_statistics_reset_then_more_changes_than_before(db):
    """36 updates of history, refresh (baseline 36), pg_stat_reset(), then every document is
    rewritten 3 times (36 updates): all of the corpus changed, the check sees 36 - 36 = 0."""
    if not has_function(db, "corpus_refresh_lexical_stats"):
        pytest.skip("this build has no BM25 statistics")
    with deferred_queue(db):
        for _ in range(3):
            db.execute("UPDATE document_chunks SET section = section")
    refresh_lexical_stats(db)
    db.execute("SELECT pg_stat_reset()")
    with deferred_queue(db):
        for _ in range(3):
            db.execute("UPDATE document_chunks SET content = content || ' rewritten'")
    flush_stats(db)
    r = row(health(db), "lexical_statistics", "case_documents")
    assert r["status"] == "warn", r


# ============================================================================================
# Sampling above 200,000 rows
# ============================================================================================

BIG_ROWS = 250_000


def test_sampling_on_a_large_source(cluster):
    """250,000 cheap items (vector(4)) in one corpus (tenant 'a' = the odd item ids). In the
    slice: 125,000 items, 25,000 short (id % 10 = 1), 2,500 without embedding (id % 100 = 3).
    Counts are estimated from a sample above 200,000 rows: the detail says so, the estimates are
    close, and the whole check stays fast (a sanity bound, not a benchmark)."""
    conn = cluster.create_db("pgc_health_big")
    conn.execute(f"""
        CREATE TABLE big_parent (id bigint PRIMARY KEY, tenant text NOT NULL, title text);
        INSERT INTO big_parent SELECT g, CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, 'title ' || g
          FROM generate_series(1, 5000) g;
        CREATE TABLE big_items (id bigint PRIMARY KEY, parent_id bigint NOT NULL, body text NOT NULL,
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED, emb vector(4));
        INSERT INTO big_items (id, parent_id, body, emb)
        SELECT g, 1 + g % 5000,
               CASE WHEN g % 10 = 1 THEN 'short'
                    ELSE 'item ' || g || ' w' || (g % 97) || ' lorem ipsum dolor sit amet consectetur adipiscing' END,
               CASE WHEN g % 100 = 3 THEN NULL ELSE ARRAY[cos(g), sin(g), cos(2 * g), 1]::real[]::vector END
          FROM generate_series(1, {BIG_ROWS}) g;
        CREATE INDEX ON big_items (parent_id);
        ANALYZE big_parent, big_items;
        SELECT corpus.corpus_create('big', isolation => '{{"tenant": "a"}}');
        SELECT corpus.corpus_add_source('big', 'items', 'big_items', text_column => 'body',
            tsv_column => 'tsv', embedding_column => 'emb', parent_table => 'big_parent',
            parent_fk => 'parent_id', parent_required => '{{title}}',
            locator => '{{"title": "parent.title"}}');
    """)
    reltuples = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'big_items'::regclass"
                             ).fetchone()[0]
    assert reltuples > 200_000
    started = time.monotonic()
    rows = health(conn, "big")
    elapsed = time.monotonic() - started
    assert elapsed < 10, f"corpus_health_check('big') took {elapsed:.1f} s"

    truth = {"slice_items": 125_000, "below_min_length": 25_000, "searchable": 100_000,
             "missing": 2_500}
    sc = row(rows, "searchable_contract", "big", "items")
    em = row(rows, "embeddings", "big", "items")
    for r in (sc, em):
        s = r["detail"]["sampling"]
        assert "estimated" in s["counted"] and "sample" in s["counted"], s
        assert s["sample_percent"] == pytest.approx(100 * 50_000 / reltuples, rel=1e-6), s
    for key, tol in [("slice_items", 0.1), ("below_min_length", 0.15), ("searchable", 0.1)]:
        assert sc["detail"][key] == pytest.approx(truth[key], rel=tol), (key, sc["detail"])
    assert em["detail"]["missing"] == pytest.approx(truth["missing"], rel=0.3), em["detail"]
    assert sc["status"] == "warn" and sc["count"] == sc["detail"]["below_min_length"]
    assert em["status"] == "warn" and em["count"] == em["detail"]["missing"]
    assert sc["detail"]["orphans"] == 0
    audit = row(rows, "isolation_audit", "big")
    assert audit["status"] == "ok" and audit["detail"]["probes"] == 3, audit
    # every item without an embedding was queued at registration; the corpus' queued searchable
    # items (2,500: none of them is short) are estimated from the same sample
    q = row(rows, "reembed_queue", "big", "items")
    assert q["detail"]["sampling"] == sc["detail"]["sampling"], q
    assert q["detail"]["queued"] == pytest.approx(truth["missing"], rel=0.3), q["detail"]
    assert q["count"] == q["detail"]["queued"] and q["detail"]["dead_letters"] == 0, q
    assert conn.execute("SELECT count(*) FROM corpus.embedding_queue").fetchone()[0] == BIG_ROWS // 100


# ============================================================================================
# The healthy demo database
# ============================================================================================


def test_demo_database_is_healthy(cluster, pgc):
    name = "pgc_health_demo"
    res = subprocess.run([sys.executable, str(pgc.ROOT / "demo" / "load_sample.py"), cluster.uri,
                          "--dbname", name], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    cluster._dbs.append(name)
    conn = cluster.connect(name)
    # The demo leaves two cases without a name on purpose (the completeness rule at work).
    incomplete = conn.execute("SELECT id, source_kind FROM case_law "
                              "WHERE NULLIF(btrim(case_name), '') IS NULL ORDER BY id").fetchall()
    assert len(incomplete) == 2
    rows = health(conn)
    flagged = {(r["corpus"], r["source"]) for r in not_ok(rows)}
    assert flagged == {(c, s) for c in LEGAL for s in ("chunks", "halachot")}, not_ok(rows)
    for corpus, kind in [("external_precedents", "external_upload"),
                         ("internal_decisions", "internal_committee")]:
        hidden = conn.execute(
            "SELECT count(*) FROM precedent_chunks p JOIN case_law c ON c.id = p.case_law_id "
            "WHERE c.source_kind = %s AND NULLIF(btrim(c.case_name), '') IS NULL", (kind,)
        ).fetchone()[0]
        expect(rows, "searchable_contract", corpus, "chunks", "warn", hidden)
        for s in ("chunks", "halachot"):
            r = row(rows, "searchable_contract", corpus, s)
            assert r["detail"]["incomplete_parents"] == 1, r

    n = conn.execute("UPDATE case_law SET case_name = 'Named for the health check ' || id "
                     "WHERE NULLIF(btrim(case_name), '') IS NULL").rowcount
    assert n == 2
    rows = health(conn)
    bad = not_ok(rows)
    assert not bad, bad
    v = row(rows, "version")
    pgvector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    if _vtuple(pgvector) < (0, 8, 2):
        # the only finding: pgvector's CVE
        assert (v["status"], v["count"]) == ("warn", 1), v
        assert v["hint"].startswith("pgvector < 0.8.2 carries CVE-2026-3172"), v["hint"]
        assert v["detail"]["installed"] == v["detail"]["library"], v
    else:
        assert v["status"] == "ok", v
    assert expected_keys() <= {(r["check"], r["corpus"], r["source"]) for r in rows}
    for corpus in LEGAL:
        assert row(rows, "isolation_audit", corpus)["detail"]["probes"] > 0
    # last, so that the assertions above are not masked: BM25 statistics right after the load
    lexical = [r for r in rows if r["check"] == "lexical_statistics" and r["status"] != "ok"]
    assert not lexical, lexical


# ============================================================================================
# Who can run it
# ============================================================================================

MONITOR = "pgc_health_monitor"


def test_a_read_only_monitoring_role_can_run_it(db):
    """DBAs and monitoring jobs run the check; a role that can read the corpora's tables (and
    is a member of pg_monitor) is what such jobs get. PUBLIC may read every column of
    corpus.embedding_queue except claimed_by and last_error, which the check does not read; the
    rows are those a superuser sees."""
    db.execute(f"DROP ROLE IF EXISTS {MONITOR}")
    db.execute(f"CREATE ROLE {MONITOR} IN ROLE pg_monitor")
    try:
        db.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {MONITOR}")
        db.execute(f"SET ROLE {MONITOR}")
        try:
            rows = health(db)
            for column in ("claimed_by", "last_error"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    db.execute(f"SELECT {column} FROM corpus.embedding_queue LIMIT 1")
        finally:
            db.execute("RESET ROLE")
        assert not not_ok(rows), not_ok(rows)
        as_owner = health(db)
        strip = lambda rs: sorted(((r["check"], r["corpus"] or "", r["source"] or "", r["status"],
                                    r["count"]) for r in rs))
        assert strip(rows) == strip(as_owner)
    finally:
        db.execute(f"DROP OWNED BY {MONITOR}")
        db.execute(f"DROP ROLE {MONITOR}")
