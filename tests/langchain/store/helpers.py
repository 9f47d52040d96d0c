"""Shared pieces of the store tests: a character-profile embedding and a reference twin."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, Item, SearchItem
from langgraph.store.memory import InMemoryStore

DIMS = 64


class CharProfileEmbeddings(Embeddings):
    """Texts sharing characters get similar vectors: each character owns a fixed random
    direction (seeded by its code point's CRC), a text is the frequency-weighted sum."""

    def __init__(self, dims: int = 64) -> None:
        self.dims = dims
        self._basis: dict[str, np.ndarray] = {}
        self.calls = 0

    def _direction(self, ch: str) -> np.ndarray:
        if ch not in self._basis:
            rng = np.random.default_rng(zlib.crc32(ch.encode()))
            self._basis[ch] = rng.standard_normal(self.dims)
        return self._basis[ch]

    def _one(self, text: str) -> list[float]:
        vec = np.zeros(self.dims)
        for ch in text:
            vec += self._direction(ch)
        if not text:
            vec = self._direction("\x00")
        return (vec / np.linalg.norm(vec)).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


def view(result: Any) -> Any:
    """A store result reduced to what both stores must agree on.

    Items become (namespace, key, value[, score to 4 decimals]). A ranked search result
    keeps the order of its scored items; unscored ones are compared as a set, since
    LangGraph's stores order those differently (insertion order, or newest first).
    """
    if isinstance(result, SearchItem):
        score = None if result.score is None else round(result.score, 4)
        return (result.namespace, result.key, result.value, score)
    if isinstance(result, Item):
        return (result.namespace, result.key, result.value)
    if isinstance(result, list):
        rows = [view(r) for r in result]
        if result and all(isinstance(r, SearchItem) for r in result):
            scored = [row for row in rows if row[3] is not None]
            return scored + sorted((row for row in rows if row[3] is None), key=repr)
        return rows
    return result


class Twin:
    """Runs every call on a MagneticStore and on LangGraph's InMemoryStore; compares."""

    def __init__(self, store: BaseStore, reference: InMemoryStore) -> None:
        self.store = store
        self.reference = reference

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self._forget_empty()
            ours = getattr(self.store, name)(*args, **kwargs)
            theirs = getattr(self.reference, name)(*args, **kwargs)
            assert view(ours) == view(theirs), name
            return ours

        return call

    def _forget_empty(self) -> None:
        # InMemoryStore keeps listing a namespace after its last item is deleted (and even
        # one that was only read); LangGraph's SQL stores, and MagneticStore, do not.
        data = self.reference._data
        for ns in [ns for ns, items in data.items() if not items]:
            del data[ns]

    async def acall(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self._forget_empty()
        ours = await getattr(self.store, name)(*args, **kwargs)
        theirs = await getattr(self.reference, name)(*args, **kwargs)
        assert view(ours) == view(theirs), name
        return ours
