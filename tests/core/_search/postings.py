"""Random BM25 postings as the kernels read them, for the kernel tests."""

from __future__ import annotations

import numpy as np


def random_postings(
    rng: np.random.Generator, n_terms: int, most: int, n_numbers: int
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``n_terms`` posting lists of up to ``most`` ascending numbers below ``n_numbers``,
    each with term frequencies and document lengths."""
    kept = []
    for _ in range(n_terms):
        docs = np.unique(rng.integers(0, n_numbers, int(rng.integers(0, most)))).astype(np.int64)
        tfs = rng.integers(1, 4, docs.shape[0]).astype(np.float32)
        kept.append((docs, tfs, rng.integers(1, 9, docs.shape[0]).astype(np.float32)))
    return kept


def kernel_args(
    kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    weights: np.ndarray,
    n_numbers: int,
    acc: np.ndarray,
) -> tuple:
    """The BM25 kernels' arguments for ``kept`` (as ``BM25Queries.kernel_args`` gives them:
    one row per term, mean length 4, k1 1.2, b 0.75); the caller keeps the
    arrays alive until the kernels have run."""
    return terms_table(kept, weights), 4.0, 1.2, 0.75, n_numbers, acc


def terms_table(
    kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]], weights: np.ndarray
) -> np.ndarray:
    """The kernels' ``terms`` for ``kept`` and their ``weights``: per term the addresses of
    its numbers, term frequencies and lengths, its count and its weight's float64 bits."""
    table = np.empty((len(kept), 5), np.int64)
    for t, (docs, tfs, lens) in enumerate(kept):
        table[t, :4] = docs.ctypes.data, tfs.ctypes.data, lens.ctypes.data, docs.shape[0]
    table[:, 4] = np.asarray(weights, np.float64).view(np.int64)
    return table
