"""Batch assignment equals inserting one cell at a time, bit for bit, in the hard cases.

Batches score changed groups incrementally (Gram updates), whose rounding differs from the
direct product a one-cell batch uses; decisions near the threshold or near a tie are taken
from exact scores. These tests compare the whole state (group ids, slots, member order,
float64 sums, centroid rows) after a batch and after one-at-a-time insertion, on data built
to hit the threshold exactly, to tie exactly between groups, to repeat ids and to split.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from magnetic_core._index.index import HierIndex
from magnetic_core.eval import clustered_data


def _state(index: HierIndex) -> tuple:
    groups = {
        g.gid: (g.slot, list(g.ids), g.total.tobytes(), index.centroids[g.slot].tobytes())
        for g in index.slot_groups
    }
    return groups, dict(index.seq), sorted(index.loc)


def _run(ids, vecs, threshold, cap, chunk, rebalance_from=0) -> HierIndex:
    index = HierIndex(vecs.shape[1], cap, rebalance_from)
    if chunk == 1:
        for cid, vec in zip(ids, vecs, strict=True):
            index.assign([cid], vec[None, :], threshold)
    else:
        index.assign(ids, vecs, threshold, chunk)
    return index


def _assert_same(ids, vecs, threshold, cap, chunks=(3, 16, 64, 1000), rebalance_from=0):
    single = _state(_run(ids, vecs, threshold, cap, 1, rebalance_from))
    for chunk in chunks:
        assert _state(_run(ids, vecs, threshold, cap, chunk, rebalance_from)) == single, chunk


def _halves(n: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors with four entries of +-1/2: dot products of single cells are exact."""
    rng = np.random.default_rng(seed)
    vecs = np.zeros((n, dim), np.float32)
    for row in vecs:
        row[rng.choice(dim, 4, replace=False)] = rng.choice([-0.5, 0.5], 4)
    return vecs


@pytest.mark.parametrize("threshold", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_exact_ties_and_threshold_hits(threshold):
    # Many cells score exactly the threshold, many groups tie exactly, many duplicates.
    vecs = _halves(400, 6, seed=int(threshold * 4))
    ids = [f"c{i}" for i in range(len(vecs))]
    _assert_same(ids, vecs, threshold, cap=7)


def test_clustered_data_with_splits():
    vecs, _ = clustered_data(700, 12, 9, spread=0.6, seed=11)
    ids = [f"c{i}" for i in range(len(vecs))]
    for threshold, cap in [(0.3, 10), (0.6, 25), (-0.2, 40)]:
        _assert_same(ids, vecs, threshold, cap)


def test_upserts_and_repeats_inside_a_chunk():
    rng = np.random.default_rng(3)
    vecs = np.concatenate([_halves(150, 6, seed=1), clustered_data(150, 6, 4, seed=2)[0]])
    ids = [f"c{int(i)}" for i in rng.integers(0, 90, size=len(vecs))]
    _assert_same(ids, vecs, 0.5, cap=9)


def test_rebalancing_inside_a_chunk():
    vecs, _ = clustered_data(500, 8, 6, spread=0.8, seed=4)
    ids = [f"c{i}" for i in range(len(vecs))]
    _assert_same(ids, vecs, 0.4, cap=30, rebalance_from=50)


def test_a_score_exactly_at_the_threshold_joins_in_both_paths():
    vecs, _ = clustered_data(300, 16, 5, spread=0.7, seed=5)
    ids = [f"c{i}" for i in range(len(vecs))]
    target, threshold, cap = 200, 0.5, 1000  # no splits
    for _ in range(5):  # find a threshold equal to the exact score of cell `target`
        index = _run(ids[:target], vecs[:target], threshold, cap, 1)
        best = max(
            math.fsum((vecs[target].astype(np.float64) * g.centroid()).tolist())
            for g in index.slot_groups
        )
        if best == threshold:
            break
        threshold = best
    assert best == threshold
    existing = set(index.groups)
    single = _run(ids, vecs, threshold, cap, 1)
    assert single.loc[ids[target]].gid in existing  # joined, did not found a group
    _assert_same(ids, vecs, threshold, cap)


@pytest.mark.parametrize("seed", range(4))
def test_random_small_dims(seed):
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((300, 3)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs[::7] = vecs[1::7][: len(vecs[::7])]  # duplicates
    ids = [f"c{i}" for i in range(len(vecs))]
    for threshold, cap in itertools.product([0.0, 0.9], [5, 50]):
        _assert_same(ids, vecs, threshold, cap)


def test_one_group_joined_by_a_whole_large_chunk():
    # Every row joins the same group: its column is rewritten hundreds of times.
    rng = np.random.default_rng(7)
    centre = rng.standard_normal(24)
    vecs = (centre + 0.3 * rng.standard_normal((900, 24))).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = [f"c{i}" for i in range(len(vecs))]
    _assert_same(ids, vecs, 0.2, cap=5000, chunks=(900,))


def test_sums_that_nearly_cancel():
    # Threshold -1: everything joins, and the sum of random 3-d vectors is short next to
    # the norms that went into it, so columns are recomputed exactly along the way.
    rng = np.random.default_rng(8)
    vecs = rng.standard_normal((400, 3)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = [f"c{i}" for i in range(len(vecs))]
    _assert_same(ids, vecs, -1.0, cap=5000)
