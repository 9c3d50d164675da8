"""pg_corpus on Citus: a coordinator and two workers on loopback, the legal schema
distributed (case law by id, its chunks and halachot colocated by case_law_id, case documents
by document_id), and the same rows in a single-node database.

* every search mode returns exactly what the single node returns, ties included (the slices
  are small, so the semantic branch is exact on both; the approximate form is checked for
  isolation and recall separately);
* re-embedding works end to end from the coordinator: a text change on the coordinator queues
  the item on the node holding its shard (not on the coordinator), the search stops using its
  stale embedding, a claim from the coordinator hands out its new text, a completion from the
  coordinator stores the embedding there, and the next search finds it by it; also through the
  reference worker (pg-corpus-worker) run against the coordinator;
* the health check and corpus_explain run on the coordinator; a statement Citus sends to a
  worker gets a clear 0A000 instead of "corpus does not exist";
* writes to distributed item tables never fail because of pg_corpus (multi-shard updates
  commit in two phases, where a NOTIFY would make PREPARE fail).

The isolation probes (the leak regression and the randomised isolation test) run on Citus in
test_citus_isolation.py. Run by the Citus layer of scripts/test.sh (scripts/citus.sh builds
Citus); the default integration layer leaves these two files out.
"""
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest

import citus_support as cs

SEED = 1313
ROOT = cs.ROOT
WORKER = Path(sys.executable).with_name("pg-corpus-worker")   # the pg_corpus package's command
FLOAT_COLUMNS = ("score", "semantic_distance", "lexical_score")


@pytest.fixture(scope="module")
def dbs(cluster, citus_cluster, pgc):
    data = pgc.generate_legal_data(SEED, n_cases=160, n_documents=40)
    single = cluster.create_db("pgc_citus_single")
    pgc.load_legal(single, data)
    dist = citus_cluster.create_db("pgc_citus")
    cs.load_legal_distributed(dist, data, pgc.copy_rows, pgc.LEGAL_COLUMNS)
    return dict(single=single, dist=dist, data=data, citus=citus_cluster)


def queries(data, pgc, n, seed):
    return cs.near_chunk_queries(data, n, seed, pgc.unit)


def same_rows(a, b):
    """Problems between two result lists (floats compared to 1e-9 relative)."""
    problems = []
    if len(a) != len(b):
        problems.append(f"{len(a)} rows against {len(b)}")
    for ra, rb in zip(a, b):
        for key in ra:
            x, y = ra[key], rb[key]
            if key in FLOAT_COLUMNS and x is not None and y is not None:
                if not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12):
                    problems.append(f"rank {ra['rank']} {key}: {x} != {y}")
            elif x != y:
                problems.append(f"rank {ra['rank']} {key}: {x!r} != {y!r}")
    return problems


OPTIONS = {
    "defaults": {},
    "k25_uncapped": {"k": 25, "max_per_parent": 0},
    "court_filter": {"filters": {"court": "בית המשפט העליון"}},
    "feedback": {"feedback": True},
    "candidates": {"candidates": 120, "rrf_k": 20},
}


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("mode", ["hybrid", "semantic", "lexical"])
def test_searches_equal_a_single_node(dbs, pgc, mode, option):
    checked = 0
    for corpus in ("external_precedents", "internal_decisions", "case_documents"):
        for vec, text in queries(dbs["data"], pgc, 8, hash((corpus, mode, option)) % 2**32):
            kw = dict(OPTIONS[option], mode=mode)
            if option == "feedback" and mode != "hybrid":
                kw.pop("feedback")       # (feedback is a hybrid search's second round)
            if corpus == "case_documents":
                kw["filters"] = {"practice_area": "planning"}
            one = pgc.search(dbs["single"], corpus, vec, text, **kw)
            many = pgc.search(dbs["dist"], corpus, vec, text, **kw)
            problems = same_rows(one, many)
            assert not problems, (corpus, mode, option, problems[:5])
            checked += len(one)
    assert checked > 100, "the searches found something to compare"


def test_approximate_search_on_the_shards_keeps_the_corpus_and_its_recall(dbs, pgc):
    """Below the exact-search threshold the semantic branch uses the shards' HNSW indexes
    (ORDER BY distance, id LIMIT pushed down): every hit is still in the corpus, and the
    ranking is close to the exact one (pgvector's iterative scan is the database's default on
    the workers, set by ALTER DATABASE on the coordinator)."""
    conn = dbs["dist"]
    settings = conn.execute(
        "SELECT result FROM run_command_on_workers('SHOW hnsw.iterative_scan')").fetchall()
    assert settings and all(r[0] == "relaxed_order" for r in settings), settings
    overlap = []
    for vec, text in queries(dbs["data"], pgc, 15, 77):
        exact = pgc.search(conn, "external_precedents", vec, None, mode="semantic", k=10)
        with conn.transaction():
            conn.execute("SET LOCAL pg_corpus.exact_search_max_rows = 10")
            plan = conn.execute(
                "SELECT strategy FROM corpus.corpus_explain('external_precedents', %s::vector, NULL, "
                "mode => 'semantic') WHERE branch = 'semantic'", (pgc.vec_text(vec),)).fetchall()
            approx = pgc.search(conn, "external_precedents", vec, None, mode="semantic", k=10)
        assert {r[0] for r in plan} == {"hnsw_iterative"}, plan
        assert len(approx) == 10
        kinds = conn.execute(
            "SELECT DISTINCT source_kind FROM case_law WHERE id = ANY(%s::bigint[])",
            ([int(r["parent_id"]) for r in approx],)).fetchall()
        assert kinds == [("external_upload",)], kinds
        overlap.append(len({r["item_id"] for r in exact} & {r["item_id"] for r in approx}) / 10)
    assert np.mean(overlap) >= 0.9, overlap


def worker_queue(citus, dbname):
    """item id -> (node, reason) of every queue entry of precedent_chunks on the workers."""
    out = {}
    for node in cs.NODES[1:]:
        with psycopg.connect(citus.dsn(dbname, node)) as c:
            for item_id, reason, state in c.execute(
                    "SELECT item_id, reason, state FROM corpus.embedding_queue "
                    "WHERE item_table = 'precedent_chunks'::regclass"):
                out[item_id] = (node, reason, state)
    return out


def test_reembed_end_to_end_from_the_coordinator(dbs, pgc):
    conn, citus = dbs["dist"], dbs["citus"]
    chunk = next(c for c in dbs["data"]["precedent_chunks"]
                 if c["embedding"] is not None and len(c["content"]) > 80
                 and any(k["id"] == c["case_law_id"] and k["source_kind"] == "external_upload"
                         and k["case_name"] for k in dbs["data"]["case_law"]))
    cid = str(chunk["id"])
    vec = chunk["embedding"]
    before = pgc.search(conn, "external_precedents", vec, None, mode="semantic", k=5)
    assert before[0]["item_id"] == cid, "its own embedding finds it first"
    # a multi-shard UPDATE (the id is not the distribution column): two-phase commit
    conn.execute("UPDATE precedent_chunks SET content = content || ' תוספת' WHERE id = %s", (chunk["id"],))
    assert conn.execute("SELECT count(*) FROM corpus.embedding_queue").fetchone()[0] == 0, \
        "the coordinator holds no shard: its queue stays empty"
    assert worker_queue(citus, "pgc_citus")[cid][1:] == ("text_changed", "pending")
    stale = pgc.search(conn, "external_precedents", vec, None, mode="semantic", k=5)
    assert cid not in [r["item_id"] for r in stale], "a stale embedding is not used"
    flagged = pgc.search(conn, "external_precedents", vec, None, mode="semantic", k=5, include_stale=True)
    assert flagged[0]["item_id"] == cid
    claimed = conn.execute(
        "SELECT item_id, version, content, reason FROM corpus.corpus_embedding_claim(500, '1 second', 'test') "
        "WHERE item_id = %s", (cid,)).fetchall()
    assert len(claimed) == 1 and claimed[0][2].endswith("תוספת") and claimed[0][3] == "text_changed"
    version = claimed[0][1]
    assert worker_queue(citus, "pgc_citus")[cid][2] == "claimed"
    # (the claims here take every queued item for a second: the reference worker's test after
    # this one finds them claimable again)
    new = pgc.unit(np.random.default_rng(5).standard_normal(pgc.DIM))
    store = "SELECT corpus.corpus_embedding_complete('precedent_chunks', 'embedding', %s, %s, %s::vector)"
    assert conn.execute(store, (cid, version, pgc.vec_text(new))).fetchone()[0] == "stored"
    assert conn.execute(store, (cid, version, pgc.vec_text(new))).fetchone()[0] == "not_queued"
    assert cid not in worker_queue(citus, "pgc_citus")
    after = pgc.search(conn, "external_precedents", new, None, mode="semantic", k=5)
    assert after[0]["item_id"] == cid and after[0]["semantic_distance"] < 1e-6
    # a change after the claim: the late result is refused, the item stays queued
    conn.execute("UPDATE precedent_chunks SET content = content || ' שוב' WHERE id = %s", (chunk["id"],))
    (v2,) = conn.execute("SELECT version FROM corpus.corpus_embedding_claim(500, '1 second', 'test') "
                         "WHERE item_id = %s", (cid,)).fetchone()
    conn.execute("UPDATE precedent_chunks SET content = content || ' ועוד' WHERE id = %s", (chunk["id"],))
    assert conn.execute(store, (cid, v2, pgc.vec_text(new))).fetchone()[0] == "requeued"
    # fail and release reach the entry on its node
    (v3,) = conn.execute("SELECT version FROM corpus.corpus_embedding_claim(500, '1 second', 'test') "
                         "WHERE item_id = %s", (cid,)).fetchone()
    assert conn.execute("SELECT corpus.corpus_embedding_fail('precedent_chunks', 'embedding', %s, %s, 'boom')",
                        (cid, v3)).fetchone()[0] == "pending"
    # an insert without an embedding is queued as missing; a delete takes its entry away
    conn.execute("INSERT INTO precedent_chunks (id, case_law_id, chunk_index, content) "
                 "VALUES (990001, %s, 99, 'טקסט חדש בלי הטמעה עדיין כדי לבדוק את התור במלואו')",
                 (chunk["case_law_id"],))
    assert worker_queue(citus, "pgc_citus")["990001"][1] == "missing"
    conn.execute("DELETE FROM precedent_chunks WHERE id = 990001")
    assert "990001" not in worker_queue(citus, "pgc_citus")
    # the queue figures of the health check count the workers' entries
    row = conn.execute("SELECT count, detail FROM corpus.corpus_health_check('external_precedents') "
                       "WHERE \"check\" = 'reembed_queue' AND source = 'chunks'").fetchone()
    queued_on_workers = sum(1 for _, r, s in worker_queue(citus, "pgc_citus").values() if s != "dead")
    assert row[1]["queued"] >= 1 and row[1]["table_oldest_seconds"] >= 0, row
    assert queued_on_workers >= row[1]["queued"] >= 1


def test_the_reference_worker_drains_every_node_from_the_coordinator(dbs, pgc):
    conn, citus = dbs["dist"], dbs["citus"]
    conn.execute("UPDATE document_chunks SET content = content || ' עדכון' WHERE id IN "
                 "(SELECT id FROM document_chunks ORDER BY id LIMIT 5)")
    assert conn.execute("SELECT corpus.corpus_embedding_enqueue('halachot', 'embedding', false)").fetchone()[0] \
        == len(dbs["data"]["halachot"])
    res = subprocess.run(
        [str(WORKER), citus.dsn("pgc_citus"), "--embedder", "hash", "--dimensions", "384",
         "--exit-when-empty", "--poll-interval", "1", "--progress", "none", "--batch-size", "64"],
        capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    left = {}
    for node in cs.NODES:
        with psycopg.connect(citus.dsn("pgc_citus", node)) as c:
            left[node] = c.execute("SELECT count(*) FROM corpus.embedding_queue WHERE state <> 'dead'").fetchone()[0]
    assert left == {n: 0 for n in cs.NODES}, left
    assert conn.execute("SELECT count(*) FROM halachot WHERE embedding IS NULL").fetchone()[0] == 0


def test_explain_and_health_check_run_on_the_coordinator(dbs, pgc):
    conn = dbs["dist"]
    vec, text = queries(dbs["data"], pgc, 1, 9)[0]
    rows = conn.execute(
        "SELECT branch, source, sql FROM corpus.corpus_explain('internal_decisions', %s::vector, %s)",
        (pgc.vec_text(vec), text)).fetchall()
    assert {(b, s) for b, s, _ in rows} >= {("semantic", "chunks"), ("lexical", "chunks"),
                                            ("semantic", "halachot"), ("lexical", "halachot")}
    for _, _, sql in rows:
        assert "OFFSET 0" not in sql, "one statement Citus pushes down whole"
        assert '"source_kind" = $' in sql
    health = conn.execute("SELECT \"check\", corpus, source, status, detail "
                          "FROM corpus.corpus_health_check()").fetchall()
    assert health
    bad = [(c, co, s, d) for c, co, s, st, d in health if st == "fail"]
    assert not bad, bad
    audits = [d for c, _, _, _, d in health if c == "isolation_audit"]
    assert audits and all(d.get("hits_checked", 0) > 0 or "isolation" in d for d in audits), audits
    citus_rows = [(st, d) for c, _, _, st, d in health if c == "citus"]
    assert len(citus_rows) == 1 and citus_rows[0][0] == "ok" and citus_rows[0][1]["nodes"] == 2, citus_rows
    assert len(citus_rows[0][1]["coordinator"]["slots"]) == 3, "the three distributed item tables' slots"


def test_the_lexical_branch_ranks_through_each_shards_bm25_index(dbs, pgc):
    conn = dbs["dist"]
    _, text = queries(dbs["data"], pgc, 1, 9)[0]
    sql, params, strategy = conn.execute(
        "SELECT sql, params, strategy FROM corpus.corpus_explain('internal_decisions', NULL, %s, mode => 'lexical') "
        "WHERE source = 'chunks'", (text,)).fetchone()
    assert strategy == "bm25_index", (strategy, sql)
    body = "\n".join(line for line in sql.splitlines() if not line.startswith("SET LOCAL "))
    body = re.sub(r"\$(\d+)", r"%(p\1)s", body.replace("%", "%%"))
    values = {f"p{i + 1}": v for i, v in enumerate(params)}
    plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {body}", values, prepare=False))
    # each shard ranks its own rows (here, small shards, by sorting them) ...
    assert "Task Count: 4" in plan and "OPERATOR(corpus.<@>)" in plan, plan
    # ... and through its own BM25 index once sorting a shard costs more
    with conn.transaction():
        conn.execute("SET LOCAL citus.propagate_set_commands = 'local'")
        conn.execute("SET LOCAL enable_sort = off")
        plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {body}", values, prepare=False))
    assert re.search(r"Index Scan using precedent_chunks_bm25_idx_\d+", plan), plan


def test_a_bm25_index_with_a_key_column_ranks_each_shards_slice_as_a_single_node(dbs):
    """A distributed table's corpus_bm25 index on (BM25 column, isolation column): every shard
    carries it, each ranks only its own slice's rows, and the answers are the single node's."""
    rng = np.random.default_rng(SEED)
    vocab = [f"k{i}" for i in range(300)]
    rows = [(i, "rare" if i % 20 == 0 else "common",
             " ".join(vocab[min(int(300 ** rng.random()), 299)] for _ in range(int(rng.integers(3, 30)))))
            for i in range(1, 3001)]
    for name in ("single", "dist"):
        conn = dbs[name]
        conn.execute("""CREATE TABLE kdocs (id int PRIMARY KEY, kind text NOT NULL, body text NOT NULL,
                            emb vector(2), body_bm25 tsvector
                            GENERATED ALWAYS AS (corpus.bm25_document(body, 'simple')) STORED)""")
        if name == "dist":
            conn.execute("SELECT create_distributed_table('kdocs', 'id')")
        with conn.cursor().copy("COPY kdocs (id, kind, body) FROM STDIN") as cp:
            for row in rows:
                cp.write_row(row)
        conn.execute("CREATE INDEX kdocs_bm25 ON kdocs USING corpus_bm25 (body_bm25, kind)")
        conn.execute("ANALYZE kdocs")
        for kind in ("rare", "common"):
            conn.execute("SELECT corpus.corpus_create(%s, isolation => jsonb_build_object('kind', %s::text))",
                         [f"k_{kind}", kind])
            conn.execute("""SELECT corpus.corpus_add_source(%s, 'kdocs', 'kdocs', text_column => 'body',
                              tsv_column => 'body_bm25', embedding_column => 'emb', parent_fk => 'id',
                              language => 'simple', min_length => 1)""", [f"k_{kind}"])
    search = ("SELECT item_id, lexical_score FROM corpus.corpus_hybrid_search(%s, NULL, %s, k => 10, "
              "mode => 'lexical', max_per_parent => 0)")
    for q in ("k0 k1", "k3 k40 k200", "k2", "k7 k9 k11 k150 k299"):
        for kind in ("rare", "common"):
            want = dbs["single"].execute(search, [f"k_{kind}", q]).fetchall()
            got = dbs["dist"].execute(search, [f"k_{kind}", q]).fetchall()
            assert [r[0] for r in got] == [r[0] for r in want] and len(got) == 10, (kind, q, got, want)
            assert all(math.isclose(a[1], b[1], rel_tol=1e-9) for a, b in zip(got, want)), (kind, q)
            assert all(int(r[0]) % 20 == 0 for r in got) == (kind == "rare"), (kind, q)
    conn = dbs["dist"]
    sql, params, strategy = conn.execute(
        "SELECT sql, params, strategy FROM corpus.corpus_explain('k_rare', NULL, 'k0 k1', mode => 'lexical')").fetchone()
    assert strategy == "bm25_index", (strategy, sql)
    body = "\n".join(line for line in sql.splitlines() if not line.startswith("SET LOCAL "))
    body = re.sub(r"\$(\d+)", r"%(p\1)s", body.replace("%", "%%"))
    values = {f"p{i + 1}": v for i, v in enumerate(params)}
    with conn.transaction():
        conn.execute("SET LOCAL citus.propagate_set_commands = 'local'")
        conn.execute("SET LOCAL enable_sort = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {body}", values, prepare=False))
    assert re.search(r"Index Scan using kdocs_bm25_\d+", plan), plan
    # the slice is the index's condition, not a filter after it
    assert re.search(r"Index Cond: .*\bkind = ", plan) and not re.search(r"Filter: .*\bkind = ", plan), plan


def test_the_health_check_names_a_node_whose_slot_copies_differ(dbs):
    conn, citus = dbs["dist"], dbs["citus"]
    with psycopg.connect(citus.dsn("pgc_citus", "worker2"), autocommit=True) as w:
        # (the table named as the coordinator names it, schema-qualified)
        w.execute("SET search_path = pg_catalog")
        saved = w.execute("SELECT to_jsonb(s)::text FROM corpus.embedding_slots s "
                          "WHERE item_table = 'public.document_chunks'::regclass").fetchone()[0]
        w.execute("RESET search_path")
        w.execute("SET session_replication_role = replica")   # (keep its queue entries)
        w.execute("DELETE FROM corpus.embedding_slots WHERE item_table = 'document_chunks'::regclass")
        try:
            status, detail, hint = conn.execute(
                "SELECT status, detail, hint FROM corpus.corpus_health_check() WHERE \"check\" = 'citus'").fetchone()
            assert status == "fail" and len(detail["slots_differ"]) == 1 and "sources" in hint, (status, detail)
            assert detail["slots_differ"][0].endswith(":" + str(cs.port_of(citus.uris["worker2"])))
        finally:
            w.execute("SELECT corpus._embedding_slot_replica(%s::jsonb)", (saved,))
    assert conn.execute("SELECT status FROM corpus.corpus_health_check() WHERE \"check\" = 'citus'"
                        ).fetchone()[0] == "ok"


def test_a_statement_citus_sends_to_a_worker_says_so(dbs):
    conn = dbs["dist"]
    one = next(c["id"] for c in dbs["data"]["precedent_chunks"] if c["embedding"] is not None)
    with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
        # (Citus sends the whole statement to the node of the shard the subquery reads)
        conn.execute("SELECT count(*) FROM corpus.corpus_hybrid_search('external_precedents', "
                     "(SELECT embedding FROM precedent_chunks WHERE id = %s), 'x')", (one,))
    assert "coordinator" in e.value.diag.message_hint
    # the documented form runs on the coordinator
    n = conn.execute("WITH v AS MATERIALIZED (SELECT embedding FROM precedent_chunks "
                     "WHERE embedding IS NOT NULL ORDER BY id LIMIT 1) "
                     "SELECT count(*) FROM v, corpus.corpus_hybrid_search('external_precedents', v.embedding, 'x') s"
                     ).fetchone()[0]
    assert n > 0


def test_a_reference_table_is_refused_as_an_item_table(dbs):
    conn = dbs["dist"]
    conn.execute("CREATE TABLE ref_items (id bigint PRIMARY KEY, body text, "
                 "tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED, emb vector(3))")
    conn.execute("SELECT create_reference_table('ref_items')")
    conn.execute("SELECT corpus.corpus_create('ref_corpus')")
    with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
        conn.execute("SELECT corpus.corpus_add_source('ref_corpus', 'items', 'ref_items', text_column => 'body', "
                     "embedding_column => 'emb', tsv_column => 'tsv', parent_fk => 'id')")
    assert "reference table" in e.value.diag.message_primary and e.value.diag.message_hint
    assert conn.execute("SELECT count(*) FROM corpus.sources WHERE corpus = 'ref_corpus'").fetchone()[0] == 0


def test_dropping_a_source_forgets_the_workers_copies_of_its_slot(dbs):
    conn, citus = dbs["dist"], dbs["citus"]
    conn.execute("SELECT corpus.corpus_create('tmp_docs', required_filters => '{practice_area}', "
                 "filter_fields => '{\"practice_area\": \"text\"}')")
    conn.execute("CREATE TABLE tmp_chunks (id bigint, document_id bigint, practice_area text, content text, "
                 "content_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED, "
                 "embedding vector(384), PRIMARY KEY (id, document_id))")
    conn.execute("SELECT create_distributed_table('tmp_chunks', 'document_id', colocate_with => 'document_chunks')")
    conn.execute("INSERT INTO tmp_chunks (id, document_id, practice_area, content) "
                 "SELECT g, g % 7, 'planning', 'text number ' || g || ' long enough to be searchable at all' "
                 "FROM generate_series(1, 40) g")
    conn.execute("SELECT corpus.corpus_add_source('tmp_docs', 'chunks', 'tmp_chunks', text_column => 'content', "
                 "embedding_column => 'embedding', tsv_column => 'content_tsv', parent_fk => 'document_id')")

    def slots_and_entries():
        out = {}
        for node in cs.NODES[1:]:
            with psycopg.connect(citus.dsn("pgc_citus", node)) as c:
                out[node] = c.execute(
                    "SELECT (SELECT count(*) FROM corpus.embedding_slots WHERE item_table = 'tmp_chunks'::regclass), "
                    "(SELECT count(*) FROM corpus.embedding_queue WHERE item_table = 'tmp_chunks'::regclass)"
                ).fetchone()
        return out

    copies = slots_and_entries()
    assert all(s == 1 for s, _ in copies.values()), copies
    assert sum(n for _, n in copies.values()) == 40, "every item without an embedding is queued where it is"
    conn.execute("SELECT corpus.corpus_drop_source('tmp_docs', 'chunks')")
    assert slots_and_entries() == {n: (0, 0) for n in cs.NODES[1:]}
    # and the table is writable again without a trigger (multi-shard insert)
    conn.execute("INSERT INTO tmp_chunks (id, document_id, content) SELECT g, g, 'x' FROM generate_series(41, 60) g")
    conn.execute("SELECT corpus.corpus_drop('tmp_docs')")
    conn.execute("DROP TABLE tmp_chunks")


def test_a_model_change_queues_every_item_on_every_node(dbs):
    conn, citus = dbs["dist"], dbs["citus"]
    total = conn.execute("SELECT count(*) FROM halachot").fetchone()[0]
    with psycopg.connect(citus.dsn("pgc_citus"), autocommit=True) as c:
        notices = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary))
        c.execute("CALL corpus.corpus_set_embedding_model('halachot', 'embedding', 'model-b', batch_size => 7)")
    assert notices and notices[-1].startswith(f"pg_corpus: {total} of {total} items")
    queued = 0
    for node in cs.NODES[1:]:
        with psycopg.connect(citus.dsn("pgc_citus", node)) as c:
            queued += c.execute("SELECT count(*) FROM corpus.embedding_queue "
                                "WHERE item_table = 'halachot'::regclass AND reason = 'model_changed'").fetchone()[0]
            assert c.execute("SELECT model FROM corpus.embedding_slots "
                             "WHERE item_table = 'halachot'::regclass").fetchone()[0] == "model-b"
    assert queued == total
    claimed = conn.execute("SELECT DISTINCT model FROM corpus.corpus_embedding_claim(10, '1 minute', 't', 'halachot')"
                           ).fetchall()
    assert claimed == [("model-b",)]


def test_lexical_statistics_go_stale_by_the_shards_counters(dbs):
    """The coordinator has no change counters for a distributed table: they are the shards'."""
    conn = dbs["dist"]
    conn.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats('case_documents')")
    fresh = conn.execute("SELECT status, detail FROM corpus.corpus_health_check('case_documents') "
                         "WHERE \"check\" = 'lexical_statistics'").fetchone()
    assert fresh[0] == "ok", fresh
    n = conn.execute("SELECT count(*) FROM document_chunks").fetchone()[0]
    conn.execute("UPDATE document_chunks SET section = section WHERE id IN "
                 "(SELECT id FROM document_chunks ORDER BY id LIMIT %s)", (n // 4,))
    # (a worker's backend reports its counters at most once a second, and when idle within
    # 10 s: ask until they are in)
    deadline = time.monotonic() + 30
    while True:
        stale = conn.execute("SELECT status, hint FROM corpus.corpus_health_check('case_documents') "
                             "WHERE \"check\" = 'lexical_statistics'").fetchone()
        if stale[0] != "ok" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert stale[0] == "warn" and "corpus_refresh_lexical_stats" in stale[1], stale
    refreshed = conn.execute("SELECT corpus, refreshed FROM corpus.corpus_refresh_lexical_stats(only_stale => true)"
                             ).fetchall()
    assert ("case_documents", True) in refreshed, refreshed


def test_the_worker_api_serves_a_coordinator_table_next_to_distributed_ones(dbs):
    """A table of the coordinator only (not distributed) is a source like on one node: claims,
    retries and enqueues naming it never ask the workers, who do not have it."""
    conn = dbs["dist"]
    conn.execute("CREATE TABLE local_notes (id bigint PRIMARY KEY, body text, "
                 "tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED, emb vector(384))")
    conn.execute("INSERT INTO local_notes (id, body) SELECT g, 'local note number ' || g || ' with enough text' "
                 "FROM generate_series(1, 6) g")
    conn.execute("SELECT corpus.corpus_create('local_notes_corpus')")
    conn.execute("SELECT corpus.corpus_add_source('local_notes_corpus', 'notes', 'local_notes', text_column => 'body', "
                 "embedding_column => 'emb', tsv_column => 'tsv', parent_fk => 'id', min_length => 5)")
    assert conn.execute("SELECT count(*) FROM corpus.embedding_queue "
                        "WHERE item_table = 'local_notes'::regclass").fetchone()[0] == 6, "queued on the coordinator"
    claimed = conn.execute("SELECT item_id, version FROM corpus.corpus_embedding_claim(10, '1 minute', 't', "
                           "'local_notes')").fetchall()
    assert len(claimed) == 6
    item, version = claimed[0]
    assert conn.execute("SELECT corpus.corpus_embedding_fail('local_notes', 'emb', %s, %s, 'x', 1)",
                        (item, version)).fetchone()[0] == "dead"
    assert conn.execute("SELECT corpus.corpus_embedding_retry_dead('local_notes')").fetchone()[0] == 1
    # only_missing NULL queues every item, as on one node
    conn.execute("UPDATE local_notes SET emb = array_fill(0.01, ARRAY[384])::vector WHERE id = 1")
    assert conn.execute("SELECT corpus.corpus_embedding_enqueue('local_notes', 'emb', NULL)").fetchone()[0] == 6
    rows = conn.execute("SELECT count(*) FROM corpus.corpus_hybrid_search('local_notes_corpus', NULL, 'local note', "
                        "mode => 'lexical')").fetchone()[0]
    assert rows == 6
    conn.execute("SELECT corpus.corpus_drop('local_notes_corpus')")
    conn.execute("DROP TABLE local_notes")
