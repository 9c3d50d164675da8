"""Native ids: corpus_hybrid_search_typed(NULL::<key type>, ...) returns the same rows as
corpus_hybrid_search with item_id in the key type every source of the corpus shares, so a join
back needs no cast. A type other than the sources' key type, sources whose keys differ, and a
type not built into PostgreSQL are refused with the cast to use instead; a domain's CHECK (a
table owner's code) never runs: the ids are read with the base type's own input function."""
import random

import numpy as np
import psycopg
import pytest
from psycopg.rows import dict_row

DIM = 8
WORDS = "lease tenant landlord deposit repair roof notice appeal court ruling damage payment".split()


def vector(rng):
    v = np.array([rng.gauss(0, 1) for _ in range(DIM)])
    return "[" + ",".join(f"{x:.5f}" for x in v / np.linalg.norm(v)) + "]"


def rows(rng, n):
    return [(" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))), vector(rng)) for _ in range(n)]


@pytest.fixture(scope="module")
def db(cluster):
    conn = cluster.create_db("pgc_typed_ids")
    rng = random.Random(20261203)
    conn.execute("""CREATE FUNCTION key_guard(bigint) RETURNS boolean LANGUAGE plpgsql AS $$
        BEGIN
            IF $1 IS NOT NULL AND current_setting('typed.forbid', true) = 'on' THEN
                RAISE EXCEPTION 'the domain''s CHECK ran';
            END IF;
            RETURN $1 > 0;
        END $$""")
    conn.execute("CREATE DOMAIN item_key AS bigint CHECK (key_guard(VALUE))")
    conn.execute("CREATE TYPE item_kind AS ENUM ('alpha', 'beta')")
    keys = {"by_bigint": "bigint", "by_uuid": "uuid", "by_int": "integer"}
    for table, key in keys.items():
        conn.execute(f"""CREATE TABLE {table} (id {key} PRIMARY KEY, body text NOT NULL,
            body_tsv tsvector GENERATED ALWAYS AS (corpus.bm25_document(body, 'english')) STORED,
            embedding vector({DIM}))""")
    with conn.cursor() as cur:
        data = rows(rng, 40)
        cur.executemany("INSERT INTO by_bigint (id, body, embedding) VALUES (%s, %s, %s::vector)",
                        [(1000 + i, b, v) for i, (b, v) in enumerate(data)])
        cur.executemany("INSERT INTO by_uuid (id, body, embedding) VALUES (gen_random_uuid(), %s, %s::vector)", rows(rng, 40))
        cur.executemany("INSERT INTO by_int (id, body, embedding) VALUES (%s, %s, %s::vector)",
                        [(7 + i, b, v) for i, (b, v) in enumerate(rows(rng, 40))])
    sources = {"bigints": ["by_bigint"], "uuids": ["by_uuid"], "ints": ["by_int"], "mixed": ["by_bigint", "by_uuid"],
               "bigints_twice": ["by_bigint", "by_bigint"]}
    for corpus, tables in sources.items():
        conn.execute("SELECT corpus.corpus_create(%s)", [corpus])
        for n, table in enumerate(tables):
            conn.execute("""SELECT corpus.corpus_add_source(%s, %s, %s, text_column => 'body',
                             embedding_column => 'embedding', tsv_column => 'body_tsv', parent_fk => 'id',
                             min_length => 10, language => 'english')""", [corpus, f"{table}_{n}", table])
    return conn


def search(db, function, corpus, *lead, **kw):
    args = "".join(f', "{k}" => %({k})s' for k in kw)
    lead_sql = "".join(f"{x}, " for x in lead)
    with db.cursor(row_factory=dict_row) as cur:
        return cur.execute(f"SELECT *, pg_typeof(item_id)::text AS id_type FROM corpus.{function}({lead_sql}"
                           f"%(c)s, %(v)s::vector, %(t)s{args}) ORDER BY rank",
                           dict(c=corpus, v=vector(random.Random(5)), t="tenant deposit repair", **kw)).fetchall()


@pytest.mark.parametrize("corpus, key", [("bigints", "bigint"), ("uuids", "uuid"), ("ints", "integer"),
                                         ("bigints", "item_key"), ("bigints_twice", "bigint")])
@pytest.mark.parametrize("mode", ["hybrid", "lexical", "semantic"])
def test_the_typed_search_is_the_search_with_ids_in_the_key_type(db, corpus, key, mode):
    db.execute("SET typed.forbid = on")
    try:
        plain = search(db, "corpus_hybrid_search", corpus, k=7, mode=mode, offset=2)
        typed = search(db, "corpus_hybrid_search_typed", corpus, f"NULL::{key}", k=7, mode=mode, offset=2)
    finally:
        db.execute("RESET typed.forbid")
    assert len(plain) == 7
    assert {r["id_type"] for r in typed} == {key}
    assert [str(r["item_id"]) for r in typed] == [r["item_id"] for r in plain]
    strip = ("item_id", "id_type")
    assert [{k: v for k, v in r.items() if k not in strip} for r in typed] == \
           [{k: v for k, v in r.items() if k not in strip} for r in plain]


def test_a_join_back_needs_no_cast(db):
    joined = db.execute("""SELECT h.rank, t.id FROM corpus.corpus_hybrid_search_typed(NULL::bigint, 'bigints',
                               NULL, 'tenant deposit', k => 5) h JOIN by_bigint t ON t.id = h.item_id
                            ORDER BY h.rank""").fetchall()
    ids = [r[0] for r in db.execute("""SELECT item_id FROM corpus.corpus_hybrid_search('bigints', NULL,
                                           'tenant deposit', k => 5) ORDER BY rank""").fetchall()]
    assert [str(i) for _, i in joined] == ids and len(ids) == 5
    plan = "\n".join(r[0] for r in db.execute(
        """EXPLAIN SELECT t.* FROM corpus.corpus_hybrid_search_typed(NULL::bigint, 'bigints', NULL, 'tenant',
               k => 5) h JOIN by_bigint t ON t.id = h.item_id""").fetchall())
    assert "::text" not in plan, plan


def refused(db, sql):
    with pytest.raises(psycopg.Error) as e:
        db.execute(sql)
    db.rollback()
    return e.value.diag


def test_another_type_than_the_key_is_refused_with_the_key_type(db):
    d = refused(db, "SELECT * FROM corpus.corpus_hybrid_search_typed(NULL::integer, 'bigints', NULL, 'tenant')")
    assert d.sqlstate == "42804" and "bigint, not integer" in d.message_primary
    assert d.message_hint == "Pass NULL::bigint as id_type."
    d = refused(db, "SELECT * FROM corpus.corpus_hybrid_search_typed(NULL::text, 'uuids', NULL, 'tenant')")
    assert d.sqlstate == "42804" and d.message_hint == "Pass NULL::uuid as id_type."


def test_sources_with_different_keys_are_refused_with_the_cast_per_source(db):
    d = refused(db, "SELECT * FROM corpus.corpus_hybrid_search_typed(NULL::bigint, 'mixed', NULL, 'tenant')")
    assert d.sqlstate == "42804" and "different types" in d.message_primary
    assert "h.item_id::" in d.message_hint and "h.source = '" in d.message_hint
    assert '"by_bigint_0":"bigint"' in d.message_detail and '"by_uuid_1":"uuid"' in d.message_detail


def test_a_type_not_built_in_is_refused(db):
    d = refused(db, "SELECT * FROM corpus.corpus_hybrid_search_typed(NULL::item_kind, 'bigints', NULL, 'tenant')")
    assert d.sqlstate == "42804" and "bigint, not public.item_kind" in d.message_primary


def test_bad_input_is_refused_like_the_search(db):
    d = refused(db, "SELECT * FROM corpus.corpus_hybrid_search_typed(NULL::bigint, 'no_such_corpus', NULL, 'x')")
    assert d.sqlstate == "42704"
    d = refused(db, "SELECT * FROM corpus.corpus_hybrid_search_typed(NULL::bigint, 'bigints', NULL, 'x', k => 0)")
    assert d.sqlstate == "22023"
    d = refused(db, "SELECT * FROM corpus.corpus_hybrid_search_typed(NULL, 'bigints', NULL, 'x')")
    assert d.sqlstate == "42804"
