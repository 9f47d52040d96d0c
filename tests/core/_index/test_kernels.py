"""The compiled assignment loop files cells as a plain one-at-a-time loop with exact scores.

The reference below scores every group for every cell exactly (``math.fsum`` of float64
products with the group's float32 centroid, ties to the lowest slot), joins at or above the
threshold, founds a group otherwise and splits a group past the cap: the definition that
:meth:`HierIndex.assign` and its compiled kernel must match, whatever the chunking.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from magnetic_core._index import kernels
from magnetic_core._index.index import HierIndex
from magnetic_core.eval import clustered_data


def _reference(ids, vecs, threshold, cap) -> HierIndex:
    index = HierIndex(vecs.shape[1], cap)
    for cid, vec in zip(ids, vecs, strict=True):
        if cid in index.loc:
            index.remove(cid)
        vec64 = vec.astype(np.float64)
        best, best_score = None, -math.inf
        for group in index.slot_groups:
            score = math.fsum((vec64 * group.centroid()).tolist())
            if score > best_score:
                best, best_score = group, score
        group = best if best is not None and best_score >= threshold else index._add_group()
        group.append(cid, vec)
        index.loc[cid] = group
        index.seq[cid] = index._take_seq(None)
        if group.n > cap:
            index.split(group)
        index._refresh(group)
    return index


def _partition(index: HierIndex) -> list[tuple[str, list[str], bytes]]:
    return [(g.gid, list(g.ids), g.total.tobytes()) for g in index.slot_groups]


def _check(ids, vecs, threshold, cap, chunks=(1, 7, 256)):
    want = _reference(ids, vecs, threshold, cap)
    for chunk in chunks:
        got = HierIndex(vecs.shape[1], cap)
        got.assign(ids, vecs, threshold, chunk)
        assert _partition(got) == _partition(want), chunk
        assert got.seq == want.seq
        np.testing.assert_allclose(got.centroids, want.centroids, atol=1e-6)


def _unit(rng, n, dim) -> np.ndarray:
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


@pytest.mark.parametrize("seed", range(3))
def test_random_vectors_match_the_reference(seed):
    rng = np.random.default_rng(seed)
    vecs = _unit(rng, 400, 16)
    ids = [f"c{i}" for i in range(len(vecs))]
    for threshold, cap in [(0.1, 6), (0.4, 30), (0.9, 2)]:
        _check(ids, vecs, threshold, cap)


def test_clustered_vectors_with_upserts_match_the_reference():
    vecs, _ = clustered_data(500, 24, 7, spread=0.5, seed=9)
    rng = np.random.default_rng(9)
    ids = [f"c{int(i)}" for i in rng.integers(0, 200, size=len(vecs))]
    _check(ids, vecs, 0.5, 40)


def test_edge_cases_match_the_reference():
    rng = np.random.default_rng(4)
    same = np.repeat(_unit(rng, 1, 8), 50, axis=0)  # all duplicates: splits by halves
    _check([f"d{i}" for i in range(50)], same, 0.99, 5)
    one = _unit(rng, 1, 8)
    _check(["only"], one, 0.5, 5)
    vecs = _unit(rng, 60, 8)
    ids = [f"c{i}" for i in range(60)]
    _check(ids, vecs, 1.0, 10)  # nothing but exact duplicates joins
    _check(ids, vecs, -1.0, 10)  # everything joins, splits at every cap
    _check(["x"] * 30, vecs[:30], 0.3, 4)  # one id rewritten again and again


def test_an_empty_batch_changes_nothing():
    index = HierIndex(8, 10)
    index.assign([], np.empty((0, 8), np.float32), 0.5)
    assert len(index) == 0
    assert index.slot_groups == []


def test_score_bound_grows_with_rewrites_and_ratio():
    base = kernels.score_bound(1e-5, 2.0, 1.0, 0.0)
    assert 0.0 < base < 1e-3
    assert kernels.score_bound(1e-5, 2.0, 1.0, 10.0) > base
    assert kernels.score_bound(1e-5, 2.0, 3.0, 0.0) > base


def _best_two_reference(row):
    """One pass entry by entry: the first best column, its value, the best of the others
    and the first other column holding it (-1 and -inf for a single column)."""
    best, top, runner, second = 0, row[0], -1, -math.inf
    for j in range(1, len(row)):
        if row[j] > top:
            runner, second, best, top = best, top, j, row[j]
        elif row[j] > second:
            runner, second = j, row[j]
    return best, top, second, runner


@pytest.mark.parametrize("g", [1, 2, 7, 8, 9, 511, 512, 513, 1500, 4099])
def test_the_best_two_of_a_row_match_a_pass_entry_by_entry(g):
    rng = np.random.default_rng(g)
    for trial in range(30):
        row = rng.random(g + 5).astype(np.float32)  # entries past g must be ignored
        row[g:] = 2.0
        if trial % 3 == 1:  # ties: a few distinct values, repeated across blocks
            row[:g] = rng.integers(0, 4, size=g).astype(np.float32) / 4
        if trial % 3 == 2:  # the best in a late block, equalled in an earlier one
            row[g - 1] = 1.5
            row[rng.integers(0, g)] = 1.5
        best, top, second = kernels._best_two(row, g)
        want = _best_two_reference(row[:g].tolist())
        assert (best, float(top), float(second)) == want[:3]
        if g > 1:
            assert kernels._runner(row, g, best, second) == want[3]


def test_centroid_rows_are_the_unit_sums_of_the_given_slots_only():
    rng = np.random.default_rng(9)
    totals = rng.standard_normal((6, 20)) * 40
    totals[3] = 0.0  # a sum that cancelled: norm 0, left for the members' mean
    norms = np.full(6, -1.0)
    centroids = np.full((6, 20), 7.0, np.float32)
    slots = np.array([4, 0, 3])
    rows = kernels.centroid_rows(totals, norms, centroids, slots)
    want = np.linalg.norm(totals[slots], axis=1)
    np.testing.assert_allclose(norms[slots], want, rtol=1e-12)
    unit = (totals[[4, 0]] / want[:2, None]).astype(np.float32)
    np.testing.assert_allclose(rows[:2], unit, atol=1e-7)
    assert not rows[2].any() and norms[3] == 0.0
    np.testing.assert_array_equal(centroids[slots], rows)
    assert (centroids[[1, 2, 5]] == 7.0).all() and (norms[[1, 2, 5]] == -1.0).all()
