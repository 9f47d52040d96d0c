"""A read-optimised snapshot of the hierarchy: tight sub-lists per group and residual sketches.

Groups are concepts, and a concept can be broad: at 100K Reuters passages a group holds about
a hundred cells, and the nearest neighbours of a query are spread over many groups. Scoring
whole groups wastes most of the work on cells far from the query. The snapshot splits each
group's cells into a few tight *sub-lists* (k-means inside the group, about ``list_size``
cells each) and packs every cell's *residual sketch* (its vector minus its sub-list's mean,
projected on the top principal directions of those residuals) in one contiguous block, in
group then sub-list order.

A query then ranks the sub-lists of the probed groups by their mean, and scores the cells of
the best sub-lists approximately as ``q . mean + sketch . (q P)`` with one gather and one
product; the best ``keep`` of those are scored exactly from the groups' own blocks. Residuals
are smaller than the vectors, so the sketch's error is too.

The snapshot is a cache of the index at one ``centroid_epoch``. Writes do not wait for it:
after a write, the groups that changed (or appeared) are *dirty* and search scores them
directly from their own blocks, while every clean group is still served by the snapshot.
The snapshot is rebuilt when a sizeable share of the groups is dirty; sub-lists and sketches
are cached per group, so a rebuild recomputes only the dirty groups and re-packs the rest.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from magnetic_core._search.sketch import principal_basis

if TYPE_CHECKING:
    from magnetic_core._index.index import Group, HierIndex

__all__ = ["Snapshot", "SnapshotCache", "ranges"]


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(s, s + n)`` for each start and length (vectorised).

    >>> ranges(np.array([10, 3]), np.array([2, 3])).tolist()
    [10, 11, 3, 4, 5]
    """
    lengths = lengths.astype(np.int64, copy=False)
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts.astype(np.int64, copy=False) - offsets, lengths) + np.arange(total)


@dataclass(frozen=True)
class _Lists:
    """One group's sub-lists: member rows in list order, list bounds and list means."""

    version: int
    order: np.ndarray  # group rows, sub-list by sub-list
    lengths: np.ndarray  # cells per sub-list
    means: np.ndarray  # (s, d) float32 unnormalised means

    def residuals(self, vecs: np.ndarray, step: int = 1) -> np.ndarray:
        """Every ``step``-th member (in list order) minus its list's mean."""
        owner = np.repeat(np.arange(self.lengths.shape[0]), self.lengths)[::step]
        return vecs[self.order[::step]] - self.means[owner]


@dataclass(frozen=True)
class Snapshot:
    """Every group's sub-lists and residual sketches at one ``centroid_epoch``.

    Lists are in slot order: the lists of the group in slot ``s`` are
    ``first_list[s]:first_list[s + 1]``; the packed rows of list ``j`` are
    ``list_start[j]:list_start[j] + list_len[j]``.
    """

    epoch: int
    basis: np.ndarray  # (d, r) projection of residuals
    first_list: np.ndarray  # (G + 1,) int64
    list_start: np.ndarray  # (L,) int64
    list_len: np.ndarray  # (L,) int64
    means: np.ndarray  # (L, d) float32
    inv_norms: np.ndarray  # (L,) float32: 1 / |mean|, to rank lists by cosine
    sketches: np.ndarray  # (N, r) float32 residual sketches, in list order
    position: np.ndarray  # (N,) int64: each sketch row's cell in ``vectors`` / ``ids``
    vectors: np.ndarray  # (N, d) every cell's unit vector, group by group (group row order)
    ids: list[str]  # cell ids in the order of ``vectors``
    slot_of: dict[str, tuple[int, Group, int]]  # gid -> (slot at build, group, its version)
    usable: bool  # the basis holds enough of the residuals' energy to pre-score by sketch

    @property
    def n_lists(self) -> int:
        return int(self.list_len.shape[0])


class SnapshotCache:
    """Builds and keeps the :class:`Snapshot` of one index.

    Args:
        rank: sketch dimension.
        list_size: target cells per sub-list.
        sample: at most this many residuals are used to fit the sketch basis.
        min_energy: share of the residuals' second moment the basis must hold for the
            snapshot to be used (below it, e.g. for data spread evenly over all directions,
            sketches rank too poorly and search scores the probed groups exactly).
    """

    def __init__(
        self,
        rank: int,
        list_size: int = 32,
        sample: int = 16384,
        rebuild_share: float = 0.1,
        min_energy: float = 0.6,
    ) -> None:
        self.rank = rank
        self.min_energy = min_energy
        self.energy = 0.0
        self.list_size = list_size
        self.sample = sample
        self.rebuild_share = rebuild_share
        self.snapshot: Snapshot | None = None
        self._lists: dict[str, tuple[Group, _Lists]] = {}
        self._sketches: dict[str, tuple[_Lists, np.ndarray]] = {}  # by the lists they sketch
        self._basis: np.ndarray | None = None
        self._fitted_n = 0
        self._wanted = -1
        self._dirty: tuple[int, frozenset[str]] = (-1, frozenset())
        # Searches run concurrently under the store's read lock: one builds, others wait.
        self._lock = threading.Lock()

    def get(self, index: HierIndex) -> tuple[Snapshot, frozenset[str]] | None:
        """The snapshot and the gids of the groups it does not describe (dirty), or None.

        The first snapshot is built on the second request (a store being filled with
        searches in between does not build one per batch); afterwards it is rebuilt when
        more than ``rebuild_share`` of the groups are dirty.
        """
        epoch = index.centroid_epoch
        snap = self.snapshot
        if snap is not None and snap.epoch == epoch:
            return snap, frozenset()
        if snap is None:
            if self._wanted != epoch:
                self._wanted = epoch
                return None
            return self._rebuild(index), frozenset()
        dirty_epoch, dirty = self._dirty
        if dirty_epoch != epoch:
            dirty = self._find_dirty(snap, index)
            self._dirty = (epoch, dirty)
        if len(dirty) > self.rebuild_share * len(index.slot_groups):
            return self._rebuild(index), frozenset()
        return snap, dirty

    def _rebuild(self, index: HierIndex) -> Snapshot:
        with self._lock:
            snap = self.snapshot
            if snap is None or snap.epoch != index.centroid_epoch:
                snap = self.snapshot = self._build(index)
            return snap

    @staticmethod
    def _find_dirty(snap: Snapshot, index: HierIndex) -> frozenset[str]:
        """Groups that changed, appeared or moved slot since ``snap`` was built.

        A group emptied since the build is dropped and the last slot's group takes its
        slot: that group is dirty too, since search reads clean groups' sub-lists by slot.
        """
        slot_of = snap.slot_of
        dirty = []
        for slot, group in enumerate(index.slot_groups):
            known = slot_of.get(group.gid)
            if (
                known is None
                or known[0] != slot
                or known[1] is not group
                or known[2] != group.version
            ):
                dirty.append(group.gid)
        return frozenset(dirty)

    # -- building ------------------------------------------------------------------------
    def _build(self, index: HierIndex) -> Snapshot:
        groups = index.slot_groups
        live = {g.gid for g in groups}
        for gid in [g for g in self._lists if g not in live]:
            del self._lists[gid]
            self._sketches.pop(gid, None)
        lists = [self._group_lists(g) for g in groups]
        n = len(index)
        if self._basis is None or n >= 4 * self._fitted_n:
            self._fit_basis(groups, lists, n)
        basis = self._basis
        assert basis is not None
        usable = self.energy >= self.min_energy
        sketches = (
            [self._group_sketch(g, lst, basis) for g, lst in zip(groups, lists, strict=True)]
            if usable
            else []
        )
        counts = np.array([lst.lengths.shape[0] for lst in lists], np.int64)
        first_list = np.zeros(len(groups) + 1, np.int64)
        np.cumsum(counts, out=first_list[1:])
        list_len = (
            np.concatenate([lst.lengths for lst in lists]) if lists else np.empty(0, np.int64)
        )
        list_start = np.cumsum(list_len) - list_len
        means = (
            np.concatenate([lst.means for lst in lists])
            if lists
            else np.empty((0, index.dim), np.float32)
        )
        norms = np.sqrt(np.einsum("ij,ij->i", means, means))
        sizes = np.array([g.n for g in groups], np.int64)
        group_start = np.cumsum(sizes) - sizes
        vectors = (
            np.concatenate([g.view for g in groups])
            if groups
            else np.empty((0, index.dim), np.float32)
        )
        # Each group's block becomes its slice of the packed matrix, so the snapshot costs
        # no second copy of the vectors. A group that grows later copies itself out
        # (Group.append reallocates a full block); one that shrinks rewrites its own rows,
        # but it is dirty from then on and its packed rows are never read again.
        for group, start in zip(groups, group_start.tolist(), strict=True):
            group.vecs = vectors[start : start + group.n]
        return Snapshot(
            epoch=index.centroid_epoch,
            basis=basis,
            first_list=first_list,
            list_start=list_start,
            list_len=list_len,
            means=means,
            inv_norms=(1.0 / np.maximum(norms, 1e-12)).astype(np.float32),
            sketches=np.concatenate(sketches) if sketches else np.empty((0, self.rank), np.float32),
            position=np.repeat(group_start, sizes)
            + (np.concatenate([lst.order for lst in lists]) if lists else np.empty(0, np.int64)),
            vectors=vectors,
            ids=[cid for g in groups for cid in g.ids],
            slot_of={g.gid: (slot, g, g.version) for slot, g in enumerate(groups)},
            usable=usable,
        )

    def _group_lists(self, group: Group) -> _Lists:
        cached = self._lists.get(group.gid)
        if cached is not None and cached[0] is group and cached[1].version == group.version:
            return cached[1]
        lists = split_lists(group.view, self.list_size, group.version)
        self._lists[group.gid] = (group, lists)
        return lists

    def _fit_basis(self, groups: list[Group], lists: list[_Lists], n: int) -> None:
        """Uncentred PCA of a strided sample of residuals (vector minus its list's mean)."""
        step = max(1, n // self.sample)
        parts = [lst.residuals(g.view, step) for g, lst in zip(groups, lists, strict=True)]
        self._basis, self.energy = principal_basis(np.concatenate(parts), self.rank)
        self._fitted_n = n
        self._sketches.clear()

    def _group_sketch(self, group: Group, lst: _Lists, basis: np.ndarray) -> np.ndarray:
        cached = self._sketches.get(group.gid)
        if cached is not None and cached[0] is lst:
            return cached[1]
        sketch = np.ascontiguousarray(lst.residuals(group.view) @ basis)
        self._sketches[group.gid] = (lst, sketch)
        return sketch


def split_lists(vecs: np.ndarray, list_size: int, version: int = 0, iters: int = 4) -> _Lists:
    """Split one group's (n, d) unit vectors into about ``n / list_size`` tight sub-lists.

    Spherical k-means seeded with evenly spaced members (deterministic); lists left empty
    are dropped. The result orders the rows list by list.
    """
    n = vecs.shape[0]
    s = max(1, math.ceil(n / list_size))
    if s == 1:
        return _Lists(
            version,
            np.arange(n),
            np.array([n], np.int64),
            vecs.mean(axis=0, keepdims=True, dtype=np.float64).astype(np.float32),
        )
    centres = vecs[np.linspace(0, n - 1, s).astype(np.int64)]
    labels = np.arange(s)
    for _ in range(iters):
        owner = (vecs @ centres.T).argmax(axis=1)
        sums = (owner[:, None] == labels).astype(np.float32).T @ vecs
        norms = np.sqrt(np.einsum("ij,ij->i", sums, sums))
        centres = np.where(
            (norms > 1e-12)[:, None], sums / np.maximum(norms, 1e-12)[:, None], centres
        ).astype(np.float32)
    owner = (vecs @ centres.T).argmax(axis=1)
    order = np.argsort(owner, kind="stable")
    counts = np.bincount(owner, minlength=s)
    used = counts > 0
    sums = (owner[:, None] == labels).astype(np.float32).T @ vecs
    means = (sums[used] / counts[used][:, None]).astype(np.float32)
    return _Lists(version, order, counts[used].astype(np.int64), means)
