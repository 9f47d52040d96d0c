"""The compiled fused ranking against the ranking terms written in numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetic_core._search.fusion_kernel import fused_top


def _reference(cosine, docs, boosted, boost, bm25, scale, k):
    boosts = np.isin(docs, boosted).astype(np.float32) * np.float32(boost)
    lexical = bm25 * np.float32(scale)
    rank = cosine + boosts + lexical
    best = np.argsort(-rank, kind="stable")[:k]  # ties: the lower row first
    return best, boosts[best], lexical[best]


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 2**31),
    st.integers(0, 120),
    st.integers(0, 200),
    st.sampled_from([0.0, 0.1, -0.2]),
    st.sampled_from([0.0, 0.3]),
)
def test_fused_top_ranks_like_numpy(seed, n, k, boost, scale):
    rng = np.random.default_rng(seed)
    # Few distinct values: many exact ties, which must go to the lower row.
    cosine = rng.integers(-4, 5, n).astype(np.float32) / 4
    docs = rng.permutation(400)[:n].astype(np.int64)
    boosted = np.sort(rng.choice(500, int(rng.integers(0, 60)), replace=False)).astype(np.int64)
    bm25 = rng.integers(0, 3, n).astype(np.float32)
    got = fused_top(cosine, docs, boosted, np.float32(boost), bm25, np.float32(scale), k)
    want = _reference(cosine, docs, boosted, boost, bm25, scale, k)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_fused_top_of_no_rows_and_of_more_than_there_are():
    none = np.empty(0, np.float32)
    rows, boosts, lexical = fused_top(
        none, np.empty(0, np.int64), np.empty(0, np.int64), np.float32(0.1), none,
        np.float32(0.5), 10,
    )  # fmt: skip
    assert rows.shape == boosts.shape == lexical.shape == (0,)
    cosine = np.array([0.5, 0.9, 0.1], np.float32)
    rows, boosts, _ = fused_top(
        cosine, np.array([7, 3, 5]), np.array([5]), np.float32(1.0), np.zeros(3, np.float32),
        np.float32(0.0), 10,
    )  # fmt: skip
    assert rows.tolist() == [2, 1, 0] and boosts.tolist() == [1.0, 0.0, 0.0]
