"""The centroid sketch prunes the scores of a chunk without changing any decision."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core._index import kernels, sketch
from magnetic_core._index.index import HierIndex
from magnetic_core.eval import clustered_data
from tests.core._index.test_index import _state


def _run(ids, vecs, threshold, cap, chunk, sketch_from) -> HierIndex:
    index = HierIndex(vecs.shape[1], cap, sketch_from=sketch_from)
    if chunk == 1:
        for cid, vec in zip(ids, vecs, strict=True):
            index.assign([cid], vec[None, :], threshold)
    else:
        index.assign(ids, vecs, threshold, chunk)
    return index


@pytest.mark.parametrize(("threshold", "cap"), [(0.3, 12), (0.55, 40), (0.0, 8)])
def test_sketched_assignment_equals_one_at_a_time(threshold, cap):
    vecs, _ = clustered_data(2500, 48, 150, spread=0.7, seed=21)
    ids = [f"c{i}" for i in range(len(vecs))]
    single = _run(ids, vecs, threshold, cap, 1, sketch_from=0)  # full products only
    for chunk in (64, 256, 1000):
        index = _run(ids, vecs, threshold, cap, chunk, sketch_from=60)
        assert index._sketch is not None  # the sketch was used past 60 groups
        assert _state(index) == _state(single), chunk


def test_sketched_upserts_equal_one_at_a_time():
    vecs, _ = clustered_data(1500, 36, 90, spread=0.6, seed=22)
    rng = np.random.default_rng(22)
    ids = [f"c{int(i)}" for i in rng.integers(0, 900, size=len(vecs))]
    single = _run(ids, vecs, 0.4, 10, 1, sketch_from=0)
    index = _run(ids, vecs, 0.4, 10, 128, sketch_from=40)
    assert index._sketch is not None
    assert _state(index) == _state(single)


def test_sketched_rebalancing_equals_one_at_a_time():
    vecs, _ = clustered_data(1800, 36, 100, spread=0.6, seed=24)
    ids = [f"c{i}" for i in range(len(vecs))]
    want = HierIndex(36, 10, rebalance_from=300, sketch_from=0)
    for cid, vec in zip(ids, vecs, strict=True):
        want.assign([cid], vec[None, :], 0.45)
    got = HierIndex(36, 10, rebalance_from=300, sketch_from=40)
    got.assign(ids, vecs, 0.45, 200)
    assert got._sketch is not None
    assert _state(got) == _state(want)


def _bound_rows_reference(x, c, basis, margin, scores):
    """Exact scores where the upper bound reaches the exact score of the best sketch score
    (``scores``, the kernel's input), bounds elsewhere."""
    xq, cq = x @ basis, c @ basis
    approx = (xq @ cq.T).astype(np.float64)
    slack = sketch.residual_norms(x, xq)[:, None] * sketch.residual_norms(c, cq)[None, :]
    exact = x.astype(np.float64) @ c.T.astype(np.float64)
    top = scores.argmax(axis=1)  # the first of equals, as the kernel takes it
    floor = exact[np.arange(len(x)), top][:, None] - 2 * margin
    keep = approx + slack >= floor
    return np.where(keep, exact, approx + slack + margin), keep


@pytest.mark.parametrize(
    ("n", "g", "dim", "rank"),
    [
        (1, 1, 8, 2),
        (40, 3, 12, 4),
        (5, 17, 12, 4),
        (30, 64, 24, 8),
        (200, 90, 48, 16),
        (25, 1300, 24, 8),  # several blocks of the best-score search, ties across them
    ],  # fmt: skip
)
def test_bound_rows_matches_the_reference_and_bounds_every_score(n, g, dim, rank):
    rng = np.random.default_rng(n + g)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    c = rng.standard_normal((g, dim)).astype(np.float32)
    c[g // 2 :] = c[0]  # ties: identical centroids
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    sk = sketch.Sketch(c, rank)
    sk.project_all(c, g + 2)
    xq = x @ sk.basis
    sims = np.zeros((n, g + 2), np.float32)
    sims[:, :g] = xq @ sk.proj[:g].T
    flags = np.zeros((n, g + 2), np.bool_)
    scores = sims[:, :g].copy()
    exact = kernels.bound_rows(
        sims, flags, x, sketch.residual_norms(x, xq), sk.res, c, g, sketch.MARGIN
    )
    want, keep = _bound_rows_reference(x, c, sk.basis, sketch.MARGIN, scores)
    np.testing.assert_array_equal(~flags[:, :g], keep)
    assert exact == keep.sum() and keep.any(axis=1).all()  # every row keeps its best
    np.testing.assert_allclose(sims[:, :g], want, atol=1e-5)
    truth = x.astype(np.float64) @ c.T.astype(np.float64)
    assert (sims[:, :g][flags[:, :g]] >= truth[flags[:, :g]]).all()  # bounds are bounds
    best = truth.max(axis=1, keepdims=True)
    assert (np.where(flags[:, :g], sims[:, :g], -np.inf) < best).all()  # pruned cannot win


def test_no_sketch_for_small_calls_few_groups_or_low_dimensions():
    vecs, _ = clustered_data(400, 48, 60, spread=0.5, seed=23)
    ids = [f"c{i}" for i in range(len(vecs))]
    assert _run(ids, vecs, 0.5, 8, 64, sketch_from=0)._sketch is None  # switched off
    assert _run(ids, vecs, 0.5, 8, 64, sketch_from=10**6)._sketch is None  # too few groups
    low, _ = clustered_data(400, 3, 60, spread=0.5, seed=23)
    assert _run(ids, low, 0.5, 8, 64, sketch_from=5)._sketch is None  # rank 6 d // 12 < 2
