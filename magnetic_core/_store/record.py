"""The one record of a cell, from its Chroma row to the view: what it is and how it is stored.

A :class:`CellRecord` is everything about a cell that is not its vector or its place in
the hierarchy (text, metadata, entities, times, links). It is decoded from the row
(:func:`decode_row`), kept as is in the catalog, encoded back from the same object
(:func:`encode_row`), and turned into the frozen public :class:`~magnetic_core.types.Cell`
by :func:`~magnetic_core._search.views.cell_view`. A new field is added here, in the codec
and in the view.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from magnetic_core._store.codec import decode_record, metadata_to_json
from magnetic_core.errors import CorruptRecordError

__all__ = [
    "ROW_KEY",
    "TEXT_KEY",
    "WRITER_KEY",
    "CellRecord",
    "StoredCell",
    "decode_row",
    "encode_row",
]

ROW_KEY = "_mag"
"""The one reserved metadata key of a cell row: its record as one JSON object."""
WRITER_KEY = "_mag_w"
"""Marks a row of the cells collection that is not a cell: a writer's change counter."""
TEXT_KEY = "_mag_x"
"""A cell's text (schema 4). Not Chroma's document: Chroma builds a trigram full-text index
over every document it is given (12-17% of its add time per 26-word cell in two measurements
here), and the engine never asks Chroma to search text (its own BM25 stage does). Rows written
by schemas 2 and 3 hold their text as the document, and it is read from there when a row has
no such key."""


@dataclass(slots=True)
class CellRecord:
    """The non-vector state of one cell (mutable; turned into a frozen Cell on the way out).

    Slotted: a store keeps one per cell (48 bytes less each than with a ``__dict__``), and
    a search reads its hits' fields without going through one."""

    text: str
    metadata: dict[str, Any]
    entities: tuple[str, ...]
    created_at: float
    updated_at: float
    contradictions: list[dict[str, Any]] = field(default_factory=list)
    terms: tuple[str, ...] = ()


@dataclass(frozen=True)
class StoredCell:
    """One row of the cells collection, decoded: its place in the hierarchy and its record."""

    id: str
    vector: np.ndarray
    group_id: str
    seq: int
    record: CellRecord


def encode_row(record: CellRecord, group_id: str, seq: int) -> dict[str, Any]:
    """The Chroma metadata of one cell: a single reserved key holding one JSON object.

    One key instead of one per field: Chroma stores each metadata key as its own row, and
    packing them made persisted ingest about 11% faster here. JSON also keeps floats exact.
    Field names are one letter and fields holding their default (no metadata, entities or
    links; updated when created) are left out: Chroma's cost per cell grows with the
    bytes of its metadata, and this halves a typical record (about 5% of Chroma's time).
    """
    row: dict[str, Any] = {"g": group_id, "s": int(seq), "c": float(record.created_at)}
    if record.updated_at != record.created_at:
        row["u"] = float(record.updated_at)
    if record.entities:
        row["e"] = list(record.entities)
    if record.metadata:
        row["m"] = metadata_to_json(record.metadata)
    if record.contradictions:
        row["l"] = list(record.contradictions)
    return {ROW_KEY: json.dumps(row, ensure_ascii=False, separators=(",", ":"))}


def decode_row(
    cid: str, vector: np.ndarray, text: str | None, meta: Mapping[str, Any] | None
) -> StoredCell:
    """A stored row read back; never trusts it. ``text`` is the row's Chroma document,
    read when the metadata has no :data:`TEXT_KEY` (a row written before schema 4).

    Raises:
        CorruptRecordError: the record cannot be decoded, or the vector is zero or not
            finite (the caller logs and skips the row).
    """
    row = decode_record(cid, (meta or {}).get(ROW_KEY))
    if not np.isfinite(vector).all() or not vector.any():
        raise CorruptRecordError(f"stored cell {cid!r} has a zero or non-finite vector")
    own = meta.get(TEXT_KEY) if meta else None
    record = CellRecord(
        text=own if isinstance(own, str) else (text or ""),
        metadata=row["m"],
        entities=row["e"],
        created_at=row["c"],
        updated_at=row["u"],
        contradictions=list(row["l"]),
    )
    return StoredCell(id=cid, vector=vector, group_id=row["g"], seq=row["s"], record=record)
