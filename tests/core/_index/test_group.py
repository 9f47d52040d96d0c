"""One group's block of member vectors and its running sum, against a plain reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetic_core._index.group import Group

D = 6


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, D)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _check(group: Group, reference: dict[str, np.ndarray]) -> None:
    """The group holds exactly the reference's members, rows and ids in step."""
    assert group.n == len(reference) == len(group.ids) == len(group.rows)
    assert set(group.ids) == set(reference)
    for cid in group.ids:
        np.testing.assert_array_equal(group.view[group.rows[cid]], reference[cid])
        assert group.ids[group.rows[cid]] == cid
    want = np.sum(list(reference.values()), axis=0, dtype=np.float64) if reference else 0.0
    np.testing.assert_allclose(group.total, want, atol=1e-9)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    ops=st.lists(st.sampled_from(["append", "extend", "pop"]), min_size=1, max_size=120),
    limit=st.sampled_from([0, 5, 17, 40]),
)
def test_appends_extends_and_pops_keep_rows_ids_and_sum_in_step(seed, ops, limit):
    rng = np.random.default_rng(seed)
    group, reference, made = Group("g", D, limit=limit), {}, 0
    for op in ops:
        version = group.version
        if op == "append":
            vec = _unit(rng, 1)[0]
            group.append(f"c{made}", vec)
            reference[f"c{made}"] = vec
            made += 1
        elif op == "extend":
            k = int(rng.integers(0, 20))
            vecs = _unit(rng, k)
            cids = [f"c{made + i}" for i in range(k)]
            group.extend(cids, vecs)
            reference.update(zip(cids, vecs))
            made += k
        elif reference:
            cid = list(reference)[int(rng.integers(0, len(reference)))]
            np.testing.assert_array_equal(group.pop(cid), reference.pop(cid))
        _check(group, reference)
        assert group.version >= version  # any change moves the version
    assert group.view.shape == (len(reference), D) and group.vecs.shape[0] >= group.n


def test_a_block_grows_to_the_split_limit_not_past_it_then_doubles_beyond():
    group = Group("g", D, limit=257)
    rng = np.random.default_rng(0)
    capacities = []
    for i in range(600):
        group.append(f"c{i}", _unit(rng, 1)[0])
        if not capacities or capacities[-1] != group.vecs.shape[0]:
            capacities.append(group.vecs.shape[0])
    # 8 .. 128, then the limit (a group splits there: 512 rows were never filled), then
    # doubling for a group kept past its limit (a store whose limit was lowered).
    assert capacities == [8, 16, 32, 64, 128, 257, 514, 1028]


def test_a_batch_past_the_limit_fits_exactly_and_later_rows_double_it():
    group = Group("g", D, limit=17)
    rng = np.random.default_rng(1)
    group.extend([f"c{i}" for i in range(40)], _unit(rng, 40))
    assert group.vecs.shape[0] == 40
    group.append("more", _unit(rng, 1)[0])
    assert group.vecs.shape[0] == 80 and group.n == 41


def test_every_change_moves_the_version():
    rng = np.random.default_rng(0)
    group = Group("g", D)
    seen = [group.version]
    group.append("a", _unit(rng, 1)[0])
    seen.append(group.version)
    group.extend(["b", "c"], _unit(rng, 2))
    seen.append(group.version)
    group.pop("a")
    seen.append(group.version)
    assert seen == sorted(set(seen))  # strictly increasing
    group.extend([], np.empty((0, D), np.float32))
    assert group.version == seen[-1]  # nothing added: no change


def test_the_centroid_is_the_unit_mean_of_the_members():
    rng = np.random.default_rng(1)
    group = Group("g", D)
    vecs = _unit(rng, 9)
    group.extend([f"c{i}" for i in range(9)], vecs)
    mean = vecs.astype(np.float64).mean(axis=0)
    np.testing.assert_allclose(group.centroid(), mean / np.linalg.norm(mean), atol=1e-6)
    centroid, norm = group.centroid_and_norm()
    assert centroid.dtype == np.float32 and norm == pytest.approx(np.linalg.norm(mean) * 9)


def test_a_group_whose_members_cancel_still_has_a_unit_centroid():
    group = Group("g", D)
    e = np.eye(D, dtype=np.float32)
    group.extend(["a", "b", "c"], np.stack([e[0], -e[0], e[1]]))
    group.pop("c")  # the sum is now zero
    centroid = group.centroid()
    assert np.isfinite(centroid).all() and np.linalg.norm(centroid) == pytest.approx(1.0, abs=1e-6)


def test_popping_the_last_and_a_middle_row_keeps_the_others_in_place():
    rng = np.random.default_rng(2)
    group = Group("g", D)
    vecs = _unit(rng, 4)
    group.extend(["a", "b", "c", "d"], vecs)
    group.pop("d")
    assert group.ids == ["a", "b", "c"]
    group.pop("a")  # the last row takes its place
    assert group.ids == ["c", "b"] and group.rows == {"c": 0, "b": 1}
    np.testing.assert_array_equal(group.view, vecs[[2, 1]])
    with pytest.raises(KeyError):
        group.pop("a")


def test_many_removals_do_not_let_the_sum_drift():
    rng = np.random.default_rng(3)
    group = Group("g", D)
    big = (_unit(rng, 1)[0] * 1e4).astype(np.float32)  # a large row: its removal leaves error
    group.append("big", big)
    vecs = _unit(rng, 600)
    group.extend([f"c{i}" for i in range(600)], vecs)
    group.pop("big")
    for i in range(0, 472):
        group.pop(f"c{i}")
    assert group.n == 128  # a multiple of 64: the sum was re-summed from the block
    np.testing.assert_allclose(group.total, group.view.sum(axis=0, dtype=np.float64), atol=1e-9)


def test_a_memory_joining_opposite_cells_reports_finite_cohesion_and_caches_its_group(
    tmp_path, caplog
):
    from magnetic_core import MagneticMemory, MemoryConfig
    from magnetic_core.embeddings import VectorsOnly

    e = np.eye(4, dtype=np.float32)
    config = MemoryConfig(join_threshold=-1.0)
    with MagneticMemory(path=str(tmp_path), embedder=VectorsOnly(4), config=config) as mem:
        mem.add(["a", "b"], ids=["a", "b"], vectors=np.stack([e[0], -e[0]]))
        (group,) = mem.groups()
        assert group.size == 2 and group.cohesion == 0.0 and mem.stats().mean_cohesion == 0.0
        assert [h.id for h in mem.search(vector=e[0], k=2)] == ["a", "b"]
    assert "group cache was not updated" not in caplog.text
