"""The compiled BM25 accumulation of the lexical stage (numba).

One pass over the query terms' postings, in query-term order, summing each document's terms
in float32 into a dense scratch row and listing the documents touched, then either every
match in number order from a bitmap of the list (:func:`bm25_scores`) or only the best
(:func:`bm25_pool`): no per-term temporaries, no sort of the matches. The postings are read
where the index keeps them, by address (one row per term: its columns' addresses, its count
and its weight): gathering them into one array first cost a 25-word query at 100K cells 0.1
ms, about a third of the stage. Each posting carries its document's length, read in the
same order as its number: looked up by number, the lengths were a second random read per
posting beside the scratch row's (in a text query at 100K cells, the pass with its
arguments took a median of 196 us against 235 us before; 4 bytes more per posting, 8 MB
there). A document's length never changes under its number: a re-added cell gets a new one.
The scratch row is the caller's and is left zeroed again (only the touched entries are
written back), so a query allocates no row the size of the store: a fresh 800 KB row per
query at 100K documents cost its page faults and pushed the scorer's arrays out of cache
(float32, the row is 400 KB there; a sum of a query's few dozen terms keeps float32's
precision).
Tested against the numpy formula in ``tests/core/_text/test_bm25.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from magnetic_core._search.pointers import f32_ptr, i64_ptr, prefetch_row
from magnetic_core._search.select_kernel import _cut

__all__ = ["bm25_pool", "bm25_scores"]

# Postings whose scratch entry is asked for ahead of the one added: the entries are scattered
# over the row, which a probe has just pushed out of cache. An 8-word query's pass at 100K
# cells, caches emptied first: 80 us with none, 66-72 us 16 ahead, 67-70 us 32, 78 us 64
# or 8 (41-47 us against 46-49 us with the caches warm). Session 42, after a probe, the
# terms as packed rows (300 queries x 4, distances alternated, medians): 8 ahead 23.2 us,
# 16 22.5-22.6, 24 20.4, 32 19.9-20.1, 48 20.7, 64 22.7; with the best matches' pass
# after it 39.5-40.0 us at 16, 35.5-36.1 at 32.
_ACC_AHEAD = 32
# Touched entries the best matches' pass asks for ahead of the one it reads: the pass
# follows the order they were first touched, all over the row, after the accumulation's
# postings have pushed many of them out of the nearest cache. An 8-word query's pass at
# 100K cells after a probe (300 queries, 3 rounds, medians): 20.5 us with none, 19.4 us
# 32 ahead, 17.1 us 64, 16.6 us 128.
_TOP_AHEAD = 64


@njit(cache=True, nogil=True)
def bm25_scores(
    terms: np.ndarray,
    avgdl: float,
    k1: float,
    b: float,
    n_slots: int,
    acc: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """BM25 of every document in the given postings: ``(docs ascending, scores)``.

    Args:
        terms: one int64 row per query term: the addresses of its postings' document
            numbers (int64, each below ``n_slots``), term frequencies (float32) and
            document lengths (float32), their count, and the bits of its weight
            ``idf * (k1 + 1)`` as a float64 (summed as float32); the buffers must stay as
            they are during the call.
        avgdl: the mean document length.
        k1: term-frequency saturation.
        b: length normalisation.
        n_slots: document numbers are below this.
        acc: float32 scratch of at least ``n_slots`` zeros (zeros again on return).
    """
    touched = _accumulate(terms, avgdl, k1, b, n_slots, acc)
    # One bit per touched document: reading the set bits in order gives them ascending
    # without a pass over the whole scratch row (800 KB at 100K documents, a quarter of
    # the stage's time there) and without a sort.
    seen = np.zeros((n_slots >> 6) + 1, np.uint64)
    for i in range(touched.shape[0]):
        d = touched[i]
        seen[d >> 6] |= np.uint64(1) << np.uint64(d & 63)
    return _collect(seen, acc, touched.shape[0])


@njit(cache=True, nogil=True)
def bm25_pool(
    terms: np.ndarray,
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
    if n_slots > _MAX_DOCS:
        raise ValueError("bm25_pool: document numbers must stay below 2**32")
    touched = _accumulate(terms, avgdl, k1, b, n_slots, acc)
    at_pool = np.zeros(pool.shape[0], np.float32)
    for i in range(pool.shape[0]):
        d = pool[i]
        if 0 <= d < n_slots:
            at_pool[i] = np.float32(acc[d])
    top, top_vals = _collect_top(touched, acc, n_top)
    return top, top_vals, at_pool


@njit(cache=True, nogil=True)
def _accumulate(
    terms: np.ndarray,
    avgdl: float,
    k1: float,
    b: float,
    n_slots: int,
    acc: np.ndarray,
) -> np.ndarray:
    """Add every posting's BM25 term into ``acc``; the documents touched, in the order first
    touched. A document is listed when its sum was still 0 (every term is above 0), by a
    conditional add rather than a branch (so one entry past the last is written)."""
    kk, one_b = np.float32(k1), np.float32(1.0 - b)
    per_len = np.float32(b) / np.float32(avgdl)
    weights = terms.view(np.float64)
    total = 0
    for t in range(terms.shape[0]):
        total += terms[t, 3]
    touched = np.empty(min(total, n_slots) + 1, np.int64)
    m = 0
    acc_at = acc.ctypes.data
    for t in range(terms.shape[0]):
        w = np.float32(weights[t, 4])
        docs = i64_ptr(terms[t, 0])  # type: ignore[call-arg,var-annotated]  # numba's typingctx
        tfs = f32_ptr(terms[t, 1])  # type: ignore[call-arg,var-annotated]
        lens = f32_ptr(terms[t, 2])  # type: ignore[call-arg,var-annotated]
        count = terms[t, 3]
        for i in range(min(_ACC_AHEAD, count)):
            prefetch_row(acc_at + docs[i] * 4, 4)
        for i in range(count):
            if i + _ACC_AHEAD < count:
                prefetch_row(acc_at + docs[i + _ACC_AHEAD] * 4, 4)
            d = docs[i]
            tf = tfs[i]
            before = acc[d]
            acc[d] = before + w * tf / (tf + kk * (one_b + per_len * lens[i]))
            touched[m] = d
            m += int(before == 0.0)
    return touched[:m]


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
def _collect_top(touched: np.ndarray, acc: np.ndarray, n_top: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n_top`` best of the ``touched`` documents and their scores, best first (ties:
    the lower number first); ``acc`` is zeroed again where they were.

    Each document is ranked by one integer: its score's bits (positive float32 sort as
    their bits do) above the complement of its number, so a larger key is a better
    score, then a lower number, whatever order the documents come in. The keys go into a
    buffer cut back to the best when it fills (``_cut``), written always and kept only
    above the bar: no array the size of the matches is written (a 25-word query touches
    17K documents at 100K cells). Against the touched documents read back from a bitmap
    in number order (a branch per set bit, and one per word, both mispredicted), an
    8-word query's pass at 100K cells took 34 us against 49 us.
    """
    if n_top <= 0:
        for i in range(touched.shape[0]):
            acc[touched[i]] = 0.0
        return np.empty(0, np.int64), np.empty(0, np.float32)
    bits = acc.view(np.uint32)
    cap = max(4 * n_top, 64)
    keys = np.empty(cap, np.int64)
    index = np.empty(cap, np.int64)
    held = 0
    bar = np.int64(-1)  # every key is at least 0: all pass until the first cut
    acc_at = acc.ctypes.data
    n = touched.shape[0]
    for i in range(min(_TOP_AHEAD, n)):
        prefetch_row(acc_at + touched[i] * 4, 4)
    for i in range(n):
        if i + _TOP_AHEAD < n:
            prefetch_row(acc_at + touched[i + _TOP_AHEAD] * 4, 4)
        d = touched[i]
        key = (np.int64(bits[d]) << 32) | (_MAX_DOCS - d)
        acc[d] = 0.0
        keys[held] = key
        index[held] = d
        held += int(key > bar)
        if held == cap:
            cut_at, held = _cut(keys, index, held, n_top)
            bar = np.int64(cut_at)  # the keys are integers: so is the bar
    if held > n_top:
        _, held = _cut(keys, index, held, n_top)
    order = np.argsort(-keys[:held])
    score_bits = np.empty(held, np.uint32)
    for i in range(held):
        score_bits[i] = np.uint32(keys[order[i]] >> 32)
    return index[:held][order], score_bits.view(np.float32)


# Document numbers are below this (a ranking key keeps a number in its low 32 bits).
_MAX_DOCS = np.int64(0xFFFFFFFF)


# The position of a lone set bit: its product with a de Bruijn sequence has a distinct top
# six bits for each position (a table look-up instead of a loop over 64 bits).
_DE_BRUIJN = np.uint64(0x03F79D71B4CB0A89)
_BIT = np.zeros(64, np.int64)
_BIT[[((int(_DE_BRUIJN) << i) & (2**64 - 1)) >> 58 for i in range(64)]] = np.arange(64)
