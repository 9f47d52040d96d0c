"""How LangGraph items are laid out as engine cells, and read back.

An item ``key`` is one *record* cell ``i:<key>`` (its value, timestamps and TTL in the
metadata) plus one *vector* cell ``v:<n>:<key>`` for each further text it is indexed by (an
item indexed on several fields, or on a list path, has one vector per text; a search scores
the item by its best vector, as LangGraph's stores do). The record cell carries the first
text's vector. An item that is not indexed has a fixed placeholder vector and ``ix`` false,
so vector searches never see it while ``get``, listing and filters do. Every cell of an item
carries the item's value, so one metadata predicate filters a vector search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np
from langgraph.store.base import Item, PutOp, SearchItem, get_text_at_path, tokenize_path

from magnetic_core.types import Cell

__all__ = [
    "CellBatch",
    "MagneticSearchItem",
    "field_paths",
    "item_from_cell",
    "placeholder_vector",
    "record_id",
    "texts_to_index",
    "vector_ids",
]

RECORD = "item"
VECTOR = "vec"


def record_id(key: str) -> str:
    """The id of an item's record cell."""
    return f"i:{key}"


def vector_ids(key: str, count: int) -> list[str]:
    """Ids of an item's extra vector cells (its texts after the first)."""
    return [f"v:{n}:{key}" for n in range(1, count)]


def placeholder_vector(dim: int) -> np.ndarray:
    """The fixed vector of items stored without an index (never searched by vector)."""
    vec = np.random.default_rng(20260).standard_normal(dim)
    return vec / np.linalg.norm(vec)


def field_paths(fields: Sequence[str] | None) -> list[tuple[str, str | list[str]]]:
    """Index paths as ``(path, tokens)``; ``"$"`` is the whole value as JSON."""
    return [(p, p if p == "$" else tokenize_path(p)) for p in (fields or ["$"])]


def texts_to_index(
    op: PutOp, default: list[tuple[str, str | list[str]]] | None
) -> list[tuple[str, str]]:
    """``(path, text)`` pairs of a put, in order; empty when the item is not indexed."""
    if op.value is None or op.index is False or default is None:
        return []
    paths = default if op.index is None else field_paths(list(op.index))
    out: list[tuple[str, str]] = []
    for path, tokens in paths:
        texts = get_text_at_path(op.value, tokens)
        if len(texts) == 1:
            out.append((path, texts[0]))
        else:
            out.extend((f"{path}.{i}", text) for i, text in enumerate(texts))
    return out


@dataclass
class CellBatch:
    """Cells to upsert into one engine namespace, built from put operations."""

    ids: list[str]
    texts: list[str]
    metadatas: list[dict[str, Any]]
    vectors: list[np.ndarray]

    @classmethod
    def empty(cls) -> CellBatch:
        return cls([], [], [], [])

    def add_item(
        self,
        op: PutOp,
        texts: list[tuple[str, str]],
        vectors: list[np.ndarray],
        placeholder: np.ndarray,
        *,
        now: float,
        expires_at: float | None,
    ) -> None:
        """Append the record cell and vector cells of one put."""
        value = dict(op.value or {})
        base = {"key": op.key, "value": value, "ix": bool(texts)}
        record = {
            **base,
            "lg": RECORD,
            "nv": len(texts),
            "up": now,
            "exp": expires_at,
            "ttl": op.ttl,
        }
        self.ids.append(record_id(op.key))
        # An item without an index has no words either: it is reached by key and filter.
        self.texts.append(texts[0][1] if texts else "")
        self.metadatas.append(record)
        self.vectors.append(vectors[0] if texts else placeholder)
        for cid, (path, text), vec in zip(vector_ids(op.key, len(texts)), texts[1:], vectors[1:]):
            self.ids.append(cid)
            self.texts.append(text)
            self.metadatas.append({**base, "lg": VECTOR, "path": path})
            self.vectors.append(vec)


class MagneticSearchItem(SearchItem):
    """A :class:`SearchItem` that also names the concept group of its match.

    Returned by :class:`~magnetic_langchain.MagneticStore` built with ``include_groups=True``.

    Attributes:
        group_id: id of the engine's concept group holding the best-matching cell.
        group_label: a few characteristic terms of that group.
    """

    __slots__ = ("group_id", "group_label")

    def __init__(
        self, *args: Any, group_id: str | None = None, group_label: str | None = None, **kw: Any
    ) -> None:
        super().__init__(*args, **kw)
        self.group_id = group_id
        self.group_label = group_label

    def dict(self) -> dict[str, Any]:
        out = super().dict()
        out["group_id"] = self.group_id
        out["group_label"] = self.group_label
        return out


def _time(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def item_from_cell(namespace: tuple[str, ...], cell: Cell) -> Item:
    """The LangGraph item stored in a record cell."""
    meta = cell.metadata
    return Item(
        value=dict(meta["value"]),
        key=meta["key"],
        namespace=namespace,
        created_at=_time(meta.get("cr", cell.created_at)),
        updated_at=_time(meta["up"]),
    )


def search_item(
    item: Item, score: float | None, group: tuple[str, str] | None = None
) -> SearchItem:
    """A search result for ``item`` (with its match's group when ``group`` is given)."""
    args = (item.namespace, item.key, item.value, item.created_at, item.updated_at)
    if group is None:
        return SearchItem(*args, score=score)
    return MagneticSearchItem(*args, score=score, group_id=group[0], group_label=group[1])
