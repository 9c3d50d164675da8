"""BM25 champion lists (corpus.lexical_champions): a query made only of common keys takes its
candidates from the heads of the keys' champion lists, never from posting lists that hold most
of the corpus.

Two corpora share one table (`kind` a and b). Every document holds "alpha" and most hold
"beta", so both keys are in more documents than CHAMPION_LIST_LEN (1000) and every query of
them is all-common. The lists are recomputed here in Python from the generated text (the
`simple` analyser: one key per word) and compared with what the refresh wrote.
"""
import json
import math
import re

import numpy as np
import pytest

LIST_LEN = 1000  # crates/pg_corpus_core/src/lexical.rs CHAMPION_LIST_LEN
K1, B = 1.2, 0.75
ROLE = "corpus_champion_reader"
N_A, N_B = 2400, 1300
FILLER = ["lorem", "ipsum", "dolor", "sitam", "consec", "adipis", "elitse", "doeius", "tempor",
          "incidi", "utlabo", "magnal", "aliqua", "enimad", "minimv", "veniam", "quisno",
          "exerci", "ullamc", "laboris"]


def generate():
    rng = np.random.default_rng(7)
    rows = []
    for i in range(1, N_A + N_B + 1):
        kind = 1 if i <= N_A else 2
        words = ["alpha"] * int(rng.integers(1, 5))
        if rng.random() < 0.9:
            words += ["beta"] * int(rng.integers(1, 4))
        if kind == 2:
            words += ["alpha"] * 6  # corpus b's documents would top every list of a's
        words += [FILLER[j] for j in rng.integers(0, len(FILLER), int(rng.integers(3, 60)))]
        rng.shuffle(words)
        rows.append((i, kind, " ".join(words)))
    return rows


def load(db, rows):
    db.execute("""
        CREATE TABLE kinds (id int PRIMARY KEY, kind text NOT NULL);
        CREATE TABLE docs (
            id int PRIMARY KEY,
            kind_id int NOT NULL REFERENCES kinds (id),
            body text NOT NULL,
            emb vector(2),
            body_bm25 tsvector GENERATED ALWAYS AS (corpus.bm25_document(body, 'simple')) STORED);
        CREATE INDEX ON docs USING gin (body_bm25);
        CREATE INDEX ON docs (kind_id);
        INSERT INTO kinds VALUES (1, 'a'), (2, 'b');""")
    with db.cursor().copy("COPY docs (id, kind_id, body, emb) FROM STDIN") as cp:
        for i, kind, body in rows:
            cp.write_row((i, kind, body, "[1,0]"))
    db.execute("ANALYZE docs")
    for corpus, kind in (("ca", "a"), ("cb", "b")):
        db.execute("SELECT corpus.corpus_create(%s, isolation => jsonb_build_object('kind', %s::text))",
                   [corpus, kind])
        db.execute("""SELECT corpus.corpus_add_source(%s, 'docs', 'docs', text_column => 'body',
                        embedding_column => 'emb', tsv_column => 'body_bm25', language => 'simple',
                        parent_table => 'kinds', parent_fk => 'kind_id', min_length => 1)""", [corpus])


def expected_lists(rows, kind):
    """Per common key: the corpus' items of highest tf-norm, best first, ids as text breaking
    ties (the refresh orders by the text id)."""
    docs = [(str(i), body.split()) for i, k, body in rows if k == kind]
    avg = sum(len(w) for _, w in docs) / len(docs)
    df = {}
    for _, words in docs:
        for w in set(words):
            df[w] = df.get(w, 0) + 1
    out = {}
    for term, n in df.items():
        if n <= LIST_LEN:
            continue
        weighted = []
        for item, words in docs:
            tf = float(words.count(term))
            if tf:
                rel = len(words) / avg
                weighted.append((-(tf * (K1 + 1) / (tf + K1 * (1 - B + B * rel))), item))
        out[term] = [(item, -w) for w, item in sorted(weighted)[:LIST_LEN]]
    return out


@pytest.fixture(scope="module")
def data():
    return generate()


@pytest.fixture(scope="module")
def db(cluster, data):
    conn = cluster.create_db("pg_corpus_champions")
    load(conn, data)
    return conn


def lists(db, corpus):
    return dict(db.execute("SELECT term, items FROM corpus.lexical_champions WHERE corpus = %s",
                           [corpus]).fetchall())


def impacts(db, corpus):
    return dict(db.execute("SELECT term, impacts FROM corpus.lexical_champions WHERE corpus = %s",
                           [corpus]).fetchall())


def test_lists_hold_each_corpus_best_items_by_bm25_term_weight(db, data):
    for corpus, kind in (("ca", 1), ("cb", 2)):
        want = expected_lists(data, kind)
        got, weights = lists(db, corpus), impacts(db, corpus)
        assert set(got) == set(want), (corpus, sorted(got), sorted(want))
        assert set(want) >= {"alpha"}, "the data must make alpha common"
        for term in want:
            assert got[term] == [i for i, _ in want[term]], (corpus, term)
            assert weights[term] == pytest.approx([w for _, w in want[term]], rel=1e-12)
    # isolation: corpus b's items (ids above N_A) outrank a's for alpha, yet never enter a's list
    assert all(int(i) <= N_A for items in lists(db, "ca").values() for i in items)
    assert all(int(i) > N_A for items in lists(db, "cb").values() for i in items)


def explain_subplan(db, corpus, text, settings=()):
    row = db.execute("SELECT sql, params FROM corpus.corpus_explain(%s, NULL, %s, mode => 'lexical')",
                     [corpus, text]).fetchone()
    sql, params = row
    body = "\n".join(line for line in sql.splitlines() if not line.startswith("SET LOCAL "))
    body = re.sub(r"\$(\d+)", r"%(p\1)s", body.replace("%", "%%"))
    values = {f"p{i + 1}": v for i, v in enumerate(params)}
    with db.transaction():
        for name, value in settings:
            db.execute(f"SET LOCAL {name} = {value}")
        doc = db.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {body}", values, prepare=False).fetchone()[0]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    return sql, doc[0]["Plan"]


def nodes(plan):
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def test_an_all_common_query_reads_list_heads_not_posting_lists(db):
    sql, plan = explain_subplan(db, "ca", "alpha beta")
    assert '"id" = ANY(' in sql and "@@" not in sql, sql
    scans = [n for n in nodes(plan) if n.get("Relation Name") == "docs"]
    assert scans and all(n["Node Type"] != "Seq Scan" for n in scans), plan
    # budget 2000 over two keys: the first 1000 items of each list at most, of which only
    # those whose bounds can reach the window (40) are read
    read = sum(n["Actual Rows"] for n in scans)
    assert 40 <= read < LIST_LEN, plan
    # the exhaustive plan (every key through the index) reads every document of the corpus
    db.execute("SET pg_corpus.bm25_candidate_budget = 1000000000")
    try:
        full_sql, full = explain_subplan(db, "ca", "alpha beta")
    finally:
        db.execute("RESET pg_corpus.bm25_candidate_budget")
    assert "lexical_champions" not in full_sql
    assert sum(n["Actual Rows"] for n in nodes(full) if n.get("Relation Name") == "docs") >= N_A


def lexical(db, corpus, text, k=10, budget=None):
    if budget:
        db.execute(f"SET pg_corpus.bm25_candidate_budget = {budget}")
    try:
        return db.execute(
            "SELECT item_id, lexical_score FROM corpus.corpus_hybrid_search(%s, NULL, %s, k => %s, "
            "mode => 'lexical', max_per_parent => 0)", [corpus, text, k]).fetchall()
    finally:
        db.execute("RESET pg_corpus.bm25_candidate_budget")


def test_list_heads_find_the_exact_bm25_top_k(db):
    for corpus in ("ca", "cb"):
        for text in ("alpha beta", "alpha", "beta alpha alpha"):
            got = lexical(db, corpus, text)
            exact = lexical(db, corpus, text, budget=10 ** 9)
            assert len(got) == 10 and len(exact) == 10
            # a document's score does not depend on how it was found
            exact_scores = dict(exact)
            assert all(math.isclose(s, exact_scores.get(i, s), rel_tol=1e-9) for i, s in got)
            # the top 10 by score (ties at the cut may differ in which ids they keep)
            assert [round(s, 9) for _, s in got] == [round(s, 9) for _, s in exact], (corpus, text)


def test_lists_follow_the_refresh(db):
    db.execute("INSERT INTO docs (id, kind_id, body, emb) VALUES "
               "(100001, 1, 'alpha alpha alpha alpha alpha beta beta beta beta', '[1,0]')")
    try:
        # until the next refresh an all-common query does not find the new item ...
        assert "100001" not in [i for i, _ in lexical(db, "ca", "alpha beta")]
        db.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats('ca')")
        assert lexical(db, "ca", "alpha beta")[0][0] == "100001"
        assert lists(db, "ca")["alpha"][0] == "100001"
        # a deleted item is never served, listed or not
        db.execute("DELETE FROM docs WHERE id = 100001")
        assert "100001" not in [i for i, _ in lexical(db, "ca", "alpha beta")]
    finally:
        db.execute("DELETE FROM docs WHERE id = 100001")
        db.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats('ca')")


def test_the_corpus_predicate_is_checked_after_ranking_only_where_it_pays(db):
    """Corpus a holds 65% of the table: its GIN candidates are scored before the predicate is
    checked by id, in rank order, until the window is full (lexical::scope_check). Corpus b's
    documents matching a rare key outscore a's and are ranked first, yet never returned; corpus
    b (35%) joins its candidates' parents before scoring instead, the index scan first."""
    rare = [(200001 + j, 2, "zeta " * 8 + "lorem ipsum") for j in range(30)]
    rare += [(200101 + j, 1, f"zeta alpha {'ipsum ' * (j % 5)}dolor") for j in range(15)]
    try:
        with db.cursor().copy("COPY docs (id, kind_id, body, emb) FROM STDIN") as cp:
            for row in rare:
                cp.write_row((*row, "[1,0]"))
        db.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats()")
        sql_a = explain_subplan(db, "ca", "zeta alpha")[0]
        assert "@@" in sql_a and "WHERE EXISTS (SELECT 1" in sql_a, sql_a
        sql_b = explain_subplan(db, "cb", "zeta alpha")[0]
        assert "@@" in sql_b and "WHERE EXISTS (SELECT 1" not in sql_b, sql_b
        # zeta and alpha fit the budget together: 1,360 documents of b, about 3,800 rows of the
        # table, more than b's 1,330 items; with a budget of 100 zeta alone finds candidates (30
        # of b's documents, about 80 rows) and the index scan comes first
        # (lexical::ScopeCheck::JoinedAfterIndex)
        assert "enable_nestloop" not in sql_a and "enable_nestloop" not in sql_b, sql_b
        db.execute("SET pg_corpus.bm25_candidate_budget = 100")
        try:
            sql_small = explain_subplan(db, "cb", "zeta alpha")[0]
        finally:
            db.execute("RESET pg_corpus.bm25_candidate_budget")
        assert "SET LOCAL enable_nestloop = off;" in sql_small and "WHERE EXISTS" not in sql_small
        # b's 30 documents outrank every one of a's 15 for "zeta" (8 occurrences against 1)
        got = [int(i) for i, _ in lexical(db, "ca", "zeta alpha", k=20)]
        assert len(got) == 20 and set(range(200101, 200116)) <= set(got), got
        assert all(i <= N_A or 200101 <= i <= 200115 for i in got), got
        # the same top scores as the exhaustive plan (every key finds candidates)
        exact = dict(lexical(db, "ca", "zeta alpha", k=20, budget=10 ** 9))
        scored = lexical(db, "ca", "zeta alpha", k=20)
        assert [round(s, 9) for _, s in scored] == [round(s, 9) for s in sorted(exact.values(), reverse=True)]
        got_b = lexical(db, "cb", "zeta", k=40)
        assert sorted(int(i) for i, _ in got_b) == [200001 + j for j in range(30)]
    finally:
        db.execute("DELETE FROM docs WHERE id > 200000")
        db.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats()")


def test_rare_keys_in_fewer_than_k_documents_take_the_common_keys_list_heads(db):
    """'omega' is in 3 of corpus a's documents, fewer than the 10 rows asked for: instead of
    widening until 'alpha' fits the budget (every document of the corpus), the plan adds the
    head of alpha's champion list (lexical::candidate_plan with k), and the top 10 is exact."""
    try:
        db.execute("INSERT INTO docs (id, kind_id, body, emb) VALUES "
                   "(300001, 1, 'omega alpha lorem', '[1,0]'), (300002, 1, 'omega ipsum', '[1,0]'), "
                   "(300003, 1, 'omega omega dolor', '[1,0]'), (300004, 2, 'omega alpha', '[1,0]')")
        db.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats()")
        sql, plan = explain_subplan(db, "ca", "omega alpha")
        assert "@@" in sql and '"id" = ANY(' in sql, sql
        read = sum(n["Actual Rows"] for n in nodes(plan) if n.get("Relation Name") == "docs")
        assert read <= LIST_LEN + 40, plan   # alpha's head and omega's documents, not all of a's
        got = lexical(db, "ca", "omega alpha")
        exact = lexical(db, "ca", "omega alpha", budget=10 ** 9)
        assert len(got) == 10 and {i for i, _ in got[:3]} == {"300001", "300002", "300003"}, got
        assert [round(s, 9) for _, s in got] == [round(s, 9) for _, s in exact]
    finally:
        db.execute("DELETE FROM docs WHERE id > 300000")
        db.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats()")


def visible(db, role):
    with db.transaction():
        db.execute(f"SET LOCAL ROLE {role}")
        return db.execute("SELECT count(*) FROM corpus.lexical_champions").fetchone()[0]


def test_lists_are_read_only_by_readers_of_the_items(db, role):
    """A list says which items hold a word: only a role that may read the item ids and their
    index terms sees it (row-level security); nobody but the owner writes it."""
    total = db.execute("SELECT count(*) FROM corpus.lexical_champions").fetchone()[0]
    assert total >= 2
    assert visible(db, role) == 0
    db.execute(f"GRANT SELECT (id, body) ON docs TO {role}")
    assert visible(db, role) == 0, "the ids without the index terms"
    db.execute(f"GRANT SELECT (body_bm25) ON docs TO {role}")
    assert visible(db, role) == total
    db.execute(f"REVOKE SELECT ON docs FROM {role}")
    db.execute(f"GRANT SELECT ON docs, kinds TO {role}")
    assert visible(db, role) == total
    # the role's own search uses the lists
    with db.transaction():
        db.execute(f"SET LOCAL ROLE {role}")
        got = db.execute("SELECT count(*) FROM corpus.corpus_hybrid_search('ca', NULL, 'alpha beta', "
                         "mode => 'lexical', max_per_parent => 0)").fetchone()[0]
        assert got == 10
        with pytest.raises(Exception) as e:
            db.execute("DELETE FROM corpus.lexical_champions")
        assert e.value.sqlstate == "42501"


def test_dropping_a_source_drops_its_lists(cluster, data):
    db = cluster.create_db("pg_corpus_champions_drop")
    load(db, data[:1500])
    assert lists(db, "ca")
    db.execute("SELECT corpus.corpus_drop_source('ca', 'docs')")
    assert not lists(db, "ca")
    db.execute("SELECT corpus.corpus_drop('ca')")
    assert db.execute("SELECT count(*) FROM corpus.lexical_champions WHERE corpus = 'ca'").fetchone()[0] == 0
