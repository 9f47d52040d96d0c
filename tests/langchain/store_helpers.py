"""Shared pieces of the store tests: a character-profile embedding and a reference twin."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, Item, SearchItem
from langgraph.store.memory import InMemoryStore


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


def view(result: Any, *, ranked: bool) -> Any:
    """A store result reduced to what both stores must agree on."""
    if isinstance(result, Item):
        out = (result.namespace, result.key, result.value)
        if isinstance(result, SearchItem) and ranked:
            return (*out, None if result.score is None else round(result.score, 4))
        return out
    if isinstance(result, list) and result and isinstance(result[0], Item):
        rows = [view(r, ranked=ranked) for r in result]
        # Unranked searches: LangGraph's stores differ in order (insertion vs newest first).
        return rows if ranked else sorted(rows, key=repr)
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
            ranked = name in ("search", "asearch") and bool(kwargs.get("query"))
            assert view(ours, ranked=ranked) == view(theirs, ranked=ranked), name
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
        ranked = name == "asearch" and bool(kwargs.get("query"))
        assert view(ours, ranked=ranked) == view(theirs, ranked=ranked), name
        return ours
