"""The in-memory vector hierarchy: groups as contiguous float32 blocks, centroids in one matrix.

Each group keeps its cells' unit vectors in one growable float32 block (IVF-style list), the
float64 sum of its members (so the centroid is an exact running mean) and a version counter.
Centroids live in one (G, d) matrix whose row ``slot`` belongs to ``slot_groups[slot]``;
removing a group moves the last row into its slot so the matrix stays dense.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from magnetic_core.clustering import normalize, two_means

__all__ = ["Group", "HierIndex"]


@dataclass(eq=False)
class Group:
    """One concept group: its cells' vectors and ids, and its centroid bookkeeping."""

    gid: str
    dim: int
    slot: int = -1
    n: int = 0
    vecs: np.ndarray = field(default_factory=lambda: np.empty((0, 0), np.float32))
    ids: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    total: np.ndarray = field(default_factory=lambda: np.empty(0))
    version: int = 0
    sketch: tuple[int, int, np.ndarray] | None = None

    def __post_init__(self) -> None:
        self.vecs = np.empty((8, self.dim), np.float32)
        self.total = np.zeros(self.dim, np.float64)

    @property
    def view(self) -> np.ndarray:
        """The live (n, d) block of member vectors (a view, not a copy)."""
        return self.vecs[: self.n]

    def append(self, cid: str, vec: np.ndarray) -> None:
        if self.n == self.vecs.shape[0]:
            grown = np.empty((self.vecs.shape[0] * 2, self.dim), np.float32)
            grown[: self.n] = self.vecs[: self.n]
            self.vecs = grown
        self.vecs[self.n] = vec
        self.rows[cid] = self.n
        self.ids.append(cid)
        self.n += 1
        self.total += vec
        self.version += 1

    def pop(self, cid: str) -> np.ndarray:
        row = self.rows.pop(cid)
        vec = self.vecs[row].copy()
        last = self.n - 1
        if row != last:
            moved = self.ids[last]
            self.vecs[row] = self.vecs[last]
            self.ids[row] = moved
            self.rows[moved] = row
        self.ids.pop()
        self.n -= 1
        self.total -= vec
        if self.n and self.n % 64 == 0:
            # Re-sum now and then so float drift from many removals cannot accumulate.
            self.total = self.view.sum(axis=0, dtype=np.float64)
        self.version += 1
        return vec

    def centroid(self) -> np.ndarray:
        # Same value as np.linalg.norm (sqrt of the dot product), without its call overhead.
        norm = math.sqrt(float(self.total.dot(self.total)))
        if norm < 1e-12:
            return normalize(self.view.mean(axis=0, keepdims=True))[0]
        return (self.total / norm).astype(np.float32)


class HierIndex:
    """Groups over cells, with vectorised online assignment and bounded group size.

    Args:
        dim: vector dimension.
        max_group_size: a group that grows past this is split by 2-means.
    """

    def __init__(self, dim: int, max_group_size: int, rebalance_from: int = 0) -> None:
        self.dim = dim
        self.max_group_size = max_group_size
        # Online assignment files a cell under the best centroid *of its time*; centroids
        # drift and new groups appear, so older cells end up misfiled and routing degrades.
        # Each time the store reaches rebalance_from * 2**k cells (0: never), one Lloyd pass
        # refiles every cell under its most similar centroid.
        self.rebalance_from = rebalance_from
        self._next_rebalance = rebalance_from if rebalance_from > 0 else -1
        self.groups: dict[str, Group] = {}
        self.slot_groups: list[Group] = []
        self._centroids = np.empty((64, dim), np.float32)
        self.loc: dict[str, Group] = {}
        self.seq: dict[str, int] = {}
        self._next_gid = 0
        self._next_seq = 0
        self.moved: set[str] = set()
        self.centroid_epoch = 0
        # Search-side caches (a magnetic_core.sketch.Sketcher), owned by the search module.
        self.sketcher: Any = None
        self.sizes_cache: tuple[int, np.ndarray] | None = None

    # -- structure -------------------------------------------------------------------
    @property
    def centroids(self) -> np.ndarray:
        """The live (G, d) centroid matrix (a view)."""
        return self._centroids[: len(self.slot_groups)]

    def __len__(self) -> int:
        return len(self.loc)

    def vector(self, cid: str) -> np.ndarray:
        group = self.loc[cid]
        return group.vecs[group.rows[cid]]

    def new_gid(self) -> str:
        gid = f"g{self._next_gid}"
        self._next_gid += 1
        return gid

    def note_gid(self, gid: str) -> None:
        """Keep generated ids above an existing ``g<number>`` id (used when reopening)."""
        if gid.startswith("g") and gid[1:].isdigit():
            self._next_gid = max(self._next_gid, int(gid[1:]) + 1)

    def _add_group(self, gid: str | None = None) -> Group:
        group = Group(gid or self.new_gid(), self.dim)
        group.slot = len(self.slot_groups)
        if group.slot == self._centroids.shape[0]:
            grown = np.empty((self._centroids.shape[0] * 2, self.dim), np.float32)
            grown[: group.slot] = self._centroids[: group.slot]
            self._centroids = grown
        self.slot_groups.append(group)
        self.groups[group.gid] = group
        self.centroid_epoch += 1
        return group

    def _drop_group(self, group: Group) -> tuple[int, int] | None:
        """Remove an empty group; returns (from_slot, to_slot) when a row was moved."""
        slot, last = group.slot, len(self.slot_groups) - 1
        del self.groups[group.gid]
        moved = None
        if slot != last:
            tail = self.slot_groups[last]
            self.slot_groups[slot] = tail
            tail.slot = slot
            self._centroids[slot] = self._centroids[last]
            moved = (last, slot)
        self.slot_groups.pop()
        self.centroid_epoch += 1
        return moved

    def _refresh(self, group: Group) -> None:
        self._centroids[group.slot] = group.centroid()
        self.centroid_epoch += 1

    # -- single-cell operations ------------------------------------------------------
    def place(self, cid: str, vec: np.ndarray, gid: str, seq: int | None = None) -> None:
        """Put a cell in a named group (creating it); used when rebuilding from storage."""
        group = self.groups.get(gid) or self._add_group(gid)
        self.note_gid(gid)
        group.append(cid, vec)
        self.loc[cid] = group
        self.seq[cid] = self._take_seq(seq)

    def finish_placing(self) -> None:
        """Recompute every centroid (after a run of :meth:`place`)."""
        for group in self.slot_groups:
            group.total = group.view.sum(axis=0, dtype=np.float64)
            self._refresh(group)
        if self.rebalance_from > 0:
            # Resume the schedule where a store that grew to this size would be.
            self._next_rebalance = self.rebalance_from
            while self._next_rebalance <= len(self.loc):
                self._next_rebalance *= 2

    def rebalance(self) -> int:
        """One Lloyd pass: refile every cell under its most similar centroid.

        Groups left empty are dropped, groups grown past the cap are split, and every
        centroid is recomputed. Moved cells are noted for persistence.

        Returns:
            How many cells changed group.
        """
        groups = list(self.slot_groups)
        if len(groups) < 2:
            return 0
        centroids = self.centroids.copy()
        moves: list[tuple[str, Group, Group]] = []
        for group in groups:
            best = (group.view @ centroids.T).argmax(axis=1)
            for row in np.flatnonzero(best != group.slot).tolist():
                moves.append((group.ids[row], group, groups[int(best[row])]))
        for cid, src, dst in moves:
            dst.append(cid, src.pop(cid))
            self.loc[cid] = dst
            self.moved.add(cid)
        for group in groups:
            if group.n == 0:
                self._drop_group(group)
        for group in list(self.slot_groups):
            group.total = group.view.sum(axis=0, dtype=np.float64)
            self._refresh(group)
        pending = [g for g in self.slot_groups if g.n > self.max_group_size]
        while pending:
            group = pending.pop()
            new = self.split(group)
            pending += [g for g in (group, new) if g.n > self.max_group_size]
        return len(moves)

    def _take_seq(self, seq: int | None) -> int:
        if seq is None:
            seq = self._next_seq
        self._next_seq = max(self._next_seq, seq + 1)
        return seq

    def remove(self, cid: str) -> tuple[int, int] | None:
        """Remove a cell; returns the slot move if its group emptied and was dropped."""
        group = self.loc.pop(cid)
        self.seq.pop(cid, None)
        self.moved.discard(cid)
        group.pop(cid)
        if group.n == 0:
            return self._drop_group(group)
        self._refresh(group)
        return None

    # -- batch assignment ------------------------------------------------------------
    def assign(
        self, ids: Sequence[str], vectors: np.ndarray, threshold: float, chunk: int = 256
    ) -> None:
        """Insert (or move, for existing ids) unit vectors with online clustering.

        The result equals inserting them one at a time in order: each chunk's similarity to
        all centroids is one (B, G) product, and only the columns of groups that change
        while the chunk is processed are recomputed, as (B, d) matrix-vector products.
        """
        start = 0
        while start < len(ids):
            start += self._assign_chunk(
                ids[start : start + chunk], vectors[start : start + chunk], threshold
            )

    def _assign_chunk(self, ids: Sequence[str], x: np.ndarray, threshold: float) -> int:
        """Assign rows in order; returns how many (fewer than all after a rebalance)."""
        b = len(ids)
        g0 = len(self.slot_groups)
        sims = np.empty((b, g0 + 2 * b + 1), np.float32)
        if g0:
            sims[:, :g0] = x @ self.centroids.T

        def recompute(slot: int, after: int) -> None:
            if after < b:
                sims[after:, slot] = x[after:] @ self._centroids[slot]

        def move_column(moved: tuple[int, int] | None, after: int) -> None:
            if moved is not None and after < b:
                sims[after:, moved[1]] = sims[after:, moved[0]]

        for i in range(b):
            cid = ids[i]
            if cid in self.loc:
                old = self.loc[cid]
                moved = self.remove(cid)
                if moved is not None:
                    move_column(moved, i)
                elif old.gid in self.groups:
                    recompute(old.slot, i)
            g = len(self.slot_groups)
            best = int(sims[i, :g].argmax()) if g else -1
            if best >= 0 and sims[i, best] >= threshold:
                group = self.slot_groups[best]
            else:
                group = self._add_group()
            group.append(cid, x[i])
            self.loc[cid] = group
            self.seq[cid] = self._take_seq(None)
            self._refresh(group)
            recompute(group.slot, i + 1)
            if group.n > self.max_group_size:
                new = self.split(group)
                recompute(group.slot, i + 1)
                recompute(new.slot, i + 1)
            if len(self.loc) == self._next_rebalance:
                # Every centroid may move: the rest of the chunk starts afresh.
                self._next_rebalance *= 2
                self.rebalance()
                return i + 1
        return b

    def split(self, group: Group) -> Group:
        """Split a group in two by 2-means; returns the new group. Moved cells are noted."""
        mask = two_means(group.view.copy())
        ids = list(group.ids)
        vecs = group.view.copy()
        new = self._add_group()
        for cid, vec in zip(
            [c for c, m in zip(ids, mask, strict=True) if m], vecs[mask], strict=True
        ):
            group.pop(cid)
            new.append(cid, vec)
            self.loc[cid] = new
            self.moved.add(cid)
        group.total = group.view.sum(axis=0, dtype=np.float64)
        self._refresh(group)
        self._refresh(new)
        return new

    def merge(self, keep: Group, absorb: Group) -> list[str]:
        """Move every cell of ``absorb`` into ``keep``; returns the moved ids."""
        moved = list(absorb.ids)
        vecs = absorb.view.copy()
        for cid, vec in zip(moved, vecs, strict=True):
            keep.append(cid, vec)
            self.loc[cid] = keep
        absorb.ids.clear()
        absorb.rows.clear()
        absorb.n = 0
        self._drop_group(absorb)
        self._refresh(keep)
        self.moved.update(moved)
        return moved

    def regroup(self, threshold: float, chunk: int = 256) -> None:
        """Rebuild the whole hierarchy with a new threshold, in original insertion order."""
        order = sorted(self.loc, key=self.seq.__getitem__)
        vecs = np.stack([self.vector(c) for c in order]) if order else None
        seqs = [self.seq[c] for c in order]
        self.groups.clear()
        self.slot_groups.clear()
        self.loc.clear()
        self.seq.clear()
        self._next_gid = 0
        if vecs is None:
            return
        self.assign(order, vecs, threshold, chunk)
        for cid, s in zip(order, seqs, strict=True):
            self.seq[cid] = s
        self.moved.update(order)

    def take_moved(self) -> set[str]:
        """Ids whose group changed since the last call (to persist), then forget them."""
        moved, self.moved = self.moved, set()
        return moved

    def members(self, gids: Iterable[str]) -> list[str]:
        return [cid for gid in gids for cid in self.groups[gid].ids]
