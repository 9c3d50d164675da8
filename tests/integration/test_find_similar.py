"""corpus_find_similar: a search by one of the corpus' own items. The item's own corpus is the
only one it can start from (an item of another corpus is the same error as a missing id, so a
caller learns nothing about it); the item itself is never a hit, nor, with exclude_parent, its
parent's other items; its semantic branch is the search of its stored vector, recomputed here
with corpus_hybrid_search; a stale embedding is never used unless asked.
"""
import numpy as np
import psycopg
import pytest

SEED = 5150
EXT, INT = "external_precedents", "internal_decisions"
KIND = {EXT: "external_upload", INT: "internal_committee"}


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_find_similar")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=60, n_documents=12))
    return conn


def item_of(db, kind, offset=0):
    """A searchable chunk of the corpus of `kind` (one its own searches return): id, parent id,
    embedding."""
    corpus = next(c for c, k in KIND.items() if k == kind)
    ids = [r[0] for r in db.execute(
        "SELECT item_id FROM corpus.corpus_hybrid_search(%s, (SELECT embedding FROM precedent_chunks ORDER BY id "
        "LIMIT 1), NULL, mode => 'semantic', k => 60, max_per_parent => 0) WHERE source = 'chunks' ORDER BY rank",
        [corpus])]
    return db.execute("SELECT id::text, case_law_id::text, embedding::text FROM precedent_chunks WHERE id = %s",
                      [int(ids[offset])]).fetchone()


def similar(db, corpus, source, item_id, **kw):
    args = "".join(f", {k} => %({k})s" for k in kw)
    with db.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute(f"SELECT * FROM corpus.corpus_find_similar(%(c)s, %(s)s, %(i)s{args})",
                           dict(c=corpus, s=source, i=item_id, **kw)).fetchall()


def kinds(db, rows):
    ids = list({r["parent_id"] for r in rows})
    return {k for (k,) in db.execute("SELECT source_kind FROM case_law WHERE id::text = ANY(%s)", [ids])}


@pytest.mark.parametrize("mode", ["semantic", "lexical", "hybrid"])
@pytest.mark.parametrize("corpus", [EXT, INT])
def test_the_item_is_never_a_hit_and_every_hit_is_of_the_corpus(db, corpus, mode):
    item, parent, _ = item_of(db, KIND[corpus], offset=4)
    rows = similar(db, corpus, "chunks", item, mode=mode, k=20, max_per_parent=0)
    assert len(rows) == 20
    assert ("chunks", item) not in {(r["source"], r["item_id"]) for r in rows}
    assert kinds(db, rows) == {KIND[corpus]}
    rows = similar(db, corpus, "chunks", item, mode=mode, k=20, max_per_parent=0, exclude_parent=True)
    assert len(rows) == 20 and parent not in {r["parent_id"] for r in rows}
    if mode == "semantic":
        # every item of the corpus is a semantic hit of a long enough list: its siblings too,
        # unless excluded
        everything = similar(db, corpus, "chunks", item, mode=mode, k=1000, max_per_parent=0)
        assert parent in {r["parent_id"] for r in everything}
        fewer = similar(db, corpus, "chunks", item, mode=mode, k=1000, max_per_parent=0, exclude_parent=True)
        assert {(r["source"], r["item_id"]) for r in fewer} == \
            {(r["source"], r["item_id"]) for r in everything if r["parent_id"] != parent}


def test_the_semantic_branch_is_the_search_of_the_items_own_vector(db, pgc):
    item, _, emb = item_of(db, KIND[EXT], offset=2)
    own = pgc.search(db, EXT, emb, None, mode="semantic", k=11, max_per_parent=0)
    assert (own[0]["source"], own[0]["item_id"]) == ("chunks", item), "its own nearest item is itself"
    got = similar(db, EXT, "chunks", item, mode="semantic", k=10, max_per_parent=0)
    assert [(r["source"], r["item_id"]) for r in got] == [(r["source"], r["item_id"]) for r in own[1:]]
    for r, o in zip(got, own[1:]):
        assert r["semantic_distance"] == pytest.approx(o["semantic_distance"], abs=1e-9)


def test_an_item_of_another_corpus_is_the_same_error_as_a_missing_one(db):
    foreign, _, _ = item_of(db, KIND[INT], offset=1)
    pending = db.execute("SELECT id::text FROM halachot WHERE review_status <> 'approved' LIMIT 1").fetchone()
    errors = []
    for source, item in [("chunks", foreign), ("chunks", "987654321"), ("chunks", "x'; DROP TABLE case_law; --"),
                         ("halachot", pending[0] if pending else "1")]:
        with pytest.raises(psycopg.Error) as e:
            similar(db, EXT, source, item)
        assert e.value.sqlstate == "42704", e.value
        assert e.value.diag.message_hint
        errors.append(e.value.diag.message_primary.replace(item, "ID").replace(source, "SRC"))
    assert len(set(errors)) == 1, errors
    assert db.execute("SELECT count(*) FROM case_law").fetchone()[0] > 0


def test_another_spelling_of_the_id_is_the_same_item(db, pgc):
    item, _, _ = item_of(db, KIND[EXT], offset=3)
    want = similar(db, EXT, "chunks", item, k=10)
    for spelling in [f" {item}", f"0{item}", f"+{item}"]:
        rows = similar(db, EXT, "chunks", spelling, k=10)
        assert [r["item_id"] for r in rows] == [r["item_id"] for r in want], spelling
        assert item not in {r["item_id"] for r in rows}, f"{spelling!r} must not bring the item itself back"
    # and the queue is looked up by the stored id: a stale embedding is not used via another spelling
    with db.transaction(force_rollback=True):
        db.execute("UPDATE precedent_chunks SET content = content || ' amended' WHERE id = %s", [int(item)])
        with pytest.raises(psycopg.Error) as e:
            with db.transaction():
                similar(db, EXT, "chunks", f"0{item}", mode="semantic")
        assert e.value.sqlstate == "55000"


def test_the_filters_scope_the_item_itself(db):
    """Without its required scope filter, a search says so whether or not the item exists; with a
    filter the item does not satisfy, the item is not a starting point (same 42704 as a missing
    one)."""
    doc, area = db.execute("SELECT id::text, practice_area FROM document_chunks WHERE embedding IS NOT NULL "
                           "AND char_length(btrim(content)) >= 50 ORDER BY id LIMIT 1").fetchone()
    other = db.execute("SELECT practice_area FROM document_chunks WHERE practice_area <> %s LIMIT 1", [area]).fetchone()[0]
    for item in (doc, "987654321"):
        with pytest.raises(psycopg.Error) as e:
            similar(db, "case_documents", "documents", item)
        assert e.value.sqlstate == "22023" and "practice_area" in e.value.diag.message_primary
    errors = []
    for item, filters in [(doc, {"practice_area": other}), ("987654321", {"practice_area": area})]:
        with pytest.raises(psycopg.Error) as e:
            similar(db, "case_documents", "documents", item, filters=psycopg.types.json.Jsonb(filters))
        assert e.value.sqlstate == "42704"
        errors.append(e.value.diag.message_primary.replace(item, "ID"))
    assert errors[0] == errors[1]
    rows = similar(db, "case_documents", "documents", doc, filters=psycopg.types.json.Jsonb({"practice_area": area}))
    assert rows and all(r["metadata"]["practice_area"] == area for r in rows)


def test_a_stale_embedding_is_not_used_unless_asked(db):
    item, _, _ = item_of(db, KIND[EXT], offset=6)
    with db.transaction(force_rollback=True):
        db.execute("UPDATE precedent_chunks SET content = content || ' amended' WHERE id = %s", [int(item)])
        with pytest.raises(psycopg.Error) as e:
            with db.transaction():
                similar(db, EXT, "chunks", item, mode="semantic")
        assert e.value.sqlstate == "55000" and e.value.diag.message_hint
        rows = similar(db, EXT, "chunks", item, mode="hybrid")
        assert rows and all(r["semantic_rank"] is None for r in rows), "a hybrid search by its text alone"
        rows = similar(db, EXT, "chunks", item, mode="semantic", include_stale=True)
        assert len(rows) == 10


def test_bad_arguments(db):
    item, _, _ = item_of(db, KIND[EXT])
    doc = db.execute("SELECT id::text FROM document_chunks WHERE embedding IS NOT NULL LIMIT 1").fetchone()[0]
    cases = [
        (dict(corpus=None), "22004"), (dict(source=None), "22004"), (dict(item_id=None), "22004"),
        (dict(corpus="no_such_corpus"), "42704"), (dict(source="no_such_source"), "42704"),
        (dict(k=0), "22023"), (dict(mode="fuzzy"), "22023"),
        (dict(filters={"source_kind": "internal_committee"}), "42501"),
        (dict(corpus="case_documents", source="documents", item_id=doc), "22023"),   # required scope filter
    ]
    for change, state in cases:
        args = dict(corpus=EXT, source="chunks", item_id=item) | change
        kw = {k: (psycopg.types.json.Jsonb(v) if k == "filters" else v) for k, v in args.items()
              if k not in ("corpus", "source", "item_id")}
        with pytest.raises(psycopg.Error) as e:
            similar(db, args["corpus"], args["source"], args["item_id"], **kw)
        assert e.value.sqlstate == state, (change, e.value)
        assert e.value.diag.message_hint, change
    rows = similar(db, "case_documents", "documents", doc, filters=psycopg.types.json.Jsonb({"practice_area": db.execute(
        "SELECT practice_area FROM document_chunks WHERE id = %s", [int(doc)]).fetchone()[0]}))
    assert rows and doc not in {r["item_id"] for r in rows}
