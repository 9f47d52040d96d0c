"""The steps of a sleep pass against plain numpy references: neighbours, moves, merges, splits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetic_core._sleep.plan import SleepConfig
from magnetic_core._sleep.steps import PassState, merge, neighbours, split

D = 8


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, D)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    g=st.integers(2, 40),
    m=st.integers(1, 10),
    block=st.sampled_from([1, 3, 7, 1024]),
    dead_share=st.sampled_from([0.0, 0.3]),
)
def test_neighbours_are_the_most_similar_other_live_rows(seed, g, m, block, dead_share):
    rng = np.random.default_rng(seed)
    centroids = _unit(rng, g)
    live = rng.random(g) >= dead_share
    live[:2] = True
    idx, sim = neighbours(centroids, live, m, block)
    k = max(1, min(m, int(live.sum()) - 1))
    assert idx.shape == sim.shape == (g, k)
    full = (centroids @ centroids.T).astype(np.float32)
    for row in np.flatnonzero(live):
        others = [j for j in np.flatnonzero(live) if j != row]
        want = np.sort(full[row, others])[::-1][:k]
        np.testing.assert_allclose(sim[row], want, atol=1e-6)  # best first
        assert row not in idx[row] and live[idx[row]].all()
        np.testing.assert_allclose(full[row, idx[row]], sim[row], atol=1e-6)


def test_neighbours_of_two_rows_are_each_other_even_for_a_large_m():
    rng = np.random.default_rng(0)
    idx, sim = neighbours(_unit(rng, 2), np.array([True, True]), 16, 1024)
    assert idx.tolist() == [[1], [0]] and sim[0, 0] == pytest.approx(sim[1, 0])


def _state(rng, sizes, cap=64) -> PassState:
    x = _unit(rng, sum(sizes))
    labels = np.repeat(np.arange(len(sizes)), sizes)
    totals = np.zeros((len(sizes), D))
    np.add.at(totals, labels, x.astype(np.float64))
    return PassState(x, labels, totals, cap)


def test_moves_keep_sums_sizes_and_member_lists_exact():
    rng = np.random.default_rng(1)
    state = _state(rng, [5, 3, 4])
    new = state.add_slot()
    state.move(np.array([0, 5, 6, 7]), np.array([new, 0, 0, 0]))  # slot 1 emptied
    ref = np.zeros((4, D))
    np.add.at(ref, state.labels, state.x.astype(np.float64))
    np.testing.assert_allclose(state.totals, ref, atol=1e-9)
    assert state.sizes.tolist() == [7, 0, 4, 1] and state.live() == 3
    assert not state.totals[1].any()  # an emptied slot's sum is exactly zero
    members = state.members()
    assert [sorted(m.tolist()) for m in members] == [
        sorted(np.flatnonzero(state.labels == s).tolist()) for s in range(4)
    ]
    state.move(np.array([], np.int64), np.array([], np.int64))  # a no-op
    assert state.sizes.tolist() == [7, 0, 4, 1]


def test_cohesions_are_the_mean_member_similarity_to_the_centroid():
    rng = np.random.default_rng(2)
    state = _state(rng, [6, 9])
    sims = state.member_sims()
    for s in range(2):
        members = state.labels == s
        assert state.cohesions()[s] == pytest.approx(float(sims[members].mean()), abs=1e-5)


def test_merge_takes_disjoint_pairs_and_keeps_the_larger_group():
    rng = np.random.default_rng(3)
    base = _unit(rng, 1)[0]
    x = np.stack([base + 0.01 * rng.standard_normal(D) for _ in range(12)]).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    labels = np.repeat([0, 1, 2], [3, 5, 4])
    totals = np.zeros((3, D))
    np.add.at(totals, labels, x.astype(np.float64))
    state = PassState(x, labels, totals, 64)
    before = state.sizes.copy()
    pairs = merge(state, 0.5, {"merge": 0.5}, SleepConfig(merge_threshold=0.5))
    assert len(pairs) == 1  # three near-identical groups: one pair, the third left alone
    kept, gone, _ = pairs[0]
    assert before[kept] > before[gone]  # the larger of the pair is kept
    assert state.sizes[gone] == 0 and state.sizes[kept] == before[kept] + before[gone]
    assert (state.labels[labels == gone] == kept).all()


def test_split_breaks_oversized_groups_down_to_the_cap():
    rng = np.random.default_rng(4)
    state = _state(rng, [50], cap=8)
    made = split(state, None, SleepConfig())
    assert state.sizes.max() <= 8 and state.sizes.sum() == 50
    assert len(made) == state.totals.shape[0] - 1  # every split made one new slot
    assert split(state, None, SleepConfig()) == []  # nothing left to do
