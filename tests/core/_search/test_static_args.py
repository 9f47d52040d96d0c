"""The table of addresses that hands a compiled call the scorer's arrays."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core._search.static_args import StaticArgs

LAYOUT = ((np.dtype(np.int8), 2), (np.dtype(np.float32), 1), (np.dtype(np.int64), 1))


def _arrays() -> tuple[np.ndarray, ...]:
    return np.zeros((5, 3), np.int8), np.ones(7, np.float32), np.arange(4, dtype=np.int64)


def test_a_table_row_is_each_arrays_address_and_extents():
    arrays = _arrays()
    table = StaticArgs(LAYOUT).table(arrays)
    assert table is not None and table.dtype == np.int64
    assert table.tolist() == [
        [arrays[0].ctypes.data, 5, 3],
        [arrays[1].ctypes.data, 7, 0],
        [arrays[2].ctypes.data, 4, 0],
    ]


def test_the_table_is_kept_for_the_same_arrays_and_made_again_for_a_replaced_one():
    args = StaticArgs(LAYOUT)
    arrays = _arrays()
    first = args.table(arrays)
    assert args.table(tuple(arrays)) is first  # the same objects: the same table
    grown = np.arange(9, dtype=np.int64)  # as a write replaces an array when it grows
    second = args.table((arrays[0], arrays[1], grown))
    assert second is not first and second is not None
    assert second[:2].tolist() == first[:2].tolist()
    assert second[2].tolist() == [grown.ctypes.data, 9, 0]


@pytest.mark.parametrize(
    "wrong",
    [
        np.ones(7, np.float64),  # another dtype
        np.ones((7, 1), np.float32),  # another number of dimensions
        np.ones(14, np.float32)[::2],  # not contiguous
    ],
)
def test_no_table_when_an_array_is_not_what_the_kernel_reads(wrong: np.ndarray):
    arrays = _arrays()
    args = StaticArgs(LAYOUT)
    assert args.table(arrays) is not None
    assert args.table((arrays[0], wrong, arrays[2])) is None
    assert args.table(arrays) is not None  # the right arrays again: a table again


def test_a_table_for_another_number_of_arrays_is_an_error():
    with pytest.raises(ValueError, match="2 arrays for a table of 3"):
        StaticArgs(LAYOUT).table(_arrays()[:2])
