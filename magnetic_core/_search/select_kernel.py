"""The best ``k`` of an array, compiled: every selection of search goes through :func:`top_k`.

A query selects the best few hundred of about twelve thousand code scores, the groups to
probe among all centroids, the sub-lists to read among the probed groups' lists. A heap
pays a sift per entry that beats its worst, which for unordered scores is most of the
first few thousand; here entries that can still make the best ``k`` are appended to a
buffer of a few ``k`` and, when it fills, cut back to the best ``k`` by a partition (linear
time), which also raises the bar the remaining entries must beat. The result is the same
as a stable sort's first ``k``: ties go to the lower index.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["top_k"]

_MIN_BUFFER = 64


@njit(cache=True, nogil=True)
def _cut(keys: np.ndarray, index: np.ndarray, held: int, k: int) -> tuple[float, int]:
    """Keep the best ``k`` of the first ``held`` buffered entries (in index order); returns
    ``(the k-th best key, k)``. Of entries tied at that key, the lower indices stay."""
    bar = np.partition(keys[:held], held - k)[held - k]
    above = 0
    for t in range(held):
        if keys[t] > bar:
            above += 1
    room = k - above
    out = 0
    for t in range(held):
        key = keys[t]
        if key > bar or (key == bar and room > 0):
            if not key > bar:
                room -= 1
            keys[out] = key
            index[out] = index[t]
            out += 1
    return bar, out


@njit(cache=True, nogil=True)
def top_k(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest ``values``, best first; ties go to the lower index.

    Fewer than ``k`` values: all of them, sorted. NaN ranks below every number.
    """
    n = values.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.empty(0, np.int64)
    cap = min(n, max(4 * k, _MIN_BUFFER))
    keys = np.empty(cap, values.dtype)
    index = np.empty(cap, np.int64)
    held = 0
    cut = False  # whether the buffer was cut once (``bar`` is then the k-th best so far)
    bar = -np.inf
    for i in range(n):
        v = values[i]
        if v != v or (cut and not v > bar):  # NaN comes after every number (below)
            continue
        keys[held] = v
        index[held] = i
        held += 1
        if held == cap and i + 1 < n:
            bar, held = _cut(keys, index, held, k)
            cut = True
    if held > k:
        bar, held = _cut(keys, index, held, k)
    best = index[:held][_descending(keys[:held])]
    if held < k:  # fewer than k numbers: the NaNs follow, in index order
        nans = np.flatnonzero(values != values)[: k - held]
        best = np.concatenate((best, nans.astype(np.int64)))
    return best


@njit(cache=True, nogil=True)
def _descending(keys: np.ndarray) -> np.ndarray:
    """Positions of ``keys`` (no NaN) from the largest down; equal keys in position order."""
    n = keys.shape[0]
    if keys.itemsize != 4 or n >= 1 << 31:
        return np.argsort(-keys, kind="mergesort")  # stable
    # float32: one int64 per key, its bits made to sort as the float does (-0.0 as 0.0)
    # above the complement of its position, so a plain sort orders by key, then position.
    bits = (keys + np.float32(0.0)).view(np.int32).astype(np.int64)
    packed = np.where(bits < 0, bits ^ 0x7FFFFFFF, bits) << 32
    packed |= 0xFFFFFFFF - np.arange(n)
    packed = np.sort(packed)[::-1]
    return 0xFFFFFFFF - (packed & 0xFFFFFFFF)
