"""Low-rank sketches of the stored vectors: a cheap first-pass score before exact re-ranking.

Scoring a probed group costs memory bandwidth: every cell's full float32 vector is read.
Projecting the vectors on the top ``rank`` principal directions of the data (uncentred, so
inner products are what is approximated) cuts that traffic by ``dim / rank``; the best
candidates by sketch score are then scored exactly, and the final ranking uses exact cosines
only. Sketches are caches: each group's is recomputed lazily when the group changed, and the
basis is refitted each time the store has grown fourfold since the last fit.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from magnetic_core._index.index import Group, HierIndex

__all__ = ["Sketcher", "principal_basis"]

# Basis versions are unique across Sketcher instances, so a group's cached sketch can never
# be mistaken for one made with another basis.
_EPOCHS = itertools.count(1)


def principal_basis(sample: np.ndarray, rank: int) -> tuple[np.ndarray, float]:
    """The top ``rank`` directions of the uncentred second moment of ``sample`` (rows).

    Returns:
        ``(basis, energy)``: a (d, rank) float32 basis and the share of the second moment
        it holds.
    """
    sample = sample.astype(np.float64)
    values, vectors = np.linalg.eigh(sample.T @ sample)
    energy = float(values[::-1][:rank].sum() / max(values.sum(), 1e-12))
    return np.ascontiguousarray(vectors[:, ::-1][:, :rank], dtype=np.float32), energy


class Sketcher:
    """Owns the projection basis and the sketch caches of one index.

    Args:
        rank: sketch dimension (0 disables sketches).
        min_cells: no sketches for stores smaller than this (exact scoring is cheap there).
        sample: at most this many cells are used to fit the basis.
        min_energy: share of the data's second moment the basis must capture; below it the
            sketch ranks too poorly to pre-select from (data spread evenly over all
            directions), and probed cells are scored exactly instead.
    """

    def __init__(
        self, rank: int, min_cells: int = 4096, sample: int = 16384, min_energy: float = 0.75
    ) -> None:
        self.rank = rank
        self.min_cells = min_cells
        self.sample = sample
        self.min_energy = min_energy
        self.energy = 0.0
        self.basis: np.ndarray | None = None
        self.epoch = 0
        self._fitted_n = 0
        self._centroids: tuple[int, int, np.ndarray] | None = None

    def ready(self, index: HierIndex) -> bool:
        """Whether sketches are usable for ``index`` (fitting or refitting the basis if due)."""
        if self.rank <= 0 or self.rank >= index.dim or len(index) < self.min_cells:
            return False
        if self.basis is None or len(index) >= 4 * self._fitted_n:
            self._fit(index)
        return self.energy >= self.min_energy

    def _fit(self, index: HierIndex) -> None:
        n = len(index)
        step = max(1, n // self.sample)
        parts = [g.view[::step] for g in index.slot_groups if g.n]
        self.basis, self.energy = principal_basis(np.concatenate(parts), self.rank)
        self._fitted_n = n
        self.epoch = next(_EPOCHS)
        self._centroids = None

    def project(self, q: np.ndarray) -> np.ndarray:
        """The query in sketch space."""
        if self.basis is None:
            raise RuntimeError("Sketcher.project called before the basis was fitted")
        return q @ self.basis

    def of_group(self, group: Group) -> np.ndarray:
        """The (n, rank) sketch of a group's cells (recomputed when the group changed)."""
        cached = group.sketch
        if cached is not None and cached[0] == group.version and cached[1] == self.epoch:
            return cached[2]
        sk = group.view @ self.basis
        group.sketch = (group.version, self.epoch, sk)
        return sk

    def of_centroids(self, index: HierIndex) -> np.ndarray:
        """The (G, rank) sketch of the centroid matrix (recomputed when any centroid moved)."""
        cached = self._centroids
        if cached is not None and cached[0] == index.centroid_epoch and cached[1] == self.epoch:
            return cached[2]
        sk = index.centroids @ self.basis
        self._centroids = (index.centroid_epoch, self.epoch, sk)
        return sk
