"""The compiled BM25 accumulation of the lexical stage (numba).

One pass over the query terms' postings, in query-term order, summing each document's
terms in float64 into a dense scratch row, then one pass over that row for the documents
touched: no per-term temporaries, no sort. The scratch row is the caller's and is left
zeroed again (only the touched entries are written back), so a query allocates no row
the size of the store: a fresh 800 KB row per query at 100K documents cost its page faults
and pushed the scorer's arrays out of cache. Tested against the numpy formula in
``tests/core/_text/test_bm25.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["bm25_scores"]


@njit(cache=True, nogil=True)
def bm25_scores(
    docs: np.ndarray,
    tfs: np.ndarray,
    bounds: np.ndarray,
    weights: np.ndarray,
    lengths: np.ndarray,
    avgdl: float,
    k1: float,
    b: float,
    n_slots: int,
    acc: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """BM25 of every document in the given postings: ``(docs ascending, scores)``.

    Args:
        docs: the query terms' document numbers, term after term.
        tfs: their term frequencies.
        bounds: term ``t``'s postings are ``bounds[t]:bounds[t + 1]``.
        weights: per term, ``idf * (k1 + 1)`` (float32).
        lengths: every document's length (float32), by document number.
        avgdl: the mean document length.
        k1: term-frequency saturation.
        b: length normalisation.
        n_slots: document numbers are below this.
        acc: float64 scratch of at least ``n_slots`` zeros (zeros again on return).
    """
    kk, one_b = np.float32(k1), np.float32(1.0 - b)
    per_len = np.float32(b) / np.float32(avgdl)
    for t in range(bounds.shape[0] - 1):
        w = weights[t]
        for i in range(bounds[t], bounds[t + 1]):
            d = docs[i]
            tf = tfs[i]
            acc[d] += w * tf / (tf + kk * (one_b + per_len * lengths[d]))
    # Every term adds a positive score, so the touched documents are the non-zero entries:
    # one branch-free pass over the scratch row finds them in order (a per-posting "seen"
    # test and a sort of the touched ones cost three times as much at 100K documents).
    found = np.empty(min(n_slots, docs.shape[0]) + 1, np.int64)
    m = 0
    for d in range(n_slots):
        found[m] = d
        m += acc[d] != 0.0
    vals = np.empty(m, np.float32)
    for i in range(m):
        d = found[i]
        vals[i] = np.float32(acc[d])
        acc[d] = 0.0
    return found[:m], vals
