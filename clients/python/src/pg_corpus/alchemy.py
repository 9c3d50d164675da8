"""SQLAlchemy 2 Core: the extension's search functions as table-valued functions with their
columns declared, so that a search composes with ``select()``, joins back to your own tables
and ``where()``/``order_by()`` like any table::

    from pg_corpus.alchemy import hybrid_search
    hits = hybrid_search("external_precedents", vector, "שופטת", k=5, filters={"court": "..."})
    stmt = (sa.select(hits.c.rank, hits.c.item_id, chunks.c.page_number)
              .join(chunks, chunks.c.id == sa.cast(hits.c.item_id, sa.BigInteger))
              .where(hits.c.source == "chunks").order_by(hits.c.rank))
    # or item ids in the key type (corpus_hybrid_search_typed): no cast
    hits = hybrid_search("external_precedents", vector, "שופטת", k=5, id_type=sa.BigInteger)
    stmt = sa.select(hits.c.rank, chunks.c.page_number).join(chunks, chunks.c.id == hits.c.item_id)

Keyword arguments are the SQL function's own (``k``, ``filters``, ``mode``, ``max_per_parent``,
``offset``, ``evidence``, ...), passed in named notation (``"k" => :k``), every value a bind
parameter; one left out takes the function's SQL default. Requires ``sqlalchemy>=2`` and
``pgvector`` (for the query vector's type).
"""
from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement

__all__ = ["hybrid_search", "find_similar", "fetch", "HIT_COLUMNS"]

#: the columns of a search's rows, with their types
HIT_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("rank", sa.Integer), ("corpus", sa.Text), ("source", sa.Text), ("item_id", sa.Text),
    ("parent_id", sa.Text), ("score", sa.Float), ("semantic_rank", sa.Integer),
    ("semantic_distance", sa.Float), ("lexical_rank", sa.Integer), ("lexical_score", sa.Float),
    ("content", sa.Text), ("locator", JSONB), ("metadata", JSONB), ("embedding_stale", sa.Boolean),
    ("query_ranks", JSONB), ("evidence", JSONB), ("origin", JSONB),
)
ITEM_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("corpus", sa.Text), ("source", sa.Text), ("item_id", sa.Text), ("parent_id", sa.Text),
    ("content", sa.Text), ("locator", JSONB), ("metadata", JSONB), ("embedding_stale", sa.Boolean),
)
#: the SQL type of each keyword argument the functions take
ARGUMENT_TYPES: dict[str, Any] = {
    "k": sa.Integer, "filters": JSONB, "mode": sa.Text, "max_per_parent": sa.Integer,
    "candidates": sa.Integer, "rrf_k": sa.Integer, "include_stale": sa.Boolean, "feedback": sa.Boolean,
    "extra_queries": JSONB, "filter_mode": sa.Text, "query_vectors": JSONB, "evidence": sa.Boolean,
    "expand": sa.Boolean, "offset": sa.Integer, "query_model": sa.Text, "exclude_parent": sa.Boolean,
}


class _Named(ColumnElement[Any]):
    """``"name" => value`` in a function's argument list (PostgreSQL's named notation)."""

    inherit_cache = True

    def __init__(self, name: str, value: Any) -> None:
        self.name = name
        self.value = sa.bindparam(None, value, type_=ARGUMENT_TYPES[name], unique=True)
        self.type = ARGUMENT_TYPES[name]()


@compiles(_Named)
def _compile_named(element: _Named, compiler: Any, **kw: Any) -> str:
    return f"{compiler.preparer.quote_identifier(element.name)} => {compiler.process(element.value, **kw)}"


def _named(function: str, kwargs: dict[str, Any]) -> list[_Named]:
    unknown = set(kwargs) - set(ARGUMENT_TYPES)
    if unknown:
        raise TypeError(f"{function}() got unknown keyword arguments {sorted(unknown)}; "
                        f"it takes {sorted(ARGUMENT_TYPES)}")
    return [_Named(name, value) for name, value in kwargs.items()]


def _vector(value: Any) -> Any:
    from pgvector.sqlalchemy import Vector  # the query vector's type (any dimension)
    if value is None:
        return sa.null()
    return sa.bindparam(None, value, type_=Vector(), unique=True)


def _table(function: str, args: list[Any], columns: tuple[tuple[str, Any], ...], name: str) -> Any:
    fn = getattr(sa.func.corpus, function)(*args)
    return fn.table_valued(*(sa.column(c, t) for c, t in columns), name=name)


def hybrid_search(corpus: str, query_vec: Any = None, query_text: str | None = None, *,
                  name: str = "hits", id_type: Any = None, **kwargs: Any) -> Any:
    """``corpus.corpus_hybrid_search(corpus, query_vec, query_text, ...)`` as a table-valued
    function (alias ``name``) with the columns of :data:`HIT_COLUMNS`. ``id_type`` (a SQLAlchemy
    type, e.g. ``sa.BigInteger``): ``corpus_hybrid_search_typed``, ``item_id`` of that type (the
    key type of the corpus' sources), so a join back needs no cast."""
    args = [sa.bindparam(None, corpus, type_=sa.Text, unique=True), _vector(query_vec),
            sa.bindparam(None, query_text, type_=sa.Text, unique=True), *_named("corpus_hybrid_search", kwargs)]
    if id_type is None:
        return _table("corpus_hybrid_search", args, HIT_COLUMNS, name)
    columns = tuple((c, id_type if c == "item_id" else t) for c, t in HIT_COLUMNS)
    return _table("corpus_hybrid_search_typed", [sa.cast(sa.null(), id_type), *args], columns, name)


def find_similar(corpus: str, source: str, item_id: str | int, *, name: str = "similar", **kwargs: Any) -> Any:
    """``corpus.corpus_find_similar(corpus, source, item_id, ...)``, the same columns."""
    args = [sa.bindparam(None, corpus, type_=sa.Text, unique=True),
            sa.bindparam(None, source, type_=sa.Text, unique=True),
            sa.bindparam(None, str(item_id), type_=sa.Text, unique=True), *_named("corpus_find_similar", kwargs)]
    return _table("corpus_find_similar", args, HIT_COLUMNS, name)


def fetch(corpus: str, source: str, item_id: str | int, *, name: str = "item", **kwargs: Any) -> Any:
    """``corpus.corpus_fetch(corpus, source, item_id, filters)``: one item's text and provenance."""
    args = [sa.bindparam(None, corpus, type_=sa.Text, unique=True),
            sa.bindparam(None, source, type_=sa.Text, unique=True),
            sa.bindparam(None, str(item_id), type_=sa.Text, unique=True), *_named("corpus_fetch", kwargs)]
    return _table("corpus_fetch", args, ITEM_COLUMNS, name)
