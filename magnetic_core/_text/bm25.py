"""The compiled BM25 accumulation of the lexical stage (numba).

One pass over the query terms' postings, in query-term order, summing each document's
terms in float32 into a dense scratch row and marking it in a bitmap, then the set bits in
order for the documents touched: no per-term temporaries, no sort. The postings are read
where the index keeps them, by address (one ``(address, count)`` per term and column):
gathering them into one array first cost a 25-word query at 100K cells 0.1 ms, about a
third of the stage. Each posting carries its document's length, read in the same order as
its number: looked up by number, the lengths were a second random read per posting beside
the scratch row's (in a text query at 100K cells, the pass with its arguments took a median
of 196 us against 235 us before; 4 bytes more per posting, 8 MB there). A document's
length never changes under its number: a re-added cell gets a new one. The
scratch row is the caller's and is left zeroed again (only the touched entries are written
back), so a query allocates no row the size of the store: a fresh 800 KB row per query at
100K documents cost its page faults and pushed the scorer's arrays out of cache (float32,
the row is 400 KB there; a sum of a query's few dozen terms keeps float32's precision).
Tested against the numpy formula in ``tests/core/_text/test_bm25.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from magnetic_core._search.pointers import f32_ptr, i64_ptr
from magnetic_core._search.select_kernel import _cut, _descending

__all__ = ["bm25_pool", "bm25_scores"]


@njit(cache=True, nogil=True)
def bm25_scores(
    doc_at: np.ndarray,
    tf_at: np.ndarray,
    len_at: np.ndarray,
    counts: np.ndarray,
    weights: np.ndarray,
    avgdl: float,
    k1: float,
    b: float,
    n_slots: int,
    acc: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """BM25 of every document in the given postings: ``(docs ascending, scores)``.

    Args:
        doc_at: per query term, the address of its postings' document numbers (int64,
            each below ``n_slots``); the buffers must stay as they are during the call.
        tf_at: per term, the address of its term frequencies (float32).
        len_at: per term, the address of its postings' document lengths (float32).
        counts: per term, its number of postings.
        weights: per term, ``idf * (k1 + 1)`` (float32).
        avgdl: the mean document length.
        k1: term-frequency saturation.
        b: length normalisation.
        n_slots: document numbers are below this.
        acc: float32 scratch of at least ``n_slots`` zeros (zeros again on return).
    """
    seen = _accumulate(doc_at, tf_at, len_at, counts, weights, avgdl, k1, b, n_slots, acc)
    return _collect(seen, acc, min(n_slots, counts.sum()))


@njit(cache=True, nogil=True)
def bm25_pool(
    doc_at: np.ndarray,
    tf_at: np.ndarray,
    len_at: np.ndarray,
    counts: np.ndarray,
    weights: np.ndarray,
    avgdl: float,
    k1: float,
    b: float,
    n_slots: int,
    acc: np.ndarray,
    pool: np.ndarray,
    n_top: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`bm25_scores` as a search uses it, in one pass: ``(top docs, their scores,
    scores of pool)``: the ``n_top`` best documents, best first (ties: the lower number
    first), and the BM25 of each number in ``pool`` (0 for one no term holds or below 0).
    """
    seen = _accumulate(doc_at, tf_at, len_at, counts, weights, avgdl, k1, b, n_slots, acc)
    at_pool = np.zeros(pool.shape[0], np.float32)
    for i in range(pool.shape[0]):
        d = pool[i]
        if 0 <= d < n_slots:
            at_pool[i] = np.float32(acc[d])
    top, top_vals = _collect_top(seen, acc, n_top)
    return top, top_vals, at_pool


@njit(cache=True, nogil=True)
def _accumulate(
    doc_at: np.ndarray,
    tf_at: np.ndarray,
    len_at: np.ndarray,
    counts: np.ndarray,
    weights: np.ndarray,
    avgdl: float,
    k1: float,
    b: float,
    n_slots: int,
    acc: np.ndarray,
) -> np.ndarray:
    """Add every posting's BM25 term into ``acc``; the bitmap of the documents touched."""
    kk, one_b = np.float32(k1), np.float32(1.0 - b)
    per_len = np.float32(b) / np.float32(avgdl)
    # One bit per document marks the touched ones: reading the set bits in order gives them
    # ascending without a pass over the whole scratch row (800 KB at 100K documents, a
    # quarter of the stage's time there) and without a sort.
    seen = np.zeros((n_slots >> 6) + 1, np.uint64)
    for t in range(counts.shape[0]):
        w = weights[t]
        docs = i64_ptr(doc_at[t])  # type: ignore[call-arg,var-annotated]  # numba's typingctx
        tfs = f32_ptr(tf_at[t])  # type: ignore[call-arg,var-annotated]
        lens = f32_ptr(len_at[t])  # type: ignore[call-arg,var-annotated]
        for i in range(counts[t]):
            d = docs[i]
            tf = tfs[i]
            acc[d] += w * tf / (tf + kk * (one_b + per_len * lens[i]))
            seen[d >> 6] |= np.uint64(1) << np.uint64(d & 63)
    return seen


@njit(cache=True, nogil=True)
def _collect(seen: np.ndarray, acc: np.ndarray, most: int) -> tuple[np.ndarray, np.ndarray]:
    """The touched documents (at most ``most``) ascending and their scores; ``acc`` is
    zeroed again where they were."""
    found = np.empty(most + 1, np.int64)
    vals = np.empty(found.shape[0], np.float32)
    m = 0
    for word in range(seen.shape[0]):
        x = seen[word]
        while x != 0:
            low = x & (~x + np.uint64(1))  # the lowest set bit
            d = (word << 6) + _BIT[(low * _DE_BRUIJN) >> np.uint64(58)]
            found[m] = d
            vals[m] = np.float32(acc[d])
            acc[d] = 0.0
            m += 1
            x ^= low
    return found[:m], vals[:m]


@njit(cache=True, nogil=True)
def _collect_top(seen: np.ndarray, acc: np.ndarray, n_top: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n_top`` best touched documents and their scores, best first (ties: the lower
    number first); ``acc`` is zeroed again where they were. The touched documents come in
    ascending order into a buffer cut back to the best when it fills (``_cut``), so no
    array the size of the matches is written (a 25-word query touches 17K documents at
    100K cells) and no second pass selects from one."""
    if n_top <= 0:
        _clear(seen, acc)
        return np.empty(0, np.int64), np.empty(0, np.float32)
    cap = max(4 * n_top, 64)
    keys = np.empty(cap, np.float32)
    index = np.empty(cap, np.int64)
    held = 0
    bar = np.float32(-np.inf)  # every score is positive: all pass until the first cut
    for word in range(seen.shape[0]):
        x = seen[word]
        while x != 0:
            low = x & (~x + np.uint64(1))  # the lowest set bit
            d = (word << 6) + _BIT[(low * _DE_BRUIJN) >> np.uint64(58)]
            v = np.float32(acc[d])
            acc[d] = 0.0
            x ^= low
            # Written always, kept only above the bar (ties lose to the lower numbers
            # kept): a branch on the score was mispredicted about half the time, 6 us of
            # the 50 us pass of an 8-word query at 100K cells.
            keys[held] = v
            index[held] = d
            held += int(v > bar)
            if held == cap:
                cut_at, held = _cut(keys, index, held, n_top)
                bar = np.float32(cut_at)
    if held > n_top:
        _, held = _cut(keys, index, held, n_top)
    order = _descending(keys[:held])
    return index[:held][order], keys[:held][order]


@njit(cache=True, nogil=True)
def _clear(seen: np.ndarray, acc: np.ndarray) -> None:
    """Zero ``acc`` again where ``seen`` marks it touched."""
    for word in range(seen.shape[0]):
        x = seen[word]
        while x != 0:
            low = x & (~x + np.uint64(1))
            acc[(word << 6) + _BIT[(low * _DE_BRUIJN) >> np.uint64(58)]] = 0.0
            x ^= low


# The position of a lone set bit: its product with a de Bruijn sequence has a distinct top
# six bits for each position (a table look-up instead of a loop over 64 bits).
_DE_BRUIJN = np.uint64(0x03F79D71B4CB0A89)
_BIT = np.zeros(64, np.int64)
_BIT[[((int(_DE_BRUIJN) << i) & (2**64 - 1)) >> 58 for i in range(64)]] = np.arange(64)
