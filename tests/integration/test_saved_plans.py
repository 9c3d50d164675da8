"""The search's saved plans: statements are prepared once per backend, yet every
subplan and fetch is planned with its values. A session that searched one corpus many times
(so that PostgreSQL's plan cache would switch a saved statement to a generic plan after five
runs) must still plan another corpus' subplans with that corpus' isolation values: a generic
plan shared by corpora of different sizes read every item of a large table for an empty corpus
(1.7 -> 40 ms, bench/scale.py). Here: many searches of external_precedents, then one of
internal_decisions (the same statements, another isolation value).

auto_explain (with client_min_messages = log) shows every nested statement's plan to the
client: a custom plan carries the values, a generic one `$n` parameters (a ranking through
the corpus_bm25 index, whose one plan serves every slice, is checked for that plan instead).
The session asks for generic plans (plan_cache_mode = force_generic_plan), which is what the
plan cache would choose by itself when the generic plan looks cheaper than the custom ones it
made so far.
"""
import re

import numpy as np
import pytest

SEED = 1515


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_saved_plans")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED))
    return conn


def plans_of(conn, sql, params):
    """The plans auto_explain reports for the nested statements of one call."""
    seen = []
    conn.add_notice_handler(lambda d: seen.append(d.message_primary or ""))
    conn.execute("LOAD 'auto_explain'")
    conn.execute("SET auto_explain.log_min_duration = 0")
    conn.execute("SET auto_explain.log_nested_statements = on")
    conn.execute("SET client_min_messages = log")
    try:
        conn.execute(sql, params).fetchall()
    finally:
        conn.execute("RESET client_min_messages")
        conn.execute("SET auto_explain.log_min_duration = -1")
    return [m for m in seen if "Query Text:" in m]


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "lexical"])
def test_subplans_are_planned_with_their_values_after_many_runs(db, pgc, mode, cluster):
    conn = cluster.connect("pgc_saved_plans")
    conn.execute("SET plan_cache_mode = force_generic_plan")
    rng = np.random.default_rng(SEED)
    words = "contract lease appeal"
    for _ in range(12):
        q = pgc.vec_text(pgc.random_unit_vectors(rng, 1, pgc.DIM)[0])
        pgc.search(conn, "external_precedents", q, words, mode=mode)
    q = pgc.vec_text(pgc.random_unit_vectors(rng, 1, pgc.DIM)[0])
    sql, params = pgc.search_sql(corpus="internal_decisions", query_vec=q, query_text=words, mode=mode)
    plans = plans_of(conn, sql, params)
    # the subplans (and fetches) join case_law; their plan lines (Filter:, Index Cond:, ...)
    # carry the isolation value in a custom plan, a $n parameter in a generic one
    subplans = [p for p in plans if '"case_law"' in p]
    assert len(subplans) >= (2 if mode != "hybrid" else 4), plans
    for p in subplans:
        lines = [l for l in p.splitlines() if re.search(r"(Filter|Cond):", l)]
        if "OPERATOR(corpus.<@>)" in p:
            # a ranking through the corpus_bm25 index has one plan for every slice (sorting
            # off): the index's order, the parents looked up by key in a nested loop
            steps = [l.strip() for l in p.splitlines() if "->" in l or l.startswith("Limit")]
            assert any("Nested Loop" in l for l in steps), p
            assert any(re.search(r"Index Scan using \w+_bm25_idx", l) for l in steps), p
            assert not any(re.match(r"(-> +)?Sort\b", l) for l in steps), p
            # kept, not planned again: the generic plan, its isolation value a parameter
            assert any(re.search(r"source_kind = \$\d+", l) for l in lines), p
            continue
        assert not any(re.search(r"source_kind = \$\d+", l) for l in lines), \
            f"a subplan was planned without its isolation value:\n{p}"
        assert any("internal_committee" in l for l in lines), f"the value is in the plan:\n{p}"
