"""Multi-query fusion (`extra_queries`): the extra queries' lists are recomputed from outside
as plain single-query searches of the same corpus, and the fused result is checked against
RRF over those lists (query weights included); provenance (`query_ranks`) names every query
and branch that ranked a hit; the original query is always fused; bad extra queries fail with
their SQLSTATE and a hint. Isolation under extra queries is test_leak_regression's
extra_queries cases.
"""
import json

import numpy as np
import psycopg
import pytest

SEED = 4410
EXT = "external_precedents"
WINDOW = 40  # max(20, 4 * k) for k = 10
RRF_K = 60


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_multi_query")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=60, n_documents=12))
    return conn


def stored(db, table, offset):
    emb, content = db.execute(
        f"SELECT embedding::text, {'content' if table == 'precedent_chunks' else 'rule'} FROM {table} "
        "WHERE embedding IS NOT NULL ORDER BY id LIMIT 1 OFFSET %s", [offset]).fetchone()
    return np.array([float(x) for x in emb.strip("[]").split(",")]), content


@pytest.fixture(scope="module")
def queries(db):
    """An original query and two extra ones, each near a different stored item."""
    v0, t0 = stored(db, "precedent_chunks", 3)
    v1, t1 = stored(db, "precedent_chunks", 21)
    v2, t2 = stored(db, "halachot", 5)
    return dict(vec=v0, text=" ".join(t0.split()[:4]),
                extra=[{"vector": list(v1), "text": " ".join(t1.split()[:3]), "weight": 0.7, "label": "rewrite"},
                       {"vector": list(v2), "weight": 1.5}])


def run(db, pgc, q, **kw):
    return pgc.search(db, EXT, q["vec"], q["text"], max_per_parent=0, **kw)


def single(db, pgc, vec, text, mode):
    """One query's branch lists as a plain search reports them, whole: (source, item) -> rank.
    (The window stays WINDOW per source: pg_corpus.max_candidates stops its widening.)"""
    db.execute(f"SET pg_corpus.max_candidates = {WINDOW}")
    try:
        rows = pgc.search(db, EXT, vec, text, mode=mode, max_per_parent=0, k=4 * WINDOW, candidates=WINDOW)
    finally:
        db.execute("RESET pg_corpus.max_candidates")
    col = "semantic_rank" if mode == "semantic" else "lexical_rank"
    return {(r["source"], r["item_id"]): r[col] for r in rows if r[col] is not None}


def test_the_fusion_is_rrf_over_every_querys_lists_with_their_weights(db, pgc, queries):
    q = queries
    lists = [(1.0, "original", "semantic", single(db, pgc, q["vec"], None, "semantic")),
             (1.0, "original", "lexical", single(db, pgc, None, q["text"], "lexical"))]
    e1, e2 = q["extra"]
    lists += [(0.7, "rewrite", "semantic", single(db, pgc, e1["vector"], None, "semantic")),
              (0.7, "rewrite", "lexical", single(db, pgc, None, e1["text"], "lexical")),
              (1.5, "extra_2", "semantic", single(db, pgc, e2["vector"], None, "semantic"))]
    fused = run(db, pgc, q, extra_queries=q["extra"], k=30, candidates=WINDOW)
    assert len(fused) == 30
    for r in fused:
        item = (r["source"], r["item_id"])
        want = sorted((label, branch, ranks[item]) for _, label, branch, ranks in lists if item in ranks)
        got = sorted((x["query"], x["branch"], x["rank"]) for x in r["query_ranks"])
        assert got == want, item
        score = sum(w / (RRF_K + ranks[item]) for w, _, _, ranks in lists if item in ranks)
        assert r["score"] == pytest.approx(score, rel=1e-12), item
        # the classic columns stay the original query's
        assert r["semantic_rank"] == lists[0][3].get(item)
        assert r["lexical_rank"] == lists[1][3].get(item)
    assert [r["score"] for r in fused] == sorted((r["score"] for r in fused), reverse=True)
    # the extra queries changed the result, and their best items came in
    plain = run(db, pgc, q, k=30, candidates=WINDOW)
    assert [(r["source"], r["item_id"]) for r in plain] != [(r["source"], r["item_id"]) for r in fused]
    best_extra = min(lists[4][3], key=lists[4][3].get)
    assert best_extra in {(r["source"], r["item_id"]) for r in fused}


def test_the_original_query_is_always_fused(db, pgc, queries):
    q = queries
    heavy = [dict(x, weight=100) for x in q["extra"]]
    rows = run(db, pgc, q, extra_queries=heavy, k=10)
    ranks = [x for r in rows for x in r["query_ranks"] if x["query"] == "original"]
    assert ranks, "the original query's lists are in the fusion"
    # an empty list is no extra query at all: the same search as without the argument
    key = lambda rs: [(r["source"], r["item_id"], r["score"]) for r in rs]  # noqa: E731
    assert key(run(db, pgc, q, extra_queries=[])) == key(run(db, pgc, q))
    assert key(run(db, pgc, q, extra_queries=None)) == key(run(db, pgc, q))


def test_explain_shows_every_querys_subplans_under_the_corpus_predicate(db, pgc, queries):
    q = queries
    rows = db.execute(
        "SELECT source, branch, query, sql, params::text FROM corpus.corpus_explain(%s, %s::vector, %s, "
        "extra_queries => %s::jsonb)",
        [EXT, pgc.vec_text(q["vec"]), q["text"], json.dumps(q["extra"])]).fetchall()
    seen = {(r[0], r[1], r[2]) for r in rows}
    for source in ("chunks", "halachot"):
        assert {(source, "semantic", "original"), (source, "lexical", "original"), (source, "semantic", "rewrite"),
                (source, "lexical", "rewrite"), (source, "semantic", "extra_2")} <= seen, seen
    assert (("chunks", "lexical", "extra_2")) not in seen, "a vector-only query runs no lexical branch"
    for source, branch, query, sql, params in rows:
        assert "source_kind" in sql and "external_upload" in params, (source, branch, query)
        assert "internal_committee" not in sql + params


BAD = [
    ('{"text": "x"}', "22023", "must be a JSON array"),
    ('[{"text": "x", "weight": 0}]', "22023", "weight"),
    ('[{"text": "x", "weight": 1000}]', "22023", "weight"),
    ('[{"text": "x", "label": "original"}]', "22023", "reserved"),
    ('[{"text": "x", "colour": "red"}]', "22023", "unknown key"),
    ('[{}]', "22023", "nothing to search for"),
    ('[{"vector": [1, 2, 3]}]', "22000", "dimensions"),
    ('[{"vector": "not an array"}]', "22023", "array of numbers"),
    (json.dumps([{"text": f"q{i}"} for i in range(17)]), "22023", "at most 16"),
]


@pytest.mark.parametrize("extra,state,words", BAD)
def test_bad_extra_queries_are_refused_with_sqlstate_and_hint(db, pgc, queries, extra, state, words):
    with pytest.raises(psycopg.Error) as e:
        run(db, pgc, queries, extra_queries=extra)
    assert e.value.sqlstate == state, e.value
    assert words in e.value.diag.message_primary, e.value.diag.message_primary
    assert e.value.diag.message_hint, "every error has a hint"


def test_a_semantic_search_refuses_a_text_only_extra_query(db, pgc, queries):
    with pytest.raises(psycopg.Error) as e:
        pgc.search(db, EXT, queries["vec"], None, mode="semantic", extra_queries=[{"text": "a rewrite"}])
    assert e.value.sqlstate == "22023" and "a vector" in e.value.diag.message_primary
