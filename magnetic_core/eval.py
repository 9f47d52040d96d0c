"""Evaluation helpers shared by tests and benchmarks: seeded data, exact k-NN, recall, nDCG."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from magnetic_core._search.topk import best_per_row

__all__ = ["clustered_data", "exact_knn", "ndcg_at_k", "recall_at_k", "recall_at_k_tie_aware"]


def clustered_data(
    n: int,
    dim: int,
    n_clusters: int,
    *,
    spread: float = 0.35,
    seed: int = 0,
    decay: float = 0.0,
    block: int = 65536,
) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors drawn around ``n_clusters`` random centres (seeded).

    Args:
        spread: expected norm of the noise added to a (unit) centre.
        decay: noise scale of coordinate ``j`` is proportional to ``(j + 1) ** -decay``;
            0 is isotropic noise, larger values concentrate it in fewer directions, as in
            real sentence embeddings, whose spectrum decays.
        block: rows generated at a time (bounds float64 scratch memory for large ``n``).

    Returns:
        ``(vectors, labels)``: (n, dim) float32 unit rows and each row's cluster.
    """
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_clusters, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    labels = rng.integers(0, n_clusters, size=n)
    scale = (np.arange(1, dim + 1, dtype=np.float64)) ** -decay
    scale *= spread / math.sqrt(float((scale**2).sum()))
    vecs = np.empty((n, dim), np.float32)
    for start in range(0, n, block):
        end = min(start + block, n)
        part = centres[labels[start:end]] + rng.standard_normal((end - start, dim)) * scale
        part /= np.linalg.norm(part, axis=1, keepdims=True)
        vecs[start:end] = part
    return vecs, labels


def exact_knn(
    base: np.ndarray, queries: np.ndarray, k: int, *, block: int = 1024
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` by inner product (cosine for unit rows), blocked over queries.

    Returns:
        ``(indices, scores)``, each (n_queries, k), best first.
    """
    k = min(k, base.shape[0])
    idx_out = np.empty((queries.shape[0], k), np.int64)
    score_out = np.empty((queries.shape[0], k), np.float32)
    for start in range(0, queries.shape[0], block):
        sims = queries[start : start + block] @ base.T
        idx_out[start : start + block], score_out[start : start + block] = best_per_row(sims, k)
    return idx_out, score_out


def recall_at_k(found: Sequence[Sequence[int]], truth: np.ndarray, k: int) -> float:
    """Mean share of the true top-``k`` that each result list holds."""
    total = 0.0
    for got, true in zip(found, truth, strict=True):
        total += len(set(list(got)[:k]) & set(true[:k].tolist())) / k
    return total / max(len(found), 1)


def recall_at_k_tie_aware(
    found_scores: Sequence[Sequence[float]], truth_scores: np.ndarray, k: int, eps: float = 1e-5
) -> float:
    """Recall that counts a result when its exact score reaches the k-th best exact score.

    Corpora with duplicate texts have several equally correct answers; this does not
    punish returning another copy of a tied item.
    """
    total = 0.0
    for got, true in zip(found_scores, truth_scores, strict=True):
        kth = float(true[min(k, len(true)) - 1])
        total += sum(1 for s in list(got)[:k] if s >= kth - eps) / k
    return total / max(len(found_scores), 1)


def ndcg_at_k(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k of one ranked list of ids against graded relevance (BEIR convention)."""
    dcg = sum(
        (2 ** relevant.get(doc, 0) - 1) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:k])
    )
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum((2**rel - 1) / math.log2(rank + 2) for rank, rel in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0
