"""Sync and async clients: one method per extension function, typed results, the extension's
errors as exceptions (pg_corpus.errors), a connection that cannot be made or is lost included
(DatabaseUnavailable).

A client runs over a connection you own (its transactions are yours), a psycopg_pool pool (a
connection per call) or a conninfo string (a connection of its own, autocommit). Vectors are
numpy arrays or sequences of floats; pgvector's adapter is registered once per connection.

Each call is defined once, in ``pg_corpus._calls`` (its signature, docstring, SQL and how its
rows are read); both clients' methods are made from it, so they cannot drift apart."""
from __future__ import annotations

import inspect
import types
import typing
import weakref
from contextlib import asynccontextmanager, contextmanager
from typing import (Any, AsyncIterator, Callable, Concatenate, Coroutine, Generic, Iterator, ParamSpec, TypeVar,
                    overload)

import psycopg
from pgvector.psycopg import register_vector, register_vector_async
from psycopg.rows import dict_row

from . import _calls as c
from .errors import translate

UNSET = c.UNSET
T = TypeVar("T")
P = ParamSpec("P")

_registered: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _is_pool(source: Any) -> bool:
    return hasattr(source, "connection") and hasattr(source, "getconn")


def _described(method: Callable[..., Any], spec: Callable[..., c.Call[Any]], owner: str) -> None:
    """Give a method made from a call the call's name and docstring and its signature: the
    call's parameters after ``self``, returning what the call's rows are read as."""
    signature = inspect.signature(spec)
    returns = typing.get_args(typing.get_type_hints(spec)["return"])[0]
    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__name__ = spec.__name__
    method.__qualname__ = f"{owner}.{spec.__name__}"
    method.__doc__ = spec.__doc__
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[this, *signature.parameters.values()], return_annotation=returns)


class _Method(Generic[P, T]):
    """A method of both clients made from one call of ``pg_corpus._calls``: :class:`Client`'s
    runs the call and returns its rows as the call reads them, :class:`AsyncClient`'s is the
    same coroutine function, awaited."""

    def __init__(self, spec: Callable[P, c.Call[T]]):
        def run(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
            return self._run(spec(*args, **kwargs))

        async def run_async(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
            return await self._run(spec(*args, **kwargs))

        _described(run, spec, "Client")
        _described(run_async, spec, "AsyncClient")
        self.spec, self.run, self.run_async = spec, run, run_async

    def __set_name__(self, owner: type, name: str) -> None:
        if name != self.spec.__name__:
            raise TypeError(f"the method {name} is made from the call {self.spec.__name__}: name them alike")

    @overload
    def __get__(self, obj: None, owner: type[AsyncClient]) -> Callable[Concatenate[AsyncClient, P],
                                                                        Coroutine[Any, Any, T]]: ...

    @overload
    def __get__(self, obj: None, owner: type[Client]) -> Callable[Concatenate[Client, P], T]: ...

    @overload
    def __get__(self, obj: AsyncClient, owner: Any) -> Callable[P, Coroutine[Any, Any, T]]: ...

    @overload
    def __get__(self, obj: Client, owner: Any) -> Callable[P, T]: ...

    def __get__(self, obj: Any, owner: Any) -> Any:
        method: Callable[..., Any] = self.run_async if issubclass(owner, AsyncClient) else self.run
        return method if obj is None else types.MethodType(method, obj)


class _Calls:
    """The calls, one method each, in the order of the extension's reference; :class:`Client`
    and :class:`AsyncClient` inherit them."""

    # -- search ------------------------------------------------------------------------------
    search = _Method(c.search)
    find_similar = _Method(c.find_similar)
    fetch = _Method(c.fetch)
    check_filters = _Method(c.check_filters)
    explain = _Method(c.explain)
    # -- health and evaluation ---------------------------------------------------------------
    health = _Method(c.health)
    create_gold_set = _Method(c.create_gold_set)
    evaluate = _Method(c.evaluate)
    compare_runs = _Method(c.compare_runs)
    compare_queries = _Method(c.compare_queries)
    tune = _Method(c.tune)
    tune_revert = _Method(c.tune_revert)
    # -- catalog -----------------------------------------------------------------------------
    list_corpora = _Method(c.list_corpora)
    create_corpus = _Method(c.create_corpus)
    add_source = _Method(c.add_source)
    alter_corpus = _Method(c.alter_corpus)
    drop_source = _Method(c.drop_source)
    drop_corpus = _Method(c.drop_corpus)
    # -- lexical -----------------------------------------------------------------------------
    bm25_query = _Method(c.bm25_query)
    refresh_lexical_stats = _Method(c.refresh_lexical_stats)
    # -- the re-embed queue ------------------------------------------------------------------
    claim = _Method(c.claim)
    complete = _Method(c.complete)
    fail = _Method(c.fail)
    release = _Method(c.release)
    retry_dead = _Method(c.retry_dead)
    enqueue = _Method(c.enqueue)


class Client(_Calls):
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

    def close(self) -> None:
        """Close the client's own connection (a connection or pool you passed stays yours)."""
        if self._own is not None:
            self._own.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_Calls):
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

    async def close(self) -> None:
        """Close the client's own connection (a connection or pool you passed stays yours)."""
        if self._own is not None:
            await self._own.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
