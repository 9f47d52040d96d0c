"""Exact cosines of whole groups and of named cells: the candidate pool and its products.

A single-query product in row blocks that BLAS keeps on the calling thread, the exact pass
over the probed groups (one compiled pass over their blocks, by address, in stores past
``KERNEL_CELLS`` probed cells), and the pool of candidates a search ranks.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from magnetic_core._index.index import HierIndex
from magnetic_core._search.scorer import Scorer, _kernels

__all__ = ["KERNEL_CELLS", "MATVEC_BLOCK", "Pool", "exact_pool", "group_sizes", "matvec"]


@dataclass
class Pool:
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


def exact_pool(
    index: HierIndex,
    scorer: Scorer | None,
    slots: Sequence[int] | range | np.ndarray,
    q: np.ndarray,
) -> Pool:
    """Exact cosines of every cell of the given slots (one compiled pass when the scorer
    describes the index, else one product per group block)."""
    if scorer is not None:
        return Pool(*scorer.exact(index, slots, q))
    return Pool(*_score_groups(index, slots, q))


def group_sizes(index: HierIndex) -> np.ndarray:
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
