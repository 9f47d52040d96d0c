"""The one-call queries run on a second core (numba ``prange``): the helper's kernels.

Each wrapper takes its kernel's arguments, runs it in one iteration of a two-iteration
parallel loop (the other does nothing, on the calling thread) and copies its results out.
What the calling thread keeps is its own caches: a query's compiled call reads one to three
MB of codes and rows, as much as a core's L2, and the Python that builds the hits after it
then finds its own data gone. Run beside it, the same call left the Python after it about
twice as fast (at 100K Reuters, queries in a stream: 0.37 -> 0.25 ms a query, the same
hits; the results README, session 45).

A kernel's exception inside a parallel loop does not reach the caller (numba drops it), so
each wrapper reports whether its kernel returned (its last result), and :mod:`helper` calls
the kernel again on the calling thread when it did not, where the exception is raised as
usual. Results longer than the room made for them (``k`` rows) are reported the same way.
(numba's thread count is set by :mod:`helper`, not here: a kernel that calls
``set_num_threads`` reads a ctypes pointer, and numba cannot cache it on disk.)
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from magnetic_core._search.fusion_kernel import text_top, text_top_at
from magnetic_core._search.kernels import plain_top

__all__ = ["plain_top_beside", "text_top_at_beside", "text_top_beside"]


@njit(cache=True, nogil=True, parallel=True)
def plain_top_beside(
    centroid_code: np.ndarray,
    centroid_scale: np.ndarray,
    tree: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    use_tree: bool,
    spread: int,
    sizes: np.ndarray,
    stale: np.ndarray,
    n_probe: int,
    min_cells: int,
    least_cells: int,
    probe: tuple[np.ndarray, ...],
    q: np.ndarray,
    basis: np.ndarray,
    budget: int,
    keep: int,
    k: int,
    sds: float,
) -> tuple[np.ndarray, np.ndarray, int, bool, bool]:
    """``kernels.plain_top`` on a second thread: its ``(rows, scores, slots probed, done)``
    and whether it returned within the room made (False: call it again inline)."""
    room = max(k, 0)
    rows = np.empty(room, np.int64)
    scores = np.empty(room, np.float32)
    meta = np.zeros(4, np.int64)  # rows found, slots probed, its done, returned
    for part in prange(2):
        if part == 1:
            r, s, probed, done = plain_top(
                centroid_code, centroid_scale, tree, use_tree, spread, sizes, stale, n_probe,
                min_cells, least_cells, probe, q, basis, budget, keep, k, sds,
            )  # fmt: skip
            m = r.shape[0]
            if m <= room:
                rows[:m] = r
                scores[:m] = s
                meta[0] = m
                meta[1] = probed
                meta[2] = 1 if done else 0
                meta[3] = 1
    m = meta[0]
    return rows[:m].copy(), scores[:m].copy(), meta[1], meta[2] == 1, meta[3] == 1


@njit(cache=True, nogil=True, inline="always")
def _text_room(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Room for a text query's ``k`` results: rows, cosines, boost terms, ranking scores,
    and ``meta`` (rows found, slots probed, its done, returned)."""
    room = max(k, 0)
    return (
        np.empty(room, np.int64), np.empty(room, np.float32), np.empty(room, np.float32),
        np.empty(room, np.float64), np.zeros(4, np.int64),
    )  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def _text_out(
    rows: np.ndarray, cosines: np.ndarray, boosts: np.ndarray, ranked: np.ndarray, meta: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, bool, bool]:
    """The text kernel's six results as held, and whether it returned."""
    m = meta[0]
    return (
        rows[:m].copy(), cosines[:m].copy(), boosts[:m].copy(), ranked[:m].copy(), meta[1],
        meta[2] == 1, meta[3] == 1,
    )  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def _held(
    found: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, bool],
    rows: np.ndarray,
    cosines: np.ndarray,
    boosts: np.ndarray,
    ranked: np.ndarray,
    meta: np.ndarray,
) -> None:
    """Copy a text query's results into the room made for them (``meta``: rows found,
    slots probed, its done, returned)."""
    m = found[0].shape[0]
    if m <= rows.shape[0] and found[1].shape[0] == m and found[2].shape[0] == m:
        rows[:m] = found[0]
        cosines[:m] = found[1]
        boosts[:m] = found[2]
        ranked[:m] = found[3]
        meta[0] = m
        meta[1] = found[4]
        meta[2] = 1 if found[5] else 0
        meta[3] = 1


@njit(cache=True, nogil=True, parallel=True)
def text_top_at_beside(
    table: np.ndarray,
    use_tree: bool,
    spread: int,
    n_probe: int,
    min_cells: int,
    least_cells: int,
    routes: np.ndarray,
    q: np.ndarray,
    budget: int,
    keep: int,
    join_boosted: bool,
    boosted: np.ndarray,
    boost: np.float32,
    postings: tuple,  # type: ignore[type-arg]  # numba: a heterogeneous tuple
    n_top: int,
    lexical_weight: float,
    k: int,
    step: int,
    sds: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, bool, bool]:
    """``fusion_kernel.text_top_at`` on a second thread: its six results and whether it
    returned within the room made (False: call it again inline)."""
    rows, cosines, boosts, ranked, meta = _text_room(k)
    for part in prange(2):
        if part == 1:
            found = text_top_at(
                table, use_tree, spread, n_probe, min_cells, least_cells, routes, q, budget,
                keep, join_boosted, boosted, boost, postings, n_top, lexical_weight, k, step,
                sds,
            )  # fmt: skip
            _held(found, rows, cosines, boosts, ranked, meta)
    return _text_out(rows, cosines, boosts, ranked, meta)


@njit(cache=True, nogil=True, parallel=True)
def text_top_beside(
    centroid_code: np.ndarray,
    centroid_scale: np.ndarray,
    tree: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    use_tree: bool,
    spread: int,
    sizes: np.ndarray,
    n_probe: int,
    min_cells: int,
    least_cells: int,
    routes: np.ndarray,
    probe: tuple[np.ndarray, ...],
    q: np.ndarray,
    basis: np.ndarray,
    budget: int,
    keep: int,
    join_boosted: bool,
    boosted: np.ndarray,
    boost: np.float32,
    postings: tuple,  # type: ignore[type-arg]  # numba: a heterogeneous tuple
    n_top: int,
    rows_of: tuple[np.ndarray, ...],
    addresses: np.ndarray,
    row_in_block: np.ndarray,
    lexical_weight: float,
    k: int,
    step: int,
    sds: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, bool, bool]:
    """``fusion_kernel.text_top`` on a second thread, as :func:`text_top_at_beside`."""
    rows, cosines, boosts, ranked, meta = _text_room(k)
    for part in prange(2):
        if part == 1:
            found = text_top(
                centroid_code, centroid_scale, tree, use_tree, spread, sizes, n_probe,
                min_cells, least_cells, routes, probe, q, basis, budget, keep, join_boosted,
                boosted, boost, postings, n_top, rows_of, addresses, row_in_block,
                lexical_weight, k, step, sds,
            )  # fmt: skip
            _held(found, rows, cosines, boosts, ranked, meta)
    return _text_out(rows, cosines, boosts, ranked, meta)
