"""Search restricted to given cells: exact cosine over exactly those ids.

Adapters need it when the allowed set is not a metadata test: LlamaIndex's ``node_ids``,
LangChain's ``where_document`` (a test on the text). The few cells named are scored
exactly, so nothing the restriction allows is missed.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from magnetic_core._index.index import HierIndex
from magnetic_core._search.candidates import Candidate

__all__ = ["search_restricted"]


def search_restricted(
    index: HierIndex, ids: Iterable[str], q: np.ndarray, k: int
) -> list[Candidate]:
    """The ``k`` cells of ``ids`` most similar to the unit vector ``q``, best first.

    Ids not in the index are skipped; ties keep the order of ``ids``.
    """
    present = [c for c in dict.fromkeys(ids) if c in index.loc]
    if not present or k <= 0:
        return []
    scores = index.vectors(present) @ q
    order = np.argsort(-scores, kind="stable")[:k]
    picked = [present[i] for i in order]
    groups = [index.loc[c] for c in picked]
    csims = (index.centroids[[g.slot for g in groups]] @ q).tolist()
    return [
        Candidate(
            id=cid,
            group=group,
            score=float(scores[i]),
            rank_score=float(scores[i]),
            boost=0.0,
            stages=("restricted",),
            centroid_similarity=csim,
            fallback_ran=False,
            probed_groups=0,
        )
        for cid, i, group, csim in zip(picked, order, groups, csims)
    ]
