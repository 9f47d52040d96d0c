"""Maximal marginal relevance, shared by the LangChain and LlamaIndex adapters."""

from __future__ import annotations

import numpy as np

from magnetic_core.ranking import maximal_marginal_relevance


def test_mmr_prefers_a_diverse_second_pick():
    v = np.array([[1.0, 0.0], [0.99, 0.141], [0.0, 1.0]])
    q = np.array([1.0, 0.0])
    assert maximal_marginal_relevance(q, v, 2, 0.3) == [0, 2]
    assert maximal_marginal_relevance(q, v, 2, 1.0) == [0, 1]  # relevance only
    assert maximal_marginal_relevance(q, v, 10, 0.3) == [0, 2, 1]
    assert maximal_marginal_relevance(q, v[:0], 3) == []
