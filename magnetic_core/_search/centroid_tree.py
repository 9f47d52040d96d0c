"""An index over the centroids of large stores: clusters of centroids, read best first.

At a million cells there are seven to nine thousand groups, and scoring every centroid's
int8 code (0.25 ms) and choosing among all of them (0.08 ms) was most of what a query cost
beyond a small store's. The centroids are clustered once (spherical k-means, eight
clusters per square root of the number of groups, about ten centroids each); a query
scores the clusters' means, takes clusters best first until they hold ``SPREAD`` times the
groups it wants, and scores and chooses among those centroids only
(:func:`~magnetic_core._search.kernels.tree_groups`). Groups that a full scan would choose
can be missed when their cluster ranks low; they are the last of the chosen (the groups
nearest the query sit in the clusters nearest it), which hold few of the nearest cells.

The tree is kept with the scorer's centroid codes: a centroid that changed, or a new
group, goes to the cluster whose mean is nearest; the clusters are fitted again each time
the number of groups has grown ``REFIT_GROWTH``-fold since they were fitted. A snapshot
keeps the clusters' means, and a restored store files its groups to them again. Below
``TREE_FROM`` groups there is no tree: every centroid is scored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from magnetic_core._search.sublists import quantize

__all__ = ["REFIT_GROWTH", "SPREAD", "TREE_FROM", "CentroidTree", "kept_tree"]

# Groups from which the centroid stage goes through the tree. A query reads SPREAD times
# the groups it wants (twice its budget's worth: about 370 at the default budget and
# groups of 140 cells) and scores every centroid when that is half of them or more, so a
# tree would be read whole below about 3,000 groups (400K cells; 250K cells form 2,576).
TREE_FROM = 4096
# Centroids read per group the query wants, and clusters per square root of the number of
# groups. Smaller clusters rank the centroids more finely, so fewer of them need reading:
# on session 28's 1M synthetic sets (7,068 and 7,269 groups, 368 wanted; 300 queries, one
# process, settings alternated), recall@10 against scoring every centroid (0.9593, 0.9597;
# 0.61 ms): 2 clusters per root reading 6x (2,377 rows of codes) 0.9477 / 0.9540, 8 per root
# reading 4x (2,145 rows) 0.9543 / 0.9573, 3x 0.9540 / 0.9563, 16 per root 3x 0.9557 /
# 0.9593; p50 within noise of each other (0.51-0.55 ms). Finer clusters cost their fit: 0.28
# s at 7K groups with 2 per root, 0.79 s with 8, 1.45 s with 16 (once per REFIT_GROWTH).
# (Session 17, 2 per root, on the earlier 9,002-group set: 3x 0.9597, 4x 0.9643, 6x 0.967,
# every centroid 0.9677.)
SPREAD = 4
CLUSTERS_PER_ROOT = 8.0
# Fit the clusters again once the groups have grown this many times since the last fit.
REFIT_GROWTH = 1.5
# Rounds of k-means when fitting.
ITERATIONS = 6


@dataclass(frozen=True)
class CentroidTree:
    """Clusters of centroids, for the centroid stage of large stores.

    Attributes:
        means: (C, d) unit mean of each cluster's centroids.
        code: int8 codes of ``means`` (one scale a row), which queries read.
        scale: the codes' scales.
        owner: the cluster of each slot.
        start: (C + 1,) where each cluster's slots begin in ``members``.
        members: every slot, cluster by cluster (in slot order within a cluster).
        rows: the centroid codes of ``members``, in that order: a query reads each cluster
            it takes as one run of memory (gathered slot by slot, the same rows took
            twice as long).
        row_scale: their scales.
        at: the place of each slot in ``members``.
        fitted: groups when the clusters were fitted.
    """

    means: np.ndarray
    code: np.ndarray
    scale: np.ndarray
    owner: np.ndarray
    start: np.ndarray
    members: np.ndarray
    rows: np.ndarray
    row_scale: np.ndarray
    at: np.ndarray
    fitted: int

    @classmethod
    def fit(cls, centroids: np.ndarray, codes: np.ndarray, scales: np.ndarray) -> CentroidTree:
        """Cluster ``centroids`` (one row per slot; ``codes``, ``scales``: their int8
        codes) by spherical k-means, seeded with evenly spaced rows (deterministic), and
        file each to the nearest of the clusters' means."""
        from magnetic_core._search.fit_kernels import spherical_kmeans  # numba: when needed

        g = centroids.shape[0]
        c = max(1, min(g, math.ceil(CLUSTERS_PER_ROOT * math.sqrt(g))))
        rows = np.ascontiguousarray(centroids, np.float32)
        seeds = np.ascontiguousarray(rows[np.linspace(0, g - 1, c).astype(np.int64)])
        owner = spherical_kmeans(rows, seeds, ITERATIONS)
        sums = np.zeros((c, rows.shape[1]), np.float64)
        np.add.at(sums, owner, rows)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        # (an empty cluster keeps a zero mean, which no query ranks above a held one)
        means = (sums / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        code, scale = quantize(means)
        # Each group goes to its nearest mean, as a restored tree files them (the same
        # product, so a reopened store probes the same groups).
        nearest = np.argmax(rows @ means.T, axis=1).astype(np.int64)
        return cls._filed(means, code, scale, nearest, codes, scales, g)

    @classmethod
    def _filed(
        cls,
        means: np.ndarray,
        code: np.ndarray,
        scale: np.ndarray,
        owner: np.ndarray,
        codes: np.ndarray,
        scales: np.ndarray,
        fitted: int,
    ) -> CentroidTree:
        """The tree with these clusters and owners, its rows copied from ``codes``."""
        c = means.shape[0]
        members = np.argsort(owner, kind="stable")
        start = np.zeros(c + 1, np.int64)
        np.cumsum(np.bincount(owner, minlength=c), out=start[1:])
        at = np.empty_like(members)
        at[members] = np.arange(members.shape[0])
        rows, row_scale = np.ascontiguousarray(codes[members]), scales[members]
        return cls(means, code, scale, owner, start, members, rows, row_scale, at, fitted)

    def export_arrays(self) -> dict[str, np.ndarray]:
        """What a snapshot keeps of the tree: its clusters' means and when they were fitted
        (groups are filed to them again on restore)."""
        return {"tree_means": self.means, "tree_fitted": np.array([self.fitted], np.int64)}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> CentroidTree | None:
        """A tree holding the clusters :meth:`export_arrays` saved and no slot yet (the
        first :func:`kept_tree` files every slot to the nearest mean); None when the
        snapshot has none."""
        if "tree_means" not in arrays:
            return None
        means = np.ascontiguousarray(arrays["tree_means"], np.float32)
        code, scale = quantize(means)
        empty = np.empty(0, np.int64)
        start = np.zeros(means.shape[0] + 1, np.int64)
        rows = np.empty((0, means.shape[1]), np.int8)
        fitted = int(arrays["tree_fitted"][0])
        return cls(
            means, code, scale, empty, start, empty, rows, np.empty(0, np.float32), empty, fitted
        )

    def moved(
        self, centroids: np.ndarray, codes: np.ndarray, scales: np.ndarray, slots: np.ndarray
    ) -> CentroidTree:
        """The tree after the centroids of ``slots`` changed (``codes``, ``scales``: every
        slot's codes now) and the number of slots became ``len(centroids)``: those slots,
        and slots new since, go to the cluster with the nearest mean; the means stay as
        fitted. When no slot changes cluster, the rows of ``slots`` are rewritten in place
        (as the centroid codes themselves are) and the same tree is returned."""
        g = centroids.shape[0]
        owner = np.full(g, -1, np.int64)
        keep = min(g, self.owner.shape[0])
        owner[:keep] = self.owner[:keep]
        slots = np.asarray(slots, np.int64)
        again = np.union1d(slots[slots < g], np.arange(keep, g))
        if again.size:
            owner[again] = np.argmax(centroids[again] @ self.means.T, axis=1)
        if g == self.owner.shape[0] and np.array_equal(owner, self.owner):
            at = self.at[again]
            self.rows[at], self.row_scale[at] = codes[again], scales[again]
            return self
        return self._filed(self.means, self.code, self.scale, owner, codes, scales, self.fitted)


def kept_tree(
    tree: CentroidTree | None,
    centroids: np.ndarray,
    codes: np.ndarray,
    scales: np.ndarray,
    slots: np.ndarray,
) -> CentroidTree | None:
    """The tree for the store's ``centroids`` (one per slot; ``codes``, ``scales``: their
    int8 codes) after those of ``slots`` changed: none below ``TREE_FROM`` groups, fitted
    anew when there was none or the groups have grown ``REFIT_GROWTH``-fold since, else
    ``tree`` with the changed slots filed again."""
    g = centroids.shape[0]
    if g < TREE_FROM:
        return None
    if tree is None or g >= REFIT_GROWTH * tree.fitted:
        return CentroidTree.fit(centroids, codes, scales)
    return tree.moved(centroids, codes, scales, slots)
