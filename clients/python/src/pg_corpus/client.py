"""Sync and async clients: one method per extension function, typed results, the extension's
errors as exceptions (pg_corpus.errors), a connection that cannot be made or is lost included
(DatabaseUnavailable).

A client runs over a connection you own (its transactions are yours), a psycopg_pool pool (a
connection per call) or a conninfo string (a connection of its own, autocommit). Vectors are
numpy arrays or sequences of floats; pgvector's adapter is registered once per connection."""
from __future__ import annotations

import weakref
from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Iterator, Mapping, Sequence, TypeVar

import psycopg
from pgvector.psycopg import register_vector, register_vector_async
from psycopg.rows import dict_row

from . import _calls as c
from . import types as t
from .errors import translate

UNSET = c.UNSET
T = TypeVar("T")

_registered: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _is_pool(source: Any) -> bool:
    return hasattr(source, "connection") and hasattr(source, "getconn")


def _list(value: Any) -> Any:
    return list(value) if isinstance(value, (tuple, set, frozenset)) else value


class Client:
    """A synchronous client.

    >>> client = Client("postgresql://postgres@127.0.0.1:5432/app")      # doctest: +SKIP
    >>> hits = client.search("external_precedents", vec, "שכירות", k=5)   # doctest: +SKIP
    """

    def __init__(self, source: Any):
        self._source = source
        self._own: psycopg.Connection[Any] | None = None

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        if isinstance(self._source, str):
            if self._own is None or self._own.closed:
                self._own = psycopg.connect(self._source, autocommit=True)
            conn = self._own
            self._register(conn)
            yield conn
        elif _is_pool(self._source):
            with self._source.connection() as conn:
                self._register(conn)
                yield conn
        else:
            self._register(self._source)
            yield self._source

    @staticmethod
    def _register(conn: psycopg.Connection[Any]) -> None:
        if conn not in _registered:
            register_vector(conn)
            _registered.add(conn)

    def _run(self, call: c.Call[T]) -> T:
        try:
            with self._connection() as conn:
                with conn.cursor(row_factory=dict_row) as cur:
                    cur.execute(call.query, call.params)
                    rows = cur.fetchall() if cur.description else []
        except psycopg.Error as e:
            raise translate(e) from e
        return call.read(rows)

    # -- search --------------------------------------------------------------------------
    def search(self, corpus: str, vector: c.VectorLike = None, text: str | None = None, *, k: int = 10,
               filters: dict[str, Any] | None = UNSET, mode: str = UNSET, max_per_parent: int | None = UNSET,
               candidates: int | None = UNSET, rrf_k: int = UNSET, include_stale: bool = UNSET,
               feedback: bool | None = UNSET,
               extra_queries: Sequence[Mapping[str, Any]] | None = UNSET,
               filter_mode: str = UNSET, query_vectors: Mapping[str, c.VectorLike] | None = UNSET,
               evidence: bool | None = UNSET, expand: bool = UNSET) -> list[t.Hit]:
        """``corpus_hybrid_search``: the fused hits (list of :class:`Hit`). ``evidence``: only hits
        with evidence (an empty list means the corpus does not hold the answer); ``expand``: add
        the best hits' cited items (the corpus' edge sets). ``query_vectors``: a
        vector per named embedding space (``vector`` is the default space's). ``extra_queries``:
        queries fused with this one, each a mapping with ``text``, ``vector`` (numpy array or
        floats) or both, and optional ``weight`` and ``label``. ``filter_mode="lenient"``
        drops invalid filter conditions (see :meth:`check_filters`)."""
        return self._run(c.search(corpus, vector, text, k, filters, mode, max_per_parent, candidates, rrf_k,
                                  include_stale, feedback, extra_queries, filter_mode, query_vectors, evidence, expand))

    def find_similar(self, corpus: str, source: str, item_id: str | int, *, k: int = 10,
                     filters: dict[str, Any] | None = UNSET, mode: str = UNSET, max_per_parent: int | None = UNSET,
                     exclude_parent: bool = UNSET, candidates: int | None = UNSET, rrf_k: int = UNSET,
                     include_stale: bool = UNSET, filter_mode: str = UNSET) -> list[t.Hit]:
        """``corpus_find_similar``: items like one of the corpus' own items, never the item itself
        (nor, with ``exclude_parent``, its parent's other items)."""
        return self._run(c.find_similar(corpus, source, str(item_id), k, filters, mode, max_per_parent,
                                        exclude_parent, candidates, rrf_k, include_stale, filter_mode))

    def check_filters(self, corpus: str, filters: dict[str, Any], *, filter_mode: str = UNSET) -> list[t.FilterCheck]:
        """``corpus_check_filters``: what a search (lenient by default) keeps and drops of ``filters``."""
        return self._run(c.check_filters(corpus, filters, filter_mode))

    def explain(self, corpus: str, vector: c.VectorLike = None, text: str | None = None, *, k: int = UNSET,
                filters: dict[str, Any] | None = UNSET, mode: str = UNSET, candidates: int | None = UNSET,
                include_stale: bool = UNSET,
                extra_queries: Sequence[Mapping[str, Any]] | None = UNSET,
                filter_mode: str = UNSET, query_vectors: Mapping[str, c.VectorLike] | None = UNSET) -> list[t.Subplan]:
        """``corpus_explain``: the SQL and parameters of every subplan (list of :class:`Subplan`)."""
        return self._run(c.explain(corpus, vector, text, k, filters, mode, candidates, include_stale,
                                   extra_queries, filter_mode, query_vectors))

    # -- health and evaluation -----------------------------------------------------------
    def health(self, corpus: str | None = None) -> list[t.HealthRow]:
        """``corpus_health_check`` (list of :class:`HealthRow`)."""
        return self._run(c.health(corpus))

    def create_gold_set(self, name: str, corpus: str, *, level: str = UNSET, description: str | None = UNSET) -> None:
        return self._run(c.gold_set_create(name, corpus, level, description))

    def evaluate(self, gold_set: str, *, modes: Sequence[str] = UNSET, k: int = UNSET,
                 max_per_parent: int | None = UNSET, rrf_k: int = UNSET, candidates: int | None = UNSET,
                 store: bool = UNSET) -> list[t.EvalRun]:
        """``corpus_evaluate``: one :class:`EvalRun` per mode."""
        return self._run(c.evaluate(gold_set, modes, k, max_per_parent, rrf_k, candidates, store))

    def compare_runs(self, run_a: int, run_b: int, *, trials: int = UNSET) -> list[t.RunComparison]:
        return self._run(c.compare_runs(run_a, run_b, trials))

    def compare_queries(self, run_a: int, run_b: int, *, metric: str = UNSET) -> list[t.QueryComparison]:
        return self._run(c.compare_queries(run_a, run_b, metric))

    # -- catalog -------------------------------------------------------------------------
    def list_corpora(self) -> list[t.CorpusInfo]:
        """``corpus_list`` (list of :class:`CorpusInfo`)."""
        return self._run(c.list_corpora())

    def create_corpus(self, name: str, *, isolation: dict[str, Any] = UNSET, required_filters: Sequence[str] = UNSET,
                      filter_fields: dict[str, Any] = UNSET, description: str | None = UNSET,
                      spaces: dict[str, Any] = UNSET) -> None:
        return self._run(c.create_corpus(name, isolation, _list(required_filters), filter_fields, description, spaces))

    def add_source(self, corpus: str, source: str, item_table: str, *, text_column: str, embedding_column: str,
                   tsv_column: str, **options: Any) -> None:
        """``corpus_add_source``; ``options`` are its other named arguments (``parent_table``,
        ``parent_fk``, ``language``, ``locator``, ...)."""
        return self._run(c.add_source(corpus, source, item_table, text_column, embedding_column, tsv_column,
                                      {k: _list(v) for k, v in options.items()}))

    def alter_corpus(self, name: str, *, isolation: dict[str, Any] = UNSET, required_filters: Sequence[str] = UNSET,
                     filter_fields: dict[str, Any] = UNSET, description: str | None = UNSET,
                     spaces: dict[str, Any] = UNSET) -> None:
        return self._run(c.alter_corpus(name, isolation, _list(required_filters), filter_fields, description, spaces))

    def drop_source(self, corpus: str, source: str) -> None:
        return self._run(c.drop_source(corpus, source))

    def drop_corpus(self, name: str, *, if_exists: bool = UNSET) -> None:
        return self._run(c.drop_corpus(name, if_exists))

    # -- lexical -------------------------------------------------------------------------
    def bm25_query(self, query: str, language: str) -> list[t.QueryKey]:
        """``bm25_query``: the keys the lexical branch looks up (list of :class:`QueryKey`)."""
        return self._run(c.bm25_query(query, language))

    def refresh_lexical_stats(self, corpus: str | None = UNSET, *, only_stale: bool = UNSET,
                              stale_fraction: float = UNSET) -> list[t.LexicalRefresh]:
        return self._run(c.refresh_lexical_stats(corpus, only_stale, stale_fraction))

    # -- the re-embed queue --------------------------------------------------------------
    def claim(self, batch_size: int = UNSET, *, lease: str = UNSET, worker: str | None = UNSET,
              only_table: str | None = UNSET) -> list[t.QueuedItem]:
        """``corpus_embedding_claim`` (list of :class:`QueuedItem`)."""
        return self._run(c.claim(batch_size, lease, worker, only_table))

    def complete(self, item: t.QueuedItem, embedding: c.VectorLike, *, model: str | None = UNSET) -> str:
        """Store an embedding: ``'stored'``, ``'requeued'`` (the text changed since the claim) or
        ``'not_queued'``."""
        return self._run(c.complete(item, embedding, model))

    def fail(self, item: t.QueuedItem, error: str, *, max_attempts: int = UNSET) -> str:
        return self._run(c.fail(item, error, max_attempts))

    def release(self, item: t.QueuedItem, *, worker: str | None = UNSET) -> str:
        return self._run(c.release(item, worker))

    def retry_dead(self, only_table: str | None = UNSET) -> int:
        return self._run(c.retry_dead(only_table))

    def enqueue(self, item_table: str, embedding_column: str, *, only_missing: bool = UNSET) -> int:
        return self._run(c.enqueue(item_table, embedding_column, only_missing))

    def close(self) -> None:
        """Close the client's own connection (a connection or pool you passed stays yours)."""
        if self._own is not None:
            self._own.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient:
    """The asyncio client: the same methods, awaited (``await client.search(...)``), over an
    ``AsyncConnection``, an ``AsyncConnectionPool`` or a conninfo string."""

    def __init__(self, source: Any):
        self._source = source
        self._own: psycopg.AsyncConnection[Any] | None = None

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if isinstance(self._source, str):
            if self._own is None or self._own.closed:
                self._own = await psycopg.AsyncConnection.connect(self._source, autocommit=True)
            await self._register(self._own)
            yield self._own
        elif _is_pool(self._source):
            async with self._source.connection() as conn:
                await self._register(conn)
                yield conn
        else:
            await self._register(self._source)
            yield self._source

    @staticmethod
    async def _register(conn: psycopg.AsyncConnection[Any]) -> None:
        if conn not in _registered:
            await register_vector_async(conn)
            _registered.add(conn)

    async def _run(self, call: c.Call[T]) -> T:
        try:
            async with self._connection() as conn:
                async with conn.cursor(row_factory=dict_row) as cur:
                    await cur.execute(call.query, call.params)
                    rows = await cur.fetchall() if cur.description else []
        except psycopg.Error as e:
            raise translate(e) from e
        return call.read(rows)

    # -- search --------------------------------------------------------------------------
    async def search(self, corpus: str, vector: c.VectorLike = None, text: str | None = None, *, k: int = 10,
               filters: dict[str, Any] | None = UNSET, mode: str = UNSET, max_per_parent: int | None = UNSET,
               candidates: int | None = UNSET, rrf_k: int = UNSET, include_stale: bool = UNSET,
               feedback: bool | None = UNSET,
               extra_queries: Sequence[Mapping[str, Any]] | None = UNSET,
               filter_mode: str = UNSET, query_vectors: Mapping[str, c.VectorLike] | None = UNSET,
               evidence: bool | None = UNSET, expand: bool = UNSET) -> list[t.Hit]:
        """``corpus_hybrid_search``: the fused hits (list of :class:`Hit`); see :meth:`Client.search`."""
        return await self._run(c.search(corpus, vector, text, k, filters, mode, max_per_parent, candidates, rrf_k,
                                        include_stale, feedback, extra_queries, filter_mode, query_vectors,
                                        evidence, expand))

    async def find_similar(self, corpus: str, source: str, item_id: str | int, *, k: int = 10,
                     filters: dict[str, Any] | None = UNSET, mode: str = UNSET, max_per_parent: int | None = UNSET,
                     exclude_parent: bool = UNSET, candidates: int | None = UNSET, rrf_k: int = UNSET,
                     include_stale: bool = UNSET, filter_mode: str = UNSET) -> list[t.Hit]:
        """``corpus_find_similar``; see :meth:`Client.find_similar`."""
        return await self._run(c.find_similar(corpus, source, str(item_id), k, filters, mode, max_per_parent,
                                        exclude_parent, candidates, rrf_k, include_stale, filter_mode))

    async def check_filters(self, corpus: str, filters: dict[str, Any], *, filter_mode: str = UNSET) -> list[t.FilterCheck]:
        """``corpus_check_filters``: what a search (lenient by default) keeps and drops of ``filters``."""
        return await self._run(c.check_filters(corpus, filters, filter_mode))

    async def explain(self, corpus: str, vector: c.VectorLike = None, text: str | None = None, *, k: int = UNSET,
                filters: dict[str, Any] | None = UNSET, mode: str = UNSET, candidates: int | None = UNSET,
                include_stale: bool = UNSET,
                extra_queries: Sequence[Mapping[str, Any]] | None = UNSET,
                filter_mode: str = UNSET, query_vectors: Mapping[str, c.VectorLike] | None = UNSET) -> list[t.Subplan]:
        """``corpus_explain``: the SQL and parameters of every subplan (list of :class:`Subplan`)."""
        return await self._run(c.explain(corpus, vector, text, k, filters, mode, candidates, include_stale,
                                         extra_queries, filter_mode, query_vectors))

    # -- health and evaluation -----------------------------------------------------------
    async def health(self, corpus: str | None = None) -> list[t.HealthRow]:
        """``corpus_health_check`` (list of :class:`HealthRow`)."""
        return await self._run(c.health(corpus))

    async def create_gold_set(self, name: str, corpus: str, *, level: str = UNSET, description: str | None = UNSET) -> None:
        return await self._run(c.gold_set_create(name, corpus, level, description))

    async def evaluate(self, gold_set: str, *, modes: Sequence[str] = UNSET, k: int = UNSET,
                 max_per_parent: int | None = UNSET, rrf_k: int = UNSET, candidates: int | None = UNSET,
                 store: bool = UNSET) -> list[t.EvalRun]:
        """``corpus_evaluate``: one :class:`EvalRun` per mode."""
        return await self._run(c.evaluate(gold_set, modes, k, max_per_parent, rrf_k, candidates, store))

    async def compare_runs(self, run_a: int, run_b: int, *, trials: int = UNSET) -> list[t.RunComparison]:
        return await self._run(c.compare_runs(run_a, run_b, trials))

    async def compare_queries(self, run_a: int, run_b: int, *, metric: str = UNSET) -> list[t.QueryComparison]:
        return await self._run(c.compare_queries(run_a, run_b, metric))

    # -- catalog -------------------------------------------------------------------------
    async def list_corpora(self) -> list[t.CorpusInfo]:
        """``corpus_list`` (list of :class:`CorpusInfo`)."""
        return await self._run(c.list_corpora())

    async def create_corpus(self, name: str, *, isolation: dict[str, Any] = UNSET, required_filters: Sequence[str] = UNSET,
                      filter_fields: dict[str, Any] = UNSET, description: str | None = UNSET,
                      spaces: dict[str, Any] = UNSET) -> None:
        return await self._run(c.create_corpus(name, isolation, _list(required_filters), filter_fields, description,
                                               spaces))

    async def add_source(self, corpus: str, source: str, item_table: str, *, text_column: str, embedding_column: str,
                   tsv_column: str, **options: Any) -> None:
        """``corpus_add_source``; ``options`` are its other named arguments (``parent_table``,
        ``parent_fk``, ``language``, ``locator``, ...)."""
        return await self._run(c.add_source(corpus, source, item_table, text_column, embedding_column, tsv_column,
                                      {k: _list(v) for k, v in options.items()}))

    async def alter_corpus(self, name: str, *, isolation: dict[str, Any] = UNSET, required_filters: Sequence[str] = UNSET,
                     filter_fields: dict[str, Any] = UNSET, description: str | None = UNSET,
                     spaces: dict[str, Any] = UNSET) -> None:
        return await self._run(c.alter_corpus(name, isolation, _list(required_filters), filter_fields, description,
                                              spaces))

    async def drop_source(self, corpus: str, source: str) -> None:
        return await self._run(c.drop_source(corpus, source))

    async def drop_corpus(self, name: str, *, if_exists: bool = UNSET) -> None:
        return await self._run(c.drop_corpus(name, if_exists))

    # -- lexical -------------------------------------------------------------------------
    async def bm25_query(self, query: str, language: str) -> list[t.QueryKey]:
        """``bm25_query``: the keys the lexical branch looks up (list of :class:`QueryKey`)."""
        return await self._run(c.bm25_query(query, language))

    async def refresh_lexical_stats(self, corpus: str | None = UNSET, *, only_stale: bool = UNSET,
                              stale_fraction: float = UNSET) -> list[t.LexicalRefresh]:
        return await self._run(c.refresh_lexical_stats(corpus, only_stale, stale_fraction))

    # -- the re-embed queue --------------------------------------------------------------
    async def claim(self, batch_size: int = UNSET, *, lease: str = UNSET, worker: str | None = UNSET,
              only_table: str | None = UNSET) -> list[t.QueuedItem]:
        """``corpus_embedding_claim`` (list of :class:`QueuedItem`)."""
        return await self._run(c.claim(batch_size, lease, worker, only_table))

    async def complete(self, item: t.QueuedItem, embedding: c.VectorLike, *, model: str | None = UNSET) -> str:
        """Store an embedding: ``'stored'``, ``'requeued'`` (the text changed since the claim) or
        ``'not_queued'``."""
        return await self._run(c.complete(item, embedding, model))

    async def fail(self, item: t.QueuedItem, error: str, *, max_attempts: int = UNSET) -> str:
        return await self._run(c.fail(item, error, max_attempts))

    async def release(self, item: t.QueuedItem, *, worker: str | None = UNSET) -> str:
        return await self._run(c.release(item, worker))

    async def retry_dead(self, only_table: str | None = UNSET) -> int:
        return await self._run(c.retry_dead(only_table))

    async def enqueue(self, item_table: str, embedding_column: str, *, only_missing: bool = UNSET) -> int:
        return await self._run(c.enqueue(item_table, embedding_column, only_missing))

    async def close(self) -> None:
        if self._own is not None:
            await self._own.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
