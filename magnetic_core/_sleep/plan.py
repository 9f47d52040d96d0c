"""The numeric half of sleep mode: plan one consolidation pass over the hierarchy.

A pass repairs what online clustering leaves behind, in this order, on a copy of the
group sums (nothing here touches the index):

1. **merge** pairs of groups (neither a fragment) whose centroids would join each other
   (similarity ``s`` at least the join threshold ``t``) when the merged group stays
   coherent: its cohesion (mean member-to-centroid similarity, known in closed form from
   the two sums) is at least ``t`` and at least the split floor, so the pass never merges
   what it would split again; with an explicit ``merge_threshold``, the seed's rule
   (``s`` at or above it) instead;
2. **split** incoherent groups (cohesion under the split floor: the median cohesion of
   the groups that are not fragments) by 2-means where that raises cohesion and leaves
   no fragment, and oversized groups always;
3. one **Lloyd step**: every cell moves to the most similar centroid among its group's and
   that group's nearest ``neighbours`` centroids (bounded work), unless that would leave its
   old group a fragment;
4. **absorb** fragments (groups of at most ``fragment_size`` cells) into the nearest group
   that is not a fragment, cell by cell, closest first, down to the absorb floor (0.8 ``t``:
   the join threshold was met against younger centroids) and only as far as the cohesion
   gained by steps 1-3 pays for what absorbing costs, so a fitted pass does not lower the
   store's mean cohesion;
5. groups left empty are **dropped**; oversized ones are split again.

Thresholds are fitted to the data the way the join threshold is; every value can be set.
Centroid neighbours are found in row blocks, so memory stays O(block x G), never G x G.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from magnetic_core._index.clustering import two_means
from magnetic_core.errors import InvalidInputError

__all__ = ["PassPlan", "SleepConfig", "plan_pass"]

_EPS = 1e-6


@dataclass(frozen=True, kw_only=True)
class SleepConfig:
    """Settings of one sleep pass (``None`` means fitted to the data).

    Args:
        merge_threshold: centroid similarity for merging (the seed's rule, e.g. 0.85);
            ``None`` merges groups whose average members would join each other.
        absorb_threshold: similarity a fragment's cell needs to its new group's centroid.
        split_threshold: cohesion under which a group of at least ``min_split`` cells is split.
        fragment_size: groups of at most this many cells are fragments.
        min_split: smallest group considered for an incoherence split.
        neighbours: nearest centroids considered per group (merges, absorption, Lloyd).
        reassign: run the Lloyd step.
        block: centroid rows per block of the neighbour search.
    """

    merge_threshold: float | None = None
    absorb_threshold: float | None = None
    split_threshold: float | None = None
    fragment_size: int = 2
    min_split: int = 8
    neighbours: int = 16
    reassign: bool = True
    block: int = 1024

    def __post_init__(self) -> None:
        for name in ("merge_threshold", "absorb_threshold", "split_threshold"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not -1.0 <= value <= 1.0
            ):
                raise InvalidInputError(
                    f"SleepConfig.{name} must be None or a number in [-1, 1], got {value!r}",
                    hint=f"leave {name} unset to fit it to the data",
                )
        for name, low in (("fragment_size", 1), ("min_split", 4), ("neighbours", 1), ("block", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidInputError(
                    f"SleepConfig.{name} must be an integer >= {low}, got {value!r}"
                )


@dataclass
class PassPlan:
    """What one pass would do, by slot: the new slot of every cell, and what led there.

    Slots below ``n_groups`` are existing groups (``slot_groups`` order); higher slots are
    new groups made by splits. ``labels`` follows the concatenation of the groups' blocks.
    """

    n_groups: int
    labels: np.ndarray
    original: np.ndarray
    totals: np.ndarray
    sizes: np.ndarray
    merges: list[tuple[int, int, float]]
    absorbed: list[tuple[int, int]]
    splits: list[tuple[int, int]]
    thresholds: dict[str, float]
    sources: dict[str, str]

    @property
    def moved(self) -> np.ndarray:
        """Row positions of the cells whose slot changes."""
        return np.flatnonzero(self.labels != self.original)

    def cohesion(self) -> float:
        """Cell-weighted mean cohesion after the pass (sum of |total| over cells)."""
        n = int(self.sizes.sum())
        return float(np.linalg.norm(self.totals, axis=1).sum() / n) if n else 0.0


def plan_pass(
    vectors: np.ndarray,
    labels: np.ndarray,
    totals: np.ndarray,
    join_threshold: float,
    max_group_size: int,
    config: SleepConfig,
) -> PassPlan:
    """Plan one pass.

    Args:
        vectors: (N, d) unit vectors of every cell, grouped by slot.
        labels: (N,) slot of each row.
        totals: (G, d) float64 sums of each slot's members.
        join_threshold: the memory's join threshold in force.
        max_group_size: the size cap of a group.
        config: the pass settings.
    """
    g = totals.shape[0]
    state = _State(vectors, labels.copy(), totals.astype(np.float64, copy=True), max_group_size)
    thresholds, sources = _fit(state, join_threshold, config)
    plan = PassPlan(
        n_groups=g,
        labels=state.labels,
        original=labels,
        totals=state.totals,
        sizes=state.sizes,
        merges=[],
        absorbed=[],
        splits=[],
        thresholds=thresholds,
        sources=sources,
    )
    before = state.cohesion_sum()
    if g >= 2:
        plan.merges = _merge(state, join_threshold, thresholds, config)
    plan.splits = _split(state, thresholds["split"], config)
    if config.reassign and state.live() >= 2:
        _lloyd(state, config)
    if g >= 2:
        budget = None if config.absorb_threshold is not None else state.cohesion_sum() - before
        plan.absorbed = _absorb(state, thresholds["absorb"], join_threshold, budget, config)
    plan.splits += _split(state, None, config)
    plan.labels, plan.totals, plan.sizes = state.labels, state.totals, state.sizes
    return plan


class _State:
    """Cells' slots and each slot's sum and size, updated as the plan is made."""

    def __init__(
        self, vectors: np.ndarray, labels: np.ndarray, totals: np.ndarray, cap: int
    ) -> None:
        self.x, self.labels, self.totals, self.cap = vectors, labels, totals, cap
        self.sizes = np.bincount(labels, minlength=totals.shape[0]).astype(np.int64)

    def live(self) -> int:
        return int((self.sizes > 0).sum())

    def centroids(self) -> np.ndarray:
        norms = np.linalg.norm(self.totals, axis=1, keepdims=True)
        return (self.totals / np.maximum(norms, 1e-12)).astype(np.float32)

    def cohesion_sum(self) -> float:
        return float(np.linalg.norm(self.totals, axis=1).sum())

    def cohesions(self) -> np.ndarray:
        return np.linalg.norm(self.totals, axis=1) / np.maximum(self.sizes, 1)

    def member_sims(self) -> np.ndarray:
        return np.einsum("ij,ij->i", self.x, self.centroids()[self.labels])

    def move(self, rows: np.ndarray, to: np.ndarray) -> None:
        """Move rows to slots ``to`` (sums and sizes follow)."""
        if not rows.size:
            return
        src = self.labels[rows]
        np.subtract.at(self.totals, src, self.x[rows].astype(np.float64))
        np.add.at(self.totals, to, self.x[rows].astype(np.float64))
        np.subtract.at(self.sizes, src, 1)
        np.add.at(self.sizes, to, 1)
        self.labels[rows] = to
        self.totals[self.sizes == 0] = 0.0

    def add_slot(self) -> int:
        self.totals = np.vstack([self.totals, np.zeros((1, self.totals.shape[1]))])
        self.sizes = np.append(self.sizes, 0)
        return self.totals.shape[0] - 1

    def members(self) -> list[np.ndarray]:
        order = np.argsort(self.labels, kind="stable")
        bounds = np.searchsorted(self.labels[order], np.arange(self.totals.shape[0] + 1))
        return [order[bounds[s] : bounds[s + 1]] for s in range(self.totals.shape[0])]


def _fit(
    state: _State, join_threshold: float, config: SleepConfig
) -> tuple[dict[str, float], dict[str, str]]:
    """The absorb and split floors (and the merge rule's threshold) from the data."""
    real = state.sizes > config.fragment_size
    coh = state.cohesions()
    thresholds: dict[str, float] = {"join": float(join_threshold)}
    sources: dict[str, str] = {}
    if config.absorb_threshold is not None:
        thresholds["absorb"], sources["absorb"] = float(config.absorb_threshold), "configured"
    else:
        # The join threshold was met against younger centroids; a fragment's cell may join
        # somewhat below it, as far as the pass's cohesion gains pay for (see _absorb).
        thresholds["absorb"], sources["absorb"] = 0.8 * float(join_threshold), "fitted"
    if config.split_threshold is not None:
        thresholds["split"], sources["split"] = float(config.split_threshold), "configured"
    elif real.sum() >= 4:
        thresholds["split"] = float(np.median(coh[real]))
        sources["split"] = "fitted"
    else:
        thresholds["split"], sources["split"] = -1.0, "too few groups"
    if config.merge_threshold is not None:
        thresholds["merge"], sources["merge"] = float(config.merge_threshold), "configured"
    else:
        # The cohesion a merged group must keep: what the join threshold asks of a
        # joining cell, and no less than the split floor (or the pass would undo it).
        thresholds["merge"] = max(float(join_threshold), thresholds["split"])
        sources["merge"] = "fitted"
    return thresholds, sources


def _neighbours(centroids: np.ndarray, live: np.ndarray, m: int, block: int):
    """Each live row's ``m`` most similar other live rows, computed in row blocks."""
    g = centroids.shape[0]
    m = max(1, min(m, int(live.sum()) - 1))
    idx = np.zeros((g, m), np.int64)
    sim = np.full((g, m), -np.inf, np.float32)
    dead = ~live
    for start in range(0, g, block):
        s = centroids[start : start + block] @ centroids.T
        s[:, dead] = -np.inf
        rows = np.arange(s.shape[0])
        s[rows, rows + start] = -np.inf
        part = np.argpartition(-s, m - 1, axis=1)[:, :m]
        vals = np.take_along_axis(s, part, axis=1)
        order = np.argsort(-vals, axis=1, kind="stable")
        idx[start : start + block] = np.take_along_axis(part, order, axis=1)
        sim[start : start + block] = np.take_along_axis(vals, order, axis=1)
    return idx, sim


def _merge(
    state: _State, join: float, thresholds: dict[str, float], config: SleepConfig
) -> list[tuple[int, int, float]]:
    live = state.sizes > 0
    idx, sim = _neighbours(state.centroids(), live, config.neighbours, config.block)
    i = np.repeat(np.arange(idx.shape[0]), idx.shape[1])
    j, s = idx.ravel(), sim.ravel().astype(np.float64)
    keep = (i < j) & np.isfinite(s) & live[i] & live[j]
    i, j, s = i[keep], j[keep], s[keep]
    n_i, n_j = state.sizes[i], state.sizes[j]
    keep = n_i + n_j <= state.cap
    if config.merge_threshold is not None:
        keep &= s >= config.merge_threshold
    else:
        norms = np.linalg.norm(state.totals, axis=1)
        a, b = norms[i], norms[j]
        merged = np.sqrt(np.maximum(a * a + b * b + 2.0 * s * a * b, 0.0)) / (n_i + n_j)
        real = (n_i > config.fragment_size) & (n_j > config.fragment_size)
        keep &= real & (s >= join) & (merged >= thresholds["merge"])
    i, j, s = i[keep], j[keep], s[keep]
    used = np.zeros(state.totals.shape[0], bool)
    pairs: list[tuple[int, int, float]] = []
    for k in np.lexsort((j, i, -s)).tolist():
        a, b = int(i[k]), int(j[k])
        if used[a] or used[b]:
            continue
        used[a] = used[b] = True
        keep_slot, gone = (a, b) if state.sizes[a] >= state.sizes[b] else (b, a)
        pairs.append((keep_slot, gone, float(s[k])))
    members = state.members() if pairs else []
    for keep_slot, gone, _ in pairs:
        rows = members[gone]
        state.move(rows, np.full(rows.size, keep_slot))
    return pairs


def _absorb(
    state: _State, floor: float, join: float, budget: float | None, config: SleepConfig
) -> list[tuple[int, int]]:
    """Move fragments' cells into their nearest real group, closest first.

    With a ``budget`` (fitted mode) cells are absorbed only while the cohesion the pass
    gained so far pays for what absorbing costs, so the pass never lowers mean cohesion.
    """
    live = state.sizes > 0
    fragment = live & (state.sizes <= config.fragment_size)
    real = live & ~fragment
    if not fragment.any() or not real.any():
        return []
    centroids = state.centroids()
    rows = np.flatnonzero(fragment[state.labels])
    idx, _ = _neighbours(centroids, live, config.neighbours, config.block)
    cand = idx[state.labels[rows]]
    sims = np.einsum("bd,bmd->bm", state.x[rows], centroids[cand])
    sims[~real[cand]] = -np.inf
    best = sims.argmax(axis=1)
    top = sims[np.arange(rows.size), best]
    to = cand[np.arange(rows.size), best]
    order = np.argsort(-top, kind="stable")
    order = order[top[order] >= floor]
    if budget is not None:
        # What absorbing a cell costs the cohesion sum: its own 1, less what the target's
        # |total| gains (closed form, each cell taken alone); closest first, while the
        # cohesion the pass gained so far pays for it.
        norm = np.linalg.norm(state.totals, axis=1)[to[order]]
        grown = np.sqrt(norm * norm + 2.0 * norm * top[order] + 1.0)
        spent = np.cumsum(1.0 + norm - grown)
        order = order[spent <= max(budget, 0.0)]
    rows, to = rows[order], to[order]
    absorbed = sorted({(int(state.labels[r]), int(t)) for r, t in zip(rows, to)})
    state.move(rows, to)
    return absorbed


def _split(state: _State, floor: float | None, config: SleepConfig) -> list[tuple[int, int]]:
    """Split oversized groups, and (with ``floor``) incoherent ones where it pays."""
    coh = state.cohesions()
    over = state.sizes > state.cap
    todo = over.copy()
    if floor is not None:
        todo |= (state.sizes >= config.min_split) & (coh < floor)
    if not todo.any():
        return []
    members = state.members()
    splits: list[tuple[int, int]] = []
    pending = [(int(s), members[s]) for s in np.flatnonzero(todo)]
    while pending:
        slot, rows = pending.pop()
        vecs = state.x[rows]
        mask = two_means(vecs)
        if rows.size <= state.cap:  # an incoherence split must pay and leave no fragment
            small = min(int(mask.sum()), int((~mask).sum()))
            if small <= config.fragment_size or _split_gain(vecs, mask) < 0.02 * rows.size:
                continue
        new = state.add_slot()
        state.move(rows[mask], np.full(int(mask.sum()), new))
        splits.append((slot, new))
        for s, r in ((slot, rows[~mask]), (new, rows[mask])):
            if r.size > state.cap:
                pending.append((s, r))
    return splits


def _split_gain(vecs: np.ndarray, mask: np.ndarray) -> float:
    whole = float(np.linalg.norm(vecs.sum(axis=0, dtype=np.float64)))
    a = float(np.linalg.norm(vecs[mask].sum(axis=0, dtype=np.float64)))
    b = float(np.linalg.norm(vecs[~mask].sum(axis=0, dtype=np.float64)))
    return a + b - whole


def _lloyd(state: _State, config: SleepConfig, block: int = 2048) -> None:
    live = state.sizes > 0
    centroids = state.centroids()
    idx, _ = _neighbours(centroids, live, config.neighbours, config.block)
    cand_of = np.concatenate([np.arange(idx.shape[0])[:, None], idx], axis=1)
    n = state.x.shape[0]
    target = state.labels.copy()
    for start in range(0, n, block):
        lab = state.labels[start : start + block]
        cand = cand_of[lab]
        sims = np.einsum("bd,bmd->bm", state.x[start : start + block], centroids[cand])
        sims[~live[cand]] = -np.inf
        best = sims.argmax(axis=1)
        better = sims[np.arange(lab.size), best] > sims[:, 0] + _EPS
        target[start : start + block] = np.where(better, cand[np.arange(lab.size), best], lab)
    rows = np.flatnonzero(target != state.labels)
    if not rows.size:
        return
    out = np.bincount(state.labels[rows], minlength=state.sizes.size)
    left = state.sizes - out
    stranded = (left > 0) & (left <= config.fragment_size) & (state.sizes > config.fragment_size)
    rows = rows[~stranded[state.labels[rows]]]
    # Exact sums of the touched groups after the moves (no drift from subtracting).
    state.move(rows, target[rows])
    touched = np.unique(np.concatenate([state.labels[rows], target[rows]]))
    members = state.members()
    for s in touched.tolist():
        state.totals[s] = state.x[members[s]].sum(axis=0, dtype=np.float64)
