"""Search through the concept layer: centroids, probed cells, entities, words, then fallback.

1. Centroid stage: cosine of the query with every centroid (in large stores, one compiled
   scan of their int8 codes); the top ``n_probe`` groups, and more until they hold
   ``min_cells`` cells (a work budget independent of group sizes).
2. Cell stage: the probed groups' cells. Small probes are scored exactly. In large stores,
   unfiltered probes go through the scorer (:mod:`magnetic_core._search.scorer`): the probed
   groups' tight sub-lists are ranked by their means, the cells of the best ones
   (``min_cells`` in all) are scored by int8 residual code, and the best ``rerank`` exactly;
   when the budget is a quarter of the store or more, every group is probed. The scorer is
   brought up to date with the groups a write changed before the query is scored.
3. Entity stage: groups holding a rare query entity are probed too; cells holding a query
   entity get a boost.
4. Lexical stage: the best BM25 cells for the query's words join the candidates, and every
   candidate's normalised BM25 score, times ``lexical_weight``, is added to its ranking score.
5. Flat fallback: when fewer than ``k`` candidates pass the filter, every cell is scored.
The final ranking is exact over the candidates (cosine + boost + lexical), so ``k`` results
come back whenever ``k`` cells match. Probing every group with no boost and no lexical weight
is exact flat search.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from magnetic_core._index.index import Group, HierIndex
from magnetic_core._search.fusion import fuse
from magnetic_core._search.scorer import FULL_SCAN_SHARE, Scorer
from magnetic_core._store.catalog import Catalog
from magnetic_core.filters import Predicate

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
    max_route_cells: int = 256
    lexical_terms: tuple[str, ...] = ()
    lexical_weight: float = 0.0
    lexical_candidates: int = 50
    # Weights of the best neighbouring turn's score and of the thread's best score, for
    # cells in conversation threads (0: off).
    context_weight: float = 0.0
    session_weight: float = 0.0
    sketch_rank: int = 0
    rerank: int = 128  # at least 4 k are kept
    min_cells: int = 0
    list_size: int = 32
    group_spread: float = 2.0
    # Cells left out whatever they score (superseded cells under ``current_only``).
    exclude: frozenset[str] = frozenset()


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
    lexical: float = 0.0
    context: float = 0.0


@dataclass
class _Pool:
    """Candidates gathered so far: ids and exact cosines, in parallel."""

    ids: list[str]
    scores: np.ndarray

    def extend(self, index: HierIndex, cids: Iterable[str], q: np.ndarray) -> None:
        """Add cells not yet in the pool, scored exactly."""
        have = set(self.ids)
        loc = index.loc
        new = [c for c in cids if c not in have and c in loc]
        if new:
            self.ids = [*self.ids, *new]
            self.scores = np.concatenate([self.scores, index.vectors(new) @ q])


def run_search(
    index: HierIndex, catalog: Catalog, plan: SearchPlan, scorer: Scorer | None = None
) -> list[Candidate]:
    """Run the staged search and return at most ``k`` candidates, best first.

    Args:
        index: the hierarchy.
        catalog: the cell records (entities, words, metadata).
        plan: the query.
        scorer: the index's scorer (its owner keeps it across queries); None scores every
            probed cell exactly.
    """
    n_groups = len(index.slot_groups)
    if n_groups == 0 or plan.k <= 0:
        return []
    q = plan.vector
    usable = False
    if scorer is not None:
        scorer.configure(plan.sketch_rank, plan.list_size)
        usable = scorer.sync(index)
        if not scorer.current(index):
            scorer = None
    # Codes pre-score unfiltered searches only (a filter may reject most of the best).
    usable = usable and plan.predicate is None
    group_cells = plan.min_cells
    budget = plan.min_cells if plan.min_cells > 0 else len(index)
    if usable and plan.min_cells > 0:
        # Groups are probed wider than the cell budget; their best sub-lists fill it.
        group_cells = math.ceil(plan.group_spread * plan.min_cells)
        if FULL_SCAN_SHARE * len(index) <= plan.min_cells:
            group_cells = budget = len(index)
    sims = scorer.centroid_scores(q) if scorer is not None else matvec(index.centroids, q)
    probe = _probe(index, sims, plan.n_probe, group_cells)
    centroid_slots = set(probe.tolist())
    boosted = catalog.cells_with(plan.entities, plan.max_entity_share) if plan.entities else set()
    routed = (
        catalog.cells_with(plan.entities, plan.max_route_cells / max(len(catalog), 1))
        if plan.entities
        else set()
    )
    entity_slots = {index.loc[c].slot for c in routed if c in index.loc}
    slots = sorted(centroid_slots | entity_slots)
    lexical = _lexical_scores(catalog, plan)

    keep = max(plan.rerank, 4 * plan.k)
    if (
        usable
        and scorer is not None
        and plan.n_probe < n_groups
        and int(_group_sizes(index)[slots].sum()) > 16 * keep
    ):
        # Only the best k are needed unless boosts, words or exclusions re-rank them.
        plain = not (boosted and plan.entity_boost) and lexical is None and not plan.exclude
        found = scorer.probe(index, np.asarray(slots), q, budget, keep, plan.k if plain else keep)
        pool = _Pool(*found)
        if boosted and plan.entity_boost > 0:
            slot_set = set(slots)
            pool.extend(index, (c for c in boosted if index.loc[c].slot in slot_set), q)
    else:
        pool = _exact_pool(index, scorer, slots, q)
    lexical_ids: set[str] = set()
    if lexical is not None:
        top_ids, _ = catalog.lexical.top_of(*lexical, max(plan.lexical_candidates, plan.k))
        pool.extend(index, top_ids, q)
        lexical_ids = set(top_ids)

    picked = _rank(index, pool, boosted, lexical, catalog, plan)
    fallback = len(picked) < plan.k and len(slots) < n_groups
    if fallback:
        pool = _exact_pool(index, scorer, range(n_groups), q)
        picked = _rank(index, pool, boosted, lexical, catalog, plan)

    groups = [index.loc[cid] for cid, *_ in picked]
    csims = (index.centroids[[g.slot for g in groups]] @ q).tolist() if groups else []
    probed = n_groups if fallback else len(slots)
    return [
        Candidate(
            id=cid,
            group=group,
            score=score,
            rank_score=score + boost + lex + context,
            boost=boost,
            stages=_stages(
                group.slot in centroid_slots, group.slot in entity_slots, cid in lexical_ids
            ),
            centroid_similarity=csim,
            fallback_ran=fallback,
            probed_groups=probed,
            lexical=lex,
            context=context,
        )
        for (cid, score, boost, lex, context), group, csim in zip(
            picked, groups, csims, strict=True
        )
    ]


def _stages(centroid: bool, entity: bool, lexical: bool) -> tuple[str, ...]:
    """The stages that found a hit; ``("fallback",)`` when only the flat scan did."""
    found = tuple(
        name
        for name, hit in (("centroid", centroid), ("entity", entity), ("lexical", lexical))
        if hit
    )
    return found or ("fallback",)


# Rows per block of a single-query product. OpenBLAS runs larger matrix-vector products on
# several threads, which on a shared 2-core machine wait for a busy core: a 12000 x 128
# product took 0.1 ms alone and up to 2.7 ms threaded under load. Blocks this size stay on
# the calling thread.
MATVEC_BLOCK = 2048


def matvec(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``a @ x`` for one query vector, in row blocks that OpenBLAS keeps single-threaded."""
    n = a.shape[0]
    if n <= MATVEC_BLOCK:
        return a @ x
    out = np.empty(n, np.result_type(a, x))
    for start in range(0, n, MATVEC_BLOCK):
        np.matmul(a[start : start + MATVEC_BLOCK], x, out=out[start : start + MATVEC_BLOCK])
    return out


def _exact_pool(
    index: HierIndex, scorer: Scorer | None, slots: Sequence[int] | range, q: np.ndarray
) -> _Pool:
    """Exact cosines of every cell of the given slots (one compiled pass when the scorer
    describes the index, else one product per group block)."""
    if scorer is not None:
        return _Pool(*scorer.exact(index, slots, q))
    return _Pool(*_score_groups(index, slots, q))


def _probe(index: HierIndex, sims: np.ndarray, n_probe: int, min_cells: int) -> np.ndarray:
    """Slots of the groups to probe, most similar centroid first.

    At least ``n_probe`` groups, and more while they hold fewer than ``min_cells`` cells
    together, so the work (and the recall) does not depend on how large the groups are.
    """
    n_groups = len(index.slot_groups)
    if n_probe >= n_groups:
        return np.arange(n_groups)
    sizes = _group_sizes(index)
    want = n_probe
    if min_cells > 0:
        want = max(n_probe, math.ceil(2 * min_cells / max(float(sizes.mean()), 1.0)))
    cand = np.arange(n_groups) if want >= n_groups else np.argpartition(-sims, want - 1)[:want]
    cand = cand[np.argsort(-sims[cand], kind="stable")]
    if min_cells <= 0:
        return cand[:n_probe]
    need = int(np.searchsorted(np.cumsum(sizes[cand]), min_cells)) + 1
    return cand[: max(n_probe, need)]


def _group_sizes(index: HierIndex) -> np.ndarray:
    """Cell count per slot, cached until the hierarchy changes."""
    cached = index.sizes_cache
    if cached is None or cached[0] != index.centroid_epoch:
        cached = (index.centroid_epoch, np.array([g.n for g in index.slot_groups]))
        index.sizes_cache = cached
    return cached[1]


def _score_groups(
    index: HierIndex, slots: Iterable[int], q: np.ndarray
) -> tuple[list[str], np.ndarray]:
    """Exact cosine of every cell of the given group slots (one product per block)."""
    ids: list[str] = []
    parts: list[np.ndarray] = []
    groups = index.slot_groups
    for slot in slots:
        group = groups[slot]
        ids.extend(group.ids)
        parts.append(group.view @ q)
    if not parts:
        return ids, np.empty(0, np.float32)
    return ids, np.concatenate(parts)


def _lexical_scores(catalog: Catalog, plan: SearchPlan) -> tuple[np.ndarray, np.ndarray] | None:
    """BM25 ``(docs, scores)`` of the query's words, or None when the stage is off or idle."""
    if plan.lexical_weight <= 0 or not plan.lexical_terms:
        return None
    docs, vals = catalog.lexical.scores(plan.lexical_terms)
    return (docs, vals) if vals.size else None


def _rank(
    index: HierIndex,
    pool: _Pool,
    boosted: set[str],
    lexical: tuple[np.ndarray, np.ndarray] | None,
    catalog: Catalog,
    plan: SearchPlan,
) -> list[tuple[str, float, float, float, float]]:
    """The best ``k`` (id, cosine, boost, lexical, context) by their sum that pass the filter."""
    if not pool.ids:
        return []
    fused = fuse(index, pool, boosted, lexical, catalog, plan)
    k = plan.k
    if plan.exclude:
        # Excluded cells (few) are dropped before the top k are taken.
        drop = np.fromiter((c in plan.exclude for c in fused.ids), dtype=bool, count=len(fused.ids))
        if drop.any():
            fused = fused.keep(np.flatnonzero(~drop))
    rank = fused.rank
    if plan.predicate is None:
        if len(fused.ids) > k:
            top = np.argpartition(-rank, k - 1)[:k]
            order = top[np.argsort(-rank[top], kind="stable")]
        else:
            order = np.argsort(-rank, kind="stable")
        return [fused.row(int(i)) for i in order]
    # With a filter, walk candidates best first and test lazily: only about k/selectivity
    # predicates run.
    picked = []
    records = catalog.records
    ids = fused.ids
    for i in np.argsort(-rank, kind="stable"):
        if plan.predicate(records[ids[int(i)]].metadata):
            picked.append(fused.row(int(i)))
            if len(picked) == k:
                break
    return picked
