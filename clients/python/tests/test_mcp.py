"""The MCP server through the SDK's own client, over stdio (and once over streamable HTTP),
against the demo sample with the legal tools configuration: tools listed with their schemas,
every tool called, hits with provenance, errors as tool errors that say what to add, and no
tool ever returning an item of another corpus (the seed's leak, #56, through MCP)."""
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import anyio
import psycopg
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

import pg_corpus
from pg_corpus import mcp_server

CONFIG = Path(pg_corpus.__file__).parent / "examples" / "legal.toml"
TOOLS = ["search_precedent_library", "search_internal_decisions", "search_case_documents", "find_similar_cases",
         "fetch_precedent", "corpus_health"]


def server_args(dsn, *extra):
    return ["-m", "pg_corpus.mcp_server", "--dsn", dsn, "--config", str(CONFIG), "--embedder", "hash", *extra]


def text(result):
    return "\n".join(c.text for c in result.content if getattr(c, "text", None))


async def with_session(dsn, body, errlog=sys.stderr):
    params = StdioServerParameters(command=sys.executable, args=server_args(dsn), env={**os.environ})
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await body(session)


def run(dsn, body, errlog=sys.stderr):
    return anyio.run(with_session, dsn, body, errlog)


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
    assert set(docs["properties"]) == {"query", "k", "practice_area", "section", "case_id"}
    library = tools["search_precedent_library"].input_schema
    assert "source_kind" not in library["properties"]           # the isolation column is never a parameter
    assert set(library["properties"]) == {"query", "k", "court", "practice_area", "case_number"}
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


def test_no_tool_returns_an_item_of_another_corpus(demo_dsn, conn):
    """The external items' own texts, searched through the internal tool (and the other way
    round): every hit belongs to the tool's corpus, checked against case_law.source_kind."""
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
    seen = run(demo_dsn, body)
    assert seen["search_internal_decisions"] and seen["search_precedent_library"]
    assert kind_of(conn, seen["search_internal_decisions"]) == {"internal_committee"}
    assert kind_of(conn, seen["search_precedent_library"]) == {"external_upload"}


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
                    res = await session.call_tool("search_precedent_library", {"query": "בית המשפט", "k": 2})
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
