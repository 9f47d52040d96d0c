"""The hierarchy: calibration, splits, batch assignment identical to one-by-one, merges."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core._index.clustering import calibrate_threshold, plan_merge_pairs, two_means
from magnetic_core._index.index import HierIndex
from magnetic_core.eval import clustered_data
from tests import invariants


def _partition(index: HierIndex) -> set[frozenset[str]]:
    return {frozenset(g.ids) for g in index.slot_groups}


def _batch_and_one_by_one(
    ids: list[str], vecs: np.ndarray, cap: int, threshold: float, chunk: int
) -> tuple[HierIndex, HierIndex]:
    """The same rows assigned in chunks and one at a time (both indexes checked whole)."""
    batch = HierIndex(vecs.shape[1], max_group_size=cap)
    batch.assign(ids, vecs, threshold=threshold, chunk=chunk)
    single = HierIndex(vecs.shape[1], max_group_size=cap)
    for cid, vec in zip(ids, vecs):
        single.assign([cid], vec[None, :], threshold=threshold)
    invariants.centroids_are_member_means(batch, atol=1e-4)
    invariants.centroids_are_member_means(single, atol=1e-4)
    return batch, single


def test_batch_assignment_equals_one_by_one():
    vecs, _ = clustered_data(600, 16, 12, seed=3)
    ids = [f"c{i}" for i in range(len(vecs))]
    batch, single = _batch_and_one_by_one(ids, vecs, cap=40, threshold=0.6, chunk=128)
    assert _partition(batch) == _partition(single)
    assert np.allclose(
        np.sort(batch.centroids, axis=0), np.sort(single.centroids, axis=0), atol=1e-5
    )


def test_upserts_inside_a_batch_match_one_by_one():
    rng = np.random.default_rng(5)
    vecs, _ = clustered_data(300, 8, 6, seed=5)
    ids = [f"c{int(i)}" for i in rng.integers(0, 120, size=300)]  # many repeats
    batch, single = _batch_and_one_by_one(ids, vecs, cap=25, threshold=0.7, chunk=64)
    assert _partition(batch) == _partition(single)
    assert len(batch) == len(set(ids))
    # The last write of each id wins.
    last = {cid: vec for cid, vec in zip(ids, vecs)}
    for cid, vec in last.items():
        assert np.allclose(batch.vector(cid), vec)


def test_groups_never_exceed_the_size_cap():
    vecs, _ = clustered_data(2000, 16, 2, spread=0.1, seed=1)
    index = HierIndex(16, max_group_size=50)
    index.assign([str(i) for i in range(2000)], vecs, threshold=0.0)
    assert max(g.n for g in index.slot_groups) <= 50
    assert sum(g.n for g in index.slot_groups) == 2000


def test_centroid_is_the_normalised_mean_of_members_after_moves_and_removals():
    vecs, _ = clustered_data(400, 8, 4, seed=2)
    index = HierIndex(8, max_group_size=60)
    index.assign([str(i) for i in range(400)], vecs, threshold=0.5)
    for i in range(0, 400, 3):
        index.remove(str(i))
    index.assign([str(i) for i in range(1, 400, 3)], vecs[::-1][: len(range(1, 400, 3))], 0.5)
    invariants.centroids_are_member_means(index, atol=1e-4)


def test_duplicates_still_split():
    index = HierIndex(4, max_group_size=10)
    vec = np.array([[1, 0, 0, 0]], np.float32)
    index.assign([str(i) for i in range(35)], np.repeat(vec, 35, axis=0), threshold=0.9)
    assert max(g.n for g in index.slot_groups) <= 10


def test_two_means_separates_two_clusters():
    vecs, labels = clustered_data(200, 16, 2, spread=0.2, seed=9)
    mask = two_means(vecs)
    agree = (mask == (labels == labels[mask][0])).mean()
    assert agree == 1.0


def test_calibrated_threshold_follows_the_data():
    tight, _ = clustered_data(256, 32, 8, spread=0.2, seed=0)
    loose, _ = clustered_data(256, 32, 8, spread=2.0, seed=0)
    assert calibrate_threshold(tight, 25) > calibrate_threshold(loose, 25)
    # exact duplicates do not drag the threshold to 1
    dup = np.repeat(loose[:128], 2, axis=0)
    assert calibrate_threshold(dup, 25) < 0.99


def test_merge_pairs_are_greedy_disjoint_and_respect_the_cap():
    c = np.array([[1, 0], [0.99, 0.141], [0, 1], [0.1, 0.995]], np.float32)
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    pairs = plan_merge_pairs(c, 0.95)
    assert {(i, j) for i, j, _ in pairs} == {(0, 1), (2, 3)}
    capped = plan_merge_pairs(c, 0.95, sizes=np.array([5, 5, 1, 1]), max_size=6)
    assert {(i, j) for i, j, _ in capped} == {(2, 3)}
    # blocked computation gives the same plan
    assert plan_merge_pairs(c, 0.95, block=1) == pairs


def test_a_split_moves_the_smaller_side_to_the_new_group():
    # Moved cells are rewritten in storage, so a split moves as few as it can.
    vecs, _ = clustered_data(2, 16, 2, spread=0.0, seed=5)
    rng = np.random.default_rng(5)
    for big in (0, 1):
        rows = np.array([vecs[big]] * 7 + [vecs[1 - big]] * 3, np.float32)
        rows += rng.normal(0, 0.01, rows.shape).astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        index = HierIndex(16, 100)
        index.assign([f"c{i}" for i in range(10)], rows, -1.0)
        (group,) = index.slot_groups
        new = index.split(group)
        assert sorted(new.ids) == ["c7", "c8", "c9"]
        assert index.take_moved() == {"c7", "c8", "c9"}


def _two_means_reference(vectors: np.ndarray, iterations: int = 8) -> np.ndarray:
    """The split in plain numpy (float64): what the compiled two_means computes."""
    x = vectors.astype(np.float64)
    n = x.shape[0]
    seed_a = int(np.argmin(x @ x.sum(axis=0)))
    seed_b = int(np.argmin(x @ x[seed_a]))
    centers = np.stack([x[seed_a], x[seed_b]])
    mask = np.zeros(n, dtype=bool)
    for _ in range(iterations):
        sims = x @ centers.T
        new = sims[:, 1] > sims[:, 0]
        if not new.any() or new.all() or np.array_equal(new, mask):
            break
        mask = new
        centers = np.stack([x[~mask].sum(axis=0), x[mask].sum(axis=0)])
        centers /= np.maximum(np.linalg.norm(centers, axis=1, keepdims=True), 1e-12)
    if not mask.any() or mask.all():
        mask = np.zeros(n, dtype=bool)
        mask[n // 2 :] = True
    return mask


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("n", "dim"), [(1, 8), (2, 8), (3, 2), (257, 384), (90, 16)])
def test_compiled_two_means_matches_the_numpy_reference(seed, n, dim):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((3, dim))
    vecs = centres[rng.integers(0, 3, n)] + rng.standard_normal((n, dim))
    vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
    np.testing.assert_array_equal(two_means(vecs), _two_means_reference(vecs))


def test_compiled_two_means_edge_cases():
    same = np.repeat(np.eye(1, 6, dtype=np.float32), 9, axis=0)  # duplicates: halves
    np.testing.assert_array_equal(two_means(same), np.arange(9) >= 4)
    opposite = np.array([[1, 0], [-1, 0], [1, 0], [-1, 0]], np.float32)
    np.testing.assert_array_equal(two_means(opposite), _two_means_reference(opposite))
    assert two_means(np.empty((0, 4), np.float32)).shape == (0,)
    np.testing.assert_array_equal(two_means(opposite, iterations=0), [False, False, True, True])
