"""Compiled kernels that build the scorer (numba): sub-list k-means and residual codes.

They run at coding time (after a write, a few groups per search; every group at a
rebuild), on the calling thread: BLAS's thread start-up costs more than these small
products. Cached on disk like :mod:`magnetic_core._search.kernels`; each has a plain numpy
twin in ``tests/core/_search/test_fit_kernels.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from magnetic_core._search.kernels import _FAST

__all__ = ["encode", "spherical_kmeans"]


@njit(cache=True, nogil=True, fastmath=_FAST)
def encode(
    vecs: np.ndarray, order: np.ndarray, owner: np.ndarray, means: np.ndarray, basis: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes of residuals ``(vecs[order[i]] - means[owner[i]]) @ basis``, one scale a row.

    The scale maps a row's largest magnitude to 127 (an all-zero row: scale 0, codes 0), as
    :func:`magnetic_core._search.sublists.quantize` does. Computed on the calling thread:
    the scorer codes a few small groups after each write, where BLAS's thread start-up
    costs more than the product.
    """
    n = order.shape[0]
    d, r = basis.shape
    codes = np.empty((n, r), np.int8)
    scales = np.empty(n, np.float32)
    row = np.empty(r, np.float32)
    for i in range(n):
        row[:] = 0.0
        v = order[i]
        m = owner[i]
        for c in range(d):
            xc = vecs[v, c] - means[m, c]
            for j in range(r):
                row[j] += xc * basis[c, j]
        top = np.float32(0.0)
        for j in range(r):
            top = max(top, abs(row[j]))
        scale = top / np.float32(127.0)
        scales[i] = scale
        inv = np.float32(1.0) / scale if scale > 0 else np.float32(0.0)
        for j in range(r):
            codes[i, j] = np.int8(min(127.0, max(-127.0, np.rint(row[j] * inv))))
    return codes, scales


@njit(cache=True, nogil=True, fastmath=_FAST)
def _nearest(vecs: np.ndarray, centres: np.ndarray, owner: np.ndarray) -> None:
    """Each row's most similar centre (the first on ties)."""
    n, d = vecs.shape
    s = centres.shape[0]
    for i in range(n):
        best, best_j = np.float32(-np.inf), 0
        for j in range(s):
            acc = np.float32(0.0)
            for c in range(d):
                acc += vecs[i, c] * centres[j, c]
            if acc > best:
                best, best_j = acc, j
        owner[i] = best_j


@njit(cache=True, nogil=True, fastmath=_FAST)
def spherical_kmeans(vecs: np.ndarray, centres: np.ndarray, iters: int) -> np.ndarray:
    """Owners after ``iters`` rounds of spherical k-means from the given centres.

    A centre left without members keeps its place. On the calling thread, for the same
    reason as :func:`encode`.
    """
    n, d = vecs.shape
    s = centres.shape[0]
    centres = centres.copy()
    owner = np.empty(n, np.int64)
    sums = np.empty((s, d), np.float32)
    for _ in range(iters):
        _nearest(vecs, centres, owner)
        sums[:] = 0.0
        for i in range(n):
            sums[owner[i]] += vecs[i]
        for j in range(s):
            norm = np.sqrt(np.sum(sums[j] * sums[j]))
            if norm > 1e-12:
                centres[j] = sums[j] / norm
    _nearest(vecs, centres, owner)
    return owner
