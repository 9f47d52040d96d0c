"""Search through the concept layer: centroids, probed cells, entities, then flat fallback.

1. Centroid stage: cosine of the query with every centroid (one product); top ``n_probe``.
2. Cell stage: exact cosine of the probed groups' cells, one product per group block.
3. Entity stage: groups holding a query entity are probed too; cells holding one get a boost.
4. Flat fallback: when fewer than ``k`` candidates pass the filter, every cell is scored.
The final ranking is exact over the candidates (cosine + boost), so ``k`` results come back
whenever ``k`` cells match.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from magnetic_core.catalog import Catalog
from magnetic_core.filters import Predicate
from magnetic_core.index import Group, HierIndex

__all__ = ["Candidate", "SearchPlan", "run_search"]


@dataclass(frozen=True)
class SearchPlan:
    """One query's parameters after validation."""

    vector: np.ndarray
    k: int
    n_probe: int
    entities: tuple[str, ...]
    entity_boost: float
    predicate: Predicate | None
    max_entity_share: float = 0.05


@dataclass(frozen=True)
class Candidate:
    """A ranked result before it is turned into a public Hit."""

    id: str
    group: Group
    score: float
    rank_score: float
    boost: float
    stages: tuple[str, ...]
    centroid_similarity: float
    fallback_ran: bool
    probed_groups: int


def run_search(index: HierIndex, catalog: Catalog, plan: SearchPlan) -> list[Candidate]:
    """Run the staged search and return at most ``k`` candidates, best first."""
    n_groups = len(index.slot_groups)
    if n_groups == 0 or plan.k <= 0:
        return []
    q = plan.vector
    centroid_sims = index.centroids @ q
    if plan.n_probe >= n_groups:
        probe_slots = np.arange(n_groups)
    else:
        probe_slots = np.argpartition(-centroid_sims, plan.n_probe - 1)[: plan.n_probe]
    centroid_slots = set(probe_slots.tolist())

    boosted = catalog.cells_with(plan.entities, plan.max_entity_share) if plan.entities else set()
    entity_slots = {index.loc[c].slot for c in boosted if c in index.loc}
    slots = sorted(centroid_slots | entity_slots)

    ids, scores = _score_groups(index, slots, q)
    boosts = _boosts(ids, boosted, plan.entity_boost)
    picked = _top(ids, scores, boosts, plan, catalog)
    fallback = len(picked) < plan.k and len(slots) < n_groups
    if fallback:
        ids, scores = _score_groups(index, range(n_groups), q)
        boosts = _boosts(ids, boosted, plan.entity_boost)
        picked = _top(ids, scores, boosts, plan, catalog)

    results = []
    for cid, score, boost in picked:
        group = index.loc[cid]
        stages = []
        if group.slot in centroid_slots:
            stages.append("centroid")
        if group.slot in entity_slots:
            stages.append("entity")
        if not stages:
            stages.append("fallback")
        results.append(
            Candidate(
                id=cid,
                group=group,
                score=score,
                rank_score=score + boost,
                boost=boost,
                stages=tuple(stages),
                centroid_similarity=float(centroid_sims[group.slot]),
                fallback_ran=fallback,
                probed_groups=n_groups if fallback else len(slots),
            )
        )
    return results


def _score_groups(index: HierIndex, slots: object, q: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Exact cosine of every cell of the given group slots (one product per block)."""
    ids: list[str] = []
    parts: list[np.ndarray] = []
    groups = index.slot_groups
    for slot in slots:  # type: ignore[attr-defined]
        group = groups[slot]
        ids.extend(group.ids)
        parts.append(group.view @ q)
    if not parts:
        return ids, np.empty(0, np.float32)
    return ids, np.concatenate(parts)


def _boosts(ids: list[str], boosted: set[str], amount: float) -> np.ndarray | None:
    if not boosted or amount == 0.0:
        return None
    hit = np.fromiter((cid in boosted for cid in ids), dtype=bool, count=len(ids))
    return hit.astype(np.float32) * np.float32(amount)


def _top(
    ids: list[str],
    scores: np.ndarray,
    boosts: np.ndarray | None,
    plan: SearchPlan,
    catalog: Catalog,
) -> list[tuple[str, float, float]]:
    """The best ``k`` (id, cosine, boost) by cosine + boost that pass the filter."""
    if not ids:
        return []
    rank = scores if boosts is None else scores + boosts
    k = plan.k
    if plan.predicate is None:
        if len(ids) > k:
            top = np.argpartition(-rank, k - 1)[:k]
            order = top[np.argsort(-rank[top], kind="stable")]
        else:
            order = np.argsort(-rank, kind="stable")
        return [_pick(ids, scores, boosts, int(i)) for i in order]
    # With a filter, walk candidates best first and test lazily: only about k/selectivity
    # predicates run.
    picked = []
    records = catalog.records
    for i in np.argsort(-rank, kind="stable"):
        cid = ids[int(i)]
        if plan.predicate(records[cid].metadata):
            picked.append(_pick(ids, scores, boosts, int(i)))
            if len(picked) == k:
                break
    return picked


def _pick(
    ids: list[str], scores: np.ndarray, boosts: np.ndarray | None, i: int
) -> tuple[str, float, float]:
    return ids[i], float(scores[i]), 0.0 if boosts is None else float(boosts[i])
