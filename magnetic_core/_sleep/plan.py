"""The numeric half of sleep mode: plan one consolidation pass over the hierarchy.

A pass repairs what online clustering leaves behind, in this order, on a copy of the
group sums (nothing here touches the index):

1. **merge** pairs of groups (neither a fragment) whose centroids would join each other
   (similarity ``s`` at least the join threshold ``t``) when the merged group stays
   coherent: its cohesion (mean member-to-centroid similarity, known in closed form from
   the two sums) is at least ``t`` and at least the split floor, so the pass never merges
   what it would split again; with an explicit ``merge_threshold``, the seed's rule
   (``s`` at or above it) instead;
2. **split** incoherent groups (cohesion under the split floor: the median cohesion of
   the groups that are not fragments) by 2-means where that raises cohesion and leaves
   no fragment, and oversized groups always;
3. one **Lloyd step**: every cell moves to the most similar centroid among its group's and
   that group's nearest ``neighbours`` centroids (bounded work), unless that would leave its
   old group a fragment;
4. **absorb** fragments (groups of at most ``fragment_size`` cells) into the nearest group
   that is not a fragment, cell by cell, closest first, down to the absorb floor (0.8 ``t``:
   the join threshold was met against younger centroids) and only as far as the cohesion
   gained by steps 1-3 pays for what absorbing costs, so a fitted pass does not lower the
   store's mean cohesion;
5. groups left empty are **dropped**; oversized ones are split again.

Thresholds are fitted to the data the way the join threshold is; every value can be set.
Centroid neighbours are found in row blocks, so memory stays O(block x G), never G x G.
This module holds the settings, the plan and the fitting; the steps themselves are in
:mod:`magnetic_core._sleep.steps`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from magnetic_core._sleep.steps import PassState, absorb, lloyd, merge, split
from magnetic_core._sleep.steps import neighbours as _neighbours  # noqa: F401 - used by tests
from magnetic_core.errors import InvalidInputError

__all__ = ["PassPlan", "SleepConfig", "plan_pass"]


@dataclass(frozen=True, kw_only=True)
class SleepConfig:
    """Settings of one sleep pass (``None`` means fitted to the data).

    Args:
        merge_threshold: centroid similarity for merging (the seed's rule, e.g. 0.85);
            ``None`` merges groups whose average members would join each other.
        absorb_threshold: similarity a fragment's cell needs to its new group's centroid.
        split_threshold: cohesion under which a group of at least ``min_split`` cells is split.
        fragment_size: groups of at most this many cells are fragments.
        min_split: smallest group considered for an incoherence split.
        neighbours: nearest centroids considered per group (merges, absorption, Lloyd).
        reassign: run the Lloyd step.
        block: centroid rows per block of the neighbour search.
    """

    merge_threshold: float | None = None
    absorb_threshold: float | None = None
    split_threshold: float | None = None
    fragment_size: int = 2
    min_split: int = 8
    neighbours: int = 16
    reassign: bool = True
    block: int = 1024

    def __post_init__(self) -> None:
        for name in ("merge_threshold", "absorb_threshold", "split_threshold"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not -1.0 <= value <= 1.0
            ):
                raise InvalidInputError(
                    f"SleepConfig.{name} must be None or a number in [-1, 1], got {value!r}",
                    hint=f"leave {name} unset to fit it to the data",
                )
        for name, low in (("fragment_size", 1), ("min_split", 4), ("neighbours", 1), ("block", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidInputError(
                    f"SleepConfig.{name} must be an integer >= {low}, got {value!r}"
                )


@dataclass
class PassPlan:
    """What one pass would do, by slot: the new slot of every cell, and what led there.

    Slots below ``n_groups`` are existing groups (``slot_groups`` order); higher slots are
    new groups made by splits. ``labels`` follows the concatenation of the groups' blocks.
    """

    n_groups: int
    labels: np.ndarray
    original: np.ndarray
    totals: np.ndarray
    sizes: np.ndarray
    merges: list[tuple[int, int, float]]
    absorbed: list[tuple[int, int]]
    splits: list[tuple[int, int]]
    thresholds: dict[str, float]
    sources: dict[str, str]

    @property
    def moved(self) -> np.ndarray:
        """Row positions of the cells whose slot changes."""
        return np.flatnonzero(self.labels != self.original)

    def cohesion(self) -> float:
        """Cell-weighted mean cohesion after the pass (sum of |total| over cells)."""
        n = int(self.sizes.sum())
        return float(np.linalg.norm(self.totals, axis=1).sum() / n) if n else 0.0


def plan_pass(
    vectors: np.ndarray,
    labels: np.ndarray,
    totals: np.ndarray,
    join_threshold: float,
    max_group_size: int,
    config: SleepConfig,
) -> PassPlan:
    """Plan one pass.

    Args:
        vectors: (N, d) unit vectors of every cell, grouped by slot.
        labels: (N,) slot of each row.
        totals: (G, d) float64 sums of each slot's members.
        join_threshold: the memory's join threshold in force.
        max_group_size: the size cap of a group.
        config: the pass settings.
    """
    g = totals.shape[0]
    state = PassState(vectors, labels.copy(), totals.astype(np.float64, copy=True), max_group_size)
    thresholds, sources = _fit(state, join_threshold, config)
    plan = PassPlan(
        n_groups=g,
        labels=state.labels,
        original=labels,
        totals=state.totals,
        sizes=state.sizes,
        merges=[],
        absorbed=[],
        splits=[],
        thresholds=thresholds,
        sources=sources,
    )
    before = state.cohesion_sum()
    if g >= 2:
        plan.merges = merge(state, join_threshold, thresholds, config)
    plan.splits = split(state, thresholds["split"], config)
    if config.reassign and state.live() >= 2:
        lloyd(state, config)
    if g >= 2:
        budget = None if config.absorb_threshold is not None else state.cohesion_sum() - before
        plan.absorbed = absorb(state, thresholds["absorb"], join_threshold, budget, config)
    plan.splits += split(state, None, config)
    plan.labels, plan.totals, plan.sizes = state.labels, state.totals, state.sizes
    return plan


def _fit(
    state: PassState, join_threshold: float, config: SleepConfig
) -> tuple[dict[str, float], dict[str, str]]:
    """The absorb and split floors (and the merge rule's threshold) from the data."""
    real = state.sizes > config.fragment_size
    coh = state.cohesions()
    thresholds: dict[str, float] = {"join": float(join_threshold)}
    sources: dict[str, str] = {}
    if config.absorb_threshold is not None:
        thresholds["absorb"], sources["absorb"] = float(config.absorb_threshold), "configured"
    else:
        # The join threshold was met against younger centroids; a fragment's cell may join
        # somewhat below it, as far as the pass's cohesion gains pay for (see steps.absorb).
        thresholds["absorb"], sources["absorb"] = 0.8 * float(join_threshold), "fitted"
    if config.split_threshold is not None:
        thresholds["split"], sources["split"] = float(config.split_threshold), "configured"
    elif real.sum() >= 4:
        thresholds["split"] = float(np.median(coh[real]))
        sources["split"] = "fitted"
    else:
        thresholds["split"], sources["split"] = -1.0, "too few groups"
    if config.merge_threshold is not None:
        thresholds["merge"], sources["merge"] = float(config.merge_threshold), "configured"
    else:
        # The cohesion a merged group must keep: what the join threshold asks of a
        # joining cell, and no less than the split floor (or the pass would undo it).
        thresholds["merge"] = max(float(join_threshold), thresholds["split"])
        sources["merge"] = "fitted"
    return thresholds, sources
