"""The fused ranking of a text query's pool in one compiled pass (numba).

A pool named by document number, with its rows' BM25 at hand, is ranked by cosine plus
entity boost plus scaled BM25 and cut to the best k in one pass, instead of a dozen numpy
operations on a few hundred rows. A coded probe's pool, whose first rows still wait for
their exact cosines, is settled and ranked in the same call (:func:`settled_top`): as two
steps, settling and ranking cost a text query at 100K cells about 0.2 ms, most of it the
Python between the kernels with the caches cold from the probe. Tested against the numpy
terms of :mod:`magnetic_core._search.fusion` and the kernels of both steps in
``tests/core/_search/test_fusion_kernel.py``. The lexical stage joins such a pool in the
same call (:func:`lexical_settled_top`): the Python that took the lexical kernel's results
into the pool and handed the pool to the settling kernel cost a text query at 100K cells
about 0.04 ms with the caches cold (the text p50 fell 0.026 ms, alternated). Its best
matches join as pending rows scored by code, read exactly only while they may reach the
best k (text / vector at 100K: 1.55x -> 1.51x alternated, session 41).
"""

from __future__ import annotations

import numpy as np
from numba import carray, njit

from magnetic_core._search.join_kernel import join_docs, joining, merge_unique
from magnetic_core._search.kernels import (
    centroid_slots,
    coded_rows,
    doc_rows,
    exact_at,
    exact_prefix,
    probe_coded,
    row_docs,
    top_k,
)
from magnetic_core._search.pointers import void_ptr
from magnetic_core._text.bm25 import bm25_pool

__all__ = ["fused_top", "lexical_settled_top", "settled_top", "text_top", "text_top_at"]

# Steps of a settling's pending rows ordered first (:func:`settled_top`): a text query at
# 100K cells reads a median of 64 of its 290 or so, and ordering all of them took 5.9 us
# (the whole compiled call 262.6 -> 256.2 us alternated, the same hits).
_SETTLE_HEAD = 4


@njit(cache=True, nogil=True)
def fused_top(
    cosine: np.ndarray,
    docs: np.ndarray,
    boosted: np.ndarray,
    boost: np.float32,
    bm25: np.ndarray,
    lexical_scale: np.float32,
    k: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The best ``k`` rows by ``cosine + boost * [doc in boosted] + lexical_scale * bm25``.

    Args:
        cosine: each row's exact cosine (float32).
        docs: each row's document number.
        boosted: the boosted cells' document numbers, ascending.
        boost: the entity boost (float32).
        bm25: each row's BM25 (float32; zeros when the lexical stage is off).
        lexical_scale: the lexical weight over the query's best BM25 (float32).
        k: how many rows.

    Returns:
        ``(rows, boost terms, lexical terms)`` of the best ``k`` rows (all rows when there
        are fewer), best first; ties go to the lower row. Sums are float32, added in the
        order cosine, boost, lexical (as numpy adds the terms).
    """
    n = cosine.shape[0]
    boosts, lexical = _terms(docs, boosted, boost, bm25, lexical_scale)
    rank = np.empty(n, np.float32)
    for i in range(n):
        rank[i] = (cosine[i] + boosts[i]) + lexical[i]
    best = top_k(rank, k)
    return best, boosts[best], lexical[best]


@njit(cache=True, nogil=True)
def _terms(
    docs: np.ndarray,
    boosted: np.ndarray,
    boost: np.float32,
    bm25: np.ndarray,
    lexical_scale: np.float32,
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's boost term (``boost`` where its number is in ``boosted``, ascending) and
    lexical term (``lexical_scale * bm25``)."""
    n = docs.shape[0]
    boosts = np.zeros(n, np.float32)
    lexical = np.empty(n, np.float32)
    m = boosted.shape[0]
    for i in range(n):
        if m > 0:
            d = docs[i]
            j = np.searchsorted(boosted, d)
            if j < m and boosted[j] == d:
                boosts[i] = boost
        lexical[i] = bm25[i] * lexical_scale
    return boosts, lexical


@njit(cache=True, nogil=True)
def settled_top(
    scores: np.ndarray,
    docs: np.ndarray,
    boosted: np.ndarray,
    boost: np.float32,
    bm25: np.ndarray,
    lexical_scale: np.float32,
    pending: np.ndarray,
    addresses: np.ndarray,
    row_block: np.ndarray,
    row_in_block: np.ndarray,
    q: np.ndarray,
    k: int,
    step: int,
    sds: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """A pool's pending rows settled, then its best ``k`` rows as :func:`fused_top` ranks
    them: ``fusion.settle`` followed by ``fusion.rank``, in one pass.

    The first ``pending.shape[0]`` rows hold approximate cosines (``pending``: their arena
    rows); they are read best first by approximate cosine plus their boost and lexical
    terms, until the rest are out of reach of the best ``k`` (``kernels.exact_prefix``);
    those not read leave the pool. The other rows' cosines are exact.

    Args:
        scores: each row's cosine (approximate for the pending rows).
        docs, boosted, boost, bm25, lexical_scale: as :func:`fused_top`.
        pending: the pending rows' arena rows.
        addresses, row_block, row_in_block: the arena (see ``kernels.exact_prefix``).
        q: the query vector (float32).
        k: how many rows.
        step, sds: the rerank's step and margin (``kernels.exact_prefix``).

    Returns:
        ``(rows, cosines, boost terms, lexical terms, read)``: those of the best ``k`` rows
        of the settled pool, best first (rows index the pool as given; ties go to the lower
        row of the settled pool: the pending rows read, in pool order, then the others),
        and how many pending rows were read.
    """
    n = scores.shape[0]
    m = pending.shape[0]
    boosts, lexical = _terms(docs, boosted, boost, bm25, lexical_scale)
    # The pending rows, best first by approximate cosine plus their terms.
    bonus = np.empty(m, np.float32)
    key = np.empty(m, np.float32)
    for i in range(m):
        bonus[i] = boosts[i] + lexical[i]
        key[i] = scores[i] + bonus[i]
    others = np.empty(n - m, np.float32)
    for i in range(m, n):
        others[i - m] = (scores[i] + boosts[i]) + lexical[i]
    # Most settlings stop within their first few steps: the best rows are ordered first,
    # and all of them only when those were all read (then the prefix is read again, as
    # the order of all would have it: the same rows, the same cosines).
    head = min(m, _SETTLE_HEAD * max(step, 1))
    while True:
        order = top_k(key, head)
        exact = exact_prefix(
            addresses,
            row_block,
            row_in_block,
            pending[order],
            scores[:m][order],
            bonus[order],
            others,
            q,
            k,
            step,
            sds,
        )
        if exact.shape[0] < head or head == m:
            break
        head = m
    # The settled pool: the pending rows read, in pool order, with their exact cosines,
    # then the rows that were exact already.
    read = exact.shape[0]
    cosine_of = np.empty(m, np.float32)
    was_read = np.zeros(m, np.bool_)
    for t in range(read):
        cosine_of[order[t]] = exact[t]
        was_read[order[t]] = True
    kept = np.empty(read + n - m, np.int64)
    cosine = np.empty(kept.shape[0], np.float32)
    at = 0
    for i in range(m):
        if was_read[i]:
            kept[at] = i
            cosine[at] = cosine_of[i]
            at += 1
    for i in range(m, n):
        kept[at] = i
        cosine[at] = scores[i]
        at += 1
    rank = np.empty(at, np.float32)
    for i in range(at):
        r = kept[i]
        rank[i] = (cosine[i] + boosts[r]) + lexical[r]
    best = top_k(rank, k)
    rows = kept[best]
    return rows, cosine[best], boosts[rows], lexical[rows], read


@njit(cache=True, nogil=True)
def lexical_settled_top(
    postings: tuple,  # type: ignore[type-arg]  # numba: a heterogeneous tuple
    have: np.ndarray,
    n_top: int,
    rows_of: tuple[np.ndarray, ...],
    addresses: np.ndarray,
    row_in_block: np.ndarray,
    probe: tuple[np.ndarray, ...],
    q: np.ndarray,
    qp: np.ndarray,
    scores: np.ndarray,
    pending: np.ndarray,
    boosted: np.ndarray,
    boost: np.float32,
    lexical_weight: float,
    k: int,
    step: int,
    sds: float,
) -> tuple[tuple, tuple]:  # type: ignore[type-arg]
    """The lexical stage of a text query and the settled ranking of its pool in one pass:
    ``bm25.bm25_pool`` of the query's postings with the pool's numbers ``have``, the best
    matches the pool lacks joined (``join_kernel.joining``: from any slot), then
    :func:`settled_top` of the whole pool, its lexical scale the weight over the query's
    best BM25.

    The joined cells whose group's codes are current join as pending rows, after the
    pool's pending rows, with their approximate cosines (``kernels.coded_rows``): like the
    probe's, they are read exactly only while their ranking score may reach the best ``k``
    (most best matches are far below it: at 100K Reuters cells, about 12 of a query's 50
    come within 0.05 of its ``k``-th ranking score). The others join with their exact
    cosines after the pool's rows.

    Args:
        postings: the query's BM25 arguments up to the scratch row
            (``BM25Queries.kernel_args``).
        have: the pool's document numbers.
        n_top: how many best BM25 matches.
        rows_of: ``ScorerState.doc_row_args`` (``rows_of[2]``: each arena row's block,
            ``[3]``: each block's slot, ``[5]``: each slot's staleness).
        addresses, row_in_block: each block's address and each arena row's row in it.
        probe: the scorer's probe arrays, ``slot_block`` to the codes' scales
            (``ScorerState.probe_args()[:10]``).
        q: the query vector (float32); ``qp``: the query in the codes' basis.
        scores: each pooled row's cosine (approximate for the pending rows).
        pending: the pending rows' arena rows (the pool's first rows).
        boosted, boost: as :func:`fused_top`.
        lexical_weight: the lexical weight (a query's best BM25 match gains this much).
        k, step, sds: as :func:`settled_top`.

    Returns:
        ``(join, ranking)``: ``(top, top scores, scores of have, joined, their cosines,
        loose)`` (the best matches and their BM25, best first; each pooled number's BM25;
        the indices into ``top`` of the matches that join, and of those without a current
        row, found by id), then ``(document numbers, cosines, boost terms, lexical terms,
        pending rows read)`` of the best ``k`` rows of the joined and settled pool, best
        first. When some best match has no current row or none was found, the ranking is
        empty (and its count -1), and the joined matches' exact cosines are given: the
        caller joins and ranks the pool itself (otherwise they are not).
    """
    top, top_vals, at_pool = bm25_pool(*postings, have, n_top)  # type: ignore[call-arg]
    rows = doc_rows(top, *rows_of)
    row_block, block_slot, stale = rows_of[2], rows_of[3], rows_of[5]
    joined, loose = joining(top, rows, row_block, block_slot, np.zeros(0, np.bool_), have)
    none = np.empty(0, np.float32)
    if loose.shape[0] > 0 or top.shape[0] == 0:
        cosines = exact_at(addresses, row_block, row_in_block, rows[joined], q)
        failed = (np.empty(0, np.int64), none, none, none, -1)
        return (top, top_vals, at_pool, joined, cosines, loose), failed
    n, m, extra = have.shape[0], pending.shape[0], joined.shape[0]
    coded = np.empty(extra, np.int64)
    exact = np.empty(extra, np.int64)
    a = e = 0
    for i in range(extra):
        if stale[block_slot[row_block[rows[joined[i]]]]]:
            exact[e] = joined[i]
            e += 1
        else:
            coded[a] = joined[i]
            a += 1
    coded, exact = coded[:a], exact[:e]
    coded_rows_at = rows[coded]
    approx = coded_rows(
        coded_rows_at, row_block, probe[1], probe[2], probe[3], probe[4], probe[6], probe[7],
        probe[8], probe[9], q, qp,
    )  # fmt: skip
    exact_cos = exact_at(addresses, row_block, row_in_block, rows[exact], q)
    # The pool: its pending rows, the coded matches (pending too), its other rows, then
    # the matches scored exactly.
    docs = np.empty(n + extra, np.int64)
    pooled = np.empty(n + extra, np.float32)
    bm25 = np.empty(n + extra, np.float32)
    docs[:m], pooled[:m], bm25[:m] = have[:m], scores[:m], at_pool[:m]
    for i in range(a):
        docs[m + i], pooled[m + i], bm25[m + i] = top[coded[i]], approx[i], top_vals[coded[i]]
    docs[m + a : n + a], pooled[m + a : n + a], bm25[m + a : n + a] = (
        have[m:], scores[m:], at_pool[m:],
    )  # fmt: skip
    for i in range(e):
        at = n + a + i
        docs[at], pooled[at], bm25[at] = top[exact[i]], exact_cos[i], top_vals[exact[i]]
    pend = np.empty(m + a, np.int64)
    pend[:m] = pending
    pend[m:] = coded_rows_at
    # as fusion divides them: the weight over the best BM25, both as Python floats
    scale = np.float32(lexical_weight / np.float64(top_vals[0]))
    found, cosine, boosts, lexical, read = settled_top(
        pooled, docs, boosted, boost, bm25, scale, pend, addresses, row_block,
        row_in_block, q, k, step, sds,
    )  # fmt: skip
    ranking = (docs[found], cosine, boosts, lexical, read)
    return (top, top_vals, at_pool, joined, none, loose), ranking


@njit(cache=True, nogil=True)
def _joined_pool(
    docs: np.ndarray,
    scores: np.ndarray,
    found: np.ndarray,
    joined: np.ndarray,
    cosines: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """A pool's numbers and cosines with the ``joined`` of ``found`` after its rows, with
    their ``cosines`` (what ``join_kernel.join_rows`` gives)."""
    n, extra = docs.shape[0], joined.shape[0]
    out_docs = np.empty(n + extra, np.int64)
    out_scores = np.empty(n + extra, np.float32)
    out_docs[:n] = docs
    out_scores[:n] = scores
    for i in range(extra):
        out_docs[n + i] = found[joined[i]]
        out_scores[n + i] = cosines[i]
    return out_docs, out_scores


@njit(cache=True, nogil=True)
def text_top(
    centroid_code: np.ndarray,
    centroid_scale: np.ndarray,
    tree: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    use_tree: bool,
    spread: int,
    sizes: np.ndarray,
    n_probe: int,
    min_cells: int,
    least_cells: int,
    routes: np.ndarray,
    probe: tuple[np.ndarray, ...],
    q: np.ndarray,
    basis: np.ndarray,
    budget: int,
    keep: int,
    join_boosted: bool,
    boosted: np.ndarray,
    boost: np.float32,
    postings: tuple,  # type: ignore[type-arg]  # numba: a heterogeneous tuple
    n_top: int,
    rows_of: tuple[np.ndarray, ...],
    addresses: np.ndarray,
    row_in_block: np.ndarray,
    lexical_weight: float,
    k: int,
    step: int,
    sds: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, bool]:
    """A text query whose hits need no route, from its centroid stage to its ranking in
    one call: the steps the staged search takes for it, in its order, on the same arrays.

    1. The centroid stage (``kernels.centroid_slots``, as ``plain_top``'s), merged with the
       slots of the groups holding ``routes``: the document numbers of the cells of the
       query's rarer entities, which route it to their groups.
    2. The coded probe of those slots (``kernels.probe_coded``; ``probe``: the scorer's
       arrays from ``slot_block`` to the codes' scales) and its rows' document numbers
       (``kernels.row_docs``).
    3. With ``join_boosted``, the ``boosted`` cells of the probed slots join the pool with
       their exact cosines (``join_kernel.join_docs``).
    4. :func:`lexical_settled_top`: the best BM25 matches join (scored by code, with the
       query in the codes' basis the probe made), the pool is settled and ranked
       (``boosted``, ``boost``: the ranking's entity boost).

    ``rows_of`` is ``ScorerState.doc_row_args``: its second array is each arena row's
    document number, its sixth each slot's staleness, its seventh each number's liveness.

    Returns:
        ``(arena rows, cosines, boost terms, ranking scores, slots probed, done)`` of the
        best ``k``, best first (the ranking scores in float64, as the candidates sum the
        cosine and the terms). ``done`` is False, and the rest empty, when the staged
        search must answer: a probed slot changed since it was coded, the probed groups
        hold at most ``least_cells`` cells, a row's number must be looked up by id, a
        routing or boosted cell or a best match has no current row, or fewer than ``k``
        are found.
    """
    none = np.empty(0, np.float32)
    failed = (np.empty(0, np.int64), none, none, np.empty(0, np.float64), 0, False)
    slots = centroid_slots(
        centroid_code, centroid_scale, tree, use_tree, spread, sizes, n_probe, min_cells, q
    )
    if routes.shape[0] > 0:
        # The slots of the routing cells' groups, from their rows (as ``stages._slots_of``
        # finds them; a cell without a current row is found by id there).
        rows = doc_rows(routes, *rows_of)
        row_block, block_slot = rows_of[2], rows_of[3]
        routed = np.zeros(sizes.shape[0], np.bool_)
        for i in range(rows.shape[0]):
            if rows[i] < 0:
                return failed
            routed[block_slot[row_block[rows[i]]]] = True
        slots = merge_unique(slots, np.flatnonzero(routed))
    stale = rows_of[5]
    held = 0
    for s in slots:
        if stale[s]:
            return failed
        held += sizes[s]
    if held <= least_cells:
        return failed
    rows, approx, qp = probe_coded(
        slots, probe[0], probe[1], probe[2], probe[3], probe[4], probe[5], probe[6],
        probe[7], probe[8], probe[9], q, basis, budget, keep,
    )  # fmt: skip
    docs, again = row_docs(rows_of[1], rows_of[6], rows)
    if again.shape[0] > 0:
        return failed
    if join_boosted and boosted.shape[0] > 0:
        probed = np.zeros(sizes.shape[0], np.bool_)
        for s in slots:
            probed[s] = True
        joined, cosines, loose = join_docs(
            boosted, rows_of, probed, docs, addresses, row_in_block, q
        )
        if loose.shape[0] > 0:
            return failed
        pool_docs, scores = _joined_pool(docs, approx, boosted, joined, cosines)
    else:
        pool_docs, scores = docs, approx
    _, ranking = lexical_settled_top(
        postings, pool_docs, n_top, rows_of, addresses, row_in_block, probe, q, qp, scores,
        rows, boosted, boost, lexical_weight, k, step, sds,
    )  # fmt: skip
    found, cosine, boosts, lexical, read = ranking
    if read < 0 or found.shape[0] < k:
        return failed
    best = doc_rows(found, *rows_of)
    ranked = np.empty(best.shape[0], np.float64)
    for i in range(best.shape[0]):
        if best[i] < 0:
            return failed
        # (in float64, added in the order the candidates add their terms, the thread lift
        # last: its 0.0 makes a sum of -0.0 the candidates' 0.0)
        ranked[i] = ((np.float64(cosine[i]) + np.float64(boosts[i])) + np.float64(lexical[i])) + 0.0
    return best, cosine, boosts, ranked, slots.shape[0], True


@njit(cache=True, nogil=True, inline="always")
def _vector(table: np.ndarray, i: int, dtype):  # type: ignore[no-untyped-def]
    """Row ``i`` of a ``static_args`` table as a 1-D array of ``dtype``."""
    return carray(void_ptr(table[i, 0]), (table[i, 1],), dtype)  # type: ignore[call-arg]


@njit(cache=True, nogil=True, inline="always")
def _matrix(table: np.ndarray, i: int, dtype):  # type: ignore[no-untyped-def]
    """Row ``i`` of a ``static_args`` table as a 2-D C-ordered array of ``dtype``."""
    return carray(void_ptr(table[i, 0]), (table[i, 1], table[i, 2]), dtype)  # type: ignore[call-arg]


@njit(cache=True, nogil=True)
def text_top_at(
    table: np.ndarray,
    use_tree: bool,
    spread: int,
    n_probe: int,
    min_cells: int,
    least_cells: int,
    routes: np.ndarray,
    q: np.ndarray,
    budget: int,
    keep: int,
    join_boosted: bool,
    boosted: np.ndarray,
    boost: np.float32,
    postings: tuple,  # type: ignore[type-arg]  # numba: a heterogeneous tuple
    n_top: int,
    lexical_weight: float,
    k: int,
    step: int,
    sds: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, bool]:
    """:func:`text_top` with the scorer's arrays read from ``table``
    (``static_args.TEXT_LAYOUT``: one row of address and extents per array, in that
    order; the arrays must stay where they are during the call)."""
    i8, u8, f32, i64, i32, b1 = np.int8, np.uint8, np.float32, np.int64, np.int32, np.bool_
    tree = (
        _matrix(table, 2, i8), _vector(table, 3, f32), _vector(table, 4, i64),
        _vector(table, 5, i64), _matrix(table, 6, i8), _vector(table, 7, f32),
    )  # fmt: skip
    probe = (
        _vector(table, 9, i64), _vector(table, 10, i64), _vector(table, 11, i64),
        _matrix(table, 12, i8), _vector(table, 13, f32), _vector(table, 14, f32),
        _vector(table, 15, i64), _vector(table, 16, i64), _matrix(table, 17, u8),
        _vector(table, 18, f32),
    )  # fmt: skip
    rows_of = (
        _vector(table, 19, i64), _vector(table, 20, i64), _vector(table, 21, i32),
        _vector(table, 22, i64), _vector(table, 23, i64), _vector(table, 24, b1),
        _vector(table, 25, b1),
    )  # fmt: skip
    return text_top(
        _matrix(table, 0, i8), _vector(table, 1, f32), tree, use_tree, spread,
        _vector(table, 8, i64), n_probe, min_cells, least_cells, routes, probe, q,
        _matrix(table, 28, f32), budget, keep, join_boosted, boosted, boost, postings, n_top,
        rows_of, _vector(table, 26, i64), _vector(table, 27, i32), lexical_weight, k, step,
        sds,
    )  # fmt: skip
