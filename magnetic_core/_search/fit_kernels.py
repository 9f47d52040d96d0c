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

__all__ = ["encode", "list_means", "spherical_kmeans"]


# A nibble code's largest magnitude: entries are -7 to 7, stored with 8 added in four bits.
NIBBLE_TOP = 7


def encode(
    vecs: np.ndarray, order: np.ndarray, owner: np.ndarray, means: np.ndarray, basis: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Nibble codes of residuals ``(vecs[order[i]] - means[owner[i]]) @ basis``, one scale
    a row: entries rounded to -7..7 steps of the scale (the row's largest magnitude / 7;
    an all-zero row: scale 0, entries 0), stored plus 8 in four bits, two a byte. Byte
    ``j`` of a row of rank ``r`` holds entry ``j`` in its low bits and entry ``j + h`` in
    its high ones, ``h = (r + 1) // 2`` bytes a row (an odd rank's last high nibble is a
    zero entry); ``kernels.listed_code_top`` reads them.

    Four bits rather than eight: the scan that reads these codes only chooses which cells
    are scored exactly, and the rounding of the sixteen levels is small beside what a rank
    of 128 leaves out of the residual (100K Reuters passages: recall@10 0.9880 against
    0.9873 with int8 codes, the same probe), while the scan reads half the bytes (1M
    cells, codes read from memory: 235 -> 169 us for 13,000 rows in a sketch of the scan).

    The projection is one matrix product (BLAS), the rounding compiled: a product per
    cell in a compiled loop added each entry to a row in memory, and a group of 200
    cells (384 x 128) took 768 us against 183 us this way (55 cells: 207 against 73 us),
    part of what a search right after a write waits for.
    """
    residuals = vecs[order]
    residuals -= means[owner]
    return _nibbles(np.ascontiguousarray(residuals @ basis, np.float32))


@njit(cache=True, nogil=True, fastmath=_FAST)
def _nibbles(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`encode`'s rounding and packing of the projected residuals ``rows``."""
    n, r = rows.shape
    half = (r + 1) // 2
    codes = np.empty((n, half), np.uint8)
    scales = np.empty(n, np.float32)
    row = np.zeros(2 * half, np.float32)
    step = np.empty(2 * half, np.uint8)
    top_level = np.float32(NIBBLE_TOP)
    for i in range(n):
        row[:r] = rows[i]
        top = np.float32(0.0)
        for j in range(r):
            top = max(top, abs(row[j]))
        scale = top / top_level
        scales[i] = scale
        inv = np.float32(1.0) / scale if scale > 0 else np.float32(0.0)
        for j in range(2 * half):
            level = min(top_level, max(-top_level, np.rint(row[j] * inv)))
            step[j] = np.uint8(np.int64(level) + 8)
        for j in range(half):
            codes[i, j] = step[j] | (step[j + half] << np.uint8(4))
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

    A centre left without members keeps its place. Compiled loops, no BLAS: the products
    are a few centres wide.
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


@njit(cache=True, nogil=True)
def list_means(
    vecs: np.ndarray, owner: np.ndarray, s: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sub-lists of ``owner`` (each row's list, below ``s``): ``(order, lengths,
    means)``, the rows list by list (in row order within a list), the length of each list
    that has rows, and their means (summed in float64 in that order, then float32).

    What ``np.argsort(owner, kind="stable")``, ``np.bincount`` and ``np.add.reduceat``
    over the rows in float64 gave, in one pass each (the same sums): at 250 rows of 384,
    190 us of numpy calls against 18 here, part of the re-coding a search does after a
    write.
    """
    n, d = vecs.shape
    counts = np.zeros(s, np.int64)
    for i in range(n):
        counts[owner[i]] += 1
    at = np.empty(s, np.int64)
    used = 0
    total = 0
    for j in range(s):
        at[j] = total
        total += counts[j]
        used += counts[j] > 0
    order = np.empty(n, np.int64)
    for i in range(n):
        j = owner[i]
        order[at[j]] = i
        at[j] += 1
    lengths = np.empty(used, np.int64)
    means = np.empty((used, d), np.float32)
    sums = np.empty(d, np.float64)
    start = 0
    m = 0
    for j in range(s):
        c = counts[j]
        if c == 0:
            continue
        sums[:] = 0.0
        for t in range(start, start + c):
            r = order[t]
            for k in range(d):
                sums[k] += np.float64(vecs[r, k])
        for k in range(d):
            means[m, k] = np.float32(sums[k] / c)
        lengths[m] = c
        m += 1
        start += c
    return order, lengths, means
