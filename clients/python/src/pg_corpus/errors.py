"""Errors raised by the extension, as Python exceptions that keep what PostgreSQL said.

Every error of pg_corpus carries a SQLSTATE, a message, often a detail, and a hint. The client
raises one class per family a caller handles differently; each keeps all four (and the
original psycopg error as ``__cause__``, whose diagnostics ``diag`` returns). Every class is a
``psycopg.DatabaseError``, so ``except psycopg.Error`` still catches them.

The family comes from structured fields only, never from the message, which PostgreSQL may
translate (``lc_messages``): the SQLSTATE (:data:`BY_SQLSTATE`, then the SQLSTATE's class), and
where one SQLSTATE covers several families, the kind the extension names in a DETAIL that is a
JSON object, ``{"kind": "missing_scope_filter", "field": "practice_area"}`` (:data:`BY_KIND`)."""
from __future__ import annotations

import json
from typing import Any

import psycopg
from psycopg.errors import Diagnostic


class PgCorpusError(psycopg.DatabaseError):
    """An error PostgreSQL reported for a pg_corpus call."""

    def __init__(self, sqlstate: str | None, message: str, detail: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message
        self.detail = detail
        self.hint = hint

    @property
    def diag(self) -> Diagnostic:
        """The diagnostics of the psycopg error this one translates (empty without one)."""
        cause = self.__cause__
        return cause.diag if isinstance(cause, psycopg.Error) else super().diag

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.sqlstate, self.message, self.detail, self.hint)

    def __str__(self) -> str:
        out = f"{self.sqlstate}: {self.message}" if self.sqlstate else self.message
        if self.detail:
            out += f"\nDETAIL: {self.detail}"
        if self.hint:
            out += f"\nHINT: {self.hint}"
        return out


class UnknownCorpus(PgCorpusError):
    """42704: the corpus (or source, gold set) does not exist."""


class MissingScopeFilter(PgCorpusError):
    """22023: the corpus requires a filter the search did not give; ``field`` names it."""

    def __init__(self, sqlstate: str | None, message: str, detail: str | None = None, hint: str | None = None):
        super().__init__(sqlstate, message, detail, hint)
        field = detail_fields(detail).get("field")
        self.field: str | None = field if isinstance(field, str) else None


class BadFilter(PgCorpusError):
    """A filter the corpus does not accept: unknown field (42703), ill-typed value (42804), the
    isolation column (42501), a malformed condition (22023)."""


class BadVector(PgCorpusError):
    """22000 / 22004: the query vector is missing where needed, of the wrong dimension, zero,
    NaN or infinite."""


class InvalidArgument(PgCorpusError):
    """22023 and other data errors: a bad k, mode, window, definition argument."""


class PermissionDenied(PgCorpusError):
    """42501 (not about a filter): the role may not do or read this."""


class ReadOnly(PgCorpusError):
    """25006: a writing call on a hot standby or in a read-only transaction."""


class DatabaseUnavailable(PgCorpusError, psycopg.OperationalError):
    """No connection to the database: it is unreachable, refuses the role or the database, the
    pool gave none in time, or the connection was lost during the call (a psycopg
    OperationalError without SQLSTATE, class 08, 57P01-57P03). The message starts with
    "database unavailable: " and says why."""


#: the family of a SQLSTATE when the DETAIL names no kind (22000, data_exception, is what the
#: extension and pgvector raise for a vector of the wrong dimension or with NaN, Infinity or zeros)
BY_SQLSTATE: dict[str, type[PgCorpusError]] = {
    "42704": UnknownCorpus,
    "22000": BadVector,
    "42501": PermissionDenied,
    "25006": ReadOnly,
}

#: the family the extension names in a JSON DETAIL ``{"kind": ...}`` where its SQLSTATE is shared
#: with other families: a missing scope filter and a bad filter (22023, 42703, 42804, 42501), a
#: missing query vector or embedding (22004)
BY_KIND: dict[str, type[PgCorpusError]] = {
    "missing_scope_filter": MissingScopeFilter,
    "bad_filter": BadFilter,
    "bad_vector": BadVector,
}

#: SQLSTATEs of a session the server ended (admin_shutdown, crash_shutdown, cannot_connect_now)
#: besides class 08, connection exceptions
_ENDED = ("57P01", "57P02", "57P03")


def detail_fields(detail: str | None) -> dict[str, Any]:
    """The fields of a DETAIL that is a JSON object; empty for any other DETAIL."""
    if not detail or not detail.lstrip().startswith("{"):
        return {}
    try:
        value = json.loads(detail)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def family(sqlstate: str | None, detail: str | None) -> type[PgCorpusError]:
    """The class of an error with this SQLSTATE and DETAIL."""
    kind = detail_fields(detail).get("kind")
    if isinstance(kind, str) and kind in BY_KIND:
        return BY_KIND[kind]
    if sqlstate in BY_SQLSTATE:
        return BY_SQLSTATE[sqlstate]
    if sqlstate and sqlstate.startswith("22"):
        return InvalidArgument
    return PgCorpusError


def _unavailable(error: psycopg.Error) -> bool:
    sqlstate = error.sqlstate
    if sqlstate is None:
        return isinstance(error, psycopg.OperationalError)
    return sqlstate.startswith("08") or sqlstate in _ENDED


def translate(error: psycopg.Error) -> PgCorpusError:
    """The family exception for a psycopg error (its diagnostics kept)."""
    diag = error.diag
    lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [""]
    message = diag.message_primary or lines[0]
    detail = diag.message_detail
    cls = family(error.sqlstate, detail)
    if _unavailable(error):
        cls, message = DatabaseUnavailable, f"database unavailable: {message}"
        detail = detail or "\n".join(lines[1:]) or None
    out = cls(error.sqlstate, message, detail, diag.message_hint)
    out.__cause__ = error
    return out
