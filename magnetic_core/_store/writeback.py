"""Writing the in-memory hierarchy back to Chroma: changed cells first, then the group cache."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from magnetic_core._index.index import HierIndex
from magnetic_core._store.catalog import Catalog
from magnetic_core._store.persistence import ChromaStore
from magnetic_core._store.record import encode_row
from magnetic_core.errors import PersistenceError

__all__ = ["WriteBack"]

logger = logging.getLogger(__name__)


class WriteBack:
    """Persists what changed in one namespace's index and catalog.

    Cells are the truth and are written before anything else, on every write. The groups
    collection is a cache of centroids and sizes (the index is rebuilt from the cells on
    open), rewritten only for groups whose version changed, and only once enough cells were
    written since its last update that its rows are a small share of the traffic: during a
    bulk load most groups change with every batch, and rewriting each one's centroid per
    batch cost as much as a tenth of the cells' own writes (at one row per 8 cells, still 8%
    of a 30K-cell bulk load's CPU time; each row is an HNSW update in Chroma, dearer than
    a cell's add). Nothing reads the cache back while a memory runs (an open rebuilds the
    index from the cells), so it may lag. :meth:`groups` brings it up to
    date at once (the memory calls it on close). Cached entries that disagree with the cells
    (a crash, or a process that never closed the memory) are repaired by :meth:`repair`;
    the constructor only compares (it never writes).

    Args:
        stored_groups: the group cache as stored (:meth:`ChromaStore.group_cache`).
        cells_per_group_row: the cache is updated once the cells written whole (new or
            updated) since its last update number at least this many times the group rows
            it needs.
    """

    def __init__(
        self,
        store: ChromaStore,
        index: HierIndex,
        catalog: Catalog,
        stored_groups: Mapping[str, tuple[int, np.ndarray]],
        cells_per_group_row: int = 32,
    ) -> None:
        self.store, self.index, self.catalog = store, index, catalog
        self.cells_per_group_row = cells_per_group_row
        self._pending_cells = 0
        self._versions: dict[str, int] = {
            gid: g.version
            for gid, g in index.groups.items()
            if gid in stored_groups and _same(stored_groups[gid], g.n, index.centroids[g.slot])
        }
        self._versions.update({gid: -1 for gid in stored_groups.keys() - index.groups.keys()})

    def cells(
        self,
        ids: Iterable[str] = (),
        *,
        counter: tuple[str, int] | None = None,
        txn: str | None = None,
        fresh: bool = False,
    ) -> None:
        """Write the new group of every cell that moved, then the given cells whole.

        Cells that only changed group (splits, merges, regrouping) get a metadata-only
        update, which does not make Chroma re-index their unchanged vectors. They are
        written first, so that the call writing the cells themselves (with this writer's
        change ``counter``) is the last: a write within one batch lands whole or not at
        all, and the groups read back from the cells are consistent either way. ``txn``
        tags the cells of a write spanning several batches (see :mod:`journal`); ``fresh``
        says none of ``ids`` was stored before (see :meth:`ChromaStore.write_cells`).
        A failure to update the group cache afterwards is logged, not raised: the cells
        are stored, and the cache is repaired on the next open.
        """
        live = self.index.loc.keys()
        wanted = set(ids) & live
        moved = (self.index.take_moved() - wanted) & live
        if moved:
            order = sorted(moved, key=self.index.seq.__getitem__)
            self.store.relocate_cells(order, [self._row(cid) for cid in order])
        if wanted:
            order = sorted(wanted, key=self.index.seq.__getitem__)
            vectors, texts, rows = self.rows_of(order)
            self.store.write_cells(
                order, vectors, texts, rows, counter=counter, txn=txn, fresh=fresh
            )
            self._pending_cells += len(order)
        elif counter is not None:
            self.store.write_counter(*counter, dim=self.index.dim)
        try:
            self.groups(force=False)
        except PersistenceError as e:
            logger.warning("the group cache was not updated (repaired on next open): %s", e)

    def rows_of(self, ids: Sequence[str]) -> tuple[np.ndarray, list[str], list[dict[str, Any]]]:
        """The vectors, texts and encoded rows of cells, as they are in memory."""
        vectors = self.index.vectors(ids) if ids else np.empty((0, self.index.dim), np.float32)
        texts = [self.catalog.records[c].text for c in ids]
        return vectors, texts, [self._row(cid) for cid in ids]

    def repair(self) -> None:
        """Rewrite the cached rows that disagree with the cells (after a load)."""
        self.groups()

    def groups(self, force: bool = True) -> None:
        """Rewrite the cached centroid and size of every changed group; drop removed ones.

        With ``force=False`` nothing is written while the rows due are more than one per
        ``cells_per_group_row`` cells written since the last update.
        """
        groups = self.index.groups
        changed = [g for gid, g in groups.items() if self._versions.get(gid) != g.version]
        gone = [gid for gid in self._versions if gid not in groups]
        due = len(changed) + len(gone)
        if not force and due * self.cells_per_group_row > self._pending_cells:
            return
        self._pending_cells = 0
        if changed:
            self.store.write_groups(
                [g.gid for g in changed],
                np.stack([self.index.centroids[g.slot] for g in changed]),
                [g.n for g in changed],
            )
        if gone:
            self.store.delete_groups(gone)
        for gid in gone:
            del self._versions[gid]
            self.catalog.forget_label(gid)
        for g in changed:
            self._versions[g.gid] = g.version

    def _row(self, cid: str) -> dict[str, Any]:
        record = self.catalog.records[cid]
        return encode_row(record, self.index.loc[cid].gid, self.index.seq[cid])


def _same(cached: tuple[int, np.ndarray], size: int, centroid: np.ndarray) -> bool:
    """Whether a cached group row still describes the group (size and centroid)."""
    return cached[0] == size and bool(np.allclose(cached[1], centroid, rtol=0.0, atol=1e-5))
