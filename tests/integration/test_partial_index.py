"""Small corpora and partial HNSW indexes: a corpus that is a small slice of a shared
table gets a health-check hint with the SQL of a partial HNSW index over it; once that index
exists (the isolation column copied into the item table), the search uses it even below
pg_corpus.exact_search_max_rows, where it would otherwise search the slice exactly, and it
returns what the exact search returns.

Data: 30,000 items of random 4-d vectors (seeded) under 3,000 parents; tenant 'small' owns 6% of the parents
(about 1,800 items), 'large' the rest.
"""
import re

import psycopg
import pytest
from psycopg.rows import dict_row

from test_health import run_hint

QVECS = ["[1,0,0,0]", "[0.3,0.9,0.1,0.2]", "[0.5,0.5,0.5,0.5]", "[-0.2,0.1,0.9,-0.4]"]


@pytest.fixture(scope="module")
def db(cluster):
    conn = cluster.create_db("pgc_partial")
    conn.execute("""
        CREATE TABLE parents (id bigint PRIMARY KEY, tenant text NOT NULL, title text NOT NULL);
        INSERT INTO parents SELECT g, CASE WHEN g % 50 < 3 THEN 'small' ELSE 'large' END, 'p' || g
          FROM generate_series(1, 3000) g;
        CREATE TABLE items (id bigint PRIMARY KEY, parent_id bigint NOT NULL REFERENCES parents (id),
            body text NOT NULL,
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED, emb vector(4));
        SELECT setseed(0.42);
        INSERT INTO items (id, parent_id, body, emb)
        SELECT g, 1 + g % 3000, 'item ' || g || ' about leases and contracts of ' || (g % 113),
               ARRAY[random() - 0.5, random() - 0.5, random() - 0.5, random() - 0.5]::real[]::vector
          FROM generate_series(1, 30000) g;
        CREATE INDEX ON items (parent_id);
        CREATE INDEX ON items USING gin (tsv);
        SET max_parallel_maintenance_workers = 0;
        CREATE INDEX items_emb_all ON items USING hnsw (emb vector_cosine_ops);
        ANALYZE parents, items;
        SELECT corpus.corpus_create('small', isolation => '{"tenant": "small"}');
        SELECT corpus.corpus_add_source('small', 'items', 'items', text_column => 'body', tsv_column => 'tsv',
            embedding_column => 'emb', parent_table => 'parents', parent_fk => 'parent_id', min_length => 1);
        SELECT corpus.corpus_create('large', isolation => '{"tenant": "large"}');
        SELECT corpus.corpus_add_source('large', 'items', 'items', text_column => 'body', tsv_column => 'tsv',
            embedding_column => 'emb', parent_table => 'parents', parent_fk => 'parent_id', min_length => 1);
    """)
    return conn


def indexes_row(conn, corpus):
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT status, count, detail, hint FROM corpus.corpus_health_check(%s) "
                           "WHERE \"check\" = 'indexes'", (corpus,)).fetchone()


def strategy(conn, corpus):
    return conn.execute("SELECT strategy FROM corpus.corpus_explain(%s, '[1,0,0,0]', mode => 'semantic')",
                        (corpus,)).fetchone()[0]


def top(conn, corpus, vec, k=10):
    """(item_id, distance) of the k nearest."""
    return conn.execute(
        "SELECT item_id, semantic_distance FROM corpus.corpus_hybrid_search(%s, %s::vector, NULL, k => %s, "
        "mode => 'semantic', max_per_parent => 0)", (corpus, vec, k)).fetchall()


def test_a_small_slice_is_advised_a_partial_index_and_then_uses_it(db):
    # before: the small corpus (about 1,800 items, 6%) is searched exactly, and advised
    assert strategy(db, "small") == "exact"
    before = {v: top(db, "small", v) for v in QVECS}
    assert all(len(ids) == 10 for ids in before.values())
    row = indexes_row(db, "small")
    assert row["status"] == "warn" and row["detail"]["small_slice"] is True
    assert not row["detail"]["served_by_partial_hnsw"]
    assert "partial HNSW index" in row["hint"] and "WHERE \"tenant\" = 'small'" in row["hint"]
    large = indexes_row(db, "large")
    assert large["detail"]["small_slice"] is False, "94% of the table is no small slice"
    assert "partial HNSW" not in (large["hint"] or "")

    # the DBA runs the hint: the column is copied into the items and the index built
    statements = run_hint(db, row["hint"])
    assert any(s.startswith("ALTER TABLE") for s in statements)
    assert any(re.search(r"CREATE INDEX CONCURRENTLY .* USING hnsw .* WHERE", s) for s in statements)
    db.execute("ANALYZE items")

    row = indexes_row(db, "small")
    assert row["detail"]["served_by_partial_hnsw"] is True
    assert "partial HNSW" not in (row["hint"] or "")
    # below exact_search_max_rows, yet approximate: the partial index covers the corpus
    assert strategy(db, "small") == "hnsw_iterative"
    assert strategy(db, "large") == "hnsw_iterative"
    sql, params = db.execute("SELECT sql, params FROM corpus.corpus_explain('small', '[1,0,0,0]', "
                             "mode => 'semantic')").fetchone()
    settings = [l for l in sql.splitlines() if l.startswith("SET LOCAL ")]
    body = "\n".join(l for l in sql.splitlines() if not l.startswith("SET LOCAL "))
    values = [[1.0, 0.0, 0.0, 0.0] if isinstance(p, str) and p.startswith("<query vector") else p for p in params]
    body = re.sub(r"\$(\d+)", lambda m: f"%(p{m.group(1)})s", body)
    with db.transaction():
        for s in settings:
            db.execute(s)
        plan = "\n".join(r[0] for r in db.execute("EXPLAIN " + body, {f"p{i + 1}": v for i, v in enumerate(values)}))
    partial = db.execute("SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'items'::regclass "
                         "AND indpred IS NOT NULL").fetchone()[0]
    assert f"Index Scan using {partial}" in plan, plan

    # the same answers as the exact search (HNSW over 1,800 items of 4 dimensions): recall@10,
    # counted by distance (ties may order differently)
    after = {v: top(db, "small", v) for v in QVECS}
    found = sum(sum(1 for _, d in after[v] if d <= before[v][-1][1] + 1e-9) for v in QVECS)
    assert found / (10 * len(QVECS)) >= 0.9, (before, after)


def test_the_advice_needs_an_isolated_small_slice(db):
    # a corpus owning its table (no isolation predicate) is never advised
    db.execute("SELECT corpus.corpus_create('everything')")
    db.execute("SELECT corpus.corpus_add_source('everything', 'items', 'items', text_column => 'body', "
               "tsv_column => 'tsv', embedding_column => 'emb', parent_table => 'parents', "
               "parent_fk => 'parent_id', min_length => 1)")
    row = indexes_row(db, "everything")
    assert row["detail"]["small_slice"] is False
