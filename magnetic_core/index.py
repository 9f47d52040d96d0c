"""The in-memory vector hierarchy: groups as contiguous float32 blocks, centroids in one matrix.

Each group keeps its cells' unit vectors in one growable float32 block (IVF-style list), the
float64 sum of its members (so the centroid is an exact running mean) and a version counter.
Centroids live in one (G, d) matrix whose row ``slot`` belongs to ``slot_groups[slot]``, and
the sums in a (G, d) float64 matrix alongside (a group's ``total`` is a view of its row);
removing a group moves the last rows into its slot so the matrices stay dense.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from magnetic_core.clustering import normalize, two_means

__all__ = ["Group", "HierIndex"]


@dataclass(eq=False)
class Group:
    """One concept group: its cells' vectors and ids, and its centroid bookkeeping."""

    gid: str
    dim: int
    slot: int = -1
    n: int = 0
    vecs: np.ndarray = field(default_factory=lambda: np.empty((0, 0), np.float32))
    ids: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    # In an index, a view of the index's row for this group (write it in place).
    total: np.ndarray = field(default_factory=lambda: np.empty(0))
    version: int = 0
    sketch: tuple[int, int, np.ndarray] | None = None
    # Norm of ``total`` when the centroid row was last written (HierIndex._refresh).
    norm: float = 0.0

    def __post_init__(self) -> None:
        self.vecs = np.empty((8, self.dim), np.float32)
        self.total = np.zeros(self.dim, np.float64)

    @property
    def view(self) -> np.ndarray:
        """The live (n, d) block of member vectors (a view, not a copy)."""
        return self.vecs[: self.n]

    def grow(self) -> np.ndarray:
        """Double the block's capacity; returns the new block."""
        grown = np.empty((self.vecs.shape[0] * 2, self.dim), np.float32)
        grown[: self.n] = self.vecs[: self.n]
        self.vecs = grown
        return grown

    def append(self, cid: str, vec: np.ndarray) -> None:
        if self.n == self.vecs.shape[0]:
            self.grow()
        self.vecs[self.n] = vec
        self.rows[cid] = self.n
        self.ids.append(cid)
        self.n += 1
        self.total += vec
        self.version += 1

    def extend(self, cids: Sequence[str], vecs: np.ndarray) -> None:
        """Append many rows at once (the sum gains their float64 sum, rounded as one block)."""
        k = len(cids)
        if not k:
            return
        end = self.n + k
        if end > self.vecs.shape[0]:
            grown = np.empty((max(self.vecs.shape[0] * 2, end), self.dim), np.float32)
            grown[: self.n] = self.vecs[: self.n]
            self.vecs = grown
        self.vecs[self.n : end] = vecs
        self.rows.update(zip(cids, range(self.n, end)))
        self.ids.extend(cids)
        self.n = end
        self.total += vecs.sum(axis=0, dtype=np.float64)
        self.version += k

    def pop(self, cid: str) -> np.ndarray:
        row = self.rows.pop(cid)
        vec = self.vecs[row].copy()
        last = self.n - 1
        if row != last:
            moved = self.ids[last]
            self.vecs[row] = self.vecs[last]
            self.ids[row] = moved
            self.rows[moved] = row
        self.ids.pop()
        self.n -= 1
        self.total -= vec
        if self.n and self.n % 64 == 0:
            # Re-sum now and then so float drift from many removals cannot accumulate.
            self.total[:] = self.view.sum(axis=0, dtype=np.float64)
        self.version += 1
        return vec

    def centroid(self) -> np.ndarray:
        # Same value as np.linalg.norm (sqrt of the dot product), without its call overhead.
        norm = math.sqrt(float(self.total.dot(self.total)))
        if norm < 1e-12:
            return normalize(self.view.mean(axis=0, keepdims=True))[0]
        return (self.total / norm).astype(np.float32)


_U = 2.0**-24  # unit roundoff of float32


class _ScoreBound:
    """A bound on the error of an approximate similarity score in :meth:`HierIndex.assign`.

    Scores from float32 products (BLAS, any summation order) are off by at most
    ``gamma_d |x| |c|`` with ``gamma_d = d u / (1 - d u)``; the centroid's own rounding and the
    final rounding add ``u |x|`` each. A column kept incrementally (``dot / norm`` with the
    dot products and the squared norm updated from Gram entries) is off by at most
    ``|x| (gamma_d + 2u) (r + 2 r^2)``, where ``r`` is the mass (sum of the norms that went
    into the group's sum) over the sum's norm. The bound returned is twice that, plus a
    tiny absolute term.
    """

    def __init__(self, dim: int, max_norm: float) -> None:
        self.unit = dim * _U / (1.0 - dim * _U) + 2.0 * _U
        self.scale = 2.0 * max_norm

    def __call__(self, ratio: float) -> float:
        return self.scale * (self.unit * (ratio + 2.0 * ratio * ratio) + 3.0 * _U) + 1e-9


class _Scratch:
    """Buffers reused across the chunks of one :meth:`HierIndex.assign` call."""

    def __init__(self) -> None:
        self._f32 = np.empty(0, np.float32)
        self._f64 = np.empty(0, np.float64)

    def sims(self, rows: int, cols: int) -> np.ndarray:
        if self._f32.size < rows * cols:
            self._f32 = np.empty(max(rows * cols, 2 * self._f32.size), np.float32)
        return self._f32[: rows * cols].reshape(rows, cols)

    def dots(self, rows: int, cols: int) -> np.ndarray:
        if self._f64.size < rows * cols:
            self._f64 = np.empty(rows * cols, np.float64)
        return self._f64[: rows * cols].reshape(rows, cols)


class HierIndex:
    """Groups over cells, with vectorised online assignment and bounded group size.

    Args:
        dim: vector dimension.
        max_group_size: a group that grows past this is split by 2-means.
    """

    def __init__(self, dim: int, max_group_size: int, rebalance_from: int = 0) -> None:
        self.dim = dim
        self.max_group_size = max_group_size
        # Online assignment files a cell under the best centroid *of its time*; centroids
        # drift and new groups appear, so older cells end up misfiled and routing degrades.
        # Each time the store reaches rebalance_from * 2**k cells (0: never), one Lloyd pass
        # refiles every cell under its most similar centroid.
        self.rebalance_from = rebalance_from
        self._next_rebalance = rebalance_from if rebalance_from > 0 else -1
        self.groups: dict[str, Group] = {}
        self.slot_groups: list[Group] = []
        self._centroids = np.empty((64, dim), np.float32)
        self._totals = np.zeros((64, dim), np.float64)
        self.loc: dict[str, Group] = {}
        self.seq: dict[str, int] = {}
        self._next_gid = 0
        self._next_seq = 0
        self.moved: set[str] = set()
        self.centroid_epoch = 0
        # Search-side caches (a magnetic_core.sketch.Sketcher), owned by the search module.
        self.sketcher: Any = None
        self.sizes_cache: tuple[int, np.ndarray] | None = None

    # -- structure -------------------------------------------------------------------
    @property
    def centroids(self) -> np.ndarray:
        """The live (G, d) centroid matrix (a view)."""
        return self._centroids[: len(self.slot_groups)]

    def __len__(self) -> int:
        return len(self.loc)

    def vector(self, cid: str) -> np.ndarray:
        group = self.loc[cid]
        return group.vecs[group.rows[cid]]

    def new_gid(self) -> str:
        gid = f"g{self._next_gid}"
        self._next_gid += 1
        return gid

    def note_gid(self, gid: str) -> None:
        """Keep generated ids above an existing ``g<number>`` id (used when reopening)."""
        if gid.startswith("g") and gid[1:].isdigit():
            self._next_gid = max(self._next_gid, int(gid[1:]) + 1)

    def _add_group(self, gid: str | None = None) -> Group:
        group = Group(gid or self.new_gid(), self.dim)
        group.slot = len(self.slot_groups)
        if group.slot == self._centroids.shape[0]:
            grown = np.empty((self._centroids.shape[0] * 2, self.dim), np.float32)
            grown[: group.slot] = self._centroids[: group.slot]
            self._centroids = grown
            totals = np.zeros((grown.shape[0], self.dim), np.float64)
            totals[: group.slot] = self._totals[: group.slot]
            self._totals = totals
            for other in self.slot_groups:
                other.total = totals[other.slot]
        group.total = self._totals[group.slot]
        group.total[:] = 0.0
        self.slot_groups.append(group)
        self.groups[group.gid] = group
        self.centroid_epoch += 1
        return group

    def _drop_group(self, group: Group) -> tuple[int, int] | None:
        """Remove an empty group; returns (from_slot, to_slot) when a row was moved."""
        slot, last = group.slot, len(self.slot_groups) - 1
        del self.groups[group.gid]
        group.total = group.total.copy()  # its row is about to be reused
        moved = None
        if slot != last:
            tail = self.slot_groups[last]
            self.slot_groups[slot] = tail
            tail.slot = slot
            self._centroids[slot] = self._centroids[last]
            self._totals[slot] = self._totals[last]
            tail.total = self._totals[slot]
            moved = (last, slot)
        self.slot_groups.pop()
        self.centroid_epoch += 1
        return moved

    def _refresh(self, group: Group) -> None:
        self._centroids[group.slot] = group.centroid()
        group.norm = math.sqrt(float(group.total.dot(group.total)))
        self.centroid_epoch += 1

    def _refresh_many(self, groups: Iterable[Group]) -> None:
        """:meth:`_refresh` for many groups at once (groups no longer in the index skipped)."""
        alive = [g for g in groups if self.groups.get(g.gid) is g]
        if not alive:
            return
        slots = np.array([g.slot for g in alive])
        totals = self._totals[slots]
        norms = np.sqrt(np.einsum("ij,ij->i", totals, totals))
        self._centroids[slots] = totals / np.maximum(norms, 1e-12)[:, None]
        for group, norm in zip(alive, norms.tolist(), strict=True):
            group.norm = norm
            if norm < 1e-12:
                self._refresh(group)
        self.centroid_epoch += 1

    # -- single-cell operations ------------------------------------------------------
    def place(self, cid: str, vec: np.ndarray, gid: str, seq: int | None = None) -> None:
        """Put a cell in a named group (creating it); used when rebuilding from storage."""
        group = self.groups.get(gid) or self._add_group(gid)
        self.note_gid(gid)
        group.append(cid, vec)
        self.loc[cid] = group
        self.seq[cid] = self._take_seq(seq)

    def finish_placing(self) -> None:
        """Recompute every centroid (after a run of :meth:`place`)."""
        for group in self.slot_groups:
            group.total[:] = group.view.sum(axis=0, dtype=np.float64)
            self._refresh(group)
        if self.rebalance_from > 0:
            # Resume the schedule where a store that grew to this size would be.
            self._next_rebalance = self.rebalance_from
            while self._next_rebalance <= len(self.loc):
                self._next_rebalance *= 2

    def rebalance(self) -> int:
        """One Lloyd pass: refile every cell under its most similar centroid.

        Groups left empty are dropped, groups grown past the cap are split, and every
        centroid is recomputed. Moved cells are noted for persistence.

        Returns:
            How many cells changed group.
        """
        groups = list(self.slot_groups)
        if len(groups) < 2:
            return 0
        centroids = self.centroids.copy()
        moves: list[tuple[str, Group, Group]] = []
        for group in groups:
            best = (group.view @ centroids.T).argmax(axis=1)
            for row in np.flatnonzero(best != group.slot).tolist():
                moves.append((group.ids[row], group, groups[int(best[row])]))
        for cid, src, dst in moves:
            dst.append(cid, src.pop(cid))
            self.loc[cid] = dst
            self.moved.add(cid)
        for group in groups:
            if group.n == 0:
                self._drop_group(group)
        for group in list(self.slot_groups):
            group.total[:] = group.view.sum(axis=0, dtype=np.float64)
            self._refresh(group)
        pending = [g for g in self.slot_groups if g.n > self.max_group_size]
        while pending:
            group = pending.pop()
            new = self.split(group)
            pending += [g for g in (group, new) if g.n > self.max_group_size]
        return len(moves)

    def _take_seq(self, seq: int | None) -> int:
        if seq is None:
            seq = self._next_seq
        self._next_seq = max(self._next_seq, seq + 1)
        return seq

    def remove(self, cid: str) -> tuple[int, int] | None:
        """Remove a cell; returns the slot move if its group emptied and was dropped."""
        group = self.loc.pop(cid)
        self.seq.pop(cid, None)
        self.moved.discard(cid)
        group.pop(cid)
        if group.n == 0:
            return self._drop_group(group)
        self._refresh(group)
        return None

    # -- batch assignment ------------------------------------------------------------
    def assign(
        self, ids: Sequence[str], vectors: np.ndarray, threshold: float, chunk: int = 256
    ) -> None:
        """Insert (or move, for existing ids) unit vectors with online clustering.

        The result equals inserting them one at a time in order. Each chunk's similarity to
        all centroids is one (B, G) product. A group that changes while the chunk is
        processed gets its column updated from the chunk's Gram matrix (its members' sum
        gains the joined row, then the column is divided by the sum's new norm), or
        recomputed as a (B, d) matrix-vector product after a split or a removal.

        These scores are rounded differently from a direct product, so decisions are taken
        with a proven error bound ``eps`` on every score: a join or a new group is decided
        from them only when no score within ``eps`` could change it. Otherwise (a best
        score near the threshold, or near-ties) the candidate groups are scored exactly
        (:meth:`_exact_best`), the same way whether a chunk holds one cell or many.
        """
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        threshold = float(threshold)
        scratch = _Scratch()
        start = 0
        while start < len(ids):
            start += self._assign_chunk(
                ids[start : start + chunk], x[start : start + chunk], threshold, scratch
            )

    def _assign_chunk(
        self, ids: Sequence[str], x: np.ndarray, threshold: float, scratch: _Scratch
    ) -> int:
        """Assign rows in order; returns how many (fewer than all after a rebalance)."""
        b = len(ids)
        groups = self.slot_groups
        g0 = len(groups)
        sims = scratch.sims(b, g0 + 2 * b + 1)
        if g0:
            np.matmul(x, self.centroids.T, out=sims[:, :g0])
        gram = x @ x.T
        x64 = x.astype(np.float64)
        sq = np.einsum("ij,ij->i", x, x, dtype=np.float64)
        sq_l: list[float] = sq.tolist()
        norm_l: list[float] = np.sqrt(sq).tolist()
        bound = _ScoreBound(self.dim, max(norm_l))
        eps = bound(1.0)
        worst = 1.0
        # Columns of groups changed in this chunk: ``dots[t, j]`` is row j's dot product
        # with the group's sum, ``norm2[t]`` that sum's squared norm, ``mass[t]`` the sum of
        # the norms that went into it (what the error bound grows with).
        dots = scratch.dots(3 * b + 3, b)
        col: dict[Group, int] = {}
        touched: list[Group] = []
        norm2: list[float] = []
        mass: list[float] = []
        loc, seqs = self.loc, self.seq

        def exact(group: Group, start: int) -> None:
            """Recompute a column from the group's (refreshed) centroid row."""
            if start < b:
                sims[start:, group.slot] = x[start:] @ self._centroids[group.slot]

        def track(group: Group, start: int) -> int:
            """Start following a group's column incrementally from its exact value."""
            t = col.get(group)
            if t is None:
                t = col[group] = len(touched)
                touched.append(group)
                norm2.append(0.0)
                mass.append(0.0)
            n0 = group.norm if group.n else 0.0
            if n0 > 0.0:
                np.multiply(sims[start:, group.slot], n0, out=dots[t, start:])
            else:
                dots[t, start:] = 0.0
            norm2[t] = n0 * n0
            mass[t] = n0
            return t

        for i in range(b):
            cid = ids[i]
            if cid in loc:
                old = loc[cid]
                moved = self.remove(cid)
                if moved is not None:
                    sims[i:, moved[1]] = sims[i:, moved[0]]
                elif self.groups.get(old.gid) is old:
                    exact(old, i)
                    if old in col:
                        track(old, i)
            g = len(groups)
            group: Group | None = None
            if g:
                row = sims[i, :g]
                best = int(row.argmax())
                top = float(row[best])
                if top >= threshold + eps:
                    # Join the best group if no other score is within 2 eps of it.
                    row[best] = -np.inf
                    second = float(row[int(row.argmax())])
                    row[best] = top
                    if second < top - 2.0 * eps:
                        group = groups[best]
                    else:
                        group = self._exact_best(x[i], row, top - 2.0 * eps, threshold)
                elif top >= threshold - eps:
                    group = self._exact_best(x[i], row, top - 2.0 * eps, threshold)
            if group is None:
                group = self._add_group()
                t = track(group, i)
            else:
                t = col.get(group, -1)
                if t < 0:
                    t = track(group, i)
            # group.append(cid, x[i]), inlined (the float64 row adds the same as float32)
            vecs, n = group.vecs, group.n
            if n == vecs.shape[0]:
                vecs = group.grow()
            vecs[n] = x[i]
            group.rows[cid] = n
            group.ids.append(cid)
            group.n = n + 1
            group.total += x64[i]
            group.version += 1
            loc[cid] = group
            seqs[cid] = self._next_seq
            self._next_seq += 1
            n2 = norm2[t] + 2.0 * float(dots[t, i]) + sq_l[i]
            m = mass[t] + norm_l[i]
            norm2[t], mass[t] = n2, m
            if group.n > self.max_group_size:
                new = self.split(group)
                for part in (group, new):
                    exact(part, i + 1)
                    track(part, i + 1)
            elif i + 1 < b:
                if n2 > 0.0 and m * m <= 9.0 * n2:
                    norm = math.sqrt(n2)
                    ahead = dots[t, i + 1 :]
                    ahead += gram[i, i + 1 :]
                    np.multiply(ahead, 1.0 / norm, out=sims[i + 1 :, group.slot])
                    if m > worst * norm:
                        worst = m / norm
                        eps = bound(worst)
                else:
                    # The sum is small next to what went into it: start afresh, exactly.
                    self._refresh(group)
                    exact(group, i + 1)
                    track(group, i + 1)
            if len(loc) == self._next_rebalance:
                # Every centroid may move: the rest of the chunk starts afresh.
                self._refresh_many(touched)
                self._next_rebalance *= 2
                self.rebalance()
                return i + 1
        self._refresh_many(touched)
        return b

    def _exact_best(
        self, vec: np.ndarray, row: np.ndarray, floor: float, threshold: float
    ) -> Group | None:
        """The group to join, from exact scores of the columns at or above ``floor``.

        A score is the dot product of ``vec`` with the group's float32 centroid, computed
        exactly and rounded once (float32 products are exact in float64; ``math.fsum``),
        so it does not depend on how the chunk was cut. Ties go to the lowest slot.
        """
        vec64 = vec.astype(np.float64)
        best, best_score = None, -math.inf
        for slot in np.flatnonzero(row >= floor).tolist():
            group = self.slot_groups[slot]
            score = math.fsum((vec64 * group.centroid()).tolist())
            if score > best_score:
                best, best_score = group, score
        return best if best_score >= threshold else None

    def split(self, group: Group) -> Group:
        """Split a group in two by 2-means; returns the new group. Moved cells are noted.

        The cells the 2-means mask picks move to the new group as one block; the others
        stay, in their order.
        """
        view = group.view
        mask = two_means(view)
        take = np.flatnonzero(mask)
        keep = np.flatnonzero(~mask)
        moved = [group.ids[r] for r in take.tolist()]
        kept = [group.ids[r] for r in keep.tolist()]
        new = self._add_group()
        new.extend(moved, view[take])
        group.vecs[: len(kept)] = view[keep]
        group.ids[:] = kept
        group.rows.clear()
        group.rows.update(zip(kept, range(len(kept))))
        group.n = len(kept)
        group.total[:] = group.view.sum(axis=0, dtype=np.float64)
        group.version += len(moved)
        loc = self.loc
        for cid in moved:
            loc[cid] = new
        self.moved.update(moved)
        self._refresh(group)
        self._refresh(new)
        return new

    def merge(self, keep: Group, absorb: Group) -> list[str]:
        """Move every cell of ``absorb`` into ``keep``; returns the moved ids."""
        moved = list(absorb.ids)
        keep.extend(moved, absorb.view)
        loc = self.loc
        for cid in moved:
            loc[cid] = keep
        absorb.ids.clear()
        absorb.rows.clear()
        absorb.n = 0
        self._drop_group(absorb)
        self._refresh(keep)
        self.moved.update(moved)
        return moved

    def regroup(self, threshold: float, chunk: int = 256) -> None:
        """Rebuild the whole hierarchy with a new threshold, in original insertion order."""
        order = sorted(self.loc, key=self.seq.__getitem__)
        vecs = np.stack([self.vector(c) for c in order]) if order else None
        seqs = [self.seq[c] for c in order]
        for group in self.slot_groups:
            group.total = group.total.copy()  # the rows are about to be reused
        self.groups.clear()
        self.slot_groups.clear()
        self.loc.clear()
        self.seq.clear()
        self._next_gid = 0
        if vecs is None:
            return
        self.assign(order, vecs, threshold, chunk)
        for cid, s in zip(order, seqs, strict=True):
            self.seq[cid] = s
        self.moved.update(order)

    def take_moved(self) -> set[str]:
        """Ids whose group changed since the last call (to persist), then forget them."""
        moved, self.moved = self.moved, set()
        return moved

    def members(self, gids: Iterable[str]) -> list[str]:
        return [cid for gid in gids for cid in self.groups[gid].ids]
