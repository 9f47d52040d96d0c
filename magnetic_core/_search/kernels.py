"""Compiled inner loops of search (numba): code scans, top-k selection, exact rerank.

The kernels that build the scorer (sub-list k-means, residual codes) are in
:mod:`magnetic_core._search.fit_kernels`. Each kernel has a plain numpy twin in the tests
(``tests/core/_search/test_kernels.py``). All are
compiled once and cached on disk (``cache=True``), so a fresh process loads them in a few
milliseconds instead of compiling them again; ``nogil`` lets searches in several threads
run at once.

Approximate kernels (code scans) may reorder float additions (``reassoc``), which
changes scores in the last bits only; the exact kernels accumulate in float64 (reordered
too, so the sums vectorise), so ``hit.score`` is the cosine to float32 precision whatever
the summation order. Top-k selection is in :mod:`magnetic_core._search.select_kernel`,
reading rows by address in :mod:`magnetic_core._search.pointers`.

The exact rerank reads cells straight from the index's own group blocks, which are
separate arrays, by address: copying every vector into one packed matrix would double the
store's memory, and numba's typed lists take seconds to compile in every fresh process. The
scorer keeps a reference to each block it hands out an address of, so an address never
outlives its array; a block is only read while its group is unchanged since it was
registered (writes take the store's write lock, searches its read lock).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from magnetic_core._search.pointers import (
    CODE_DOT_WIDTH,
    EXACT_FAST,
    ROW_BATCH,
    code_rows,
    dot_at,
    nibble_dot,
    nibble_rows,
    prefetch_row,
    widened,
)
from magnetic_core._search.select_kernel import best_holding, top_k

__all__ = [
    "block_scores",
    "code_scores",
    "coded_rows",
    "doc_rows",
    "exact_at",
    "exact_prefix",
    "exact_rows",
    "list_scores",
    "listed_code_top",
    "plain_top",
    "probe_coded",
    "probe_groups",
    "probe_top",
    "project",
    "row_docs",
    "top_k",
    "tree_groups",
]

# Reordering float additions lets LLVM vectorise the reductions; no 'nnan'/'ninf', so
# comparisons with infinities keep their meaning.
_FAST = {"reassoc", "contract", "nsz", "arcp"}
# Rows the exact rerank asks the memory system for ahead of the one it scores: with steps
# of 32 rows (``RERANK_STEP``) a whole step is asked for before its first row is read.
# Scattered rows come in faster the more are asked for at once: 96 rows of 1.5 KB in
# blocks of 125, caches cold, 64 us 16 ahead, 56 us 32 ahead, 37 us all at once; on a
# 100K store's vector queries (``revisions``, alternated) 32 ahead took 0.97x of 16.
_AHEAD = 32
# Code rows the code scan asks for ahead of the row it scores. The scan of a query's 13,000
# cells at 1M synthetic (codes read from memory, 300 queries in a stream, medians of three
# rounds): whole lists 8 ahead 381 us, none 383 us; rows 4 ahead 323 us, 16: 299 us,
# 32: 295 us, 64 and 128: 295 us.
_ROWS_AHEAD = 32
# Rows a bounded rerank scores between two looks at its stopping rule (exact_prefix).
RERANK_STEP = 32


@njit(cache=True, nogil=True, fastmath=_FAST)
def code_scores(codes: np.ndarray, scales: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Approximate dot products of int8 code rows with ``q``: ``scale_i * (codes_i . q)``
    (:func:`picked_scores` of every row)."""
    return picked_scores(codes, scales, np.arange(codes.shape[0]), q)


@njit(cache=True, nogil=True, fastmath=_FAST)
def picked_scores(
    codes: np.ndarray, scales: np.ndarray, picks: np.ndarray, q: np.ndarray
) -> np.ndarray:
    """``scale_p * (codes_p . q)`` for each row ``p`` of ``picks``, in their order.

    Rows of the common embedding sizes (384, 768) are multiplied as integers, 16 rows at a
    time (:func:`~magnetic_core._search.pointers.code_rows`), by ``q`` rounded to int8
    steps (:func:`_as_int8`; at 100K Reuters the rounding moves a centroid's score by
    0.0006 root mean square and changes 0.3% of the groups and sub-lists a query reads,
    the last ones taken); the rows after the last 16 take the same integer products one
    by one.
    The next 16 rows are asked for while a batch is scored: the picked rows are scattered
    (the sub-lists of the probed groups, the centroids of the clusters read). Other widths
    take a float product per row. Against the float product of whole vectors this
    replaced, at 100K Reuters: 809 centroids 22 -> 16 us and a probe's sub-lists 31 -> 21
    us in cache, 27 -> 20 and 42 -> 34 us in a stream of queries.
    """
    _same_width(codes, q)
    n = picks.shape[0]
    m = q.shape[0]
    out = np.empty(n, np.float32)
    if m != 384 and m != 768:
        for t in range(n):
            p = picks[t]
            out[t] = _row_dot(codes, p, q) * scales[p]
        return out
    q8, unit = _as_int8(q)
    sums = np.empty(n, np.int32)
    address = codes.ctypes.data
    batch = ROW_BATCH
    for t in range(min(batch, n)):
        prefetch_row(address + picks[t] * m, m)
    t = 0
    while t + batch <= n:
        for u in range(t + batch, min(t + 2 * batch, n)):
            prefetch_row(address + picks[u] * m, m)
        if m == 384:
            code_rows(codes, picks, t, q8, sums, 384)  # type: ignore[call-arg]
        else:
            code_rows(codes, picks, t, q8, sums, 768)  # type: ignore[call-arg]
        t += batch
    for u in range(t, n):
        p = picks[u]
        acc = np.int32(0)
        for c in range(m):
            acc += np.int32(codes[p, c]) * np.int32(q8[c])
        sums[u] = acc
    for t in range(n):
        out[t] = np.float32(sums[t]) * (scales[picks[t]] * unit)
    return out


@njit(cache=True, nogil=True)
def _same_width(codes: np.ndarray, q: np.ndarray) -> None:
    """Refuse code rows of another width than ``q``: :func:`_row_dot` reads as many entries
    of a row as ``q`` has, unchecked."""
    if codes.shape[1] != q.shape[0]:
        raise ValueError("int8 code rows and the query differ in width")


@njit(cache=True, nogil=True, fastmath=_FAST, inline="always")
def _row_dot(codes: np.ndarray, r: int, q: np.ndarray) -> np.float32:
    """``codes[r] . q`` (int8 codes, float32 ``q`` as long as a row) in float32, for rows
    of widths :func:`picked_scores` does not multiply as integers."""
    acc = np.float32(0.0)
    for j in range(q.shape[0]):
        acc += np.float32(codes[r, j]) * q[j]
    return acc


@njit(cache=True, nogil=True, fastmath=_FAST)
def list_scores(
    codes: np.ndarray, scales: np.ndarray, inv_norms: np.ndarray, lists: np.ndarray, q: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(q . mean, cosine(q, mean))`` of the given sub-lists, from their means' int8 codes
    (``mean ~ codes * scale``, :func:`picked_scores`): a quarter of the bytes of the float
    means, which a probe reads for every sub-list of twice its budget's worth of groups."""
    base = picked_scores(codes, scales, lists, q)
    cos = np.empty(lists.shape[0], np.float32)
    for t in range(lists.shape[0]):
        cos[t] = base[t] * inv_norms[lists[t]]
    return base, cos


@njit(cache=True, nogil=True, fastmath=_FAST)
def listed_code_top(
    codes: np.ndarray,
    scales: np.ndarray,
    list_start: np.ndarray,
    list_len: np.ndarray,
    lists: np.ndarray,
    base: np.ndarray,
    qp: np.ndarray,
    keep: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``keep`` best rows of the given sub-lists by ``base[list] + scale * codes . qp``.

    ``codes`` are nibble codes (:func:`~magnetic_core._search.fit_kernels.encode`): entry
    ``j`` of a row of rank ``m`` is ``(low four bits of byte j) - 8`` for ``j < h``, ``(high
    four bits of byte j - h) - 8`` above, ``h = (m + 1) // 2`` bytes a row. ``qp`` is
    rounded to int8 steps (:func:`_as_int8`) so that each row's product is a sum of
    integer products of bytes, which the CPU multiplies 64 at a time with AVX-512 VNNI
    (``vpdpbusd``) and in 16-bit multiply-add pairs without it; the rounding moves a
    score by about 3% of the code's own error. The nibbles' offset is taken away
    once per row (``8 * sum(q8)``). At the default rank a sub-list's rows are scored 16 at
    a time (:func:`~magnetic_core._search.pointers.nibble_rows`), the rest of it one by
    one.

    Returns ``(arena rows, their approximate scores)``, best first (ties: the earlier row
    in list order).
    """
    total = 0
    for t in range(lists.shape[0]):
        total += list_len[lists[t]]
    rows = np.empty(total, np.int64)
    approx = np.empty(total, np.float32)
    half = codes.shape[1]
    q8, unit, offset = _nibble_query(qp, half)
    at = 0
    n_lists = lists.shape[0]
    address = codes.ctypes.data
    # A cursor runs _ROWS_AHEAD rows ahead of the row scored, across the lists' ends, and
    # asks for one row per row scored: the lists are scattered over the arena, and at 1M
    # cells (codes read from memory) a whole list asked for at once did no better than
    # none, while a steady stream of requests cut the scan by a fifth (see _ROWS_AHEAD).
    ahead_list, ahead_row, ahead_end = -1, 0, 0
    for _ in range(_ROWS_AHEAD):
        ahead_list, ahead_row, ahead_end = _ask_row(
            address, half, list_start, list_len, lists, ahead_list, ahead_row, ahead_end
        )
    fixed = 2 * half == CODE_RANK
    batch = ROW_BATCH if fixed else total + 1  # (other ranks: no batches)
    for t in range(n_lists):
        j = lists[t]
        b = base[t]
        r = list_start[j]
        end = r + list_len[j]
        # The default rank scores a list's rows 16 at a time (pointers.nibble_rows), the
        # rest one by one as a product of whole vectors (pointers.nibble_dot).
        while r + batch <= end:
            for _ in range(batch):
                ahead_list, ahead_row, ahead_end = _ask_row(
                    address, half, list_start, list_len, lists, ahead_list, ahead_row, ahead_end
                )
            nibble_rows(codes, scales, r, q8, offset, unit, b, rows, approx, at)  # type: ignore[call-arg]
            r += batch
            at += batch
        while r < end:
            ahead_list, ahead_row, ahead_end = _ask_row(
                address, half, list_start, list_len, lists, ahead_list, ahead_row, ahead_end
            )
            acc = nibble_dot(codes, r, q8) if fixed else _nibbles_any(codes, r, q8)  # type: ignore[call-arg]
            rows[at] = r
            approx[at] = b + np.float32(np.int64(acc) - offset) * (scales[r] * unit)
            at += 1
            r += 1
    best = top_k(approx, keep)
    return rows[best], approx[best]


@njit(cache=True, nogil=True, inline="always")
def _nibble_query(qp: np.ndarray, half: int) -> tuple[np.ndarray, np.float32, np.int64]:
    """The query as nibble code rows of ``half`` bytes are multiplied by: ``qp`` in int8
    steps (:func:`_as_int8`) as the two halves of a row see it (a zero under an odd rank's
    last nibble), the step's value, and the nibbles' offset (``8 * sum(q8)``), taken away
    once per row."""
    m = qp.shape[0]
    if half != (m + 1) // 2:
        raise ValueError("nibble code rows and the query differ in rank")
    q8, unit = _as_int8(qp)
    q8 = np.concatenate((q8, np.zeros(2 * half - m, np.int8)))
    offset = np.int64(0)
    for c in range(m):
        offset += 8 * np.int64(q8[c])
    return q8, unit, offset


# The code rank the scan is specialised for (``MemoryConfig.sketch_rank``'s default): its
# row product is one product of whole vectors (``pointers.nibble_dot``; 100K Reuters,
# 13,000 cells in sub-lists of 32: 107 us as a float loop, 64 us as an integer loop on an
# AMD EPYC, 78 -> 49 us from loop to vectors on an Intel Xeon, int8 codes then); other
# ranks take the loop.
CODE_RANK = CODE_DOT_WIDTH


@njit(cache=True, nogil=True)
def _as_int8(qp: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """``qp`` rounded to int8 steps and the value of one step (``qp ~ q8 * unit``).

    The step is a power of two, the largest entry between 64 and 127 steps, so scores
    are products of exact numbers (an integer ``qp`` is carried exactly), and a row's int32
    sum cannot wrap below a width of 2**31 / (15 * 128) entries for nibble codes, 2**31 /
    (128 * 128) for int8 ones. The rounding moves a cell's code score by 0.0006 (root mean
    square; 100K Reuters, a query's best 256 cells) where the codes' own error is 0.02 (it
    was 2e-6 in int16 steps). A zero ``qp`` gives zeros and a unit of 0."""
    m = qp.shape[0]
    big = 0.0
    for c in range(m):
        big = max(big, abs(np.float64(qp[c])))
    q8 = np.zeros(m, np.int8)
    if not big > 0.0:
        return q8, np.float32(0.0)
    per = 2.0 ** np.floor(np.log2(127.0 / big))
    for c in range(m):
        q8[c] = np.int8(np.round(np.float64(qp[c]) * per))
    return q8, np.float32(1.0 / per)


@njit(cache=True, nogil=True, inline="always")
def _nibbles_any(codes: np.ndarray, r: int, q8: np.ndarray) -> np.int32:
    """:func:`~magnetic_core._search.pointers.nibble_dot` for rows of any width
    (``q8``: two entries per byte, the high nibbles' after the low ones')."""
    half = codes.shape[1]
    acc: int | np.int32 = 0
    for c in range(half):
        byte = np.int32(codes[r, c])
        acc += (byte & 15) * np.int32(q8[c]) + (byte >> 4) * np.int32(q8[c + half])
    return np.int32(acc)


@njit(cache=True, nogil=True, inline="always")
def _ask_row(
    address: int,
    width: int,
    list_start: np.ndarray,
    list_len: np.ndarray,
    lists: np.ndarray,
    ahead_list: int,
    ahead_row: int,
    ahead_end: int,
) -> tuple[int, int, int]:
    """Prefetch the next code row of the lists from the cursor on and move the cursor past
    it: ``ahead_list`` is the list (index into ``lists``; -1 before the first) whose rows
    run to ``ahead_end``, ``ahead_row`` the next row to ask for. Empty lists are passed
    over; past the last list nothing is asked for."""
    n = lists.shape[0]
    while ahead_row >= ahead_end:
        ahead_list += 1
        if ahead_list >= n:
            return n, 0, 0
        ahead_row = list_start[lists[ahead_list]]
        ahead_end = ahead_row + list_len[lists[ahead_list]]
    prefetch_row(address + ahead_row * width, width)
    return ahead_list, ahead_row + 1, ahead_end


@njit(cache=True, nogil=True)
def exact_prefix(
    addresses: np.ndarray,
    row_block: np.ndarray,
    row_in_block: np.ndarray,
    rows: np.ndarray,
    approx: np.ndarray,
    bonus: np.ndarray,
    others: np.ndarray,
    q: np.ndarray,
    k: int,
    step: int,
    sds: float,
) -> np.ndarray:
    """Exact cosines of the prefix of ``rows`` that can hold the best ``k`` by ranking score.

    A row's ranking score is its cosine plus its ``bonus`` (zeros for a plain vector
    query); ``approx`` is each row's approximate cosine, and ``rows`` come best first by
    ``approx + bonus``. ``others``: the ranking scores of candidates already scored
    exactly, which compete for the same ``k``. Rows are scored ``step`` at a time (the
    first time at least ``k``). After each step the approximations' errors on the rows
    scored so far give a margin, their mean's size plus ``sds`` standard deviations;
    scoring stops once the next row's ``approx + bonus`` is more than that margin below the
    ``k``-th best ranking score: each row left would have to be underestimated by more
    than that to enter the best ``k``. With ``sds`` infinite every row is scored.

    Returns the exact cosines of the rows scored, in the order of ``rows``.
    """
    n = rows.shape[0]
    if not sds < np.inf:
        step = n
    stride = q.shape[0] * 4
    q64 = widened(q)
    scores = np.empty(n, np.float32)
    fused = np.empty(n + min(k, others.shape[0]), np.float32)
    held = 0
    if k > 0:
        for i in top_k(others, k):
            fused[n + held] = others[i]
            held += 1
    err_sum = 0.0
    err_sq = 0.0
    done = 0
    while done < n:
        end = min(n, done + max(step, k - done, 1))
        # Rows are asked for only within the step: most reranks stop after their first
        # step, and rows asked for past it would be read from memory for nothing.
        for t in range(done, min(done + _AHEAD, end)):
            r = rows[t]
            prefetch_row(addresses[row_block[r]] + np.int64(row_in_block[r]) * stride, stride)
        for t in range(done, end):
            if t + _AHEAD < end:  # rows are scattered: ask for a later one while this one is scored
                r = rows[t + _AHEAD]
                prefetch_row(addresses[row_block[r]] + np.int64(row_in_block[r]) * stride, stride)
            r = rows[t]
            s = dot_at(addresses[row_block[r]] + np.int64(row_in_block[r]) * stride, q64)
            scores[t] = s
            fused[t] = s + bonus[t]
            e = np.float64(s) - np.float64(approx[t])
            err_sum += e
            err_sq += e * e
        done = end
        if done < n and k > 0 and done + held >= k:
            mean = err_sum / done
            margin = abs(mean) + sds * np.sqrt(max(err_sq / done - mean * mean, 0.0))
            ranked = np.concatenate((fused[:done], fused[n : n + held]))
            kth = ranked[top_k(ranked, k)[k - 1]]
            if np.float64(approx[done]) + np.float64(bonus[done]) < np.float64(kth) - margin:
                break
    return scores[:done]


@njit(cache=True, nogil=True)
def exact_at(
    addresses: np.ndarray,
    row_block: np.ndarray,
    row_in_block: np.ndarray,
    rows: np.ndarray,
    q: np.ndarray,
) -> np.ndarray:
    """Exact cosines of the given arena rows from their blocks, in the order given."""
    n = rows.shape[0]
    stride = q.shape[0] * 4
    q64 = widened(q)
    scores = np.empty(n, np.float32)
    for t in range(min(_AHEAD, n)):
        r = rows[t]
        prefetch_row(addresses[row_block[r]] + np.int64(row_in_block[r]) * stride, stride)
    for t in range(n):
        if t + _AHEAD < n:  # rows are scattered: ask for a later one while this one is scored
            r = rows[t + _AHEAD]
            prefetch_row(addresses[row_block[r]] + np.int64(row_in_block[r]) * stride, stride)
        r = rows[t]
        scores[t] = dot_at(addresses[row_block[r]] + np.int64(row_in_block[r]) * stride, q64)
    return scores


@njit(cache=True, nogil=True)
def row_docs(
    doc_col: np.ndarray, alive: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The document number recorded for each arena row (``doc_col[rows]``) and the
    positions, ascending, of those to look up again: no number recorded (-1), or one that
    is no longer alive (``alive``: by number; numbers past its end count as dead)."""
    n = rows.shape[0]
    docs = np.empty(n, np.int64)
    again = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        d = doc_col[rows[i]]
        docs[i] = d
        again[m] = i
        m += d < 0 or d >= alive.shape[0] or not alive[d]
    return docs, again[:m]


@njit(cache=True, nogil=True)
def doc_rows(
    docs: np.ndarray,
    table: np.ndarray,
    doc_col: np.ndarray,
    row_block: np.ndarray,
    block_slot: np.ndarray,
    slot_block: np.ndarray,
    stale: np.ndarray,
    alive: np.ndarray,
) -> np.ndarray:
    """The arena row of each document number's cell, -1 where none is current.

    ``table[d]`` is the newest row recorded for number ``d``; it counts only if the row
    still names ``d`` (``doc_col``), ``d`` is alive, and the row's block is the one its
    slot points at now and that slot is not stale.

    Three passes over the numbers, each reading one step of every number's chain (row,
    then block, then slot), so the reads of different numbers overlap: one number's six
    dependent reads after another's cost the boosted cells of a text query's entities
    (over 500 of them) 48.9 us against 29.1 us at 100K cells, after a probe.
    """
    n = docs.shape[0]
    out = np.full(n, -1, np.int64)
    rows = np.empty(n, np.int64)
    for i in range(n):  # the newest row of each live number
        d = docs[i]
        r = -1
        if 0 <= d < table.shape[0] and d < alive.shape[0] and alive[d]:
            r = table[d]
        rows[i] = r
    blocks = np.empty(n, np.int64)
    for i in range(n):  # the row still names the number: its block
        r = rows[i]
        blocks[i] = row_block[r] if r >= 0 and doc_col[r] == docs[i] else -1
    for i in range(n):  # the block is its slot's current one, and the slot not stale
        h = blocks[i]
        if h >= 0:
            s = block_slot[h]
            if 0 <= s < slot_block.shape[0] and slot_block[s] == h and not stale[s]:
                out[i] = rows[i]
    return out


@njit(cache=True, nogil=True)
def exact_rows(
    addresses: np.ndarray, counts: np.ndarray, blocks: np.ndarray, q: np.ndarray
) -> np.ndarray:
    """Exact cosines of every row of the given blocks, block after block, in block order."""
    total = 0
    for t in range(blocks.shape[0]):
        total += counts[blocks[t]]
    out = np.empty(total, np.float32)
    stride = q.shape[0] * 4
    q64 = widened(q)
    at = 0
    for t in range(blocks.shape[0]):
        h = blocks[t]
        start = addresses[h]
        for r in range(counts[h]):
            out[at] = dot_at(start + np.int64(r) * stride, q64)
            at += 1
    return out


@njit(cache=True, nogil=True, fastmath=_FAST)
def project(x: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """``x @ basis`` for one vector, on the calling thread (BLAS would start threads)."""
    d, r = basis.shape
    out = np.zeros(r, np.float32)
    for c in range(d):
        xc = x[c]
        for j in range(r):
            out[j] += xc * basis[c, j]
    return out


@njit(cache=True, nogil=True, fastmath=EXACT_FAST)
def block_scores(vecs: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Exact cosines of every row of one (n, d) block (float64 sums, as the other exact
    kernels), on the calling thread."""
    n, d = vecs.shape
    out = np.empty(n, np.float32)
    q64 = widened(q)
    for i in range(n):
        acc = 0.0
        for c in range(d):
            acc += np.float64(vecs[i, c]) * q64[c]
        out[i] = np.float32(acc)
    return out


@njit(cache=True, nogil=True)
def probe_groups(sims: np.ndarray, sizes: np.ndarray, n_probe: int, min_cells: int) -> np.ndarray:
    """Slots to probe: the best ``n_probe``, and more while they hold fewer than
    ``min_cells`` cells (looking at most at twice the budget's worth of groups of the mean
    size). Every slot, in slot order, when ``n_probe`` covers them all. The order is not
    part of the answer (ascending when found by buckets, else most similar first): callers
    sort the slots."""
    n = sims.shape[0]
    if n_probe >= n:
        return np.arange(n)
    want = _wanted(sizes, n_probe, min_cells)
    return _best_enough(sims, np.arange(n), sizes, n_probe, min_cells, want)


@njit(cache=True, nogil=True)
def _wanted(sizes: np.ndarray, n_probe: int, min_cells: int) -> int:
    """Groups a probe ranks: ``n_probe``, or twice the budget's worth of groups of the
    mean size when that is more."""
    if min_cells <= 0:
        return n_probe
    mean = max(np.float64(sizes.sum()) / sizes.shape[0], 1.0)
    return max(n_probe, int(np.ceil(2.0 * min_cells / mean)))


@njit(cache=True, nogil=True)
def _enough(cand: np.ndarray, sizes: np.ndarray, n_probe: int, min_cells: int) -> np.ndarray:
    """The first of the ranked slots ``cand`` until they hold ``min_cells`` cells (at
    least ``n_probe`` of them)."""
    if min_cells <= 0:
        return cand[:n_probe]
    held = 0
    need = 0
    while need < cand.shape[0] and held < min_cells:
        held += sizes[cand[need]]
        need += 1
    return cand[: max(n_probe, need)]


@njit(cache=True, nogil=True)
def _best_enough(
    sims: np.ndarray,
    slot_of: np.ndarray,
    sizes: np.ndarray,
    n_probe: int,
    min_cells: int,
    want: int,
) -> np.ndarray:
    """The slots of ``_enough(slot_of[top_k(sims, want)], ...)``, in no set order: found by
    buckets (``best_holding``) when that takes ``n_probe`` to ``want`` of them, else by
    ranking first only as many entries as groups of the mean size would need to hold
    ``min_cells``, with a quarter to spare, and all ``want`` only when those fall short:
    ordering costs per entry ranked, and the slots taken are the same either way (a
    stable sort's prefix)."""
    want = min(want, sims.shape[0])
    if min_cells > 0:
        # The slots are found by buckets, not ranked (the same set: top_k's order until
        # they hold min_cells): a caller sorts them anyway. Ranked as below only when that
        # takes fewer than n_probe of them or more than want.
        taken = best_holding(sims, sizes[slot_of], min_cells)
        if n_probe <= taken.shape[0] <= want:
            return slot_of[taken]
    first = want
    if min_cells > 0:
        mean = max(np.float64(sizes.sum()) / sizes.shape[0], 1.0)
        first = min(want, max(n_probe, int(np.ceil(1.25 * min_cells / mean)) + 8))
    best = top_k(sims, first)
    if first < want:
        held = 0
        for t in range(first):
            held += sizes[slot_of[best[t]]]
        if held < min_cells:
            best = top_k(sims, want)
    return _enough(slot_of[best], sizes, n_probe, min_cells)


@njit(cache=True, nogil=True, fastmath=_FAST)
def tree_groups(
    tree_code: np.ndarray,
    tree_scale: np.ndarray,
    tree_start: np.ndarray,
    members: np.ndarray,
    rows: np.ndarray,
    row_scale: np.ndarray,
    q: np.ndarray,
    sizes: np.ndarray,
    n_probe: int,
    min_cells: int,
    spread: int,
) -> np.ndarray:
    """:func:`probe_groups` through a tree of centroids
    (:mod:`magnetic_core._search.centroid_tree`): the clusters are ranked by their means'
    codes, the best ones holding ``spread`` times the groups wanted are read, and the
    slots are chosen among their centroids as :func:`probe_groups` chooses among all.
    ``members``: the slots, cluster by cluster (cluster ``c`` from ``tree_start[c]``);
    ``rows``, ``row_scale``: their centroid codes in that order. When the clusters to read
    would hold half the centroids or more, every centroid is scored (ties then go to the
    slot listed first)."""
    _same_width(tree_code, q)
    _same_width(rows, q)
    n = members.shape[0]
    if n_probe >= n:
        return np.arange(n)
    want = _wanted(sizes, n_probe, min_cells)
    reach = spread * want
    if 2 * reach >= n:
        sims = code_scores(rows, row_scale, q)
        return _best_enough(sims, members, sizes, n_probe, min_cells, want)
    clusters = top_k(code_scores(tree_code, tree_scale, q), tree_scale.shape[0])
    held = 0
    taken = 0
    while taken < clusters.shape[0] and held < reach:
        c = clusters[taken]
        held += tree_start[c + 1] - tree_start[c]
        taken += 1
    read = np.empty(held, np.int64)
    at = 0
    for t in range(taken):
        c = clusters[t]
        for u in range(tree_start[c], tree_start[c + 1]):
            read[at] = u
            at += 1
    sims = picked_scores(rows, row_scale, read, q)
    return _best_enough(sims, members[read], sizes, n_probe, min_cells, want)


@njit(cache=True, nogil=True)
def _slot_lists(
    slots: np.ndarray,
    slot_block: np.ndarray,
    block_first: np.ndarray,
    block_end: np.ndarray,
    list_len: np.ndarray,
) -> tuple[np.ndarray, int]:
    """The sub-lists of the given slots' blocks, slot after slot, and the cells they hold."""
    m = 0
    for t in range(slots.shape[0]):
        h = slot_block[slots[t]]
        m += block_end[h] - block_first[h]
    lists = np.empty(m, np.int64)
    at = 0
    total = 0
    for t in range(slots.shape[0]):
        h = slot_block[slots[t]]
        for j in range(block_first[h], block_end[h]):
            lists[at] = j
            total += list_len[j]
            at += 1
    return lists, total


@njit(cache=True, nogil=True)
def probe_coded(
    slots: np.ndarray,
    slot_block: np.ndarray,
    block_first: np.ndarray,
    block_end: np.ndarray,
    list_code: np.ndarray,
    list_scale: np.ndarray,
    list_inv: np.ndarray,
    list_start: np.ndarray,
    list_len: np.ndarray,
    codes: np.ndarray,
    scales: np.ndarray,
    q: np.ndarray,
    basis: np.ndarray,
    budget: int,
    keep: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The coded half of a probe: the slots' sub-lists ranked by the cosine of their mean
    (from its int8 code), the best ones holding ``budget`` cells scored by code; returns
    the best ``keep`` ``(arena rows, approximate cosines)``, best first, and the query in
    the codes' basis (:func:`project`; what :func:`coded_rows` takes)."""
    lists, total = _slot_lists(slots, slot_block, block_first, block_end, list_len)
    base, cos = list_scores(list_code, list_scale, list_inv, lists, q)
    if total > budget:
        # The best lists until they hold the budget, read in place (slot by slot, each
        # group's lists adjacent in the arena) rather than ranked: the same lists, the
        # same scores, and the ordering of 900 scores saved.
        taken = best_holding(cos, list_len[lists], max(budget, 1))
        lists, base = lists[taken], base[taken]
    qp = project(q, basis)
    rows, approx = listed_code_top(codes, scales, list_start, list_len, lists, base, qp, keep)
    return rows, approx, qp


@njit(cache=True, nogil=True, fastmath=_FAST)
def coded_rows(
    rows: np.ndarray,
    row_block: np.ndarray,
    block_first: np.ndarray,
    block_end: np.ndarray,
    list_code: np.ndarray,
    list_scale: np.ndarray,
    list_start: np.ndarray,
    list_len: np.ndarray,
    codes: np.ndarray,
    scales: np.ndarray,
    q: np.ndarray,
    qp: np.ndarray,
) -> np.ndarray:
    """Approximate cosines of arena rows anywhere in the arena, as :func:`listed_code_top`
    scores a probed sub-list's rows: the cosine of the row's sub-list mean (from its int8
    code, :func:`picked_scores`) plus the row's nibble code times ``qp`` (the query in the
    codes' basis, :func:`project`). A row's sub-list is the one of its block whose rows
    hold it (a block's sub-lists hold its rows in one run). One cache line of code a row
    instead of its float vector: a text query's best BM25 matches that join the pool are
    scored so, and read exactly only when their ranking score may reach the best ``k``.
    """
    n = rows.shape[0]
    lists = np.empty(n, np.int64)
    for t in range(n):
        r = rows[t]
        h = row_block[r]
        j = block_first[h]
        while j + 1 < block_end[h] and list_start[j + 1] <= r:
            j += 1
        if not list_start[j] <= r < list_start[j] + list_len[j]:
            raise ValueError("coded_rows: a row outside its block's sub-lists")
        lists[t] = j
    base = picked_scores(list_code, list_scale, lists, q)
    half = codes.shape[1]
    q8, unit, offset = _nibble_query(qp, half)
    fixed = 2 * half == CODE_RANK
    out = np.empty(n, np.float32)
    for t in range(n):
        r = rows[t]
        acc = nibble_dot(codes, r, q8) if fixed else _nibbles_any(codes, r, q8)  # type: ignore[call-arg]
        out[t] = base[t] + np.float32(np.int64(acc) - offset) * (scales[r] * unit)
    return out


@njit(cache=True, nogil=True)
def probe_top(
    slots: np.ndarray,
    slot_block: np.ndarray,
    block_first: np.ndarray,
    block_end: np.ndarray,
    list_code: np.ndarray,
    list_scale: np.ndarray,
    list_inv: np.ndarray,
    list_start: np.ndarray,
    list_len: np.ndarray,
    codes: np.ndarray,
    scales: np.ndarray,
    row_block: np.ndarray,
    row_in_block: np.ndarray,
    addresses: np.ndarray,
    q: np.ndarray,
    basis: np.ndarray,
    budget: int,
    keep: int,
    k: int,
    sds: float = np.inf,
) -> tuple[np.ndarray, np.ndarray]:
    """The scorer's whole probe in one call: :func:`probe_coded`, then the best ``keep``
    scored exactly (or the part of them :func:`exact_prefix` reads with ``sds`` finite);
    returns the best ``k`` ``(arena rows, exact scores)``, best first."""
    picked, approx, _ = probe_coded(
        slots, slot_block, block_first, block_end, list_code, list_scale, list_inv,
        list_start, list_len, codes, scales, q, basis, budget, keep,
    )  # fmt: skip
    bonus = np.zeros(picked.shape[0], np.float32)
    none = np.empty(0, np.float32)
    step = RERANK_STEP
    scores = exact_prefix(
        addresses, row_block, row_in_block, picked, approx, bonus, none, q, k, step, sds
    )
    best = top_k(scores, k)
    return picked[best], scores[best]


@njit(cache=True, nogil=True)
def _block_order_rows(
    slots: np.ndarray,
    slot_block: np.ndarray,
    block_first: np.ndarray,
    block_end: np.ndarray,
    list_start: np.ndarray,
    list_len: np.ndarray,
    row_in_block: np.ndarray,
) -> np.ndarray:
    """The arena rows of the given slots' blocks, block after block, each block's in the
    order of its rows (its sub-lists hold them in another order)."""
    total = 0
    for t in range(slots.shape[0]):
        h = slot_block[slots[t]]
        for j in range(block_first[h], block_end[h]):
            total += list_len[j]
    out = np.empty(total, np.int64)
    at = 0
    for t in range(slots.shape[0]):
        h = slot_block[slots[t]]
        n = 0
        for j in range(block_first[h], block_end[h]):
            for r in range(list_start[j], list_start[j] + list_len[j]):
                out[at + row_in_block[r]] = r
                n += 1
        at += n
    return out


@njit(cache=True, nogil=True)
def centroid_slots(
    centroid_code: np.ndarray,
    centroid_scale: np.ndarray,
    tree: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    use_tree: bool,
    spread: int,
    sizes: np.ndarray,
    n_probe: int,
    min_cells: int,
    q: np.ndarray,
) -> np.ndarray:
    """The centroid stage of the one-call queries, its slots ascending: :func:`probe_groups`
    over every centroid code, or, with ``use_tree``, :func:`tree_groups` over ``tree``."""
    if use_tree:
        chosen = tree_groups(
            tree[0], tree[1], tree[2], tree[3], tree[4], tree[5], q, sizes, n_probe,
            min_cells, spread,
        )  # fmt: skip
    else:
        chosen = probe_groups(
            code_scores(centroid_code, centroid_scale, q), sizes, n_probe, min_cells
        )
    return np.sort(chosen)


@njit(cache=True, nogil=True)
def plain_top(
    centroid_code: np.ndarray,
    centroid_scale: np.ndarray,
    tree: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    use_tree: bool,
    spread: int,
    sizes: np.ndarray,
    stale: np.ndarray,
    n_probe: int,
    min_cells: int,
    least_cells: int,
    probe: tuple[np.ndarray, ...],
    q: np.ndarray,
    basis: np.ndarray,
    budget: int,
    keep: int,
    k: int,
    sds: float,
) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """A plain vector query's centroid stage and probe in one call: the slots
    :func:`probe_groups` (or, with ``use_tree``, :func:`tree_groups` over ``tree``) chooses,
    in slot order, then :func:`probe_top` over them (``probe``: its arrays from
    ``slot_block`` to ``addresses``).

    Returns ``(arena rows, exact scores, slots probed, done)``. ``done`` is False, and
    nothing is scored, when a probed slot is ``stale`` (its group changed since it was
    coded): the caller then takes the general path, which scores those exactly. When the
    probed slots hold at most ``least_cells`` cells, too few to code, every one is scored
    exactly here (as the general path would; through it, a probe of 1,000 cells at 100K
    took longer than one of 4,000 through the codes).
    """
    slots = centroid_slots(
        centroid_code, centroid_scale, tree, use_tree, spread, sizes, n_probe, min_cells, q
    )
    none = np.empty(0, np.int64)
    held = 0
    for s in slots:
        if stale[s]:
            return none, np.empty(0, np.float32), slots.shape[0], False
        held += sizes[s]
    if held <= least_cells:
        # Too few cells to code: every one scored exactly (block after block, rows in
        # block order, as the stages' exact pass reads them; ties go to the earlier row).
        rows = _block_order_rows(slots, probe[0], probe[1], probe[2], probe[6], probe[7], probe[11])
        exact = exact_at(probe[12], probe[10], probe[11], rows, q)
        best = top_k(exact, k)
        return rows[best], exact[best], slots.shape[0], True
    best, scores = probe_top(
        slots, probe[0], probe[1], probe[2], probe[3], probe[4], probe[5], probe[6],
        probe[7], probe[8], probe[9], probe[10], probe[11], probe[12], q, basis, budget,
        keep, k, sds,
    )  # fmt: skip
    return best, scores, slots.shape[0], True
