"""What a search returns before the public views: one :class:`Candidate` per hit.

Built for every hit of every search, so the construction is kept to a few array
operations and a table look-up per hit (which stages found it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from magnetic_core._index.index import Group, HierIndex

if TYPE_CHECKING:
    from magnetic_core._search.search import SearchPlan
    from magnetic_core._search.stages import Stages

__all__ = ["Candidate", "by_cosine", "candidates", "plain_candidates"]


@dataclass(slots=True)
class Candidate:
    """A ranked result before it is turned into a public Hit (internal; not changed once
    made: a plain slotted class, as it is built for every hit of every search)."""

    id: str
    group: Group
    score: float
    rank_score: float
    boost: float
    stages: tuple[str, ...]
    centroid_similarity: float
    fallback_ran: bool
    probed_groups: int
    lexical: float = 0.0
    context: float = 0.0


def candidates(
    index: HierIndex,
    plan: SearchPlan,
    stages: Stages,
    picked: list[tuple[str, float, float, float, float]],
    fallback: bool,
) -> list[Candidate]:
    """The picked rows as candidates, with the stages that found each."""
    if not picked:
        return []
    loc = index.loc
    groups = [loc[row[0]] for row in picked]
    probed = len(index.slot_groups) if fallback else len(stages.slots)
    if plan.routes:
        slots = np.fromiter((g.slot for g in groups), np.int64, len(groups))
        csims = (index.centroids[slots] @ plan.vector).tolist()
        # Whether the centroid stage probed each picked slot: one mask (np.isin costs 10x).
        probed_mask = np.zeros(len(index.slot_groups), bool)
        probed_mask[stages.centroid_slots] = True
        entity, lexical = stages.entity_slots, stages.lexical_ids
        found_by = [
            _STAGES[in_centroid, group.slot in entity, row[0] in lexical]
            for row, group, in_centroid in zip(
                picked, groups, probed_mask[slots].tolist(), strict=True
            )
        ]
    else:  # nobody reads the route: what only it shows is left empty
        csims = [0.0] * len(groups)
        found_by = [()] * len(groups)
    return [
        Candidate(
            cid,
            group,
            score,
            score + boost + lex + context,
            boost,
            by,
            csim,
            fallback,
            probed,
            lex,
            context,
        )
        for (cid, score, boost, lex, context), group, csim, by in zip(
            picked, groups, csims, found_by, strict=True
        )
    ]


def by_cosine(
    index: HierIndex, plan: SearchPlan, stages: Stages, ids: list[str], scores: np.ndarray
) -> list[Candidate]:
    """Candidates ranked by their cosine alone (no boost, BM25 or thread lift): a plain
    vector query's answer, as :func:`candidates` makes it, without the rows in between."""
    values = scores.tolist()
    if plan.routes:
        picked = [(c, s, 0.0, 0.0, 0.0) for c, s in zip(ids, values, strict=True)]
        return candidates(index, plan, stages, picked, False)
    loc = index.loc
    return plain_candidates(ids, [loc[cid] for cid in ids], values, len(stages.slots))


def plain_candidates(
    ids: list[str], groups: list[Group], scores: list[float], probed: int
) -> list[Candidate]:
    """Candidates found by cosine alone, without routes (see :func:`by_cosine`), their
    groups given; ``probed``: the groups the search probed."""
    return [
        Candidate(cid, group, s, s, 0.0, (), 0.0, False, probed)
        for cid, group, s in zip(ids, groups, scores, strict=True)
    ]


def _stages(centroid: bool, entity: bool, lexical: bool) -> tuple[str, ...]:
    """The stages that found a hit; ``("fallback",)`` when only the flat scan did."""
    found = tuple(
        name
        for name, hit in (("centroid", centroid), ("entity", entity), ("lexical", lexical))
        if hit
    )
    return found or ("fallback",)


# Every combination, made once: a hit's stages are a table look-up.
_STAGES = {
    (c, e, lx): _stages(c, e, lx)
    for c in (False, True)
    for e in (False, True)
    for lx in (False, True)
}
