"""The compiled fused ranking against the ranking terms written in numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from magnetic_core._search.fusion_kernel import fused_top, settled_top


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


def _two_steps(scores, docs, boosted, boost, bm25, scale, pending, arena, q, k, sds):
    """``fusion.settle`` then ``fusion.rank`` as numpy and the step kernels write them."""
    from magnetic_core._search.kernels import exact_prefix, top_k

    m = pending.shape[0]
    boosts = np.isin(docs, boosted).astype(np.float32) * np.float32(boost)
    lexical = bm25 * np.float32(scale)
    bonus = np.zeros(scores.shape[0], np.float32) + boosts + lexical
    order = top_k(scores[:m] + bonus[:m], m)
    others = (scores[m:] + boosts[m:]) + lexical[m:]
    exact = exact_prefix(*arena, pending[order], scores[:m][order], bonus[:m][order], others,
                         q, k, 4, sds)  # fmt: skip
    read = order[: exact.shape[0]]
    keep = np.concatenate([np.sort(read), np.arange(m, scores.shape[0])])
    settled = scores.copy()
    settled[read] = exact
    rows, got_boosts, got_lexical = fused_top(
        settled[keep], docs[keep], boosted, np.float32(boost), bm25[keep], np.float32(scale), k
    )
    return keep[rows], settled[keep][rows], got_boosts, got_lexical, exact.shape[0]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**31),
    st.integers(0, 40),
    st.integers(0, 30),
    st.integers(0, 50),
    st.sampled_from([0.0, 0.2]),
    st.sampled_from([0.0, 0.5]),
    st.sampled_from([1.0, 4.0, float("inf")]),
)
# Many pending rows, few hits and a tight margin: which rows are read depends on their
# lexical terms (these read other rows if the terms are left out of the reading order).
@example(1, 40, 20, 5, 0.2, 0.5, 1.0)
@example(4, 40, 20, 5, 0.2, 0.5, 1.0)
@example(7, 40, 20, 5, 0.0, 0.5, 1.0)
def test_settled_top_settles_and_ranks_as_the_two_steps_do(seed, m, extra, k, boost, scale, sds):
    """Settling a pool's pending rows and ranking it in one pass gives the hits, cosines
    and terms of settling first and ranking after (no pending rows, no exact ones, ``k``
    beyond the pool and rows left unread included)."""
    rng = np.random.default_rng(seed)
    dim, n = 8, m + extra
    block = rng.standard_normal((m + 5, dim)).astype(np.float32)
    block /= np.linalg.norm(block, axis=1, keepdims=True)
    arena = (np.array([block.ctypes.data], np.int64), np.zeros(m + 5, np.int64),
             np.arange(m + 5, dtype=np.int64))  # fmt: skip
    q = block[-1].copy()
    pending = rng.permutation(m + 4)[:m].astype(np.int64)
    scores = np.empty(n, np.float32)
    scores[:m] = block[pending] @ q + rng.normal(0, 0.05, m).astype(np.float32)  # codes' error
    scores[m:] = rng.integers(-4, 5, extra).astype(np.float32) / 4  # exact, with ties
    docs = rng.permutation(300)[:n].astype(np.int64)
    boosted = np.sort(rng.choice(300, int(rng.integers(0, 80)), replace=False)).astype(np.int64)
    bm25 = rng.integers(0, 3, n).astype(np.float32)
    got = settled_top(scores, docs, boosted, np.float32(boost), bm25, np.float32(scale),
                      pending, *arena, q, k, 4, sds)  # fmt: skip
    want = _two_steps(scores, docs, boosted, boost, bm25, scale, pending, arena, q, k, sds)
    for g, w in zip(got[:4], want[:4], strict=True):
        np.testing.assert_array_equal(g, w)
    assert got[4] == want[4]
    if sds == float("inf"):
        assert got[4] == m  # with no bound every pending row is read
