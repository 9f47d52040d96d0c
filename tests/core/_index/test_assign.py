"""One chunk of the batch assignment: rows filed as a one-at-a-time loop would file them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from magnetic_core._index.assign import ChunkRun, Scratch
from magnetic_core._index.index import HierIndex


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    centres = rng.standard_normal((4, dim))
    v = centres[rng.integers(0, 4, n)] + 0.6 * rng.standard_normal((n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _one_at_a_time(ids, vecs, threshold) -> list[set[str]]:
    """Plain reference (no cap reached): exact float64 scores, ties to the first group."""
    groups: list[tuple[list[str], np.ndarray]] = []
    where: dict[str, int] = {}
    vecs_of: dict[str, np.ndarray] = {}
    for cid, vec in zip(ids, vecs, strict=True):
        if cid in where:  # an upsert: the row leaves its group and is filed afresh
            members, total = groups[where.pop(cid)]
            total -= vecs_of[cid]
            members.remove(cid)
        vecs_of[cid] = vec.astype(np.float64)
        best, best_score = None, -math.inf
        for g, (members, total) in enumerate(groups):
            if not members:
                continue
            centroid = (total / math.sqrt(float(total @ total))).astype(np.float32)
            score = math.fsum((vec.astype(np.float64) * centroid).tolist())
            if score > best_score:
                best, best_score = g, score
        if best is None or best_score < threshold:
            groups.append(([], np.zeros(vec.shape[0])))
            best = len(groups) - 1
        groups[best][0].append(cid)
        groups[best][1][:] += vec.astype(np.float64)
        where[cid] = best
    return sorted((set(m) for m, _ in groups if m), key=sorted)


def _partition(index: HierIndex) -> list[set[str]]:
    return sorted((set(g.ids) for g in index.slot_groups), key=sorted)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("threshold", [0.2, 0.45, 0.7])
def test_a_chunk_files_rows_as_the_one_at_a_time_reference(seed: int, threshold: float):
    rng = np.random.default_rng(seed)
    x = _unit(rng, 60, 12)
    ids = [f"c{i}" for i in range(60)]
    index = HierIndex(12, max_group_size=1000)
    assert ChunkRun(index, ids, x, threshold, Scratch()).run() == 60
    assert _partition(index) == _one_at_a_time(ids, x, threshold)
    assert [index.seq[c] for c in ids] == list(range(60))  # in order, consecutive
    for g in index.slot_groups:  # sums and centroids of the members, exactly filed
        np.testing.assert_allclose(g.total, x[[ids.index(c) for c in g.ids]].sum(0), atol=1e-5)


def test_ids_stored_before_or_repeated_in_the_chunk_are_moved_not_duplicated():
    rng = np.random.default_rng(7)
    x = _unit(rng, 40, 8)
    index = HierIndex(8, max_group_size=1000)
    first = [f"c{i}" for i in range(20)]
    ChunkRun(index, first, x[:20], 0.5, Scratch()).run()
    again = ["c3", "n1", "c3", "c10", "n2", "n1"] + [f"n{i}" for i in range(3, 17)]
    ChunkRun(index, again, x[20:], 0.5, Scratch()).run()
    everything = first + again
    assert _partition(index) == _one_at_a_time(everything, np.vstack([x[:20], x[20:]]), 0.5)
    members = [c for g in index.slot_groups for c in g.ids]
    assert len(members) == len(set(members)) == len(index.loc) == len(set(everything))
    last = {c: i for i, c in enumerate(again)}
    np.testing.assert_array_equal(index.vector("n1"), x[20 + last["n1"]])


def test_a_chunk_stops_where_the_store_reaches_its_rebalance_point():
    rng = np.random.default_rng(8)
    x = _unit(rng, 30, 8)
    ids = [f"c{i}" for i in range(30)]
    index = HierIndex(8, max_group_size=1000, rebalance_from=10)
    done = ChunkRun(index, ids, x, 0.5, Scratch()).run()
    assert done == 10 and len(index) == 10  # the rest starts afresh after the rebalance
    # the points double: 10, 20, 40
    assert ChunkRun(index, ids[10:], x[10:], 0.5, Scratch()).run() == 10
    assert ChunkRun(index, ids[20:], x[20:], 0.5, Scratch()).run() == 10
    assert len(index) == 30 and index._next_rebalance == 40


def test_an_empty_chunk_files_nothing():
    index = HierIndex(4, max_group_size=8)
    assert ChunkRun(index, [], np.empty((0, 4), np.float32), 0.5, Scratch()).run() == 0
    assert len(index) == 0 and index.slot_groups == []


def test_scratch_buffers_are_reused_and_grow_on_demand():
    scratch = Scratch()
    a = scratch.sims(4, 5)
    assert a.shape == (4, 5) and a.dtype == np.float32 and a.flags.c_contiguous
    b = scratch.sims(2, 3)
    assert b.shape == (2, 3) and np.shares_memory(a, b)  # smaller: the same memory
    c = scratch.sims(50, 50)
    assert c.shape == (50, 50) and c.flags.c_contiguous and not np.shares_memory(a, c)
    g = scratch.gram(6)
    assert g.shape == (6, 6) and g.flags.c_contiguous and np.shares_memory(g, scratch.gram(3))


def test_exact_decisions_match_exact_sums_in_ties_and_at_the_threshold():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((200, 24)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    index = HierIndex(24, 64)
    index.assign([f"c{i}" for i in range(200)], x, 0.5)
    groups = index.slot_groups
    assert len(groups) >= 6
    groups[4].total[:] = groups[1].total  # slots 1 and 4: the same centroid
    rows = _unit(rng, 40, 24)
    run = ChunkRun(index, [f"n{i}" for i in range(40)], rows, 0.0, Scratch())
    everything = np.zeros(len(groups), np.float32)

    def exact(i: int) -> list[float]:
        v = rows[i].astype(np.float64)
        return [math.fsum((v * g.centroid()).tolist()) for g in groups]

    for i in range(40):
        scores = exact(i)
        best = int(np.argmax(scores))  # the first of equals
        for threshold in (-1.0, scores[best], np.nextafter(scores[best], 2.0), 0.3):
            run.threshold = float(threshold)
            want = best if scores[best] >= threshold else -1
            assert run._exact_best(i, everything, -1.0) == want
    tied = groups[1].centroid()  # a row closest to the tied pair goes to the lower slot
    run.x[0] = tied
    run.norms_l[0] = float(np.linalg.norm(tied.astype(np.float64)))
    run.threshold = 0.0
    assert run._exact_best(0, everything, -1.0) == 1


def test_split_groups_keep_blocks_within_their_limit_and_every_row_is_the_one_filed():
    rng = np.random.default_rng(7)
    x = _unit(rng, 3000, 16)
    ids = [f"c{i}" for i in range(3000)]
    index = HierIndex(16, max_group_size=24)
    index.assign(ids, x, 0.1, chunk=256)
    assert len(index.slot_groups) > 50  # the low threshold filled groups past 24: they split
    for group in index.slot_groups:
        # A block never grows past the 25 cells at which its group splits (it went to 48).
        assert group.n <= 24 and group.vecs.shape[0] <= 25
    for i, cid in enumerate(ids):  # rows copied from the pending filing into the blocks
        np.testing.assert_array_equal(index.vector(cid), x[i])
