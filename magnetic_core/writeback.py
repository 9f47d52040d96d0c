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

    Cells are the truth and are written first; the groups collection is a cache of centroids
    and sizes, rewritten only for groups whose version changed. On creation, cached entries
    that disagree with the cells (a crash between the two writes) are repaired.
    """

    def __init__(self, store: ChromaStore, index: HierIndex, catalog: Catalog) -> None:
        self.store, self.index, self.catalog = store, index, catalog
        stored = store.group_sizes()
        self._versions: dict[str, int] = {
            gid: g.version for gid, g in index.groups.items() if stored.get(gid) == g.n
        }
        self._versions.update({gid: -1 for gid in stored.keys() - index.groups.keys()})
        self.groups()

    def cells(self, ids: Iterable[str] = ()) -> None:
        """Write the given cells whole, the new group of every cell that moved, then groups.

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
                vectors = np.stack([self.index.vector(c) for c in order])
                texts = [self.catalog.records[c].text for c in order]
                self.store.write_cells(order, vectors, texts, rows)
            else:
                self.store.relocate_cells(order, rows)
        self.groups()

    def groups(self) -> None:
        """Rewrite the cached centroid and size of every changed group; drop removed ones."""
        groups = self.index.groups
        changed = [g for gid, g in groups.items() if self._versions.get(gid) != g.version]
        gone = [gid for gid in self._versions if gid not in groups]
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
