"""What must hold of a memory after any sequence of operations, as plain checking functions.

Like Chroma's ``chromadb/test/property/invariants.py``: the property tests and the ordinary
ones call the same checks instead of restating them. Each function raises ``AssertionError``
naming what does not hold. The named invariants:

- ``count``, ``ids`` and ``unique_ids``: the store holds the expected cells, each id once.
- ``records`` and ``vectors``: every cell's text, metadata and vector are what was last
  written.
- ``one_group_per_cell``: every stored cell is in exactly one group, the group its view names.
- ``group_sizes``: each group's size is its member count, above zero and within the cap.
- ``centroids_are_member_means``: each centroid is the normalised mean of its members and
  each group's running sum is its members' sum.
- ``unit_vectors``: no stored vector is zero, NaN or off the unit sphere.
- ``hierarchy``: all the structural ones above at once.
- :class:`State` / ``same_state``: what a reopened memory holds equals the live one (and what
  a memory holds after a failed call equals what it held before).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from magnetic_core import MagneticMemory
from magnetic_core._index.index import HierIndex
from magnetic_core.types import Cell

ATOL = 1e-5
"""Tolerance of centroid and vector comparisons (float32 sums over a few hundred rows)."""


def count(mem: MagneticMemory, expected: int) -> None:
    """``count()``, ``get()`` and ``stats()`` agree on how many cells there are."""
    got = mem.count()
    assert got == expected, f"count() is {got}, expected {expected}"
    assert len(mem.get()) == expected, "get() returns another number of cells than count()"
    assert mem.stats().count == expected, "stats().count disagrees with count()"


def unique_ids(mem: MagneticMemory) -> list[str]:
    """No id is stored twice; returns the stored ids."""
    stored = [c.id for c in mem.get()]
    assert len(stored) == len(set(stored)), f"an id is stored twice: {sorted(stored)}"
    return stored


def ids(mem: MagneticMemory, expected: Iterable[str]) -> None:
    """The stored ids are ``expected``, each once."""
    stored = unique_ids(mem)
    want = set(expected)
    assert set(stored) == want, (
        f"missing {sorted(want - set(stored))}, unexpected {sorted(set(stored) - want)}"
    )


def records(mem: MagneticMemory, model: Mapping[str, tuple[str, Mapping[str, Any]]]) -> None:
    """Every stored cell's text and metadata equal the model's ``{id: (text, metadata)}``."""
    for cell in mem.get():
        text, meta = model[cell.id]
        assert cell.text == text, f"{cell.id}: text {cell.text!r}, expected {text!r}"
        assert cell.metadata == meta, f"{cell.id}: metadata {cell.metadata!r}, expected {meta!r}"


def vectors(mem: MagneticMemory, model: Mapping[str, np.ndarray], atol: float = 1e-6) -> None:
    """Every stored cell's vector is the model's ``{id: unit vector}``."""
    order = [c.id for c in mem.get()]
    got = mem.get_vectors(order)
    for cid, vec in zip(order, got):
        np.testing.assert_allclose(vec, model[cid], atol=atol, err_msg=f"{cid}: vector")


def assignment(mem: MagneticMemory) -> dict[str, str]:
    """``{cell id: group id}`` as the cells' views tell it."""
    return {c.id: c.group_id for c in mem.get()}


def partition(assigned: Mapping[str, str]) -> set[frozenset[str]]:
    """The groups of an assignment as sets of cell ids, whatever the groups are called."""
    groups: dict[str, set[str]] = {}
    for cid, gid in assigned.items():
        groups.setdefault(gid, set()).add(cid)
    return {frozenset(members) for members in groups.values()}


def one_group_per_cell(mem: MagneticMemory) -> dict[str, str]:
    """Every stored cell is listed by exactly one group, the one its view names.

    Returns:
        The assignment ``{cell id: group id}``.
    """
    listed: dict[str, str] = {}
    for group in mem.groups():
        for cid in group.cell_ids:
            assert cid not in listed, f"{cid} is in groups {listed[cid]} and {group.id}"
            listed[cid] = group.id
    assigned = assignment(mem)
    assert listed == assigned, (
        f"cells in no group {sorted(set(assigned) - set(listed))}, groups listing absent "
        f"cells {sorted(set(listed) - set(assigned))}, or a view naming another group"
    )
    return assigned


def group_sizes(mem: MagneticMemory, cap: int | None = None) -> None:
    """Each group's size is its member count, above zero and at most ``cap``."""
    groups = mem.groups()
    for group in groups:
        assert group.size == len(group.cell_ids), f"{group.id}: size {group.size} is not its count"
        assert group.size > 0, f"{group.id} is empty"
        assert cap is None or group.size <= cap, f"{group.id}: {group.size} cells, cap {cap}"
    assert sum(g.size for g in groups) == mem.count(), "the group sizes do not add up to count()"
    stats = mem.stats()
    assert stats.groups == len(groups), f"stats().groups {stats.groups}, groups() {len(groups)}"


def centroids_are_member_means(index: HierIndex, atol: float = ATOL) -> None:
    """Each centroid row is the unit mean of its group's members, each sum their sum."""
    assert len(index.centroids) == len(index.slot_groups), "centroid rows and groups differ"
    for slot, group in enumerate(index.slot_groups):
        assert group.slot == slot and index.groups[group.gid] is group, f"{group.gid}: bad slot"
        members = group.view.astype(np.float64)
        total = members.sum(axis=0)
        np.testing.assert_allclose(group.total, total, atol=atol, err_msg=f"{group.gid}: sum")
        centroid = index.centroids[slot]
        assert np.isfinite(centroid).all(), f"{group.gid}: centroid not finite"
        norm = np.linalg.norm(total)
        if norm > 1e-3:  # members that (nearly) cancel have no mean direction to compare
            np.testing.assert_allclose(
                centroid, total / norm, atol=atol, err_msg=f"{group.gid}: centroid"
            )
        assert abs(float(np.linalg.norm(centroid)) - 1.0) < atol, f"{group.gid}: not unit"
        for cid in group.ids:
            assert index.loc[cid] is group, f"{cid} is filed under another group than it is in"
    assert len(index.loc) == sum(g.n for g in index.slot_groups), "cells filed in no group"


def unit_vectors(mem: MagneticMemory) -> None:
    """Every stored vector is finite and of unit length (never a zero vector)."""
    cells = [c.id for c in mem.get()]
    vecs = mem.get_vectors(cells)
    assert np.isfinite(vecs).all(), "a stored vector holds NaN or infinity"
    norms = np.linalg.norm(vecs.astype(np.float64), axis=1)
    off = [c for c, n in zip(cells, norms) if abs(n - 1.0) > 1e-3]
    assert not off, f"vectors not of unit length: {off[:5]}"


def hierarchy(mem: MagneticMemory, cap: int | None = None) -> dict[str, str]:
    """All the structural invariants; returns the assignment ``{cell id: group id}``."""
    unique_ids(mem)
    assigned = one_group_per_cell(mem)
    group_sizes(mem, cap)
    centroids_are_member_means(mem._index)
    unit_vectors(mem)
    return assigned


@dataclass(frozen=True)
class State:
    """What a memory holds, in a form two memories (live and reopened) can be compared by."""

    cells: dict[str, Cell]
    groups: dict[str, tuple[str, ...]]
    vectors: dict[str, np.ndarray]
    threshold: float

    @classmethod
    def of(cls, mem: MagneticMemory) -> State:
        cells = {c.id: c for c in mem.get()}
        order = sorted(cells)
        vecs = mem.get_vectors(order)
        return cls(
            cells=cells,
            groups={g.id: tuple(sorted(g.cell_ids)) for g in mem.groups()},
            vectors=dict(zip(order, vecs)),
            threshold=mem.join_threshold,
        )


def same_state(before: State, after: State) -> None:
    """Two states hold the same cells (every field), groups, vectors and join threshold.

    ``before`` is the live memory's, ``after`` the reopened one's (or the same memory's after
    a call that failed and must have changed nothing).
    """
    assert after.cells.keys() == before.cells.keys(), "the cells' ids changed"
    for cid, cell in before.cells.items():
        assert after.cells[cid] == cell, f"{cid}: {after.cells[cid]} != {cell}"
    assert after.groups == before.groups, "the groups changed"
    for cid, vec in before.vectors.items():
        np.testing.assert_allclose(after.vectors[cid], vec, atol=1e-6, err_msg=cid)
    assert abs(after.threshold - before.threshold) < 1e-6, "the join threshold changed"
