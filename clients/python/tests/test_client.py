"""The client against the real extension on the demo sample: every call returns what the SQL
function returns (compared with the same call made with plain psycopg), over a connection, a
pool and their async forms; the extension's errors arrive as the family exceptions with
SQLSTATE, message, detail and hint."""
import asyncio
import inspect
import json

import numpy as np
import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import pg_corpus
from pg_corpus import AsyncClient, Client

HIT_COLUMNS = ("rank, corpus, source, item_id, parent_id, score, semantic_rank, semantic_distance, lexical_rank, "
               "lexical_score, content, locator, metadata, embedding_stale, query_ranks, evidence, origin")


def item_vector(conn, table, item_id):
    return np.array(json.loads(conn.execute(f"SELECT embedding::text FROM {table} WHERE id = %s",
                                            [item_id]).fetchone()[0]), dtype=np.float32)


def raw_search(conn, corpus, vec, text, extra=""):
    v = None if vec is None else "[" + ",".join(map(repr, map(float, vec))) + "]"
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(f"SELECT {HIT_COLUMNS} FROM corpus.corpus_hybrid_search(%s, %s::vector, %s{extra})",
                           [corpus, v, text]).fetchall()


def as_rows(hits):
    """The hits as the SQL function's rows (the snippet is the client's, on request)."""
    return [{k: v for k, v in h.__dict__.items() if k != "snippet"} for h in hits]


CASES = [
    ("external_precedents", ("precedent_chunks", 10030), "שופטת בית המשפט המחוזי", {}, ""),
    ("internal_decisions", ("halachot", 20004), "ועדת ערר", {"k": 5, "max_per_parent": None},
     ", k => 5, max_per_parent => NULL"),
    ("external_precedents", None, "כתב האישום", {"mode": "lexical", "k": 3}, ", k => 3, mode => 'lexical'"),
    ("case_documents", ("document_chunks", 30001), "wing slipstream",
     {"filters": {"practice_area": "aerodynamics"}, "candidates": 30, "rrf_k": 10},
     ", filters => '{\"practice_area\": \"aerodynamics\"}', candidates => 30, rrf_k => 10"),
]


@pytest.mark.parametrize("corpus,item,text,kwargs,extra", CASES)
def test_search_returns_what_the_sql_function_returns(conn, demo_dsn, corpus, item, text, kwargs, extra):
    vec = None if item is None else item_vector(conn, *item)
    expected = raw_search(conn, corpus, vec, text, extra)
    assert expected
    with Client(demo_dsn) as client:
        hits = client.search(corpus, vec, text, **kwargs)
        assert all(isinstance(h, pg_corpus.Hit) for h in hits)
        assert as_rows(hits) == expected
        # a list of floats is a vector too
        if vec is not None:
            assert as_rows(client.search(corpus, vec.tolist(), text, **kwargs)) == expected


def test_a_connection_a_pool_and_their_async_forms_agree(conn, demo_dsn):
    vec = item_vector(conn, "precedent_chunks", 10030)
    expected = raw_search(conn, "external_precedents", vec, "שופטת")
    with psycopg.connect(demo_dsn) as own:       # a transaction of the caller's
        assert as_rows(Client(own).search("external_precedents", vec, "שופטת")) == expected
        own.rollback()
    with ConnectionPool(demo_dsn, min_size=1, max_size=2, open=True) as pool:
        client = Client(pool)
        for _ in range(3):
            assert as_rows(client.search("external_precedents", vec, "שופטת")) == expected

    async def run():
        async with await psycopg.AsyncConnection.connect(demo_dsn, autocommit=True) as aconn:
            assert as_rows(await AsyncClient(aconn).search("external_precedents", vec, "שופטת")) == expected
        async with AsyncConnectionPool(demo_dsn, min_size=1, max_size=4, open=False) as pool:
            client = AsyncClient(pool)
            results = await asyncio.gather(*[client.search("external_precedents", vec, "שופטת") for _ in range(6)])
            assert all(as_rows(r) == expected for r in results)
        async with AsyncClient(demo_dsn) as client:
            assert [h.item_id for h in await client.search("external_precedents", vec, "שופטת")] == \
                [r["item_id"] for r in expected]
            assert await client.health("external_precedents")
    asyncio.run(run())


def test_extra_queries_and_find_similar_return_what_the_sql_functions_return(conn, demo_dsn):
    vec = item_vector(conn, "precedent_chunks", 10030)
    other = item_vector(conn, "precedent_chunks", 10031)
    extra_sql = json.dumps([{"text": "בית המשפט המחוזי", "label": "rewrite"},
                            {"vector": [float(x) for x in other], "weight": 0.5}])
    expected = raw_search(conn, "external_precedents", vec, "שופטת", f", extra_queries => '{extra_sql}'::jsonb")
    with Client(demo_dsn) as client:
        hits = client.search("external_precedents", vec, "שופטת",
                             extra_queries=[{"text": "בית המשפט המחוזי", "label": "rewrite"},
                                            {"vector": other, "weight": 0.5}])    # a numpy vector
        assert as_rows(hits) == expected
        assert {q["query"] for h in hits for q in h.query_ranks} == {"original", "rewrite", "extra_2"}
        plans = client.explain("external_precedents", vec, "שופטת", extra_queries=[{"text": "מחוזי"}])
        assert {p.query for p in plans} == {"original", "extra_1"}
        with conn.cursor(row_factory=dict_row) as cur:
            want = cur.execute(f"SELECT {HIT_COLUMNS} FROM corpus.corpus_find_similar('external_precedents', "
                               "'chunks', '10030', k => 5, exclude_parent => true)").fetchall()
        got = client.find_similar("external_precedents", "chunks", 10030, k=5, exclude_parent=True)
        assert as_rows(got) == want and len(got) == 5
        seed_parent = conn.execute("SELECT case_law_id::text FROM precedent_chunks WHERE id = 10030").fetchone()[0]
        assert all(h.item_id != "10030" and h.parent_id != seed_parent for h in got)
        with pytest.raises(pg_corpus.UnknownCorpus):
            client.find_similar("external_precedents", "chunks", "no-such-item")


def test_query_vectors_and_spaces(conn, demo_dsn):
    vec = item_vector(conn, "precedent_chunks", 10030)
    with Client(demo_dsn) as client:
        info = {c.name: c for c in client.list_corpora()}["external_precedents"]
        assert info.spaces == {} and all(s["space"] is None for s in info.sources)
        plain = as_rows(client.search("external_precedents", vec, "שופטת"))
        # the default space's vector may come as query_vectors.default instead of query_vec
        assert as_rows(client.search("external_precedents", None, "שופטת", query_vectors={"default": vec})) == plain
        with pytest.raises(pg_corpus.InvalidArgument) as e:
            client.search("external_precedents", vec, "שופטת", query_vectors={"page_image": [0.1, 0.2]})
        assert e.value.sqlstate == "22023" and "'default'" in (e.value.hint or "")
        with pytest.raises(pg_corpus.InvalidArgument):
            client.search("external_precedents", vec, "שופטת", query_vectors={"default": vec})


def test_query_model_is_checked_against_the_models_of_the_embeddings(conn, demo_dsn):
    vec = item_vector(conn, "precedent_chunks", 10030)
    with psycopg.connect(demo_dsn) as tx:  # a transaction of its own, rolled back
        tx.execute("UPDATE corpus.embedding_slots SET model = 'e5-small' "
                   "WHERE item_table = 'precedent_chunks'::regclass")
        client = Client(tx)
        plain = as_rows(client.search("external_precedents", vec, "שופטת"))
        assert as_rows(client.search("external_precedents", vec, "שופטת", query_model="e5-small")) == plain
        declared = {"default": {"vector": vec, "model": "e5-small"}}
        assert as_rows(client.search("external_precedents", None, "שופטת", query_vectors=declared)) == plain
        with pytest.raises(pg_corpus.InvalidArgument) as e:
            client.search("external_precedents", vec, "שופטת", query_model="bge-m3")
        assert e.value.sqlstate == "22023" and "'e5-small'" in (e.value.hint or ""), e.value
        tx.rollback()


def test_evidence_and_expansion_arguments(conn, demo_dsn):
    with Client(demo_dsn) as client:
        # a lexical search needs no vector thresholds: every hit says which rule admitted it
        hits = client.search("external_precedents", None, "שופטת", mode="lexical", evidence=True)
        assert hits and all(h.evidence and "rare_words" in h.evidence for h in hits)
        assert all(h.evidence is None and h.origin is None for h in client.search("external_precedents", None, "שופטת"))
        info = {c.name: c for c in client.list_corpora()}["external_precedents"]
        # the sample's thresholds, calibrated on its labelled queries when it was loaded
        assert info.edges == [] and info.must_include == [] and set(info.evidence) == {"vector"}
        assert set(info.evidence["vector"]["default"]) == {"max_distance", "max_gap"}
        with pytest.raises(pg_corpus.InvalidArgument) as e:
            client.search("external_precedents", None, "שופטת", expand=True)
        assert e.value.sqlstate == "22023" and "corpus_add_edges" in (e.value.hint or "")


def test_lenient_filters_and_check_filters(conn, demo_dsn):
    proposed = {"court": "בית המשפט העליון", "judge": "כהן", "case_number": 7}
    with Client(demo_dsn) as client:
        checks = client.check_filters("external_precedents", proposed)
        assert all(isinstance(c, pg_corpus.FilterCheck) for c in checks)
        assert {(c.field, c.accepted) for c in checks} == {("court", True), ("judge", False), ("case_number", False)}
        assert all(c.reason and c.sqlstate for c in checks if not c.accepted)
        lenient = client.search("external_precedents", None, "שופטת", filters=proposed, filter_mode="lenient")
        strict = client.search("external_precedents", None, "שופטת", filters={"court": "בית המשפט העליון"})
        assert as_rows(lenient) == as_rows(strict)
        with pytest.raises(pg_corpus.BadFilter):
            client.search("external_precedents", None, "שופטת", filters=proposed)
        with pytest.raises(pg_corpus.BadFilter):
            client.check_filters("external_precedents", {"source_kind": "x"})


@pytest.mark.parametrize("call,family,sqlstate", [
    (lambda c: c.search("no_such_corpus", None, "x"), pg_corpus.UnknownCorpus, "42704"),
    (lambda c: c.search("case_documents", None, "wing"), pg_corpus.MissingScopeFilter, "22023"),
    (lambda c: c.search("case_documents", None, "wing", filters={"practice_area": "x", "judge": "y"}),
     pg_corpus.BadFilter, "42703"),
    (lambda c: c.search("external_precedents", None, "x", filters={"source_kind": "internal_committee"}),
     pg_corpus.BadFilter, "42501"),
    (lambda c: c.search("external_precedents", None, "x", filters={"court": 5}), pg_corpus.BadFilter, "42804"),
    (lambda c: c.search("external_precedents", [0.1, 0.2, 0.3], "x"), pg_corpus.BadVector, "22000"),
    (lambda c: c.search("external_precedents", None, "x", mode="semantic"), pg_corpus.BadVector, "22004"),
    (lambda c: c.search("external_precedents", None, "x", k=0), pg_corpus.InvalidArgument, "22023"),
    (lambda c: c.search("external_precedents", None, "x", mode="fuzzy"), pg_corpus.InvalidArgument, "22023"),
])
def test_errors_arrive_as_their_family_with_everything_postgresql_said(demo_dsn, call, family, sqlstate):
    with Client(demo_dsn) as client:
        with pytest.raises(family) as e:
            call(client)
    err = e.value
    assert isinstance(err, pg_corpus.PgCorpusError)
    assert err.sqlstate == sqlstate and err.message and err.hint, err
    assert isinstance(err.__cause__, psycopg.Error)
    if family is pg_corpus.MissingScopeFilter:
        assert err.field == "practice_area"


def test_explain_health_and_lexical_calls(conn, demo_dsn):
    with Client(demo_dsn) as client:
        plans = client.explain("external_precedents", None, "שכירות", mode="lexical")
        assert plans and all(isinstance(p, pg_corpus.Subplan) for p in plans)
        assert all("external_upload" in json.dumps(p.params) for p in plans)
        rows = client.health("external_precedents")
        assert {r.check for r in rows} >= {"catalog_drift", "isolation_audit", "indexes"}
        keys = client.bm25_query("ובבתי המשפט", "hebrew")
        assert [k.key for k in keys] == [r[0] for r in conn.execute(
            "SELECT key FROM corpus.bm25_query('ובבתי המשפט', 'hebrew')")]
        refreshed = client.refresh_lexical_stats("external_precedents")
        assert refreshed[0].corpus == "external_precedents" and refreshed[0].documents > 0


def test_catalog_and_evaluation_round_trip(conn, demo_dsn):
    with Client(demo_dsn) as client:
        client.create_corpus("client_example", isolation={"source_kind": "external_upload"},
                             filter_fields={"court": "text"}, description="made by the client test")
        found = client.add_source("client_example", "chunks", "precedent_chunks", text_column="content",
                                  embedding_column="embedding", tsv_column="content_tsv", parent_table="case_law",
                                  parent_fk="case_law_id", parent_required=("case_number",), language="hebrew",
                                  locator={"case_number": "parent.case_number"})
        assert isinstance(found, pg_corpus.SourceFound) and found.source == "chunks" and found.searchable > 0
        assert found.items == (found.searchable + found.below_min_length + found.hidden_by_incomplete_parents
                               + found.excluded_by_source_rule)
        client.alter_corpus("client_example", required_filters=["court"])
        info = {c.name: c for c in client.list_corpora()}["client_example"]
        assert info.required_filters == ["court"] and info.sources[0]["source"] == "chunks"
        with pytest.raises(pg_corpus.MissingScopeFilter):
            client.search("client_example", None, "שופטת")
        client.create_gold_set("client-gold", "external_precedents", level="item")
        conn.execute("INSERT INTO corpus.gold_queries (gold_set, query_id, query_text, query_vec) "
                     "SELECT 'client-gold', 'q' || id, left(content, 60), embedding FROM precedent_chunks "
                     "WHERE id IN (10030, 10040)")
        conn.execute("INSERT INTO corpus.gold_judgments SELECT 'client-gold', 'q' || id, id::text, 1 "
                     "FROM precedent_chunks WHERE id IN (10030, 10040)")
        runs = {r.mode: r for r in client.evaluate("client-gold", modes=("lexical", "hybrid"))}
        assert set(runs) == {"lexical", "hybrid"} and runs["hybrid"].queries == 2
        cmp = {r.metric: r for r in client.compare_runs(runs["lexical"].run_id, runs["hybrid"].run_id, trials=100)}
        assert cmp["ndcg"].queries == 2
        assert len(client.compare_queries(runs["lexical"].run_id, runs["hybrid"].run_id)) == 2
        tuned = client.tune("external_precedents", "client-gold", folds=2, budget_seconds=30, seed=3)
        assert isinstance(tuned, pg_corpus.TuneRun) and tuned.queries == 2 and not tuned.applied
        assert set(tuned.settings) == {"rrf_k", "window", "feedback", "feedback_beta", "feedback_alpha",
                                       "feedback_terms", "weights"}
        with pytest.raises(pg_corpus.PgCorpusError) as e:
            client.tune_revert("external_precedents")
        assert e.value.sqlstate == "55000"
        hit = client.search("external_precedents", None, "שופטת", mode="lexical", k=1)[0]
        assert hit.snippet is None
        marked = client.search("external_precedents", None, "שופטת", mode="lexical", k=1, snippet=True,
                               snippet_chars=80, snippet_marks=("[", "]"))[0]
        assert marked.item_id == hit.item_id and marked.snippet is not None and "[" in marked.snippet
        assert len(marked.snippet.replace("[", "").replace("]", "").strip("…")) <= 80
        item = client.fetch("external_precedents", hit.source, hit.item_id)
        assert isinstance(item, pg_corpus.Item) and (item.item_id, item.locator) == (hit.item_id, hit.locator)
        assert item.content is not None and hit.content is not None and item.content.startswith(hit.content[:40])
        with pytest.raises(pg_corpus.UnknownCorpus):
            client.fetch("internal_decisions", hit.source, hit.item_id)
        client.alter_corpus("client_example", ranking={"rrf_k": 30})
        info = {c.name: c for c in client.list_corpora()}["client_example"]
        assert info.ranking == {"rrf_k": 30}
        client.drop_source("client_example", "chunks")
        client.drop_corpus("client_example")
        client.drop_corpus("client_example", if_exists=True)
        with pytest.raises(pg_corpus.UnknownCorpus):
            client.drop_corpus("client_example")


def test_the_embedding_queue(conn, demo_dsn):
    conn.execute("UPDATE halachot SET rule = rule || ' (client test)' WHERE id IN (20008, 20011)")
    with Client(demo_dsn) as client:
        items = client.claim(10, lease="1 minute", worker="client-test", only_table="halachot")
        assert {i.item_id for i in items} >= {"20008", "20011"}
        first, second = (next(i for i in items if i.item_id == x) for x in ("20008", "20011"))
        assert isinstance(first, pg_corpus.QueuedItem) and first.content.endswith("(client test)")
        assert first.item_table == "halachot" and first.dimensions == 384
        assert client.complete(first, np.full(384, 0.05, dtype=np.float32)) == "stored"
        assert client.complete(first, [0.05] * 384) == "not_queued"
        with pytest.raises(pg_corpus.BadVector):
            client.complete(second, [1.0, 2.0])
        assert client.release(second, worker="client-test") == "released"
        again = next(i for i in client.claim(10, only_table="halachot") if i.item_id == "20011")
        assert client.fail(again, "model timed out", max_attempts=1) == "dead"
        assert client.retry_dead("halachot") == 1
        assert client.enqueue("halachot", "embedding") == 0
        for item in client.claim(100, only_table="halachot"):
            assert client.complete(item, item_vector(conn, "halachot", int(item.item_id))) == "stored"


def test_a_database_that_cannot_be_reached_or_ends_the_session_is_database_unavailable(conn, demo_dsn, closed_port):
    """Connecting to nothing, and a call on a connection whose session the server ended, raise
    DatabaseUnavailable (a PgCorpusError) that says why, with psycopg's error as its cause."""
    with pytest.raises(pg_corpus.DatabaseUnavailable) as refused:
        Client(f"postgresql://postgres@127.0.0.1:{closed_port}/pgc_client").list_corpora()
    assert refused.value.message.startswith("database unavailable: ") and f"port {closed_port}" in refused.value.message
    assert isinstance(refused.value.__cause__, psycopg.OperationalError)

    dsn = psycopg.conninfo.make_conninfo(demo_dsn, application_name="pgc_ended_session")
    end_session = "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = %s"
    with Client(dsn) as client:
        client.list_corpora()
        conn.execute(end_session, ["pgc_ended_session"])
        with pytest.raises(pg_corpus.DatabaseUnavailable) as ended:
            client.list_corpora()
    assert ended.value.message.startswith("database unavailable: ")

    async def ended_async():
        async with AsyncClient(dsn) as client:
            await client.list_corpora()
            conn.execute(end_session, ["pgc_ended_session"])
            with pytest.raises(pg_corpus.DatabaseUnavailable) as ended:
                await client.list_corpora()
        return ended.value
    assert asyncio.run(ended_async()).message.startswith("database unavailable: ")


def public_methods(cls):
    return {name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name))}


def test_sync_and_async_clients_have_the_same_methods_and_signatures():
    assert public_methods(Client) == public_methods(AsyncClient)
    assert {"search", "find_similar", "explain", "health", "claim", "complete", "close"} <= public_methods(Client)
    for name in sorted(public_methods(Client)):
        sync, coroutine = getattr(Client, name), getattr(AsyncClient, name)
        assert inspect.signature(sync) == inspect.signature(coroutine), name
        assert inspect.iscoroutinefunction(coroutine) and not inspect.iscoroutinefunction(sync), name
        assert sync.__doc__ == coroutine.__doc__, name


@pytest.mark.parametrize("cls", [Client, AsyncClient])
def test_arguments_past_the_first_three_are_keyword_only(cls):
    for name in sorted(public_methods(cls)):
        params = list(inspect.signature(getattr(cls, name)).parameters.values())[1:]   # after self
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        assert len(positional) <= 3, f"{cls.__name__}.{name}: {positional}"
    with pytest.raises(TypeError):
        Client("postgresql://unused").search("c", None, "text", 5)
