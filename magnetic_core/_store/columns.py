"""The cell records of a snapshot kept as columns, each decoded when a cell is first read.

Opening a store from its index snapshot used to build one :class:`CellRecord` (with its
metadata JSON-decoded) per cell before the first query could run: about 3 s and a few
hundred bytes of Python objects per cell at 100K cells, for records a vector query never
reads. :class:`RecordColumns` keeps the snapshot's texts, metadata, entities and links as
a few large strings with offsets, and :class:`Records` (the catalog's ``records``) is a
mapping over them that makes a cell's record the first time it is asked for and keeps it
from then on (callers change records in place, as a plain dict would let them).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from magnetic_core._store.codec import metadata_from_json, metadata_to_json
from magnetic_core._store.record import CellRecord

__all__ = ["BlobStrings", "RecordColumns", "Records", "StoredFields", "split_blob"]


def split_blob(text: str, ends: np.ndarray) -> list[str]:
    """The strings that ``text`` holds end to end, ``ends`` their end offsets."""
    bounds = ends.tolist()
    starts = [0, *bounds[:-1]] if bounds else []  # an empty list has no first start
    return [text[a:b] for a, b in zip(starts, bounds, strict=True)]


class BlobStrings(Sequence[str]):
    """Strings kept end to end in one ``text`` (``ends`` their end offsets), each made when
    read: a snapshot's entity column is a few hundred thousand short strings, about 70 bytes
    each as Python objects against a few bytes here."""

    def __init__(self, text: str, ends: np.ndarray) -> None:
        self.text, self.ends = text, np.asarray(ends, np.int64)

    def __len__(self) -> int:
        return self.ends.shape[0]

    def __getitem__(self, at):  # type: ignore[no-untyped-def, override]  # int or slice
        if isinstance(at, slice):
            lo, hi, step = at.indices(len(self))
            if step != 1:
                return [self[i] for i in range(lo, hi, step)]
            if hi <= lo:
                return []
            bounds = self.ends[lo - 1 if lo else 0 : hi].tolist()
            if not lo:
                bounds.insert(0, 0)
            text = self.text
            return [text[a:b] for a, b in itertools.pairwise(bounds)]
        i = at + len(self) if at < 0 else at
        if not 0 <= i < len(self):
            raise IndexError(at)
        return self.text[(int(self.ends[i - 1]) if i else 0) : int(self.ends[i])]


class StoredFields(NamedTuple):
    """One record as a snapshot stores it: metadata and links as JSON ("" for none)."""

    text: str
    metadata: str
    links: str
    entities: Sequence[str]
    created_at: float
    updated_at: float

    @classmethod
    def of(cls, record: CellRecord) -> StoredFields:
        meta = metadata_to_json(record.metadata) if record.metadata else None
        return cls(
            record.text,
            json.dumps(meta, ensure_ascii=False, separators=(",", ":")) if meta else "",
            json.dumps(record.contradictions) if record.contradictions else "",
            record.entities,
            record.created_at,
            record.updated_at,
        )


@dataclass(frozen=True)
class RecordColumns:
    """The snapshot's records, one row per cell, strings kept whole with end offsets.

    Texts are one string or the snapshot's UTF-8 bytes (a text decoded when it is read).
    Metadata and links are JSON (an empty string for none), entities are ``entity_counts``
    consecutive strings of the ``entities`` column per row.
    """

    ids: list[str]
    texts: str | np.ndarray  # one string, or UTF-8 bytes (uint8) decoded per text
    text_ends: np.ndarray  # in characters of a string, in bytes of bytes
    metas: str
    meta_ends: np.ndarray
    links: str
    link_ends: np.ndarray
    entities: Sequence[str]  # a list, or the snapshot's column (BlobStrings)
    entity_ends: np.ndarray
    created: np.ndarray
    updated: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.ids)
        for name in ("text_ends", "meta_ends", "link_ends", "entity_ends", "created", "updated"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"the snapshot's record column {name!r} has the wrong length")

    def __len__(self) -> int:
        return len(self.ids)

    @staticmethod
    def _span(ends: np.ndarray, i: int) -> tuple[int, int]:
        return (int(ends[i - 1]) if i else 0), int(ends[i])

    def text(self, i: int) -> str:
        a, b = self._span(self.text_ends, i)
        text = self.texts[a:b]
        return text if isinstance(text, str) else text.tobytes().decode("utf-8")

    def stored(self, i: int) -> StoredFields:
        """Row ``i`` as the snapshot stores it (JSON kept as it is)."""
        a, b = self._span(self.meta_ends, i)
        c, d = self._span(self.link_ends, i)
        return StoredFields(
            self.text(i),
            self.metas[a:b],
            self.links[c:d],
            self.entities_of(i),
            float(self.created[i]),
            float(self.updated[i]),
        )

    def record(self, i: int) -> CellRecord:
        """The record of row ``i``, decoded."""
        a, b = self._span(self.meta_ends, i)
        meta = self.metas[a:b]
        c, d = self._span(self.link_ends, i)
        links = self.links[c:d]
        e, f = self._span(self.entity_ends, i)
        return CellRecord(
            text=self.text(i),
            metadata=metadata_from_json(json.loads(meta)) if meta else {},
            entities=tuple(self.entities[e:f]),
            created_at=float(self.created[i]),
            updated_at=float(self.updated[i]),
            contradictions=json.loads(links) if links else [],
        )

    def rows_with_links(self) -> np.ndarray:
        """Rows whose cell has contradiction links."""
        return np.flatnonzero(np.diff(self.link_ends, prepend=0) > 0)

    def entities_of(self, i: int) -> list[str]:
        e, f = self._span(self.entity_ends, i)
        return list(self.entities[e:f])


class Records(MutableMapping[str, CellRecord]):
    """Cell id -> record, over snapshot columns (or none) plus records put since.

    A row's record is decoded on its first read and kept (later reads return the same
    object, so a change made to it in place stays). Reading every value (``values()``,
    ``items()``) decodes every row.
    """

    def __init__(self, columns: RecordColumns | None = None) -> None:
        self._columns = columns
        self._row: dict[str, int] = (
            dict(zip(columns.ids, range(len(columns)))) if columns is not None else {}
        )
        self._made: dict[str, CellRecord] = {}  # decoded rows and records put since
        self._gone: set[str] = set()  # rows deleted
        self._new = 0  # records put whose id has no row (len() is asked on every search)

    def shared_ids(self, cids: list[str]) -> list[str]:
        """``cids`` as the columns' own string objects where they are ids of rows (one
        string per id however many indexes name it: about 56 bytes each)."""
        if self._columns is None:
            return cids
        ids, row = self._columns.ids, self._row
        return [c if (r := row.get(c)) is None else ids[r] for c in cids]

    def _stored(self, cid: str) -> bool:
        return cid in self._row and cid not in self._gone

    def __getitem__(self, cid: str) -> CellRecord:
        record = self._made.get(cid)
        if record is not None:
            return record
        if not self._stored(cid) or self._columns is None:
            raise KeyError(cid)
        # Readers decode concurrently (under the memory's read lock): the first one kept wins.
        return self._made.setdefault(cid, self._columns.record(self._row[cid]))

    def many(self, cids: list[str]) -> list[CellRecord]:
        """The records of ``cids``, in order (KeyError for one not stored): one call for
        the ten a search reads."""
        made = self._made
        return [made.get(cid) or self[cid] for cid in cids]

    def __contains__(self, cid: object) -> bool:
        return cid in self._made or (cid in self._row and cid not in self._gone)

    def __setitem__(self, cid: str, record: CellRecord) -> None:
        if cid not in self._row and cid not in self._made:
            self._new += 1
        self._made[cid] = record
        self._gone.discard(cid)

    def __delitem__(self, cid: str) -> None:
        found = self._made.pop(cid, None)
        if self._stored(cid):
            self._gone.add(cid)
        elif found is None:
            raise KeyError(cid)
        elif cid not in self._row:
            self._new -= 1

    def __iter__(self) -> Iterator[str]:
        row, gone, made = self._row, self._gone, self._made
        for cid in row:
            if cid not in gone:
                yield cid
        for cid in made:
            if cid not in row:
                yield cid

    def __len__(self) -> int:
        return len(self._row) - len(self._gone) + self._new

    def clear(self) -> None:
        self._columns, self._row, self._new = None, {}, 0
        self._made.clear()
        self._gone.clear()

    def decoded(self, cid: str) -> CellRecord | None:
        """The cell's record if it was decoded or put; None while it is only in the columns.

        Raises:
            KeyError: no such cell.
        """
        record = self._made.get(cid)
        if record is None and not self._stored(cid):
            raise KeyError(cid)
        return record

    def text_and_entities(self, cid: str) -> tuple[str, Sequence[str]]:
        """A cell's text and entities, read from the columns without decoding the record."""
        record = self._made.get(cid)
        if record is not None or not self._stored(cid) or self._columns is None:
            record = self[cid]
            return record.text, record.entities
        row = self._row[cid]
        return self._columns.text(row), self._columns.entities_of(row)

    def entities_of(self, cid: str) -> Sequence[str]:
        """A cell's entities, read from the columns without decoding the record."""
        record = self._made.get(cid)
        if record is not None or not self._stored(cid) or self._columns is None:
            return self[cid].entities
        return self._columns.entities_of(self._row[cid])

    def stored(self, cid: str) -> StoredFields:
        """A cell's record as a snapshot stores it; a row never read is not decoded."""
        if cid not in self._made and self._stored(cid) and self._columns is not None:
            return self._columns.stored(self._row[cid])
        return StoredFields.of(self[cid])

    def _undecoded(self, rows: np.ndarray) -> Iterator[tuple[str, int]]:
        """(cid, row) of the given rows still stored and not decoded."""
        if self._columns is None:
            return
        ids, gone, made = self._columns.ids, self._gone, self._made
        for i in rows.tolist():
            cid = ids[i]
            if cid not in gone and cid not in made:
                yield cid, i

    def entity_pairs(self) -> Iterator[tuple[str, Sequence[str]]]:
        """(cid, entities) of every cell that has entities, decoding nothing."""
        columns, gone, made = self._columns, self._gone, self._made
        if columns is not None:
            # every entity is read: made in one pass (a slice per row costs twice the time)
            ids, entities, start = columns.ids, columns.entities[:], 0
            for i, end in enumerate(columns.entity_ends.tolist()):
                if end > start and ids[i] not in gone and ids[i] not in made:
                    yield ids[i], entities[start:end]
                start = end
        for cid, record in made.items():
            if record.entities:
                yield cid, record.entities

    def with_metadata(self) -> Iterator[tuple[str, CellRecord]]:
        """(cid, record) of every cell that has metadata, in order (decoding only those)."""
        columns, made, row = self._columns, self._made, self._row
        has = np.diff(columns.meta_ends, prepend=0) > 0 if columns is not None else None
        for cid in list(self):
            record = made.get(cid)
            if record is None and has is not None and has[row[cid]]:
                record = self[cid]
            if record is not None and record.metadata:
                yield cid, record

    def with_links(self) -> Iterator[tuple[str, CellRecord]]:
        """(cid, record) of every cell that has contradiction links (decoding only those)."""
        columns = self._columns
        if columns is not None:
            for cid, _ in list(self._undecoded(columns.rows_with_links())):
                self[cid]
        for cid, record in list(self._made.items()):
            if record.contradictions:
                yield cid, record
