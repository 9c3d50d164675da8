"""Lenient filters for model-proposed conditions and declared value
lists and ranges. A lenient search drops exactly the invalid conditions (the core's property
test covers every shape of filter object); here: the search equals a strict search of the kept
conditions, the caller learns what was dropped (a NOTICE, and corpus_check_filters), the
isolation column and the required scope filters are never lenient, and bad declarations fail
at definition time.
"""
import json

import psycopg
import pytest
from psycopg.types.json import Jsonb

SEED = 7070
EXT = "external_precedents"
PAGES = {"type": "integer", "min": 1, "max": 500}


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_lenient")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=60, n_documents=12))
    conn.execute("SELECT corpus.corpus_alter(%s, filter_fields => %s)", [EXT, Jsonb({
        "court": {"type": "text", "values": pgc.COURTS},
        "practice_area": {"type": "text", "values": pgc.PRACTICE_AREAS},
        "case_number": "text",
        "page_number": PAGES})])
    return conn


def ids(rows):
    return [(r["source"], r["item_id"], r["score"]) for r in rows]


def test_declared_values_and_ranges_are_refused_in_strict_mode(db, pgc):
    for filters, words in [({"court": "בית משפט צבאי"}, "not an allowed value"),
                           ({"practice_area": ["planning", "tax"]}, "not an allowed value"),
                           ({"page_number": 0}, "outside the range"),
                           ({"page_number": {"lte": 900}}, "outside the range")]:
        with pytest.raises(psycopg.Error) as e:
            pgc.search(db, EXT, None, "חוזה", filters=filters)
        assert e.value.sqlstate == "22023" and words in e.value.diag.message_primary, e.value
        assert e.value.diag.message_hint
    hits = pgc.search(db, EXT, None, "חוזה", filters={"court": pgc.COURTS[0], "page_number": {"gte": 1}}, k=20)
    assert hits and all(h["metadata"]["court"] == pgc.COURTS[0] for h in hits), hits


def test_a_lenient_search_is_the_strict_search_of_the_valid_conditions(db, pgc):
    proposed = {"court": "בית משפט צבאי", "judge": "כהן", "practice_area": ["planning", "compensation"],
                "page_number": {"gte": 2, "lt": "ten"}}
    kept = {"practice_area": ["planning", "compensation"], "page_number": {"gte": 2}}
    notices = []

    def keep(d):     # a notice's diagnostics are readable inside the handler only
        notices.append((d.message_primary or "", d.message_detail, d.message_hint))

    db.add_notice_handler(keep)
    try:
        lenient = pgc.search(db, EXT, None, "חוזה דין", filters=proposed, filter_mode="lenient", k=20)
    finally:
        db.remove_notice_handler(keep)
    strict = pgc.search(db, EXT, None, "חוזה דין", filters=kept, k=20)
    assert lenient and ids(lenient) == ids(strict)
    assert ids(lenient) != ids(pgc.search(db, EXT, None, "חוזה דין", k=20)), "the kept conditions narrow"
    ours = [n for n in notices if "dropped 3 filter condition" in n[0]]
    assert len(ours) == 1 and ours[0][2], notices
    dropped = json.loads(ours[0][1])
    assert sorted(json.dumps(d["condition"], ensure_ascii=False, sort_keys=True) for d in dropped) == sorted(
        json.dumps(c, ensure_ascii=False, sort_keys=True) for c in
        [{"court": "בית משפט צבאי"}, {"judge": "כהן"}, {"page_number": {"lt": "ten"}}])
    assert {d["sqlstate"] for d in dropped} == {"22023", "42703", "42804"}
    # the companion function says the same, piece by piece
    rows = db.execute("SELECT field, accepted, condition, reason, sqlstate FROM corpus.corpus_check_filters(%s, %s)",
                      [EXT, Jsonb(proposed)]).fetchall()
    assert {(f, a) for f, a, *_ in rows} == {("court", False), ("judge", False), ("practice_area", True),
                                            ("page_number", True), ("page_number", False)}
    assert all((reason is None) == accepted and (state is None) == accepted for _, accepted, _, reason, state in rows)
    # and explain shows the subplans without the dropped conditions
    sql = " ".join(r[0] for r in db.execute(
        "SELECT sql FROM corpus.corpus_explain(%s, NULL, 'חוזה', filters => %s, filter_mode => 'lenient')",
        [EXT, Jsonb(proposed)]))
    assert "practice_area" in sql and "court" not in sql.replace("parent.court", "")


def test_isolation_and_required_scope_filters_are_never_lenient(db, pgc):
    with pytest.raises(psycopg.Error) as e:
        pgc.search(db, EXT, None, "חוזה", filters={"source_kind": "internal_committee", "judge": "x"},
                   filter_mode="lenient")
    assert e.value.sqlstate == "42501"
    with pytest.raises(psycopg.Error) as e:
        db.execute("SELECT * FROM corpus.corpus_check_filters(%s, %s)",
                   [EXT, Jsonb({"court": pgc.COURTS[0], "source_kind": "x"})])
    assert e.value.sqlstate == "42501"
    for filters in [{}, {"practice_area": 5}, {"practice_area": []}, {"section": "facts"}]:
        with pytest.raises(psycopg.Error) as e:
            pgc.search(db, "case_documents", None, "wing", filters=filters, filter_mode="lenient")
        assert "practice_area" in e.value.diag.message_primary, (filters, e.value)
        assert e.value.diag.message_hint
    with pytest.raises(psycopg.Error) as e:
        pgc.search(db, EXT, None, "חוזה", filter_mode="sloppy")
    assert e.value.sqlstate == "22023" and e.value.diag.message_hint


@pytest.mark.parametrize("spec,sqlstate", [
    ({"type": "text", "values": []}, "22023"), ({"type": "integer", "min": 9, "max": 1}, "22023"),
    ({"type": "text", "min": 1}, "22023"), ({"type": "integer", "colour": 1}, "22023"), (5, "22023"),
    # a value or a bound of the wrong type, alike
    ({"type": "integer", "values": ["x"]}, "42804"), ({"type": "integer", "min": "a"}, "42804"),
    ({"type": "date", "max": 5}, "42804")])
def test_bad_declarations_fail_at_definition_time(db, spec, sqlstate):
    before = db.execute("SELECT filter_fields FROM corpus.corpora WHERE name = %s", [EXT]).fetchone()[0]
    with pytest.raises(psycopg.Error) as e:
        db.execute("SELECT corpus.corpus_alter(%s, filter_fields => %s)", [EXT, Jsonb({"court": spec})])
    assert e.value.sqlstate == sqlstate and e.value.diag.message_hint
    assert db.execute("SELECT filter_fields FROM corpus.corpora WHERE name = %s", [EXT]).fetchone()[0] == before


def test_a_dropped_condition_is_reported_briefly_however_long(db, pgc):
    notices = []
    db.add_notice_handler(lambda d: notices.append((d.message_primary or "", d.message_detail or "")))
    field = "judge" * 200_000          # 1 MB field name
    pgc.search(db, EXT, None, "חוזה", filters={field: "כהן" * 1000}, filter_mode="lenient")
    ours = [n for n in notices if "dropped 1 filter condition" in n[0]]
    assert len(ours) == 1 and len(ours[0][1]) < 1000, len(ours[0][1]) if ours else notices
    assert json.loads(ours[0][1])[0]["sqlstate"] == "42703"
