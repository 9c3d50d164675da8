"""The family of an error comes from its SQLSTATE and the JSON DETAIL the extension writes, never
from its message (which lc_messages may translate); every family is a psycopg error."""
import pickle

import psycopg
import pytest
from psycopg import sql

import pg_corpus
from pg_corpus import errors

FAMILIES = [pg_corpus.PgCorpusError, pg_corpus.UnknownCorpus, pg_corpus.MissingScopeFilter, pg_corpus.BadFilter,
            pg_corpus.BadVector, pg_corpus.InvalidArgument, pg_corpus.PermissionDenied, pg_corpus.ReadOnly,
            pg_corpus.DatabaseUnavailable]


def raised(conn, sqlstate, message, detail=None):
    """The psycopg error of a RAISE with this SQLSTATE, message and DETAIL (a real server's)."""
    options = [sql.SQL("ERRCODE = {}").format(sql.Literal(sqlstate)), sql.SQL("MESSAGE = {}").format(sql.Literal(message))]
    if detail is not None:
        options.append(sql.SQL("DETAIL = {}").format(sql.Literal(detail)))
    body = sql.SQL("BEGIN RAISE EXCEPTION USING {}; END").format(sql.SQL(", ").join(options)).as_string(conn)
    with pytest.raises(psycopg.Error) as e:
        conn.execute(sql.SQL("DO {}").format(sql.Literal(body)))
    return e.value


@pytest.mark.parametrize("cls", FAMILIES)
def test_every_family_is_a_psycopg_error(cls):
    assert issubclass(cls, psycopg.Error) and issubclass(cls, psycopg.DatabaseError)
    err = cls("22023", "m", '{"kind": "missing_scope_filter", "field": "f"}', "h")
    assert (err.sqlstate, err.message, err.hint) == ("22023", "m", "h")
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is cls and str(again) == str(err)


def test_database_unavailable_is_an_operational_error():
    assert issubclass(pg_corpus.DatabaseUnavailable, psycopg.OperationalError)


def test_the_mapping_tables():
    assert errors.BY_SQLSTATE == {"42704": pg_corpus.UnknownCorpus, "22000": pg_corpus.BadVector,
                                  "42501": pg_corpus.PermissionDenied, "25006": pg_corpus.ReadOnly}
    assert errors.BY_KIND == {"missing_scope_filter": pg_corpus.MissingScopeFilter,
                              "bad_filter": pg_corpus.BadFilter, "bad_vector": pg_corpus.BadVector}
    assert errors.family("22023", None) is pg_corpus.InvalidArgument
    assert errors.family("22P02", "not JSON") is pg_corpus.InvalidArgument
    assert errors.family("42703", None) is pg_corpus.PgCorpusError
    assert errors.family("42501", '{"kind": "bad_filter", "field": "source_kind"}') is pg_corpus.BadFilter
    assert errors.family("22004", '{"kind": "bad_vector"}') is pg_corpus.BadVector
    assert errors.family("22004", '{"kind": "something new"}') is pg_corpus.InvalidArgument
    assert errors.family("XX000", "[1, 2]") is pg_corpus.PgCorpusError


@pytest.mark.parametrize("sqlstate,message,detail,family", [
    # the same errors with messages in other languages: the message plays no part
    ("22023", 'le corpus "case_documents" exige un filtre sur "practice_area"',
     '{"kind": "missing_scope_filter", "field": "practice_area"}', pg_corpus.MissingScopeFilter),
    ("42501", "keine Berechtigung für Tabelle passages", None, pg_corpus.PermissionDenied),
    ("42501", '"source_kind" ist die Isolationsspalte', '{"kind": "bad_filter", "field": "source_kind"}',
     pg_corpus.BadFilter),
    ("42704", "el corpus «nope» no existe", None, pg_corpus.UnknownCorpus),
    ("22004", "הווקטור חסר", '{"kind": "bad_vector"}', pg_corpus.BadVector),
    ("25006", "la transazione è di sola lettura", None, pg_corpus.ReadOnly),
    # English words of another family's message choose nothing either
    ("22023", 'corpus "c" requires a filter on "f"', None, pg_corpus.InvalidArgument),
    ("22004", "item_table, embedding_column are required", None, pg_corpus.InvalidArgument),
    ("42703", 'corpus "c" has no filter field "x"', "a human detail", pg_corpus.PgCorpusError),
])
def test_the_family_of_a_real_error_ignores_its_message(conn, sqlstate, message, detail, family):
    err = errors.translate(raised(conn, sqlstate, message, detail))
    assert type(err) is family
    assert (err.sqlstate, err.message, err.detail) == (sqlstate, message, detail)
    assert err.diag.sqlstate == sqlstate and isinstance(err.__cause__, psycopg.Error)
    if family is pg_corpus.MissingScopeFilter:
        assert err.field == "practice_area"


def test_except_psycopg_error_catches_a_client_error(demo_dsn):
    with pg_corpus.Client(demo_dsn) as client:
        with pytest.raises(psycopg.Error) as e:
            client.search("no_such_corpus", None, "x")
    assert isinstance(e.value, pg_corpus.UnknownCorpus) and e.value.diag.sqlstate == "42704"
