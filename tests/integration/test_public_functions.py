"""Every function of the extension a plain role may execute answers a direct call — with NULL
arguments, empty values or as a trigger function called from SQL — with a result or a
PostgreSQL error of a real SQLSTATE: never an internal error (XX000), never a crash."""
import psycopg
import pytest

ROLE = "pgc_public_caller"
# values to try for each argument type, besides NULL
SAMPLES = {
    "text": ["''", "'x'"], "jsonb": ["'{}'", "'[]'"], "integer": ["0", "-1"], "bigint": ["0"],
    "boolean": ["true"], "double precision": ["0"], "real[]": ["'{}'"], "text[]": ["'{}'"],
    "regclass": ["'pg_class'"], "name": ["'x'"], "tsvector": ["''"],
}


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_public_functions")
    conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
    conn.execute(f"CREATE ROLE {ROLE}")
    yield conn
    pgc.drop_roles(conn, (ROLE,))
    conn.close()


def callable_functions(db):
    """(signature, argument types, kind) of every function or procedure in the extension that
    the plain role may execute."""
    return db.execute(f"""
        SELECT p.oid::regprocedure::text, coalesce(array_agg(format_type(t, NULL) ORDER BY n)
                                              FILTER (WHERE t IS NOT NULL), '{{}}'), p.prokind, p.proname::text,
               p.prorettype = 'trigger'::regtype
          FROM pg_proc p
          JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_corpus'
          LEFT JOIN LATERAL unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, n) ON true
         WHERE has_function_privilege('{ROLE}', p.oid, 'EXECUTE')
         GROUP BY p.oid ORDER BY 1""").fetchall()


def test_every_function_a_plain_role_may_call_answers_with_a_real_sqlstate(db):
    functions = callable_functions(db)
    assert len(functions) > 20, functions
    internal = []
    calls = 0
    for signature, types, kind, name, is_trigger in functions:
        variants = [["NULL"] * len(types)]
        for i, ty in enumerate(types):
            for v in SAMPLES.get(ty, []):
                args = ["NULL"] * len(types)
                args[i] = v
                variants.append(args)
        for args in variants:
            cast = ", ".join(f"{a}::{t}" for a, t in zip(args, types))
            sql = f"CALL corpus.{name}({cast})" if kind == "p" else f"SELECT corpus.{name}({cast})"
            calls += 1
            db.execute(f"SET ROLE {ROLE}")
            try:
                with db.transaction():
                    db.execute("SET LOCAL statement_timeout = '20s'")
                    db.execute(sql).fetchall() if kind != "p" else db.execute(sql)
                assert not is_trigger, f"{signature} ran outside a trigger"
            except psycopg.errors.QueryCanceled:
                internal.append((sql, "timeout"))
            except psycopg.Error as e:
                if e.sqlstate is None or e.sqlstate[:2] in ("XX", "58"):
                    internal.append((sql, e.sqlstate, str(e)[:200]))
            finally:
                db.execute("RESET ROLE")
    assert calls > len(functions)
    assert internal == [], internal
    # the backend is alive
    assert db.execute("SELECT 1").fetchone() == (1,)
