#!/usr/bin/env python3
"""The Python client's and the MCP server's costs on top of the search itself:

1. client overhead: the same search through raw psycopg and through `pg_corpus.Client` on one
   connection, interleaved, p50/p95 and their difference (target: <= 0.5 ms at p50);
2. MCP: a `search_precedent_library` tool call over stdio (the SDK's client, the hash embedder)
   against the same search made by the client with the same hash vector (target: <= 2x);
3. pool throughput: AsyncClient over an AsyncConnectionPool with 1, 4 and 8 concurrent callers.

    .venv/bin/python bench/client.py [--repeats 300] [--seconds 5]
    .venv/bin/python bench/client.py --smoke           # a few searches, outputs in bench/out/smoke/

Runs a private cluster (bench/harness.py) with the demo sample (demo/load_sample.py) and writes
docs/client.md and bench/out/raw/client.json (not committed). Machines are shared and noisy:
compare the ratios of one run."""
import asyncio
import os
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
from mcp import ClientSession, StdioServerParameters, stdio_client
from psycopg_pool import AsyncConnectionPool

from pg_corpus import AsyncClient, Client
from pg_corpus.embedders import HashEmbedder

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "clients" / "python" / "src" / "pg_corpus" / "examples" / "legal.toml"
QUERIES = ["שופטת בית המשפט המחוזי", "כתב האישום", "ועדת ערר", "חוק", "עתירה נגד החלטה", "בית המשפט העליון"]
RAW = ("SELECT rank, corpus, source, item_id, parent_id, score, semantic_rank, semantic_distance, lexical_rank, "
       "lexical_score, content, locator, metadata, embedding_stale "
       "FROM corpus.corpus_hybrid_search(%s::text, %s, %s::text, k => %s::int)")


pct = h.pct


def client_overhead(dsn, repeats, embedder):
    from pgvector.psycopg import register_vector

    raw_ms, client_ms = [], []
    rng = np.random.default_rng(0)
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        client = Client(conn)
        for i in range(repeats + 20):
            q = QUERIES[i % len(QUERIES)]
            v = embedder.query(q)
            times, _ = h.interleave({"raw": lambda: conn.execute(RAW, ["external_precedents", v, q, 10]).fetchall(),
                                     "client": lambda: client.search("external_precedents", v, q, k=10)}, 1, rng)
            if i >= 20:  # warm-up
                raw_ms += times["raw"]
                client_ms += times["client"]
    return {"raw_p50": pct(raw_ms, 50), "raw_p95": pct(raw_ms, 95), "client_p50": pct(client_ms, 50),
            "client_p95": pct(client_ms, 95), "overhead_p50": pct(client_ms, 50) - pct(raw_ms, 50),
            "repeats": repeats}


async def mcp_latency(dsn, repeats, embedder):
    params = StdioServerParameters(command=sys.executable, env={**os.environ},
                                   args=["-m", "pg_corpus.mcp_server", "--dsn", dsn, "--config", str(CONFIG),
                                         "--embedder", "hash"])
    tool_ms, search_ms = [], []
    async with AsyncClient(dsn) as client:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for i in range(repeats + 10):
                    q = QUERIES[i % len(QUERIES)]
                    t = time.perf_counter()
                    res = await session.call_tool("search_precedent_library", {"query": q, "k": 10})
                    a = time.perf_counter() - t
                    assert not res.is_error
                    t = time.perf_counter()
                    await client.search("external_precedents", embedder.query(q), q, k=10)
                    b = time.perf_counter() - t
                    if i >= 10:
                        tool_ms.append(a * 1000)
                        search_ms.append(b * 1000)
    return {"tool_p50": pct(tool_ms, 50), "tool_p95": pct(tool_ms, 95), "search_p50": pct(search_ms, 50),
            "search_p95": pct(search_ms, 95), "ratio_p50": pct(tool_ms, 50) / pct(search_ms, 50),
            "repeats": repeats}


async def throughput(dsn, callers, seconds, embedder):
    vectors = [embedder.query(q) for q in QUERIES]
    async with AsyncConnectionPool(dsn, min_size=callers, max_size=callers, open=False,
                                   kwargs={"autocommit": True}) as pool:
        client = AsyncClient(pool)
        done = 0
        latencies = []
        stop = time.perf_counter() + seconds

        async def caller(n):
            nonlocal done
            i = n
            while time.perf_counter() < stop:
                t = time.perf_counter()
                await client.search("external_precedents", vectors[i % len(QUERIES)], QUERIES[i % len(QUERIES)], k=10)
                latencies.append((time.perf_counter() - t) * 1000)
                done += 1
                i += 1
        t0 = time.perf_counter()
        await asyncio.gather(*(caller(n) for n in range(callers)))
        elapsed = time.perf_counter() - t0
    return {"callers": callers, "qps": done / elapsed, "p50": pct(latencies, 50), "p95": pct(latencies, 95)}


def params(p):
    p.add_argument("--repeats", type=int, default=300)
    p.add_argument("--seconds", type=float, default=5.0)


def run(a):
    with h.Cluster(a.dir, keep=a.keep) as uri:
        dsn = h.demo_database(uri, "pgc_bench_client")
        embedder = HashEmbedder(384)
        overhead = client_overhead(dsn, a.repeats, embedder)
        mcp = asyncio.run(mcp_latency(dsn, min(a.repeats, 200), embedder))
        pool = [asyncio.run(throughput(dsn, n, a.seconds, embedder)) for n in (1, 4, 8)]
    out = {"overhead": overhead, "mcp": mcp, "pool": pool, "cpus": os.cpu_count(), "command": a.command}
    h.write_raw(a.raw, out)
    lines = [
        "# The Python client and the MCP server: what they add to a search",
        "",
        f"`.venv/bin/python bench/client.py --repeats {a.repeats} --seconds {a.seconds:g}` on the demo sample "
        f"(`external_precedents`, hybrid, k = 10, 384-d hash-embedder query vectors, {os.cpu_count()} cores "
        "shared by the server and the callers). Raw figures: `bench/out/raw/client.json` (not committed).",
        "",
        "| what | p50 ms | p95 ms | target | |",
        "|---|---|---|---|---|",
        f"| raw psycopg (`SELECT … FROM corpus.corpus_hybrid_search(…)`) | {overhead['raw_p50']:.2f} | "
        f"{overhead['raw_p95']:.2f} | | |",
        f"| `pg_corpus.Client.search` on the same connection | {overhead['client_p50']:.2f} | "
        f"{overhead['client_p95']:.2f} | overhead ≤ 0.5 ms | {overhead['overhead_p50']:+.2f} ms: "
        f"{'met' if overhead['overhead_p50'] <= 0.5 else 'missed'} |",
        f"| `AsyncClient.search` (the MCP server's call) | {mcp['search_p50']:.2f} | {mcp['search_p95']:.2f} | | |",
        f"| MCP tool call over stdio, end to end | {mcp['tool_p50']:.2f} | {mcp['tool_p95']:.2f} | ≤ 2× the search "
        f"| {mcp['ratio_p50']:.2f}×: {'met' if mcp['ratio_p50'] <= 2 else 'missed'} |",
        "",
        f"Pool throughput (`AsyncClient` over an `AsyncConnectionPool`, {a.seconds:g} s per row):",
        "",
        "| concurrent callers | searches/s | p50 ms | p95 ms |",
        "|---|---|---|---|",
        *[f"| {p['callers']} | {p['qps']:.0f} | {p['p50']:.2f} | {p['p95']:.2f} |" for p in pool],
        "",
        "The client adds building the statement (only the arguments given), adapting the vector and "
        "turning rows into `Hit`s; the MCP call adds the query embedding (hash), the JSON-RPC round trip "
        "over stdio, pydantic validation of arguments and output, and the text rendering.",
        "",
    ]
    Path(a.markdown).write_text("\n".join(lines))
    print("\n".join(lines))


SPEC = h.Spec(name="client", about=__doc__.split("\n\n")[0], run=run, params=params,
              outputs=h.page_outputs("client", "client", plot=False), smoke=["--repeats", "5", "--seconds", "0.5"])

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
