"""The compiled fused ranking against the ranking terms written in numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from magnetic_core._search.fusion_kernel import fused_top, settled_top

from .postings import kernel_args, random_postings


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


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**31),
    st.integers(0, 30),
    st.integers(1, 20),
    st.sampled_from([0.0, 0.2]),
    st.sampled_from([1.0, float("inf")]),
)
def test_lexical_settled_top_is_the_join_then_the_settled_ranking(seed, m, k, boost, sds):
    """The lexical stage, the join of its best matches and the settled ranking in one pass
    give what ``bm25_join`` then ``settled_top`` of the joined pool give, the matches whose
    slot's codes are current joining as pending rows with their code scores
    (``coded_rows``) after the pool's pending rows; with a best match that has no current
    row (found by id), or none, the join alone (with exact cosines) and no ranking."""
    from magnetic_core._search.fusion_kernel import lexical_settled_top
    from magnetic_core._search.join_kernel import bm25_join
    from magnetic_core._search.kernels import coded_rows

    rng = np.random.default_rng(seed)
    dim, rank, n_numbers, n_slots = 6, 4, 40, 6
    sizes = rng.integers(10, 20, 5)  # a row for every number
    blocks = [rng.integers(-3, 4, (int(s), dim)).astype(np.float32) for s in sizes]
    addresses = np.array([b.ctypes.data for b in blocks], np.int64)
    row_block = np.concatenate([np.full(b.shape[0], i, np.int64) for i, b in enumerate(blocks)])
    row_in_block = np.concatenate([np.arange(b.shape[0], dtype=np.int64) for b in blocks])
    n_rows = row_block.shape[0]
    # odd seeds: some numbers without a current row (unrecorded, or in stale slots)
    recorded = rng.random(n_numbers) < (0.9 if seed % 2 else 1.0)
    table = np.where(recorded, rng.permutation(n_rows)[:n_numbers], -1)
    doc_col = np.full(n_rows, -1, np.int64)
    doc_col[table[table >= 0]] = np.flatnonzero(table >= 0)
    block_slot = rng.permutation(n_slots)[: len(blocks)]  # each block its slot's
    slot_block = np.zeros(n_slots, np.int64)
    slot_block[block_slot] = np.arange(len(blocks))
    stale = rng.random(n_slots) < (0.3 if seed % 2 else 0.0)
    alive = np.ones(n_numbers, bool)
    rows_of = (table, doc_col, row_block, block_slot, slot_block, stale, alive)
    # Each block's rows in two sub-lists, coded (nibble codes of rank 4).
    cut = [int(rng.integers(0, s + 1)) for s in sizes]
    lens = np.array([x for c, s in zip(cut, sizes, strict=True) for x in (c, s - c)], np.int64)
    list_start = np.cumsum(lens) - lens
    block_first = np.arange(0, 2 * len(blocks), 2, dtype=np.int64)
    codes = rng.integers(0, 256, (n_rows, rank // 2)).astype(np.uint8)
    probe = (
        slot_block, block_first, block_first + 2,
        rng.integers(-3, 4, (lens.shape[0], dim)).astype(np.int8),
        np.full(lens.shape[0], 0.25, np.float32), np.ones(lens.shape[0], np.float32),
        list_start, lens, codes, np.full(n_rows, 0.125, np.float32),
    )  # fmt: skip
    kept = random_postings(rng, int(rng.integers(1, 4)), 40, n_numbers)
    acc = np.zeros(n_numbers, np.float32)
    postings = kernel_args(kept, rng.uniform(0.5, 3.0, len(kept)), n_numbers, acc)
    have = rng.permutation(n_numbers)[: m + 6].astype(np.int64)
    pending = rng.integers(0, n_rows, m).astype(np.int64)
    scores = rng.integers(-4, 5, m + 6).astype(np.float32) / 4
    boosted = np.sort(rng.choice(n_numbers, 30, replace=False)).astype(np.int64)
    q = rng.integers(-2, 3, dim).astype(np.float32)
    qp = rng.integers(-2, 3, rank).astype(np.float32)
    n_top, weight = 12, 0.4
    join, ranking = lexical_settled_top(
        postings, have, n_top, rows_of, addresses, row_in_block, probe, q, qp, scores,
        pending, boosted, np.float32(boost), weight, k, 4, sds,
    )  # fmt: skip
    assert not acc.any()
    want_join = bm25_join(postings, have, n_top, rows_of, addresses, row_in_block, q)
    top, top_vals, at_pool, joined, cosines, loose = want_join
    if loose.shape[0] or not top.shape[0]:  # a match found by id, or none at all
        for g, w in zip(join, want_join, strict=True):
            np.testing.assert_array_equal(g, w)
        assert ranking[4] == -1 and all(r.shape[0] == 0 for r in ranking[:4])
        return
    for g, w in zip(join[:4] + join[5:], want_join[:4] + want_join[5:], strict=True):
        np.testing.assert_array_equal(g, w)
    assert join[4].shape[0] == 0  # (not needed when the ranking is made)
    rows = table[top[joined]]
    current = ~stale[block_slot[row_block[rows]]]
    approx = coded_rows(rows[current], row_block, *probe[1:5], *probe[6:10], q, qp)
    docs = np.concatenate([have[:m], top[joined][current], have[m:], top[joined][~current]])
    pooled = np.concatenate([scores[:m], approx, scores[m:], cosines[~current]])
    bm25 = np.concatenate([at_pool[:m], top_vals[joined][current], at_pool[m:],
                           top_vals[joined][~current]])  # fmt: skip
    scale = np.float32(weight / float(top_vals[0]))
    got_rows, cos, boosts, lex, read = settled_top(
        pooled, docs, boosted, np.float32(boost), bm25, scale,
        np.concatenate([pending, rows[current]]), addresses, row_block, row_in_block, q, k,
        4, sds,
    )  # fmt: skip
    for g, w in zip(ranking, (docs[got_rows], cos, boosts, lex), strict=False):
        np.testing.assert_array_equal(g, w)
    assert ranking[4] == read
    if sds == float("inf"):  # every pending row read: the coded matches rank exactly
        assert read == m + int(current.sum())
