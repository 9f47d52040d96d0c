"""The compiled BM25 accumulation of the lexical stage (numba).

One pass over the query terms' postings, in query-term order, summing each document's
terms in float64 into a dense scratch row: no per-term temporaries, no sort of the
postings. Tested against the numpy formula in ``tests/core/_text/test_lexical.py``.
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
    """
    acc = np.zeros(n_slots, np.float64)
    touched = np.empty(docs.shape[0], np.int64)
    m = 0
    kk, one_b = np.float32(k1), np.float32(1.0 - b)
    bb, avg = np.float32(b), np.float32(avgdl)
    for t in range(bounds.shape[0] - 1):
        w = weights[t]
        for i in range(bounds[t], bounds[t + 1]):
            d = docs[i]
            tf = tfs[i]
            norm = kk * (one_b + bb * lengths[d] / avg)
            if acc[d] == 0.0:  # every term adds a positive score
                touched[m] = d
                m += 1
            acc[d] += w * tf / (tf + norm)
    if 16 * m < n_slots:
        found = np.sort(touched[:m])
    else:
        found = np.empty(m, np.int64)
        at = 0
        for d in range(n_slots):
            if acc[d] != 0.0:
                found[at] = d
                at += 1
    vals = np.empty(m, np.float32)
    for i in range(m):
        vals[i] = np.float32(acc[found[i]])
    return found, vals
