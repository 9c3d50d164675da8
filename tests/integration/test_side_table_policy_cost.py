"""The side tables' row-level security (sql/access.sql) checks what a role reads in full once per
statement — per corpus, source or slot — never once per row, and admits exactly the rows it
admitted when it checked every row.

* Semantics: corpora over a table without row-level security, one with it, both, a source with
  a parent table and a corpus without sources; roles with no grant, column grants, SELECT but
  under row-level security, SELECT on items but not on their parents, and the queue's workers.
  For every role and side table, the rows it reads are those the per-row form of each policy
  admits — its check evaluated as that role, row by row (the oracle) — and writes are checked
  the same way.
* Cost: with CORPORA corpora (one table, one source each), `SELECT count(*)` of each side table
  as a role that reads everything calls the policies' check functions at most a few times per
  corpus, while the statistics hold many rows per corpus (the per-row form called them twice
  per row: seconds at a few hundred corpora, a cheap denial of service for any role)."""
import sys
from pathlib import Path

import psycopg
import pytest
from conftest import as_role, drop_roles

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from side_table_policy import check_calls  # noqa: E402

PREFIX = "pgc_spc"
NONE, FULL, COLS, IDONLY, NOPARENT, WORKER, DELETER, WRITER = (
    f"{PREFIX}_{r}" for r in ("none", "full", "cols", "idonly", "noparent", "worker", "deleter", "writer"))
ROLES = (NONE, FULL, COLS, IDONLY, NOPARENT, WORKER, DELETER, WRITER)
SIDE_TABLES = ("lexical_stats", "lexical_totals", "lexical_champions", "embedding_queue")
CORPORA = 300


def items_table(conn, name, rows, parent=False):
    conn.execute(f"""CREATE TABLE {name} (id int PRIMARY KEY, doc_id int NOT NULL
                                          {'REFERENCES spc_parents' if parent else ''}, body text NOT NULL,
                                          tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
                                          emb vector(3))""")
    # every tenth item without an embedding: queued
    conn.execute(f"""INSERT INTO {name} (id, doc_id, body, emb)
                     SELECT i, i %% 5 + 1, 'alpha {name} item ' || i || ' word' || (i %% 7),
                            CASE WHEN i %% 10 <> 0 THEN '[1,2,3]'::vector END
                       FROM generate_series(1, %s) AS i""", [rows])


def add_source(conn, corpus, name, table, **kw):
    extra = "".join(f", {k} => %({k})s" for k in kw)
    conn.execute(f"""SELECT corpus.corpus_add_source(%(corpus)s, %(name)s, %(table)s, text_column => 'body',
                         tsv_column => 'tsv', embedding_column => 'emb', parent_fk => 'doc_id',
                         min_length => 5{extra})""", {"corpus": corpus, "name": name, "table": table, **kw})


@pytest.fixture(scope="module")
def db(cluster):
    conn = cluster.create_db("pgc_side_policy")
    for r in ROLES:
        conn.execute(f"DROP ROLE IF EXISTS {r}")
        conn.execute(f"CREATE ROLE {r}")
    conn.execute("CREATE TABLE spc_parents (id int PRIMARY KEY, title text)")
    conn.execute("INSERT INTO spc_parents SELECT i, 'parent ' || i FROM generate_series(1, 5) AS i")
    items_table(conn, "spc_open", 40)
    items_table(conn, "spc_rls", 30)
    items_table(conn, "spc_child", 20, parent=True)
    for corpus, sources in (("spc_c_open", [("open", "spc_open", {})]),
                            ("spc_c_rls", [("rls", "spc_rls", {})]),
                            ("spc_c_mixed", [("open", "spc_open", {}), ("rls", "spc_rls", {})]),
                            ("spc_c_parent", [("child", "spc_child", {"parent_table": "spc_parents"})]),
                            ("spc_c_empty", [])):
        conn.execute("SELECT corpus.corpus_create(%s)", [corpus])
        for name, table, kw in sources:
            add_source(conn, corpus, name, table, **kw)
        conn.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats(%s)", [corpus])
    # rows of the corpus without sources (which every role reads: it has no items to hide)
    conn.execute("INSERT INTO corpus.lexical_stats VALUES ('spc_c_empty', 'spcempty', 1) ON CONFLICT DO NOTHING")
    conn.execute("""INSERT INTO corpus.lexical_totals (corpus, documents, total_length, terms, refreshed_at,
                                                       changes_at_refresh)
                    VALUES ('spc_c_empty', 0, 0, 0, now(), 0) ON CONFLICT DO NOTHING""")
    # a list for every source (the refresh writes lists only for keys of more than 1000 items)
    conn.execute("""INSERT INTO corpus.lexical_champions (corpus, source, term, items, impacts)
                    SELECT s.corpus, s.name, 'alpha', '{1,2}', '{1.5,1.0}' FROM corpus.sources s
                    ON CONFLICT DO NOTHING""")
    conn.execute(f"GRANT SELECT ON spc_open, spc_rls, spc_child, spc_parents TO {FULL}, {WRITER}")
    conn.execute(f"GRANT SELECT (id, tsv, doc_id) ON spc_open TO {COLS}")
    conn.execute(f"GRANT SELECT (id) ON spc_open TO {IDONLY}")
    conn.execute(f"GRANT SELECT ON spc_child TO {NOPARENT}")
    conn.execute(f"GRANT UPDATE ON corpus.embedding_queue TO {WORKER}")
    conn.execute(f"GRANT DELETE ON corpus.embedding_queue TO {DELETER}")
    conn.execute(f"GRANT INSERT ON corpus.lexical_stats, corpus.lexical_champions TO {WRITER}")
    # (a policy that admits every row still puts its table under row-level security)
    conn.execute("ALTER TABLE spc_rls ENABLE ROW LEVEL SECURITY")
    conn.execute("CREATE POLICY everything ON spc_rls USING (true)")
    yield conn
    conn.execute("DROP TABLE spc_open, spc_rls, spc_child, spc_parents CASCADE")
    drop_roles(conn, ROLES)


KEYS = {"lexical_stats": "corpus, term", "lexical_totals": "corpus", "lexical_champions": "corpus, source, term",
        "embedding_queue": "item_table::text, embedding_column, item_id"}
# the policies' per-row form: what a role read of each side table when every row was checked
PER_ROW = {
    "lexical_stats": "SELECT corpus._reads_corpus_in_full(%(corpus)s)",
    "lexical_totals": "SELECT corpus._reads_corpus_in_full(%(corpus)s)",
    "lexical_champions": """SELECT EXISTS (SELECT 1 FROM corpus.sources AS s
                                  WHERE s.corpus = %(corpus)s AND s.name = %(source)s
                                    AND corpus._reads_in_full(s.item_table, ARRAY[s.id_column, s.tsv_column]))""",
    "embedding_queue": """SELECT pg_catalog.has_table_privilege('corpus.embedding_queue', 'UPDATE')
                                 OR pg_catalog.has_table_privilege('corpus.embedding_queue', 'DELETE')
                                 OR EXISTS (SELECT 1 FROM corpus.embedding_slots AS s
                                             WHERE s.item_table = %(item_table)s::regclass
                                               AND s.embedding_column = %(embedding_column)s
                                               AND corpus._reads_in_full(s.item_table, ARRAY[s.id_column]))""",
}


def rows(db, table, role=None):
    sql = f"SELECT {KEYS[table]} FROM corpus.{table}"
    return set(as_role(db, role, sql) if role else db.execute(sql).fetchall())


def per_row_oracle(db, table, role):
    """The rows the per-row form of the table's policy admits to `role`: its check evaluated as
    the role for each row's key (memoised: rows of one corpus, source or slot share it)."""
    names = [c.strip().split("::")[0] for c in KEYS[table].split(",")]
    admitted, memo = set(), {}
    for row in rows(db, table):
        args = dict(zip(names, row))
        key = tuple(args[n] for n in ("corpus", "source", "item_table", "embedding_column") if n in args)
        if key not in memo:
            memo[key] = as_role(db, role, PER_ROW[table], args)[0][0]
        if memo[key]:
            admitted.add(row)
    return admitted


def corpora_seen(db, role):
    return {r[0] for r in as_role(db, role, "SELECT DISTINCT corpus FROM corpus.lexical_stats")}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("table", SIDE_TABLES)
def test_a_role_reads_exactly_the_rows_the_per_row_policy_admitted(db, table, role):
    assert rows(db, table), f"corpus.{table} is empty: nothing would be tested"
    assert rows(db, table, role) == per_row_oracle(db, table, role)


def test_the_cases_the_oracle_covers(db):
    """What the roles read, spelled out: the oracle above is not vacuous."""
    assert corpora_seen(db, NONE) == {"spc_c_empty"}
    assert corpora_seen(db, FULL) == {"spc_c_open", "spc_c_parent", "spc_c_empty"}
    assert corpora_seen(db, COLS) == {"spc_c_open", "spc_c_empty"}
    assert corpora_seen(db, IDONLY) == corpora_seen(db, NOPARENT) == {"spc_c_empty"}
    lists = lambda role: {(c, s) for c, s, _ in rows(db, "lexical_champions", role)}   # noqa: E731
    assert lists(FULL) == {("spc_c_open", "open"), ("spc_c_mixed", "open"), ("spc_c_parent", "child")}
    assert lists(NOPARENT) == {("spc_c_parent", "child")}, "a list needs its own table only"
    assert lists(IDONLY) == set()
    queued = lambda role: {t for t, _, _ in rows(db, "embedding_queue", role)}   # noqa: E731
    assert queued(IDONLY) == {"spc_open"} and queued(NOPARENT) == {"spc_child"}
    assert queued(WORKER) == queued(DELETER) == {"spc_open", "spc_rls", "spc_child"}
    assert queued(NONE) == set()


@pytest.mark.parametrize("table, values", [
    ("lexical_stats", "(%(corpus)s, 'spcwritten', 1)"),
    ("lexical_champions", "(%(corpus)s, 'open', 'spcwritten', '{1}', '{1.0}')"),
])
def test_a_write_is_checked_against_the_corpus_it_names(db, table, values):
    try:
        db.execute(f"SET ROLE {WRITER}")
        db.execute(f"INSERT INTO corpus.{table} VALUES {values}", {"corpus": "spc_c_open"})
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as e:
            db.execute(f"INSERT INTO corpus.{table} VALUES {values}", {"corpus": "spc_c_mixed"})
        assert "row-level security" in str(e.value)
    finally:
        db.execute("RESET ROLE")
        db.execute(f"DELETE FROM corpus.{table} WHERE term = 'spcwritten'")


# ---------------------------------------------------------------------------------------------
# cost
# ---------------------------------------------------------------------------------------------

READER = f"{PREFIX}_reader"


@pytest.fixture(scope="module")
def many(cluster):
    """CORPORA corpora, each with one source over the same table of 60 items (~50 terms each)."""
    conn = cluster.create_db("pgc_side_policy_cost")
    conn.execute(f"DROP ROLE IF EXISTS {READER}")
    conn.execute(f"CREATE ROLE {READER}")
    items_table(conn, "spc_many", 60)
    for n in range(CORPORA):
        conn.execute("SELECT corpus.corpus_create(%s)", [f"spc_many_{n:03d}"])
        add_source(conn, f"spc_many_{n:03d}", "items", "spc_many")
    conn.execute("""INSERT INTO corpus.lexical_champions (corpus, source, term, items, impacts)
                    SELECT s.corpus, s.name, 'alpha', '{1,2}', '{1.5,1.0}' FROM corpus.sources s""")
    conn.execute(f"GRANT SELECT ON spc_many TO {READER}")
    yield conn
    conn.execute("DROP TABLE spc_many CASCADE")
    drop_roles(conn, (READER,))


@pytest.mark.parametrize("table", SIDE_TABLES)
def test_the_policy_checks_each_corpus_once_per_statement_not_each_row(many, table):
    db = many
    rows_ = db.execute(f"SELECT count(*) FROM corpus.{table}").fetchone()[0]
    n, calls = check_calls(db, table, READER)
    assert n == rows_, "the reader reads the table in full"
    # (calls of corpus._reads_corpus_in_full and corpus._reads_in_full) a corpus' check is one
    # call of the first and one of the second per source (its table; no parent table)
    assert calls <= 2 * CORPORA, f"{calls} check calls for {rows_} rows of {CORPORA} corpora"


def test_the_statistics_hold_many_rows_per_corpus(many):
    """What makes the bound above fail for a check per row."""
    assert many.execute("SELECT count(*) FROM corpus.lexical_stats").fetchone()[0] >= 20 * CORPORA
