"""The bad-input catalogue: every argument of every public function of schema `corpus`, called
with NULL and with values of its type that a careless or hostile caller sends (empty, 1 MB,
extremes, NaN, malformed or deeply nested jsonb, injection strings in keys, values and names,
catalog tables where an item table belongs). Each probe runs in a transaction that is rolled
back; it must either succeed or fail with a PostgreSQL error whose SQLSTATE is not of class XX,
with a hint when pg_corpus raised it, on a backend that is still there, and no probe may have
dropped, created or changed anything outside the probe's own transaction (the victim table
still exists inside it too).

The valid call of each function is written out below; a probe replaces one argument of it.
Functions that are not listed fail the catalogue's completeness test."""
import json

import psycopg
import pytest

SEED = 1212
EXT = "external_precedents"
INJECT = "x'); DROP TABLE victim; --"
INJECT_IDENT = 'victim"; DROP TABLE victim; --'
MB = "ש" * 500_000                       # 1 MB of Hebrew (2 bytes a letter)


def deep(n):
    return "[" * n + "]" * n


# name -> type -> SQL expressions of probe values (each also cast to the type)
VALUES = {
    "text": ["NULL", "''", "' '", f"$q${INJECT}$q$", f"$q${INJECT_IDENT}$q$", f"'{MB}'",
             "E'\\u202e\\u0000'".replace("\\u0000", ""), "repeat('a', 64)", "'NaN'",
             # white space and invisible characters only: no content
             "E'\\t\\n\\u00a0\\u3000\\u200b\\u200f\\ufeff'"],
    "name": ["NULL", "''", f"$q${INJECT_IDENT}$q$", "repeat('n', 200)"],
    "integer": ["NULL", "-1", "0", "2147483647", "-2147483648"],
    "bigint": ["NULL", "-1", "0", "9223372036854775807"],
    "double precision": ["NULL", "'NaN'", "'Infinity'", "'-Infinity'", "-1", "1e308"],
    "boolean": ["NULL"],
    "jsonb": ["NULL", "'[]'", "'\"str\"'", "'123'", "'null'", f"'{deep(100)}'", f"'{deep(2000)}'",
              "(SELECT jsonb_object_agg('k' || i, i) FROM generate_series(1, 10000) i)",
              "'" + json.dumps({"court": INJECT}).replace("'", "''") + "'",
              "'" + json.dumps({INJECT_IDENT: "x"}).replace("'", "''") + "'",
              "'{\"court\": {\"gte\": [1, {\"x\": null}]}}'",
              "E'{\"\\u200b\": \"\\u00a0\"}'"],
    "text[]": ["NULL", "'{}'", "'{NULL}'", "ARRAY(SELECT 'x' || i FROM generate_series(1, 1000) i)",
               f"ARRAY[$q${INJECT_IDENT}$q$]"],
    "regclass": ["NULL", "'pg_catalog.pg_class'", "'corpus.corpora'", "'corpus.embedding_queue'", "'victim'"],
    "vector": ["NULL", "'[1,2,3]'", "array_fill(0, ARRAY[384])::vector",
               "array_fill(1e30::real, ARRAY[384])::vector", "array_fill(1, ARRAY[16000])::vector"],
    "interval": ["NULL", "'-1 day'", "'0'", "'100000 years'"],
    "regconfig": ["NULL", "'english'"],
    # a value whose type is the argument's (the call does not cast it)
    "anyelement": ["NULL::integer", "NULL::text", "'x'::text", "0::bigint", "NULL::bigint[]", "'{}'::jsonb",
                   "NULL::pg_catalog.regclass", "ROW(1, 2)"],
}

V384 = "(SELECT embedding FROM precedent_chunks WHERE embedding IS NOT NULL ORDER BY id LIMIT 1)"
ITEM = "(SELECT id::text FROM precedent_chunks ORDER BY id LIMIT 1)"

# function -> [(argument, type, valid SQL expression)], in signature order
CALLS = {
    "bm25_document": [("document", "text", "'פסק דין'"), ("language", "text", "'hebrew'")],
    "bm25_query": [("query", "text", "'פסק דין'"), ("language", "text", "'hebrew'")],
    "bm25_snippet": [("document", "text", "'ובבית המשפט העליון'"), ("query", "text", "'בית'"),
                     ("language", "text", "'hebrew'"), ("max_chars", "integer", "240"),
                     ("start_mark", "text", "'<b>'"), ("stop_mark", "text", "'</b>'")],
    "corpus_snippet": [("corpus", "text", f"'{EXT}'"), ("source", "text", "'chunks'"),
                       ("content", "text", "'ובבית המשפט העליון'"), ("query_text", "text", "'בית'"),
                       ("max_chars", "integer", "240"), ("start_mark", "text", "'<b>'"), ("stop_mark", "text", "'</b>'")],
    "bm25_index_check": [("index", "regclass", "'precedent_chunks_bm25_idx'"), ("heapallindexed", "boolean", "true")],
    "corpus_add_source": [
        ("corpus", "text", "'probe_c'"), ("source", "text", "'items'"), ("item_table", "regclass", "'probe_items'"),
        ("text_column", "text", "'body'"), ("embedding_column", "text", "'emb'"), ("tsv_column", "text", "'tsv'"),
        ("id_column", "text", "'id'"), ("parent_table", "regclass", "'probe_parent'"), ("parent_fk", "text", "'pid'"),
        ("parent_key", "text", "'id'"), ("parent_required", "text[]", "'{name}'"), ("rule", "jsonb", "'{}'"),
        ("locator", "jsonb", "'{\"n\": \"n\"}'"), ("metadata", "jsonb", "'{\"name\": \"parent.name\"}'"),
        ("min_length", "integer", "5"), ("ts_config", "regconfig", "'simple'"), ("distance", "text", "'cosine'"),
        ("semantic_weight", "double precision", "1"), ("lexical_weight", "double precision", "1"),
        ("embedding_inputs", "text[]", "'{body}'"), ("embedding_model", "text", "'e5'"),
        ("language", "text", "NULL"), ("space", "text", "NULL")],
    "corpus_alter": [("name", "text", f"'{EXT}'"), ("isolation", "jsonb", "NULL"),
                     ("required_filters", "text[]", "NULL"), ("filter_fields", "jsonb", "NULL"),
                     ("description", "text", "'altered'"), ("spaces", "jsonb", "NULL"),
                     ("evidence", "jsonb", "'{\"rare_share\": 0.05}'"),
                     ("must_include", "jsonb", "'[{\"name\": \"rules\", \"source\": \"halachot\", \"top\": 2}]'"),
                     ("graph", "jsonb", "'{\"seeds\": 3}'"), ("audit", "jsonb", "'{\"enabled\": true}'"),
                     ("ranking", "jsonb", "'{\"rrf_k\": 30, \"window\": 60, \"weights\": {\"halachot\": {\"lexical\": 2}}}'")],
    "corpus_compare_queries": [("run_a", "bigint", "(SELECT min(id) FROM corpus.eval_runs)"),
                               ("run_b", "bigint", "(SELECT max(id) FROM corpus.eval_runs)"),
                               ("metric", "text", "'ndcg'")],
    "corpus_compare_runs": [("run_a", "bigint", "(SELECT min(id) FROM corpus.eval_runs)"),
                            ("run_b", "bigint", "(SELECT max(id) FROM corpus.eval_runs)"),
                            ("trials", "integer", "200")],
    "corpus_create": [("name", "text", "'probe_new'"), ("isolation", "jsonb", "'{}'"),
                      ("required_filters", "text[]", "'{}'"), ("filter_fields", "jsonb", "'{}'"),
                      ("description", "text", "'d'"), ("spaces", "jsonb", "'{}'"), ("evidence", "jsonb", "'{}'"),
                      ("must_include", "jsonb", "'[]'"), ("graph", "jsonb", "'{}'"), ("audit", "jsonb", "'{}'")],
    "corpus_audit_purge": [("older_than", "interval", "'30 days'"), ("corpus", "text", f"'{EXT}'")],
    "corpus_drop": [("name", "text", "'probe_c'"), ("if_exists", "boolean", "false")],
    "corpus_drop_source": [("corpus", "text", f"'{EXT}'"), ("source", "text", "'halachot'")],
    "corpus_embedding_claim": [("batch_size", "integer", "4"), ("lease", "interval", "'1 minute'"),
                               ("worker", "text", "'w'"), ("only_table", "regclass", "NULL")],
    "corpus_embedding_complete": [("item_table", "regclass", "'precedent_chunks'"), ("embedding_column", "name", "'embedding'"),
                                  ("item_id", "text", ITEM), ("version", "bigint", "1"),
                                  ("embedding", "vector", V384), ("model", "text", "NULL")],
    "corpus_embedding_enqueue": [("item_table", "regclass", "'precedent_chunks'"), ("embedding_column", "name", "'embedding'"),
                                 ("only_missing", "boolean", "true")],
    "corpus_embedding_fail": [("item_table", "regclass", "'precedent_chunks'"), ("embedding_column", "name", "'embedding'"),
                              ("item_id", "text", ITEM), ("version", "bigint", "1"), ("error", "text", "'boom'"),
                              ("max_attempts", "integer", "5")],
    "corpus_embedding_release": [("item_table", "regclass", "'precedent_chunks'"), ("embedding_column", "name", "'embedding'"),
                                 ("item_id", "text", ITEM), ("version", "bigint", "1"), ("worker", "text", "NULL")],
    "corpus_embedding_retry_dead": [("only_table", "regclass", "NULL")],
    "corpus_evaluate": [("gold_set", "text", "'probe_gold'"), ("modes", "text[]", "'{hybrid}'"), ("k", "integer", "5"),
                        ("max_per_parent", "integer", "NULL"), ("rrf_k", "integer", "60"),
                        ("candidates", "integer", "NULL"), ("store", "boolean", "false"),
                        ("extra_queries", "boolean", "false"), ("evidence", "boolean", "false"),
                        ("expand", "boolean", "false")],
    "corpus_explain": [("corpus", "text", f"'{EXT}'"), ("query_vec", "vector", V384), ("query_text", "text", "'פסק'"),
                       ("k", "integer", "10"), ("filters", "jsonb", "'{}'"), ("mode", "text", "'hybrid'"),
                       ("candidates", "integer", "NULL"), ("include_stale", "boolean", "false"),
                       ("extra_queries", "jsonb", "'[{\"text\": \"פסק דין\"}]'"), ("filter_mode", "text", "'lenient'"),
                       ("query_vectors", "jsonb", "NULL"), ("evidence", "boolean", "true")],
    "corpus_find_similar": [("corpus", "text", f"'{EXT}'"), ("source", "text", "'chunks'"), ("item_id", "text", ITEM),
                            ("k", "integer", "10"), ("filters", "jsonb", "'{}'"), ("mode", "text", "'hybrid'"),
                            ("max_per_parent", "integer", "3"), ("exclude_parent", "boolean", "false"),
                            ("candidates", "integer", "NULL"), ("rrf_k", "integer", "60"),
                            ("include_stale", "boolean", "false"), ("filter_mode", "text", "'lenient'")],
    "corpus_check_filters": [("corpus", "text", f"'{EXT}'"), ("filters", "jsonb", "'{\"court\": \"x\", \"judge\": 1}'"),
                             ("filter_mode", "text", "'lenient'")],
    "corpus_gold_set_create": [("name", "text", "'probe_gold2'"), ("corpus", "text", f"'{EXT}'"),
                               ("level", "text", "'item'"), ("description", "text", "NULL")],
    "corpus_health_check": [("corpus", "text", f"'{EXT}'")],
    "corpus_hybrid_search": [("corpus", "text", f"'{EXT}'"), ("query_vec", "vector", V384), ("query_text", "text", "'פסק'"),
                             ("k", "integer", "10"), ("filters", "jsonb", "'{}'"), ("mode", "text", "'hybrid'"),
                             ("max_per_parent", "integer", "3"), ("candidates", "integer", "NULL"),
                             ("rrf_k", "integer", "60"), ("include_stale", "boolean", "false"),
                             ("feedback", "boolean", "NULL"),
                             ("extra_queries", "jsonb", "'[{\"text\": \"פסק דין\", \"weight\": 0.5}]'"),
                             ("filter_mode", "text", "'strict'"), ("query_vectors", "jsonb", "'{}'"),
                             ("evidence", "boolean", "true"), ("expand", "boolean", "true"),
                             ("offset", "integer", "0"), ("query_model", "text", "NULL")],
    "corpus_hybrid_search_typed": [("id_type", "anyelement", "NULL::bigint"), ("corpus", "text", f"'{EXT}'"),
                                   ("query_vec", "vector", V384), ("query_text", "text", "'פסק'"),
                                   ("k", "integer", "10"), ("filters", "jsonb", "'{}'"), ("mode", "text", "'hybrid'"),
                                   ("max_per_parent", "integer", "3"), ("candidates", "integer", "NULL"),
                                   ("rrf_k", "integer", "60"), ("include_stale", "boolean", "false"),
                                   ("feedback", "boolean", "NULL"), ("extra_queries", "jsonb", "NULL"),
                                   ("filter_mode", "text", "'strict'"), ("query_vectors", "jsonb", "'{}'"),
                                   ("evidence", "boolean", "NULL"), ("expand", "boolean", "false"),
                                   ("offset", "integer", "10"), ("query_model", "text", "'e5'")],
    "corpus_add_edges": [("corpus", "text", f"'{EXT}'"), ("name", "text", "'cites2'"),
                         ("edge_table", "regclass", "'probe_citations'"), ("from_source", "text", "'chunks'"),
                         ("from_column", "text", "'citing'"), ("to_source", "text", "'halachot'"),
                         ("to_column", "text", "'cited'")],
    "corpus_drop_edges": [("corpus", "text", f"'{EXT}'"), ("name", "text", "'cites'")],
    "corpus_alter_source": [("corpus", "text", f"'{EXT}'"), ("source", "text", "'halachot'"),
                            ("text_column", "text", "'rule'"), ("embedding_column", "text", "'embedding'"),
                            ("tsv_column", "text", "'rule_tsv'"), ("id_column", "text", "'id'"),
                            ("parent_table", "regclass", "'case_law'"), ("parent_fk", "text", "'case_law_id'"),
                            ("parent_key", "text", "'id'"), ("parent_required", "text[]", "'{case_number}'"),
                            ("rule", "jsonb", "'{\"review_status\": \"approved\"}'"), ("locator", "jsonb", "'{}'"),
                            ("metadata", "jsonb", "'{}'"), ("min_length", "integer", "20"),
                            ("ts_config", "regconfig", "'simple'"), ("distance", "text", "'cosine'"),
                            ("semantic_weight", "double precision", "1"), ("lexical_weight", "double precision", "1"),
                            ("embedding_inputs", "text[]", "'{rule}'"), ("embedding_model", "text", "NULL"),
                            ("language", "text", "'hebrew'")],
    "corpus_calibrate_evidence": [("gold_set", "text", "'probe_gold'"), ("quantile", "double precision", "0.9"),
                                  ("apply", "boolean", "true"), ("candidates", "integer", "50")],
    "corpus_fetch": [("corpus", "text", f"'{EXT}'"), ("source", "text", "'chunks'"),
                     ("item_id", "text", f"(SELECT item_id FROM corpus.corpus_hybrid_search('{EXT}', NULL, 'פסק', "
                                         "mode => 'lexical') WHERE source = 'chunks' LIMIT 1)"),
                     ("filters", "jsonb", "'{}'")],
    "corpus_list": [],
    "corpus_embedding_build": [("item_table", "regclass", "'precedent_chunks'"),
                               ("embedding_column", "name", "'embedding'"), ("new_column", "name", "'embedding_v3'"),
                               ("model", "text", "'probe-model'"), ("auto_switch", "boolean", "true")],
    "corpus_embedding_build_cancel": [("item_table", "regclass", "'precedent_chunks'"),
                                      ("new_column", "name", "'embedding_v2'")],
    "corpus_embedding_switch": [("item_table", "regclass", "'precedent_chunks'"),
                                ("embedding_column", "name", "'embedding'"), ("new_column", "name", "'embedding_v2'"),
                                ("force", "boolean", "true")],
    "corpus_why_not": [("corpus", "text", f"'{EXT}'"), ("source", "text", "'chunks'"),
                       ("item_id", "text", f"(SELECT item_id FROM corpus.corpus_hybrid_search('{EXT}', NULL, 'פסק', "
                                           "mode => 'lexical') WHERE source = 'chunks' LIMIT 1)"),
                       ("query_vec", "vector", V384), ("query_text", "text", "'פסק'"), ("k", "integer", "10"),
                       ("filters", "jsonb", "'{}'"), ("mode", "text", "'hybrid'"), ("max_per_parent", "integer", "3"),
                       ("evidence", "boolean", "NULL"), ("include_stale", "boolean", "false")],
    "corpus_tune": [("corpus", "text", f"'{EXT}'"), ("gold_set", "text", "'probe_gold'"), ("folds", "integer", "2"),
                    ("budget_seconds", "double precision", "30"), ("apply", "boolean", "true"),
                    ("alpha", "double precision", "0.5"), ("seed", "bigint", "1"), ("k", "integer", "5")],
    "corpus_tune_revert": [("corpus", "text", f"'{EXT}'")],
    "corpus_refresh_lexical_stats": [("corpus", "text", f"'{EXT}'"), ("only_stale", "boolean", "false"),
                                     ("stale_fraction", "double precision", "0.1")],
}
# A procedure that commits in batches: probed with NULL arguments only, outside a transaction.
PROCEDURES = {
    "corpus_set_embedding_model": [("item_table", "regclass", "'precedent_chunks'"),
                                   ("embedding_column", "name", "'embedding'"), ("model", "text", "'e5-small'"),
                                   ("batch_size", "integer", "10000")],
    "corpus_refresh_lexical_stats_each": [("only_stale", "boolean", "false"),
                                          ("stale_fraction", "double precision", "0.1")],
    "corpus_reanalyze": [("corpus", "text", f"'{EXT}'"), ("source", "text", "'chunks'"),
                         ("batch_size", "integer", "10000")],
}
# Errors PostgreSQL raises itself before or around pg_corpus' code (input functions, casts):
# not ours to give a hint.
POSTGRES_OWN = {"int.c", "int8.c", "float.c", "numutils.c", "regproc.c", "namespace.c", "vector.c", "jsonb.c",
                "jsonfuncs.c", "json.c", "timestamp.c", "datetime.c", "execExprInterp.c", "aclchk.c",
                "arrayfuncs.c", "mbutils.c", "varlena.c", "name.c", "parse_coerce.c", "ts_parse.c"}


def call_sql(function, args, replace=None):
    parts = []
    for name, typ, valid in args:
        value = replace[1] if replace and replace[0] == name else valid
        parts.append(f'"{name}" => ({value})' + ("" if typ == "anyelement" else f"::{typ}"))
    return f"SELECT * FROM corpus.{function}({', '.join(parts)})"


def probes():
    out = []
    for function, args in CALLS.items():
        out.append(pytest.param(function, None, id=f"{function}-valid"))
        for name, typ, _ in args:
            for i, value in enumerate(VALUES[typ]):
                out.append(pytest.param(function, (name, value), id=f"{function}-{name}-{i}"))
    return out


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_bad_input")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=30, n_documents=8))
    conn.execute("""
        CREATE TABLE victim (id int);
        ALTER TABLE precedent_chunks ADD COLUMN embedding_v2 vector(384), ADD COLUMN embedding_v3 vector(384);
        SELECT corpus.corpus_embedding_build('precedent_chunks', 'embedding', 'embedding_v2', 'probe-model');
        CREATE TABLE probe_parent (id bigint PRIMARY KEY, name text);
        CREATE TABLE probe_items (id bigint PRIMARY KEY, pid bigint, body text, n text,
                                  tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
                                  emb vector(384));
        SELECT corpus.corpus_create('probe_c');
        CREATE TABLE probe_citations (citing bigint, cited bigint);
        INSERT INTO probe_citations SELECT c.id, h.id FROM precedent_chunks c, halachot h
         WHERE c.id % 7 = 0 AND h.id % 5 = 0 LIMIT 200;
        SELECT corpus.corpus_add_edges('external_precedents', 'cites', 'probe_citations', 'chunks', 'citing',
                                       'halachot', 'cited');
        SELECT corpus.corpus_alter('external_precedents',
                                   evidence => '{"vector": {"default": {"max_distance": 0.9, "max_gap": 0.5}}}');
        SELECT corpus.corpus_gold_set_create('probe_gold', 'external_precedents', 'item');""")
    conn.execute("""INSERT INTO corpus.gold_queries (gold_set, query_id, query_text, query_vec, filters)
                    SELECT 'probe_gold', 'q' || id, left(content, 40), embedding, '{}'
                      FROM precedent_chunks WHERE embedding IS NOT NULL ORDER BY id LIMIT 3""")
    conn.execute("""INSERT INTO corpus.gold_judgments (gold_set, query_id, target, grade)
                    SELECT 'probe_gold', 'q' || id, 'chunks:' || id, 1
                      FROM precedent_chunks WHERE embedding IS NOT NULL ORDER BY id LIMIT 3""")
    # an applied tuning for corpus_tune_revert to revert: it replaced the settings as they are
    conn.execute("""INSERT INTO corpus.tune_runs (gold_set, corpus, started_at, queries, folds, seed, baseline_ndcg,
                        tuned_ndcg, p_value, settings, previous, fold_settings, applied)
                    SELECT 'probe_gold', 'external_precedents', now(), 3, 2, 0, 0.5, 0.6, 0.01, '{}', l.ranking
                           || jsonb_build_object('weights', (SELECT jsonb_object_agg(s->>'source', jsonb_build_object(
                                  'semantic', s->'semantic_weight', 'lexical', s->'lexical_weight'))
                                  FROM jsonb_array_elements(l.sources) s)), '[]', true
                      FROM corpus.corpus_list() l WHERE l.name = 'external_precedents'""")
    conn.execute("SELECT * FROM corpus.corpus_evaluate('probe_gold', modes => '{hybrid}')")
    conn.execute("SELECT * FROM corpus.corpus_evaluate('probe_gold', modes => '{lexical}')")
    yield conn


def state(conn):
    return conn.execute("""
        SELECT (SELECT count(*) FROM corpus.corpora), (SELECT count(*) FROM corpus.sources),
               (SELECT count(*) FROM corpus.embedding_queue), (SELECT count(*) FROM corpus.eval_runs),
               to_regclass('victim') IS NOT NULL, (SELECT count(*) FROM pg_class)""").fetchone()


def check(conn, sql, pid):
    """Run one probe in a savepoint; returns the error (or None)."""
    err = None
    conn.execute("SAVEPOINT probe")
    try:
        conn.execute("SET LOCAL statement_timeout = '60s'")
        conn.execute(sql).fetchall()
    except psycopg.Error as e:
        err = e
        assert e.sqlstate is not None, f"no SQLSTATE (backend lost?): {e!r}"
        conn.execute("ROLLBACK TO SAVEPOINT probe")
    assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] == pid, "the backend was replaced"
    assert conn.execute("SELECT to_regclass('victim') IS NOT NULL").fetchone()[0], "the victim table was dropped"
    if err is not None:
        d = err.diag
        assert not err.sqlstate.startswith("XX"), f"internal error {err.sqlstate}: {d.message_primary}"
        assert err.sqlstate != "57014", f"the probe ran into the statement timeout: {sql[:200]}"
        assert (d.message_primary or "").strip()
        if d.source_file not in POSTGRES_OWN:
            assert (d.message_hint or "").strip(), \
                f"no hint for {err.sqlstate} {d.message_primary!r} ({d.source_file}:{d.source_function})"
    return err


def test_the_catalogue_covers_every_public_function(db):
    public = {r[0] for r in db.execute(
        "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = 'corpus' AND p.proname NOT LIKE '\\_%'")}
    assert public == set(CALLS) | set(PROCEDURES)
    for function, args in {**CALLS, **PROCEDURES}.items():
        names = db.execute("SELECT coalesce(proargnames[1:pronargs], '{}') FROM pg_proc p JOIN pg_namespace n "
                           "ON n.oid = p.pronamespace WHERE n.nspname = 'corpus' AND p.proname = %s",
                           [function]).fetchone()[0]
        assert names == [a[0] for a in args], function
    assert len(probes()) >= 200


@pytest.mark.parametrize("function,replace", probes())
def test_probe(cluster, db, function, replace):
    conn = cluster.connect(db.info.dbname, autocommit=False)
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    before = state(conn)
    sql = call_sql(function, CALLS[function], replace)
    err = check(conn, sql, pid)
    conn.rollback()
    assert state(conn) == before, "a rolled-back probe left changes behind"
    if replace is None:
        assert err is None, f"the valid call fails: {err}"
    conn.close()


@pytest.mark.parametrize("procedure,argument", [(p, a[0]) for p, args in PROCEDURES.items() for a in args])
def test_procedure_null_arguments(cluster, db, procedure, argument):
    conn = cluster.connect(db.info.dbname)
    before = state(conn)
    parts = [f"{n} => {'NULL' if n == argument else v}::{t}" for n, t, v in PROCEDURES[procedure]]
    with pytest.raises(psycopg.Error) as e:
        conn.execute(f"CALL corpus.{procedure}({', '.join(parts)})")
    assert not e.value.sqlstate.startswith("XX") and e.value.diag.message_hint
    assert state(conn) == before
    conn.close()
