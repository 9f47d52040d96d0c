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
    addresses, counts, weights, mean length 4, k1 1.2, b 0.75); the caller keeps the
    arrays alive until the kernels have run."""
    return (
        np.array([x.ctypes.data for x, _, _ in kept], np.int64),
        np.array([f.ctypes.data for _, f, _ in kept], np.int64),
        np.array([n.ctypes.data for _, _, n in kept], np.int64),
        np.array([x.shape[0] for x, _, _ in kept], np.int64),
        np.asarray(weights, np.float32),
        4.0,
        1.2,
        0.75,
        n_numbers,
        acc,
    )
