"""The steps of one sleep pass, on the pass's working copy of the groups' sums and sizes.

:class:`PassState` holds every cell's slot and each slot's float64 sum and size; the steps
(:func:`merge`, :func:`split`, :func:`lloyd`, :func:`absorb`) change it in place and report
what they did. :func:`magnetic_core._sleep.plan.plan_pass` runs them in order and documents
the rules; nothing here touches the index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from magnetic_core._index.clustering import two_means
from magnetic_core._search.topk import best_per_row

if TYPE_CHECKING:
    from magnetic_core._sleep.plan import SleepConfig

__all__ = ["PassState", "absorb", "lloyd", "merge", "neighbours", "split"]

_EPS = 1e-6


class PassState:
    """Cells' slots and each slot's sum and size, updated as the plan is made.

    Args:
        vectors: (N, d) unit vectors of every cell.
        labels: (N,) slot of each row (changed in place).
        totals: (G, d) float64 sums by slot (changed in place; grows with new slots).
        cap: the size cap of a group.
    """

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


def neighbours(centroids: np.ndarray, live: np.ndarray, m: int, block: int):
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
        idx[start : start + block], sim[start : start + block] = best_per_row(s, m)
    return idx, sim


def merge(
    state: PassState, join: float, thresholds: dict[str, float], config: SleepConfig
) -> list[tuple[int, int, float]]:
    """Merge disjoint pairs of neighbouring groups, most similar first.

    Returns ``(kept slot, emptied slot, centroid similarity)`` per merge; the larger group
    is kept. The rule (fitted or ``merge_threshold``) is the one :func:`plan_pass` states.
    """
    live = state.sizes > 0
    idx, sim = neighbours(state.centroids(), live, config.neighbours, config.block)
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


def absorb(
    state: PassState, floor: float, join: float, budget: float | None, config: SleepConfig
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
    idx, _ = neighbours(centroids, live, config.neighbours, config.block)
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


def split(state: PassState, floor: float | None, config: SleepConfig) -> list[tuple[int, int]]:
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
    """How much a split raises the cohesion sum (|sum a| + |sum b| - |sum|)."""
    whole = float(np.linalg.norm(vecs.sum(axis=0, dtype=np.float64)))
    a = float(np.linalg.norm(vecs[mask].sum(axis=0, dtype=np.float64)))
    b = float(np.linalg.norm(vecs[~mask].sum(axis=0, dtype=np.float64)))
    return a + b - whole


def lloyd(state: PassState, config: SleepConfig, block: int = 2048) -> None:
    """One bounded Lloyd step: each cell to the best of its group's and its neighbours'
    centroids, unless that leaves its old group a fragment; touched sums are recomputed."""
    live = state.sizes > 0
    centroids = state.centroids()
    idx, _ = neighbours(centroids, live, config.neighbours, config.block)
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
