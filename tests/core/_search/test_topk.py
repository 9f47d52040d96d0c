"""Choosing candidates: the best k of a score array, and maximal marginal relevance (MMR)."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core._search.topk import maximal_marginal_relevance, top_indices


def test_mmr_prefers_a_diverse_second_pick():
    v = np.array([[1.0, 0.0], [0.99, 0.141], [0.0, 1.0]])
    q = np.array([1.0, 0.0])
    assert maximal_marginal_relevance(q, v, 2, 0.3) == [0, 2]
    assert maximal_marginal_relevance(q, v, 2, 1.0) == [0, 1]  # relevance only
    assert maximal_marginal_relevance(q, v, 10, 0.3) == [0, 2, 1]
    assert maximal_marginal_relevance(q, v[:0], 3) == []


@pytest.mark.parametrize("order", ["random", "ascending", "descending", "ties"])
def test_top_indices_selects_the_same_scores_as_a_full_partition(order: str) -> None:
    rng = np.random.default_rng(11)
    for n, keep in ((300, 256), (5000, 256), (12000, 256), (12000, 40), (100_000, 1024)):
        values = rng.standard_normal(n).astype(np.float32)
        if order == "ascending":
            values.sort()
        elif order == "descending":
            values = np.sort(values)[::-1].copy()
        elif order == "ties":
            values = np.round(values, 1)
        got = top_indices(values, keep)
        assert got.shape == (min(n, keep),) and len(set(got.tolist())) == got.shape[0]
        want = np.sort(values)[::-1][: min(n, keep)]
        np.testing.assert_array_equal(np.sort(values[got])[::-1], want)
