"""A corpus_bm25 index with further key columns (USING corpus_bm25 (body_bm25, kind)): a
condition kind = v or kind = ANY(array) restricts the index's ranking to the rows holding one of
the values, so a corpus that is any slice of the table ranks through the index, its first page
sized for its window alone, with the answer of the exhaustive scorer.

The table and corpora are those of test_bm25_index (half, a tenth and a hundredth of the rows);
the reference is the search with the index turned off and an unbounded candidate budget.
"""
import re
import time

import numpy as np
import psycopg
import pytest

from test_bm25_index import KINDS, generate, lexical, load, nodes, strategy, words


@pytest.fixture(scope="module")
def data():
    return generate(seed=23)


@pytest.fixture(scope="module")
def db(cluster, data):
    conn = cluster.create_db("pg_corpus_bm25_index_keys")
    load(conn, data[0])
    # (an autovacuum ANALYZE's snapshot would keep deleted rows from VACUUM's reach)
    conn.execute("ALTER TABLE docs SET (autovacuum_enabled = off)")
    conn.execute("CREATE INDEX docs_bm25_kind ON docs USING corpus_bm25 (body_bm25, kind)")
    return conn


def exhaustive(conn, corpus, text, k):
    with conn.transaction():
        conn.execute("SET LOCAL pg_corpus.bm25_index = off")
        conn.execute("SET LOCAL pg_corpus.bm25_candidate_budget = 1000000000")
        assert strategy(conn, corpus, text) == "text_match"
        return lexical(conn, corpus, text, k)


def index_scan(conn, corpus, text):
    """The lexical subplan's scan of docs: EXPLAIN ANALYZE of corpus_explain's SQL under its
    settings."""
    sql, params = conn.execute("SELECT sql, params FROM corpus.corpus_explain(%s, NULL, %s, mode => 'lexical')",
                               [corpus, text]).fetchone()
    settings = [line for line in sql.splitlines() if line.startswith("SET LOCAL ")]
    body = "\n".join(line for line in sql.splitlines() if not line.startswith("SET LOCAL "))
    body = re.sub(r"\$(\d+)", r"%(p\1)s", body.replace("%", "%%"))
    values = {f"p{i + 1}": v for i, v in enumerate(params)}
    with conn.transaction():
        for line in settings:
            conn.execute(line.rstrip(";"))
        plan = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {body}", values, prepare=False).fetchone()[0]
    scans = [n for n in nodes(plan[0]["Plan"]) if n.get("Relation Name") == "docs"]
    assert len(scans) == 1, plan
    return scans[0]


def test_every_slice_ranks_through_the_index_as_the_exhaustive_scorer(db, data):
    for corpus, _ in KINDS:
        for text in data[1][:60]:
            for k in (10, 40):
                assert lexical(db, corpus, text, k) == exhaustive(db, corpus, text, k), (corpus, text, k)
        # the hundredth too (a plain index leaves it to score its own candidates)
        assert strategy(db, corpus, data[1][0]) == "bm25_index", corpus


def test_an_isolation_of_several_values_ranks_as_the_exhaustive_scorer(db, data):
    """kind = ANY(...) is an index condition of the ordered scan from PostgreSQL 17 on, a filter
    after it before: the answers are the exhaustive ones either way."""
    db.execute("SELECT corpus.corpus_create('two_kinds', isolation => '{\"kind\": [\"tenth\", \"hundredth\"]}')")
    db.execute("""SELECT corpus.corpus_add_source('two_kinds', 'docs', 'docs', text_column => 'body',
                    embedding_column => 'emb', tsv_column => 'body_bm25', language => 'simple',
                    parent_fk => 'grp', min_length => 1)""")
    try:
        assert strategy(db, "two_kinds", data[1][0]) == "bm25_index"
        for text in data[1][60:100]:
            for k in (10, 40):
                got = lexical(db, "two_kinds", text, k)
                assert got == exhaustive(db, "two_kinds", text, k), (text, k)
                kinds = {r[0] for r in db.execute("SELECT kind FROM docs WHERE id::text = ANY(%s)",
                                                  [[g[0] for g in got]])}
                assert kinds <= {"tenth", "hundredth"}, kinds
    finally:
        db.execute("SELECT corpus.corpus_drop('two_kinds')")


def test_the_slice_is_an_index_condition_and_the_page_fits_the_window(db, data):
    for corpus, share in KINDS:
        node = index_scan(db, corpus, "w3 w17 w250")
        assert node["Node Type"] == "Index Scan" and node["Index Name"] == "docs_bm25_kind", node
        assert "kind" in node.get("Index Cond", ""), node
        # every row the scan returns is the corpus': none are removed after it
        assert node.get("Rows Removed by Filter", 0) == 0, node
        # a window of 40 from the slice's own ranking: the page is the window's, whatever the share
        assert node["Actual Rows"] <= 48 * max(1, node.get("Actual Loops", 1)), (corpus, share, node)


def test_a_condition_on_the_key_column_alone_restricts_the_ranking(db):
    scoring = "ROW('{w3,w7,w40}', '{1,1,1}', 30, 1.2, 0.75, 10)::corpus.bm25_scoring"
    template = f"""
        SELECT id, body_bm25 OPERATOR(corpus.<@>) {scoring} AS d
          FROM docs WHERE COND AND body_bm25 OPERATOR(corpus.|||) {scoring}
         ORDER BY d FETCH FIRST 25 ROWS WITH TIES"""

    class Ranked:
        def format(self, cond):
            return template.replace("COND", cond)
    ranked = Ranked()
    with db.transaction():
        db.execute("SET LOCAL enable_sort = off")
        db.execute("SET LOCAL enable_bitmapscan = off")
        # (a value named again is one value: half of the rows named thrice still restricts)
        for values in (["hundredth"], ["hundredth", "tenth"], ["tenth", None], ["nosuchkind"], [],
                       ["half", "tenth", "hundredth", "other"], ["half", "half", "half"],
                       ["tenth", "half", "tenth"]):
            cond = "kind = ANY(%s::text[])"
            plan = "\n".join(r[0] for r in db.execute("EXPLAIN " + ranked.format(cond=cond), [values]))
            assert "Index Scan using docs_bm25_kind" in plan and "Index Cond" in plan, plan
            got = sorted(db.execute(ranked.format(cond=cond), [values]).fetchall())
            db.execute("SET LOCAL enable_indexscan = off")
            db.execute("SET LOCAL enable_sort = on")
            want = sorted(db.execute(ranked.format(cond=cond), [values]).fetchall())
            db.execute("SET LOCAL enable_indexscan = on")
            db.execute("SET LOCAL enable_sort = off")
            assert got == want, values
            assert (len(got) > 0) == any(v in ("hundredth", "tenth", "half") for v in values), values
            kinds = {r[0] for r in db.execute("SELECT kind FROM docs WHERE id = ANY(%s)", [[g[0] for g in got]])}
            assert kinds <= set(values), (values, kinds)
        one = db.execute(ranked.format(cond="kind = %s"), ["tenth"]).fetchall()
        assert one and one == db.execute(ranked.format(cond="kind = ANY(%s::text[])"), [["tenth"]]).fetchall()
        assert db.execute(ranked.format(cond="kind = %s"), [None]).fetchall() == []


def test_writes_that_move_a_row_between_slices_are_seen(db, cluster):
    other = cluster.connect("pg_corpus_bm25_index_keys")
    try:
        with db.transaction():
            db.execute("INSERT INTO docs (id, kind, body, emb) VALUES (900001, 'hundredth', 'zyxkey zyxkey', '[1,0]')")
            assert [r[0] for r in lexical(db, "hundredth", "zyxkey", 10)] == ["900001"]
            assert lexical(other, "hundredth", "zyxkey", 10) == []
        assert [r[0] for r in lexical(other, "hundredth", "zyxkey", 10)] == ["900001"]
        db.execute("UPDATE docs SET kind = 'tenth' WHERE id = 900001")
        assert lexical(other, "hundredth", "zyxkey", 10) == []
        assert [r[0] for r in lexical(other, "tenth", "zyxkey", 10)] == ["900001"]
        db.execute("UPDATE docs SET kind = 'other' WHERE id = 900001")
        assert lexical(other, "tenth", "zyxkey", 10) == []
        db.execute("DELETE FROM docs WHERE id = 900001")
    finally:
        other.close()
    rng = np.random.default_rng(3)
    with db.cursor().copy("COPY docs (id, kind, body) FROM STDIN") as cp:
        for i in range(2500):  # past the pending list: segments written and merged
            cp.write_row((N_BASE + i, ("hundredth", "tenth", "half")[i % 3], " ".join(words(rng, 20))))
    db.execute("UPDATE docs SET kind = 'hundredth' WHERE id % 97 = 0 AND kind = 'half'")
    db.execute("DELETE FROM docs WHERE id % 13 = 0")
    # VACUUM removes the deleted rows from the index once no snapshot of another session (an
    # autovacuum ANALYZE started before the DELETE) can still see them
    for _ in range(40):
        db.execute("VACUUM docs")
        documents, heap_rows = db.execute(
            "SELECT documents, heap_rows FROM corpus.bm25_index_check('docs_bm25_kind')").fetchone()
        if documents == heap_rows:
            break
        time.sleep(0.5)
    assert documents == heap_rows > 0
    db.execute("SELECT corpus.corpus_refresh_lexical_stats(c) FROM unnest(ARRAY['half', 'tenth', 'hundredth']) c")
    for corpus, _ in KINDS:
        for text in ("w1 w2", "w5 w60 w300", "w0"):
            assert lexical(db, corpus, text, 40) == exhaustive(db, corpus, text, 40), (corpus, text)


N_BASE = 500_000


def test_key_values_too_long_for_a_page_are_held_and_rechecked(cluster):
    """A key column's value longer than a page holds is held under a digest: writes past the
    pending list, VACUUM, the check and REINDEX go on, and a condition naming such a value
    returns exactly its rows (the executor rechecks rows found through a digest)."""
    conn = cluster.create_db("pg_corpus_bm25_index_long_keys")
    conn.execute("CREATE TABLE t (id int PRIMARY KEY, kind text, tsv tsvector)")
    conn.execute("CREATE INDEX t_bm25 ON t USING corpus_bm25 (tsv, kind)")
    long1, long2, long3 = "k" * 9000, "k" * 8999 + "j", "x" * 1025
    with pytest.raises(psycopg.errors.QueryCanceled):
        with conn.transaction():
            conn.execute("INSERT INTO t VALUES (0, %s, 'foo:1')", [long1])
            raise psycopg.errors.QueryCanceled("roll back")
    kinds = ["a", long1, long2, long3, "b", "k" * 1024]
    with conn.cursor().copy("COPY t (id, kind, tsv) FROM STDIN") as cp:
        for i in range(1, 4001):   # past the pending list: segments written and merged
            cp.write_row((i, kinds[i % len(kinds)], f"foo:1 bar:{1 + i % 3} w{i % 50}:1"))
    conn.execute("DELETE FROM t WHERE id % 7 = 0")
    conn.execute("VACUUM t")
    documents, heap_rows = conn.execute(
        "SELECT documents, heap_rows FROM corpus.bm25_index_check('t_bm25', heapallindexed => true)").fetchone()
    assert documents == heap_rows == conn.execute("SELECT count(*) FROM t").fetchone()[0]
    scoring = "ROW('{foo,bar,w3}', '{1,2,3}', 3, 1.2, 0.75, 10)::corpus.bm25_scoring"
    query = f"""SELECT id, kind FROM t WHERE kind = ANY(%s::text[]) AND tsv OPERATOR(corpus.|||) {scoring}
                 ORDER BY tsv OPERATOR(corpus.<@>) {scoring}, id LIMIT 200"""
    for values in ([long1], [long2], [long3], ["k" * 1024], [long1, long3], ["k" * 9001], ["a", long2]):
        with conn.transaction():
            conn.execute("SET LOCAL enable_sort = off")
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + query, [values]))
            assert "Index Scan using t_bm25" in plan and "Index Cond" in plan, plan
            got = conn.execute(query, [values]).fetchall()
        with conn.transaction():
            conn.execute("SET LOCAL enable_indexscan = off")
            conn.execute("SET LOCAL enable_bitmapscan = off")
            want = conn.execute(query, [values]).fetchall()
        assert got == want, [len(v) for v in values]
        assert {k for _, k in got} <= set(values)
        assert (len(got) > 0) == any(v in kinds for v in values)
    conn.execute("REINDEX INDEX t_bm25")
    conn.execute("CREATE INDEX t_bm25_again ON t USING corpus_bm25 (tsv, kind)")
    conn.execute("SELECT corpus.bm25_index_check('t_bm25_again', heapallindexed => true)")


def test_columns_the_index_cannot_hold_are_refused(db, cluster):
    with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
        db.execute("CREATE INDEX ON docs USING corpus_bm25 (kind, body_bm25)")
    assert e.value.diag.message_primary.endswith("column 1 must be a tsvector"), e.value.diag.message_primary
    assert e.value.diag.message_hint and e.value.diag.message_detail
    with pytest.raises(psycopg.errors.UndefinedObject):
        # no operator class of the access method for an integer column
        db.execute("CREATE INDEX ON docs USING corpus_bm25 (body_bm25, id)")
    try:
        db.execute("CREATE COLLATION IF NOT EXISTS bm25_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)")
    except psycopg.errors.FeatureNotSupported:
        pytest.skip("this server has no ICU collations")
    with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
        db.execute("CREATE INDEX ON docs USING corpus_bm25 (body_bm25, kind COLLATE bm25_ci)")
    assert "nondeterministic" in e.value.diag.message_primary


def test_registration_recommends_the_index_with_the_isolation_columns(cluster):
    conn = cluster.create_db("pg_corpus_bm25_index_keys_hint")
    notices = []
    # (a notice's fields are read in the handler: they are gone after it)
    conn.add_notice_handler(lambda d: notices.append((d.message_primary or "", d.message_hint or "")))
    conn.execute("""
        CREATE TABLE "Odd Docs" (id int PRIMARY KEY, "Kind" text NOT NULL, body text NOT NULL, emb vector(2),
            body_bm25 tsvector GENERATED ALWAYS AS (corpus.bm25_document(body, 'simple')) STORED);
        INSERT INTO "Odd Docs" (id, "Kind", body)
        SELECT g, CASE WHEN g <= 50 THEN 'a' ELSE 'b' END, 'alpha w' || g FROM generate_series(1, 500) g;
        ANALYZE "Odd Docs";
        SELECT corpus.corpus_create('odd', isolation => '{"Kind": "a"}');
        SELECT corpus.corpus_add_source('odd', 'docs', '"Odd Docs"', text_column => 'body', tsv_column => 'body_bm25',
            embedding_column => 'emb', parent_fk => 'id', language => 'simple', min_length => 1);""")
    hints = [h for m, h in notices if "corpus_bm25" in m]
    assert any('USING corpus_bm25 ("body_bm25", "Kind");' in h for h in hints), notices
    indexes_row = """SELECT status, detail, hint FROM corpus.corpus_health_check('odd') WHERE "check" = 'indexes'"""
    # an index on the BM25 column alone: the corpus, a tenth of the table, is told the one to build
    conn.execute('CREATE INDEX odd_plain ON "Odd Docs" USING corpus_bm25 (body_bm25)')
    status, detail, hint = conn.execute(indexes_row).fetchone()
    assert status == "warn" and detail["lexical_bm25_index_holds_isolation"] is False, (status, detail)
    fix = hint[hint.index("CREATE INDEX CONCURRENTLY"):]
    assert fix.endswith("DROP INDEX CONCURRENTLY public.odd_plain;") and '("body_bm25", "Kind")' in fix, hint
    for statement in fix.split(";"):
        if statement.strip():
            conn.execute(statement)
    status, detail, hint = conn.execute(indexes_row).fetchone()
    assert detail["lexical_bm25_index"] is True and detail["lexical_bm25_index_holds_isolation"] is True, detail
    assert "corpus_bm25 (" not in (hint or ""), hint
    assert strategy(conn, "odd", "alpha") == "bm25_index"
    assert len(lexical(conn, "odd", "alpha", 10)) == 10
    # a key column of another collation than the column's holds no isolation (searches do not
    # take it to, as the catalog lists it): the health check names the index that would
    conn.execute('DROP INDEX "Odd Docs_body_bm25_Kind_idx"')
    conn.execute('CREATE INDEX odd_posix ON "Odd Docs" USING corpus_bm25 (body_bm25, "Kind" COLLATE "POSIX")')
    status, detail, hint = conn.execute(indexes_row).fetchone()
    assert status == "warn" and detail["lexical_bm25_index_holds_isolation"] is False, (status, detail)
    assert 'USING corpus_bm25 ("body_bm25", "Kind");' in hint, hint
