"""pg_corpus.alchemy: the search functions as SQLAlchemy table-valued functions return what the
SQL functions return, compose with select()/join()/where(), and bind every value."""
import numpy as np
import psycopg
import pytest
import sqlalchemy as sa

from pg_corpus import alchemy


@pytest.fixture(scope="module")
def engine(demo_dsn):
    eng = sa.create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(demo_dsn))
    yield eng
    eng.dispose()


def vector_of(conn, item):
    text = conn.execute("SELECT embedding::text FROM precedent_chunks WHERE id = %s", [item]).fetchone()[0]
    return np.array([float(x) for x in text.strip("[]").split(",")], dtype=np.float32)


def test_a_search_is_a_table_with_the_functions_columns(engine, conn):
    vec = vector_of(conn, 10030)
    hits = alchemy.hybrid_search("external_precedents", vec, "שופטת בית המשפט", k=5, max_per_parent=2, offset=5)
    with engine.connect() as c:
        rows = c.execute(sa.select(hits).order_by(hits.c.rank)).mappings().all()
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        want = cur.execute("""SELECT * FROM corpus.corpus_hybrid_search('external_precedents', %s::vector, %s,
                                k => 5, max_per_parent => 2, "offset" => 5) ORDER BY rank""",
                           ["[" + ",".join(map(str, vec.tolist())) + "]", "שופטת בית המשפט"]).fetchall()
    assert [dict(r) for r in rows] == want and [r["rank"] for r in rows] == [6, 7, 8, 9, 10]
    assert [c.name for c in hits.c] == [name for name, _ in alchemy.HIT_COLUMNS]


def test_a_search_joins_back_to_the_items_table(engine, conn):
    hits = alchemy.hybrid_search("external_precedents", None, "כתב האישום", mode="lexical", k=3,
                                 filters={"court": "בית המשפט המחוזי בתל אביב"})
    chunks = sa.table("precedent_chunks", sa.column("id", sa.BigInteger), sa.column("page_number", sa.Integer))
    stmt = (sa.select(hits.c.rank, hits.c.item_id, chunks.c.page_number, hits.c.locator["page"].astext.label("page"))
            .join(chunks, chunks.c.id == sa.cast(hits.c.item_id, sa.BigInteger))
            .where(hits.c.source == "chunks").order_by(hits.c.rank))
    with engine.connect() as c:
        rows = c.execute(stmt).all()
    assert rows and all(str(r.page_number) == r.page for r in rows)
    assert "כתב האישום" not in str(stmt.compile()), "the text is a bind parameter"


def test_ids_in_the_key_type_join_back_without_a_cast(engine):
    hits = alchemy.hybrid_search("external_precedents", None, "כתב האישום", mode="lexical", k=4, id_type=sa.BigInteger)
    plain = alchemy.hybrid_search("external_precedents", None, "כתב האישום", mode="lexical", k=4)
    chunks = sa.table("precedent_chunks", sa.column("id", sa.BigInteger), sa.column("page_number", sa.Integer))
    stmt = (sa.select(hits.c.rank, hits.c.item_id, chunks.c.id).join(chunks, chunks.c.id == hits.c.item_id)
            .order_by(hits.c.rank))
    assert "CAST(hits.item_id" not in str(stmt.compile())
    with engine.connect() as c:
        typed = c.execute(sa.select(hits.c.rank, hits.c.item_id).order_by(hits.c.rank)).all()
        text = c.execute(sa.select(plain.c.rank, plain.c.item_id).order_by(plain.c.rank)).all()
        joined = c.execute(stmt).all()
    assert [(r, str(i)) for r, i in typed] == [tuple(t) for t in text] and len(text) == 4
    assert all(isinstance(i, int) for _, i in typed)
    assert [(r.rank, r.item_id) for r in joined] == [tuple(t) for t in typed if t[0] in {j.rank for j in joined}]
    assert joined and all(r.item_id == r.id for r in joined)


def test_fetch_and_find_similar(engine):
    with engine.connect() as c:
        item = c.execute(sa.select(alchemy.fetch("external_precedents", "chunks", 10030))).mappings().one()
        assert item["item_id"] == "10030" and item["locator"]["chunk_id"] == 10030
        like = alchemy.find_similar("external_precedents", "chunks", 10030, k=3, exclude_parent=True)
        rows = c.execute(sa.select(like.c.item_id, like.c.parent_id)).all()
    assert len(rows) == 3 and all(r.parent_id != item["parent_id"] for r in rows)


def test_unknown_keyword_arguments_are_refused():
    with pytest.raises(TypeError, match="unknown keyword arguments"):
        alchemy.hybrid_search("external_precedents", None, "x", source_kind="internal_committee")
