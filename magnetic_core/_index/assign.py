"""Batch online assignment: one chunk of rows filed under the centroids, in order.

:class:`ChunkRun` prepares a chunk's scores (one (B, G) product with the centroids, the
chunk's Gram matrix) and drives the compiled loop (:func:`kernels.assign_rows`); it handles
the events the loop hands back with the index's own methods (exact scores, moves of stored
ids, splits, refreshes, rebalancing) and files the rows the loop placed into their groups'
blocks, one block copy per group.

The loop's scores are rounded differently from a direct product, so every decision is
taken with a proven bound ``eps`` on their error: with ``u = 2**-24`` and
``gamma_d = d u / (1 - d u)``, a float32 product (BLAS, any summation order) of a row
``x`` with a centroid is off by at most ``gamma_d |x|``, and the centroid's rounding adds
``u |x|``. A column updated incrementally (each row's dot product with the group's sum,
``score * old norm``, plus the joined row's Gram entry, over the new norm, whose square is
updated the same way) then has its dot products off by at most
``|x| M (gamma_d + (2 + 5 s) u)``, where ``M`` (the mass) is the sum of the norms that went
into the group's sum and ``s`` how many times the float32 column was rewritten (five
roundings each); the score is off by that times ``(r + 2 r^2) / M`` with ``r = M / norm``.
The exact score it is compared with (:meth:`ChunkRun._exact_best`) is within ``u |x|`` of
the true one. The bound is twice the sum, plus a tiny absolute term
(:func:`kernels.score_bound`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from magnetic_core._index import kernels, sketch
from magnetic_core._index.filing import Filing

if TYPE_CHECKING:
    from magnetic_core._index.group import Group
    from magnetic_core._index.index import HierIndex

__all__ = ["ChunkRun", "Scratch"]

_U = 2.0**-24  # unit roundoff of float32


class Scratch:
    """Buffers reused across the chunks of one :meth:`HierIndex.assign` call."""

    def __init__(self) -> None:
        self._f32 = np.empty(0, np.float32)
        self._gram = np.empty(0, np.float32)
        self._flags = np.empty(0, np.bool_)

    def sims(self, rows: int, cols: int) -> np.ndarray:
        """A (rows, cols) float32 buffer, C-contiguous."""
        if self._f32.size < rows * cols:
            self._f32 = np.empty(max(rows * cols, 2 * self._f32.size), np.float32)
        return self._f32[: rows * cols].reshape(rows, cols)

    def flags(self, rows: int, cols: int) -> np.ndarray:
        """A (rows, cols) boolean buffer, C-contiguous."""
        if self._flags.size < rows * cols:
            self._flags = np.empty(max(rows * cols, 2 * self._flags.size), np.bool_)
        return self._flags[: rows * cols].reshape(rows, cols)

    def gram(self, rows: int) -> np.ndarray:
        """A (rows, rows) float32 buffer, C-contiguous."""
        if self._gram.size < rows * rows:
            self._gram = np.empty(rows * rows, np.float32)
        return self._gram[: rows * rows].reshape(rows, rows)


class ChunkRun:
    """The assignment of one chunk of rows (ids new or stored), equal to one at a time."""

    def __init__(
        self,
        index: HierIndex,
        ids: Sequence[str],
        x: np.ndarray,
        threshold: float,
        scratch: Scratch,
        filing: Filing | None = None,
        offset: int = 0,
    ) -> None:
        """``filing`` holds the call's pending rows (``ids``/``x`` start at its row
        ``offset``); without one the chunk is a call of its own, filed when it ends."""
        self.index, self.ids, self.x, self.threshold = index, ids, x, threshold
        self.own = filing is None
        self.filing = Filing(index, ids, x) if filing is None else filing
        self.offset = offset
        b, g0 = len(ids), len(index.slot_groups)
        # Each row founds at most one group and each split adds one: width bounds the slots.
        width = g0 + 2 * b + 1
        index.reserve(width)
        self.filing.reserve(width)
        self.sims = scratch.sims(b, width)
        self.bound = scratch.flags(b, width)
        self.sketch = sketch.for_chunk(index, len(self.filing.ids)) if g0 else None
        if self.sketch is not None:
            self._sketch_scores(g0)
        elif g0:
            np.matmul(x, index.centroids.T, out=self.sims[:, :g0])
        self.gram = scratch.gram(b)
        np.matmul(x, x.T, out=self.gram)
        self.sq = np.einsum("ij,ij->i", x, x, dtype=np.float64)
        self.norms_l = np.sqrt(self.sq)
        self.stored = self._stored_flags()
        self.sizes = self.filing.sizes
        self.changed = np.zeros(width, np.bool_)
        self.ch_state = np.zeros((width, 3), np.float64)
        self.out_slot = np.full(b, -1, np.int64)
        dim = x.shape[1]
        gamma = dim * _U / (1.0 - dim * _U)
        scale = 2.0 * float(self.norms_l.max()) if b else 0.0
        eps = kernels.score_bound(gamma, scale, 1.0, 0.0)
        self.scalars = np.array([1.0, 0.0, eps, gamma, scale], np.float64)
        self.seq = index._next_seq

    def _sketch_scores(self, g0: int) -> None:
        """Exact scores for the centroids that can win, flagged upper bounds elsewhere."""
        sk = self.sketch
        assert sk is not None
        xq = self.x @ sk.basis
        np.matmul(xq, sk.proj[:g0].T, out=self.sims[:, :g0])
        self.bound[:, g0:] = False
        kernels.bound_rows(
            self.sims, self.bound, self.x, sketch.residual_norms(self.x, xq), sk.res,
            self.index._centroids, g0, sketch.MARGIN,
        )  # fmt: skip

    def _stored_flags(self) -> np.ndarray:
        """Rows whose id is stored at the start, or comes again later in the chunk."""
        known, seen = self.index.seq, set()  # stored ones, filed or pending
        flags = np.zeros(len(self.ids), np.bool_)
        if self.filing.all_new:
            return flags
        if known.keys().isdisjoint(self.ids) and len(set(self.ids)) == len(self.ids):
            return flags  # all new and distinct: the usual bulk load, checked in C
        for i, cid in enumerate(self.ids):
            if cid in known or cid in seen:
                flags[i] = True
            seen.add(cid)
        return flags

    def run(self) -> int:
        """Assign the rows in order; returns how many (fewer than all after a rebalance)."""
        if not self.own:
            return self._run()
        self.index._filing = self.filing
        try:
            return self._run()
        finally:
            self.filing.flush_all()
            self.index._filing = None
            self.index._sketch_live = False

    def _run(self) -> int:
        index, b, filing = self.index, len(self.ids), self.filing
        start, forced = 0, -2
        while True:
            g = len(index.slot_groups)
            stop, why, g_after = kernels.assign_rows(
                self.sims, self.gram, self.x, self.sq, self.norms_l, self.stored,
                index._totals, index._norms, self.sizes, self.changed, self.ch_state,
                self.scalars, self.out_slot, self.bound, self.sketch is not None,
                filing.head, filing.link, self.offset, start, g,
                forced, index.max_group_size, len(index.seq), index._next_rebalance,
                self.threshold,
            )  # fmt: skip
            self._file(start, stop, g_after)
            start, forced = stop, -2
            if why == kernels.DONE:
                break
            if why == kernels.EXACT:
                forced = self._exact(stop)
                continue
            if why == kernels.STORED:
                self._move(stop)
                continue
            group = index.slot_groups[int(self.out_slot[stop - 1])]
            filing.flush(group.slot)  # both events read its members
            if why == kernels.SPLIT:
                new = index.split(group)
                for grp in (group, new):
                    self.sizes[grp.slot] = grp.n
                    self._exact_column(grp, stop)
            elif why == kernels.REFRESH:
                index._refresh(group)
                self._exact_column(group, stop)
            if len(index.seq) == index._next_rebalance:
                # Every centroid may move: the rest of the chunk starts afresh.
                self._finish()
                filing.flush_all()
                index._next_rebalance *= 2
                index.rebalance()
                filing.resync()
                return stop
        self._finish()
        return b

    def _finish(self) -> None:
        index = self.index
        index._next_seq = self.seq
        g = len(index.slot_groups)
        index.refresh_slots(np.flatnonzero(self.changed[:g]))

    def _file(self, start: int, stop: int, g_after: int) -> None:
        """Note rows ``start:stop`` (placed by the loop; their blocks wait in the filing)."""
        index = self.index
        index.adopt_slots(g_after)
        k = stop - start
        if k > 0:
            index.seq.update(zip(self.ids[start:stop], range(self.seq, self.seq + k)))
            self.seq += k

    def _exact(self, i: int) -> int:
        """The decision for row ``i`` from exact scores: a slot, or -1 for a new group."""
        g = len(self.index.slot_groups)
        row = self.sims[i, :g]
        if self.sketch is not None:
            self._resolve_top(i, g)
        floor = float(row.max()) - 2.0 * float(self.scalars[2])
        return self._exact_best(i, row, floor)

    def _exact_best(self, i: int, row: np.ndarray, floor: float) -> int:
        """The slot to join (-1: none), from exact scores of the columns at or above ``floor``.

        A score is the dot product of row ``i`` with the group's float32 centroid, computed
        exactly and rounded once (float32 products are exact in float64; ``math.fsum``),
        so it does not depend on how the chunk was cut. Ties go to the lowest slot. The
        float64 products are summed by BLAS first, within ``gamma_d |x| |c|`` of the exact
        sums; only when that leaves the decision open (a near tie, a score at the
        threshold) are the sums taken exactly.
        """
        index = self.index
        slots = np.flatnonzero(row >= floor).tolist()
        centroids = np.empty((len(slots), self.x.shape[1]), np.float32)
        for k, slot in enumerate(slots):
            group = index.slot_groups[slot]
            if float(group.total.dot(group.total)) < 1e-20:
                self.filing.flush(slot)  # centroid() falls back to the members' mean
            centroids[k] = group.centroid()
        vec64 = self.x[i].astype(np.float64)
        scores = centroids.astype(np.float64) @ vec64
        dim = vec64.shape[0]
        norms = np.sqrt(np.einsum("ij,ij->i", centroids, centroids, dtype=np.float64))
        slack = 2.0 * dim * 2.0**-53 * float(self.norms_l[i]) * float(norms.max()) + 1e-300
        top = int(scores.argmax())
        others = np.delete(scores, top)
        # Gaps of two slacks leave the exact sums apart by a slack, far above their rounding.
        apart = not (others >= scores[top] - 4.0 * slack).any()
        if apart and abs(float(scores[top]) - self.threshold) > 2.0 * slack:
            return slots[top] if scores[top] >= self.threshold else -1
        best, best_score = -1, -math.inf
        for k, slot in enumerate(slots):
            score = math.fsum((vec64 * centroids[k]).tolist())
            if score > best_score:
                best, best_score = slot, score
        return best if best_score >= self.threshold else -1

    def _resolve_top(self, i: int, g: int) -> None:
        """Score flagged bounds while one is the row's best (a sum too short for the loop)."""
        row, flags = self.sims[i, :g], self.bound[i, :g]
        vec64 = self.x[i].astype(np.float64)
        while flags[best := int(row.argmax())]:
            centroid = self.index.slot_groups[best].centroid()
            row[best] = math.fsum((vec64 * centroid).tolist())
            flags[best] = False

    def _move(self, i: int) -> None:
        """Take row ``i``'s stored id out of its group, so the row files it afresh."""
        index, cid = self.index, self.ids[i]
        if cid in index.loc:  # its group's block must be in order before a row leaves it
            self.filing.flush(index.loc[cid].slot)
        else:  # filed earlier in this call (rare): find it the plain way
            self.filing.flush_all()
        old = index.loc[cid]
        moved = index.remove(cid)
        self.stored[i] = False
        if moved is not None:
            last, slot = moved
            self.sims[i:, slot] = self.sims[i:, last]
            self.bound[i:, slot] = self.bound[i:, last]
            self.filing.moved_slot(last, slot)
            self.changed[slot] = self.changed[last]
            self.ch_state[slot] = self.ch_state[last]
            self.changed[last] = False
        elif index.groups.get(old.gid) is old:
            self.sizes[old.slot] = old.n
            self._exact_column(old, i)
        else:
            self.changed[len(index.slot_groups)] = False

    def _exact_column(self, group: Group, start: int) -> None:
        """Recompute a column from the group's (refreshed) centroid row."""
        if start < len(self.ids):
            self.sims[start:, group.slot] = self.x[start:] @ self.index._centroids[group.slot]
            self.bound[start:, group.slot] = False
        self.changed[group.slot] = False
