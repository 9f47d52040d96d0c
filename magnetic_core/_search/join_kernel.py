"""Compiled joins of the entity stage's cells to a coded probe's pool (numba).

A text query naming a recurring entity boosts every cell holding it, often thousands at
100K cells; those of the probed groups join the pool with their exact cosines. Done in
numpy, that was a dozen array operations (the entities' numbers merged by ``np.unique``, a
mask of the probed slots, the pool's numbers sorted and searched, the rows' cosines, the
concatenations), about 0.2 ms of a text query at 100K cells under load. Here it is two
passes over the numbers. The best BM25 matches join the same way. :func:`join_docs` finds
the numbers' rows in the same call (as two calls, with the Python between them, the join of
a text query's best BM25 matches cost about 0.1 ms at 100K cells, the caches cold from the
probe). :func:`bm25_join` scores a text query's words and joins their best matches in one
call; a pool whose probed cells still wait for their exact cosines finds its joins by
:func:`joining` and scores them by code (``fusion_kernel.lexical_settled_top``). Tested
against numpy in ``tests/core/_search/test_kernels.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from magnetic_core._search.kernels import doc_rows, exact_at
from magnetic_core._text.bm25 import bm25_pool

__all__ = ["bm25_join", "join_docs", "join_rows", "joining", "merge_unique"]


@njit(cache=True, nogil=True)
def merge_unique(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted union of two ascending int64 arrays without repeats (a merge, no sort)."""
    na, nb = a.shape[0], b.shape[0]
    out = np.empty(na + nb, np.int64)
    i = j = m = 0
    while i < na and j < nb:
        x, y = a[i], b[j]
        if x <= y:
            out[m] = x
            i += 1
            if x == y:
                j += 1
        else:
            out[m] = y
            j += 1
        m += 1
    while i < na:
        out[m] = a[i]
        i += 1
        m += 1
    while j < nb:
        out[m] = b[j]
        j += 1
        m += 1
    return out[:m]


@njit(cache=True, nogil=True)
def join_rows(
    docs: np.ndarray,
    rows: np.ndarray,
    row_block: np.ndarray,
    block_slot: np.ndarray,
    probed: np.ndarray,
    have: np.ndarray,
    addresses: np.ndarray,
    row_in_block: np.ndarray,
    q: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cells of ``docs`` that join a pool: those in a probed slot and not in it yet.

    Args:
        docs: document numbers without repeats (in any order: the order is kept).
        rows: each one's arena row (the scorer's ``doc_rows``), -1 where no current block
            holds it.
        row_block: the block of each arena row; ``block_slot``: the slot of each block.
        probed: whether each slot is probed (empty: every slot is).
        have: the pool's document numbers (any order).
        addresses: each block's address; ``row_in_block``: each arena row's row in it.
        q: the query vector (float32).

    Returns:
        ``(joined, scores, loose)``: the indices into ``docs`` of the cells that join, in
        order, their exact cosines, and the indices of the documents without a row that the
        pool does not hold (their slot is found by id).
    """
    joined, loose = joining(docs, rows, row_block, block_slot, probed, have)
    return joined, exact_at(addresses, row_block, row_in_block, rows[joined], q), loose


@njit(cache=True, nogil=True)
def joining(
    docs: np.ndarray,
    rows: np.ndarray,
    row_block: np.ndarray,
    block_slot: np.ndarray,
    probed: np.ndarray,
    have: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`join_rows` without the cosines: ``(joined, loose)``."""
    n = docs.shape[0]
    pooled = _bitmap(have, docs)
    joined = np.empty(n, np.int64)
    loose = np.empty(n, np.int64)
    m = u = 0
    for i in range(n):
        d = docs[i]
        if d >= 0 and pooled[d >> 6] & (np.uint64(1) << np.uint64(d & 63)):
            continue
        r = rows[i]
        if r < 0:
            loose[u] = i
            u += 1
        elif probed.shape[0] == 0 or probed[block_slot[row_block[r]]]:
            joined[m] = i
            m += 1
    return joined[:m], loose[:u]


@njit(cache=True, nogil=True)
def _bitmap(have: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """One bit per document number up to the largest of ``have`` and ``docs``, set for the
    numbers of ``have`` (negative ones left out). Membership by bit, not by a sort of the
    pool and a search per number: sorting a text query's pool of about 300 numbers took
    8.5 us, most of the join of its best 50 BM25 matches besides their rows."""
    top = 0
    for i in range(have.shape[0]):
        top = max(top, have[i])
    for i in range(docs.shape[0]):
        top = max(top, docs[i])
    bits = np.zeros((top >> 6) + 1, np.uint64)
    for i in range(have.shape[0]):
        d = have[i]
        if d >= 0:
            bits[d >> 6] |= np.uint64(1) << np.uint64(d & 63)
    return bits


@njit(cache=True, nogil=True)
def join_docs(
    docs: np.ndarray,
    rows_of: tuple[np.ndarray, ...],
    probed: np.ndarray,
    have: np.ndarray,
    addresses: np.ndarray,
    row_in_block: np.ndarray,
    q: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`join_rows` of ``docs``, their rows found first: ``rows_of`` is the tuple of
    arrays ``kernels.doc_rows`` reads after the numbers (``ScorerState.doc_row_args``)."""
    rows = doc_rows(docs, *rows_of)
    row_block, block_slot = rows_of[2], rows_of[3]
    return join_rows(docs, rows, row_block, block_slot, probed, have, addresses, row_in_block, q)


@njit(cache=True, nogil=True)
def bm25_join(
    postings: tuple,  # type: ignore[type-arg]  # numba: a heterogeneous tuple
    have: np.ndarray,
    n_top: int,
    rows_of: tuple[np.ndarray, ...],
    addresses: np.ndarray,
    row_in_block: np.ndarray,
    q: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The lexical stage of a text query against a pool named by number, in one call:
    ``bm25.bm25_pool`` of the query's postings (``postings``: its arguments up to the
    scratch row, ``BM25Queries.kernel_args``) with the pool's numbers ``have``, then
    :func:`join_docs` of its ``n_top`` best from any slot.

    As two calls with the Python between them (the pool's scores handed back, the rows'
    arguments gathered again), the stage cost about 5 us more of a text query at 100K
    cells.

    Returns:
        ``(top, top scores, scores of have, joined, their cosines, loose)``: the best
        documents and their BM25, best first; the BM25 of each pooled number; and
        :func:`join_docs` of ``top``.
    """
    top, top_vals, at_pool = bm25_pool(*postings, have, n_top)  # type: ignore[call-arg]
    everywhere = np.zeros(0, np.bool_)
    joined, scores, loose = join_docs(top, rows_of, everywhere, have, addresses, row_in_block, q)
    return top, top_vals, at_pool, joined, scores, loose
