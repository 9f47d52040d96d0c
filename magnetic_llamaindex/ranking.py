"""LlamaIndex's MMR setting: ``mmr_threshold`` checked once (the MMR itself is the core's)."""

from __future__ import annotations

from typing import Any

from magnetic_core.validators import check_number

__all__ = ["DEFAULT_MMR_THRESHOLD", "check_mmr_threshold"]

DEFAULT_MMR_THRESHOLD = 0.5
"""LlamaIndex's default relevance weight of MMR."""


def check_mmr_threshold(threshold: Any) -> float:
    """Return ``threshold`` as a float in ``[0, 1]``, or raise naming it.

    ``threshold`` is LlamaIndex's ``mmr_threshold``, the core's ``mmr_lambda``: 1.0 ranks
    by relevance alone, 0.0 by diversity alone.
    """
    return float(check_number(threshold, "mmr_threshold", low=0.0, high=1.0))
