"""Schema changes followed: renaming any mapped column — the item's id, text, BM25 and embedding
columns, a locator column, the parent key, the isolation column, a filter field's column —
changes no answer and needs no action (a source knows its columns by attribute number); writes
keep working and keep the queue honest; a corpus_alter after the renames keeps them followed;
a dropped mapped column fails the searches that need it with 42703 naming the column."""
import psycopg
import pytest
from psycopg.rows import dict_row

SEED = 4711
EXT = "external_precedents"
RENAMES = [("precedent_chunks", "content", "body"), ("precedent_chunks", "content_tsv", "body_bm25"),
           ("precedent_chunks", "id", "chunk_id"), ("precedent_chunks", "embedding", "vec"),
           ("precedent_chunks", "page_number", "page_no"), ("halachot", "rule", "rule_text"),
           ("case_law", "source_kind", "kind"), ("case_law", "court", "court_name"), ("case_law", "id", "case_id")]


@pytest.fixture
def db(cluster, pgc):
    conn = cluster.create_db("pgc_schema_changes")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=40, n_documents=6))
    yield conn
    if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'schema_reader'").fetchone():
        conn.execute("DROP OWNED BY schema_reader; DROP ROLE schema_reader")


def searches(db, pgc):
    vec, text, court = db.execute("""SELECT c.embedding::text, left(c.content, 30), l.court FROM precedent_chunks c
                                     JOIN case_law l ON l.id = c.case_law_id
                                    WHERE l.source_kind = 'external_upload' ORDER BY c.id LIMIT 1""").fetchone()
    return vec, text, court


def run_all(db, pgc, vec, text, court):
    out = {}
    for corpus in (EXT, "internal_decisions"):
        for mode in ("hybrid", "semantic", "lexical"):
            out[corpus, mode] = pgc.search(db, corpus, vec, text, mode=mode, k=8)
        out[corpus, "court"] = pgc.search(db, corpus, vec, text, k=8, filters={"court": court})
    with db.cursor(row_factory=dict_row) as cur:
        out["fetch"] = cur.execute("SELECT * FROM corpus.corpus_fetch(%s, 'chunks', %s)",
                                   [EXT, out[EXT, "hybrid"][0]["item_id"]]).fetchall()
    return out


def test_renamed_columns_change_no_answer(db, pgc):
    vec, text, court = searches(db, pgc)
    before = run_all(db, pgc, vec, text, court)
    assert all(before.values()) and before[EXT, "court"]
    for table, old, new in RENAMES:
        db.execute(f"ALTER TABLE {table} RENAME COLUMN {old} TO {new}")
    after = run_all(db, pgc, vec, text, court)
    assert after == before
    # the locator keeps its key; the health check finds nothing wrong with the definitions
    assert after[EXT, "hybrid"][0]["locator"]["page"] is not None
    health = db.execute('SELECT "check", status, detail FROM corpus.corpus_health_check(%s)', [EXT]).fetchall()
    assert not [h for h in health if h[0] == "catalog_drift" and h[1] != "ok"], health

    # a role that reads the tables in full still reads the corpus' statistics and champion lists
    db.execute("DROP ROLE IF EXISTS schema_reader")
    db.execute("CREATE ROLE schema_reader")
    db.execute("GRANT SELECT ON precedent_chunks, halachot, case_law TO schema_reader")
    db.execute("SET ROLE schema_reader")
    try:
        seen = db.execute("SELECT (SELECT count(*) FROM corpus.lexical_stats WHERE corpus = %s), "
                          "corpus._reads_corpus_in_full(%s)", [EXT, EXT]).fetchone()
    finally:
        db.execute("RESET ROLE")
    assert seen[0] > 0 and seen[1] is True

    # writes to the renamed columns keep the queue honest: a changed text makes its embedding stale
    item = int(after[EXT, "hybrid"][0]["item_id"])
    db.execute("UPDATE precedent_chunks SET body = body || ' עוד' WHERE chunk_id = %s", [item])
    queued = db.execute("SELECT count(*) FROM corpus.embedding_queue WHERE item_id = %s", [str(item)]).fetchone()[0]
    assert queued == 1
    rows = pgc.search(db, EXT, vec, text, mode="lexical", k=50, max_per_parent=0)
    assert any(r["item_id"] == str(item) and r["content"].endswith(" עוד") for r in rows)

    # redefining the corpus' settings after the renames keeps them followed, and a later rename too
    base = pgc.search(db, EXT, vec, text, k=8)
    db.execute("SELECT corpus.corpus_alter(%s, description => 'after the renames')", [EXT])
    assert pgc.search(db, EXT, vec, text, k=8) == base
    db.execute("ALTER TABLE precedent_chunks RENAME COLUMN body TO body_text")
    db.execute("ALTER TABLE case_law RENAME COLUMN kind TO corpus_kind")
    assert pgc.search(db, EXT, vec, text, k=8) == base


def test_a_dropped_mapped_column_is_a_clear_error(db, pgc):
    vec, text, _ = searches(db, pgc)
    db.execute("ALTER TABLE precedent_chunks DROP COLUMN page_number")
    with pytest.raises(psycopg.Error) as e:
        pgc.search(db, EXT, vec, text)
    assert e.value.sqlstate == "42703"
    assert "page_number" in e.value.diag.message_primary and e.value.diag.message_hint
    # another corpus, whose sources do not map the column, still searches
    assert pgc.search(db, "case_documents", None, text, filters={"practice_area": "planning"}) is not None
