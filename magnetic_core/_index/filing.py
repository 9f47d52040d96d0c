"""Rows an assignment call has placed but not yet copied into their groups' blocks.

One :meth:`HierIndex.assign` call files each row under a slot inside the compiled loop;
copying rows into a group's block (ids list, row map, vectors, ``loc``) is Python work per
group and per copy. Done per chunk it costs about one block copy per row once there are as
many groups as rows in a chunk, so the copies wait here until something reads the group's
members (a split, a removal, a degenerate centroid) or the call ends, and each group's rows
then go in as one block, in the order they joined: the blocks end up exactly as filing them
chunk by chunk would leave them.

Pending rows of a slot form a chain in ``link`` (each row points to the previous row of its
slot, ``head`` holds the last), which the compiled loop extends when a row joins; sums,
sizes (``sizes``, by slot) and ``seq`` are kept current, so only the blocks and ``loc`` lag.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from magnetic_core._index import kernels

if TYPE_CHECKING:
    from magnetic_core._index.group import Group
    from magnetic_core._index.index import HierIndex

__all__ = ["Filing"]


class Filing:
    """The pending rows of one assignment call (``ids``/``x`` are the call's whole input)."""

    def __init__(self, index: HierIndex, ids: Sequence[str], x: np.ndarray) -> None:
        self.index, self.ids, self.x = index, ids, x
        self.link = np.full(len(ids), -1, np.int64)
        size = max(64, index._centroids.shape[0])
        self.head = np.full(size, -1, np.int64)
        self.sizes = np.zeros(size, np.int64)
        # All new and distinct (the usual bulk load): no row of the call is stored, or
        # comes again, so no chunk needs to look its ids up (against every stored id).
        self.all_new = index.seq.keys().isdisjoint(ids) and len(set(ids)) == len(ids)
        self.resync()

    def resync(self) -> None:
        """Sizes from the groups themselves (nothing pending: after a rebalance)."""
        groups = self.index.slot_groups
        self.sizes[: len(groups)] = [g.n for g in groups]

    def reserve(self, slots: int) -> None:
        """Room for ``slots`` slots (arrays replaced: take them again after this)."""
        size = self.head.shape[0]
        if slots <= size:
            return
        while size < slots:
            size *= 2
        head = np.full(size, -1, np.int64)
        head[: self.head.shape[0]] = self.head
        sizes = np.zeros(size, np.int64)
        sizes[: self.sizes.shape[0]] = self.sizes
        self.head, self.sizes = head, sizes

    def moved_slot(self, last: int, slot: int) -> None:
        """The group in ``last`` now sits in ``slot`` (the one there was dropped, empty)."""
        self.head[slot] = self.head[last]
        self.head[last] = -1
        self.sizes[slot] = self.sizes[last]

    def flush(self, slot: int) -> None:
        """Copy the pending rows of ``slot`` into its group."""
        if self.head[slot] >= 0:
            self._put(self.index.slot_groups[slot], kernels.chain(self.head, self.link, slot))

    def flush_all(self) -> None:
        """Copy every pending row into its group (one block per group)."""
        groups = self.index.slot_groups
        rows, bounds = kernels.chains(self.head, self.link, len(groups))
        for slot in np.flatnonzero(bounds[1:] > bounds[:-1]).tolist():
            self._put(groups[slot], rows[bounds[slot] : bounds[slot + 1]])

    def _put(self, group: Group, rows: np.ndarray) -> None:
        ids = self.ids
        cids = [ids[r] for r in rows.tolist()]
        group.put(cids, self.x, rows)
        self.index.loc.update(dict.fromkeys(cids, group))
