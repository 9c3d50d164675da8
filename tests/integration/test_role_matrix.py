"""Who can read, call and change what in schema `corpus`: a role with no grant, a reader of the
item tables, an embedding worker (the grants the worker API documents) and the owner of one
source's table, against every table and every function of the schema."""
import psycopg
import pytest
from conftest import as_role, drop_roles

SEED = 3131
R = "pgc_matrix"
NOGRANT, READER, EMBEDDER, OWNER = (f"{R}_{x}" for x in ("nogrant", "reader", "embedder", "owner"))
ROLES = (NOGRANT, READER, EMBEDDER, OWNER)
ITEM_TABLES = ("case_law", "precedent_chunks", "halachot", "document_chunks")
# tables that describe items: row-level security decides which rows a role reads
SIDE_TABLES = ("lexical_stats", "lexical_totals", "lexical_champions", "embedding_queue")


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_role_matrix")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=30, n_documents=8))
    conn.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats()")
    conn.execute("UPDATE precedent_chunks SET embedding = NULL WHERE id IN (SELECT id FROM precedent_chunks LIMIT 3)")
    for r in ROLES:
        conn.execute(f"DROP ROLE IF EXISTS {r}")
        conn.execute(f"CREATE ROLE {r}")
    conn.execute(f"GRANT SELECT ON {', '.join(ITEM_TABLES)} TO {READER}, {EMBEDDER}")
    conn.execute(f"GRANT UPDATE ON precedent_chunks, halachot, document_chunks TO {EMBEDDER}")
    conn.execute(f"GRANT SELECT, UPDATE, DELETE ON corpus.embedding_queue TO {EMBEDDER}")
    conn.execute(f"GRANT SELECT ON case_law, precedent_chunks TO {OWNER}")
    conn.execute(f"ALTER TABLE halachot OWNER TO {OWNER}")
    yield conn
    conn.execute("ALTER TABLE halachot OWNER TO CURRENT_USER")
    drop_roles(conn, ROLES)


def tables(db):
    return [r[0] for r in db.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'corpus' AND c.relkind IN ('r', 'p') ORDER BY 1")]




def denied(db, role, sql, params=None):
    db.execute(f"SET ROLE {role}")
    try:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            db.execute(sql, params)
    finally:
        db.execute("RESET ROLE")


@pytest.mark.parametrize("role", ROLES)
def test_no_role_changes_the_catalog_statistics_or_evaluations(db, role):
    for t in tables(db):
        for priv in ("INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"):
            granted = db.execute("SELECT has_table_privilege(%s, %s, %s)", [role, f"corpus.{t}", priv]).fetchone()[0]
            expected = role == EMBEDDER and t == "embedding_queue" and priv in ("UPDATE", "DELETE")
            assert granted == expected, f"{role} {priv} on corpus.{t}"
    assert not db.execute("SELECT has_schema_privilege(%s, 'corpus', 'CREATE')", [role]).fetchone()[0]


@pytest.mark.parametrize("role", ROLES)
def test_evaluation_tables_are_not_readable(db, role):
    evaluation = [t for t in tables(db) if t.startswith(("gold_", "eval_"))]
    assert len(evaluation) >= 4, evaluation       # gold sets, queries, judgments, runs
    for t in evaluation:
        denied(db, role, f"SELECT count(*) FROM corpus.{t}")


def test_side_rows_follow_what_each_role_reads_in_full(db):
    full = {t: db.execute(f"SELECT count(*) FROM corpus.{t}").fetchone()[0] for t in SIDE_TABLES}
    assert all(full[t] > 0 for t in ("lexical_stats", "lexical_totals", "embedding_queue"))
    for role in ROLES:
        seen = {t: as_role(db, role, f"SELECT count(*) FROM corpus.{t}")[0][0] for t in SIDE_TABLES}
        if role == NOGRANT:
            assert seen == {t: 0 for t in SIDE_TABLES}
        elif role in (READER, EMBEDDER):
            assert seen == full, role           # reads every item table in full (the worker the queue)
        else:
            # the owner of halachot, which may read case_law and precedent_chunks too, reads the
            # two corpora made of those three tables in full, not case_documents
            for t in ("lexical_stats", "lexical_totals"):
                mine = db.execute(f"SELECT count(*) FROM corpus.{t} WHERE corpus <> 'case_documents'").fetchone()[0]
                assert 0 < seen[t] == mine < full[t], t
            queued = db.execute("SELECT count(*) FROM corpus.embedding_queue "
                                "WHERE item_table IN ('halachot'::regclass, 'precedent_chunks'::regclass)").fetchone()[0]
            assert seen["embedding_queue"] == queued


def test_every_public_function_is_callable_and_none_runs_with_definer_rights(db):
    rows = db.execute("""
        SELECT p.proname, p.prosecdef, has_function_privilege('public', p.oid, 'EXECUTE')
          FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'corpus'""").fetchall()
    for name, definer, public in rows:
        if name == "_embedding_trigger":
            # the re-embed trigger: definer, callable only as a trigger AFTER each row or a
            # TRUNCATE (registering roles name it in CREATE TRIGGER); a direct call is refused
            assert definer and public, name
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                db.execute("SELECT corpus._embedding_trigger()")
        elif name == "_item_queued":
            # what a Citus shard answers a search about its own hits: definer, and it answers
            # only a role that may read the table (the next test)
            assert definer and public, name
        else:
            assert not definer, name
            if not name.startswith("_"):
                assert public, name


def test_the_queue_state_of_an_item_is_told_only_to_readers_of_its_table(db):
    (item,) = db.execute("SELECT item_id FROM corpus.embedding_queue "
                         "WHERE item_table = 'precedent_chunks'::regclass LIMIT 1").fetchone()
    ask = "SELECT corpus._item_queued('public.precedent_chunks', 'embedding', %s, NULL)"
    assert db.execute(ask, (item,)).fetchone()[0] is True
    assert as_role(db, READER, ask, (item,))[0][0] is True
    assert as_role(db, NOGRANT, ask, (item,))[0][0] is False, "no SELECT on the table: nothing to learn"
    assert as_role(db, READER, ask, ("no such id",))[0][0] is False
    # SELECT on another column only, or row-level security on the table: what the queue's own
    # policy would not show either
    with db.transaction():
        db.execute(f"GRANT SELECT (content) ON precedent_chunks TO {NOGRANT}")
        assert as_role(db, NOGRANT, ask, (item,))[0][0] is False
        db.execute("ALTER TABLE precedent_chunks ENABLE ROW LEVEL SECURITY")
        db.execute(f"CREATE POLICY everything ON precedent_chunks TO {READER} USING (true)")
        assert as_role(db, READER, ask, (item,))[0][0] is False
        assert db.execute(ask, (item,)).fetchone()[0] is True, "the owner is not under its table's policies"
        raise psycopg.Rollback()


def test_what_each_role_may_do_through_the_functions(db):
    search = "SELECT count(*) FROM corpus.corpus_hybrid_search('external_precedents', NULL, 'הלכה', mode => 'lexical')"
    # no grant: no search (refused before any statistic is read), no definition change
    denied(db, NOGRANT, search)
    denied(db, NOGRANT, "SELECT corpus.corpus_create('matrix_x')")
    # a reader searches; it changes no definition, statistics or queue
    assert as_role(db, READER, search)[0][0] >= 0
    denied(db, READER, "SELECT corpus.corpus_create('matrix_x')")
    denied(db, READER, "SELECT * FROM corpus.corpus_refresh_lexical_stats('external_precedents')")
    denied(db, READER, "SELECT * FROM corpus.corpus_embedding_claim()")
    # the worker claims and gives back; it may not redefine a corpus
    claimed = as_role(db, EMBEDDER, "SELECT item_table::text, embedding_column, item_id, version "
                                    "FROM corpus.corpus_embedding_claim(batch_size => 2, worker => 'matrix')")
    assert claimed
    for t, c, i, v in claimed:
        as_role(db, EMBEDDER, "SELECT corpus.corpus_embedding_release(%s::regclass, %s, %s, %s, 'matrix')", [t, c, i, v])
    denied(db, EMBEDDER, "SELECT corpus.corpus_drop('external_precedents')")
    # the owner of one source's table cannot search a corpus whose other table it cannot read,
    # nor touch the catalog
    denied(db, OWNER, "SELECT count(*) FROM corpus.corpus_hybrid_search('case_documents', NULL, 'x', "
                      "filters => '{\"practice_area\": \"planning\"}', mode => 'lexical')")
    denied(db, OWNER, "DELETE FROM corpus.sources WHERE item_table = 'halachot'::regclass")
