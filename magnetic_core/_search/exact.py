"""Exact cosines of whole groups and of named cells: the candidate pool and its products.

A single-query product in row blocks that BLAS keeps on the calling thread, the exact pass
over the probed groups (one compiled pass over their blocks, by address, in stores past
``KERNEL_CELLS`` probed cells), and the pool of candidates a search ranks.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from magnetic_core._index.index import HierIndex
from magnetic_core._search.scorer import Scorer, _kernels, best_cells

if TYPE_CHECKING:
    from magnetic_core._text.lexical import LexicalIndex

__all__ = ["KERNEL_CELLS", "MATVEC_BLOCK", "Pool", "exact_pool", "group_sizes", "matvec"]


class Pool:
    """Candidates gathered so far: cells and their exact cosines, in parallel.

    A cell is named by id, by its BM25 document number (a coded probe's cells), or both;
    either name is made from the other the first time it is asked for, so a text query
    fuses the coded probe's cells by number without a look-up per id.
    """

    def __init__(
        self,
        ids: list[str] | None,
        scores: np.ndarray,
        docs: np.ndarray | None = None,
        lexical: LexicalIndex | None = None,
    ) -> None:
        if ids is None and (docs is None or lexical is None):
            raise ValueError("a pool without ids needs document numbers and their index")
        self._ids, self._docs, self._lexical = ids, docs, lexical
        self.scores = scores
        # Each row's BM25 for the query, when the lexical stage gave it with the rows
        # (``extend_docs(bm25=)``); None once rows join without it.
        self.bm25: np.ndarray | None = None
        self._have: set[str] | None = None
        # The scorer's arena rows of the first rows, whose ``scores`` are still their
        # approximate cosines (a text query's coded probe, scored once the other stages
        # have joined: :func:`~magnetic_core._search.fusion.settle`); None when every
        # score is exact.
        self.pending: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    @property
    def ids(self) -> list[str]:
        """The cells' ids."""
        if self._ids is None:
            assert self._docs is not None and self._lexical is not None
            self._ids = self._lexical.cids_of(self._docs)
        return self._ids

    def docs(self, lexical: LexicalIndex) -> np.ndarray:
        """The cells' BM25 document numbers in ``lexical`` (-1 for a cell not in it)."""
        if self._docs is None or self._lexical is not lexical:
            self._docs, self._lexical = lexical.numbers(self.ids), lexical
        return self._docs

    def has_docs_only(self) -> bool:
        """Whether the cells are named by document number only (no id made yet)."""
        return self._ids is None

    def id_at(self, i: int) -> str:
        """The id of row ``i`` (no other id is made)."""
        if self._ids is not None:
            return self._ids[i]
        assert self._docs is not None and self._lexical is not None
        return self._lexical.cid_of(int(self._docs[i]))

    def extend(self, index: HierIndex, cids: Iterable[str], q: np.ndarray) -> None:
        """Add cells not yet in the pool, scored exactly."""
        loc = index.loc
        if self._ids is None:
            assert self._docs is not None and self._lexical is not None
            named = [c for c in dict.fromkeys(cids) if c in loc]
            self.extend_docs(index, self._lexical.numbers(named), q, named)
            return
        have = self._have
        if have is None:
            have = self._have = set(self._ids)
        new = [c for c in dict.fromkeys(cids) if c not in have and c in loc]
        if new:
            self.bm25 = None
            have.update(new)
            self._ids = [*self._ids, *new]
            if self._docs is not None:
                assert self._lexical is not None
                self._docs = np.concatenate([self._docs, self._lexical.numbers(new)])
            self.scores = np.concatenate([self.scores, index.vectors(new) @ q])

    def settled(self, at: np.ndarray, scores: np.ndarray) -> None:
        """The pending rows scored: the rows ``at`` (positions among the pending ones)
        take their exact ``scores``; the other pending rows leave the pool."""
        assert self.pending is not None
        m = self.pending.shape[0]
        keep = np.concatenate([np.sort(at), np.arange(m, len(self))])
        self.scores[at] = scores
        self.scores = self.scores[keep]
        if self._docs is not None:
            self._docs = self._docs[keep]
        if self._ids is not None:
            self._ids = [self._ids[i] for i in keep.tolist()]
            self._have = None
        if self.bm25 is not None:
            self.bm25 = self.bm25[keep]
        self.pending = None

    def add_docs(
        self, docs: np.ndarray, scores: np.ndarray, bm25: np.ndarray | None = None
    ) -> None:
        """Add cells named by document number with their exact cosines (a pool named by
        number only; the caller has left out the numbers it holds). ``bm25``: theirs, kept
        in :attr:`bm25` when the pool's rows so far have theirs (else it is dropped)."""
        assert self._docs is not None and self._ids is None
        if not docs.shape[0]:
            return
        self._docs = np.concatenate([self._docs, docs])
        self.scores = np.concatenate([self.scores, scores])
        if bm25 is None or self.bm25 is None:
            self.bm25 = None
        else:
            self.bm25 = np.concatenate([self.bm25, bm25])

    def extend_docs(
        self,
        index: HierIndex,
        docs: np.ndarray,
        q: np.ndarray,
        cids: list[str] | None = None,
        scorer: Scorer | None = None,
    ) -> None:
        """:meth:`extend` by distinct document numbers in the pool's lexical index
        (``cids``: the same cells' ids, when known). Given the scorer (current for the
        index), cells it holds are scored from its blocks by address, the others by id."""
        self.bm25 = None
        if self._docs is None or self._ids is not None:
            if cids is None:
                assert self._lexical is not None
                cids = self._lexical.cids_of(docs)
            self.extend(index, cids, q)
            return
        # Callers pass distinct numbers (BM25's best, de-duplicated ids): only those the
        # pool holds already are dropped, by a search of the sorted pool (np.isin costs
        # ten times more on a few hundred numbers).
        fresh = docs >= 0
        if self._docs.shape[0]:
            have = np.sort(self._docs)
            at = np.minimum(np.searchsorted(have, docs), have.shape[0] - 1)
            fresh &= have[at] != docs
        if not fresh.any():
            return
        at = np.flatnonzero(fresh)
        new = docs[at]
        lexical = self._lexical
        assert lexical is not None
        scores = np.empty(new.shape[0], np.float32)
        by_id = np.arange(new.shape[0])
        if scorer is not None:
            held = scorer.doc_rows(new, lexical)
            found = held >= 0
            scores[found] = scorer.row_cosines(held[found], q)
            by_id = np.flatnonzero(~found)
        if by_id.size:
            if cids is None:
                names = lexical.cids_of(new[by_id])
            else:
                names = [cids[i] for i in at[by_id].tolist()]
            scores[by_id] = index.vectors(names) @ q
        self._docs = np.concatenate([self._docs, new])
        self.scores = np.concatenate([self.scores, scores])


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
    keep: int | None = None,
) -> Pool:
    """Exact cosines of every cell of the given slots, or of only the best ``keep`` of
    them (one compiled pass when the scorer describes the index, else one product per
    group block)."""
    if scorer is not None:
        return Pool(*scorer.exact(index, slots, q, keep))
    return Pool(*_score_groups(index, slots, q, keep))


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
    index: HierIndex, slots: Iterable[int], q: np.ndarray, keep: int | None = None
) -> tuple[list[str], np.ndarray]:
    """Exact cosine of every cell of the given group slots, or of only the best ``keep``."""
    groups = index.slot_groups
    chosen = [groups[s] for s in slots]
    if not chosen:
        return [], np.empty(0, np.float32)
    picked = np.fromiter((g.slot for g in chosen), np.int64, len(chosen))
    addresses, counts = _block_addresses(index)
    if counts[picked].sum() >= KERNEL_CELLS and q.dtype == np.float32 and q.flags.c_contiguous:
        scores = _kernels().exact_rows(addresses, counts, picked, q)
    else:
        scores = np.concatenate([g.view @ q for g in chosen])
    return best_cells(chosen, scores, keep)


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
