"""The scorer's building blocks: tight sub-lists of a group, the residual basis, int8 codes.

Pure functions of arrays (no state): :mod:`magnetic_core._search.scorer` owns what they
build.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["SubLists", "principal_basis", "quantize", "ranges", "split_lists"]


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
class SubLists:
    """One group's sub-lists: member rows in list order, list lengths and list means."""

    order: np.ndarray  # (n,) int64: group rows, sub-list by sub-list
    lengths: np.ndarray  # (s,) int64: cells per sub-list
    means: np.ndarray  # (s, d) float32 unnormalised means

    def residuals(self, vecs: np.ndarray, step: int = 1) -> np.ndarray:
        """Every ``step``-th member (in list order) minus its list's mean."""
        owner = np.repeat(np.arange(self.lengths.shape[0]), self.lengths)[::step]
        return vecs[self.order[::step]] - self.means[owner]


def split_lists(vecs: np.ndarray, list_size: int, iters: int = 4) -> SubLists:
    """Split one group's (n, d) unit vectors into about ``n / list_size`` tight sub-lists.

    Spherical k-means seeded with evenly spaced members (deterministic); lists left empty
    are dropped. The result orders the rows list by list.
    """
    n = vecs.shape[0]
    s = max(1, math.ceil(n / list_size))
    if s == 1:
        return SubLists(
            np.arange(n),
            np.array([n], np.int64),
            vecs.mean(axis=0, keepdims=True, dtype=np.float64).astype(np.float32),
        )
    from magnetic_core._search.fit_kernels import list_means, spherical_kmeans  # numba

    vecs = np.ascontiguousarray(vecs, np.float32)
    centres = np.ascontiguousarray(vecs[np.linspace(0, n - 1, s).astype(np.int64)])
    owner = spherical_kmeans(vecs, centres, iters)
    # The rows list by list and each list's mean (float64 sums, in row order), compiled.
    order, lengths, means = list_means(vecs, owner, s)
    return SubLists(order, lengths, means)


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


def quantize(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes of float rows with one scale per row: ``rows ~ codes * scale[:, None]``.

    The scale maps each row's largest magnitude to 127, so the error of a component is at
    most half a step (``scale / 2``); an all-zero row gets scale 0 and zero codes.

    >>> codes, scale = quantize(np.array([[0.5, -1.0, 0.25]], np.float32))
    >>> codes.tolist(), round(float(scale[0]) * 127, 6)
    ([[64, -127, 32]], 1.0)
    """
    rows = np.asarray(rows, np.float32)
    top = np.abs(rows).max(axis=1) if rows.shape[1] else np.zeros(rows.shape[0], np.float32)
    scale = (top / 127.0).astype(np.float32)
    safe = np.where(scale > 0, scale, 1.0).astype(np.float32)
    codes = np.rint(rows / safe[:, None]).clip(-127, 127).astype(np.int8)
    return codes, scale
