"""The MCP server through the SDK's own client, over stdio (and once over streamable HTTP),
against the demo sample with the legal tools configuration: tools listed with their schemas,
every tool called, hits with provenance, errors as tool errors that say what to add, and no
tool ever returning an item of another corpus (the seed's leak, #56, through MCP)."""
import importlib.metadata
import json
import os
import re
import socket
import socketserver
import subprocess
import sys
import threading
import time
import tomllib
import uuid
from pathlib import Path

import anyio
import psycopg
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from psycopg.types.json import Jsonb

import pg_corpus
from pg_corpus import mcp_server
from pg_corpus.embedders import HashEmbedder
from pg_corpus.types import CorpusInfo, Hit

CONFIG = Path(pg_corpus.__file__).parent / "examples" / "legal.toml"
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
TOOLS = ["search_precedent_library", "search_internal_decisions", "search_case_documents", "find_similar_cases",
         "fetch_precedent", "corpus_health"]


def server_args(dsn, *extra, config=CONFIG):
    return ["-m", "pg_corpus.mcp_server", "--dsn", dsn, "--config", str(config), "--embedder", "hash", *extra]


def text(result):
    return "\n".join(c.text for c in result.content if getattr(c, "text", None))


async def with_session(dsn, body, errlog=sys.stderr, config=CONFIG):
    params = StdioServerParameters(command=sys.executable, args=server_args(dsn, config=config), env={**os.environ})
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await body(session)


def run(dsn, body, errlog=sys.stderr, config=CONFIG):
    return anyio.run(with_session, dsn, body, errlog, config)


def without_evidence(tmp_path):
    """The example configuration with ``evidence = false`` in every search tool: the nearest
    hits, unfiltered (as before evidence became the default)."""
    blocks = CONFIG.read_text(encoding="utf-8").split("[[tools]]\n")
    out = blocks[0] + "".join("[[tools]]\n" + ("evidence = false\n" if "\nkind = " not in "\n" + b else "")
                              + b.replace("evidence = true\n", "") for b in blocks[1:])
    path = tmp_path / "no-evidence.toml"
    path.write_text(out, encoding="utf-8")
    assert all(t.evidence is False for t in mcp_server.load_config(out).tools if t.kind == "search")
    return path


def hash_vector(query):
    return "[" + ",".join(str(float(x)) for x in HashEmbedder().query(query)) + "]"


def kind_of(conn, corpus_hits):
    """case_law.source_kind of each (source, item) hit, read independently of the extension."""
    out = set()
    for h in corpus_hits:
        table = {"chunks": "precedent_chunks", "halachot": "halachot"}[h["source"]]
        row = conn.execute(f"SELECT c.source_kind FROM {table} t JOIN case_law c ON c.id = t.case_law_id "
                           "WHERE t.id = %s", [int(h["item_id"])]).fetchone()
        out.add(row[0])
    return out


def test_tools_are_listed_with_their_corpora_scope_and_filters(demo_dsn):
    async def body(s):
        return (await s.list_tools()).tools
    tools = {t.name: t for t in run(demo_dsn, body)}
    assert sorted(tools) == sorted(TOOLS)
    docs = tools["search_case_documents"].input_schema
    assert docs["required"] == ["query", "practice_area"]
    assert set(docs["properties"]) == {"query", "k", "offset", "practice_area", "section", "case_id"}
    library = tools["search_precedent_library"].input_schema
    assert "source_kind" not in library["properties"]           # the isolation column is never a parameter
    assert set(library["properties"]) == {"query", "k", "offset", "court", "practice_area", "case_number"}
    assert tools["search_precedent_library"].output_schema["properties"]["hits"]
    for t in tools.values():
        assert t.title and t.annotations.read_only_hint and t.annotations.open_world_hint is False, t.name
    assert tools["fetch_precedent"].title == "Fetch precedent"
    assert "precedent library" in tools["search_precedent_library"].description


def test_every_tool_answers_with_provenance(demo_dsn, conn):
    chunk = conn.execute("SELECT p.id, p.content FROM precedent_chunks p JOIN case_law c ON c.id = p.case_law_id "
                         "WHERE c.source_kind = 'external_upload' ORDER BY p.id LIMIT 1").fetchone()

    async def body(s):
        out = {}
        out["library"] = await s.call_tool("search_precedent_library", {"query": chunk[1][:120], "k": 5})
        out["internal"] = await s.call_tool("search_internal_decisions", {"query": "ועדת ערר החלטה", "k": 5})
        out["docs"] = await s.call_tool("search_case_documents", {"query": "wing in a propeller slipstream",
                                                                   "practice_area": "aerodynamics", "k": 3})
        out["similar"] = await s.call_tool("find_similar_cases", {"item_id": str(chunk[0]), "source": "chunks",
                                                                   "k": 3})
        out["fetch"] = await s.call_tool("fetch_precedent", {"item_id": str(chunk[0])})
        out["health"] = await s.call_tool("corpus_health", {})
        return out
    r = run(demo_dsn, body)
    for name, result in r.items():
        assert not result.is_error, (name, text(result))
    library = r["library"].structured_content["hits"]
    # (the hash embedder's query vectors are not e5's: the lexical branch finds the chunk's own text)
    assert str(chunk[0]) in {h["item_id"] for h in library if h["lexical_rank"] is not None}
    for hit in library:
        assert hit["corpus"] == "external_precedents" and hit["provenance"]["case_number"]
        assert hit["provenance"]["case_number"] in text(r["library"])
    assert all(h["provenance"].get("page") is not None for h in r["docs"].structured_content["hits"])
    similar = r["similar"].structured_content["hits"]
    assert len(similar) == 3 and str(chunk[0]) not in {h["item_id"] for h in similar}
    fetched = r["fetch"].structured_content
    assert (fetched["source"], fetched["item_id"], fetched["text"]) == ("chunks", str(chunk[0]), chunk[1])
    assert fetched["provenance"]["case_number"] in text(r["fetch"])
    assert r["health"].structured_content["rows"]


def test_the_example_configuration_is_printed_and_loads():
    out = subprocess.run([sys.executable, "-m", "pg_corpus.mcp_server", "--example-config"], capture_output=True,
                         text=True, check=True).stdout
    assert out == CONFIG.read_text(encoding="utf-8")
    assert [t.name for t in mcp_server.load_config(out).tools] == TOOLS
    missing = subprocess.run([sys.executable, "-m", "pg_corpus.mcp_server", "--dsn", ""], capture_output=True,
                             text=True)
    assert missing.returncode == 2 and "--example-config" in missing.stderr


def test_a_missing_scope_filter_or_a_bad_filter_is_a_tool_error_that_says_what_to_do(demo_dsn, conn):
    async def body(s):
        return (await s.call_tool("search_case_documents", {"query": "wing"}),
                await s.call_tool("search_precedent_library", {"query": "x", "court": 5}),
                await s.call_tool("find_similar_cases", {"item_id": "no-such-item"}),
                await s.call_tool("fetch_precedent", {"item_id": str(internal)}),
                await s.call_tool("search_precedent_library", {"query": "   "}),
                await s.call_tool("search_precedent_library", {"query": ""}),
                await s.call_tool("search_precedent_library", {"query": "x", "source_kind": "internal"}),
                await s.call_tool("search_precedent_library", {"query": "x", "k": 500}))
    internal = conn.execute("SELECT p.id FROM precedent_chunks p JOIN case_law c ON c.id = p.case_law_id "
                            "WHERE c.source_kind <> 'external_upload' ORDER BY p.id LIMIT 1").fetchone()[0]
    missing, bad, unknown, other, blank, empty, extra, too_many = run(demo_dsn, body)
    assert missing.is_error and "practice_area" in text(missing)
    assert bad.is_error
    assert unknown.is_error and "item_id" in text(unknown)
    assert other.is_error and "is not in corpus" in text(other), "another corpus' item is a missing one"
    assert blank.is_error and "query is empty" in text(blank), "white space is no query: never neighbours"
    assert empty.is_error and not (empty.structured_content or {}).get("hits")
    assert extra.is_error and "does not take source_kind" in text(extra), text(extra)
    assert too_many.is_error and text(too_many).startswith("search_precedent_library: k: "), text(too_many)
    assert "http" not in text(too_many) and "500" in text(too_many)


@pytest.mark.parametrize("evidence", [False, True])
def test_no_tool_returns_an_item_of_another_corpus(demo_dsn, conn, evidence, tmp_path):
    """The external items' own texts, searched through the internal tool (and the other way
    round): every hit belongs to the tool's corpus, checked against case_law.source_kind. Without
    the evidence filter every search has hits (the strongest probe); with it (the default), the
    few a search keeps are of the tool's corpus too."""
    rows = conn.execute("SELECT c.source_kind, left(p.content, 150) FROM precedent_chunks p "
                        "JOIN case_law c ON c.id = p.case_law_id ORDER BY p.id LIMIT 40").fetchall()

    async def body(s):
        seen = {"search_precedent_library": [], "search_internal_decisions": []}
        for kind, content in rows:
            tool = "search_internal_decisions" if kind == "external_upload" else "search_precedent_library"
            res = await s.call_tool(tool, {"query": content, "k": 10})
            assert not res.is_error, text(res)
            seen[tool] += res.structured_content["hits"]
        return seen
    seen = run(demo_dsn, body, config=CONFIG if evidence else without_evidence(tmp_path))
    if not evidence:
        assert seen["search_internal_decisions"] and seen["search_precedent_library"]
    assert kind_of(conn, seen["search_internal_decisions"]) <= {"internal_committee"}
    assert kind_of(conn, seen["search_precedent_library"]) <= {"external_upload"}
    assert all((h["evidence"] is not None) == evidence for hits in seen.values() for h in hits)


def test_a_configuration_that_does_not_fit_the_catalog_is_refused(demo_dsn, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[tools]]\nname = "x"\ncorpus = "external_precedents"\ndescription = "x"\n'
                   'filter_fields = ["source_kind"]\n')
    res = subprocess.run([sys.executable, *server_args(demo_dsn)[:-4], "--config", str(bad), "--embedder", "hash"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "source_kind" in res.stderr and "not a filter field" in res.stderr
    with pytest.raises(mcp_server.ConfigError):
        mcp_server.load_config('[[tools]]\nname = "x"\ncorpus = "c"\ndescription = "d"\nkind = "other"\n')


def test_streamable_http(demo_dsn):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, *server_args(demo_dsn, "--transport", "http", "--port", str(port))],
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the HTTP server did not come up"
                time.sleep(0.1)

        async def body():
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = (await session.list_tools()).tools
                    # (a rare word of several precedents: two hits with evidence)
                    res = await session.call_tool("search_precedent_library", {"query": "קנאביס", "k": 2})
                    return tools, res
        tools, res = anyio.run(body)
        assert len(tools) == len(TOOLS) and not res.is_error and len(res.structured_content["hits"]) == 2
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_the_dsn_may_come_from_the_environment(demo_dsn):
    """DATABASE_URL instead of --dsn (a password stays out of the process list); neither is an
    error that says so."""
    async def body():
        params = StdioServerParameters(command=sys.executable, env={**os.environ, "DATABASE_URL": demo_dsn},
                                       args=["-m", "pg_corpus.mcp_server", "--config", str(CONFIG), "--embedder", "hash"])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await session.call_tool("corpus_health", {})
    assert not anyio.run(body).is_error
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    res = subprocess.run([sys.executable, "-m", "pg_corpus.mcp_server", "--config", str(CONFIG)],
                         capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == 2 and "DATABASE_URL" in res.stderr


@pytest.mark.parametrize("where", ["closed port", "unknown host", "silent port"])
def test_an_unreachable_database_at_start_is_a_clean_error(where, closed_port):
    """Exit 2 and a message that says why, within the connect timeout (5 s by default), no
    traceback: a port nobody listens on, a host name that does not resolve, a port that accepts
    the connection and never answers."""
    silent = socket.create_server(("127.0.0.1", 0))      # listening, never accepting
    with silent:
        dsn = {"closed port": f"postgresql://postgres@127.0.0.1:{closed_port}/pgc_client",
               "unknown host": "postgresql://postgres@no-such-host.invalid/pgc_client",
               "silent port": f"postgresql://postgres@127.0.0.1:{silent.getsockname()[1]}/pgc_client"}[where]
        start = time.monotonic()
        res = subprocess.run([sys.executable, *server_args(dsn)], capture_output=True, text=True, timeout=60)
        elapsed = time.monotonic() - start
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("pg-corpus-mcp: database unavailable: "), res.stderr
    assert "Traceback" not in res.stderr
    assert elapsed < 15, elapsed


class Pipe(socketserver.BaseRequestHandler):
    """One connection through the relay: bytes both ways until either side closes."""

    def handle(self):
        upstream = socket.create_connection(self.server.target)
        self.server.sockets += [self.request, upstream]
        back = threading.Thread(target=pump, args=(upstream, self.request), daemon=True)
        back.start()
        pump(self.request, upstream)
        back.join()


def pump(src, dst):
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class Relay(socketserver.ThreadingTCPServer):
    """A TCP relay to the test cluster that can be cut off: a database that becomes unreachable
    (its open connections closed, new ones refused)."""
    daemon_threads = True

    def __init__(self, target):
        self.target, self.sockets = target, []
        super().__init__(("127.0.0.1", 0), Pipe)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def cut(self):
        self.shutdown()
        self.server_close()
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def search_after(dsn, cut, tmp_path):
    """A search that works, then ``cut()``, then three more (the pool may still hold a connection
    of before the cut for the first ones): their results with the seconds each took, and what the
    server wrote on stderr."""
    args = {"query": "בית המשפט", "k": 2}

    async def body(s):
        first = await s.call_tool("search_precedent_library", args)
        assert not first.is_error, text(first)
        cut()
        out = []
        for _ in range(3):
            start = time.monotonic()
            res = await s.call_tool("search_precedent_library", args)
            out.append((res, time.monotonic() - start))
        return out
    errlog = tmp_path / "server-stderr.txt"
    with errlog.open("w") as f:
        results = run(dsn, body, errlog=f)
    return results, errlog.read_text()


def test_a_role_refused_mid_session_is_a_prompt_tool_error(demo_dsn, conn, tmp_path):
    """The database stops letting the server's role in (NOLOGIN) and ends its sessions: each
    later call is a tool error that says so within seconds (not the pool's 30 s timeout), and
    the server writes no traceback."""
    role = f"pgc_mcp_{uuid.uuid4().hex[:8]}"
    conn.execute(f"CREATE ROLE {role} LOGIN")
    conn.execute(f"GRANT SELECT ON case_law, precedent_chunks, halachot, document_chunks TO {role}")

    def refuse():
        conn.execute(f"ALTER ROLE {role} NOLOGIN")
        conn.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = %s", [role])
    try:
        results, stderr = search_after(psycopg.conninfo.make_conninfo(demo_dsn, user=role), refuse, tmp_path)
    finally:
        conn.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = %s", [role])
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")
    for res, elapsed in results:
        assert res.is_error and text(res).startswith("database unavailable: "), text(res)
        assert "not permitted to log in" in text(res)
        assert elapsed < 10, elapsed
    assert "Traceback" not in stderr, stderr


def test_a_database_unreachable_mid_session_is_a_prompt_tool_error(demo_dsn, tmp_path):
    """The server reaches the database through a relay that is then cut off: each later call is
    a tool error that says so within seconds, and the server writes no traceback."""
    port = int(psycopg.conninfo.conninfo_to_dict(demo_dsn)["port"])
    relay = Relay(("127.0.0.1", port))
    dsn = psycopg.conninfo.make_conninfo(demo_dsn, host="127.0.0.1", port=relay.port)
    results, stderr = search_after(dsn, relay.cut, tmp_path)
    for res, elapsed in results:
        assert res.is_error and text(res).startswith("database unavailable: "), text(res)
        assert f"port {relay.port}" in text(res)
        assert elapsed < 10, elapsed
    assert "Traceback" not in stderr, stderr


# -- evidence, why, allowed values, the [mcp] extra ------------------------------------------

def search_sql(conn, corpus, query, **kw):
    """The extension's own answer to what a search tool asks (the hash embedder's vector)."""
    args = "".join(f", {k} => %({k})s" for k in kw)
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute(f"SELECT * FROM corpus.corpus_hybrid_search(%(c)s, %(v)s::vector, %(t)s{args}) "
                           "ORDER BY rank", dict(c=corpus, v=hash_vector(query), t=query, **kw)).fetchall()


def test_a_page_is_the_next_ranks_of_the_same_ranking(demo_dsn, conn, tmp_path):
    """offset pages a search tool's hits as corpus_hybrid_search's "offset" does: the second page
    of k holds ranks k+1..2k, none of the first page's; past the last page, a plain answer."""
    query = "בית המשפט"

    async def pages(s):
        return [await s.call_tool("search_precedent_library", {"query": query, "k": 3, "offset": o})
                for o in (0, 3, 900)]
    first, second, beyond = run(demo_dsn, pages, config=without_evidence(tmp_path))
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        want = cur.execute('SELECT * FROM corpus.corpus_hybrid_search(%s, %s::vector, %s, k => 3, evidence => false, '
                           'filter_mode => \'lenient\', "offset" => 3) ORDER BY rank',
                           ["external_precedents", hash_vector(query), query]).fetchall()
    hits = second.structured_content["hits"]
    assert [(h["rank"], h["item_id"]) for h in hits] == [(r["rank"], r["item_id"]) for r in want]
    assert [h["rank"] for h in hits] == [4, 5, 6]
    assert not {h["item_id"] for h in hits} & {h["item_id"] for h in first.structured_content["hits"]}
    assert not beyond.is_error and beyond.structured_content["hits"] == []
    assert "No more results" in text(beyond)


def test_hits_found_without_their_embeddings_are_said(demo_dsn, conn, tmp_path):
    """Hits whose embeddings describe old text (queued for re-embedding) are found by their words
    only: the answer says how many, so a model knows the search by meaning was partial."""
    query = "בית המשפט"

    async def search(s, k=5):
        return await s.call_tool("search_precedent_library", {"query": query, "k": k})

    async def wide(s):
        return await search(s, 20)
    config = without_evidence(tmp_path)
    before = run(demo_dsn, search, config=config)
    assert before.structured_content["unembedded"] == 0 and "found by their words only" not in text(before)
    hit = before.structured_content["hits"][0]
    table, column, key = conn.execute("SELECT item_table::text, quote_ident(text_column), quote_ident(id_column) "
                                      "FROM corpus.sources WHERE corpus = 'external_precedents' AND name = %s",
                                      [hit["source"]]).fetchone()
    ids = [h["item_id"] for h in before.structured_content["hits"] if h["source"] == hit["source"]][:3]
    conn.execute(f"UPDATE {table} SET {column} = {column} || ' ' WHERE {key}::text = ANY(%s)", [ids])
    try:
        after = run(demo_dsn, wide, config=config)
    finally:
        conn.execute(f"UPDATE {table} SET {column} = left({column}, -1) WHERE {key}::text = ANY(%s)", [ids])
        conn.execute("DELETE FROM corpus.embedding_queue WHERE item_table = %s::regclass AND item_id = ANY(%s)",
                     [table, ids])
    stale = [h for h in after.structured_content["hits"] if h["item_id"] in ids and h["source"] == hit["source"]]
    assert stale and all(h["semantic_rank"] is None for h in stale)
    assert after.structured_content["unembedded"] == len(stale)
    assert f"Note: {len(stale)} of these results were found by their words only" in text(after)


def test_a_question_the_corpus_cannot_answer_is_no_evidence_never_neighbours(demo_dsn, tmp_path):
    """Words no precedent holds: with evidence (the default) the answer says plainly that the
    corpus does not hold it, with no hits and no error; the same search without evidence returns
    the nearest neighbours, which a model would otherwise cite."""
    question = "quantum chromodynamics of sparrows"

    async def body(s):
        return (await s.call_tool("search_precedent_library", {"query": question, "k": 5}),
                await s.call_tool("search_case_documents", {"query": question, "practice_area": "aerodynamics"}))
    library, docs = run(demo_dsn, body)
    for res, corpus in ((library, "external_precedents"), (docs, "case_documents")):
        assert not res.is_error, text(res)
        assert res.structured_content["hits"] == [] and res.structured_content["evidence"] is True
        assert text(res).startswith(f'No evidence in {corpus} for "{question}": nothing in the corpus'), text(res)
        assert "rare words" in text(res) and "near it" in text(res)
        assert "why:" not in text(res)
    assert 'with practice_area = "aerodynamics"' in text(docs), "the scope it searched is said"

    async def unfiltered(s):
        return await s.call_tool("search_precedent_library", {"query": question, "k": 5})
    nearest = run(demo_dsn, unfiltered, config=without_evidence(tmp_path))
    assert not nearest.is_error and len(nearest.structured_content["hits"]) == 5
    assert nearest.structured_content["evidence"] is False and "No evidence" not in text(nearest)


def test_every_hit_says_why_from_its_evidence_or_its_ranks(demo_dsn, conn, tmp_path):
    """With evidence, each hit's why names the rare query words the extension found in it (its
    evidence column, as the SQL function returns it); without, how each branch ranked it. The
    why is in the structured hit and on the hit's line of the text."""
    query = "שופטת בית המשפט המחוזי בתל אביב"
    expected = search_sql(conn, "external_precedents", query, k=5, evidence=True)
    assert expected and all("rare_words" in r["evidence"] for r in expected)

    async def body(s):
        return await s.call_tool("search_precedent_library", {"query": query, "k": 5})
    res = run(demo_dsn, body)
    hits = res.structured_content["hits"]
    assert [h["item_id"] for h in hits] == [r["item_id"] for r in expected]
    for h, r in zip(hits, expected):
        rare = r["evidence"]["rare_words"]
        words = ", ".join(f'"{w}"' for w in rare["as_written"])
        assert h["why"].startswith(f"contains the rare query word{'s' if len(rare['words']) > 1 else ''} {words} "
                                   f"({len(rare['words'])} of {rare['counted_words']})"), h["why"]
        assert h["evidence"] == r["evidence"]
        assert f"why: {h['why']}" in text(res)
        # the hit's line shows its snippet: the passage with the matched words in bold, as
        # corpus_snippet marks them with the source's analyser
        want = conn.execute("SELECT corpus.corpus_snippet('external_precedents', %s, %s, %s, 240, '**', '**')",
                            [r["source"], r["content"], query]).fetchone()[0]
        assert h["snippet"] == want and "**" in want and want in text(res), (h["snippet"], want)
        assert h["text"] == r["content"]

    # vector thresholds every candidate is within: the vector rule admits too, and says how near
    before = conn.execute("SELECT evidence FROM corpus.corpora WHERE name = 'external_precedents'").fetchone()[0]
    conn.execute("""SELECT corpus.corpus_alter('external_precedents',
                      evidence => '{"vector": {"default": {"max_distance": 2, "max_gap": 2}}}')""")
    try:
        expected = search_sql(conn, "external_precedents", query, k=5, evidence=True)
        near = run(demo_dsn, body).structured_content["hits"]
    finally:
        conn.execute("SELECT corpus.corpus_alter('external_precedents', evidence => %s)", [Jsonb(before)])
    assert [h["item_id"] for h in near] == [r["item_id"] for r in expected]
    for h, r in zip(near, expected):
        v = r["evidence"]["near_vector"]
        assert f"semantically near the query (distance {v['distance']:.2f}, best {v['best_distance']:.2f})" \
            in h["why"], h["why"]

    async def unfiltered(s):
        return await s.call_tool("search_precedent_library", {"query": query, "k": 5})
    hits = run(demo_dsn, unfiltered, config=without_evidence(tmp_path)).structured_content["hits"]
    assert len(hits) == 5 and all(h["evidence"] is None for h in hits)
    assert any(h["semantic_rank"] and h["lexical_rank"] for h in hits)
    for h in hits:
        ranks = [f"{nth(r)} by {b}" for r, b in ((h["semantic_rank"], "meaning"), (h["lexical_rank"], "words")) if r]
        assert h["why"] == "ranked " + " and ".join(ranks), h


def nth(n):
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def hit(**kw):
    base = dict(rank=1, corpus="c", source="chunks", item_id="1", parent_id="1", score=0.1, semantic_rank=None,
                semantic_distance=None, lexical_rank=None, lexical_score=None, content="t")
    return Hit(**{**base, **kw})


def test_why_reads_each_kind_of_evidence_and_the_ranks():
    why = mcp_server.why
    both = {"near_vector": {"space": "default", "distance": 0.1234, "best_distance": 0.1011},
            "rare_words": {"coverage": 0.67, "words": ["svobod", "pavl"], "counted_words": 3}}
    assert why(hit(evidence=both)) == ('contains the rare query words "svobod", "pavl" (2 of 3); '
                                       "semantically near the query (distance 0.12, best 0.10)")
    assert why(hit(evidence={"near_vector": {"space": "images", "distance": 0.2, "best_distance": 0.15}})) == \
        "semantically near the query (distance 0.20, best 0.15, space images)"
    assert why(hit(evidence={"rare_words": {"coverage": 1.0, "words": ["שופטת"], "counted_words": 1}})) == \
        'contains the rare query word "שופטת" (1 of 1)'
    edge = {"edges": "cites", "seed": {"source": "chunks", "item_id": "42"}, "hop_penalty": 0.05}
    assert why(hit(evidence={"graph_edge": edge})) == "cited by a hit with evidence (chunks 42, edge set cites)"
    assert why(hit(semantic_rank=3, lexical_rank=1)) == "ranked 3rd by meaning and 1st by words"
    assert why(hit(semantic_rank=12)) == "ranked 12th by meaning"
    assert why(hit(lexical_rank=22)) == "ranked 22nd by words"
    assert why(hit(origin={"kind": "must_include", "class": "binding_law", "class_rank": 1})) == \
        'included as one of the best "binding_law" items'
    assert why(hit()) == "ranked by the fused score"


def test_an_evidence_search_the_corpus_cannot_judge_is_a_tool_error_with_the_hint(demo_dsn, conn):
    """A session whose lexical scorer is not BM25 cannot apply the rare-words rule: the
    extension's 55000, its message and hint, is the tool's error (not an empty answer)."""
    dsn = psycopg.conninfo.make_conninfo(demo_dsn, options="-c pg_corpus.lexical_scorer=ts_rank_cd")
    query = "שופטת בית המשפט"
    with psycopg.connect(dsn, autocommit=True) as c:
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as refused:
            search_sql(c, "external_precedents", query, k=5, evidence=True)
    diag = refused.value.diag
    assert diag.message_hint

    async def body(s):
        return await s.call_tool("search_precedent_library", {"query": query, "k": 5})
    res = run(dsn, body)
    assert res.is_error
    assert text(res) == f"{diag.message_primary}\nHint: {diag.message_hint}"


def test_allowed_values_are_an_enum_in_the_schema_and_other_values_are_refused(demo_dsn, conn):
    """The example lists practice_area's values for the precedent tools; case_documents'
    practice_area gets the values the corpus itself declares (filter_fields {"type",
    "values"}). Both are enums in the schema and the description; a value outside is refused by
    validation in plain words, one inside searches."""
    fields = conn.execute("SELECT filter_fields FROM corpus.corpora WHERE name = 'case_documents'").fetchone()[0]
    declared = {**fields, "practice_area": {"type": "text", "values": ["aerodynamics", "structures"]}}
    conn.execute("SELECT corpus.corpus_alter('case_documents', filter_fields => %s)", [Jsonb(declared)])

    async def body(s):
        tools = {t.name: t for t in (await s.list_tools()).tools}
        calls = [await s.call_tool("search_precedent_library", {"query": "קנאביס", "practice_area": "tax"}),
                 await s.call_tool("search_precedent_library", {"query": "קנאביס", "practice_area": "planning"}),
                 await s.call_tool("search_case_documents", {"query": "wing", "practice_area": "tax"}),
                 await s.call_tool("search_case_documents", {"query": "slipstream", "practice_area": "aerodynamics"})]
        return tools, calls
    try:
        tools, (bad_library, library, bad_docs, docs) = run(demo_dsn, body)
    finally:
        conn.execute("SELECT corpus.corpus_alter('case_documents', filter_fields => %s)", [Jsonb(fields)])
    area = tools["search_precedent_library"].input_schema["properties"]["practice_area"]
    assert {"enum": ["planning", "betterment_levy", "compensation"], "type": "string"} in area["anyOf"]
    assert area["description"].endswith('one of "planning", "betterment_levy", "compensation"')
    assert "enum" not in json.dumps(tools["search_precedent_library"].input_schema["properties"]["court"])
    required = tools["search_case_documents"].input_schema["properties"]["practice_area"]
    assert required["enum"] == ["aerodynamics", "structures"] and "aerodynamics" in required["description"]
    assert tools["search_case_documents"].input_schema["required"] == ["query", "practice_area"]
    assert bad_library.is_error and text(bad_library) == (
        "search_precedent_library: practice_area: Input should be 'planning', 'betterment_levy' or "
        "'compensation' (got \"tax\").")
    assert bad_docs.is_error and "'aerodynamics' or 'structures'" in text(bad_docs)
    assert not library.is_error and library.structured_content["filters"] == {"practice_area": "planning"}
    assert not docs.is_error and docs.structured_content["hits"], text(docs)


def corpus_info(filter_fields, required=()):
    return CorpusInfo(name="c", description=None, isolation={}, required_filters=list(required),
                      filter_fields=filter_fields, sources=[{"source": "s"}])


def tools_toml(extra):
    return f'[[tools]]\nname = "t"\ncorpus = "c"\ndescription = "d"\nfilter_fields = ["court", "year"]\n{extra}'


@pytest.mark.parametrize("extra, fields, error", [
    ('values = {court = ["high"]}', {"court": {"type": "text", "values": ["supreme", "district"]}, "year": "integer"},
     "not among the values corpus 'c' allows for 'court'"),
    ('values = {year = ["2020"]}', {"court": "text", "year": "integer"}, "values of 'year' must be integer values"),
    ('values = {year = [1990]}', {"court": "text", "year": {"type": "integer", "min": 2000}}, "outside the corpus' range"),
    ('values = {area = ["x"]}', {"court": "text", "year": "integer", "area": "text"}, "not one of its filters"),
])
def test_a_tool_may_only_narrow_the_values_the_corpus_allows(extra, fields, error):
    config = mcp_server.load_config(tools_toml(extra))
    with pytest.raises(mcp_server.ConfigError, match=error):
        mcp_server.check_against_catalog(config, {"c": corpus_info(fields)})


def test_evidence_and_values_keys_are_checked_when_the_configuration_loads():
    assert mcp_server.load_config(tools_toml("")).tools[0].evidence is None     # a search tool: filtered
    assert mcp_server.load_config(tools_toml("evidence = false")).tools[0].evidence is False
    for bad in ['evidence = "yes"', 'kind = "similar"\nevidence = true', 'values = {court = "supreme"}',
                'values = {court = []}']:
        with pytest.raises(mcp_server.ConfigError):
            mcp_server.load_config(tools_toml(bad))
    config = mcp_server.load_config(tools_toml('values = {court = ["supreme"]}'))
    mcp_server.check_against_catalog(config, {"c": corpus_info({"court": {"type": "text", "values": ["supreme", "x"]},
                                                                "year": "integer"})})
    assert config.tools[0].values == {"court": ["supreme"]}


def test_the_configured_embedder_is_the_one_loaded(demo_dsn, tmp_path):
    """[server] embedder names the query embedder when --embedder does not."""
    config = tmp_path / "embedder.toml"
    config.write_text('[server]\nembedder = "no_such_module:factory"\n' + tools_toml("").replace(
        'corpus = "c"', 'corpus = "external_precedents"').replace('["court", "year"]', '["court"]'))
    res = subprocess.run([sys.executable, "-m", "pg_corpus.mcp_server", "--dsn", demo_dsn, "--config", str(config)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "no_such_module" in res.stderr, res.stderr


#: run in a fresh interpreter: load the embedder named by argv[1] and print the top-level
#: third-party modules it imported (or tried to: a package that is not installed is named too)
RECORD_IMPORTS = r"""
import importlib.abc, json, sys
from pg_corpus import embedders
seen = set()
class Record(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        top = name.partition(".")[0]
        if path is None and top not in sys.stdlib_module_names and top != "pg_corpus":
            seen.add(top)
        return None
sys.meta_path.insert(0, Record())
try:
    embedders.load(sys.argv[1])
except Exception:
    pass
print(json.dumps(sorted(seen)))
"""


def requirement_name(requirement):
    return re.match(r"[A-Za-z0-9._-]+", requirement).group(0).lower().replace("_", "-").replace(".", "-")


def installed_closure(names):
    """``names`` and, for those installed here, the distributions they require (no extras')."""
    out, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [requirement_name(r) for r in requires if "extra ==" not in r]
    return out


def test_the_mcp_extra_installs_every_embedder_the_example_names():
    """pip install "pg-corpus[mcp]" then pg-corpus-mcp --config legal.toml must work: every module
    the example's embedder imports belongs to a requirement of the package or of its [mcp] extra
    (read from pyproject.toml), or to what those require."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    allowed = installed_closure({requirement_name(r) for r in
                                 project["dependencies"] + project["optional-dependencies"]["mcp"]})
    config = mcp_server.load_config(CONFIG.read_text(encoding="utf-8"))
    named = config.embedder or mcp_server.DEFAULT_EMBEDDER
    assert named in mcp_server.embedders.BUILTIN or ":" in named
    modules = json.loads(subprocess.run([sys.executable, "-c", RECORD_IMPORTS, named], capture_output=True,
                                        text=True, check=True, timeout=120).stdout)
    if named != "hash":
        assert modules, f"the {named} embedder imports no package of its own?"
    distributions = importlib.metadata.packages_distributions()
    for module in modules:
        owners = {requirement_name(d) for d in distributions.get(module, [module])}
        assert owners & allowed, (f"the {named} embedder of {CONFIG.name} imports {module}, which "
                                  f"pip install 'pg-corpus[mcp]' does not install ({sorted(owners)})")


def test_no_evidence_names_the_filters_the_search_ran_with():
    """A condition the search dropped (lenient filters) is not part of the scope it says it
    searched; the dropped one is listed as ignored."""
    result = mcp_server.SearchResult(
        corpus="c", query="q", hits=[], evidence=True,
        filters={"court": "supreme", "year": {"gte": "x", "lte": 2020}, "area": 5},
        dropped_filters=[mcp_server.DroppedFilter(condition={"year": {"gte": "x"}}, reason="not a number"),
                         mcp_server.DroppedFilter(condition={"area": 5}, reason="not text")])
    out = mcp_server.render(result)
    assert out.splitlines()[0] == ('No evidence in c for "q": nothing in the corpus with court = "supreme", '
                                   'year = {"lte": 2020} contains the query\'s rare words or is near it in meaning. '
                                   'The corpus does not hold the answer; say so rather than answer from elsewhere.')
    assert 'ignored filter {"area": 5}: not text' in out
