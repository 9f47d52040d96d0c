"""Search through the concept layer: centroids, probed cells, entities, words, then fallback.

1. Centroid stage: cosine of the query with every centroid; the top ``n_probe`` groups, and
   more until they hold ``min_cells`` cells (a work budget independent of group sizes). In large
   stores the centroids are first scored by their low-rank sketch and only the best few times
   ``n_probe`` are scored exactly.
2. Cell stage: the probed groups' cells. Small probes are scored exactly, one product per
   group block. In large stores, unfiltered probes go through the search snapshot (see
   :mod:`magnetic_core._search.snapshot`): the probed groups' tight sub-lists are ranked by their
   means, the cells of the best ones (``min_cells`` in all) are scored by residual sketch in
   one product, and the best ``rerank`` are scored exactly; when the budget is a quarter of
   the store or more, every group is probed and every sketch scored in one contiguous pass
   (cheaper than gathering the budget's rows). While the snapshot is being
   renewed after a write, the probed groups are scored by plain sketch instead
   (see :mod:`magnetic_core._search.sketch`).
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
from magnetic_core._search.sketch import Sketcher
from magnetic_core._search.snapshot import Snapshot, SnapshotCache, ranges
from magnetic_core._search.topk import top_indices
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
            self.ids = [*self.ids, *new]  # a new list: ``ids`` may be the snapshot's own
            self.scores = np.concatenate([self.scores, index.vectors(new) @ q])


def run_search(index: HierIndex, catalog: Catalog, plan: SearchPlan) -> list[Candidate]:
    """Run the staged search and return at most ``k`` candidates, best first."""
    n_groups = len(index.slot_groups)
    if n_groups == 0 or plan.k <= 0:
        return []
    q = plan.vector
    sketcher = _sketcher(index, plan)
    built = _snapshot(index, plan)
    # Sketches pre-score unfiltered searches only (a filter may reject most of the best).
    snap = built if built is not None and built[0].usable and plan.predicate is None else None
    group_cells = plan.min_cells
    budget = plan.min_cells if plan.min_cells > 0 else len(index)
    if snap is not None and plan.min_cells > 0:
        # Groups are probed wider than the cell budget; their best sub-lists fill it.
        group_cells = math.ceil(plan.group_spread * plan.min_cells)
        if not snap[1] and FULL_SCAN_SHARE * len(index) <= plan.min_cells:
            # The budget is a large share of the store: one contiguous pass over every
            # sketch costs less than gathering the budget's rows (and misses nothing).
            group_cells = budget = len(index)
    probe = _probe(index, q, plan.n_probe, group_cells, _centroid_sketcher(index, sketcher))
    centroid_slots = set(probe.tolist())
    boosted = catalog.cells_with(plan.entities, plan.max_entity_share) if plan.entities else set()
    routed = (
        catalog.cells_with(plan.entities, plan.max_route_cells / max(len(catalog), 1))
        if plan.entities
        else set()
    )
    entity_slots = {index.loc[c].slot for c in routed if c in index.loc}
    slots = sorted(centroid_slots | entity_slots)

    use_sketch = (
        (sketcher is not None or snap is not None)
        and plan.predicate is None
        and plan.n_probe < n_groups
        and int(_group_sizes(index)[slots].sum()) > 16 * max(plan.rerank, 4 * plan.k)
    )
    if use_sketch and snap is not None:
        pool = _snapshot_pool(index, *snap, slots, q, budget, max(plan.rerank, 4 * plan.k))
        if boosted and plan.entity_boost > 0:
            slot_set = set(slots)
            pool.extend(index, (c for c in boosted if index.loc[c].slot in slot_set), q)
    elif use_sketch and sketcher is not None:
        pool = _sketch_pool(index, sketcher, slots, q, max(plan.rerank, 4 * plan.k))  # type: ignore[arg-type]
        if boosted and plan.entity_boost > 0:
            slot_set = set(slots)
            pool.extend(index, (c for c in boosted if index.loc[c].slot in slot_set), q)
    else:
        pool = _exact_pool(index, built, slots, q)
    lexical = _lexical_scores(catalog, plan)
    lexical_ids: set[str] = set()
    if lexical is not None:
        top_ids, _ = catalog.lexical.top_of(*lexical, max(plan.lexical_candidates, plan.k))
        pool.extend(index, top_ids, q)
        lexical_ids = set(top_ids)

    picked = _rank(index, pool, boosted, lexical, catalog, plan)
    fallback = len(picked) < plan.k and len(slots) < n_groups
    if fallback:
        pool = _exact_pool(index, built, range(n_groups), q)
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


def _sketcher(index: HierIndex, plan: SearchPlan) -> Sketcher | None:
    """The index's sketch caches when this store is large enough to use them."""
    if plan.sketch_rank <= 0:
        return None
    if index.sketcher is None or index.sketcher.rank != plan.sketch_rank:
        index.sketcher = Sketcher(plan.sketch_rank)
    sketcher: Sketcher = index.sketcher
    return sketcher if sketcher.ready(index) else None


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


SNAPSHOT_MIN_CELLS = 4096
# Every sketch is scored in one contiguous pass when the cell budget is at least this share
# of the store: gathering a row costs about four times reading it in order (25K Reuters
# cells: gathering the 12000 budget rows took 1.3 ms, scoring all 25K sketches 0.27 ms).
FULL_SCAN_SHARE = 0.25
# One snapshot cache per index, owned here (the index knows nothing of search caches).
_SNAPSHOTS: weakref.WeakKeyDictionary[HierIndex, SnapshotCache] = weakref.WeakKeyDictionary()


def _centroid_sketcher(index: HierIndex, sketcher: Sketcher | None) -> Sketcher | None:
    """The sketcher used to shortlist centroids (exactly re-scored), fitted or not.

    Shortlisting only orders centroids before the best four times ``n_probe`` are scored
    exactly, so it tolerates a basis that ranks cells too poorly to pre-score them.
    """
    if sketcher is not None:
        return sketcher
    fitted = index.sketcher
    if fitted is not None and fitted.basis is not None and fitted.energy >= 0.5:
        return fitted  # type: ignore[no-any-return]
    return None


def _snapshot(index: HierIndex, plan: SearchPlan) -> tuple[Snapshot, frozenset[str]] | None:
    """The index's sub-list snapshot and its dirty groups (see :mod:`.snapshot`).

    None for small stores (exact scoring is cheap there) and while the first snapshot is
    not yet due. Its sketches are used only when ``usable`` (enough residual energy); its
    packed vectors serve exact scans either way.
    """
    if not 0 < plan.sketch_rank < index.dim or len(index) < SNAPSHOT_MIN_CELLS:
        return None
    cache = _SNAPSHOTS.get(index)
    if cache is None or cache.rank != plan.sketch_rank or cache.list_size != plan.list_size:
        cache = SnapshotCache(plan.sketch_rank, plan.list_size)
        _SNAPSHOTS[index] = cache
    return cache.get(index)


def _exact_pool(
    index: HierIndex,
    built: tuple[Snapshot, frozenset[str]] | None,
    slots: Sequence[int] | range,
    q: np.ndarray,
) -> _Pool:
    """Exact cosines of every cell of the given slots.

    When that is every group and none changed since the snapshot was built, this is one
    product over the snapshot's packed vectors instead of one per group (5K SciFact cells
    in 124 groups: 0.9 ms -> about 0.15 ms).
    """
    n_groups = len(index.slot_groups)
    if built is not None and len(slots) == n_groups:
        snap, dirty = built
        if not dirty and len(snap.slot_of) == n_groups:
            return _Pool(snap.ids, matvec(snap.vectors, q))  # ids are never modified in place
    return _Pool(*_score_groups(index, slots, q))


def _snapshot_pool(
    index: HierIndex,
    snap: Snapshot,
    dirty: frozenset[str],
    slots: Sequence[int],
    q: np.ndarray,
    budget: int,
    keep: int,
) -> _Pool:
    """The probed groups' best sub-lists, scored by residual sketch; the best ``keep`` exactly.

    Sub-lists are ranked by the cosine of their mean; cells of the best ones, up to
    ``budget`` cells, are scored as ``q . mean + sketch . (q P)`` in one gather and one
    product, and the best ``keep`` of those are scored exactly. Probed groups that changed
    since the snapshot was built (``dirty``) are scored exactly from their own blocks.
    """
    if dirty:
        groups = index.slot_groups
        live, clean = [], []
        for s in slots:
            gid = groups[s].gid
            if gid in dirty:
                live.append(s)
            else:
                clean.append(snap.slot_of[gid][0])
        built = np.array(clean, np.int64)
        live_ids, live_scores = _score_groups(index, live, q)
        budget -= len(live_ids)
    else:
        built = np.asarray(slots, np.int64)
    first = snap.first_list[built]
    lists = ranges(first, snap.first_list[built + 1] - first)
    base = snap.means[lists] @ q
    lens = snap.list_len[lists]
    if int(lens.sum()) > budget:
        order = np.argsort(-(base * snap.inv_norms[lists]), kind="stable")
        need = int(np.searchsorted(np.cumsum(lens[order]), max(budget, 1))) + 1
        order = order[:need]
        lists, base, lens = lists[order], base[order], lens[order]
    if lists.size == snap.n_lists and not dirty:
        # Every list, in packed order (slots are sorted): no gather needed.
        rows = np.arange(snap.sketches.shape[0])
        approx = matvec(snap.sketches, q @ snap.basis)
    else:
        rows = ranges(snap.list_start[lists], lens)
        approx = matvec(np.take(snap.sketches, rows, axis=0), q @ snap.basis)
    approx += np.repeat(base, lens)
    if rows.size > keep:
        rows = rows[top_indices(approx, keep)]
    at = snap.position[rows]
    ids = snap.ids
    pool = _Pool([ids[i] for i in at.tolist()], np.take(snap.vectors, at, axis=0) @ q)
    if dirty and live_ids:
        pool.ids = [*pool.ids, *live_ids]
        pool.scores = np.concatenate([pool.scores, live_scores])
    return pool


def _probe(
    index: HierIndex, q: np.ndarray, n_probe: int, min_cells: int, sketcher: Sketcher | None
) -> np.ndarray:
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
    if want >= n_groups:
        cand = np.arange(n_groups)
        sims = matvec(index.centroids, q)
    elif sketcher is not None and n_groups > 16 * want:
        approx = matvec(sketcher.of_centroids(index), sketcher.project(q))
        cand = top_indices(approx, 4 * want)
        sims = np.empty(n_groups, np.float32)
        sims[cand] = index.centroids[cand] @ q
        cand = cand[np.argpartition(-sims[cand], want - 1)[:want]]
    else:
        sims = matvec(index.centroids, q)
        cand = np.argpartition(-sims, want - 1)[:want]
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


def _sketch_pool(
    index: HierIndex, sketcher: Sketcher, slots: Sequence[int], q: np.ndarray, keep: int
) -> _Pool:
    """Score the slots' cells by sketch, then the best ``keep`` of them exactly."""
    qr = sketcher.project(q)
    groups = [index.slot_groups[s] for s in slots]
    approx = np.concatenate([sketcher.of_group(g) @ qr for g in groups])
    offsets = np.cumsum([0] + [g.n for g in groups])
    top = np.sort(top_indices(approx, keep))
    owner = np.searchsorted(offsets, top, side="right") - 1
    rows = (top - offsets[owner]).tolist()
    # One fancy-indexed product per group holding picks (picks are sorted by group).
    bounds = [0, *(np.flatnonzero(owner[1:] != owner[:-1]) + 1).tolist(), len(rows)]
    owners = owner.tolist()
    ids: list[str] = []
    parts: list[np.ndarray] = []
    for a, b in itertools.pairwise(bounds):
        group = groups[owners[a]]
        picked = rows[a:b]
        parts.append(group.vecs[picked] @ q)
        group_ids = group.ids
        ids.extend([group_ids[r] for r in picked])
    return _Pool(ids, np.concatenate(parts))


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
