"""Pure numeric helpers of the hierarchy: threshold calibration, 2-means splits, merge plans."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["calibrate_threshold", "plan_merge_pairs", "two_means"]


def calibrate_threshold(vectors: np.ndarray, percentile: float) -> float:
    """Join threshold for a model, from the data: a percentile of nearest-neighbour similarity.

    Each sample vector's cosine similarity to its nearest other sample is computed (one
    matrix product); exact duplicates are ignored so a corpus with repeated passages does
    not push the threshold to 1.

    Args:
        vectors: (n, d) unit vectors, n >= 2.
        percentile: 0-100; lower gives larger, looser groups.
    """
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    nearest = sims.max(axis=1)
    distinct = nearest[nearest < 0.9999]
    if distinct.size == 0:
        return 0.9
    return float(np.clip(np.percentile(distinct, percentile), -1.0, 0.99))


def two_means(vectors: np.ndarray, iterations: int = 8) -> np.ndarray:
    """Split ``vectors`` (unit rows) in two by spherical 2-means; returns a boolean mask.

    Seeds are deterministic: the member least similar to the mean, and the member least
    similar to that one. When the members cannot be separated (all duplicates), the mask
    is the second half of the rows, so a split always bounds the group size. Compiled
    (:func:`_two_means`): a split runs every ~100 cells at ingest.
    """
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    if x.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    return _two_means(x, iterations)


# fastmath lets the dot products vectorise; the split is the same for the batch and the
# one-at-a-time paths (same rows, same code), so its rounding need not match numpy's.
@njit(cache=True, fastmath=True)
def _dot(a: np.ndarray, b: np.ndarray) -> float:
    acc = 0.0
    for k in range(a.shape[0]):
        acc += np.float64(a[k]) * b[k]
    return acc


@njit(cache=True, fastmath=True)
def _argmin_dot(x: np.ndarray, v: np.ndarray) -> int:
    best, low = 0, np.inf
    for i in range(x.shape[0]):
        score = _dot(x[i], v)
        if score < low:
            best, low = i, score
    return best


@njit(cache=True, fastmath=True)
def _side_means(x: np.ndarray, mask: np.ndarray, centers: np.ndarray) -> None:
    """Each side's unit mean (float64), written into ``centers`` (0: unmasked, 1: masked)."""
    centers[:] = 0.0
    for i in range(x.shape[0]):
        side = 1 if mask[i] else 0
        for k in range(x.shape[1]):
            centers[side, k] += x[i, k]
    for side in range(2):
        norm = math.sqrt(_dot(centers[side], centers[side]))
        centers[side] /= max(norm, 1e-12)


@njit(cache=True)
def _two_means(x: np.ndarray, iterations: int) -> np.ndarray:
    n, d = x.shape
    mean = np.zeros(d)
    for i in range(n):
        for k in range(d):
            mean[k] += x[i, k]
    seed_a = _argmin_dot(x, mean)
    seed_b = _argmin_dot(x, x[seed_a].astype(np.float64))
    centers = np.empty((2, d))
    centers[0] = x[seed_a]
    centers[1] = x[seed_b]
    mask = np.zeros(n, np.bool_)
    new = np.zeros(n, np.bool_)
    for _ in range(iterations):
        count, same = 0, True
        for i in range(n):
            new[i] = _dot(x[i], centers[1]) > _dot(x[i], centers[0])
            count += new[i]
            same = same and new[i] == mask[i]
        if count == 0 or count == n or same:
            break
        mask[:] = new
        _side_means(x, mask, centers)
    count = mask.sum()
    if count == 0 or count == n:
        mask[:] = False
        mask[n // 2 :] = True
    return mask


def plan_merge_pairs(
    centroids: np.ndarray,
    threshold: float,
    sizes: np.ndarray | None = None,
    max_size: int | None = None,
    block: int = 1024,
) -> list[tuple[int, int, float]]:
    """Greedy disjoint pairs of rows whose cosine similarity is at least ``threshold``.

    The G x G similarity is computed in row blocks so memory stays O(block x G). Pairs are
    taken most similar first, each row at most once per pass. With ``sizes`` and
    ``max_size``, pairs whose merged size would pass ``max_size`` are left out.

    Returns:
        ``(i, j, similarity)`` with ``i < j``, most similar first.
    """
    g = centroids.shape[0]
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    for start in range(0, g, block):
        sims = centroids[start : start + block] @ centroids.T
        r, c = np.nonzero(sims >= threshold)
        keep = c > r + start
        if sizes is not None and max_size is not None:
            keep &= sizes[r + start] + sizes[c] <= max_size
        rows.append(r[keep] + start)
        cols.append(c[keep])
        vals.append(sims[r[keep], c[keep]])
    if not rows or not sum(len(r) for r in rows):
        return []
    all_r = np.concatenate(rows)
    all_c = np.concatenate(cols)
    all_v = np.concatenate(vals)
    order = np.lexsort((all_c, all_r, -all_v))
    used = np.zeros(g, dtype=bool)
    pairs: list[tuple[int, int, float]] = []
    for idx in order:
        i, j = int(all_r[idx]), int(all_c[idx])
        if used[i] or used[j]:
            continue
        used[i] = used[j] = True
        pairs.append((i, j, float(all_v[idx])))
    return pairs
