"""Writing the in-memory hierarchy back to Chroma: changed cells first, then the group cache."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from magnetic_core.catalog import Catalog
from magnetic_core.index import HierIndex
from magnetic_core.persistence import ChromaStore, encode_row

__all__ = ["WriteBack"]


class WriteBack:
    """Persists what changed in one namespace's index and catalog.

    Cells are the truth and are written before anything else, on every write. The groups
    collection is a cache of centroids and sizes (the index is rebuilt from the cells on
    open), rewritten only for groups whose version changed, and only once enough cells were
    written since its last update that its rows are a small share of the traffic: during a
    bulk load most groups change with every batch, and rewriting each one's centroid per
    batch cost as much as a tenth of the cells' own writes. :meth:`groups` brings it up to
    date at once (the memory calls it on close). On creation, cached entries that disagree
    with the cells (a crash, or a process that never closed the memory) are repaired.

    Args:
        cells_per_group_row: the cache is updated once the cells written whole (new or
            updated) since its last update number at least this many times the group rows
            it needs.
    """

    def __init__(
        self,
        store: ChromaStore,
        index: HierIndex,
        catalog: Catalog,
        cells_per_group_row: int = 8,
    ) -> None:
        self.store, self.index, self.catalog = store, index, catalog
        self.cells_per_group_row = cells_per_group_row
        self._pending_cells = 0
        stored = store.group_cache()
        self._versions: dict[str, int] = {
            gid: g.version
            for gid, g in index.groups.items()
            if gid in stored and _same(stored[gid], g.n, index.centroids[g.slot])
        }
        self._versions.update({gid: -1 for gid in stored.keys() - index.groups.keys()})
        self.groups()

    def cells(self, ids: Iterable[str] = ()) -> None:
        """Write the given cells whole, then the new group of every cell that moved.

        Cells that only changed group (splits, merges, regrouping) get a metadata-only
        update, which does not make Chroma re-index their unchanged vectors.
        """
        live = self.index.loc.keys()
        wanted = set(ids) & live
        moved = (self.index.take_moved() - wanted) & live
        for chosen, whole in ((wanted, True), (moved, False)):
            order = sorted(chosen, key=self.index.seq.__getitem__)
            if not order:
                continue
            rows = [self._row(cid) for cid in order]
            if whole:
                vectors = self.index.vectors(order)
                texts = [self.catalog.records[c].text for c in order]
                self.store.write_cells(order, vectors, texts, rows)
                self._pending_cells += len(order)
            else:
                self.store.relocate_cells(order, rows)
        self.groups(force=False)

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

    def _row(self, cid: str) -> dict[str, object]:
        record = self.catalog.records[cid]
        return encode_row(
            group_id=self.index.loc[cid].gid,
            metadata=record.metadata,
            entities=record.entities,
            created_at=record.created_at,
            updated_at=record.updated_at,
            seq=self.index.seq[cid],
            contradictions=record.contradictions,
        )


def _same(cached: tuple[int, np.ndarray], size: int, centroid: np.ndarray) -> bool:
    """Whether a cached group row still describes the group (size and centroid)."""
    return cached[0] == size and bool(np.allclose(cached[1], centroid, rtol=0.0, atol=1e-5))
