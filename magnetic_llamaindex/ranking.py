"""Ranking over candidate unit vectors: exact top-k and maximal marginal relevance (MMR)."""

from __future__ import annotations

from typing import Any

import numpy as np

from magnetic_core.errors import InvalidInputError

__all__ = ["DEFAULT_MMR_THRESHOLD", "check_mmr_threshold", "maximal_marginal_relevance", "top_k"]

DEFAULT_MMR_THRESHOLD = 0.5


def top_k(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` highest scores, best first (ties keep input order).

    Example:
        >>> top_k(np.array([0.1, 0.9, 0.5]), 2)
        [1, 2]
    """
    order = np.argsort(-scores, kind="stable")
    return [int(i) for i in order[:k]]


def check_mmr_threshold(threshold: Any) -> float:
    """Return ``threshold`` as a float in ``[0, 1]``, or raise naming it."""
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, (int, float))
        or not 0.0 <= threshold <= 1.0
    ):
        raise InvalidInputError(
            f"mmr_threshold must be a number between 0 and 1, got {threshold!r}",
            hint="1.0 ranks by relevance only, 0.0 by diversity only",
        )
    return float(threshold)


def maximal_marginal_relevance(
    query: np.ndarray, vectors: np.ndarray, k: int, threshold: float = DEFAULT_MMR_THRESHOLD
) -> list[int]:
    """Pick ``k`` candidates trading relevance to the query against redundancy.

    Each step takes the candidate maximising
    ``threshold * cos(query, c) - (1 - threshold) * max cos(c, already picked)``.

    Args:
        query: the unit query vector, shape ``(d,)``.
        vectors: unit candidate vectors, shape ``(n, d)``.
        k: how many to pick (at most ``n``).
        threshold: 1.0 ranks by relevance alone, 0.0 by diversity alone.

    Returns:
        Indices into ``vectors``, in the order picked.

    Raises:
        InvalidInputError: ``threshold`` outside ``[0, 1]``.

    Example:
        >>> q = np.array([1.0, 0.0])
        >>> v = np.array([[1.0, 0.0], [0.99, 0.141], [0.0, 1.0]])
        >>> maximal_marginal_relevance(q, v, 2, threshold=0.3)
        [0, 2]
    """
    threshold = check_mmr_threshold(threshold)
    n = vectors.shape[0]
    if n == 0 or k <= 0:
        return []
    relevance = vectors @ query
    redundancy = np.full(n, -np.inf)
    available = np.ones(n, dtype=bool)
    picked: list[int] = []
    for _ in range(min(k, n)):
        penalty = np.where(np.isfinite(redundancy), redundancy, 0.0)
        score = threshold * relevance - (1.0 - threshold) * penalty
        score[~available] = -np.inf
        best = int(np.argmax(score))
        picked.append(best)
        available[best] = False
        redundancy = np.maximum(redundancy, vectors @ vectors[best])
    return picked
