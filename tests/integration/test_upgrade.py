"""ALTER EXTENSION pg_corpus UPDATE from every released version (sql/releases/) along the
scripts in sql/upgrade/: a database that ran the old release with corpora and data ends up with
exactly the objects a fresh CREATE EXTENSION makes (every function's definition, table,
constraint, index, trigger, policy, event trigger and grant), its searches answer as before, its
re-embed triggers keep queueing and follow renames, and its catalog is untouched."""
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
RELEASES = sorted((ROOT / "sql" / "releases").glob("pg_corpus--*.sql"))
CURRENT = re.search(r'^version = "([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)


def version_of(path):
    return re.fullmatch(r"pg_corpus--(.+)\.sql", path.name).group(1)


SIGNATURE = {
    "functions": """
        SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid), coalesce(p.proacl::text, ''),
               pg_get_userbyid(p.proowner) = current_user
          FROM pg_proc p WHERE p.pronamespace = 'corpus'::regnamespace AND p.prokind <> 'a'
           AND p.proname NOT LIKE '\\_embedding\\_trigger\\_%'""",
    "columns": """
        SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               coalesce(pg_get_expr(d.adbin, d.adrelid), ''), coalesce(a.attacl::text, '')
          FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
          LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
         WHERE c.relnamespace = 'corpus'::regnamespace""",
    "relations": """
        SELECT c.relname, c.relkind, c.relrowsecurity, c.relforcerowsecurity, coalesce(c.relacl::text, '')
          FROM pg_class c WHERE c.relnamespace = 'corpus'::regnamespace""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
         WHERE connamespace = 'corpus'::regnamespace""",
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'corpus'",
    "triggers": """
        SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) FROM pg_trigger
         WHERE NOT tgisinternal AND tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'corpus'::regnamespace)""",
    "policies": "SELECT tablename, policyname, permissive, roles::text, cmd, qual, with_check FROM pg_policies "
                "WHERE schemaname = 'corpus'",
    "event_triggers": "SELECT evtname, evtevent, evtenabled, evttags::text, evtfoid::regproc::text FROM pg_event_trigger",
    "members": """
        SELECT pg_describe_object(classid, objid, objsubid) FROM pg_depend
         WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
           AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_corpus')""",
    "schema": "SELECT nspname, coalesce(nspacl::text, '') FROM pg_namespace WHERE nspname = 'corpus'",
}


def signature(conn):
    return {name: sorted(tuple(map(str, r)) for r in conn.execute(sql).fetchall()) for name, sql in SIGNATURE.items()}


def searches(conn, pgc, queries):
    out = []
    for corpus, vec, text, kw in queries:
        out.append([(r["item_id"], r["rank"], r["semantic_rank"], r["lexical_rank"])
                    for r in pgc.search(conn, corpus, vec, text, _columns=pgc.SEARCH_COLUMNS_0_2, **kw)])
    return out


@pytest.fixture(scope="module")
def fresh(cluster):
    conn = cluster.create_db("pgc_upgrade_fresh")
    return signature(conn)


def test_there_is_a_release_to_upgrade_from_and_a_path_to_the_current_version():
    assert RELEASES, "sql/releases/ holds the install script of every released version"
    scripts = {p.name for p in (ROOT / "sql" / "upgrade").glob("pg_corpus--*--*.sql")}
    for release in RELEASES:
        v = version_of(release)
        assert v != CURRENT
        # a chain of upgrade scripts from v to the current version
        seen = {v}
        while v != CURRENT:
            nxt = [re.fullmatch(rf"pg_corpus--{re.escape(v)}--(.+)\.sql", s) for s in scripts]
            nxt = [m.group(1) for m in nxt if m]
            assert len(nxt) == 1, f"no single upgrade script from {v}: {sorted(scripts)}"
            v = nxt[0]
            assert v not in seen
            seen.add(v)


@pytest.mark.parametrize("release", RELEASES, ids=[version_of(p) for p in RELEASES])
def test_update_from_a_release_with_corpora_and_data(cluster, pgc, fresh, release):
    name = f"pgc_upgrade_{version_of(release).replace('.', '_')}"
    conn = cluster.create_db(name, extensions=False)
    conn.execute("CREATE EXTENSION vector")
    assert re.fullmatch(r"[0-9.]+", version_of(release))
    conn.execute(f"CREATE EXTENSION pg_corpus VERSION '{version_of(release)}'")
    data = pgc.generate_legal_data(seed=23, n_cases=40, n_documents=10)
    pgc.load_legal(conn, data)
    rng = np.random.default_rng(5)
    queries = []
    for corpus in ("external_precedents", "internal_decisions"):
        for i in range(4):
            row = data["precedent_chunks"][int(rng.integers(len(data["precedent_chunks"])))]
            words = " ".join(row["content"].split()[:4])
            queries.append((corpus, row["embedding"], words, {}))
            queries.append((corpus, None, words, {"mode": "lexical"}))
    chunk = data["precedent_chunks"][0]["id"]
    conn.execute("UPDATE precedent_chunks SET content = content || ' amended' WHERE id = %s", [chunk])
    queued = conn.execute("SELECT item_id, reason, version FROM corpus.embedding_queue ORDER BY 1").fetchall()
    assert queued and queued[0][1] == "text_changed"
    before = searches(conn, pgc, queries)
    # the release's SQL definitions call the installed (newer) library until the update
    assert conn.execute("SELECT count(*) FROM corpus.corpus_explain('external_precedents', NULL, %s, "
                        "mode => 'lexical')", [queries[0][2]]).fetchone()[0] >= 1
    conn.execute("SELECT corpus.corpus_gold_set_create('upgrade_gold', 'external_precedents')")
    conn.execute("INSERT INTO corpus.gold_queries (gold_set, query_id, query_text) VALUES ('upgrade_gold', 'q1', %s)",
                 [queries[0][2]])
    conn.execute("INSERT INTO corpus.gold_judgments (gold_set, query_id, target, grade) "
                 "VALUES ('upgrade_gold', 'q1', %s, 1)", [str(data["precedent_chunks"][0]["id"])])
    assert conn.execute("SELECT queries FROM corpus.corpus_evaluate('upgrade_gold', modes => '{lexical}', "
                        "store => false)").fetchone()[0] == 1
    catalog = conn.execute("SELECT to_jsonb(s) - 'created_at' FROM corpus.sources s ORDER BY corpus, name").fetchall()
    corpora = conn.execute("SELECT to_jsonb(c) - 'created_at' FROM corpus.corpora c ORDER BY name").fetchall()

    conn.execute("ALTER EXTENSION pg_corpus UPDATE")
    assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_corpus'").fetchone()[0] == CURRENT
    after = signature(conn)
    for part in SIGNATURE:
        assert after[part] == fresh[part], f"{part} differs from a fresh install after the update from {release.name}"

    # the catalog and the queue are untouched, searches answer as before
    def kept(rows, before):   # the columns the release had (an update may add columns)
        return [tuple({k: v for k, v in r[0].items() if k in b[0]} for _ in [0]) for r, b in zip(rows, before)]

    # (but for the attribute numbers the update records, so that renames are followed)
    now = conn.execute("SELECT to_jsonb(s) - 'created_at' || jsonb_build_object('column_types', s.column_types - "
                       "'attnums') FROM corpus.sources s ORDER BY corpus, name").fetchall()
    assert len(now) == len(catalog) and kept(now, catalog) == catalog
    assert conn.execute("SELECT bool_and(s.column_types #>> '{attnums,item,id}' IS NOT NULL) "
                        "FROM corpus.sources s").fetchone()[0]
    now = conn.execute("SELECT to_jsonb(c) - 'created_at' FROM corpus.corpora c ORDER BY name").fetchall()
    assert len(now) == len(corpora) and kept(now, corpora) == corpora
    assert conn.execute("SELECT item_id, reason, version FROM corpus.embedding_queue ORDER BY 1").fetchall() == queued
    assert searches(conn, pgc, queries) == before
    health = conn.execute("SELECT \"check\", status FROM corpus.corpus_health_check() WHERE status = 'fail'").fetchall()
    assert health == []

    # the old slots' triggers keep the embeddings honest, with the current release's behaviour
    other = data["precedent_chunks"][1]["id"]
    conn.execute("UPDATE precedent_chunks SET content = content || ' again' WHERE id = %s", [other])
    assert conn.execute("SELECT reason FROM corpus.embedding_queue WHERE item_id = %s", [str(other)]
                        ).fetchone()[0] == "text_changed"
    claimed = conn.execute("SELECT item_table::text, embedding_column, item_id, version "
                           "FROM corpus.corpus_embedding_claim(1000)").fetchall()
    assert {str(chunk), str(other)} <= {c[2] for c in claimed}
    vec = pgc.vec_text(pgc.random_unit_vectors(rng, 1, pgc.DIM)[0])
    for table, column, item, version in claimed:
        assert conn.execute("SELECT corpus.corpus_embedding_complete(%s::regclass, %s, %s, %s, %s::vector)",
                            [table, column, item, version, vec]).fetchone()[0] == "stored"
    assert conn.execute("SELECT count(*) FROM corpus.embedding_queue").fetchone()[0] == 0
    conn.execute("ALTER TABLE precedent_chunks RENAME COLUMN content TO body")
    conn.execute("UPDATE precedent_chunks SET body = body || ' renamed' WHERE id = %s", [chunk])
    assert conn.execute("SELECT reason FROM corpus.embedding_queue WHERE item_id = %s", [str(chunk)]
                        ).fetchone()[0] == "text_changed"
