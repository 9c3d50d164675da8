"""Errors raised by the extension, as Python exceptions that keep what PostgreSQL said.

Every error of pg_corpus carries a SQLSTATE, a message, often a detail, and a hint. The client
raises one class per family a caller handles differently; each keeps all four (and the
original psycopg error as ``__cause__``)."""
from __future__ import annotations

import re

import psycopg


class PgCorpusError(Exception):
    """An error PostgreSQL reported for a pg_corpus call."""

    def __init__(self, sqlstate: str | None, message: str, detail: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message
        self.detail = detail
        self.hint = hint

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
        m = re.search(r'requires a filter on "([^"]+)"', message)
        self.field: str | None = m.group(1) if m else None


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


class DatabaseUnavailable(PgCorpusError):
    """No connection to the database: it is unreachable, refuses the role or the database, the
    pool gave none in time, or the connection was lost during the call (a psycopg
    OperationalError without SQLSTATE, class 08, 57P01-57P03). The message starts with
    "database unavailable: " and says why."""


def _family(sqlstate: str | None, message: str) -> type[PgCorpusError]:
    lowered = message.lower()
    if sqlstate == "42704":
        return UnknownCorpus
    if sqlstate == "22023" and "requires a filter on" in message:
        return MissingScopeFilter
    if "filter" in lowered and sqlstate in ("42703", "42804", "42501", "22023"):
        return BadFilter
    if sqlstate in ("22000", "22004") and ("vector" in lowered or "embedding" in lowered):
        return BadVector
    if sqlstate == "42501":
        return PermissionDenied
    if sqlstate == "25006":
        return ReadOnly
    if sqlstate and sqlstate.startswith("22"):
        return InvalidArgument
    return PgCorpusError


def _unavailable(error: psycopg.Error) -> bool:
    sqlstate = error.sqlstate
    if sqlstate is None:
        return isinstance(error, psycopg.OperationalError)
    return sqlstate.startswith("08") or sqlstate in ("57P01", "57P02", "57P03")


def translate(error: psycopg.Error) -> PgCorpusError:
    """The family exception for a psycopg error (its diagnostics kept)."""
    diag = error.diag
    lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [""]
    message = diag.message_primary or lines[0]
    detail = diag.message_detail
    cls = _family(error.sqlstate, message)
    if _unavailable(error):
        cls, message = DatabaseUnavailable, f"database unavailable: {message}"
        detail = detail or "\n".join(lines[1:]) or None
    out = cls(error.sqlstate, message, detail, diag.message_hint)
    out.__cause__ = error
    return out
