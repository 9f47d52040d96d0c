"""One concept group: its cells' unit vectors as a growable float32 block, and its sum.

The block is an IVF-style list; the float64 sum of the members makes the centroid an exact
running mean. In an index, ``total`` is a view of the index's row for the group.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from magnetic_core._index.vectors import normalize

__all__ = ["Group"]


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
    # The most cells the group holds before it is split (its index's max_group_size + 1;
    # 0: none): the block grows to it instead of past it (see ``_capacity``).
    limit: int = 0

    def __post_init__(self) -> None:
        self.vecs = np.empty((8, self.dim), np.float32)
        self.total = np.zeros(self.dim, np.float64)

    @property
    def view(self) -> np.ndarray:
        """The live (n, d) block of member vectors (a view, not a copy)."""
        return self.vecs[: self.n]

    def grow(self, end: int = 0) -> np.ndarray:
        """A larger block holding at least ``end`` rows (about twice the capacity); returns it."""
        grown = np.empty((self._capacity(end), self.dim), np.float32)
        grown[: self.n] = self.vecs[: self.n]
        self.vecs = grown
        return grown

    def _capacity(self, end: int) -> int:
        """Rows of the block that replaces a full one, to hold ``end`` rows: twice as many
        (or ``end``), except that a block short of the split limit grows to the limit once
        the next doubling would pass it. A group splits once it holds ``limit`` cells, so
        rows past the limit would never be filled: with the default 256 cells a block went
        256 -> 512 rows (a copy of 256 rows into 768 KB) just before each split and kept
        that size after it; now it goes 128 -> 257 and stays."""
        old = self.vecs.shape[0]
        grown = max(2 * old, end)
        limit = self.limit
        if old < limit and 2 * grown > limit:
            grown = max(end, limit)
        return grown

    def append(self, cid: str, vec: np.ndarray) -> None:
        """Append one row (its sum updated)."""
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
        if len(cids):
            self.put(cids, vecs)
            self.total += vecs.sum(axis=0, dtype=np.float64)

    def put(self, cids: Sequence[str], vecs: np.ndarray, rows: np.ndarray | None = None) -> None:
        """Append many rows, leaving the sum alone (the caller has added them to it):
        ``vecs``, or with ``rows`` the rows ``vecs[rows]``, copied straight into the block
        (no gathered copy in between)."""
        k = len(cids)
        if not k:
            return
        end = self.n + k
        if end > self.vecs.shape[0]:
            self.grow(end)
        if rows is None:
            self.vecs[self.n : end] = vecs
        else:
            # (mode "clip" writes into ``out`` directly; "raise" would buffer it. The rows
            # are valid: they come from the caller's own chains.)
            np.take(vecs, rows, axis=0, out=self.vecs[self.n : end], mode="clip")
        self.rows.update(zip(cids, range(self.n, end)))
        self.ids.extend(cids)
        self.n = end
        self.version += k

    def pop(self, cid: str) -> np.ndarray:
        """Remove a row (the last row takes its place); returns its vector."""
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
        """The unit mean of the members (float32)."""
        return self.centroid_and_norm()[0]

    def centroid_and_norm(self) -> tuple[np.ndarray, float]:
        """The centroid row and the norm of ``total`` it was divided by."""
        # Same value as np.linalg.norm (sqrt of the dot product), without its call overhead.
        norm = math.sqrt(float(self.total.dot(self.total)))
        if norm < 1e-12:
            mean = self.view.mean(axis=0, keepdims=True)
            if self.n and not mean.any():
                # The members cancel exactly (opposite cells joined under a threshold near
                # -1, or merged): no direction is the mean's, and a NaN row would poison
                # search scores and the group cache; any member's direction will do.
                return self.view[0].copy(), norm
            return normalize(mean)[0], norm
        return (self.total / norm).astype(np.float32), norm
