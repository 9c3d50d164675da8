"""Pseudo-relevance feedback (`feedback => true`, pg_corpus.hybrid_feedback): the second round's
semantic list is the search of the query vector moved towards the first fusion's top 3 items
(vector PRF, β 0.5), its lexical lists are the first round's BM25 list and the RM3-expanded one.

The vector half is recomputed here from outside: the first fusion (a plain hybrid search with
the same window), the top 3 items' stored embeddings, the moved vector in numpy, and a
semantic search with it. RM3's arithmetic is covered by the core's unit tests; its isolation
by test_leak_regression's feedback cases.
"""
import numpy as np
import pytest

SEED = 3172
EXT = "external_precedents"
WINDOW = 100  # the default window for k = 10: max(100, 4 * k)
BETA = 0.5


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_feedback")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=60, n_documents=12))
    return conn


@pytest.fixture(scope="module")
def query(db, pgc):
    """A query vector near an existing chunk, and words from that chunk."""
    emb, content = db.execute(
        "SELECT embedding::text, content FROM precedent_chunks WHERE embedding IS NOT NULL "
        "ORDER BY id LIMIT 1 OFFSET 7").fetchone()
    v = np.array([float(x) for x in emb.strip("[]").split(",")])
    v = v + np.random.default_rng(SEED).normal(0, 0.3 / np.sqrt(len(v)), len(v))
    return pgc.vec_text(v / np.linalg.norm(v)), " ".join(content.split()[:4])


def rows(db, pgc, qv, text, **kw):
    return pgc.search(db, EXT, qv, text, max_per_parent=0, **kw)


def key(r):
    return (r["source"], r["item_id"], round(r["score"], 12), r["semantic_rank"], r["lexical_rank"])


def test_the_setting_is_the_argument_default(db, pgc, query):
    qv, text = query
    plain = [key(r) for r in rows(db, pgc, qv, text)]
    fed = [key(r) for r in rows(db, pgc, qv, text, feedback=True)]
    assert plain != fed, "feedback changed nothing: the test query is too easy"
    db.execute("SET pg_corpus.hybrid_feedback = on")
    try:
        assert [key(r) for r in rows(db, pgc, qv, text)] == fed
        assert [key(r) for r in rows(db, pgc, qv, text, feedback=False)] == plain
        # where feedback cannot apply, the setting is ignored (and the argument is an error)
        assert rows(db, pgc, qv, None, mode="semantic") == rows(db, pgc, qv, None, mode="semantic",
                                                                  feedback=False)
    finally:
        db.execute("RESET pg_corpus.hybrid_feedback")


def embedding(db, source, item_id):
    table = "halachot" if source == "halachot" else "precedent_chunks"
    text = db.execute(f"SELECT embedding::text FROM {table} WHERE id = %s",
                      [int(item_id)]).fetchone()[0]
    return np.array([float(x) for x in text.strip("[]").split(",")])


def test_semantic_list_is_the_moved_vectors(db, pgc, query):
    qv, text = query
    first = rows(db, pgc, qv, text, k=WINDOW, candidates=WINDOW)
    # the feedback round moves towards the top 3 of its own first round: the search of k = 10
    # (a search of more rows may widen its window and fuse other lists)
    own = rows(db, pgc, qv, text, k=10)
    top = [embedding(db, r["source"], r["item_id"]) for r in own[:3]]
    q = np.array([float(x) for x in qv.strip("[]").split(",")])
    unit = lambda v: v / np.linalg.norm(v)  # noqa: E731
    moved = unit(unit(q) + BETA * np.mean([unit(d) for d in top], axis=0))
    # each source's list of the moved vector, cut at the window (a search of 2 * WINDOW rows
    # widens its window when the sources hold fewer: its deeper items are no list's)
    want = {(r["source"], r["item_id"]): (r["semantic_rank"], r["semantic_distance"])
            for r in rows(db, pgc, pgc.vec_text(moved), None, mode="semantic", k=2 * WINDOW,
                          candidates=WINDOW) if r["semantic_rank"] <= WINDOW}
    fed = rows(db, pgc, qv, text, feedback=True)
    assert len(fed) == 10
    seen = 0
    for r in fed:
        if r["semantic_rank"] is None:
            # each source's list holds WINDOW items; the merged list up to one per source
            assert (r["source"], r["item_id"]) not in want, r
            continue
        seen += 1
        rank, dist = want[(r["source"], r["item_id"])]
        assert r["semantic_rank"] == rank, r
        assert r["semantic_distance"] == pytest.approx(dist, abs=1e-5)
    assert seen >= 5
    # the lexical rank is the first round's BM25 list's (as the plain search reports it)
    lex = {(r["source"], r["item_id"]): r["lexical_rank"] for r in first}
    checked = 0
    for r in fed:
        if (r["source"], r["item_id"]) in lex and r["lexical_rank"] is not None:
            assert lex[(r["source"], r["item_id"])] == r["lexical_rank"], r
            checked += 1
    assert checked >= 3
