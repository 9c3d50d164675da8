"""Every call of the clients, defined once: a function per call with the public signature and
docstring of the method (``Client.search`` and ``AsyncClient.search`` are made from ``search``)
that returns the statement text with only the arguments the caller gave (the others take the
function's SQL defaults), every value a bind parameter, and how to read the rows."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, Generic, Mapping, Sequence, TypeVar, cast

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


def _vector(value: VectorLike) -> Any:
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
          read: Callable[[Rows], T], returns_rows: bool = True, select: str | sql.Composable = "*",
          select_params: Sequence[Any] = ()) -> Call[T]:
    """``SELECT * FROM corpus.function(<positional>, name => value, ...)``; a cast names each
    parameter's type so that NULLs resolve (None of a vector stays untyped: pgvector's type may
    live in any schema). ``select`` replaces ``*``, with ``select_params`` bound to its
    placeholders."""
    args: list[sql.Composable] = []
    params: list[Any] = list(select_params)
    for value, cast in positional:
        args.append(sql.SQL("%s") + _cast(cast))
        params.append(value)
    for name, value, cast in named:
        if value is UNSET:
            continue
        args.append(sql.Identifier(name) + sql.SQL(" => %s") + _cast(cast))
        params.append(value)
    target = sql.SQL("corpus.") + sql.Identifier(function) + sql.SQL("(") + sql.SQL(", ").join(args) + sql.SQL(")")
    head = sql.SQL("SELECT ") + (sql.SQL(select) if isinstance(select, str) else select) + sql.SQL(" FROM ")
    query = (head if returns_rows else sql.SQL("SELECT ")) + target
    return Call(query, params, read)


def _cast(cast: str | None) -> sql.Composable:
    """``::pg_catalog.<type>``: schema-qualified, so that no search_path the session ends up
    with can substitute another type (or domain) for a built-in one."""
    if not cast:
        return sql.SQL("")
    base, array = (cast[:-2], "[]") if cast.endswith("[]") else (cast, "")
    name = {"int": "int4", "integer": "int4", "bigint": "int8", "smallint": "int2", "boolean": "bool"}.get(base, base)
    return sql.SQL("::pg_catalog.") + sql.Identifier(name) + sql.SQL(array)


def _rows_of(cls: type[T]) -> Callable[[Rows], list[T]]:
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    return lambda rows: [cls(**{n: r[n] for n in names if n in r}) for r in rows]


def _scalar(rows: Rows) -> Any:
    return next(iter(rows[0].values())) if rows else None


def _text(rows: Rows) -> str:
    return cast(str, _scalar(rows))


def _count(rows: Rows) -> int:
    return cast(int, _scalar(rows))


def _nothing(rows: Rows) -> None:
    return None


def _query_vectors(vectors: Any) -> Any:
    """``query_vectors`` as jsonb: {space: numpy array or floats} → {space: [floats]}, and
    {space: {"vector": ..., "model": name}} → {space: {"vector": [floats], "model": name}}."""
    if vectors is None or vectors is UNSET:
        return vectors
    out: dict[str, Any] = {}
    for space, v in dict(vectors).items():
        if isinstance(v, Mapping):
            entry = dict(v)
            if entry.get("vector") is not None:
                entry["vector"] = [float(x) for x in entry["vector"]]
            out[space] = entry
        else:
            out[space] = [float(x) for x in v]
    return Jsonb(out)


def _extra_queries(queries: Any) -> Any:
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


def _list(value: Any) -> Any:
    """A tuple or set of names as a list (a text[] parameter)."""
    return list(value) if isinstance(value, (tuple, set, frozenset)) else value


# -- search ----------------------------------------------------------------------------------

def search(corpus: str, vector: VectorLike = None, text: str | None = None, *, k: int = 10,
           filters: dict[str, Any] | None = UNSET, mode: str = UNSET, max_per_parent: int | None = UNSET,
           candidates: int | None = UNSET, rrf_k: int = UNSET, include_stale: bool = UNSET,
           feedback: bool | None = UNSET, extra_queries: Sequence[Mapping[str, Any]] | None = UNSET,
           filter_mode: str = UNSET, query_vectors: Mapping[str, VectorLike] | None = UNSET,
           evidence: bool | None = UNSET, expand: bool = UNSET, offset: int = UNSET,
           query_model: str | None = UNSET, snippet: bool = False, snippet_chars: int = 240,
           snippet_marks: tuple[str, str] = ("<b>", "</b>")) -> Call[list[t.Hit]]:
    """``corpus_hybrid_search``: the fused hits (list of :class:`Hit`). ``snippet``: each hit's
    :attr:`Hit.snippet`, the passage of at most ``snippet_chars`` characters with the query's
    words wrapped in ``snippet_marks`` (``corpus_snippet``, the source's own analyser). ``offset``:
    ranks skipped (pages of ``k`` are disjoint slices of one ranking). ``query_model``: the
    model that embedded ``vector`` (an :class:`Embedder`'s ``name``): refused (22023) where the
    corpus holds another model's embeddings, as during a model change before the switch.
    ``evidence``: only hits
    with evidence (an empty list means the corpus does not hold the answer); ``expand``: add
    the best hits' cited items (the corpus' edge sets). ``query_vectors``: a
    vector per named embedding space (``vector`` is the default space's). ``extra_queries``:
    queries fused with this one, each a mapping with ``text``, ``vector`` (numpy array or
    floats) or both, and optional ``weight`` and ``label``. ``filter_mode="lenient"``
    drops invalid filter conditions (see :meth:`check_filters`)."""
    return _call("corpus_hybrid_search", [(corpus, "text"), (_vector(vector), None), (text, "text")],
                 [("k", k, "int"), ("filters", _json(filters), "jsonb"), ("mode", mode, "text"),
                  ("max_per_parent", max_per_parent, "int"), ("candidates", candidates, "int"),
                  ("rrf_k", rrf_k, "int"), ("include_stale", include_stale, "boolean"),
                  ("feedback", feedback, "boolean"), ("extra_queries", _extra_queries(extra_queries), "jsonb"),
                  ("filter_mode", filter_mode, "text"), ("query_vectors", _query_vectors(query_vectors), "jsonb"),
                  ("evidence", evidence, "boolean"), ("expand", expand, "boolean"), ("offset", offset, "int"),
                  ("query_model", query_model, "text")],
                 _rows_of(t.Hit), **_snippet_select(corpus, text, snippet, snippet_chars, snippet_marks))


def _snippet_select(corpus: str, text: str | None, snippet: bool, chars: int,
                    marks: tuple[str, str]) -> dict[str, Any]:
    """The select list that adds each hit's snippet (none without ``snippet``)."""
    if not snippet:
        return {}
    start, stop = marks
    return {"select": sql.SQL("*, corpus.corpus_snippet(%s::pg_catalog.text, source, content, %s::pg_catalog.text, "
                              "%s::pg_catalog.int4, %s::pg_catalog.text, %s::pg_catalog.text) AS snippet"),
            "select_params": [corpus, text, chars, start, stop]}


def fetch(corpus: str, source: str, item_id: str | int, *, filters: dict[str, Any] | None = UNSET) -> Call[t.Item]:
    """``corpus_fetch``: one item's full text and provenance under the corpus predicate
    (:class:`UnknownCorpus` alike for a missing item and one outside the corpus)."""
    return _call("corpus_fetch", [(corpus, "text"), (source, "text"), (str(item_id), "text")],
                 [("filters", _json(filters), "jsonb")], lambda rows: _rows_of(t.Item)(rows)[0])


def find_similar(corpus: str, source: str, item_id: str | int, *, k: int = 10,
                 filters: dict[str, Any] | None = UNSET, mode: str = UNSET, max_per_parent: int | None = UNSET,
                 exclude_parent: bool = UNSET, candidates: int | None = UNSET, rrf_k: int = UNSET,
                 include_stale: bool = UNSET, filter_mode: str = UNSET) -> Call[list[t.Hit]]:
    """``corpus_find_similar``: items like one of the corpus' own items, never the item itself
    (nor, with ``exclude_parent``, its parent's other items)."""
    return _call("corpus_find_similar", [(corpus, "text"), (source, "text"), (str(item_id), "text")],
                 [("k", k, "int"), ("filters", _json(filters), "jsonb"), ("mode", mode, "text"),
                  ("max_per_parent", max_per_parent, "int"), ("exclude_parent", exclude_parent, "boolean"),
                  ("candidates", candidates, "int"), ("rrf_k", rrf_k, "int"),
                  ("include_stale", include_stale, "boolean"), ("filter_mode", filter_mode, "text")],
                 _rows_of(t.Hit))


def check_filters(corpus: str, filters: dict[str, Any], *, filter_mode: str = UNSET) -> Call[list[t.FilterCheck]]:
    """``corpus_check_filters``: what a search (lenient by default) keeps and drops of ``filters``."""
    return _call("corpus_check_filters", [(corpus, "text"), (_json(filters), "jsonb")],
                 [("filter_mode", filter_mode, "text")], _rows_of(t.FilterCheck))


def explain(corpus: str, vector: VectorLike = None, text: str | None = None, *, k: int = UNSET,
            filters: dict[str, Any] | None = UNSET, mode: str = UNSET, candidates: int | None = UNSET,
            include_stale: bool = UNSET, extra_queries: Sequence[Mapping[str, Any]] | None = UNSET,
            filter_mode: str = UNSET, query_vectors: Mapping[str, VectorLike] | None = UNSET) -> Call[list[t.Subplan]]:
    """``corpus_explain``: the SQL and parameters of every subplan (list of :class:`Subplan`)."""
    return _call("corpus_explain", [(corpus, "text"), (_vector(vector), None), (text, "text")],
                 [("k", k, "int"), ("filters", _json(filters), "jsonb"), ("mode", mode, "text"),
                  ("candidates", candidates, "int"), ("include_stale", include_stale, "boolean"),
                  ("extra_queries", _extra_queries(extra_queries), "jsonb"), ("filter_mode", filter_mode, "text"),
                  ("query_vectors", _query_vectors(query_vectors), "jsonb")],
                 _rows_of(t.Subplan))


# -- health and evaluation ---------------------------------------------------------------------

def health(corpus: str | None = None) -> Call[list[t.HealthRow]]:
    """``corpus_health_check`` (list of :class:`HealthRow`)."""
    return _call("corpus_health_check", [(corpus, "text")], [], _rows_of(t.HealthRow))


def create_gold_set(name: str, corpus: str, *, level: str = UNSET, description: str | None = UNSET) -> Call[None]:
    """``corpus_gold_set_create``: an empty gold set of ``corpus``."""
    return _call("corpus_gold_set_create", [(name, "text"), (corpus, "text")],
                 [("level", level, "text"), ("description", description, "text")], _nothing, returns_rows=False)


def evaluate(gold_set: str, *, modes: Sequence[str] = UNSET, k: int = UNSET, max_per_parent: int | None = UNSET,
             rrf_k: int = UNSET, candidates: int | None = UNSET, store: bool = UNSET) -> Call[list[t.EvalRun]]:
    """``corpus_evaluate``: one :class:`EvalRun` per mode."""
    return _call("corpus_evaluate", [(gold_set, "text")],
                 [("modes", list(modes) if modes not in (None, UNSET) else modes, "text[]"), ("k", k, "int"),
                  ("max_per_parent", max_per_parent, "int"), ("rrf_k", rrf_k, "int"),
                  ("candidates", candidates, "int"), ("store", store, "boolean")],
                 _rows_of(t.EvalRun))


def tune(corpus: str, gold_set: str, *, folds: int = UNSET, budget_seconds: float = UNSET, apply: bool = UNSET,
         alpha: float = UNSET, seed: int = UNSET, k: int = UNSET) -> Call[t.TuneRun]:
    """``corpus_tune``: fusion settings chosen on a gold set by cross-validation (:class:`TuneRun`)."""
    return _call("corpus_tune", [(corpus, "text"), (gold_set, "text")],
                 [("folds", folds, "int"), ("budget_seconds", budget_seconds, "float8"), ("apply", apply, "boolean"),
                  ("alpha", alpha, "float8"), ("seed", seed, "bigint"), ("k", k, "int")],
                 lambda rows: _rows_of(t.TuneRun)(rows)[0])


def tune_revert(corpus: str) -> Call[int]:
    """``corpus_tune_revert``: the id of the tuning run whose replaced settings were restored."""
    return _call("corpus_tune_revert", [(corpus, "text")], [], _count)


def compare_runs(run_a: int, run_b: int, *, trials: int = UNSET) -> Call[list[t.RunComparison]]:
    """``corpus_compare_runs``: per metric, the difference of two runs and its p-value."""
    return _call("corpus_compare_runs", [(run_a, "bigint"), (run_b, "bigint")], [("trials", trials, "int")],
                 _rows_of(t.RunComparison))


def compare_queries(run_a: int, run_b: int, *, metric: str = UNSET) -> Call[list[t.QueryComparison]]:
    """``corpus_compare_queries``: per query, one metric of two runs."""
    return _call("corpus_compare_queries", [(run_a, "bigint"), (run_b, "bigint")], [("metric", metric, "text")],
                 _rows_of(t.QueryComparison))


# -- catalog -----------------------------------------------------------------------------------

def list_corpora() -> Call[list[t.CorpusInfo]]:
    """``corpus_list`` (list of :class:`CorpusInfo`)."""
    return _call("corpus_list", [], [], _rows_of(t.CorpusInfo))


def create_corpus(name: str, *, isolation: dict[str, Any] = UNSET, required_filters: Sequence[str] = UNSET,
                  filter_fields: dict[str, Any] = UNSET, description: str | None = UNSET,
                  spaces: dict[str, Any] = UNSET) -> Call[None]:
    """``corpus_create``."""
    return _call("corpus_create", [(name, "text")], _corpus_options(isolation, required_filters, filter_fields,
                                                                    description, spaces),
                 _nothing, returns_rows=False)


def _corpus_options(isolation: Any, required_filters: Any, filter_fields: Any, description: Any,
                    spaces: Any) -> list[tuple[str, Any, str | None]]:
    return [("isolation", _json(isolation), "jsonb"), ("required_filters", _list(required_filters), "text[]"),
            ("filter_fields", _json(filter_fields), "jsonb"), ("description", description, "text"),
            ("spaces", _json(spaces), "jsonb")]


SOURCE_OPTIONS: dict[str, str] = {
    "id_column": "text", "parent_table": "regclass", "parent_fk": "text", "parent_key": "text",
    "parent_required": "text[]", "rule": "jsonb", "locator": "jsonb", "metadata": "jsonb", "min_length": "int",
    "ts_config": "regconfig", "distance": "text", "semantic_weight": "float8", "lexical_weight": "float8",
    "embedding_inputs": "text[]", "embedding_model": "text", "language": "text", "space": "text",
}


def add_source(corpus: str, source: str, item_table: str, *, text_column: str, embedding_column: str,
               tsv_column: str, **options: Any) -> Call[t.SourceFound]:
    """``corpus_add_source``: what it found (:class:`SourceFound`); ``options`` are its other
    named arguments (``parent_table``, ``parent_fk``, ``language``, ``locator``, ...)."""
    unknown = sorted(set(options) - set(SOURCE_OPTIONS))
    if unknown:
        raise TypeError(f"add_source() got unexpected keyword arguments {unknown}; known: {sorted(SOURCE_OPTIONS)}")
    named = [(name, _json(value) if SOURCE_OPTIONS[name] == "jsonb" else _list(value), SOURCE_OPTIONS[name])
             for name, value in options.items()]
    return _call("corpus_add_source", [(corpus, "text"), (source, "text"), (item_table, "regclass")],
                 [("text_column", text_column, "text"), ("embedding_column", embedding_column, "text"),
                  ("tsv_column", tsv_column, "text"), *named],
                 lambda rows: _rows_of(t.SourceFound)(rows)[0])


def alter_corpus(name: str, *, isolation: dict[str, Any] = UNSET, required_filters: Sequence[str] = UNSET,
                 filter_fields: dict[str, Any] = UNSET, description: str | None = UNSET,
                 spaces: dict[str, Any] = UNSET, ranking: dict[str, Any] = UNSET) -> Call[None]:
    """``corpus_alter``: the arguments given replace the corpus' definition of them (``ranking``:
    the keys given, null ones back to the default)."""
    return _call("corpus_alter", [(name, "text")],
                 _corpus_options(isolation, required_filters, filter_fields, description, spaces)
                 + [("ranking", _json(ranking), "jsonb")],
                 _nothing, returns_rows=False)


def drop_source(corpus: str, source: str) -> Call[None]:
    """``corpus_drop_source``."""
    return _call("corpus_drop_source", [(corpus, "text"), (source, "text")], [], _nothing, returns_rows=False)


def drop_corpus(name: str, *, if_exists: bool = UNSET) -> Call[None]:
    """``corpus_drop``."""
    return _call("corpus_drop", [(name, "text")], [("if_exists", if_exists, "boolean")], _nothing,
                 returns_rows=False)


# -- lexical -----------------------------------------------------------------------------------

def bm25_query(query: str, language: str) -> Call[list[t.QueryKey]]:
    """``bm25_query``: the keys the lexical branch looks up (list of :class:`QueryKey`)."""
    return _call("bm25_query", [(query, "text"), (language, "text")], [], _rows_of(t.QueryKey))


def refresh_lexical_stats(corpus: str | None = UNSET, *, only_stale: bool = UNSET,
                          stale_fraction: float = UNSET) -> Call[list[t.LexicalRefresh]]:
    """``corpus_refresh_lexical_stats``: the BM25 statistics of one corpus or all."""
    return _call("corpus_refresh_lexical_stats", [],
                 [("corpus", corpus, "text"), ("only_stale", only_stale, "boolean"),
                  ("stale_fraction", stale_fraction, "float8")],
                 _rows_of(t.LexicalRefresh))


# -- the re-embed queue --------------------------------------------------------------------------

def claim(batch_size: int = UNSET, *, lease: str = UNSET, worker: str | None = UNSET,
          only_table: str | None = UNSET) -> Call[list[t.QueuedItem]]:
    """``corpus_embedding_claim`` (list of :class:`QueuedItem`)."""
    # item_table as text: a regclass prints qualified only when it is not on the search_path
    return _call("corpus_embedding_claim", [],
                 [("batch_size", batch_size, "int"), ("lease", lease, "interval"), ("worker", worker, "text"),
                  ("only_table", only_table, "regclass")],
                 _rows_of(t.QueuedItem),
                 select="item_table::pg_catalog.oid::pg_catalog.int8 AS table_oid, "
                        "item_table::pg_catalog.text AS item_table, "
                        "embedding_column::pg_catalog.text AS embedding_column, item_id, version, content, model, "
                        "dimensions, reason, attempts")


def _item(item: t.QueuedItem) -> list[tuple[Any, str | None]]:
    return [(str(item.table_oid), "regclass"), (item.embedding_column, "name"), (item.item_id, "text"),
            (item.version, "bigint")]


def complete(item: t.QueuedItem, embedding: VectorLike, *, model: str | None = UNSET) -> Call[str]:
    """Store an embedding: ``'stored'``, ``'requeued'`` (the text changed since the claim) or
    ``'not_queued'``."""
    return _call("corpus_embedding_complete", [*_item(item), (_vector(embedding), None)],
                 [("model", model, "text")], _text, returns_rows=False)


def fail(item: t.QueuedItem, error: str, *, max_attempts: int = UNSET) -> Call[str]:
    """``corpus_embedding_fail``: ``'pending'`` (tried again later) or ``'dead'``."""
    return _call("corpus_embedding_fail", [*_item(item), (error, "text")],
                 [("max_attempts", max_attempts, "int")], _text, returns_rows=False)


def release(item: t.QueuedItem, *, worker: str | None = UNSET) -> Call[str]:
    """``corpus_embedding_release``: give a claimed item back without counting an attempt."""
    return _call("corpus_embedding_release", _item(item), [("worker", worker, "text")], _text, returns_rows=False)


def retry_dead(only_table: str | None = UNSET) -> Call[int]:
    """``corpus_embedding_retry_dead``: dead letters queued again (how many)."""
    return _call("corpus_embedding_retry_dead", [], [("only_table", only_table, "regclass")], _count,
                 returns_rows=False)


def enqueue(item_table: str, embedding_column: str, *, only_missing: bool = UNSET) -> Call[int]:
    """``corpus_embedding_enqueue``: queue a slot's items (how many)."""
    return _call("corpus_embedding_enqueue", [(item_table, "regclass"), (embedding_column, "name")],
                 [("only_missing", only_missing, "boolean")], _count, returns_rows=False)
