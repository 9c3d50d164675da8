"""corpus_tune and the corpus ranking settings it writes.

Synthetic gold sets where the best setting is known: each document holds three words of its
own, its query is those words, and its query vector is either the opposite of the document's
(the lexical branch is right, the semantic one ranks the document last, beyond any window the tuner tries: the tuner must weigh the lexical branch more, with a
significant cross-validated gain) or the document's own vector (both branches are right:
nothing to gain, nothing applied). Applying writes the settings through corpus_alter, where
corpus_list shows them and searches use them; reverting leaves the catalog as it was.
"""
import json

import numpy as np
import psycopg
import pytest

N_DOCS = 2400
N_QUERIES = 60
DIM = 8


def vec(v):
    return "[" + ",".join(f"{x:.6f}" for x in v) + "]"


@pytest.fixture(scope="module")
def db(cluster):
    conn = cluster.create_db("tune")
    rng = np.random.default_rng(11)
    docs = rng.normal(size=(N_DOCS, DIM))
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    conn.execute("""
        CREATE TABLE t_parents (id bigint PRIMARY KEY, kind text NOT NULL, title text NOT NULL);
        CREATE TABLE t_docs (id bigint PRIMARY KEY, parent_id bigint NOT NULL REFERENCES t_parents,
                             body text NOT NULL,
                             tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
                             emb vector(8))""")
    filler = "the court held that the appeal concerning the permit and the conditions was decided"
    with conn.cursor() as cur:
        for i in range(N_DOCS):
            kind = "lex" if i % 2 == 0 else "both"
            cur.execute("INSERT INTO t_parents VALUES (%s, %s, %s)", (i, kind, f"doc {i}"))
            body = f"{filler} k{i}a k{i}b k{i}c {filler}"
            cur.execute("INSERT INTO t_docs VALUES (%s, %s, %s, DEFAULT, %s::vector)", (i, i, body, vec(docs[i])))
    for corpus in ("lex", "both"):
        conn.execute("SELECT corpus.corpus_create(%s, isolation => %s::jsonb)",
                     (f"tune_{corpus}", json.dumps({"kind": corpus})))
        conn.execute("""SELECT corpus.corpus_add_source(%s, 'docs', 't_docs', text_column => 'body',
                            tsv_column => 'tsv', embedding_column => 'emb', parent_table => 't_parents',
                            parent_fk => 'parent_id', min_length => 10)""", (f"tune_{corpus}",))
        conn.execute("SELECT corpus.corpus_gold_set_create(%s, %s)", (f"gold_{corpus}", f"tune_{corpus}"))
    conn.execute("CREATE INDEX ON t_docs USING gin (tsv)")
    for q in range(N_QUERIES):
        # the highest ids: a tie in the fused score goes to the lower id, never to the relevant one
        lex_doc, both_doc = N_DOCS - 2 - 2 * q, N_DOCS - 1 - 2 * q
        conn.execute("INSERT INTO corpus.gold_queries (gold_set, query_id, query_text, query_vec) "
                     "VALUES ('gold_lex', %s, %s, %s::vector), ('gold_both', %s, %s, %s::vector)",
                     (f"q{q}", f"k{lex_doc}a k{lex_doc}b k{lex_doc}c", vec(-docs[lex_doc]),
                      f"q{q}", f"k{both_doc}a k{both_doc}b", vec(docs[both_doc])))
        conn.execute("INSERT INTO corpus.gold_judgments (gold_set, query_id, target, grade) "
                     "VALUES ('gold_lex', %s, %s, 1), ('gold_both', %s, %s, 1)",
                     (f"q{q}", str(lex_doc), f"q{q}", str(both_doc)))
    conn.execute("SELECT corpus.corpus_refresh_lexical_stats()")
    yield conn
    conn.close()


def listed(db, corpus):
    return db.execute("SELECT to_jsonb(l) FROM corpus.corpus_list() l WHERE name = %s", [corpus]).fetchone()[0]


def tune(db, corpus, gold, **kw):
    args = ", ".join(f"{k} => %({k})s" for k in kw)
    row = db.execute(f"SELECT * FROM corpus.corpus_tune(%(corpus)s, %(gold)s{', ' + args if args else ''})",
                     {"corpus": corpus, "gold": gold, **kw}).fetchone()
    cols = ["run_id", "queries", "folds", "baseline_ndcg", "tuned_ndcg", "gain", "p_value", "significant",
            "applied", "settings", "previous"]
    return dict(zip(cols, row))


def ids(db, corpus, query_vec, query_text, **kw):
    extra = "".join(f", {k} => %({k})s" for k in kw)
    return [r[0] for r in db.execute(
        f"SELECT item_id FROM corpus.corpus_hybrid_search(%(c)s, %(v)s::vector, %(t)s{extra})",
        {"c": corpus, "v": query_vec, "t": query_text, **kw})]


def test_the_tuner_finds_the_branch_that_is_right_and_changes_nothing_unasked(db):
    before = listed(db, "tune_lex")
    r = tune(db, "tune_lex", "gold_lex", folds=3, seed=5)
    assert r["queries"] == N_QUERIES and r["folds"] == 3
    assert r["tuned_ndcg"] > r["baseline_ndcg"] + 0.05, r
    assert r["significant"] and r["p_value"] < 0.01, r
    assert not r["applied"]
    w = r["settings"]["weights"]["docs"]
    assert w["lexical"] > w["semantic"], r["settings"]
    assert listed(db, "tune_lex") == before, "a tuning without apply changes nothing"
    # the stored run: its folds partition the queries, each with its own settings
    folds, stored = db.execute("SELECT fold_settings, tuned_ndcg FROM corpus.tune_runs WHERE id = %s",
                               [r["run_id"]]).fetchone()
    assert stored == r["tuned_ndcg"]
    queries = [q for f in folds for q in f["queries"]]
    assert sorted(queries) == sorted(f"q{q}" for q in range(N_QUERIES))
    assert all(f["settings"]["weights"]["docs"]["lexical"] > f["settings"]["weights"]["docs"]["semantic"]
               for f in folds)
    # the same seed gives the same folds and figures
    again = tune(db, "tune_lex", "gold_lex", folds=3, seed=5)
    assert (again["tuned_ndcg"], again["settings"]) == (r["tuned_ndcg"], r["settings"])


def test_applying_then_reverting_leaves_the_catalog_as_it_was(db):
    before = listed(db, "tune_lex")
    baseline = db.execute("SELECT ndcg_at_k FROM corpus.corpus_evaluate('gold_lex', modes => '{hybrid}', "
                          "store => false)").fetchone()[0]
    r = tune(db, "tune_lex", "gold_lex", folds=3, apply=True)
    assert r["applied"]
    after = listed(db, "tune_lex")
    s = r["settings"]
    assert after["ranking"] == {k: v for k, v in s.items() if k != "weights"}
    source = after["sources"][0]
    assert (source["semantic_weight"], source["lexical_weight"]) == \
        (s["weights"]["docs"]["semantic"], s["weights"]["docs"]["lexical"])
    # searches and evaluations now use them by default
    tuned = db.execute("SELECT ndcg_at_k FROM corpus.corpus_evaluate('gold_lex', modes => '{hybrid}', "
                       "store => false)").fetchone()[0]
    assert tuned > baseline + 0.05, (baseline, tuned)
    run = db.execute("SELECT id FROM corpus.tune_runs WHERE applied ORDER BY id DESC LIMIT 1").fetchone()[0]
    assert db.execute("SELECT corpus.corpus_tune_revert('tune_lex')").fetchone()[0] == run
    assert listed(db, "tune_lex") == before
    assert db.execute("SELECT reverted_at IS NOT NULL FROM corpus.tune_runs WHERE id = %s", [run]).fetchone()[0]
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as e:
        db.execute("SELECT corpus.corpus_tune_revert('tune_lex')")
    assert e.value.diag.message_hint


def test_the_budget_bounds_the_queries_captured(db):
    r = tune(db, "tune_lex", "gold_lex", folds=3, budget_seconds=0.05)
    assert 3 <= r["queries"] < N_QUERIES, r
    folds = db.execute("SELECT fold_settings FROM corpus.tune_runs WHERE id = %s", [r["run_id"]]).fetchone()[0]
    assert sum(len(f["queries"]) for f in folds) == r["queries"]


def test_no_significant_gain_is_never_applied(db):
    before = listed(db, "tune_both")
    r = tune(db, "tune_both", "gold_both", folds=3, apply=True)
    assert r["baseline_ndcg"] > 0.95, r
    assert not r["significant"] and not r["applied"], r
    assert listed(db, "tune_both") == before


def test_the_corpus_ranking_settings_are_the_defaults_of_its_searches(db):
    q = db.execute("SELECT query_vec::text, query_text FROM corpus.gold_queries "
                   "WHERE gold_set = 'gold_lex' AND query_id = 'q3'").fetchone()
    plain = ids(db, "tune_lex", *q)
    explicit = ids(db, "tune_lex", *q, rrf_k=1, candidates=80)
    db.execute("""SELECT corpus.corpus_alter('tune_lex', ranking => '{"rrf_k": 1, "window": 80}')""")
    try:
        assert listed(db, "tune_lex")["ranking"] == {"rrf_k": 1, "window": 80}
        assert ids(db, "tune_lex", *q) == explicit
        assert ids(db, "tune_lex", *q, rrf_k=20, candidates=40) == plain, "the call's arguments win"
        # a key given as null goes back to the default; keys not given stay
        db.execute("""SELECT corpus.corpus_alter('tune_lex', ranking => '{"rrf_k": null}')""")
        assert listed(db, "tune_lex")["ranking"] == {"window": 80}
        # feedback from the corpus' settings is the call's feedback => true with those parameters
        fed = ids(db, "tune_lex", *q, feedback=True)
        db.execute("""SELECT corpus.corpus_alter('tune_lex', ranking => '{"feedback": true}')""")
        assert ids(db, "tune_lex", *q) == fed
        assert ids(db, "tune_lex", *q, feedback=False) == \
            ids(db, "tune_lex", *q, rrf_k=20, candidates=80, feedback=False)
        db.execute("""SELECT corpus.corpus_alter('tune_lex', ranking => '{"feedback_beta": 2, "feedback_terms": 5}')""")
        assert listed(db, "tune_lex")["ranking"] == {"window": 80, "feedback": True, "feedback_beta": 2,
                                                     "feedback_terms": 5}
        assert len(ids(db, "tune_lex", *q)) == 10
    finally:
        db.execute("""SELECT corpus.corpus_alter('tune_lex', ranking => '{"rrf_k": null, "window": null,
                      "feedback": null, "feedback_beta": null, "feedback_terms": null}')""")
    assert listed(db, "tune_lex")["ranking"] == {}
    assert ids(db, "tune_lex", *q) == plain


@pytest.mark.parametrize("sql,state", [
    ("SELECT corpus.corpus_alter('tune_lex', ranking => '{\"rrf_k\": -1}')", "22023"),
    ("SELECT corpus.corpus_alter('tune_lex', ranking => '{\"windows\": 10}')", "22023"),
    ("SELECT corpus.corpus_alter('tune_lex', ranking => '[]')", "22023"),
    ("SELECT corpus.corpus_alter('tune_lex', ranking => '{\"feedback_alpha\": 2}')", "22023"),
    ("SELECT corpus.corpus_alter('tune_lex', ranking => '{\"feedback_terms\": 0}')", "22023"),
    ("SELECT corpus.corpus_alter('tune_lex', ranking => '{\"weights\": {\"nope\": {\"lexical\": 2}}}')", "42704"),
    ("SELECT corpus.corpus_alter('tune_lex', ranking => '{\"weights\": {\"docs\": {\"lexical\": -2}}}')", "22023"),
    ("SELECT * FROM corpus.corpus_tune('tune_lex', 'gold_lex', folds => 1)", "22023"),
    ("SELECT * FROM corpus.corpus_tune('tune_lex', 'gold_lex', budget_seconds => 0)", "22023"),
    ("SELECT * FROM corpus.corpus_tune('tune_lex', 'gold_lex', alpha => 1)", "22023"),
    ("SELECT * FROM corpus.corpus_tune('tune_lex', 'gold_both')", "22023"),
    ("SELECT * FROM corpus.corpus_tune('tune_lex', 'no_such_gold')", "42704"),
    ("SELECT * FROM corpus.corpus_tune('tune_lex', 'gold_lex', folds => 21)", "22023"),
    ("SELECT corpus.corpus_tune_revert('no_such_corpus')", "55000"),
])
def test_bad_settings_and_arguments_are_refused_and_change_nothing(db, sql, state):
    before = listed(db, "tune_lex")
    with pytest.raises(psycopg.Error) as e:
        db.execute(sql)
    assert e.value.sqlstate == state, (e.value.sqlstate, e.value.diag.message_primary)
    assert e.value.diag.message_hint
    assert listed(db, "tune_lex") == before
