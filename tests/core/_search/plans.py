"""The coded-probe search plan the scorer and search tests share."""

from __future__ import annotations

import numpy as np

from magnetic_core._search.search import SearchPlan


def coded_plan(q: np.ndarray, min_cells: int = 1200, k: int = 10) -> SearchPlan:
    """A vector query through the scorer: four groups probed, ``min_cells`` cells scored by
    code (sketch rank 16, sub-lists of 32), the best 64 exactly, no entity."""
    return SearchPlan(
        vector=q,
        k=k,
        n_probe=4,
        entities=(),
        entity_boost=0.0,
        predicate=None,
        sketch_rank=16,
        rerank=64,
        min_cells=min_cells,
        list_size=32,
    )
