"""LlamaIndex's MMR setting: ``mmr_threshold`` checked once (the MMR itself is the core's)."""

from __future__ import annotations

from typing import Any

from magnetic_core.errors import InvalidInputError

__all__ = ["DEFAULT_MMR_THRESHOLD", "check_mmr_threshold"]

DEFAULT_MMR_THRESHOLD = 0.5
"""LlamaIndex's default relevance weight of MMR."""


def check_mmr_threshold(threshold: Any) -> float:
    """Return ``threshold`` as a float in ``[0, 1]``, or raise naming it.

    ``threshold`` is LlamaIndex's ``mmr_threshold``, the core's ``mmr_lambda``: 1.0 ranks
    by relevance alone, 0.0 by diversity alone.
    """
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
