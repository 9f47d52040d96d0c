"""The scorer's arrays a compiled text query reads, handed over as one table of addresses.

Each array an argument of a compiled call costs the call its type check and its unboxing
(about 0.25 us each with the caches cold); a text query's call took 29 of the scorer's
arrays, which change only when the scorer's state does. :class:`StaticArgs` keeps one
int64 row per array (address, first and second extent) and the arrays themselves, so
their memory stays where the rows say; ``fusion_kernel.text_top_at`` makes arrays of
them again. The table is made anew for the arrays that are not the ones it was made for
(a write replaces an array when it grows), and not made at all when one is not of the
type the kernel reads (the caller then passes the arrays themselves).
"""

from __future__ import annotations

from operator import is_

import numpy as np

__all__ = ["TEXT_LAYOUT", "StaticArgs"]

# ``fusion_kernel.text_top_at``'s table, row by row: each array's dtype and dimensions.
TEXT_LAYOUT: tuple[tuple[np.dtype, int], ...] = tuple(
    (np.dtype(t), d)
    for t, d in (
        ("int8", 2),  # 0 centroid codes
        ("float32", 1),  # 1 their scales
        ("int8", 2),  # 2-7 the centroid tree: cluster means' codes,
        ("float32", 1),  # their scales,
        ("int64", 1),  # each cluster's first member,
        ("int64", 1),  # the members (slots),
        ("int8", 2),  # their centroid codes,
        ("float32", 1),  # and scales
        ("int64", 1),  # 8 each slot's cells
        ("int64", 1),  # 9-18 the probe's: slot -> block,
        ("int64", 1),  # block -> first list,
        ("int64", 1),  # block -> end of its lists,
        ("int8", 2),  # list means' codes,
        ("float32", 1),  # their scales,
        ("float32", 1),  # 1 / |mean|,
        ("int64", 1),  # list -> first row,
        ("int64", 1),  # list -> its rows,
        ("uint8", 2),  # rows' nibble codes,
        ("float32", 1),  # their scales
        ("int64", 1),  # 19-25 ``ScorerState.doc_row_args``: number -> row,
        ("int64", 1),  # row -> number,
        ("int32", 1),  # row -> block,
        ("int64", 1),  # block -> slot,
        ("int64", 1),  # slot -> block,
        ("bool", 1),  # slot staleness,
        ("bool", 1),  # number liveness
        ("int64", 1),  # 26 each block's address
        ("int32", 1),  # 27 each row's row in its block
        ("float32", 2),  # 28 the codes' basis
    )
)


class StaticArgs:
    """One table of addresses for one layout, kept while its arrays are the same objects.

    Args:
        layout: each array's dtype and dimensions, in table order.
    """

    def __init__(self, layout: tuple[tuple[np.dtype, int], ...]) -> None:
        self._layout = layout
        # (the arrays, the table or None when one is not of its type)
        self._kept: tuple[tuple[np.ndarray, ...], np.ndarray | None] = ((), None)

    def table(self, arrays: tuple[np.ndarray, ...]) -> np.ndarray | None:
        """The table for ``arrays`` (in layout order), or None when one is not a C-ordered
        array of its row's dtype and dimensions. The caller holds ``arrays`` until the
        call that reads the table returns: they are held here too, but only until another
        search's arrays replace them."""
        kept = self._kept
        # (the same objects, one by one: ids compared as a tuple cost twice the time)
        if len(arrays) == len(kept[0]) and all(map(is_, arrays, kept[0])):
            return kept[1]
        table = _made(arrays, self._layout, kept)
        self._kept = (arrays, table)
        return table


def _made(
    arrays: tuple[np.ndarray, ...],
    layout: tuple[tuple[np.dtype, int], ...],
    kept: tuple[tuple[np.ndarray, ...], np.ndarray | None],
) -> np.ndarray | None:
    """A table of ``arrays``' addresses and extents, rows of unchanged arrays copied."""
    if len(arrays) != len(layout):
        raise ValueError(f"{len(arrays)} arrays for a table of {len(layout)}")
    old_arrays, old = kept
    table = np.zeros((len(arrays), 3), np.int64)
    for i, (a, (dtype, ndim)) in enumerate(zip(arrays, layout, strict=True)):
        if old is not None and i < len(old_arrays) and old_arrays[i] is a:
            table[i] = old[i]
            continue
        if a.dtype != dtype or a.ndim != ndim or not a.flags.c_contiguous:
            return None
        table[i] = a.ctypes.data, a.shape[0], a.shape[1] if ndim == 2 else 0
    return table
