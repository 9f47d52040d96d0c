"""Ranking over candidate unit vectors: exact top-k and maximal marginal relevance (MMR)."""

from __future__ import annotations

from typing import Any

import numpy as np

from magnetic_core._search.topk import maximal_marginal_relevance as core_mmr
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
    """MMR picks (see :func:`magnetic_core._search.topk.maximal_marginal_relevance`).

    ``threshold`` is LlamaIndex's ``mmr_threshold``: 1.0 ranks by relevance alone, 0.0 by
    diversity alone.

    Raises:
        InvalidInputError: ``threshold`` outside ``[0, 1]``.

    Example:
        >>> q = np.array([1.0, 0.0])
        >>> v = np.array([[1.0, 0.0], [0.99, 0.141], [0.0, 1.0]])
        >>> maximal_marginal_relevance(q, v, 2, threshold=0.3)
        [0, 2]
    """
    return core_mmr(query, vectors, k, check_mmr_threshold(threshold))
