"""A low-rank sketch of the centroids that bounds every centroid score of a chunk's rows.

With thousands of groups the (B, G) product of a chunk with every centroid is most of
the work of assignment (N x G x d over a bulk load). The sketch projects rows and
centroids on an orthonormal basis ``Q`` of rank ``r`` (the centroids' mean direction and
their leading principal directions) and keeps each centroid's residual norm. For a row
``x`` and a centroid ``c``, ``x.c = (Q'x).(Q'c) + x.(I - QQ')c`` and the second term is at
most ``|x_res| |c_res|`` (Cauchy-Schwarz; the residuals are the parts outside the basis),
so ``(Q'x).(Q'c) +- |x_res| |c_res|`` brackets the score, rigorously, whatever the basis.

:func:`kernels.bound_rows` then scores exactly the centroid with the row's best sketch
score, and after it only the centroids whose upper bound reaches that exact score (a
lower bound of the row's best, far tighter than the sketch's own); every other entry of
the chunk's score matrix holds its upper bound, flagged, and the compiled loop resolves a
flagged entry exactly before it could decide anything (:mod:`magnetic_core._index.kernels`).
Decisions are therefore those of the full product; only the work changes (about r/d of
the product plus the few exact scores). ``MARGIN`` covers the float32 rounding of the sketch
(products, a basis orthonormal to ~1e-7) and of the bounds' incremental updates.

The basis is refitted when the group count has doubled since the last fit (any basis is
correct; a fitted one is tight); the projected centroids are recomputed for each
assignment call and kept current, slot by slot, as the call rewrites centroid rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from magnetic_core._index.index import HierIndex

__all__ = ["MARGIN", "Sketch", "for_chunk"]

MARGIN = 1e-3
# The sketch's rank in twelfths of the dimension: 160 of 384. At 9K groups (1M structured
# synthetic rows), with each row floored by the exact score of its best sketch score, a
# chunk of 256 rows took 6.1 ms for the sketch product, its bounds and the exact scores (8
# a row), against 6.3 ms at rank 128 (27 a row) and 6.7 ms at 192 (4 a row); floored by
# the sketch's own lower bounds (session 18), rank 192 took 8.0 ms (13 a row).
RANK_TWELFTHS = 5
# Residual norms are square roots of differences of squares, off by ~1e-7 in the square:
# this floor in the square keeps the bound above the true residual.
_SQ_FLOOR = 4e-6


def residual_norms(rows: np.ndarray, projected: np.ndarray) -> np.ndarray:
    """Upper bounds (float64) on the norms of the rows' parts outside the basis."""
    full = np.einsum("ij,ij->i", rows, rows, dtype=np.float64)
    inside = np.einsum("ij,ij->i", projected, projected, dtype=np.float64)
    return np.sqrt(np.maximum(full - inside, 0.0) + _SQ_FLOOR)


class Sketch:
    """The basis, and the projection and residual bound (float32) of each centroid slot."""

    def __init__(self, centroids: np.ndarray, rank: int) -> None:
        self.basis = _fit_basis(centroids, rank)
        self.fitted_groups = centroids.shape[0]
        self.proj = np.zeros((0, rank), np.float32)
        self.res = np.zeros(0, np.float32)

    @property
    def rank(self) -> int:
        return int(self.basis.shape[1])

    def project_all(self, centroids: np.ndarray, capacity: int) -> None:
        """Project every live centroid row (``capacity`` rows of room)."""
        self.proj = np.zeros((capacity, self.rank), np.float32)
        self.res = np.ones(capacity, np.float32)
        self.update(centroids, np.arange(centroids.shape[0]))

    def reserve(self, capacity: int) -> None:
        if capacity <= self.proj.shape[0]:
            return
        proj = np.zeros((capacity, self.rank), np.float32)
        proj[: self.proj.shape[0]] = self.proj
        res = np.ones(capacity, np.float32)
        res[: self.res.shape[0]] = self.res
        self.proj, self.res = proj, res

    def update(
        self, centroids: np.ndarray, slots: np.ndarray | list[int], rows: np.ndarray | None = None
    ) -> None:
        """Re-project the given slots' rows of the (full) centroid matrix (``rows``: those
        rows, when the caller has them)."""
        if rows is None:
            rows = centroids[slots]
        projected = rows @ self.basis
        self.proj[slots] = projected
        self.res[slots] = residual_norms(rows, projected)

    def move(self, last: int, slot: int) -> None:
        self.proj[slot] = self.proj[last]
        self.res[slot] = self.res[last]


def for_chunk(index: HierIndex, call_rows: int) -> Sketch | None:
    """The index's sketch, current, when it pays for a chunk of a call of ``call_rows``.

    It pays from ``index.sketch_from`` groups on, in dimensions where ``RANK_TWELFTHS``/12 of
    them leave room to prune, and in calls long enough to repay projecting every centroid
    (``G d r`` against ``G (d - r)`` saved per row).
    """
    g, dim = len(index.slot_groups), index.dim
    rank = RANK_TWELFTHS * dim // 12
    if index.sketch_from <= 0 or g < max(index.sketch_from, dim) or rank < 2:
        return None
    if call_rows < 4 * rank:
        return None
    sketch = index._sketch
    if sketch is None or g >= 2 * sketch.fitted_groups:
        sketch = index._sketch = Sketch(index.centroids, rank)
        index._sketch_live = False
    if not index._sketch_live:
        sketch.project_all(index.centroids, index._centroids.shape[0])
        index._sketch_live = True
    return sketch


def _fit_basis(centroids: np.ndarray, rank: int) -> np.ndarray:
    """An orthonormal (d, rank) float32 basis: the mean direction, then principal ones."""
    c = centroids.astype(np.float64)
    mean = c.mean(axis=0)
    _, _, vt = np.linalg.svd(c - mean, full_matrices=False)
    norm = float(np.linalg.norm(mean))
    lead = [mean / norm] if norm > 1e-6 else []
    stack = np.vstack([*lead, vt[: rank - len(lead)]]) if lead else vt[:rank]
    q, _ = np.linalg.qr(stack.T)
    return np.ascontiguousarray(q[:, :rank], dtype=np.float32)
