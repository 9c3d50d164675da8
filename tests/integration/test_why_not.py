"""corpus_why_not: for one item and one search, the rule that keeps it out — each reason made
true on purpose (in a rolled-back transaction where it needs a change) and named; an item of
another corpus answered exactly as one that does not exist."""
import psycopg
import pytest
from psycopg.rows import dict_row

SEED = 9317
EXT = "external_precedents"


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_why_not")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=40, n_documents=8))
    return conn


def query(db):
    return db.execute("SELECT embedding::text, left(content, 60) FROM precedent_chunks c JOIN case_law p "
                      "ON p.id = c.case_law_id WHERE p.source_kind = 'external_upload' ORDER BY c.id LIMIT 1").fetchone()


def search(db, **kw):
    vec, text = query(db)
    args = "".join(f', "{k}" => %({k})s' for k in kw)
    with db.cursor(row_factory=dict_row) as cur:
        return cur.execute(f"SELECT * FROM corpus.corpus_hybrid_search(%(c)s, %(v)s::vector, %(t)s{args}) ORDER BY rank",
                           dict(c=EXT, v=vec, t=text, **kw)).fetchall()


def why(db, source, item_id, corpus=EXT, **kw):
    vec, text = query(db)
    args = "".join(f', "{k}" => %({k})s' for k in kw)
    with db.cursor(row_factory=dict_row) as cur:
        return cur.execute(f"SELECT * FROM corpus.corpus_why_not(%(c)s, %(s)s, %(i)s, %(v)s::vector, %(t)s{args})",
                           dict(c=corpus, s=source, i=item_id, v=vec, t=text, **kw)).fetchall()


def reasons(rows):
    return [r["reason"] for r in rows]


def test_a_returned_item_says_its_rank(db):
    hit = search(db)[2]
    rows = why(db, hit["source"], hit["item_id"])
    assert reasons(rows) == ["returned"] and rows[0]["detail"]["rank"] == 3


def test_an_item_below_k_says_its_rank_and_page(db):
    hit = search(db, offset=10)[1]
    assert hit["rank"] == 12
    rows = why(db, hit["source"], hit["item_id"])
    assert reasons(rows) == ["below_k"] and rows[0]["detail"]["rank"] == 12
    assert '"offset" => 10' in rows[0]["hint"]


def test_the_per_parent_cap_names_the_hits_ahead(db):
    hits = search(db, max_per_parent=0, k=30)
    seen = {}
    for h in hits:
        if h["parent_id"] in seen:
            first, second = seen[h["parent_id"]], h
            break
        seen[h["parent_id"]] = h
    rows = why(db, second["source"], second["item_id"], max_per_parent=1)
    assert reasons(rows) == ["parent_cap"], rows
    assert rows[0]["detail"]["ranked_ahead"] == [{"source": first["source"], "item_id": first["item_id"]}]


def test_another_corpus_item_is_answered_as_a_missing_one(db):
    other = db.execute("SELECT c.id::text FROM precedent_chunks c JOIN case_law p ON p.id = c.case_law_id "
                       "WHERE p.source_kind = 'internal_committee' LIMIT 1").fetchone()[0]
    a, b = why(db, "chunks", other), why(db, "chunks", "987654321")
    assert reasons(a) == reasons(b) == ["not_in_corpus"]
    assert a[0]["detail"] == b[0]["detail"] and a[0]["hint"].replace(other, "ID") == b[0]["hint"].replace("987654321", "ID")


def test_each_rule_of_the_searchable_contract_is_named(db):
    hit = next(h for h in search(db, k=20) if h["source"] == "chunks")
    item, parent = hit["item_id"], hit["parent_id"]
    court = db.execute("SELECT court FROM case_law WHERE id = %s", [int(parent)]).fetchone()[0]
    rows = why(db, "chunks", item, filters=psycopg.types.json.Jsonb({"court": court + " (other)"}))
    assert reasons(rows) == ["filters"] and rows[0]["detail"]["fields"] == ["court"]
    # a range (two conditions on one field) names its field once
    rows = why(db, "chunks", item, filters=psycopg.types.json.Jsonb({"court": {"gt": court, "lt": court + "z"}}))
    assert reasons(rows) == ["filters"] and rows[0]["detail"]["fields"] == ["court"], rows
    for change, reason in [("UPDATE precedent_chunks SET content = 'short' WHERE id = %(i)s", "text"),
                           ("UPDATE case_law SET case_name = ' ' WHERE id = %(p)s", "parent")]:
        with db.transaction(force_rollback=True):
            db.execute(change, dict(i=int(item), p=int(parent)))
            rows = why(db, "chunks", item)
            assert reasons(rows) == [reason], rows
            assert rows[0]["hint"]
    # a halacha the source rule (review_status approved) leaves out
    halacha = next(h for h in search(db, k=40, max_per_parent=0) if h["source"] == "halachot")["item_id"]
    with db.transaction(force_rollback=True):
        db.execute("UPDATE halachot SET review_status = 'pending' WHERE id = %s", [int(halacha)])
        rows = why(db, "halachot", halacha)
        assert reasons(rows) == ["rule"] and rows[0]["detail"]["columns"] == ["review_status"], rows


def test_a_stale_embedding_is_said_before_the_ranking(db):
    hit = next(h for h in search(db) if h["source"] == "chunks")
    with db.transaction(force_rollback=True):
        db.execute("UPDATE precedent_chunks SET content = content || ' amended' WHERE id = %s", [int(hit["item_id"])])
        rows = why(db, "chunks", hit["item_id"], mode="semantic")
        assert reasons(rows)[0] == "stale_embedding" and len(rows) == 2, rows


def test_no_evidence_and_no_branch(db):
    # the lexical branch cannot rank an item holding none of the query's words
    far = db.execute("SELECT c.id::text FROM precedent_chunks c JOIN case_law p ON p.id = c.case_law_id "
                     "WHERE p.source_kind = 'external_upload' AND char_length(c.content) >= 60 "
                     "ORDER BY c.id DESC LIMIT 1").fetchone()[0]
    vec, text = query(db)
    with db.cursor(row_factory=dict_row) as cur:
        rows = cur.execute("SELECT * FROM corpus.corpus_why_not(%s, 'chunks', %s, NULL, 'זקקזקזק', mode => 'lexical')",
                           [EXT, far]).fetchall()
    assert reasons(rows) == ["not_ranked"] and "lexical_rank" not in rows[0]["detail"], rows
    # the evidence filter: a hit of the plain search that holds none of a made-up word
    with db.cursor(row_factory=dict_row) as cur:
        hit = cur.execute("SELECT * FROM corpus.corpus_hybrid_search(%s, %s::vector, 'זקקזקזק') ORDER BY rank LIMIT 1",
                          [EXT, vec]).fetchone()
        rows = cur.execute("SELECT * FROM corpus.corpus_why_not(%s, %s, %s, %s::vector, 'זקקזקזק', evidence => true)",
                           [EXT, hit["source"], hit["item_id"], vec]).fetchall()
    assert reasons(rows) == ["no_evidence"], rows
    assert rows[0]["detail"]["rank_without_filter"] == 1


@pytest.mark.parametrize("args,state", [("NULL, 'chunks', '1'", "22004"), ("'nope', 'chunks', '1'", "42704"),
                                        (f"'{EXT}', 'nope', '1'", "42704"), (f"'{EXT}', 'chunks', '1', k => 0", "22023")])
def test_bad_arguments(db, args, state):
    with pytest.raises(psycopg.Error) as e:
        db.execute(f"SELECT * FROM corpus.corpus_why_not({args})")
    assert e.value.sqlstate == state and e.value.diag.message_hint
