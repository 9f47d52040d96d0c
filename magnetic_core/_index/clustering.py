"""Pure numeric helpers of the hierarchy: threshold calibration, 2-means splits, merge plans."""

from __future__ import annotations

import numpy as np

from magnetic_core._index.vectors import normalize

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
    is the second half of the rows, so a split always bounds the group size.
    """
    n = vectors.shape[0]
    mean = vectors.sum(axis=0)
    seed_a = int(np.argmin(vectors @ mean))
    seed_b = int(np.argmin(vectors @ vectors[seed_a]))
    centers = np.stack([vectors[seed_a], vectors[seed_b]])
    mask = np.zeros(n, dtype=bool)
    weights = np.empty((2, n), np.float32)
    for _ in range(iterations):
        sims = vectors @ centers.T
        new_mask = sims[:, 1] > sims[:, 0]
        if not new_mask.any() or new_mask.all():
            break
        if np.array_equal(new_mask, mask):
            break
        mask = new_mask
        # Both sides' sums as one product (no copies of the masked rows).
        weights[1] = mask
        np.logical_not(mask, out=weights[0], casting="unsafe")
        centers = normalize(weights @ vectors)
    if not mask.any() or mask.all():
        mask = np.zeros(n, dtype=bool)
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
