"""Must-include classes and citation-graph expansion, on the legal schema.

Planted: an external chunk E (the query's best match in both branches) that cites, through the
`citations` edge table, an external halacha H_EXT (far from the query, sharing none of its words:
only the edge can bring it in) and an internal halacha H_INT — the best match of the query in
the whole shared table, in both branches. H_INT is what a leak would return: linked by an edge
from an external hit, and of every must-include class the tests declare. An external search
must never return it, whatever the options; the internal corpus finds it (positive control).
How class hits take their rows and which seeds expansion asks about are the core's rules
(engine/must_include.rs, engine/expand.rs).
"""
import itertools

import numpy as np
import psycopg
import pytest
from psycopg.types.json import Jsonb

SEED = 5757
EXT, INT = "external_precedents", "internal_decisions"
E_CHUNK, H_EXT, H_INT, E_CHUNK2 = 95101, 95002, 95001, 95102
INT_CASE, EXT_CASE = 9501, 9502
WORDS = ("qorvaxel", "zimbtrak")
COURT = "בית המשפט העליון"


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_result_side")
    data = pgc.generate_legal_data(SEED, n_cases=60, n_documents=6)
    rng = np.random.default_rng(SEED)
    tg = pgc.TextGen(SEED + 1)
    q = pgc.random_unit_vectors(rng, 1, pgc.DIM)[0]
    far = pgc.random_unit_vectors(rng, 2, pgc.DIM)
    data["case_law"] += [
        dict(id=INT_CASE, case_number="ועדה 9501/24", case_name="ועדה נ' פלוני", court=COURT,
             source_kind="internal_committee", practice_area="planning", headnote=tg.text(10, 12),
             summary=tg.text(10, 12), tags=[]),
        dict(id=EXT_CASE, case_number='עע"מ 9502/24', case_name="פלוני נ' אלמוני", court=COURT,
             source_kind="external_upload", practice_area="planning", headnote=tg.text(10, 12),
             summary=tg.text(10, 12), tags=[]),
    ]
    text = f"{WORDS[0]} {tg.text(12, 14)} {WORDS[1]}"
    data["precedent_chunks"] += [
        dict(id=E_CHUNK, case_law_id=EXT_CASE, chunk_index=1, page_number=1, content=text, embedding=q),
        dict(id=E_CHUNK2, case_law_id=EXT_CASE, chunk_index=2, page_number=2, content=tg.text(14, 16),
             embedding=far[1]),
    ]
    data["halachot"] += [
        dict(id=H_INT, case_law_id=INT_CASE, rule=f"{WORDS[1]} {text} {WORDS[0]}", supporting_quote=tg.text(6, 8),
             page_number=3, review_status="approved", embedding=q),
        dict(id=H_EXT, case_law_id=EXT_CASE, rule=tg.text(14, 16), supporting_quote=tg.text(6, 8),
             page_number=4, review_status="approved", embedding=far[0]),
    ]
    pgc.load_legal(conn, data)
    conn.execute("CREATE TABLE citations (citing bigint NOT NULL, cited bigint NOT NULL, PRIMARY KEY (citing, cited))")
    conn.execute("INSERT INTO citations VALUES (%s, %s), (%s, %s), (%s, %s)",
                 [E_CHUNK, H_EXT, E_CHUNK, H_INT, E_CHUNK2, H_INT])
    for corpus in (EXT, INT):
        conn.execute("SELECT corpus.corpus_add_edges(%s, 'cites', 'citations', 'chunks', 'citing', 'halachot', 'cited')",
                     [corpus])
    return dict(conn=conn, q=q)


def search(conn, corpus, q, text, **kw):
    args = "".join(f", {k} => %({k})s" for k in kw)
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute(f"SELECT * FROM corpus.corpus_hybrid_search(%(c)s, %(v)s::vector, %(t)s{args}) "
                           "ORDER BY rank", dict(c=corpus, v=q, t=text, **kw)).fetchall()


def kinds(conn, rows):
    ids = [r["parent_id"] for r in rows]
    return dict(conn.execute("SELECT id::text, source_kind FROM case_law WHERE id::text = ANY(%s)", [ids]).fetchall())


def assert_external(conn, rows):
    k = kinds(conn, rows)
    for r in rows:
        assert r["corpus"] == EXT and k[r["parent_id"]] == "external_upload", r
        assert not (r["source"] == "halachot" and r["item_id"] == str(H_INT)), f"leak: {r}"


def vec(db):
    return db["q"].tolist().__str__().replace(" ", "")


def test_expansion_adds_forward_neighbours_of_the_seeds(db):
    conn = db["conn"]
    plain = search(conn, EXT, vec(db), " ".join(WORDS), k=10, max_per_parent=0)
    assert plain[0]["item_id"] == str(E_CHUNK)
    assert str(H_EXT) not in [r["item_id"] for r in plain if r["source"] == "halachot"], "only the edge brings it"
    rows = search(conn, EXT, vec(db), " ".join(WORDS), k=10, max_per_parent=0, expand=True)
    assert_external(conn, rows)
    added = [r for r in rows if r["origin"]]
    assert [(r["source"], r["item_id"]) for r in added] == [("halachot", str(H_EXT))], rows
    g = added[0]["origin"]["graph"]
    assert g == {"edges": "cites", "seed": {"source": "chunks", "item_id": str(E_CHUNK)}, "hop_penalty": 0.05}
    assert added[0]["score"] == pytest.approx(rows[0]["score"] * 0.95)
    # the internal side: the same edge brings nothing new (H_INT is already the top hit)
    own = search(conn, INT, vec(db), " ".join(WORDS), k=10, max_per_parent=0, expand=True)
    assert own[0]["item_id"] == str(H_INT)


def test_reverse_edges_are_not_followed(db):
    conn = db["conn"]
    # H_EXT's own vector: H_EXT is the best seed; the chunk citing it is not pulled in backwards
    v = conn.execute("SELECT embedding::text FROM halachot WHERE id = %s", [H_EXT]).fetchone()[0]
    rows = search(conn, EXT, v, None, mode="semantic", k=5, max_per_parent=0, expand=True)
    assert rows[0]["item_id"] == str(H_EXT)
    assert not any(r["origin"] for r in rows), rows


@pytest.mark.parametrize("mode,opts", list(itertools.product(
    ["semantic", "lexical", "hybrid"],
    [{}, {"k": 30, "max_per_parent": 0}, {"candidates": 5, "k": 5}])))
def test_no_edge_and_no_class_leaks_across_corpora(db, mode, opts):
    conn = db["conn"]
    conn.execute("SELECT corpus.corpus_alter(%s, must_include => %s)",
                 [EXT, Jsonb([{"name": "rules", "source": "halachot", "top": 3},
                              {"name": "supreme", "filters": {"court": COURT}, "top": 2}])])
    conn.execute("SELECT corpus.corpus_alter(%s, graph => %s)", [EXT, Jsonb({"seeds": 10, "max_added": 30})])
    try:
        v = vec(db) if mode != "lexical" else None
        t = " ".join(WORDS) if mode != "semantic" else None
        rows = search(conn, EXT, v, t, mode=mode, expand=True, **opts)
        assert rows
        assert_external(conn, rows)
        # the classes did their part: halachot of the external corpus are there
        assert any(r["source"] == "halachot" for r in rows)
    finally:
        conn.execute("SELECT corpus.corpus_alter(%s, must_include => '[]', graph => '{}')", [EXT])
    # positive control: the internal corpus does return the planted halacha
    own = search(conn, INT, vec(db) if mode != "lexical" else None, " ".join(WORDS) if mode != "semantic" else None,
                 mode=mode, **opts)
    assert str(H_INT) in [r["item_id"] for r in own if r["source"] == "halachot"]


@pytest.mark.parametrize("classes,state", [
    ([{"name": "x", "filters": {"source_kind": "internal_committee"}}], "42501"),
    ([{"name": "x", "source": "nope"}], "42704"),
    ([{"name": "x"}], "22023"),
    ([{"name": "x", "source": "halachot", "top": 50}], "22023"),
    ({"name": "x"}, "22023"),
])
def test_bad_classes_are_refused(db, classes, state):
    with pytest.raises(psycopg.Error) as e:
        db["conn"].execute("SELECT corpus.corpus_alter(%s, must_include => %s)", [EXT, Jsonb(classes)])
    assert e.value.sqlstate == state and e.value.diag.message_hint


@pytest.mark.parametrize("call,state", [
    ("SELECT corpus.corpus_add_edges('external_precedents', 'cites', 'citations', 'chunks', 'citing', 'halachot', 'cited')",
     "42710"),
    ("SELECT corpus.corpus_add_edges('external_precedents', 'e2', 'citations', 'chunks', 'nope', 'halachot', 'cited')",
     "42703"),
    ("SELECT corpus.corpus_add_edges('external_precedents', 'e2', 'citations', 'nope', 'citing', 'halachot', 'cited')",
     "42704"),
    ("SELECT corpus.corpus_add_edges('nope', 'e2', 'citations', 'chunks', 'citing', 'halachot', 'cited')", "42704"),
    ("SELECT corpus.corpus_add_edges('external_precedents', 'E 2', 'citations', 'chunks', 'citing', 'halachot', 'cited')",
     "22023"),
    ("SELECT corpus.corpus_drop_edges('external_precedents', 'nope')", "42704"),
    ("SELECT * FROM corpus.corpus_hybrid_search('case_documents', NULL, 'x', filters => '{\"practice_area\": \"tax\"}', "
     "expand => true)", "22023"),
])
def test_bad_edges_are_refused(db, call, state):
    with pytest.raises(psycopg.Error) as e:
        db["conn"].execute(call)
    assert e.value.sqlstate == state and e.value.diag.message_hint


def test_an_edge_column_of_another_type_is_refused(db):
    conn = db["conn"]
    conn.execute("CREATE TABLE IF NOT EXISTS text_citations (citing text, cited bigint)")
    with pytest.raises(psycopg.errors.DatatypeMismatch) as e:
        conn.execute("SELECT corpus.corpus_add_edges('external_precedents', 'e3', 'text_citations', 'chunks', 'citing', "
                     "'halachot', 'cited')")
    assert e.value.diag.message_hint


def test_a_caller_who_may_not_read_the_edge_table_gets_postgres_own_error(db, pgc):
    conn = db["conn"]
    conn.execute("DROP ROLE IF EXISTS pgc_rs_reader")
    conn.execute("CREATE ROLE pgc_rs_reader")
    try:
        conn.execute("GRANT SELECT ON precedent_chunks, halachot, case_law TO pgc_rs_reader")
        conn.execute("SET ROLE pgc_rs_reader")
        try:
            assert search(conn, EXT, vec(db), " ".join(WORDS))
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                search(conn, EXT, vec(db), " ".join(WORDS), expand=True)
        finally:
            conn.execute("RESET ROLE")
    finally:
        pgc.drop_roles(conn, ["pgc_rs_reader"])


def test_a_dropped_edge_table_fails_only_expanding_searches(db):
    conn = db["conn"]
    conn.execute("CREATE TABLE doomed_citations (citing bigint, cited bigint)")
    conn.execute("SELECT corpus.corpus_add_edges(%s, 'doomed', 'doomed_citations', 'chunks', 'citing', 'halachot', "
                 "'cited')", [INT])
    conn.execute("DROP TABLE doomed_citations")
    try:
        assert search(conn, INT, vec(db), " ".join(WORDS)), "a search that does not expand is not concerned"
        with pytest.raises(psycopg.errors.UndefinedTable) as e:
            search(conn, INT, vec(db), " ".join(WORDS), expand=True)
        assert "corpus_drop_edges" in e.value.diag.message_hint
        # a definition change is refused until the edge set is dropped
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT corpus.corpus_alter(%s, description => 'x')", [INT])
    finally:
        conn.execute("SELECT corpus.corpus_drop_edges(%s, 'doomed')", [INT])
    assert search(conn, INT, vec(db), " ".join(WORDS), expand=True)


def test_an_edge_table_must_be_a_table(db):
    conn = db["conn"]
    conn.execute("CREATE SEQUENCE IF NOT EXISTS not_edges")
    with pytest.raises(psycopg.errors.WrongObjectType) as e:
        conn.execute("SELECT corpus.corpus_add_edges(%s, 'seq', 'not_edges', 'chunks', 'last_value', 'halachot', "
                     "'last_value')", [EXT])
    assert e.value.diag.message_hint
