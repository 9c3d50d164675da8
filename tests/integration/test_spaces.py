"""Several embedding spaces in one corpus (page images embedded by a multimodal model,
fused with the text hits). Page images (8-d, space "page_image", weight 0.5) join the legal
corpora next to the 384-d text sources. Which sources a query vector searches, and how a space's
list enters RRF with its weight, are the core's rules (engine/strategy.rs and
engine/tests/similar.rs); here: the page subplan's SQL finds the nearest page by the image
vector, the corpus predicate holds on it like on every other subplan, explain says which
sources have no vector, mistakes are refused at definition and search time, and the health
check audits every space.
"""
import json

import numpy as np
import psycopg
import pytest
from psycopg.types.json import Jsonb

SEED = 8181
EXT, INT = "external_precedents", "internal_decisions"
DIM = 8
PLANTED = 990001      # an internal page whose image IS the query image


def unit(v):
    return v / np.linalg.norm(v)


def vtext(v):
    return "[" + ",".join(f"{x:.6f}" for x in v) + "]"


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_spaces")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=40, n_documents=8))
    rng = np.random.default_rng(SEED)
    conn.execute("""CREATE TABLE page_images (
        id bigint PRIMARY KEY, case_law_id bigint NOT NULL REFERENCES case_law (id), page_number int,
        caption text NOT NULL, caption_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', caption)) STORED,
        embedding vector(8))""")
    cases = conn.execute("SELECT id, source_kind FROM case_law WHERE case_number <> '' AND case_name <> '' "
                         "ORDER BY id").fetchall()
    query = unit(rng.normal(size=DIM))
    rows = []
    for n, (case, kind) in enumerate(cases):
        for page in range(3):
            rows.append((990100 + 3 * n + page, case, page + 1,
                         f"scanned page {page + 1} of the judgment, a signed order with a stamp and a seal",
                         vtext(unit(rng.normal(size=DIM)))))
    internal = next(c for c, k in cases if k == "internal_committee")
    rows.append((PLANTED, internal, 9, "scanned page with the planted stamp zqxwvut of the committee decision",
                 vtext(query)))
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO page_images (id, case_law_id, page_number, caption, embedding) "
                        "VALUES (%s, %s, %s, %s, %s::vector)", rows)
    for corpus in (EXT, INT):
        conn.execute("SELECT corpus.corpus_alter(%s, spaces => %s)",
                     [corpus, Jsonb({"page_image": {"dimensions": DIM, "model": "clip-tiny", "weight": 0.5}})])
        conn.execute("""SELECT corpus.corpus_add_source(%s, 'pages', 'page_images', text_column => 'caption',
                          embedding_column => 'embedding', tsv_column => 'caption_tsv', parent_table => 'case_law',
                          parent_fk => 'case_law_id', parent_required => '{case_number,case_name}',
                          locator => '{"case_number": "parent.case_number", "page": "page_number"}',
                          space => 'page_image')""", [corpus])
    text_vec = conn.execute("SELECT embedding::text FROM precedent_chunks ORDER BY id LIMIT 1").fetchone()[0]
    return dict(conn=conn, image=query, text=text_vec)


def search(db, corpus, qv, text, **kw):
    args = "".join(f", {k} => %({k})s" for k in kw)
    with db.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute(f"SELECT * FROM corpus.corpus_hybrid_search(%(c)s, %(v)s::vector, %(t)s{args})",
                           dict(c=corpus, v=qv, t=text, **kw)).fetchall()


def images(v):
    return Jsonb({"page_image": [float(x) for x in v]})


def test_the_planted_internal_page_never_reaches_an_external_search(db):
    conn = db["conn"]
    for mode in ("semantic", "hybrid"):
        for kw in [dict(k=50, max_per_parent=0), dict(k=10), dict(k=200, max_per_parent=0)]:
            rows = search(conn, EXT, db["text"], "zqxwvut stamp", mode=mode, query_vectors=images(db["image"]), **kw)
            assert str(PLANTED) not in {r["item_id"] for r in rows if r["source"] == "pages"}, (mode, kw)
            kinds = {k for (k,) in conn.execute("SELECT DISTINCT source_kind FROM case_law WHERE id::text = ANY(%s)",
                                                [[r["parent_id"] for r in rows]])}
            assert kinds == {"external_upload"}
    own = search(conn, INT, None, None, mode="semantic", k=5, query_vectors=images(db["image"]))
    assert (own[0]["source"], own[0]["item_id"]) == ("pages", str(PLANTED)), "positive control"
    assert own[0]["semantic_distance"] == pytest.approx(0.0, abs=1e-6)


def test_explain_says_which_sources_have_no_vector(db):
    conn = db["conn"]
    rows = conn.execute("SELECT source, branch, strategy, sql, params::text FROM corpus.corpus_explain(%s, %s::vector, "
                        "'stamp', mode => 'hybrid')", [EXT, db["text"]]).fetchall()
    none = [(r[0], r[1]) for r in rows if r[2] == "no_query_vector"]
    assert none == [("pages", "semantic")]
    rows = conn.execute("SELECT source, branch, strategy, sql, params::text FROM corpus.corpus_explain(%s, %s::vector, "
                        "'stamp', query_vectors => %s)", [EXT, db["text"], images(db["image"])]).fetchall()
    assert ("pages", "semantic") in {(r[0], r[1]) for r in rows if r[2] != "no_query_vector"}
    for source, branch, strategy, sql, params in rows:
        assert "source_kind" in sql and "external_upload" in params, (source, branch)


def test_mistakes_are_refused_at_definition_and_search_time(db):
    conn = db["conn"]
    conn.execute("CREATE TABLE IF NOT EXISTS page_images_16 (id bigint PRIMARY KEY, case_law_id bigint, caption text, "
                 "caption_tsv tsvector, embedding vector(16))")
    for space, state in [("page_image", "42804"), ("audio", "22023"), (None, "42804")]:
        with pytest.raises(psycopg.Error) as e:
            conn.execute("""SELECT corpus.corpus_add_source(%s, 'pages16', 'page_images_16', text_column => 'caption',
                              embedding_column => 'embedding', tsv_column => 'caption_tsv', parent_table => 'case_law',
                              parent_fk => 'case_law_id', space => %s)""", [EXT, space])
        assert e.value.sqlstate == state and e.value.diag.message_hint, (space, e.value)
    assert conn.execute("SELECT count(*) FROM corpus.sources WHERE name = 'pages16'").fetchone()[0] == 0
    for spaces in [{"page_image": {"dimensions": 16}}, {"page_image": {}}, {"bad name": {"dimensions": 8}}]:
        with pytest.raises(psycopg.Error) as e:
            conn.execute("SELECT corpus.corpus_alter(%s, spaces => %s)", [EXT, Jsonb(spaces)])
        assert e.value.sqlstate in ("22023", "42804") and e.value.diag.message_hint, spaces
    for qv, state in [({"page_image": [1.0, 2.0]}, "22000"), ({"audio": [1.0]}, "22023"),
                      ({"page_image": "x"}, "22023")]:
        with pytest.raises(psycopg.Error) as e:
            search(conn, EXT, db["text"], None, mode="semantic", query_vectors=Jsonb(qv))
        assert e.value.sqlstate == state and e.value.diag.message_hint, qv
    listed = conn.execute("SELECT spaces, sources FROM corpus.corpus_list() WHERE name = %s", [EXT]).fetchone()
    assert listed[0]["page_image"]["dimensions"] == DIM
    assert {s["source"]: s["space"] for s in listed[1]}["pages"] == "page_image"


def test_the_health_check_audits_every_space_with_its_own_vectors(db):
    """The isolation audit probes each source with its own items' vectors, as a query vector of
    the space they belong to: a corpus with a named space is audited, and so is every other."""
    conn = db["conn"]
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        rows = cur.execute("SELECT * FROM corpus.corpus_health_check()").fetchall()
        audits = {r["corpus"]: r for r in rows if r["check"] == "isolation_audit"}
        assert {EXT, INT} <= set(audits), sorted(audits)
        for corpus in (EXT, INT):
            r = audits[corpus]
            assert r["status"] == "ok", r
            # the pages' own probes ran: searches with an image vector, no leak among their hits
            assert r["detail"]["probes"] > 0 and r["detail"]["searches"] > 0, r
            assert not r["detail"].get("leaks"), r
