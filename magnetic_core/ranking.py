"""Re-ranking over candidate unit vectors: maximal marginal relevance (MMR), for the adapters."""

from __future__ import annotations

import numpy as np

__all__ = ["maximal_marginal_relevance"]


def maximal_marginal_relevance(
    query: np.ndarray, vectors: np.ndarray, k: int, lambda_mult: float = 0.5
) -> list[int]:
    """Indices of ``k`` candidates chosen by maximal marginal relevance, in pick order.

    Each step takes the candidate maximising
    ``lambda_mult * cos(query, c) - (1 - lambda_mult) * max cos(c, already picked)``;
    the first pick is the most relevant candidate.

    Args:
        query: unit query vector, shape ``(d,)``.
        vectors: unit candidate vectors, shape ``(n, d)``.
        k: how many to pick (at most ``n``).
        lambda_mult: 1 ranks by relevance only, 0 by diversity only.

    Example:
        >>> v = np.array([[1.0, 0.0], [0.99, 0.141], [0.0, 1.0]])
        >>> maximal_marginal_relevance(np.array([1.0, 0.0]), v, 2, 0.3)
        [0, 2]
    """
    n = vectors.shape[0]
    if n == 0 or k <= 0:
        return []
    relevance = vectors @ query
    picked = [int(np.argmax(relevance))]
    # Highest similarity of each candidate to anything picked so far, updated per pick.
    redundancy = vectors @ vectors[picked[0]]
    available = np.ones(n, dtype=bool)
    available[picked[0]] = False
    while len(picked) < min(k, n):
        score = lambda_mult * relevance - (1.0 - lambda_mult) * redundancy
        score[~available] = -np.inf
        best = int(np.argmax(score))
        picked.append(best)
        available[best] = False
        redundancy = np.maximum(redundancy, vectors @ vectors[best])
    return picked
