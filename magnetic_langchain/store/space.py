"""One LangGraph namespace in the engine: its memory, its items' TTLs, reads and writes."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from magnetic_core import MagneticMemory
from magnetic_core.types import Cell, Hit
from magnetic_langchain.store.records import (
    RECORD,
    CellBatch,
    record_id,
    vector_ids,
)

__all__ = ["Space"]

Predicate = Callable[[Mapping[str, Any]], bool]


class Space:
    """The items of one LangGraph namespace, kept in their own engine namespace.

    Besides the memory it keeps, for speed, each item's expiry time (items with a TTL only)
    and vector count (items with more than one vector only); both are read from the stored
    records when the namespace is opened.
    """

    def __init__(self, namespace: tuple[str, ...], memory: MagneticMemory) -> None:
        self.namespace = namespace
        self.memory = memory
        self.expiry: dict[str, float] = {}
        self.vectors: dict[str, int] = {}
        for cell in memory.get(filter=lambda m: m.get("lg") == RECORD):
            self._note(cell.metadata)

    def _note(self, meta: Mapping[str, Any]) -> None:
        key = meta["key"]
        self.expiry.pop(key, None)
        self.vectors.pop(key, None)
        if meta.get("exp") is not None:
            self.expiry[key] = float(meta["exp"])
        if meta.get("nv", 0) > 1:
            self.vectors[key] = int(meta["nv"])

    # -- reading ---------------------------------------------------------------------
    def alive(self, key: str, now: float) -> bool:
        """Whether ``key`` has not expired (items without a TTL never do)."""
        exp = self.expiry.get(key)
        return exp is None or exp > now

    @property
    def size(self) -> int:
        """Number of items (not cells)."""
        return self.memory.count() - sum(n - 1 for n in self.vectors.values())

    def records(self, keys: Sequence[str]) -> dict[str, Cell]:
        """Record cells by key (missing keys left out)."""
        cells = self.memory.get([record_id(k) for k in keys])
        return {c.metadata["key"]: c for c in cells}

    def scan(
        self,
        value_filter: Predicate | None,
        live: Callable[[str], bool],
        *,
        unindexed_only: bool = False,
    ) -> list[Cell]:
        """Record cells whose value passes ``value_filter`` and whose key is ``live``."""

        def keep(m: Mapping[str, Any]) -> bool:
            return (
                m.get("lg") == RECORD
                and not (unindexed_only and m.get("ix"))
                and live(m["key"])
                and (value_filter is None or value_filter(m["value"]))
            )

        return self.memory.get(filter=keep)

    def nearest(
        self,
        vector: np.ndarray,
        k: int,
        value_filter: Predicate | None,
        live: Callable[[str], bool],
        query: str | None,
    ) -> list[Hit]:
        """Indexed cells nearest ``vector``, at least ``k`` distinct items' worth when they exist.

        ``query`` text, when given, turns on the engine's entity and lexical stages.
        """

        def keep(m: Mapping[str, Any]) -> bool:
            return (
                bool(m.get("ix"))
                and live(m["key"])
                and (value_filter is None or value_filter(m["value"]))
            )

        want = min(self.memory.count(), k + sum(n - 1 for n in self.vectors.values()))
        if want <= 0:
            return []
        return self.memory.search(query, k=want, filter=keep, vector=vector)

    # -- writing ---------------------------------------------------------------------
    def write(self, batch: CellBatch, deleted: Sequence[str]) -> None:
        """Upsert ``batch`` and delete the items ``deleted``, dropping stale vector cells."""
        keys = [m["key"] for m in batch.metadatas if m["lg"] == RECORD]
        before = {k: self.vectors.get(k, 1) for k in [*keys, *deleted]}
        existing = self.records(keys) if keys else {}
        for meta in batch.metadatas:  # an update keeps the item's creation time
            if meta["lg"] != RECORD:
                continue
            old = existing.get(meta["key"])
            meta["cr"] = old.metadata.get("cr", meta["up"]) if old is not None else meta["up"]
        if batch.ids:
            self.memory.add(
                batch.texts, batch.metadatas, batch.ids, vectors=np.stack(batch.vectors)
            )
            for meta in batch.metadatas:
                if meta["lg"] == RECORD:
                    self._note(meta)
        stale: list[str] = []
        for key in keys:
            stale += vector_ids(key, before[key])[self.vectors.get(key, 1) - 1 :]
        for key in deleted:
            stale += [record_id(key), *vector_ids(key, before[key])]
            self.expiry.pop(key, None)
            self.vectors.pop(key, None)
        if stale:
            self.memory.delete(ids=stale)

    def refresh(self, keys: Sequence[str], now: float) -> None:
        """Restart the TTL clock of the items ``keys`` that have a TTL and are still live."""
        cells = [
            c
            for c in self.records(
                [k for k in keys if k in self.expiry and self.alive(k, now)]
            ).values()
            if c.metadata.get("ttl") is not None
        ]
        if not cells:
            return
        metas = [{**c.metadata, "exp": now + 60.0 * float(c.metadata["ttl"])} for c in cells]
        ids = [c.id for c in cells]
        self.memory.add([c.text for c in cells], metas, ids, vectors=self.memory.get_vectors(ids))
        for meta in metas:
            self._note(meta)

    def sweep(self, now: float | None = None) -> int:
        """Delete the expired items; returns how many."""
        now = time.time() if now is None else now
        expired = [k for k, exp in self.expiry.items() if exp <= now]
        if expired:
            self.write(CellBatch.empty(), expired)
        return len(expired)
