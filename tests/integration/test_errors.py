"""Bad input gets a clear error (docs/sql-reference.md "Errors").

For every mistake in the SQLSTATE table: the documented SQLSTATE (never class XX), a non-empty
message (naming the offending thing where there is one), a hint, and the backend survives (same
pg_backend_pid, next query works). Malformed text never crashes a backend, and a failing call
changes no data.

Hints: errors raised by PostgreSQL or pgvector themselves *before* pg_corpus code runs (a NaN in a
vector literal is refused by pgvector's vector_in; a missing table by the regclass input
function; a permission check by PostgreSQL's ACL code) carry no hint and pg_corpus cannot add one;
for those the hint is not required, everything else is. The origin is read from the error's
source file (`e.diag.source_file`).

How I convinced myself the tests can fail: each case asserts one exact SQLSTATE, so an
unvalidated input (e.g. k = 0 accepted, a filter on source_kind silently applied, a missing column
noticed only at search time) gives "DID NOT RAISE" or a different code; a Rust panic or `error!()`
gives XX000; a missing hint is caught by the hint assertion; a crash loses the connection.
"""

import json

import psycopg
import pytest

SEED = 22023
NOT_PG_CORPUS = {"vector.c", "namespace.c", "regproc.c", "aclchk.c"}
ROLE = "pgc_test_unprivileged"


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_errors")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=40, n_documents=12))
    conn.execute("""
        CREATE TABLE def_parent (id bigint PRIMARY KEY, name text, tenant text);
        CREATE TABLE def_items (
            id bigint PRIMARY KEY, pid bigint, body text, tsv tsvector, emb vector(384),
            emb_nodim vector, emb_text text, n int, status text);
        SELECT corpus.corpus_create('defs');
    """)
    yield conn


@pytest.fixture(scope="module")
def qv(pgc):
    import numpy as np
    return pgc.vec_text(pgc.random_unit_vectors(np.random.default_rng(SEED), 1, pgc.DIM)[0])


def backend_pid(conn):
    return conn.execute("SELECT pg_backend_pid()").fetchone()[0]


def expect_error(conn, sql, params, sqlstate, mention=None):
    """Run `sql` and check the error; returns it."""
    expected = {sqlstate} if isinstance(sqlstate, str) else set(sqlstate)
    pid = backend_pid(conn)
    with pytest.raises(psycopg.Error) as ei:
        conn.execute(sql, params)
    e = ei.value
    assert e.sqlstate is not None, f"no SQLSTATE (connection lost?): {e!r}"
    assert not e.sqlstate.startswith("XX"), f"internal error {e.sqlstate}: {e.diag.message_primary}"
    assert e.sqlstate in expected, \
        f"expected SQLSTATE {expected}, got {e.sqlstate}: {e.diag.message_primary}"
    msg = e.diag.message_primary or ""
    assert msg.strip(), "empty error message"
    if mention:
        text = (msg + " " + (e.diag.message_detail or "")).lower()
        assert mention.lower() in text, f"message does not name {mention!r}: {msg}"
    if e.diag.source_file not in NOT_PG_CORPUS:
        assert (e.diag.message_hint or "").strip(), \
            f"no hint for {e.sqlstate} {msg!r} (raised in {e.diag.source_file})"
    # the backend is alive and is the same one
    assert backend_pid(conn) == pid
    assert conn.execute("SELECT 1").fetchone()[0] == 1
    return e


def expect_search_error(conn, pgc, sqlstate, mention=None, **kw):
    sql, params = pgc.search_sql(**kw)
    return expect_error(conn, sql, params, sqlstate, mention)


# ---------------------------------------------------------------------------------------------
# Search errors
# ---------------------------------------------------------------------------------------------

def vec_of(dim, value=0.05, bad=None):
    xs = [str(value)] * dim
    if bad is not None:
        xs[dim // 2] = bad
    return "[" + ",".join(xs) + "]"


def nested(depth, leaf="x"):
    """A jsonb object `depth` levels deep: {"a": {"a": ... leaf}}."""
    v = leaf
    for _ in range(depth):
        v = {"a": v}
    return v


T = "ערעור תכנון"
EXT, INT, DOCS = "external_precedents", "internal_decisions", "case_documents"
PA = {"practice_area": "planning"}

# id: (sqlstate, mention, search kwargs); "QV" stands for a valid 384-d query vector
SEARCH_CASES = {
    "unknown_corpus": ("42704", "no_such_corpus", dict(corpus="no_such_corpus")),
    "missing_required_filter": ("22023", "practice_area", dict(corpus=DOCS)),
    "missing_required_filter_other_given": ("22023", "practice_area",
                                            dict(corpus=DOCS, filters={"section": "facts"})),
    "unknown_filter_field": ("42703", "judge", dict(corpus=EXT, filters={"judge": "x"})),
    "unknown_filter_field_docs": ("42703", "court",
                                  dict(corpus=DOCS, filters={**PA, "court": "x"})),
    "ill_typed_filter_value": ("42804", "case_id",
                               dict(corpus=DOCS, filters={**PA, "case_id": "abc"})),
    "ill_typed_filter_in_list": ("42804", "case_id",
                                 dict(corpus=DOCS, filters={**PA, "case_id": [1, "abc"]})),
    "ill_typed_filter_range": ("42804", "case_id",
                               dict(corpus=DOCS, filters={**PA, "case_id": {"gte": "abc"}})),
    "unknown_filter_operator": ("22023", "like",
                                dict(corpus=DOCS, filters={**PA, "case_id": {"like": 5}})),
    "filter_on_isolation_column": ("42501", "source_kind",
                                   dict(corpus=EXT, filters={"source_kind": "internal_committee"})),
    "filter_on_isolation_column_own_value": ("42501", "source_kind",
                                             dict(corpus=EXT,
                                                  filters={"source_kind": "external_upload"})),
    "filter_on_isolation_column_list": ("42501", "source_kind",
                                        dict(corpus=INT, filters={"source_kind": [
                                            "internal_committee", "external_upload"]})),
    "null_vector_semantic": ("22004", None, dict(corpus=EXT, query_vec=None, mode="semantic")),
    "wrong_dimension_3": ("22000", None, dict(corpus=EXT, query_vec="[1,2,3]")),
    "wrong_dimension_383": ("22000", None, dict(corpus=EXT, query_vec=vec_of(383))),
    "wrong_dimension_385_semantic": ("22000", None, dict(corpus=EXT, query_vec=vec_of(385),
                                                         mode="semantic")),
    "wrong_dimension_docs": ("22000", None,
                             dict(corpus=DOCS, query_vec=vec_of(64), filters=PA)),
    "nan": ("22000", None, dict(corpus=EXT, query_vec=vec_of(384, bad="NaN"))),
    "infinity": ("22000", None, dict(corpus=EXT, query_vec=vec_of(384, bad="Infinity"))),
    "minus_infinity": ("22000", None, dict(corpus=EXT, query_vec=vec_of(384, bad="-Infinity"),
                                           mode="semantic")),
    "k_zero": ("22023", None, dict(corpus=EXT, k=0)),
    "k_negative": ("22023", None, dict(corpus=EXT, k=-1)),
    "k_huge": ("22023", None, dict(corpus=EXT, k=1_000_000)),
    "k_int_max": ("22023", None, dict(corpus=EXT, k=2**31 - 1)),
    "empty_text_no_vector": ("22023", None, dict(corpus=EXT, query_vec=None, query_text="")),
    "blank_text_no_vector": ("22023", None, dict(corpus=EXT, query_vec=None,
                                                 query_text="   \t\n ")),
    "null_text_no_vector": ("22023", None, dict(corpus=EXT, query_vec=None, query_text=None)),
    "empty_text_lexical": ("22023", None, dict(corpus=EXT, query_text="  ", mode="lexical")),
    "unknown_mode": ("22023", "fuzzy", dict(corpus=EXT, mode="fuzzy")),
    "empty_mode": ("22023", None, dict(corpus=EXT, mode="")),
    "negative_candidates": ("22023", "candidates", dict(corpus=EXT, candidates=-1)),
    "negative_rrf_k": ("22023", "rrf_k", dict(corpus=EXT, rrf_k=-1)),
    "negative_max_per_parent": ("22023", "max_per_parent", dict(corpus=EXT, max_per_parent=-1)),
    "feedback_semantic": ("22023", "feedback", dict(corpus=EXT, mode="semantic", feedback=True)),
    "feedback_without_text": ("22023", "feedback", dict(corpus=EXT, query_text=None, feedback=True)),
    "feedback_without_vector": ("22023", "feedback", dict(corpus=EXT, query_vec=None, feedback=True)),
    # jsonb deeper than pg_corpus reads (64 levels), than serde_json's limit (128) and far beyond
    "filters_nested_65": ("54001", "filters", dict(corpus=EXT, filters=nested(65))),
    "filters_nested_129": ("54001", "filters", dict(corpus=EXT, filters=nested(129))),
    "filters_nested_900": ("54001", "filters", dict(corpus=EXT, filters=nested(900))),
    "filters_nested_array_300": ("54001", "filters", dict(corpus=EXT, filters={"court": nested(300, [1])})),
}


def search_kwargs(case, qv):
    kw = dict(SEARCH_CASES[case][2])
    kw.setdefault("query_vec", qv)
    kw.setdefault("query_text", T)
    return kw


@pytest.mark.parametrize("case", list(SEARCH_CASES))
def test_search_error(db, pgc, qv, case):
    sqlstate, mention, _ = SEARCH_CASES[case]
    expect_search_error(db, pgc, sqlstate, mention, **search_kwargs(case, qv))


def test_valid_variants_of_the_error_cases_succeed(db, pgc, qv):
    """Control: the error cases above differ from a working call only in the bad input."""
    assert len(pgc.search(db, EXT, qv, T)) == 10
    assert len(pgc.search(db, DOCS, qv, T, filters=PA)) > 0
    pgc.search(db, DOCS, qv, T, filters={**PA, "case_id": [1, 2, 3]})  # no error
    assert len(pgc.search(db, DOCS, qv, T, filters={**PA, "case_id": {"gte": 1}})) > 0
    assert len(pgc.search(db, EXT, qv, T, filters={"court": "בית המשפט העליון"})) > 0
    assert len(pgc.search(db, EXT, qv, None, mode="semantic")) == 10
    assert len(pgc.search(db, EXT, None, T, mode="lexical")) > 0
    assert len(pgc.search(db, EXT, None, T)) > 0            # hybrid with text only
    assert len(pgc.search(db, EXT, qv, None)) == 10         # hybrid with vector only
    assert len(pgc.search(db, EXT, qv, T, k=1)) == 1
    assert len(pgc.search(db, EXT, qv, T, candidates=50, rrf_k=1, max_per_parent=0)) == 10


# ---------------------------------------------------------------------------------------------
# Definition errors
# ---------------------------------------------------------------------------------------------

ADD = ("SELECT corpus.corpus_add_source(%(corpus)s, %(source)s, %(table)s, "
       "text_column => %(text)s, embedding_column => %(emb)s, tsv_column => %(tsv)s, "
       "id_column => %(id)s, parent_table => %(ptable)s, parent_fk => %(fk)s, "
       "parent_required => %(preq)s::text[], rule => %(rule)s::jsonb, "
       "locator => %(locator)s::jsonb, distance => %(distance)s)")
GOOD = dict(corpus="defs", source="s", table="def_items", text="body", emb="emb", tsv="tsv",
            id="id", ptable="def_parent", fk="pid", preq=[], rule="{}", locator="{}",
            distance="cosine")

DEFINITION_CASES = {
    "missing_text_column": ("42703", "nope_text", dict(text="nope_text")),
    "missing_embedding_column": ("42703", "nope_emb", dict(emb="nope_emb")),
    "missing_tsv_column": ("42703", "nope_tsv", dict(tsv="nope_tsv")),
    "missing_id_column": ("42703", "nope_id", dict(id="nope_id")),
    "missing_parent_fk_column": ("42703", "nope_fk", dict(fk="nope_fk")),
    "missing_parent_required_column": ("42703", "nope_req", dict(preq=["nope_req"])),
    "missing_rule_column": ("42703", "nope_rule", dict(rule='{"nope_rule": "x"}')),
    "missing_locator_column": ("42703", "nope_loc", dict(locator='{"p": "nope_loc"}')),
    "missing_locator_parent_column": ("42703", "nope_ploc",
                                      dict(locator='{"p": "parent.nope_ploc"}')),
    "embedding_column_is_text": ("42804", "emb_text", dict(emb="emb_text")),
    "embedding_column_is_int": ("42804", None, dict(emb="n")),
    "tsv_column_is_text": ("42804", None, dict(tsv="body")),
    "vector_without_dimension": ("42804", "emb_nodim", dict(emb="emb_nodim")),
    "missing_table": ("42P01", "no_such_table", dict(table="no_such_table")),
    "missing_parent_table": ("42P01", "no_such_parent", dict(ptable="no_such_parent")),
    "unknown_distance": ("22023", "manhattan", dict(distance="manhattan")),
    "bad_source_name": ("22023", None, dict(source="Bad Name!")),
    "unknown_corpus": ("42704", "no_such_corpus", dict(corpus="no_such_corpus")),
    "rule_nested_200": ("54001", None, dict(rule=json.dumps(nested(200)))),
    "locator_nested_130": ("54001", None, dict(locator=json.dumps({"p": nested(130)}))),
}


@pytest.mark.parametrize("case", list(DEFINITION_CASES))
def test_definition_error(db, case):
    sqlstate, mention, change = DEFINITION_CASES[case]
    before = db.execute("SELECT * FROM corpus.corpus_list() ORDER BY name").fetchall()
    triggers = db.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'def_items'::regclass"
                          ).fetchone()
    expect_error(db, ADD, {**GOOD, **change}, sqlstate, mention)
    # nothing was registered, no trigger attached
    assert db.execute("SELECT * FROM corpus.corpus_list() ORDER BY name").fetchall() == before
    assert db.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'def_items'::regclass"
                      ).fetchone() == triggers


def test_isolation_column_missing_on_parent(db):
    db.execute("SELECT corpus.corpus_create('defs_iso', isolation => '{\"nope_iso\": \"a\"}')")
    try:
        expect_error(db, ADD, {**GOOD, "corpus": "defs_iso"}, "42703", "nope_iso")
    finally:
        db.execute("SELECT corpus.corpus_drop('defs_iso')")


def test_filter_field_missing_in_source(db):
    db.execute("SELECT corpus.corpus_create('defs_ff', filter_fields => '{\"ghost\": \"text\"}')")
    try:
        expect_error(db, ADD, {**GOOD, "corpus": "defs_ff"}, "42703", "ghost")
    finally:
        db.execute("SELECT corpus.corpus_drop('defs_ff')")


def test_duplicate_source(db):
    db.execute(ADD, {**GOOD, "source": "dup"})
    try:
        expect_error(db, ADD, {**GOOD, "source": "dup"}, "42710", "dup")
    finally:
        db.execute("SELECT corpus.corpus_drop_source('defs', 'dup')")


CREATE = "SELECT corpus.corpus_create(%s, %s::jsonb, %s::text[], %s::jsonb)"
CREATE_CASES = {
    "duplicate_corpus": ("42710", "external_precedents", ["external_precedents", "{}", [], "{}"]),
    "bad_name_dash": ("22023", None, ["Bad-Name", "{}", [], "{}"]),
    "bad_name_digit": ("22023", None, ["1abc", "{}", [], "{}"]),
    "bad_name_long": ("22023", None, ["a" * 64, "{}", [], "{}"]),
    "unknown_filter_type": ("22023", "blob", ["c_ft", "{}", [], '{"x": "blob"}']),
    "required_filter_not_declared": ("22023", "undeclared_y",
                                     ["c_rf", "{}", ["undeclared_y"], '{"x": "text"}']),
    "isolation_column_as_filter_field": (("22023", "42501"), "tenant",
                                         ["c_iso", '{"tenant": "a"}', [], '{"tenant": "text"}']),
}


@pytest.mark.parametrize("case", list(CREATE_CASES))
def test_create_error(db, case):
    sqlstate, mention, params = CREATE_CASES[case]
    before = db.execute("SELECT count(*) FROM corpus.corpus_list()").fetchone()[0]
    expect_error(db, CREATE, params, sqlstate, mention)
    assert db.execute("SELECT count(*) FROM corpus.corpus_list()").fetchone()[0] == before


@pytest.mark.parametrize("sql,params,sqlstate", [
    ("SELECT corpus.corpus_drop(%s)", ["no_such_corpus"], "42704"),
    ("SELECT corpus.corpus_drop_source(%s, %s)", ["defs", "no_such_source"], "42704"),
    ("SELECT corpus.corpus_drop_source(%s, %s)", ["no_such_corpus", "chunks"], "42704"),
    ("SELECT corpus.corpus_alter(%s, description => 'x')", ["no_such_corpus"], "42704"),
    # the new definition is validated against every source: a filter field no source has
    ("SELECT corpus.corpus_alter(%s, filter_fields => '{\"ghost\": \"text\"}')",
     ["external_precedents"], "42703"),
    ("SELECT corpus.corpus_alter(%s, isolation => '{\"ghost\": \"x\"}')",
     ["external_precedents"], "42703"),
    ("SELECT corpus.corpus_alter(%s, filter_fields => %s::jsonb)",
     ["external_precedents", json.dumps(nested(300))], "54001"),
    ("SELECT corpus.corpus_alter(%s, isolation => %s::jsonb)",
     ["external_precedents", json.dumps(nested(140))], "54001"),
], ids=["drop_unknown", "drop_source_unknown", "drop_source_unknown_corpus",
        "alter_unknown", "alter_bad_filter_field", "alter_bad_isolation", "alter_filter_fields_nested_300",
        "alter_isolation_nested_140"])
def test_catalog_call_error(db, sql, params, sqlstate):
    before = db.execute("SELECT * FROM corpus.corpus_list() ORDER BY name").fetchall()
    expect_error(db, sql, params, sqlstate)
    assert db.execute("SELECT * FROM corpus.corpus_list() ORDER BY name").fetchall() == before


def test_drop_if_exists_is_quiet(db):
    notices = []
    db.add_notice_handler(lambda d: notices.append(d.message_primary))
    before = db.execute("SELECT array_agg(name ORDER BY name) FROM corpus.corpora").fetchone()[0]
    db.execute("SELECT corpus.corpus_drop('no_such_corpus', if_exists => true)")
    assert notices == [] and db.execute("SELECT array_agg(name ORDER BY name) FROM corpus.corpora").fetchone()[0] == before
    with pytest.raises(psycopg.errors.UndefinedObject):
        db.execute("SELECT corpus.corpus_drop('no_such_corpus')")


# ---------------------------------------------------------------------------------------------
# Privileges
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def unprivileged(db, cluster):
    db.execute(f"DROP ROLE IF EXISTS {ROLE}")
    db.execute(f"CREATE ROLE {ROLE} LOGIN")
    db.execute(f"GRANT SELECT ON case_law, precedent_chunks, halachot TO {ROLE}")
    try:
        yield ROLE
    finally:
        db.execute("RESET ROLE")
        db.execute(f"REVOKE ALL ON case_law, precedent_chunks, halachot FROM {ROLE}")
        db.execute(f"DROP ROLE {ROLE}")


@pytest.mark.parametrize("sql", [
    "SELECT corpus.corpus_create('intruder')",
    "SELECT corpus.corpus_create('intruder', isolation => '{}')",
    "SELECT corpus.corpus_drop('external_precedents')",
    "SELECT corpus.corpus_drop_source('external_precedents', 'halachot')",
    "SELECT corpus.corpus_alter('external_precedents', isolation => '{}')",
    "SELECT corpus.corpus_add_source('external_precedents', 'more', 'halachot', "
    "text_column => 'rule', embedding_column => 'embedding', tsv_column => 'rule_tsv', "
    "parent_table => 'case_law', parent_fk => 'case_law_id')",
], ids=["create", "create_iso", "drop", "drop_source", "alter_isolation", "add_source"])
def test_unprivileged_role_cannot_change_definitions(db, unprivileged, sql):
    before = db.execute("SELECT * FROM corpus.corpus_list() ORDER BY name").fetchall()
    db.execute(f"SET ROLE {unprivileged}")
    try:
        expect_error(db, sql, None, "42501")
        assert db.execute("SELECT current_user").fetchone()[0] == unprivileged
    finally:
        db.execute("RESET ROLE")
    assert db.execute("SELECT * FROM corpus.corpus_list() ORDER BY name").fetchall() == before


def test_unprivileged_role_can_still_search(db, pgc, qv, unprivileged):
    """Control for the test above: the role is not broken, it just may not define corpora
    (searches run with the caller's rights, and it can read the tables)."""
    db.execute(f"SET ROLE {unprivileged}")
    try:
        rows = pgc.search(db, EXT, qv, T)
    finally:
        db.execute("RESET ROLE")
    assert len(rows) == 10


# ---------------------------------------------------------------------------------------------
# Malformed text
# ---------------------------------------------------------------------------------------------

def _big_text(pgc):
    tg = pgc.TextGen(SEED, hebrew=True)
    s = tg.text(200_000, 200_000)
    return (s * (1 + 1_000_000 // len(s)))[:1_000_000]


MALFORMED = {
    "rtl_marks": "\u200f\u202bערעור\u202c \u200eתכנון\u200f \u202e",
    "niqqud": "בְּרֵאשִׁית בָּרָא אֱלֹהִים הַשָּׁמַיִם וְאֵת הָאָרֶץ",
    "combining_marks": "e" + "\u0301" * 500 + " a\u0308\u0323\u0332" * 200,
    "emoji": "👩🏽‍⚖️ 🏛️ ⚖️ 👨‍👩‍👧‍👦 🇮🇱 " * 10,
    "bom_zero_width": "\ufeff\u200b\u200c\u200dערעור\u2060\u00ad",
    "control_chars": "\x01\x02\x1b[31mred\x1b[0m\x7f ערעור",
    "tsquery_syntax": "a & b | !c <-> d:* ( ) ' \\ \" :A & | !",
    "sql_injection": "'; DROP TABLE case_law; -- \" ) OR 1=1 --",
    "only_punctuation": "!!! ... ??? ---",
    "long_word_1mb": "א" * 500_000,
    "text_1mb": None,   # filled lazily (_big_text)
    "many_distinct_words": None,
}


TEXT_ERRORS = {"22023"}


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_text_never_crashes(db, pgc, qv, case, mode):
    text = MALFORMED[case]
    if case == "text_1mb":
        text = _big_text(pgc)
    elif case == "many_distinct_words":
        text = " ".join(pgc.make_vocab(__import__("numpy").random.default_rng(SEED), 20_000))
    pid = backend_pid(db)
    try:
        rows = pgc.search(db, EXT, qv, text, mode=mode)
    except psycopg.Error as e:
        assert e.sqlstate is not None, f"connection lost: {e!r}"
        msg = (e.diag.message_primary or "")
        # a clean refusal of the text itself: a program limit of PostgreSQL's text search
        # (class 54, e.g. "string is too long for tsvector"), or nothing to search for (22023);
        # any other error is a bug
        assert e.sqlstate in TEXT_ERRORS or e.sqlstate.startswith("54"), \
            f"{e.sqlstate}: {msg[:300]}"
        assert msg.strip()
        if (e.diag.source_file or "").endswith(".rs"):      # raised by pg_corpus itself
            assert (e.diag.message_hint or "").strip(), msg[:300]
    else:
        assert len(rows) <= 10
        kinds = dict(db.execute("SELECT id::text, source_kind FROM case_law").fetchall())
        assert all(kinds[r["parent_id"]] == "external_upload" for r in rows)
        if mode == "hybrid":
            # the semantic branch still works whatever the text
            assert len(rows) == 10
    assert backend_pid(db) == pid
    assert db.execute("SELECT 1").fetchone()[0] == 1


# ---------------------------------------------------------------------------------------------
# A failing call changes no data
# ---------------------------------------------------------------------------------------------

def snapshot(conn):
    tables = [r[0] for r in conn.execute(
        "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind IN ('r', 'p') AND n.nspname IN ('corpus', 'public') ORDER BY 1")]
    snap = {}
    for t in tables:
        snap[t] = conn.execute(
            f"SELECT count(*), md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) "
            f"FROM {t} x").fetchone()
    snap["_triggers"] = conn.execute(
        "SELECT tgrelid::regclass::text, tgname, tgenabled FROM pg_trigger "
        "WHERE NOT tgisinternal ORDER BY 1, 2").fetchall()
    snap["_functions"] = conn.execute(
        "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname IN ('corpus', 'public')").fetchone()
    return snap


def test_failing_calls_change_no_data(db, pgc, qv):
    before = snapshot(db)
    assert any(t.startswith("corpus.") for t in before), "no catalog tables found"
    assert before["corpus.corpora"][0] >= 3
    for case in SEARCH_CASES:
        sqlstate, _, _ = SEARCH_CASES[case]
        expect_search_error(db, pgc, sqlstate, **search_kwargs(case, qv))
    for case, (sqlstate, _, change) in DEFINITION_CASES.items():
        expect_error(db, ADD, {**GOOD, **change}, sqlstate)
    # a bad source added to an existing, searched corpus
    expect_error(db, ADD, {**GOOD, "corpus": EXT, "source": "bad", "text": "nope"}, "42703")
    for case, (sqlstate, _, params) in CREATE_CASES.items():
        expect_error(db, CREATE, params, sqlstate)
    # inside an explicit transaction too: the failed search aborts it, nothing is kept
    with pytest.raises(psycopg.Error):
        with db.transaction():
            pgc.search(db, EXT, qv, T)
            pgc.search(db, EXT, qv, T, k=0)
    after = snapshot(db)
    assert after == before, [k for k in before if before[k] != after.get(k)]


def test_an_item_with_metadata_too_deep_to_read_fails_the_search_cleanly(db):
    """A metadata column holding jsonb nested beyond what pg_corpus reads (serde_json's limit
    made it XX000): 54001 naming the item, and the backend lives on."""
    db.execute(f"""
        CREATE TABLE deep_meta (id int PRIMARY KEY, pid int NOT NULL, body text NOT NULL, meta jsonb,
                                tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
                                emb vector(3));
        INSERT INTO deep_meta (id, pid, body, meta, emb)
             VALUES (1, 1, 'a deep metadata item with words', %s::jsonb, '[1,2,3]');
        SELECT corpus.corpus_create('deep_meta_c');
        SELECT corpus.corpus_add_source('deep_meta_c', 'items', 'deep_meta', text_column => 'body',
               tsv_column => 'tsv', embedding_column => 'emb', parent_fk => 'pid', min_length => 5,
               metadata => '{{"m": "meta"}}');""".replace("%s", "'" + json.dumps(nested(200)) + "'"))
    try:
        expect_error(db, "SELECT * FROM corpus.corpus_hybrid_search('deep_meta_c', NULL, 'deep words')",
                     None, "54001", "metadata of item 1")
    finally:
        db.execute("SELECT corpus.corpus_drop('deep_meta_c')")
        db.execute("DROP TABLE deep_meta")


def test_the_ts_rank_cd_scorer_bounds_a_long_query(db):
    """ts_rank_cd reads no statistics to choose keys by: a 4,000-word query made a 4,000-term
    tsquery that every candidate was ranked against (35 s). It ranks by the first 64 words."""
    words = [f"מילה{i}" for i in range(4000)]
    db.execute("SET pg_corpus.lexical_scorer = 'ts_rank_cd'")
    try:
        rows = db.execute("SELECT params FROM corpus.corpus_explain(%s, NULL, %s, mode => 'lexical')",
                          [EXT, " ".join(words)]).fetchall()
        assert rows
        for (params,) in rows:
            texts = [p for p in params if isinstance(p, str) and "מילה" in p]
            assert texts == [" ".join(words[:64])]
        db.execute("SET statement_timeout = '20s'")
        db.execute("SELECT * FROM corpus.corpus_hybrid_search(%s, NULL, %s, mode => 'lexical')",
                   [EXT, " ".join(words)]).fetchall()
    finally:
        db.execute("RESET statement_timeout")
        db.execute("RESET pg_corpus.lexical_scorer")


@pytest.mark.parametrize("encoding", ["LATIN1", "SQL_ASCII"])
def test_a_database_not_encoded_in_utf8_is_refused_at_install(cluster, encoding):
    """Every text pg_corpus reads (analysers, BM25 documents, the content rule) is read as UTF-8:
    in a LATIN1 database a non-ASCII word failed deep in a search with an internal error (XX000),
    and SQL_ASCII stores bytes PostgreSQL never checked. CREATE EXTENSION refuses such a database
    with 0A000, a message naming it, a detail and a hint, and leaves nothing of pg_corpus."""
    name = f"pgc_encoding_{encoding.lower()}"
    with psycopg.connect(cluster.uri, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f"CREATE DATABASE \"{name}\" ENCODING '{encoding}' LOCALE 'C' TEMPLATE template0")
    cluster._dbs.append(name)
    conn = cluster.connect(name)
    conn.execute("CREATE EXTENSION vector")
    with pytest.raises(psycopg.Error) as ei:
        conn.execute("CREATE EXTENSION pg_corpus")
    e = ei.value
    assert e.sqlstate == "0A000", (e.sqlstate, str(e))
    assert name in e.diag.message_primary and encoding in e.diag.message_primary, e.diag.message_primary
    assert e.diag.message_detail and "UTF-8" in e.diag.message_detail
    assert e.diag.message_hint and "ENCODING 'UTF8'" in e.diag.message_hint
    assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pg_corpus'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'corpus'").fetchone()[0] == 0
    assert conn.execute("SELECT 1").fetchone() == (1,)
