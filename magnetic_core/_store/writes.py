"""The write path: validate, embed, then under the write lock place, catalog and store.

:class:`WritePath` is the part of :class:`~magnetic_core.MagneticMemory` that changes
cells: ``add`` (upsert), ``delete``, ``clear`` and the links between cells (contradictions,
supersession). Inputs are checked before anything changes; the changes run guarded (any
failure reloads what is stored); a write larger than one Chroma batch goes through the
write journal, so it is stored whole or not at all.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from magnetic_core._index.vectors import normalize
from magnetic_core._sleep.supersession import (
    link_cells,
    links_kept_by_upsert,
    newer_of,
    superseded_ids,
)
from magnetic_core._store.catalog import CellRecord
from magnetic_core._store.concurrency import async_twin
from magnetic_core._store.lifecycle import StoreLifecycle
from magnetic_core._text.entities import extract_entities
from magnetic_core._text.inputs import check_id_list, validate_batch, validate_batch_vectors
from magnetic_core.embeddings import embed_checked
from magnetic_core.errors import InvalidInputError
from magnetic_core.filters import Predicate, compile_filter

__all__ = ["WritePath", "write_time"]


def write_time() -> float:
    """The time of a write (millisecond resolution: finer means nothing for a memory)."""
    return round(time.time(), 3)


class WritePath(StoreLifecycle):
    """Adding, deleting and linking cells (a base of ``MagneticMemory``)."""

    def add(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        ids: Sequence[str] | None = None,
        vectors: Any = None,
    ) -> list[str]:
        """Store texts (upsert by id) and place each in a concept group.

        Args:
            texts: non-empty strings (empty ones are accepted when ``vectors`` are given:
                such a cell is found by its vector and metadata, not by words).
            metadatas: one dict (or None) per text; returned exactly as given.
            ids: one unique id per text; random UUIDs by default. An existing id is updated
                and moved to the group that fits its new vector.
            vectors: precomputed embeddings, one per text; otherwise the embedder is used.

        Returns:
            The ids, in input order.

        Raises:
            InvalidInputError: empty text, duplicate ids, bad metadata or vectors. Nothing
                is stored when any input is invalid.
            EmbeddingError: the embedder failed.
        """
        self._check_open()
        texts, metas, ids = validate_batch(
            texts,
            metadatas,
            ids,
            max_chars=self.config.max_text_chars,
            allow_empty=vectors is not None,
        )
        if not texts:
            return []
        if vectors is not None:
            vecs = validate_batch_vectors(vectors, len(texts), self.embedder.dim)
        else:
            vecs = embed_checked(self.embedder, texts)
        vecs = normalize(vecs)
        entities = [tuple(extract_entities(t)) for t in texts]
        with self._writing(), self._guarded():
            self._write(ids, vecs, texts, metas, entities)
        self._sleeper.note_writes(len(ids))
        return list(ids)

    def _write(
        self,
        ids: list[str],
        vecs: np.ndarray,
        texts: list[str],
        metas: list[dict[str, Any]],
        entities: list[tuple[str, ...]],
    ) -> None:
        now = write_time()
        records = self._catalog.records
        created = [records[c].created_at if c in records else now for c in ids]
        fresh = not any(c in records for c in ids)
        links, partners = [], set()
        for cid, text in zip(ids, texts, strict=True):
            kept, changed = links_kept_by_upsert(records, cid, text)
            links.append(kept)
            partners |= changed
        partners -= set(ids)
        # A write of more cells than one Chroma batch goes through the journal.
        txn = self._clock.new_txn() if len(ids) + len(partners) > self._store.batch else None
        if txn is not None:
            existing = [c for c in ids if c in records] + sorted(partners)
            self._journal.begin_write(txn, existing, *self._writeback.rows_of(existing))
        self._calibration.assign(self._index, ids, vecs)
        for i, cid in enumerate(ids):
            self._catalog.put(
                cid, CellRecord(texts[i], metas[i], entities[i], created[i], now, links[i])
            )
        self._writeback.cells(
            [*ids, *sorted(partners)],
            counter=self._clock.tick(),
            txn=txn,
            fresh=fresh and not partners,
        )
        if txn is not None:
            self._journal.finish()
        self._calibration.commit(self._store.save_settings)
        self._superseded = set(superseded_ids(records, self._superseded))

    def delete(
        self, ids: Sequence[str] | None = None, filter: Mapping[str, Any] | Predicate | None = None
    ) -> int:
        """Delete cells by ids and/or a metadata filter; missing ids are ignored.

        ``filter`` is a ``where`` dict or a predicate, as in :meth:`search`.

        Returns:
            The number of cells deleted.
        """
        self._check_open()
        if ids is None and filter is None:
            raise InvalidInputError(
                "delete() needs ids or a filter", hint="use clear() to delete everything"
            )
        check_id_list(ids)
        predicate = compile_filter(filter)
        with self._writing():
            records = self._catalog.records
            pool = records if ids is None else ids
            targets = list(dict.fromkeys(c for c in pool if c in records))
            if predicate is not None:
                targets = [c for c in targets if predicate(records[c].metadata)]
            if not targets:
                return 0
            txn = self._clock.new_txn() if len(targets) > self._store.batch else None
            with self._guarded():
                if txn is not None:
                    self._journal.begin_delete(txn, targets)
                self._store.delete_cells(targets)
                for cid in targets:
                    self._index.remove(cid)
                    self._catalog.drop(cid)
                self._writeback.cells(counter=self._clock.tick())
                if txn is not None:
                    self._journal.finish()
            self._deleted_own += len(targets)
        self._sleeper.note_deletes()
        return len(targets)

    def clear(self) -> None:
        """Delete every cell and group of this namespace (the embedder stamp stays)."""
        self._check_open()
        with self._lock.write():
            self._check_open()
            with self._guarded():
                self._store.clear()
                self._reload()

    def mark_contradiction(self, cell_a: str, cell_b: str, explanation: str) -> None:
        """Record that two cells contradict each other; both are kept and linked both ways.

        Where the two were stored at different times, the newer one supersedes the older:
        the older cell's ``superseded_by`` names the newer, with the time it was marked.
        """
        self._link(cell_a, cell_b, explanation, supersede="by-time")

    def supersede(self, old_id: str, new_id: str, explanation: str = "") -> None:
        """Mark ``old_id`` as replaced by ``new_id`` (both kept, linked both ways).

        ``search(..., current_only=True)`` then leaves ``old_id`` out.
        """
        self._link(old_id, new_id, explanation or "superseded by a newer fact", supersede=True)

    def _link(self, a: str, b: str, explanation: str, *, supersede: bool | str) -> None:
        self._check_open()
        if not isinstance(explanation, str) or not explanation.strip():
            raise InvalidInputError("an explanation is required", hint="say why in one sentence")
        with self._writing():
            records = self._catalog.records
            for cid in (a, b):
                if cid not in records:
                    raise InvalidInputError(f"no cell with id {cid!r}")
            order = (a, b) if supersede is True else None
            if supersede == "by-time" and a != b:
                order = newer_of(records, a, b)
            saved = {c: [dict(x) for x in records[c].contradictions] for c in (a, b)}
            try:
                link_cells(records, a, b, explanation.strip(), write_time(), supersede=order)
            except InvalidInputError:
                for c, links in saved.items():
                    records[c].contradictions = links
                raise
            with self._guarded():
                self._writeback.cells([a, b], counter=self._clock.tick())
            if order is not None:
                self._superseded.add(order[0])

    aadd = async_twin(add)
    adelete = async_twin(delete)
    aclear = async_twin(clear)
    asupersede = async_twin(supersede)
    amark_contradiction = async_twin(mark_contradiction)
