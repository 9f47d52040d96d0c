"""The in-memory vector hierarchy: groups as contiguous float32 blocks, centroids in one matrix.

Each group keeps its cells' unit vectors in one growable float32 block (IVF-style list), the
float64 sum of its members (so the centroid is an exact running mean) and a version counter.
Centroids live in one (G, d) matrix whose row ``slot`` belongs to ``slot_groups[slot]``, and
the sums in a (G, d) float64 matrix alongside (a group's ``total`` is a view of its row);
removing a group moves the last rows into its slot so the matrices stay dense.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from magnetic_core._index import kernels
from magnetic_core._index.assign import ChunkRun, Scratch
from magnetic_core._index.clustering import two_means
from magnetic_core._index.filing import Filing
from magnetic_core._index.group import Group
from magnetic_core._index.sketch import Sketch

__all__ = ["Group", "HierIndex"]


class HierIndex:
    """Groups over cells, with vectorised online assignment and bounded group size.

    Args:
        dim: vector dimension.
        max_group_size: a group that grows past this is split by 2-means.
        rebalance_from: see the comment in the constructor (0: never).
        writer: a token unique to this writer, appended to the group ids it creates
            (``g<n>-<writer>``), so processes writing one namespace never mint the same id;
            empty gives plain ``g<n>`` ids (one writer, as in tests and benchmarks).
        sketch_from: from this many groups on, a large assignment call bounds centroid
            scores with a low-rank sketch and scores only the few that can win
            (:mod:`magnetic_core._index.sketch`; same decisions); 0: never.
    """

    def __init__(
        self,
        dim: int,
        max_group_size: int,
        rebalance_from: int = 0,
        writer: str = "",
        sketch_from: int = 2048,
    ) -> None:
        self.dim = dim
        self.writer = writer
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
        # Norm of each sum when its centroid row was last written (_refresh).
        self._norms = np.zeros(64, np.float64)
        self.loc: dict[str, Group] = {}
        self._seq: dict[str, int] | None = {}
        # A snapshot's sequence numbers (ids, numbers), made a dict on first use (writes):
        # a memory that only searches never reads them.
        self._seq_pending: tuple[Sequence[str], np.ndarray] | None = None
        self._next_gid = 0
        self._next_seq = 0
        self.moved: set[str] = set()
        self.centroid_epoch = 0
        self.sizes_cache: tuple[int, np.ndarray] | None = None
        # During assign(): rows filed but not yet in their groups' blocks (filing.py).
        self._filing: Filing | None = None
        self.sketch_from = sketch_from
        self._sketch: Sketch | None = None
        # Whether the sketch's projections follow the centroid rows (inside assign() only).
        self._sketch_live = False

    # -- structure -------------------------------------------------------------------
    @property
    def centroids(self) -> np.ndarray:
        """The live (G, d) centroid matrix (a view)."""
        return self._centroids[: len(self.slot_groups)]

    def __len__(self) -> int:
        return len(self.loc)

    @property
    def seq(self) -> dict[str, int]:
        """Cell id -> its sequence number (insertion order, kept across regroupings)."""
        seq = self._seq
        if seq is None:
            # Readers may get here together (under the read lock): each makes the same dict.
            pending = self._seq_pending
            if pending is None:  # another reader made it meanwhile (_seq is set first)
                return self._seq  # type: ignore[return-value]
            seq = dict(zip(pending[0], pending[1].tolist(), strict=True))
            self._seq = seq
            self._seq_pending = None
        return seq

    def restore_seqs(self, ids: Sequence[str], numbers: np.ndarray) -> None:
        """Take the sequence numbers of a snapshot's cells (into an index holding no other)."""
        if self._seq or self._seq_pending is not None:
            raise ValueError("sequence numbers are restored into an index without any")
        self._seq, self._seq_pending = None, (ids, np.asarray(numbers, np.int64))
        self._next_seq = max(self._next_seq, int(numbers.max()) + 1 if len(ids) else 0)

    def vector(self, cid: str) -> np.ndarray:
        group = self.loc[cid]
        return group.vecs[group.rows[cid]]

    def vectors(self, cids: Sequence[str]) -> np.ndarray:
        """The unit vectors of the given (stored) cells, one row each."""
        out = np.empty((len(cids), self.dim), np.float32)
        loc = self.loc
        for i, cid in enumerate(cids):
            group = loc[cid]
            out[i] = group.vecs[group.rows[cid]]
        return out

    def new_gid(self) -> str:
        """A group id not used before: ``g<n>``, with ``-<writer>`` when a writer is set."""
        gid = f"g{self._next_gid}-{self.writer}" if self.writer else f"g{self._next_gid}"
        self._next_gid += 1
        return gid

    def note_gid(self, gid: str) -> None:
        """Keep generated numbers above an existing id's (``g<n>`` or ``g<n>-<writer>``).

        Used when reopening, so ids stay readable and growing; uniqueness across writers
        comes from the writer token.
        """
        number = gid[1:].partition("-")[0]
        if gid.startswith("g") and number.isdigit():
            self._next_gid = max(self._next_gid, int(number) + 1)

    def reserve(self, slots: int) -> None:
        """Make room for ``slots`` centroid rows (the matrices keep their live rows)."""
        size = self._centroids.shape[0]
        if slots <= size:
            return
        while size < slots:
            size *= 2
        live = len(self.slot_groups)
        grown = np.empty((size, self.dim), np.float32)
        grown[:live] = self._centroids[:live]
        self._centroids = grown
        totals = np.zeros((size, self.dim), np.float64)
        totals[:live] = self._totals[:live]
        self._totals = totals
        norms = np.zeros(size, np.float64)
        norms[:live] = self._norms[:live]
        self._norms = norms
        if self._sketch_live:
            self._sketch.reserve(size)  # type: ignore[union-attr]
        for other in self.slot_groups:
            other.total = totals[other.slot]

    def _add_group(self, gid: str | None = None) -> Group:
        self.reserve(len(self.slot_groups) + 1)
        group = self._adopt_slot(gid)
        group.total[:] = 0.0
        return group

    def _adopt_slot(self, gid: str | None = None) -> Group:
        """A group for the next slot, its sum the row already there."""
        group = Group(gid or self.new_gid(), self.dim, limit=self.max_group_size + 1)
        group.slot = len(self.slot_groups)
        group.total = self._totals[group.slot]
        self.slot_groups.append(group)
        self.groups[group.gid] = group
        self.centroid_epoch += 1
        return group

    def adopt_slots(self, live: int) -> None:
        """Groups for slots up to ``live`` that the compiled loop founded (sums written)."""
        while len(self.slot_groups) < live:
            self._adopt_slot()

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
            self._norms[slot] = self._norms[last]
            tail.total = self._totals[slot]
            if self._sketch_live:
                self._sketch.move(last, slot)  # type: ignore[union-attr]
            moved = (last, slot)
        self.slot_groups.pop()
        self.centroid_epoch += 1
        return moved

    def _refresh(self, group: Group) -> None:
        if self._filing is not None:  # a degenerate sum's fallback reads the members
            self._filing.flush(group.slot)
        self._centroids[group.slot], self._norms[group.slot] = group.centroid_and_norm()
        self.centroid_epoch += 1
        if self._sketch_live:
            self._sketch.update(self._centroids, [group.slot])  # type: ignore[union-attr]

    def _refresh_many(self, groups: Iterable[Group]) -> None:
        """:meth:`_refresh` for many groups at once (groups no longer in the index skipped)."""
        self.refresh_slots(np.array([g.slot for g in groups if self.groups.get(g.gid) is g]))

    def refresh_slots(self, slots: np.ndarray) -> None:
        """:meth:`_refresh` for the groups in these (live, distinct) slots."""
        if not slots.size:
            return
        slots = np.asarray(slots, np.int64)
        rows = kernels.centroid_rows(self._totals, self._norms, self._centroids, slots)
        if self._sketch_live:
            self._sketch.update(self._centroids, slots, rows)  # type: ignore[union-attr]
        norms = self._norms[slots]
        if norms.min() < 1e-12:  # a degenerate sum: Group.centroid's fallback
            for slot in slots[norms < 1e-12].tolist():
                self._refresh(self.slot_groups[slot])
        self.centroid_epoch += 1

    # -- single-cell operations ------------------------------------------------------
    def place(self, cid: str, vec: np.ndarray, gid: str, seq: int | None = None) -> None:
        """Put a cell in a named group (creating it); used when rebuilding from storage."""
        group = self.groups.get(gid) or self._add_group(gid)
        self.note_gid(gid)
        group.append(cid, vec)
        self.loc[cid] = group
        self.seq[cid] = self._take_seq(seq)

    @property
    def totals(self) -> np.ndarray:
        """The live (G, d) float64 sums of the groups' members, by slot (a view)."""
        return self._totals[: len(self.slot_groups)]

    def finish_placing(self, totals: np.ndarray | None = None) -> None:
        """Recompute every centroid (after a run of :meth:`place`).

        Args:
            totals: the groups' sums by slot, as :attr:`totals` gave them (from a
                snapshot); summed from the members when not given.
        """
        if totals is not None:
            self._totals[: len(self.slot_groups)] = totals
        for group in self.slot_groups:
            if totals is None:
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
        all centroids is one (B, G) product (past ``sketch_from`` groups, a low-rank sketch
        of it that bounds every score, with exact scores for the centroids that can win:
        :mod:`magnetic_core._index.sketch`). When a row joins a group, that group's column
        is updated for the rows after it from the chunk's Gram matrix (score times the old
        norm of the group's sum, plus the Gram entry, over the new norm); after a split or
        a removal the columns are recomputed from the refreshed centroids. Centroid rows of
        the groups a chunk changed are written once, at its end.

        Those scores are rounded differently from a direct product, so every decision is
        taken with a proven bound ``eps`` on their error (:class:`_ScoreBound`): a join or
        a new group follows from them only when no score within ``eps`` could change it;
        otherwise (a best score near the threshold, or a near tie) the candidate groups are
        scored exactly (``ChunkRun._exact_best``), which a one-cell chunk does the same way.
        The loop over a chunk's rows is compiled (:mod:`magnetic_core._index.assign`); rows
        reach their groups' blocks once per group and call (:mod:`magnetic_core._index.filing`).
        """
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        threshold = float(threshold)
        scratch = Scratch()
        filing = self._filing = Filing(self, ids, x)
        start = 0
        try:
            while start < len(ids):
                end = start + chunk
                run = ChunkRun(
                    self, ids[start:end], x[start:end], threshold, scratch, filing, start
                )
                start += run.run()
        finally:
            filing.flush_all()
            self._filing = None
            self._sketch_live = False

    def split(self, group: Group) -> Group:
        """Split a group in two by 2-means; returns the new group. Moved cells are noted.

        The smaller side of the 2-means split moves to the new group as one block (each
        moved cell is rewritten in storage); the others stay, in their order.
        """
        view = group.view
        mask = two_means(view)
        if 2 * int(mask.sum()) > mask.shape[0]:
            mask = ~mask
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
        self.loc.update(dict.fromkeys(moved, new))
        self.moved.update(moved)
        self._refresh(group)
        self._refresh(new)
        return new

    def merge(self, keep: Group, absorb: Group) -> list[str]:
        """Move every cell of ``absorb`` into ``keep``; returns the moved ids."""
        moved = list(absorb.ids)
        keep.extend(moved, absorb.view)
        self.loc.update(dict.fromkeys(moved, keep))
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
