"""The SQL of every call, shared by the sync and async clients: statement text with only the
arguments the caller gave (the others take the function's SQL defaults), every value a bind
parameter, and how to read the rows."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, Generic, Sequence, TypeVar, cast

import numpy as np
from psycopg import sql
from psycopg.types.json import Jsonb

from . import types as t


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()
"""An argument not given: the SQL function's default applies (None means SQL NULL)."""

VectorLike = Any  # numpy array, list/tuple of floats, or None


def vector(value: VectorLike) -> Any:
    """A query or item vector as pgvector's adapter takes it (float32 numpy array)."""
    if value is None or value is UNSET:
        return value
    if hasattr(value, "to_numpy"):  # pgvector.Vector, as a vector column reads back
        value = value.to_numpy()
    arr = np.asarray(value, dtype=np.float32)
    if arr.ndim != 1:
        raise ValueError(f"a vector must be one-dimensional, got shape {arr.shape}")
    return arr


def _json(value: Any) -> Any:
    return value if value is None or value is UNSET else Jsonb(value)


T = TypeVar("T")
Rows = list[dict[str, Any]]


@dataclass
class Call(Generic[T]):
    query: sql.Composed
    params: list[Any]
    read: Callable[[Rows], T]


def _call(function: str, positional: Sequence[tuple[Any, str | None]], named: Sequence[tuple[str, Any, str | None]],
          read: Callable[[Rows], T], returns_rows: bool = True, select: str = "*") -> Call[T]:
    """``SELECT * FROM corpus.function(<positional>, name => value, ...)``; a cast names each
    parameter's type so that NULLs resolve (None of a vector stays untyped: pgvector's type may
    live in any schema)."""
    args: list[sql.Composable] = []
    params: list[Any] = []
    for value, cast in positional:
        args.append(sql.SQL("%s") + _cast(cast))
        params.append(value)
    for name, value, cast in named:
        if value is UNSET:
            continue
        args.append(sql.Identifier(name) + sql.SQL(" => %s") + _cast(cast))
        params.append(value)
    target = sql.SQL("corpus.") + sql.Identifier(function) + sql.SQL("(") + sql.SQL(", ").join(args) + sql.SQL(")")
    query = (sql.SQL(f"SELECT {select} FROM ") if returns_rows else sql.SQL("SELECT ")) + target
    return Call(query, params, read)


def _cast(cast: str | None) -> sql.Composable:
    """``::pg_catalog.<type>``: schema-qualified, so that no search_path the session ends up
    with can substitute another type (or domain) for a built-in one."""
    if not cast:
        return sql.SQL("")
    base, array = (cast[:-2], "[]") if cast.endswith("[]") else (cast, "")
    name = {"int": "int4", "integer": "int4", "bigint": "int8", "smallint": "int2", "boolean": "bool"}.get(base, base)
    return sql.SQL("::pg_catalog.") + sql.Identifier(name) + sql.SQL(array)


def rows_of(cls: type[T]) -> Callable[[Rows], list[T]]:
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    return lambda rows: [cls(**{n: r[n] for n in names}) for r in rows]


def _scalar(rows: Rows) -> Any:
    return next(iter(rows[0].values())) if rows else None


def text(rows: Rows) -> str:
    return cast(str, _scalar(rows))


def count(rows: Rows) -> int:
    return cast(int, _scalar(rows))


def nothing(rows: Rows) -> None:
    return None


def query_vectors(vectors: Any) -> Any:
    """``query_vectors`` as jsonb: {space: numpy array or floats} → {space: [floats]}."""
    if vectors is None or vectors is UNSET:
        return vectors
    return Jsonb({space: [float(x) for x in v] for space, v in dict(vectors).items()})


def extra_queries(queries: Any) -> Any:
    """``extra_queries`` as jsonb: each query's vector (a numpy array or a sequence of floats)
    becomes a JSON array of numbers; None and UNSET pass through."""
    if queries is None or queries is UNSET:
        return queries
    out = []
    for q in queries:
        q = dict(q)
        if q.get("vector") is not None:
            q["vector"] = [float(x) for x in q["vector"]]
        out.append(q)
    return Jsonb(out)


def search(corpus: str, vec: VectorLike, text: str | None, k: int, filters: Any, mode: Any, max_per_parent: Any,
           candidates: Any, rrf_k: Any, include_stale: Any, feedback: Any,
           extra: Any = UNSET, filter_mode: Any = UNSET, vectors: Any = UNSET, evidence: Any = UNSET,
           expand: Any = UNSET) -> Call[list[t.Hit]]:
    return _call("corpus_hybrid_search", [(corpus, "text"), (vector(vec), None), (text, "text")],
                 [("k", k, "int"), ("filters", _json(filters), "jsonb"), ("mode", mode, "text"),
                  ("max_per_parent", max_per_parent, "int"), ("candidates", candidates, "int"),
                  ("rrf_k", rrf_k, "int"), ("include_stale", include_stale, "boolean"),
                  ("feedback", feedback, "boolean"), ("extra_queries", extra_queries(extra), "jsonb"),
                  ("filter_mode", filter_mode, "text"), ("query_vectors", query_vectors(vectors), "jsonb"),
                  ("evidence", evidence, "boolean"), ("expand", expand, "boolean")],
                 rows_of(t.Hit))


def find_similar(corpus: str, source: str, item_id: str, k: Any, filters: Any, mode: Any, max_per_parent: Any,
                 exclude_parent: Any, candidates: Any, rrf_k: Any, include_stale: Any,
                 filter_mode: Any = UNSET) -> Call[list[t.Hit]]:
    return _call("corpus_find_similar", [(corpus, "text"), (source, "text"), (str(item_id), "text")],
                 [("k", k, "int"), ("filters", _json(filters), "jsonb"), ("mode", mode, "text"),
                  ("max_per_parent", max_per_parent, "int"), ("exclude_parent", exclude_parent, "boolean"),
                  ("candidates", candidates, "int"), ("rrf_k", rrf_k, "int"),
                  ("include_stale", include_stale, "boolean"), ("filter_mode", filter_mode, "text")],
                 rows_of(t.Hit))


def check_filters(corpus: str, filters: Any, filter_mode: Any) -> Call[list[t.FilterCheck]]:
    return _call("corpus_check_filters", [(corpus, "text"), (_json(filters), "jsonb")],
                 [("filter_mode", filter_mode, "text")], rows_of(t.FilterCheck))


def explain(corpus: str, vec: VectorLike, text: str | None, k: Any, filters: Any, mode: Any, candidates: Any,
            include_stale: Any, extra: Any = UNSET, filter_mode: Any = UNSET,
            vectors: Any = UNSET) -> Call[list[t.Subplan]]:
    return _call("corpus_explain", [(corpus, "text"), (vector(vec), None), (text, "text")],
                 [("k", k, "int"), ("filters", _json(filters), "jsonb"), ("mode", mode, "text"),
                  ("candidates", candidates, "int"), ("include_stale", include_stale, "boolean"),
                  ("extra_queries", extra_queries(extra), "jsonb"), ("filter_mode", filter_mode, "text"),
                  ("query_vectors", query_vectors(vectors), "jsonb")],
                 rows_of(t.Subplan))


def health(corpus: str | None) -> Call[list[t.HealthRow]]:
    return _call("corpus_health_check", [(corpus, "text")], [], rows_of(t.HealthRow))


def evaluate(gold_set: str, modes: Any, k: Any, max_per_parent: Any, rrf_k: Any, candidates: Any, store: Any) -> Call[list[t.EvalRun]]:
    return _call("corpus_evaluate", [(gold_set, "text")],
                 [("modes", list(modes) if modes not in (None, UNSET) else modes, "text[]"), ("k", k, "int"),
                  ("max_per_parent", max_per_parent, "int"), ("rrf_k", rrf_k, "int"),
                  ("candidates", candidates, "int"), ("store", store, "boolean")],
                 rows_of(t.EvalRun))


def compare_runs(run_a: int, run_b: int, trials: Any) -> Call[list[t.RunComparison]]:
    return _call("corpus_compare_runs", [(run_a, "bigint"), (run_b, "bigint")], [("trials", trials, "int")],
                 rows_of(t.RunComparison))


def compare_queries(run_a: int, run_b: int, metric: Any) -> Call[list[t.QueryComparison]]:
    return _call("corpus_compare_queries", [(run_a, "bigint"), (run_b, "bigint")], [("metric", metric, "text")],
                 rows_of(t.QueryComparison))


def gold_set_create(name: str, corpus: str, level: Any, description: Any) -> Call[None]:
    return _call("corpus_gold_set_create", [(name, "text"), (corpus, "text")],
                 [("level", level, "text"), ("description", description, "text")], nothing, returns_rows=False)


def list_corpora() -> Call[list[t.CorpusInfo]]:
    return _call("corpus_list", [], [], rows_of(t.CorpusInfo))


def create_corpus(name: str, isolation: Any, required_filters: Any, filter_fields: Any, description: Any,
                  spaces: Any = UNSET) -> Call[None]:
    return _call("corpus_create", [(name, "text")],
                 [("isolation", _json(isolation), "jsonb"), ("required_filters", required_filters, "text[]"),
                  ("filter_fields", _json(filter_fields), "jsonb"), ("description", description, "text"),
                  ("spaces", _json(spaces), "jsonb")],
                 nothing, returns_rows=False)


SOURCE_OPTIONS: dict[str, str] = {
    "id_column": "text", "parent_table": "regclass", "parent_fk": "text", "parent_key": "text",
    "parent_required": "text[]", "rule": "jsonb", "locator": "jsonb", "metadata": "jsonb", "min_length": "int",
    "ts_config": "regconfig", "distance": "text", "semantic_weight": "float8", "lexical_weight": "float8",
    "embedding_inputs": "text[]", "embedding_model": "text", "language": "text", "space": "text",
}


def add_source(corpus: str, source: str, item_table: str, text_column: str, embedding_column: str, tsv_column: str,
               options: dict[str, Any]) -> Call[None]:
    unknown = sorted(set(options) - set(SOURCE_OPTIONS))
    if unknown:
        raise TypeError(f"add_source() got unexpected keyword arguments {unknown}; known: {sorted(SOURCE_OPTIONS)}")
    named = [(name, _json(value) if SOURCE_OPTIONS[name] == "jsonb" else value, SOURCE_OPTIONS[name])
             for name, value in options.items()]
    return _call("corpus_add_source", [(corpus, "text"), (source, "text"), (item_table, "regclass")],
                 [("text_column", text_column, "text"), ("embedding_column", embedding_column, "text"),
                  ("tsv_column", tsv_column, "text"), *named],
                 nothing, returns_rows=False)


def alter_corpus(name: str, isolation: Any, required_filters: Any, filter_fields: Any, description: Any,
                 spaces: Any = UNSET) -> Call[None]:
    return _call("corpus_alter", [(name, "text")],
                 [("isolation", _json(isolation), "jsonb"), ("required_filters", required_filters, "text[]"),
                  ("filter_fields", _json(filter_fields), "jsonb"), ("description", description, "text"),
                  ("spaces", _json(spaces), "jsonb")],
                 nothing, returns_rows=False)


def drop_source(corpus: str, source: str) -> Call[None]:
    return _call("corpus_drop_source", [(corpus, "text"), (source, "text")], [], nothing, returns_rows=False)


def drop_corpus(name: str, if_exists: Any) -> Call[None]:
    return _call("corpus_drop", [(name, "text")], [("if_exists", if_exists, "boolean")], nothing, returns_rows=False)


def bm25_query(query: str, language: str) -> Call[list[t.QueryKey]]:
    return _call("bm25_query", [(query, "text"), (language, "text")], [], rows_of(t.QueryKey))


def refresh_lexical_stats(corpus: Any, only_stale: Any, stale_fraction: Any) -> Call[list[t.LexicalRefresh]]:
    return _call("corpus_refresh_lexical_stats", [],
                 [("corpus", corpus, "text"), ("only_stale", only_stale, "boolean"),
                  ("stale_fraction", stale_fraction, "float8")],
                 rows_of(t.LexicalRefresh))


def claim(batch_size: Any, lease: Any, worker: Any, only_table: Any) -> Call[list[t.QueuedItem]]:
    # item_table as text: a regclass prints qualified only when it is not on the search_path
    return _call("corpus_embedding_claim", [],
                 [("batch_size", batch_size, "int"), ("lease", lease, "interval"), ("worker", worker, "text"),
                  ("only_table", only_table, "regclass")],
                 rows_of(t.QueuedItem),
                 select="item_table::pg_catalog.oid::pg_catalog.int8 AS table_oid, "
                        "item_table::pg_catalog.text AS item_table, "
                        "embedding_column::pg_catalog.text AS embedding_column, item_id, version, content, model, "
                        "dimensions, reason, attempts")


def _item(item: t.QueuedItem) -> list[tuple[Any, str | None]]:
    return [(str(item.table_oid), "regclass"), (item.embedding_column, "name"), (item.item_id, "text"),
            (item.version, "bigint")]


def complete(item: t.QueuedItem, embedding: VectorLike, model: Any) -> Call[str]:
    return _call("corpus_embedding_complete", [*_item(item), (vector(embedding), None)],
                 [("model", model, "text")], text, returns_rows=False)


def fail(item: t.QueuedItem, error: str, max_attempts: Any) -> Call[str]:
    return _call("corpus_embedding_fail", [*_item(item), (error, "text")],
                 [("max_attempts", max_attempts, "int")], text, returns_rows=False)


def release(item: t.QueuedItem, worker: Any) -> Call[str]:
    return _call("corpus_embedding_release", _item(item), [("worker", worker, "text")], text, returns_rows=False)


def retry_dead(only_table: Any) -> Call[int]:
    return _call("corpus_embedding_retry_dead", [], [("only_table", only_table, "regclass")], count,
                 returns_rows=False)


def enqueue(item_table: str, embedding_column: str, only_missing: Any) -> Call[int]:
    return _call("corpus_embedding_enqueue", [(item_table, "regclass"), (embedding_column, "name")],
                 [("only_missing", only_missing, "boolean")], count, returns_rows=False)
