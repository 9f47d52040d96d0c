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

import itertools
import math
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from magnetic_core._index.index import Group, HierIndex
from magnetic_core._search.fusion import fuse
from magnetic_core._search.scorer import FULL_SCAN_SHARE, Scorer, _kernels
from magnetic_core._store.catalog import Catalog
from magnetic_core.filters import Predicate

__all__ = ["Candidate", "SearchPlan", "probe_budget", "run_search"]


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
    min_cells: int | None = 0  # None: scaled to the store (probe_budget)
    list_size: int = 32
    group_spread: float = 2.0
    # Cells left out whatever they score (superseded cells under ``current_only``).
    exclude: frozenset[str] = frozenset()


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


@dataclass
class _Pool:
    """Candidates gathered so far: ids and exact cosines, in parallel."""

    ids: list[str]
    scores: np.ndarray
    _have: set[str] | None = None

    def extend(self, index: HierIndex, cids: Iterable[str], q: np.ndarray) -> None:
        """Add cells not yet in the pool, scored exactly."""
        have = self._have
        if have is None:
            have = self._have = set(self.ids)
        loc = index.loc
        new = [c for c in dict.fromkeys(cids) if c not in have and c in loc]
        if new:
            have.update(new)
            self.ids = [*self.ids, *new]
            self.scores = np.concatenate([self.scores, index.vectors(new) @ q])


# The default cell budget of a query (``MemoryConfig.probe_cells`` None): ``PROBE_SCALE``
# times the square root of the store's size, between ``PROBE_FLOOR`` and ``PROBE_CAP``.
# Measured on Reuters MiniLM passages (benchmarks/latency_recall.py): tie-aware recall@10
# reaches 0.98 at about 2,000 cells of 10K, 5,000 of 25K, 6,000-8,000 of 40K and 12,000 of
# 100K; past that, recall at a fixed budget falls slowly (0.975 at 1M synthetic cells), so
# the budget, and the latency, stay flat.
PROBE_SCALE = 40.0
PROBE_FLOOR = 4096
PROBE_CAP = 12000


def probe_budget(n_cells: int) -> int:
    """Cells a query scores by default in a store of ``n_cells`` cells.

    >>> probe_budget(1_000), probe_budget(25_000), probe_budget(1_000_000)
    (4096, 6325, 12000)
    """
    return min(PROBE_CAP, max(PROBE_FLOOR, math.ceil(PROBE_SCALE * math.sqrt(n_cells))))


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
    min_cells = probe_budget(len(index)) if plan.min_cells is None else plan.min_cells
    group_cells = min_cells
    budget = min_cells if min_cells > 0 else len(index)
    if usable and min_cells > 0:
        # Groups are probed wider than the cell budget; their best sub-lists fill it.
        group_cells = math.ceil(plan.group_spread * min_cells)
        if FULL_SCAN_SHARE * len(index) <= min_cells:
            group_cells = budget = len(index)
    sims = scorer.centroid_scores(q) if scorer is not None else matvec(index.centroids, q)
    probe = _kernels().probe_groups(sims, _group_sizes(index), plan.n_probe, group_cells)
    stages = _Stages.of(index, catalog, plan, probe)
    keep = max(plan.rerank, 4 * plan.k)
    if (
        usable
        and scorer is not None
        and plan.n_probe < n_groups
        and int(_group_sizes(index)[stages.slots].sum()) > 16 * keep
    ):
        # Only the best k are needed unless boosts, words or exclusions re-rank them.
        plain = stages.plain(plan)
        found = scorer.probe(index, stages.slots, q, budget, keep, plan.k if plain else keep)
        if plain and len(found[0]) >= plan.k and not _threaded(catalog, plan):
            # Nothing re-ranks the best k by cosine: they are the answer.
            rows = [(c, float(s), 0.0, 0.0, 0.0) for c, s in zip(*found, strict=True)]
            return _candidates(index, plan, stages, rows, False)
        pool = _Pool(*found)
        if stages.boosted and plan.entity_boost > 0:
            slot_set = set(stages.slots.tolist())
            pool.extend(index, (c for c in stages.boosted if index.loc[c].slot in slot_set), q)
    else:
        pool = _exact_pool(index, scorer, stages.slots, q)
    if stages.lexical is not None:
        top_ids, _ = catalog.lexical.top_of(*stages.lexical, max(plan.lexical_candidates, plan.k))
        pool.extend(index, top_ids, q)
        stages.lexical_ids = set(top_ids)
    picked = _rank(index, pool, stages.boosted, stages.lexical, catalog, plan)
    fallback = len(picked) < plan.k and len(stages.slots) < n_groups
    if fallback:
        pool = _exact_pool(index, scorer, range(n_groups), q)
        picked = _rank(index, pool, stages.boosted, stages.lexical, catalog, plan)
    return _candidates(index, plan, stages, picked, fallback)


@dataclass
class _Stages:
    """What the centroid, entity and lexical stages found for one query."""

    slots: np.ndarray  # probed group slots (centroid stage, then entity routes), int64
    centroid_slots: np.ndarray
    entity_slots: set[int]
    boosted: set[str]
    lexical: tuple[np.ndarray, np.ndarray] | None
    lexical_ids: set[str]

    @classmethod
    def of(cls, index: HierIndex, catalog: Catalog, plan: SearchPlan, probe: np.ndarray) -> _Stages:
        boosted: set[str] = set()
        entity_slots: set[int] = set()
        slots = np.sort(probe)
        if plan.entities:
            # Cells of entities held by few enough cells boost; of rarer ones, route too.
            n = len(catalog)
            boost_limit = max(10, int(plan.max_entity_share * n))
            route_limit = max(10, int(plan.max_route_cells / max(n, 1) * n))
            loc = index.loc
            for entity in plan.entities:
                cells = catalog.entity_cells.get(entity)
                if not cells or len(cells) > boost_limit:
                    continue
                boosted |= cells
                if len(cells) <= route_limit:
                    entity_slots.update(loc[c].slot for c in cells if c in loc)
            if entity_slots:
                slots = np.union1d(probe, np.fromiter(entity_slots, np.int64, len(entity_slots)))
        return cls(slots, probe, entity_slots, boosted, _lexical_scores(catalog, plan), set())

    def plain(self, plan: SearchPlan) -> bool:
        """Whether the best k by cosine are the answer (nothing re-ranks them)."""
        boosts = bool(self.boosted) and plan.entity_boost != 0.0
        return not boosts and self.lexical is None and not plan.exclude


def _threaded(catalog: Catalog, plan: SearchPlan) -> bool:
    """Whether conversation threads lift this query's candidates (see fusion)."""
    weights = plan.context_weight > 0.0 or plan.session_weight > 0.0
    return weights and len(catalog.threads) > 0


def _candidates(
    index: HierIndex,
    plan: SearchPlan,
    stages: _Stages,
    picked: list[tuple[str, float, float, float, float]],
    fallback: bool,
) -> list[Candidate]:
    """The picked rows as candidates, with the stages that found each."""
    if not picked:
        return []
    loc = index.loc
    groups = [loc[row[0]] for row in picked]
    slots = np.fromiter((g.slot for g in groups), np.int64, len(groups))
    csims = (index.centroids[slots] @ plan.vector).tolist()
    probed = len(index.slot_groups) if fallback else len(stages.slots)
    # Whether the centroid stage probed each picked slot: one mask (np.isin costs 10x).
    probed_mask = np.zeros(len(index.slot_groups), bool)
    probed_mask[stages.centroid_slots] = True
    centroid = probed_mask[slots].tolist()
    entity, lexical = stages.entity_slots, stages.lexical_ids
    return [
        Candidate(
            cid,
            group,
            score,
            score + boost + lex + context,
            boost,
            _STAGES[in_centroid, group.slot in entity, cid in lexical],
            csim,
            fallback,
            probed,
            lex,
            context,
        )
        for (cid, score, boost, lex, context), group, csim, in_centroid in zip(
            picked, groups, csims, centroid, strict=True
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


# Every combination, made once: a hit's stages are a table look-up.
_STAGES = {
    (c, e, lx): _stages(c, e, lx)
    for c in (False, True)
    for e in (False, True)
    for lx in (False, True)
}


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
    index: HierIndex,
    scorer: Scorer | None,
    slots: Sequence[int] | range | np.ndarray,
    q: np.ndarray,
) -> _Pool:
    """Exact cosines of every cell of the given slots (one compiled pass when the scorer
    describes the index, else one product per group block)."""
    if scorer is not None:
        return _Pool(*scorer.exact(index, slots, q))
    return _Pool(*_score_groups(index, slots, q))


def _group_sizes(index: HierIndex) -> np.ndarray:
    """Cell count per slot, cached until the hierarchy changes."""
    cached = index.sizes_cache
    if cached is None or cached[0] != index.centroid_epoch:
        cached = (index.centroid_epoch, np.array([g.n for g in index.slot_groups]))
        index.sizes_cache = cached
    return cached[1]


# Probes of at least this many cells (in stores too small for the scorer) are scored in one
# compiled pass over the groups' blocks; one product per group costs a BLAS call each
# (150 groups of a 3,000-cell store: 12 ms under load, against about 1 ms in one pass).
# Smaller probes stay in numpy, so small stores never import numba.
KERNEL_CELLS = 1024


def _score_groups(
    index: HierIndex, slots: Iterable[int], q: np.ndarray
) -> tuple[list[str], np.ndarray]:
    """Exact cosine of every cell of the given group slots."""
    groups = index.slot_groups
    chosen = [groups[s] for s in slots]
    ids = list(itertools.chain.from_iterable(g.ids for g in chosen))
    if not chosen:
        return ids, np.empty(0, np.float32)
    if len(ids) >= KERNEL_CELLS and q.dtype == np.float32 and q.flags.c_contiguous:
        addresses, counts = _block_addresses(index)
        picked = np.fromiter((g.slot for g in chosen), np.int64, len(chosen))
        return ids, _kernels().exact_rows(addresses, counts, picked, q)
    return ids, np.concatenate([g.view @ q for g in chosen])


# Per index: (centroid epoch, the groups' blocks, their addresses and row counts by slot).
# Every write that changes a group moves the epoch on; the blocks are held here, so an
# address never outlives its array.
_ADDRESSES: weakref.WeakKeyDictionary[
    HierIndex, tuple[int, list[np.ndarray], np.ndarray, np.ndarray]
] = weakref.WeakKeyDictionary()


def _block_addresses(index: HierIndex) -> tuple[np.ndarray, np.ndarray]:
    """Addresses and row counts of every group's block, by slot (cached per epoch)."""
    cached = _ADDRESSES.get(index)
    if cached is None or cached[0] != index.centroid_epoch:
        groups = index.slot_groups
        blocks = [g.vecs for g in groups]
        addresses = np.fromiter((b.ctypes.data for b in blocks), np.int64, len(blocks))
        counts = np.fromiter((g.n for g in groups), np.int64, len(groups))
        cached = (index.centroid_epoch, blocks, addresses, counts)
        _ADDRESSES[index] = cached
    return cached[2], cached[3]


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
