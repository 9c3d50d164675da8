"""What pg_corpus stores about items is readable only by roles that may read those items
(sql/access.sql): the lexical statistics, the champion lists and the re-embed queue, against
roles with no grant, with SELECT but under row-level security, and with SELECT on everything;
searches of each still work and show nothing of hidden items; and the setting that switches off
the re-embed trigger is not for PUBLIC.

The table `notes` holds 1,500 items of tenant 'a' (all with the common word "alpha", so that
the statistics refresh writes champion lists) and 40 of tenant 'b'; row-level security shows
`limited` only the first 200 items of 'a'; items without an embedding are queued."""
import psycopg
import pytest
from conftest import as_role, drop_roles

PREFIX = "pgc_side"
FULL, LIMITED, NOGRANT, WRITER = (f"{PREFIX}_{r}" for r in ("full", "limited", "nogrant", "writer"))
ROLES = (FULL, LIMITED, NOGRANT, WRITER)
N_A, N_B, VISIBLE = 1500, 40, 200
SECRET = "qzxhidden"          # a rare word only in a hidden item of tenant 'a'
SECRET_ID = 1400
DIM = 4


def vec(i):
    return "[" + ",".join(str(((i * (j + 3)) % 17 + 1) / 17) for j in range(DIM)) + "]"


@pytest.fixture(scope="module")
def db(cluster):
    conn = cluster.create_db("pgc_side_tables")
    for r in ROLES:
        conn.execute(f"DROP ROLE IF EXISTS {r}")
        # (a role subject to a policy is under row-level security even when the policy admits
        # every row: `full` bypasses it instead)
        conn.execute(f"CREATE ROLE {r}" + (" BYPASSRLS" if r == FULL else ""))
    conn.execute(f"""
        CREATE TABLE notes (id int PRIMARY KEY, doc_id int NOT NULL, tenant text NOT NULL, body text NOT NULL,
                            tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
                            embedding vector({DIM}));
        CREATE INDEX ON notes USING gin (tsv);""")
    with conn.cursor() as cur, cur.copy("COPY notes (id, doc_id, tenant, body, embedding) FROM STDIN") as cp:
        for i in range(1, N_A + N_B + 1):
            tenant = "a" if i <= N_A else "b"
            words = f"alpha note number w{i} of tenant {tenant} beta gamma delta epsilon"
            if i == SECRET_ID:
                words += f" {SECRET}"
            cp.write_row([i, i // 3, tenant, words, None if i % 50 == 0 else vec(i)])
    conn.execute("ANALYZE notes")
    conn.execute("SELECT corpus.corpus_create('notes_a', isolation => '{\"tenant\": \"a\"}')")
    conn.execute("""SELECT corpus.corpus_add_source('notes_a', 'notes', 'notes', text_column => 'body',
                        tsv_column => 'tsv', embedding_column => 'embedding', parent_fk => 'doc_id',
                        min_length => 10)""")
    conn.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats('notes_a')")
    conn.execute(f"GRANT SELECT ON notes TO {FULL}, {LIMITED}")
    conn.execute(f"GRANT SELECT, INSERT, UPDATE ON notes TO {WRITER}")
    conn.execute("ALTER TABLE notes ENABLE ROW LEVEL SECURITY")
    conn.execute(f"CREATE POLICY everything ON notes TO {WRITER} USING (true) WITH CHECK (true)")
    conn.execute(f"CREATE POLICY first_items ON notes FOR SELECT TO {LIMITED} USING (id <= {VISIBLE})")
    yield conn
    conn.execute("DROP TABLE notes CASCADE")
    drop_roles(conn, ROLES)




def counts(db, role):
    return {t: as_role(db, role, f"SELECT count(*) FROM corpus.{t}")[0][0]
            for t in ("lexical_stats", "lexical_totals", "lexical_champions", "embedding_queue")}


def search(db, role, text, vector=None, mode="lexical", **kw):
    extra = "".join(f", {k} => %({k})s" for k in kw)
    return as_role(db, role, "SELECT item_id, embedding_stale FROM corpus.corpus_hybrid_search("
                   "'notes_a', %(v)s::vector, %(t)s, k => 20, mode => %(m)s, max_per_parent => 0" + extra + ")",
                   {"v": vector, "t": text, "m": mode, **kw})


def test_the_owner_sees_everything_it_stores(db):
    c = {t: db.execute(f"SELECT count(*) FROM corpus.{t}").fetchone()[0]
         for t in ("lexical_stats", "lexical_totals", "lexical_champions", "embedding_queue")}
    assert c["lexical_stats"] > 1000 and c["lexical_totals"] == 1 and c["lexical_champions"] >= 1
    assert c["embedding_queue"] == (N_A + N_B) // 50   # the items without an embedding


def test_a_role_without_grants_reads_no_statistics_lists_or_queue(db):
    assert counts(db, NOGRANT) == {"lexical_stats": 0, "lexical_totals": 0, "lexical_champions": 0,
                                   "embedding_queue": 0}
    assert as_role(db, NOGRANT, "SELECT count(*) FROM corpus.lexical_stats WHERE term = %s", [SECRET]) == [(0,)]


def test_row_level_security_hides_the_side_rows_of_its_table(db):
    """`limited` may read 200 items: not the vocabulary of all 1,500, nor lists naming hidden
    ids, nor which hidden items changed."""
    assert counts(db, LIMITED) == {"lexical_stats": 0, "lexical_totals": 0, "lexical_champions": 0,
                                   "embedding_queue": 0}


def test_a_role_that_reads_everything_reads_the_side_rows(db):
    c = counts(db, FULL)
    assert c["lexical_stats"] > 1000 and c["lexical_totals"] == 1 and c["lexical_champions"] >= 1
    assert c["embedding_queue"] == (N_A + N_B) // 50


def test_searching_without_grants_is_refused_before_any_statistic_is_read(db):
    for sql in ("SELECT * FROM corpus.corpus_hybrid_search('notes_a', NULL, %s, mode => 'lexical')",
                "SELECT * FROM corpus.corpus_explain('notes_a', NULL, %s, mode => 'lexical')"):
        db.execute(f"SET ROLE {NOGRANT}")
        try:
            with pytest.raises(psycopg.errors.InsufficientPrivilege) as e:
                db.execute(sql, [SECRET])
        finally:
            db.execute("RESET ROLE")
        diag = e.value.diag
        assert diag.message_primary == 'permission denied to search corpus "notes_a"'
        assert "GRANT SELECT ON" in diag.message_hint and '"notes"' in diag.message_hint
        assert diag.message_detail


@pytest.fixture
def small_budget(db):
    """A budget below "alpha"'s 1,500 documents: a query of it takes the champion lists."""
    db.execute("SET pg_corpus.bm25_candidate_budget = 100")
    yield
    db.execute("RESET pg_corpus.bm25_candidate_budget")


def test_a_searcher_under_row_level_security_gets_only_its_rows_and_no_hidden_ids(db, small_budget):
    # all-common query: the full reader's candidates come from the champion lists
    full = {r[0] for r in search(db, FULL, "alpha")}
    assert len(full) == 20
    limited = search(db, LIMITED, "alpha")
    assert len(limited) == 20, "the index serves what the lists would"
    assert all(int(r[0]) <= VISIBLE for r in limited)
    # the plan it is shown names no hidden item: the lists (whose heads are mostly items it
    # cannot see) are not read for it, so no item id is a parameter at all
    plan = as_role(db, LIMITED, "SELECT params FROM corpus.corpus_explain('notes_a', NULL, 'alpha', "
                                "mode => 'lexical')")
    assert plan
    shown = [v for (params,) in plan for p in params if isinstance(p, list) for v in p]
    assert not [v for v in shown if str(v).isdigit() and int(v) > VISIBLE], shown[:10]
    # (the full reader's plan does carry the lists' items: the assertion above can fail)
    full_plan = db.execute("SELECT params FROM corpus.corpus_explain('notes_a', NULL, 'alpha', mode => 'lexical')")
    assert any(isinstance(p, list) and any(str(v).isdigit() and int(v) > VISIBLE for v in p)
               for (params,) in full_plan for p in params)
    assert search(db, LIMITED, SECRET) == []
    assert [r[0] for r in search(db, FULL, SECRET)] == [str(SECRET_ID)]


def test_a_searcher_under_row_level_security_still_sees_its_stale_hits(db):
    stale = 100                                         # visible to `limited`, no embedding
    db.execute("UPDATE notes SET embedding = %s::vector WHERE id = %s", [vec(stale), stale])
    db.execute("UPDATE notes SET body = body || ' changed' WHERE id = %s", [stale])
    try:
        rows = search(db, LIMITED, None, vector=vec(stale), mode="semantic", include_stale=True)
        flags = {r[0]: r[1] for r in rows}
        assert flags.get(str(stale)) is True
        assert str(stale) not in {r[0] for r in search(db, LIMITED, None, vector=vec(stale), mode="semantic")}
        assert all(int(r[0]) <= VISIBLE for r in rows)
    finally:
        db.execute("UPDATE notes SET embedding = NULL WHERE id = %s", [stale])


def test_public_cannot_switch_off_the_re_embed_trigger(cluster, db):
    """A writer that could SET pg_corpus.defer_embedding_queue would change text without
    queueing it, and the old embedding would be served as fresh."""
    item = 7                                            # has an embedding, not queued
    queued = "SELECT count(*) FROM corpus.embedding_queue WHERE item_table = 'notes'::regclass AND item_id = %s"
    # a session that loaded the library: the SET is refused
    loaded = cluster.connect(db.info.dbname)
    loaded.execute("LOAD 'pg_corpus'")
    loaded.execute(f"SET ROLE {WRITER}")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        loaded.execute("SET pg_corpus.defer_embedding_queue = on")
    # a fresh session: the SET makes a placeholder, which the trigger must not obey
    fresh = cluster.connect(db.info.dbname)
    fresh.execute(f"SET ROLE {WRITER}")
    fresh.execute("SET pg_corpus.defer_embedding_queue = on")
    fresh.execute("UPDATE notes SET body = body || ' edited' WHERE id = %s", [item])
    assert db.execute(queued, [str(item)]).fetchone()[0] == 1, "the change is queued"
    # a DBA may let a loader defer
    db.execute(f"GRANT SET ON PARAMETER pg_corpus.defer_embedding_queue TO {WRITER}")
    try:
        granted = cluster.connect(db.info.dbname)
        granted.execute(f"SET ROLE {WRITER}")
        granted.execute("SET pg_corpus.defer_embedding_queue = on")
        granted.execute("UPDATE notes SET body = body || ' edited' WHERE id = %s", [item + 1])
        assert db.execute(queued, [str(item + 1)]).fetchone()[0] == 0, "deferred by a granted role"
    finally:
        db.execute(f"REVOKE SET ON PARAMETER pg_corpus.defer_embedding_queue FROM {WRITER}")
