"""Filtered approximate search must not starve ("it returns k rows whenever k
eligible items exist, even when the corpus is a small slice of a shared table").

One shared item table of 20,000 clustered 64-d vectors with an HNSW (vector_cosine_ops) index,
over 1,000 parents; corpus `slice5` covers 5% of the parents, `slice50` 50%. Parents are
topical (all items of a parent sit near one of 100 cluster centres) and queries are drawn near
random centres, so for the 5% slice the index's nearest neighbours are mostly foreign: a plain
post-filtered `ORDER BY <=> LIMIT` over HNSW (ef_search 40) returns far fewer than 10 rows.

For 50 queries per corpus the semantic top-10 (max_per_parent 0 = no cap) is compared with the
exact top-10 computed by numpy over the corpus' items; asserted like pgvector's TAP recall tests
(cmp_ok(recall, '>=', min)): mean recall@10 >= 0.95 and exactly 10 rows every time. Run with the
default settings, with `pg_corpus.exact_search_max_rows = 0` (forces the approximate HNSW path
with iterative scans even for a small slice), and with a huge value (forces exact search).

How I convinced myself it can fail: with the approximate path forced and no iterative scan /
no widening, slice5 queries near clusters without slice items return 0–few rows (row-count
assertion) and low recall; a wrong distance operator or a missing isolation predicate gives
recall near 0 (exact ids come from the slice only).
"""
import numpy as np
import psycopg
import pytest

DIM = 64
N_PARENTS, N_ITEMS, N_CLUSTERS, N_QUERIES, K = 1000, 20_000, 100, 50, 10
MIN_RECALL = 0.95
SEED = 2026


@pytest.fixture(scope="module")
def recall_db(cluster, pgc):
    conn = cluster.create_db("pgc_recall")
    rng = np.random.default_rng(SEED)
    tg = pgc.TextGen(SEED + 1, vocab_size=500)
    centers = pgc.random_unit_vectors(rng, N_CLUSTERS, DIM)
    parent_cluster = rng.integers(N_CLUSTERS, size=N_PARENTS)
    in5 = np.zeros(N_PARENTS, bool)
    in5[rng.choice(N_PARENTS, size=N_PARENTS // 20, replace=False)] = True
    in50 = np.zeros(N_PARENTS, bool)
    in50[rng.choice(N_PARENTS, size=N_PARENTS // 2, replace=False)] = True
    item_parent = rng.integers(N_PARENTS, size=N_ITEMS)
    vecs = pgc.unit(centers[parent_cluster[item_parent]]
                    + rng.standard_normal((N_ITEMS, DIM)) * 0.12)
    conn.execute(f"""
        CREATE TABLE fr_parent (id bigint PRIMARY KEY, slice5 text NOT NULL,
                                slice50 text NOT NULL, title text);
        CREATE TABLE fr_item (id bigint PRIMARY KEY, parent_id bigint NOT NULL REFERENCES fr_parent,
            body text NOT NULL,
            body_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
            emb vector({DIM}));
        CREATE INDEX ON fr_item (parent_id);
    """)
    pgc.copy_rows(conn, "fr_parent", ["id", "slice5", "slice50", "title"], [
        dict(id=p + 1, slice5="in" if in5[p] else "out", slice50="in" if in50[p] else "out",
             title=f"parent {p + 1}") for p in range(N_PARENTS)])
    pgc.copy_rows(conn, "fr_item", ["id", "parent_id", "body", "emb"], [
        dict(id=i + 1, parent_id=int(item_parent[i]) + 1, body=tg.text(12, 20), emb=vecs[i])
        for i in range(N_ITEMS)])
    conn.execute("SET max_parallel_maintenance_workers = 0")
    conn.execute("CREATE INDEX fr_item_emb_idx ON fr_item USING hnsw (emb vector_cosine_ops)")
    conn.execute("ANALYZE fr_parent, fr_item")
    for name, col in (("slice5", "slice5"), ("slice50", "slice50")):
        conn.execute("SELECT corpus.corpus_create(%s, isolation => %s::jsonb)",
                     [name, f'{{"{col}": "in"}}'])
        conn.execute(
            "SELECT corpus.corpus_add_source(%s, 'items', 'fr_item', text_column => 'body', "
            "embedding_column => 'emb', tsv_column => 'body_tsv', parent_table => 'fr_parent', "
            "parent_fk => 'parent_id', distance => 'cosine')", [name])
    # the stored vectors are exactly the float32 values we hold (%.9g round-trips float32)
    stored = conn.execute("SELECT emb::text FROM fr_item WHERE id = 1").fetchone()[0]
    assert np.array_equal(np.array(stored.strip("[]").split(","), dtype=np.float32), vecs[0])

    qrng = np.random.default_rng(SEED + 2)
    queries = pgc.unit(centers[qrng.integers(N_CLUSTERS, size=N_QUERIES)]
                       + qrng.standard_normal((N_QUERIES, DIM)) * 0.12)
    members = {"slice5": in5[item_parent], "slice50": in50[item_parent]}
    return dict(conn=conn, vecs=vecs, queries=queries, members=members)


def exact_top(vecs, member_mask, q, k):
    ids = np.nonzero(member_mask)[0]
    d = 1.0 - vecs[ids].astype(np.float64) @ q.astype(np.float64)
    return [str(int(ids[j]) + 1) for j in np.argsort(d, kind="stable")[:k]]


SETTINGS = {
    "default": None,
    "approximate": "0",          # pg_corpus.exact_search_max_rows = 0: HNSW + iterative scan
    "exact": "1000000",        # never approximate
}


def semantic_strategies(conn, pgc, corpus, q):
    return sorted(r[0] for r in conn.execute(
        "SELECT strategy FROM corpus.corpus_explain(%s, %s::vector, NULL, k => 10, "
        "mode => 'semantic')", [corpus, pgc.vec_text(q)]).fetchall())


@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("corpus", ["slice5", "slice50"])
def test_filtered_semantic_recall(recall_db, pgc, cluster, corpus, setting):
    conn = cluster.connect("pgc_recall")      # own session: the SET stays local to this test
    value = SETTINGS[setting]
    if value is not None:
        # the setting is a real, typed GUC of the extension, not an ignored placeholder
        pgc.search(conn, corpus, recall_db["queries"][0], None, mode="semantic")
        row = conn.execute("SELECT vartype FROM pg_settings "
                           "WHERE name = 'pg_corpus.exact_search_max_rows'").fetchone()
        assert row == ("integer",), row
        conn.execute(f"SET pg_corpus.exact_search_max_rows = {value}")
    member = recall_db["members"][corpus]
    parent_in = {r[0] for r in conn.execute(
        f"SELECT id::text FROM fr_parent WHERE {corpus} = 'in'").fetchall()}
    recalls, counts = [], []
    for q in recall_db["queries"]:
        rows = pgc.search(conn, corpus, q, None, k=K, mode="semantic", max_per_parent=0)
        got = [r["item_id"] for r in rows]
        assert all(r["parent_id"] in parent_in for r in rows), "foreign item returned"
        counts.append(len(rows))
        truth = exact_top(recall_db["vecs"], member, q, K)
        recalls.append(len(set(got) & set(truth)) / K)
    assert counts == [K] * N_QUERIES, f"row counts {counts}"
    recall = float(np.mean(recalls))
    assert recall >= MIN_RECALL, f"mean recall@{K} {recall:.3f} < {MIN_RECALL} ({setting})"
    conn.close()


def test_exact_search_setting_changes_the_strategy(recall_db, pgc, cluster):
    """Control for the 'approximate' run: forcing 0 vs a huge threshold really switches the
    semantic subplan's strategy (otherwise the two runs above could test the same path)."""
    conn = cluster.connect("pgc_recall")
    q = recall_db["queries"][0]
    conn.execute("SET pg_corpus.exact_search_max_rows = 0")
    approx = semantic_strategies(conn, pgc, "slice5", q)
    conn.execute("SET pg_corpus.exact_search_max_rows = 1000000")
    exact = semantic_strategies(conn, pgc, "slice5", q)
    assert approx and exact
    assert approx != exact, (approx, exact)
    conn.close()


def test_search_leaves_session_settings_unchanged(recall_db, pgc, cluster):
    """The approximate path tunes pgvector's settings for its own subplan only: after a search
    (inside the caller's transaction, too) the caller sees the settings it had, and a failing
    search leaves them alone as well (no state outside tables)."""
    conn = cluster.connect("pgc_recall")
    q = recall_db["queries"][1]
    names = ["hnsw.ef_search", "hnsw.iterative_scan", "hnsw.max_scan_tuples",
             "hnsw.scan_mem_multiplier", "enable_seqscan", "enable_indexscan"]

    def settings():
        return {n: conn.execute(f"SELECT current_setting('{n}')").fetchone()[0] for n in names}

    conn.execute("SELECT '[1]'::vector")     # loads pgvector, so its settings exist
    conn.execute("SET pg_corpus.exact_search_max_rows = 0")
    conn.execute("SET hnsw.ef_search = 17")
    before = settings()
    assert len(pgc.search(conn, "slice5", q, None, mode="semantic", max_per_parent=0)) == K
    assert settings() == before
    with conn.transaction():
        assert len(pgc.search(conn, "slice5", q, None, mode="semantic")) == K
        assert settings() == before
        with pytest.raises(psycopg.Error):
            with conn.transaction():      # a savepoint
                pgc.search(conn, "slice5", q, None, mode="semantic", k=0)
        assert settings() == before
    assert settings() == before
    conn.close()


def test_per_corpus_partial_index_serves_a_small_corpus(recall_db, pgc, cluster):
    """The fast path for small corpora (docs/filtered-ann.md): the isolation column copied into
    the item table and a partial HNSW index per corpus. The search filters on both copies, the
    planner scans the corpus' own graph (its idx_scan moves), and recall and k rows hold.
    Runs last: it changes the shared table for the tests above."""
    conn = cluster.connect("pgc_recall")
    conn.execute("ALTER TABLE fr_item ADD COLUMN slice5 text")
    conn.execute("UPDATE fr_item i SET slice5 = p.slice5 FROM fr_parent p WHERE p.id = i.parent_id")
    conn.execute("SET max_parallel_maintenance_workers = 0")
    conn.execute("CREATE INDEX fr_item_emb_slice5_idx ON fr_item USING hnsw (emb vector_cosine_ops) "
                 "WHERE slice5 = 'in'")
    conn.execute("ANALYZE fr_item")
    # the definition picks the copy up when it is validated again
    conn.execute("SELECT corpus.corpus_alter('slice5')")
    sql = conn.execute("SELECT string_agg(sql, ' ') FROM corpus.corpus_explain('slice5', %s::vector, "
                       "NULL, mode => 'semantic')", [pgc.vec_text(recall_db["queries"][0])]).fetchone()[0]
    assert 'i."slice5" = $' in sql and 'p."slice5" = $' in sql, sql

    def partial_scans():
        conn.execute("SELECT pg_stat_force_next_flush()")
        return conn.execute("SELECT idx_scan FROM pg_stat_user_indexes "
                            "WHERE indexrelname = 'fr_item_emb_slice5_idx'").fetchone()[0]

    before = partial_scans()
    member = recall_db["members"]["slice5"]
    recalls, counts = [], []
    for q in recall_db["queries"]:
        rows = pgc.search(conn, "slice5", q, None, k=K, mode="semantic", max_per_parent=0)
        counts.append(len(rows))
        truth = exact_top(recall_db["vecs"], member, q, K)
        recalls.append(len(set(r["item_id"] for r in rows) & set(truth)) / K)
    assert counts == [K] * N_QUERIES, f"row counts {counts}"
    assert float(np.mean(recalls)) >= MIN_RECALL, f"mean recall@{K} {np.mean(recalls):.3f}"
    # 5% of 20,000 items is 1,000: below the exact threshold, so force the HNSW path once and
    # check that it is the corpus' partial graph that serves it
    conn.execute("SET pg_corpus.exact_search_max_rows = 0")
    for q in recall_db["queries"][:5]:
        assert len(pgc.search(conn, "slice5", q, None, k=K, mode="semantic", max_per_parent=0)) == K
    assert partial_scans() >= before + 5
    conn.close()
