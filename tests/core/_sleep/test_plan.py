"""The plan of one sleep pass on small hand-made hierarchies, its invariants and its settings."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetic_core._sleep.plan import PassPlan, SleepConfig, plan_pass
from magnetic_core.errors import InvalidInputError

D = 16
JOIN = 0.5
NO_SPLIT = -1.0  # split_threshold under every cohesion: no incoherence split


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


class Maker:
    """Clusters of noisy unit vectors around fixed random directions (seeded)."""

    def __init__(self, seed: int = 0, noise: float = 0.15) -> None:
        self.rng = np.random.default_rng(seed)
        self.centres = _unit(self.rng.standard_normal((8, D)))
        self.noise = noise

    def cells(self, topic: int, n: int) -> np.ndarray:
        return _unit(self.centres[topic] + self.noise * self.rng.standard_normal((n, D)))


def _hierarchy(groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vectors, labels, totals) of groups given as blocks of vectors, slot = position."""
    vectors = np.concatenate(groups).astype(np.float32)
    labels = np.concatenate([np.full(len(g), s) for s, g in enumerate(groups)])
    totals = np.stack([g.sum(axis=0, dtype=np.float64) for g in groups])
    return vectors, labels, totals


def _plan(groups, cap: int = 64, **config) -> PassPlan:
    vectors, labels, totals = _hierarchy(groups)
    return plan_pass(vectors, labels, totals, JOIN, cap, SleepConfig(**config))


def _rows(groups, slot: int) -> np.ndarray:
    start = sum(len(g) for g in groups[:slot])
    return np.arange(start, start + len(groups[slot]))


def test_two_halves_of_one_topic_merge_and_the_rest_stay():
    m = Maker()
    groups = [m.cells(0, 10), m.cells(0, 10), m.cells(1, 12), m.cells(2, 12), m.cells(3, 12)]
    plan = _plan(groups, split_threshold=NO_SPLIT)
    assert [(a, b) for a, b, _ in plan.merges] == [(0, 1)]
    assert plan.merges[0][2] > 0.9
    assert (plan.labels[_rows(groups, 1)] == 0).all() and plan.sizes[1] == 0
    assert plan.sizes.tolist()[:5] == [20, 0, 12, 12, 12]
    assert plan.thresholds["merge"] == JOIN and plan.sources["merge"] == "fitted"


def test_distinct_topics_do_not_merge_and_the_size_cap_holds():
    m = Maker()
    groups = [m.cells(0, 10), m.cells(0, 10), m.cells(1, 12), m.cells(2, 12)]
    assert _plan(groups, cap=15, split_threshold=NO_SPLIT).merges == []  # 20 > cap
    apart = [m.cells(t, 10) for t in range(5)]
    plan = _plan(apart, split_threshold=NO_SPLIT)
    assert plan.merges == [] and plan.moved.size == 0


def test_a_configured_merge_threshold_is_the_seeds_rule():
    m = Maker()
    groups = [m.cells(0, 10), m.cells(0, 10), m.cells(1, 12), m.cells(2, 12)]
    assert _plan(groups, merge_threshold=0.999, split_threshold=NO_SPLIT).merges == []
    plan = _plan(groups, merge_threshold=-1.0, split_threshold=NO_SPLIT)
    # every pair qualifies; disjoint pairs are taken most similar first
    assert [(a, b) for a, b, _ in plan.merges][0] == (0, 1) and len(plan.merges) == 2
    assert plan.sources["merge"] == "configured"


def test_a_group_holding_two_topics_is_split_along_them():
    m = Maker()
    mixed = np.concatenate([m.cells(0, 10), m.cells(5, 10)])
    groups = [mixed, m.cells(1, 12), m.cells(2, 12), m.cells(3, 12), m.cells(4, 12)]
    plan = _plan(groups)
    new = dict(plan.splits)[0]
    assert new >= len(groups)  # new groups take slots after the existing ones
    assert {int(x) for x in plan.labels[:10]} != {int(x) for x in plan.labels[10:20]}
    assert len(set(plan.labels[:10].tolist())) == len(set(plan.labels[10:20].tolist())) == 1
    assert plan.cohesion() > _plan(groups, split_threshold=NO_SPLIT, reassign=False).cohesion()


def test_a_coherent_group_under_the_floor_is_not_split_when_splitting_gains_nothing():
    m = Maker(noise=0.05)
    groups = [m.cells(0, 20), m.cells(1, 20)]
    plan = _plan(groups, split_threshold=1.0)  # every group "incoherent"
    assert plan.splits == []


def test_oversized_groups_are_split_until_none_is_over_the_cap():
    m = Maker()
    groups = [np.concatenate([m.cells(t, 12) for t in range(4)]), m.cells(5, 6)]
    plan = _plan(groups, cap=10, split_threshold=NO_SPLIT)
    assert plan.sizes.max() <= 10 and sum(plan.sizes) == 54
    assert all(s == 0 or s >= len(groups) for _, s in plan.splits)


def test_fragments_are_absorbed_into_the_nearest_real_group():
    m = Maker()
    groups = [m.cells(0, 12), m.cells(1, 12), m.cells(2, 12), m.cells(0, 2), m.cells(1, 1),
              m.cells(6, 1)]  # fmt: skip
    plan = _plan(groups, absorb_threshold=0.6, reassign=False, split_threshold=NO_SPLIT)
    assert plan.absorbed == [(3, 0), (4, 1)]
    assert (plan.labels[_rows(groups, 3)] == 0).all() and plan.labels[_rows(groups, 4)[0]] == 1
    # a fragment far from every real group stays where it is
    assert plan.labels[_rows(groups, 5)[0]] == 5 and plan.sizes[5] == 1


def test_a_fitted_pass_absorbs_only_what_its_gains_pay_for():
    m = Maker()
    groups = [m.cells(0, 12), m.cells(1, 12), m.cells(2, 12), m.cells(0, 2), m.cells(1, 1)]
    # nothing else to do: no cohesion gained, so nothing may be spent on absorbing
    idle = _plan(groups, reassign=False, split_threshold=NO_SPLIT)
    assert idle.absorbed == [] and idle.moved.size == 0
    # a split that pays (a two-topic group) funds the absorption
    mixed = np.concatenate([m.cells(3, 10), m.cells(4, 10)])
    plan = _plan([*groups, mixed], reassign=False)
    assert plan.splits and plan.absorbed
    before = _plan([*groups, mixed], reassign=False, split_threshold=NO_SPLIT, fragment_size=1)
    assert plan.cohesion() >= before.cohesion() - 1e-9


def test_the_lloyd_step_refiles_a_misfiled_cell_unless_it_strands_a_fragment():
    m = Maker()
    stray = m.cells(1, 1)
    groups = [np.concatenate([m.cells(0, 11), stray]), m.cells(1, 12), m.cells(2, 12)]
    off = _plan(groups, reassign=False, split_threshold=NO_SPLIT)
    on = _plan(groups, split_threshold=NO_SPLIT)
    assert off.labels[11] == 0 and on.labels[11] == 1
    assert on.moved.tolist() == [11]
    # 2 misfiled cells leave a group of 5 (3 stay), but not one of 4 (a fragment of 2 left)
    strays = m.cells(1, 2)
    for own, expected in ((3, [1, 1]), (2, [0, 0])):
        small = [np.concatenate([m.cells(0, own), strays]), m.cells(1, 12), m.cells(2, 12)]
        plan = _plan(small, split_threshold=NO_SPLIT, merge_threshold=0.999)
        assert plan.labels[own : own + 2].tolist() == expected


def test_thresholds_are_fitted_from_the_groups_unless_set():
    m = Maker()
    groups = [m.cells(t, 6 + t) for t in range(5)] + [m.cells(6, 2)]
    vectors, labels, totals = _hierarchy(groups)
    plan = plan_pass(vectors, labels, totals, JOIN, 64, SleepConfig())
    cohesion = np.linalg.norm(totals, axis=1) / np.bincount(labels)
    # the split floor: the median cohesion of the groups that are not fragments
    assert plan.thresholds["split"] == pytest.approx(float(np.median(cohesion[:5])))
    assert plan.thresholds["merge"] == max(JOIN, plan.thresholds["split"])
    assert plan.thresholds["absorb"] == pytest.approx(0.8 * JOIN)
    assert plan.thresholds["join"] == JOIN
    assert set(plan.sources.values()) == {"fitted"}
    few = _plan(groups[:3] + groups[5:])
    assert few.thresholds["split"] == -1.0 and few.sources["split"] == "too few groups"
    set_ = _plan(groups, absorb_threshold=0.2, split_threshold=0.3, merge_threshold=0.9)
    assert (set_.thresholds["absorb"], set_.thresholds["split"], set_.thresholds["merge"]) == (
        0.2, 0.3, 0.9,
    )  # fmt: skip
    assert set(set_.sources.values()) == {"configured"}


@pytest.mark.parametrize("n_groups", [0, 1])
def test_nothing_or_one_group_gives_an_empty_plan(n_groups: int):
    m = Maker()
    groups = [m.cells(0, 5)][:n_groups]
    if n_groups == 0:
        vectors, labels, totals = (
            np.empty((0, D), np.float32),
            np.empty(0, np.int64),
            np.empty((0, D)),
        )
    else:
        vectors, labels, totals = _hierarchy(groups)
    plan = plan_pass(vectors, labels, totals, JOIN, 64, SleepConfig())
    assert plan.merges == plan.absorbed == plan.splits == []
    assert plan.moved.size == 0 and plan.n_groups == n_groups
    assert plan.cohesion() == (0.0 if n_groups == 0 else pytest.approx(
        float(np.linalg.norm(totals[0]) / 5)
    ))  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    sizes=st.lists(st.integers(1, 30), min_size=1, max_size=12),
    cap=st.integers(8, 40),
    reassign=st.booleans(),
    fragment=st.integers(1, 3),
    absorb=st.sampled_from([None, 0.2]),
)
def test_every_plan_is_consistent_with_its_labels(seed, sizes, cap, reassign, fragment, absorb):
    m = Maker(seed, noise=0.4)
    rng = np.random.default_rng(seed)
    groups = [m.cells(int(rng.integers(0, 8)), n) for n in sizes]
    vectors, labels, totals = _hierarchy(groups)
    inputs = (vectors.copy(), labels.copy(), totals.copy())
    config = SleepConfig(reassign=reassign, fragment_size=fragment, absorb_threshold=absorb)
    plan = plan_pass(vectors, labels, totals, JOIN, cap, config)
    # the inputs are untouched: a plan is made on a copy
    for given_, kept in zip((vectors, labels, totals), inputs, strict=True):
        np.testing.assert_array_equal(given_, kept)
    assert plan.original is labels or np.array_equal(plan.original, labels)
    # sums and sizes are those of the cells the labels say (plain numpy reference)
    slots = plan.totals.shape[0]
    assert plan.labels.shape == labels.shape and plan.labels.max() < slots
    np.testing.assert_array_equal(plan.sizes, np.bincount(plan.labels, minlength=slots))
    ref = np.zeros((slots, D))
    np.add.at(ref, plan.labels, vectors.astype(np.float64))
    np.testing.assert_allclose(plan.totals, ref, atol=1e-6)
    assert plan.sizes.max() <= cap
    assert plan.moved.tolist() == np.flatnonzero(plan.labels != labels).tolist()
    merged = [s for a, b, _ in plan.merges for s in (a, b)]
    assert len(merged) == len(set(merged))  # each group in at most one merge
    assert all(plan.sizes[b] == 0 or b in {s for s, _ in plan.splits} for _, b, _ in plan.merges)
    n = len(vectors)
    assert plan.cohesion() == pytest.approx(np.linalg.norm(ref, axis=1).sum() / n)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("merge_threshold", 1.5),
        ("merge_threshold", True),
        ("absorb_threshold", math.nan),
        ("split_threshold", -math.inf),
        ("split_threshold", "0.5"),
        ("fragment_size", 0),
        ("fragment_size", True),
        ("min_split", 3),
        ("neighbours", 2.0),
        ("block", 0),
    ],
)
def test_bad_settings_are_refused_naming_the_field(field: str, value):
    with pytest.raises(InvalidInputError, match=f"SleepConfig.{field}"):
        SleepConfig(**{field: value})


def test_settings_are_keyword_only_and_frozen():
    with pytest.raises(TypeError):
        SleepConfig(0.9)  # type: ignore[misc]
    config = SleepConfig(merge_threshold=0.9, min_split=4)
    with pytest.raises(AttributeError):
        config.min_split = 5  # type: ignore[misc]
    assert config.merge_threshold == 0.9 and config.fragment_size == 2
