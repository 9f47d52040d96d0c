"""The chains of pending rows hand back each slot's rows in the order they joined."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core._index import kernels


def _chained(slots: np.ndarray, g: int) -> tuple[np.ndarray, np.ndarray]:
    """head/link as the compiled loop leaves them after filing row r under slots[r]."""
    head = np.full(max(g, 1) + 3, -1, np.int64)  # spare slots stay empty
    link = np.full(len(slots), -1, np.int64)
    for r, s in enumerate(slots.tolist()):
        link[r] = head[s]
        head[s] = r
    return head, link


@pytest.mark.parametrize(
    ("n", "g", "seed"), [(0, 0, 0), (0, 3, 0), (1, 1, 0), (50, 1, 1), (300, 17, 2), (40, 90, 3)]
)
def test_chains_give_each_slots_rows_in_joining_order(n, g, seed):
    slots = np.random.default_rng(seed).integers(0, max(g, 1), n)
    head, link = _chained(slots, g)
    rows, bounds = kernels.chains(head, link, g)
    for s in range(g):
        np.testing.assert_array_equal(rows[bounds[s] : bounds[s + 1]], np.flatnonzero(slots == s))
    assert bounds[-1] == n and (head == -1).all()  # every chain emptied


@pytest.mark.parametrize("seed", range(3))
def test_one_chain_is_taken_alone_and_the_others_stay(seed):
    rng = np.random.default_rng(seed)
    g = 6
    slots = rng.integers(0, g, 200)
    head, link = _chained(slots, g)
    np.testing.assert_array_equal(kernels.chain(head, link, 2), np.flatnonzero(slots == 2))
    assert head[2] == -1 and kernels.chain(head, link, 2).size == 0  # taken once
    rows, bounds = kernels.chains(head, link, g)
    assert bounds[3] == bounds[2]  # slot 2 is empty now
    np.testing.assert_array_equal(np.sort(rows), np.flatnonzero(slots != 2))
