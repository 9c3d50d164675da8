"""corpus_alter_source changes a source's mapping in place — text, BM25 and embedding columns,
parent columns, rule, locator, min_length — without dropping its queue or statistics: each change
shows in the next search, the statistics follow the corpus' new extent, a new embedding column
gets its own slot, and a change the tables refuse leaves the definition as it was."""
import psycopg
import pytest
from psycopg.rows import dict_row

SEED = 2029
EXT = "external_precedents"


@pytest.fixture
def db(cluster, pgc):
    conn = cluster.create_db("pgc_alter_source")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=40, n_documents=6))
    # a changed text queues one item: the queue must survive every change below
    conn.execute("UPDATE halachot SET rule = rule || ' נוסף' WHERE id = (SELECT min(id) FROM halachot)")
    return conn


def sources(db):
    with db.cursor(row_factory=dict_row) as cur:
        return {(r["corpus"], r["name"]): r for r in cur.execute("SELECT * FROM corpus.sources").fetchall()}


def halachot(db, pgc, corpus=EXT, **kw):
    rows = pgc.search(db, corpus, None, "פסק דין", mode="lexical", k=60, max_per_parent=0, **kw)
    return [r for r in rows if r["source"] == "halachot"]


def alter(db, **kw):
    args = "".join(f", {k} => %({k})s" for k in kw)
    db.execute(f"SELECT corpus.corpus_alter_source(%(c)s, 'halachot'{args})", dict(c=EXT, **kw))


def queue(db):
    return db.execute("SELECT item_table::text, embedding_column::text, item_id, version FROM corpus.embedding_queue "
                      "ORDER BY 1, 2, 3").fetchall()


def test_each_change_shows_in_the_next_search_and_nothing_is_dropped(db, pgc):
    queued = queue(db)
    assert queued
    totals = lambda: db.execute("SELECT documents FROM corpus.lexical_totals WHERE corpus = %s",  # noqa: E731
                                [EXT]).fetchone()[0]
    before_docs = totals()
    approved = db.execute("SELECT count(*) FROM halachot h JOIN case_law c ON c.id = h.case_law_id "
                          "WHERE c.source_kind = 'external_upload' AND review_status = 'approved'").fetchone()[0]
    all_rules = db.execute("SELECT count(*) FROM halachot h JOIN case_law c ON c.id = h.case_law_id "
                           "WHERE c.source_kind = 'external_upload'").fetchone()[0]
    assert approved < all_rules

    # the rule: every halacha of the corpus is searchable, and the statistics count them
    pending = db.execute("SELECT h.id::text FROM halachot h JOIN case_law c ON c.id = h.case_law_id "
                         "WHERE c.source_kind = 'external_upload' AND review_status <> 'approved' "
                         "AND char_length(h.rule) >= 50 ORDER BY h.id LIMIT 1").fetchone()[0]
    fetch = "SELECT item_id FROM corpus.corpus_fetch(%s, 'halachot', %s)"
    with pytest.raises(psycopg.Error) as e:
        db.execute(fetch, [EXT, pending])
    assert e.value.sqlstate == "42704"
    alter(db, rule=psycopg.types.json.Jsonb({}))
    assert totals() == before_docs + (all_rules - approved)
    assert db.execute(fetch, [EXT, pending]).fetchall() == [(pending,)]

    # the text column and the locator: hits carry the new text and keys
    alter(db, text_column="supporting_quote", locator=psycopg.types.json.Jsonb({"quote_page": "page_number"}))
    hits = halachot(db, pgc)
    assert hits
    for h in hits[:5]:
        quote = db.execute("SELECT supporting_quote FROM halachot WHERE id = %s", [int(h["item_id"])]).fetchone()[0]
        assert h["content"] == quote and set(h["locator"]) == {"quote_page"}

    # min_length: a long floor empties the source and the statistics follow
    alter(db, min_length=100000)
    assert halachot(db, pgc) == [] and totals() < before_docs

    # the other corpus' halachot source is untouched
    assert halachot(db, pgc, corpus="internal_decisions")
    other = sources(db)["internal_decisions", "halachot"]
    assert (other["text_column"], other["rule"], other["min_length"]) == ("rule", {"review_status": "approved"}, 50)
    assert queue(db) == queued


def test_a_new_embedding_column_gets_its_own_slot(db, pgc):
    dim = db.execute("SELECT vector_dims(embedding) FROM halachot LIMIT 1").fetchone()[0]
    db.execute(f"ALTER TABLE halachot ADD COLUMN embedding2 vector({dim})")
    db.execute("UPDATE halachot SET embedding2 = embedding WHERE id % 2 = 0")
    queued = queue(db)
    alter(db, embedding_column="embedding2", embedding_model="model-2")
    slots = dict(db.execute("SELECT embedding_column::text, model FROM corpus.embedding_slots "
                            "WHERE item_table = 'halachot'::regclass").fetchall())
    # the old column keeps its slot and queue: the other corpus still embeds into it
    assert slots.keys() == {"embedding", "embedding2"} and slots["embedding2"] == "model-2"
    assert [q for q in queue(db) if q[1] == "embedding"] == queued
    missing = db.execute("SELECT count(*) FROM halachot WHERE embedding2 IS NULL").fetchone()[0]
    assert len([q for q in queue(db) if q[1] == "embedding2"]) == missing
    vec = db.execute("SELECT embedding2::text FROM halachot h JOIN case_law c ON c.id = h.case_law_id "
                     "WHERE c.source_kind = 'external_upload' AND h.review_status = 'approved' "
                     "AND h.embedding2 IS NOT NULL ORDER BY h.id LIMIT 1").fetchone()[0]
    rows = pgc.search(db, EXT, vec, None, mode="semantic", k=5)
    top = [r for r in rows if r["source"] == "halachot"][0]
    assert top["semantic_distance"] == pytest.approx(0, abs=1e-5)


@pytest.mark.parametrize("kw, state", [
    (dict(text_column="no_such_column"), "42703"),
    (dict(tsv_column="rule"), "42804"),
    (dict(rule='["approved"]'), "22023"),
    (dict(embedding_inputs=["rule", "supporting_quote"]), "0A000"),
    (dict(embedding_model="another"), "22023"),
    (dict(distance="manhattan"), "22023"),
])
def test_a_refused_change_leaves_the_definition_as_it_was(db, pgc, kw, state):
    before, queued = sources(db), queue(db)
    with pytest.raises(psycopg.Error) as e:
        alter(db, **kw)
    assert e.value.sqlstate == state and e.value.diag.message_hint, e.value
    assert sources(db) == before and queue(db) == queued
    assert halachot(db, pgc)


def test_unknown_corpus_or_source(db):
    for corpus, source in [("no_such_corpus", "halachot"), (EXT, "no_such_source")]:
        with pytest.raises(psycopg.Error) as e:
            db.execute("SELECT corpus.corpus_alter_source(%s, %s, min_length => 10)", [corpus, source])
        assert e.value.sqlstate == "42704"
