"""The corpus_bm25 index: the lexical branch ranks through it with the same answer as today's
exhaustive scorer, under the corpus predicate, with MVCC, after a crash, and checked against
the table by corpus.bm25_index_check.

One table holds three corpora (`kind`): half of its rows, a tenth and a hundredth. The
reference for each query is the candidate path with a budget that makes it exhaustive (every
document holding a query key is scored by corpus._bm25_score), run before the index exists.
"""
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import psycopg
import pytest

N = 12_000
KINDS = (("half", 0.5), ("tenth", 0.1), ("hundredth", 0.01))
VOCAB = 1500
PGCLUSTER = Path(__file__).resolve().parents[2] / "scripts" / "pgcluster.sh"


def words(rng, n):
    # Zipf-like over the vocabulary: a few words in most documents, most words rare
    ranks = np.minimum((VOCAB ** rng.random(n)).astype(int), VOCAB) - 1
    return [f"w{r}" for r in ranks]


def generate(seed=11):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(1, N + 1):
        r = rng.random()
        kind = "hundredth" if r < 0.01 else "tenth" if r < 0.11 else "half" if r < 0.61 else "other"
        rows.append((i, kind, " ".join(words(rng, int(rng.integers(3, 60))))))
    # 340 queries in each of the three corpora: 1,020 (corpus, query) pairs
    queries = [" ".join(words(rng, int(rng.integers(1, 9)))) for _ in range(340)]
    return rows, queries


def load(conn, rows):
    conn.execute("""
        CREATE TABLE docs (
            id int PRIMARY KEY,
            kind text NOT NULL,
            grp int GENERATED ALWAYS AS (id % 500) STORED,
            body text NOT NULL,
            emb vector(2),
            body_bm25 tsvector GENERATED ALWAYS AS (corpus.bm25_document(body, 'simple')) STORED);
        CREATE INDEX ON docs USING gin (body_bm25);
        CREATE INDEX ON docs (kind);""")
    with conn.cursor().copy("COPY docs (id, kind, body, emb) FROM STDIN") as cp:
        for row in rows:
            cp.write_row((*row, "[1,0]"))
    conn.execute("ANALYZE docs")
    for corpus, _ in KINDS:
        conn.execute("SELECT corpus.corpus_create(%s, isolation => jsonb_build_object('kind', %s::text))",
                     [corpus, corpus])
        conn.execute("""SELECT corpus.corpus_add_source(%s, 'docs', 'docs', text_column => 'body',
                          embedding_column => 'emb', tsv_column => 'body_bm25', language => 'simple',
                          parent_fk => 'grp', min_length => 1)""", [corpus])


def lexical(conn, corpus, text, k):
    return conn.execute(
        "SELECT item_id, lexical_score FROM corpus.corpus_hybrid_search(%s, NULL, %s, k => %s, "
        "mode => 'lexical', max_per_parent => 0)", [corpus, text, k]).fetchall()


def strategy(conn, corpus, text):
    return conn.execute("SELECT strategy FROM corpus.corpus_explain(%s, NULL, %s, mode => 'lexical')",
                        [corpus, text]).fetchone()[0]


@pytest.fixture(scope="module")
def data():
    return generate()


@pytest.fixture(scope="module")
def db(cluster, data):
    conn = cluster.create_db("pg_corpus_bm25_index")
    load(conn, data[0])
    return conn


@pytest.fixture(scope="module")
def reference(db, data):
    """Every query's exhaustive answer per corpus and k, before the index exists."""
    db.execute("SET pg_corpus.bm25_candidate_budget = 1000000000")
    try:
        out = {(c, q, k): lexical(db, c, q, k) for c, _ in KINDS for q in data[1] for k in (10, 40)}
    finally:
        db.execute("RESET pg_corpus.bm25_candidate_budget")
    db.execute("CREATE INDEX docs_bm25 ON docs USING corpus_bm25 (body_bm25)")
    return out


def test_the_index_ranks_as_the_exhaustive_scorer_in_every_corpus(db, data, reference):
    used = set()
    for (corpus, text, k), want in reference.items():
        got = lexical(db, corpus, text, k)
        assert got == want, (corpus, text, k)
        if text in data[1][:45]:
            used.add((corpus, strategy(db, corpus, text)))
    # the large slices rank through the index (a tenth of 12,000 rows for a window of 40); the
    # hundredth (120 rows) scores its own candidates
    assert ("half", "bm25_index") in used and ("tenth", "bm25_index") in used, used
    assert ("hundredth", "bm25_index") not in used, used


def test_a_corpus_gets_k_rows_when_k_of_its_rows_match(db, data, reference):
    for corpus, _ in KINDS:
        eligible = db.execute(
            "SELECT count(*) FROM docs WHERE kind = %s AND body_bm25 @@ to_tsquery('simple', 'w0 | w1')",
            [corpus]).fetchone()[0]
        assert len(lexical(db, corpus, "w0 w1", 40)) == min(40, eligible)
    # straight through the index: a hundredth of the table still fills its page
    query = """
        SELECT id FROM docs WHERE kind = 'hundredth'
           AND body_bm25 OPERATOR(corpus.|||) ROW('{w3,w7}', '{1,1}', 30, 1.2, 0.75, 10)::corpus.bm25_scoring
         ORDER BY body_bm25 OPERATOR(corpus.<@>) ROW('{w3,w7}', '{1,1}', 30, 1.2, 0.75, 10)::corpus.bm25_scoring
         LIMIT 10"""
    with db.transaction():
        # (the planner would rather read the hundredth's rows by their kind and sort them)
        db.execute("SET LOCAL enable_sort = off")
        assert "Index Scan using docs_bm25" in "\n".join(r[0] for r in db.execute("EXPLAIN " + query))
        assert len(db.execute(query).fetchall()) == 10


def test_the_one_pass_count_is_the_group_by_of_the_corpus_keys(db):
    for corpus, _ in KINDS:
        got = db.execute("SELECT term, df, total_len FROM corpus._lexical_counts(%s)", [corpus]).fetchall()
        want = db.execute("""
            SELECT t.lexeme, count(*), NULL::int8 FROM docs CROSS JOIN LATERAL unnest(docs.body_bm25) AS t
             WHERE kind = %s GROUP BY t.lexeme
            UNION ALL
            SELECT NULL, count(*), sum(corpus._bm25_length(body_bm25)) FROM docs WHERE kind = %s""",
                          [corpus, corpus]).fetchall()
        key = lambda r: (r[0] is None, r[0] or "")  # noqa: E731
        assert sorted(got, key=key) == sorted(want, key=key), corpus
        assert len(got) > 10


def test_a_refresh_builds_champion_lists_only_where_a_search_can_read_them(db, data, reference):
    """A corpus that ranks through the index at every window a search may reach gets no champion
    lists; with the index turned off, its common keys are found through GIN: the same answer."""
    def refresh_all():
        for corpus, _ in KINDS:
            db.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats(%s)", [corpus])
        return dict(db.execute("SELECT corpus, count(*) FROM corpus.lexical_champions GROUP BY 1").fetchall())

    # windows up to 10,000 (the default): a search of the half may score candidates
    assert refresh_all().get("half", 0) > 0
    db.execute("SET pg_corpus.max_candidates = 100")
    try:
        # up to 100: the half (6,000 rows) and the tenth (1,200) rank through the index
        listed = refresh_all()
        assert "half" not in listed and "tenth" not in listed, listed
        db.execute("SET pg_corpus.bm25_index = off")
        for (corpus, text, k), want in reference.items():
            if corpus == "half" and k == 10:
                assert lexical(db, corpus, text, k) == want, text
    finally:
        db.execute("RESET pg_corpus.bm25_index")
        db.execute("RESET pg_corpus.max_candidates")
        restored = refresh_all()
    assert restored.get("half", 0) > 0


def explain(conn, corpus, text):
    sql, params = conn.execute("SELECT sql, params FROM corpus.corpus_explain(%s, NULL, %s, mode => 'lexical')",
                               [corpus, text]).fetchone()
    body = "\n".join(line for line in sql.splitlines() if not line.startswith("SET LOCAL "))
    body = re.sub(r"\$(\d+)", r"%(p\1)s", body.replace("%", "%%"))
    values = {f"p{i + 1}": v for i, v in enumerate(params)}
    plan = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {body}", values, prepare=False).fetchone()[0]
    return sql, plan[0]["Plan"]


def nodes(plan):
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def test_explain_shows_the_index_scan_and_it_reads_a_few_rows(db, reference):
    sql, plan = explain(db, "half", "w5 w40 w300")
    assert "OPERATOR(corpus.<@>)" in sql and "WITH TIES" in sql, sql
    scans = [n for n in nodes(plan) if n.get("Relation Name") == "docs"]
    assert [n["Node Type"] for n in scans] == ["Index Scan"] and scans[0]["Index Name"] == "docs_bm25", plan
    # a window of 40 from half of the table: about 80 rows fetched, never the table
    assert scans[0]["Actual Rows"] < 400, scans[0]


def test_writes_are_seen_as_the_heap_sees_them(cluster, db, reference):
    other = cluster.connect("pg_corpus_bm25_index")
    try:
        with db.transaction():
            db.execute("INSERT INTO docs (id, kind, body, emb) VALUES (900001, 'half', 'zyxnew zyxnew zyxnew', '[1,0]')")
            assert [r[0] for r in lexical(db, "half", "zyxnew", 10)] == ["900001"], "own insert seen"
            assert lexical(other, "half", "zyxnew", 10) == [], "not committed: not seen elsewhere"
        assert [r[0] for r in lexical(other, "half", "zyxnew", 10)] == ["900001"]
        with pytest.raises(psycopg.errors.UniqueViolation):
            with db.transaction():
                db.execute("INSERT INTO docs (id, kind, body) VALUES (900002, 'half', 'zyxgone')")
                db.execute("INSERT INTO docs (id, kind, body) VALUES (900002, 'half', 'zyxgone')")
        assert lexical(other, "half", "zyxgone", 10) == [], "a rolled-back row is never returned"
        db.execute("UPDATE docs SET kind = 'tenth' WHERE id = 900001")
        assert lexical(other, "half", "zyxnew", 10) == [], "moved out of the corpus"
        assert [r[0] for r in lexical(other, "tenth", "zyxnew", 10)] == ["900001"]
        db.execute("DELETE FROM docs WHERE id = 900001")
        assert lexical(other, "tenth", "zyxnew", 10) == []
    finally:
        other.close()


def test_many_writes_then_vacuum_keep_the_index_equal_to_the_table(db, data, reference):
    rng = np.random.default_rng(5)
    rows = [(N + 1000 + i, "half", " ".join(words(rng, int(rng.integers(3, 40))))) for i in range(3000)]
    with db.cursor().copy("COPY docs (id, kind, body) FROM STDIN") as cp:
        for row in rows:
            cp.write_row(row)
    db.execute("UPDATE docs SET body = body || ' w2 w2' WHERE id % 11 = 0")
    db.execute("DELETE FROM docs WHERE id % 7 = 0")
    check = db.execute("SELECT * FROM corpus.bm25_index_check('docs_bm25')").fetchone()
    assert check[0] >= 1 and check[-1] > 0, check
    db.execute("VACUUM docs")
    check = db.execute("SELECT segments, documents, free_pages, heap_rows FROM corpus.bm25_index_check('docs_bm25')").fetchone()
    live = db.execute("SELECT count(*) FROM docs WHERE body_bm25 <> ''::tsvector").fetchone()[0]
    assert check[1] == live == check[3], check
    # the index's answers are still the exhaustive ones
    for text in data[1][:10]:
        want = db.execute("""
            SELECT id FROM docs WHERE kind = 'half'
             ORDER BY corpus._bm25_score(body_bm25, (SELECT array_agg(key) FROM corpus.bm25_query(%(q)s, 'simple')),
                                        (SELECT array_agg(weight) FROM corpus.bm25_query(%(q)s, 'simple')), 20, 1.2, 0.75) DESC, id
             LIMIT 15""", {"q": text}).fetchall()
        scoring = db.execute("""
            SELECT ROW((SELECT array_agg(key) FROM corpus.bm25_query(%(q)s, 'simple')),
                       (SELECT array_agg(weight) FROM corpus.bm25_query(%(q)s, 'simple')), 20, 1.2, 0.75, 15)
                   ::corpus.bm25_scoring::text""", {"q": text}).fetchone()[0]
        got = db.execute("""
            SELECT id FROM (
              SELECT id, body_bm25 OPERATOR(corpus.<@>) %(s)s::corpus.bm25_scoring AS d
                FROM docs WHERE kind = 'half' AND body_bm25 OPERATOR(corpus.|||) %(s)s::corpus.bm25_scoring
               ORDER BY d FETCH FIRST 15 ROWS WITH TIES) s
             WHERE d < 0 ORDER BY d, id LIMIT 15""", {"s": scoring}).fetchall()
        assert got == want, text


def test_a_build_beyond_its_memory_merges_runs_from_a_temporary_file(db, data, reference):
    """With maintenance_work_mem far below the postings, the build spills sorted runs to a
    temporary file and writes only their merge into the index: no free pages are left behind,
    and the ranking is the same."""
    with db.transaction():
        db.execute("DROP INDEX docs_bm25")
        db.execute("SET LOCAL maintenance_work_mem = '1MB'")
        db.execute("CREATE INDEX docs_bm25 ON docs USING corpus_bm25 (body_bm25)")
        segments, free, documents, heap_rows = db.execute(
            "SELECT segments, free_pages, documents, heap_rows FROM corpus.bm25_index_check('docs_bm25')").fetchone()
        assert (segments, free) == (1, 0) and documents == heap_rows > 0
        for text in data[1][:20]:
            got = lexical(db, "half", text, 10)
            db.execute("SET LOCAL pg_corpus.bm25_index = off")
            db.execute("SET LOCAL pg_corpus.bm25_candidate_budget = 1000000000")
            assert strategy(db, "half", text) == "text_match"
            assert lexical(db, "half", text, 10) == got, text
            db.execute("SET LOCAL pg_corpus.bm25_index = on")
            db.execute("SET LOCAL pg_corpus.bm25_candidate_budget = -1")


def test_the_check_refuses_other_indexes_and_roles_that_do_not_own_the_table(db, cluster, reference):
    with pytest.raises(psycopg.errors.WrongObjectType):
        db.execute("SELECT * FROM corpus.bm25_index_check('docs_pkey')")
    with pytest.raises(psycopg.errors.WrongObjectType):
        db.execute("SELECT * FROM corpus.bm25_index_check('docs')")
    db.execute("DROP ROLE IF EXISTS bm25_outsider; CREATE ROLE bm25_outsider")
    db.execute("DROP ROLE IF EXISTS bm25_reader; CREATE ROLE bm25_reader")
    db.execute("GRANT SELECT ON docs TO bm25_reader")
    writer = cluster.connect(db.info.dbname)
    try:
        # a write in progress: a check that locked the table before refusing would wait for it
        writer.execute("BEGIN")
        writer.execute("UPDATE docs SET kind = kind WHERE id = (SELECT min(id) FROM docs)")
        for role in ("bm25_outsider", "bm25_reader"):
            for heap in (True, False):
                # (another index of the table is refused as such, before any lock too)
                for index, error in (("docs_bm25", psycopg.errors.InsufficientPrivilege),
                                     ("docs_pkey", psycopg.errors.WrongObjectType)):
                    with db.transaction():
                        db.execute(f"SET LOCAL ROLE {role}")
                        db.execute("SET LOCAL lock_timeout = '2s'")
                        with pytest.raises(error) as e, db.transaction():
                            db.execute("SELECT * FROM corpus.bm25_index_check(%s, %s)", [index, heap])
                    if index == "docs_bm25":
                        assert "owner" in e.value.diag.message_primary and e.value.diag.message_hint
    finally:
        writer.execute("ROLLBACK")
        writer.close()
        db.execute("REVOKE ALL ON docs FROM bm25_reader")
        db.execute("DROP ROLE bm25_outsider")
        db.execute("DROP ROLE bm25_reader")


def test_the_check_refuses_an_index_whose_build_did_not_finish(db, cluster, reference):
    """A CREATE INDEX CONCURRENTLY cancelled while it waits for an older snapshot leaves an
    invalid index with no pages: the check says so (55000) instead of reporting damage."""
    holder = cluster.connect(db.info.dbname)
    try:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT count(*) FROM docs")
        holder.execute("UPDATE docs SET kind = kind WHERE id = (SELECT min(id) FROM docs)")
        db.execute("SET statement_timeout = '1s'")
        try:
            with pytest.raises(psycopg.errors.QueryCanceled):
                db.execute("CREATE INDEX CONCURRENTLY docs_bm25_unbuilt ON docs USING corpus_bm25 (body_bm25, kind)")
        finally:
            db.execute("RESET statement_timeout")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    try:
        assert db.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = 'docs_bm25_unbuilt'::regclass").fetchone() == (False,)
        for heap in (True, False):
            with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as e:
                db.execute("SELECT * FROM corpus.bm25_index_check('docs_bm25_unbuilt', %s)", [heap])
            assert "not valid" in e.value.diag.message_primary and "DROP INDEX CONCURRENTLY" in e.value.diag.message_hint
    finally:
        db.execute("DROP INDEX IF EXISTS docs_bm25_unbuilt")


def test_the_match_operator_is_leakproof_and_never_raises(cluster):
    """|||, declared LEAKPROOF so that it may be the index's condition under row-level
    security, runs before a view's or policy's own conditions: an error naming a row's scoring
    would show a row the caller may not read. A scoring it cannot read holds no row; <@> (not
    leakproof) reports the mistake."""
    conn = cluster.create_db("pg_corpus_bm25_leakproof")
    conn.execute("""
        CREATE TABLE saved (owner text, s corpus.bm25_scoring);
        INSERT INTO saved VALUES
            ('bm25_viewer', ROW(ARRAY['public'], ARRAY[1.0], 10, 1.2, 0.75, 10)),
            ('boss', ROW(ARRAY['hidden-merger'], ARRAY[-1.0], 10, 1.2, 0.75, 10)),
            ('boss', ROW(ARRAY['a', 'b'], ARRAY[1.0], 10, 1.2, 0.75, 10)),
            ('boss', ROW(ARRAY['a'], ARRAY[1.0], 10, -1, 0.75, 10)),
            ('boss', ROW(ARRAY[NULL, 'a'], ARRAY[1.0, 1.0], 10, 1.2, 0.75, 10));
        -- (a leakproof condition cheaper than the view's runs first: at its own cost of 10
        -- operator costs it would not, and this view would not show a leak)
        ALTER FUNCTION corpus._bm25_match(tsvector, corpus.bm25_scoring) COST 1;
        CREATE FUNCTION may_see(o text) RETURNS bool LANGUAGE plpgsql STABLE AS $$BEGIN RETURN o = current_user; END$$;
        CREATE VIEW saved_v WITH (security_barrier) AS SELECT owner, s FROM saved WHERE may_see(owner);
        DROP ROLE IF EXISTS bm25_viewer;
        CREATE ROLE bm25_viewer;
        GRANT SELECT ON saved_v TO bm25_viewer;""")
    try:
        assert conn.execute("SELECT proleakproof FROM pg_proc WHERE oid = 'corpus._bm25_match'::regproc").fetchone()[0]
        with conn.transaction():
            conn.execute("SET LOCAL ROLE bm25_viewer")
            rows = conn.execute("""SELECT owner FROM saved_v
                                    WHERE 'public:1 hidden-merger:1 a:1'::tsvector OPERATOR(corpus.|||) s""").fetchall()
        assert rows == [("bm25_viewer",)]
        bad = conn.execute("SELECT s FROM saved WHERE owner = 'boss'").fetchall()
        for (s,) in bad:
            assert conn.execute("SELECT 'hidden-merger:1 a:1'::tsvector OPERATOR(corpus.|||) %s::corpus.bm25_scoring",
                                [s]).fetchone()[0] is False
            with pytest.raises(psycopg.errors.InvalidParameterValue):
                conn.execute("SELECT 'a:1'::tsvector OPERATOR(corpus.<@>) %s::corpus.bm25_scoring", [s])
    finally:
        conn.execute("REVOKE ALL ON saved_v FROM bm25_viewer")
        conn.execute("DROP ROLE bm25_viewer")


def test_a_partitioned_source_ranks_through_its_partitions_indexes_and_is_checked_there(cluster):
    """A partitioned index has no pages: searches rank through its partitions' indexes, the
    health check reads those back (it failed with 58P01 opening the parent), and
    bm25_index_check refuses the parent with a hint whose SQL checks each partition."""
    conn = cluster.create_db("pg_corpus_bm25_partitioned")
    conn.execute("""
        CREATE TABLE pdocs (id int, kind text NOT NULL, body text NOT NULL, emb vector(2),
            body_bm25 tsvector GENERATED ALWAYS AS (corpus.bm25_document(body, 'simple')) STORED)
            PARTITION BY LIST (kind);
        CREATE TABLE pdocs_a PARTITION OF pdocs FOR VALUES IN ('a');
        CREATE TABLE pdocs_b PARTITION OF pdocs FOR VALUES IN ('b');
        INSERT INTO pdocs (id, kind, body)
        SELECT g, CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, 'alpha beta w' || (g % 17) FROM generate_series(1, 600) g;
        CREATE INDEX pdocs_bm25 ON pdocs USING corpus_bm25 (body_bm25);
        ANALYZE pdocs;
        SELECT corpus.corpus_create('parted', isolation => '{"kind": "a"}');
        SELECT corpus.corpus_add_source('parted', 'pdocs', 'pdocs', text_column => 'body', tsv_column => 'body_bm25',
            embedding_column => 'emb', parent_fk => 'id', language => 'simple', min_length => 1);""")
    assert strategy(conn, "parted", "w3 alpha") == "bm25_index"
    rows = lexical(conn, "parted", "w3 alpha", 10)
    assert len(rows) == 10
    assert all(int(r[0]) % 2 == 0 for r in rows), rows
    checks = conn.execute("SELECT \"check\", status, detail FROM corpus.corpus_health_check('parted')").fetchall()
    assert checks and not [c for c in checks if c[2] and "bm25_index_damage" in c[2]], checks
    with pytest.raises(psycopg.errors.WrongObjectType) as refused:
        conn.execute("SELECT * FROM corpus.bm25_index_check('pdocs_bm25')")
    hint = refused.value.diag.message_hint
    per_partition = conn.execute(hint.removeprefix("Check each partition's index: ")).fetchall()
    assert sorted(r[0] for r in per_partition) == ["pdocs_a_body_bm25_idx", "pdocs_b_body_bm25_idx"], per_partition
    assert sum(r[2] for r in per_partition) == 600, per_partition


def test_a_searcher_under_row_level_security_still_ranks_through_the_index(cluster):
    """Under a policy the index's condition must be leakproof to be the index's; without it the
    lexical branch sorted every row the policy let through. Counted by the index's idx_scan."""
    conn = cluster.create_db("pg_corpus_bm25_rls")
    conn.execute("""
        CREATE TABLE rdocs (id int PRIMARY KEY, kind text NOT NULL, team int NOT NULL, body text NOT NULL,
            emb vector(2), body_bm25 tsvector GENERATED ALWAYS AS (corpus.bm25_document(body, 'simple')) STORED);
        INSERT INTO rdocs (id, kind, team, body)
        SELECT g, 'a', g % 3, 'alpha beta w' || (g % 23) || ' w' || (g % 7) FROM generate_series(1, 3000) g;
        CREATE INDEX rdocs_bm25 ON rdocs USING corpus_bm25 (body_bm25);
        ANALYZE rdocs;
        SELECT corpus.corpus_create('guarded', isolation => '{"kind": "a"}');
        SELECT corpus.corpus_add_source('guarded', 'rdocs', 'rdocs', text_column => 'body', tsv_column => 'body_bm25',
            embedding_column => 'emb', parent_fk => 'id', language => 'simple', min_length => 1);
        DROP ROLE IF EXISTS bm25_team0;
        CREATE ROLE bm25_team0;
        GRANT SELECT ON rdocs TO bm25_team0;
        ALTER TABLE rdocs ENABLE ROW LEVEL SECURITY;
        CREATE POLICY team0 ON rdocs FOR SELECT TO bm25_team0 USING (team = 0);""")
    assert strategy(conn, "guarded", "w3 w5") == "bm25_index"

    def index_scans():
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT pg_stat_clear_snapshot()")
        return conn.execute(
            "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'rdocs_bm25'").fetchone()[0]

    try:
        before = index_scans()
        with conn.transaction():
            conn.execute("SET LOCAL ROLE bm25_team0")
            rows = lexical(conn, "guarded", "w3 w5", 10)
        assert len(rows) == 10 and all(int(r[0]) % 3 == 0 for r in rows), rows
        assert index_scans() > before
    finally:
        conn.execute("DROP POLICY team0 ON rdocs")
        conn.execute("REVOKE ALL ON rdocs FROM bm25_team0")
        conn.execute("DROP ROLE bm25_team0")


def test_a_kept_plan_of_the_ranking_and_fetch_serves_every_role_and_corpus(cluster):
    """A source that reads its table alone keeps one (generic) plan of its index ranking and of
    its final fetch for the backend's life. That plan must serve two corpora of the same table
    (a large and a small slice) and roles that row-level security shows different rows, in any
    order in one session, exactly as a fresh session plans each search."""
    conn = cluster.create_db("pg_corpus_bm25_kept")
    conn.execute("""
        CREATE TABLE kdocs (id int PRIMARY KEY, kind text NOT NULL, team int NOT NULL, body text NOT NULL,
            emb vector(2), body_bm25 tsvector GENERATED ALWAYS AS (corpus.bm25_document(body, 'simple')) STORED);
        INSERT INTO kdocs (id, kind, team, body)
        SELECT g, CASE WHEN g % 20 = 0 THEN 'small' ELSE 'large' END, g % 3,
               'alpha w' || (g % 23) || ' w' || (g % 7) || ' w' || (g % 11) FROM generate_series(1, 4000) g;
        CREATE INDEX kdocs_bm25 ON kdocs USING corpus_bm25 (body_bm25);
        CREATE INDEX ON kdocs (kind);
        ANALYZE kdocs;
        DROP ROLE IF EXISTS kept_team0;
        DROP ROLE IF EXISTS kept_team1;
        CREATE ROLE kept_team0;
        CREATE ROLE kept_team1;
        GRANT SELECT ON kdocs TO kept_team0, kept_team1;
        ALTER TABLE kdocs ENABLE ROW LEVEL SECURITY;
        CREATE POLICY team0 ON kdocs FOR SELECT TO kept_team0 USING (team = 0);
        CREATE POLICY team1 ON kdocs FOR SELECT TO kept_team1 USING (team = 1);""")
    for corpus in ("large", "small"):
        conn.execute("SELECT corpus.corpus_create(%s, isolation => jsonb_build_object('kind', %s::text))",
                     [corpus, corpus])
        conn.execute("""SELECT corpus.corpus_add_source(%s, 'kdocs', 'kdocs', text_column => 'body',
                          tsv_column => 'body_bm25', embedding_column => 'emb', parent_fk => 'id',
                          language => 'simple', min_length => 1)""", [corpus])
    conn.execute("GRANT USAGE ON SCHEMA corpus TO kept_team0, kept_team1")
    team = {"kept_team0": 0, "kept_team1": 1, None: None}

    def search(c, role, corpus, text):
        with c.transaction():
            if role:
                c.execute(f"SET LOCAL ROLE {role}")
            return c.execute(
                "SELECT item_id, lexical_score, content FROM corpus.corpus_hybrid_search(%s, NULL, %s, "
                "k => 10, mode => 'lexical', max_per_parent => 0)", [corpus, text]).fetchall()

    try:
        assert strategy(conn, "large", "w3 w5") == "bm25_index"
        assert strategy(conn, "small", "w3 w5") == "bm25_index"
        kept = cluster.connect("pg_corpus_bm25_kept")
        rng = np.random.default_rng(5)
        for i in range(40):
            role = [None, "kept_team0", "kept_team1"][i % 3]
            corpus = ["large", "small"][(i // 3) % 2]
            text = f"w{rng.integers(23)} w{rng.integers(7)} w{rng.integers(11)}"
            got = search(kept, role, corpus, text)
            fresh = cluster.connect("pg_corpus_bm25_kept")
            try:
                want = search(fresh, role, corpus, text)
            finally:
                fresh.close()
            assert got == want, (i, role, corpus, text)
            assert len(got) == 10, (role, corpus, text, got)
            rows = {r[0]: r for r in conn.execute(
                "SELECT id::text, kind, team FROM kdocs WHERE id = ANY(%s)", [[int(g[0]) for g in got]]).fetchall()}
            assert all(rows[g[0]][1] == corpus for g in got), (corpus, got)
            if team[role] is not None:
                assert all(rows[g[0]][2] == team[role] for g in got), (role, got)
        # the kept session's ranking and fetch are generic plans: auto_explain prints their
        # parameters as $n where a custom plan prints the values (a server without the module,
        # as the PostgreSQL 18 wheel, checks the answers only)
        seen = []
        kept.add_notice_handler(lambda d: seen.append(d.message_primary or ""))
        try:
            kept.execute("LOAD 'auto_explain'")
        except psycopg.errors.UndefinedFile:
            kept.close()
            return
        kept.execute("SET auto_explain.log_min_duration = 0")
        kept.execute("SET auto_explain.log_nested_statements = on")
        kept.execute("SET client_min_messages = log")
        search(kept, None, "small", "w3 w5")
        kept.execute("RESET client_min_messages")
        ranking = [m for m in seen if "OPERATOR(corpus.<@>)" in m and "Query Text:" in m]
        assert ranking and all(re.search(r"\(kind = \$\d+\)", m) for m in ranking), ranking
        fetch = [m for m in seen if "AS content" in m and "Query Text:" in m]
        assert fetch and all(re.search(r"id = ANY \(\(\$\d+", m) for m in fetch), fetch
        kept.close()
    finally:
        conn.execute("DROP POLICY team0 ON kdocs")
        conn.execute("DROP POLICY team1 ON kdocs")
        conn.execute("REVOKE ALL ON kdocs FROM kept_team0, kept_team1")
        conn.execute("REVOKE ALL ON SCHEMA corpus FROM kept_team0, kept_team1")
        conn.execute("DROP ROLE kept_team0")
        conn.execute("DROP ROLE kept_team1")


def test_the_index_survives_kill_9_of_the_server(data, pgc):
    directory = tempfile.mkdtemp(prefix="pg_corpus_bm25_crash_")
    start = ["bash", str(PGCLUSTER), "start", directory]
    try:
        res = subprocess.run(start, capture_output=True, text=True, timeout=180)
        assert res.returncode == 0, res.stderr
        uri = res.stdout.strip().splitlines()[-1]
        conn = psycopg.connect(uri, autocommit=True)
        conn.execute("CREATE EXTENSION vector; CREATE EXTENSION pg_corpus")
        load(conn, data[0][:4000])
        conn.execute("CREATE INDEX docs_bm25 ON docs USING corpus_bm25 (body_bm25)")
        conn.execute("CHECKPOINT")  # everything below lives only in the WAL when the server dies
        rng = np.random.default_rng(9)
        with conn.cursor().copy("COPY docs (id, kind, body) FROM STDIN") as cp:
            for i in range(2500):  # enough to move pending rows into segments and merge them
                cp.write_row((100_000 + i, "half", " ".join(words(rng, int(rng.integers(3, 40))))))
        conn.execute("DELETE FROM docs WHERE id % 3 = 0")
        conn.execute("VACUUM docs")
        conn.execute("INSERT INTO docs (id, kind, body) VALUES (200000, 'half', 'zyxcommitted')")
        open_tx = psycopg.connect(uri)
        open_tx.execute("INSERT INTO docs (id, kind, body) VALUES (200001, 'half', 'zyxuncommitted')")
        pgc.kill_9_postmaster(directory)
        for c in (conn, open_tx):
            try:
                c.close()
            except Exception:
                pass
        res = subprocess.run(start, capture_output=True, text=True, timeout=180)
        assert res.returncode == 0, res.stderr
        uri = res.stdout.strip().splitlines()[-1]
        with psycopg.connect(uri, autocommit=True) as conn:
            check = conn.execute("SELECT documents, heap_rows FROM corpus.bm25_index_check('docs_bm25')").fetchone()
            assert check[1] > 0, check
            assert [r[0] for r in lexical(conn, "half", "zyxcommitted", 10)] == ["200000"]
            assert lexical(conn, "half", "zyxuncommitted", 10) == []
            conn.execute("INSERT INTO docs (id, kind, body) VALUES (200002, 'half', 'zyxafter')")
            assert [r[0] for r in lexical(conn, "half", "zyxafter", 10)] == ["200002"]
            path = Path(directory, "data", conn.execute("SELECT pg_relation_filepath('docs_bm25')").fetchone()[0])
        # damage: every page but the metapage loses its kind (and its checksum, if any)
        subprocess.run(["bash", str(PGCLUSTER), "stop", directory], capture_output=True, timeout=180)
        image = bytearray(path.read_bytes())
        for blk in range(1, len(image) // 8192):
            image[blk * 8192 + 8184:blk * 8192 + 8186] = b"\x7f\x7f"
        path.write_bytes(bytes(image))
        res = subprocess.run(start, capture_output=True, text=True, timeout=180)
        uri = res.stdout.strip().splitlines()[-1]
        with psycopg.connect(uri, autocommit=True) as conn:
            # (XX002 from the index's own checks; XX001 where data checksums, PostgreSQL 18's
            # initdb default, catch the page first)
            damage = (psycopg.errors.IndexCorrupted, psycopg.errors.DataCorrupted)
            with pytest.raises(damage):
                conn.execute("SELECT * FROM corpus.bm25_index_check('docs_bm25')")
            with pytest.raises(damage):
                lexical(conn, "half", "w1 w2", 10)
            audit = conn.execute("SELECT status, detail->>'blocked_by' FROM corpus.corpus_health_check('half') "
                                 "WHERE \"check\" = 'isolation_audit'").fetchone()
            assert audit[0] == "fail" and audit[1].startswith("docs_bm25: "), audit
            status, hint = conn.execute(
                "SELECT status, hint FROM corpus.corpus_health_check('half') WHERE \"check\" = 'indexes'").fetchone()
            assert status == "fail" and "REINDEX INDEX CONCURRENTLY" in hint, hint
            fix = hint[hint.index("REINDEX"):]
            conn.execute(fix[:fix.index(";") + 1])
            assert conn.execute("SELECT heap_rows > 0 FROM corpus.bm25_index_check('docs_bm25')").fetchone()[0]
            assert lexical(conn, "half", "w1 w2", 10)
    finally:
        subprocess.run(["bash", str(PGCLUSTER), "stop", directory], capture_output=True, timeout=180)
