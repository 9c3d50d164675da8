"""Multi-query fusion (`extra_queries`) against PostgreSQL: explain shows every query's
subplans under the corpus predicate, and bad extra queries reach the client with their SQLSTATE
and a hint. The ranking rules (RRF over every query's lists with their weights, provenance in
`query_ranks`, the original query always fused) are the core's tests in engine/fuse.rs.
Isolation under extra queries is test_leak_regression's extra_queries cases.
"""
import json

import numpy as np
import psycopg
import pytest

SEED = 4410
EXT = "external_precedents"


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
