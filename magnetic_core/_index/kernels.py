"""Compiled inner loop of online assignment (numba): file rows of a chunk under centroids.

:func:`assign_rows` walks the rows of one chunk in order, the way
:meth:`magnetic_core._index.index.HierIndex.assign` defines it: the best centroid by the
chunk's approximate scores, the join-threshold test, the group's running float64 sum and
the incremental update of its score column from the chunk's Gram matrix, a new group when
no centroid is close enough. It stops and hands back to Python at every event that needs
the index's objects or an exact score: a decision too close to call (near the threshold or
a near tie), a group reaching the size cap (split), a sum that nearly cancelled (refresh),
a rebalance point, or a row whose id is already stored. Python handles the event and calls
it again from where it stopped, so the result is the same as the plain loop's, bit for bit.

No fast-math flags: every float operation rounds as numpy's does (float32 columns, float64
sums), which the equality with one-at-a-time insertion relies on. Compiled once and cached
on disk (``cache=True``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = [
    "DONE",
    "EXACT",
    "REBALANCE",
    "REFRESH",
    "SPLIT",
    "STORED",
    "assign_rows",
    "bound_rows",
    "centroid_rows",
    "chain",
    "chains",
    "score_bound",
]

# Why assign_rows stopped (returned with the row it stopped at).
DONE = 0  # every row of the chunk is filed
EXACT = 1  # the row at `stop` needs exact scores (not filed)
SPLIT = 2  # the row before `stop` filled its group past the cap
REFRESH = 3  # the row before `stop` left its group's sum tiny next to its mass
REBALANCE = 4  # the row before `stop` reached the rebalance count
STORED = 5  # the row at `stop` has an id already stored (not filed)

_U = 2.0**-24  # unit roundoff of float32


@njit(cache=True)
def score_bound(gamma: float, scale: float, ratio: float, steps: float) -> float:
    """The bound on an approximate score's error (``_ScoreBound`` in ``assign.py``)."""
    unit = gamma + (2.0 + 5.0 * steps) * _U
    return scale * (unit * (ratio + 2.0 * ratio * ratio) + 3.0 * _U) + 1e-9


@njit(cache=True)
def _resolve(i: int, j: int, sims: np.ndarray, bound: np.ndarray, x: np.ndarray, totals):
    """Replace the bound in ``sims[i, j]`` by the score with the group's current centroid
    (float64 from its sum: within ``2 u |x|`` of the exact score). False for a sum too
    short to divide by (Python scores it)."""
    n2 = 0.0
    dot = 0.0
    for k in range(x.shape[1]):
        n2 += totals[j, k] * totals[j, k]
        dot += np.float64(x[i, k]) * totals[j, k]
    if n2 < 1e-12:
        return False
    sims[i, j] = np.float32(dot / math.sqrt(n2))
    bound[i, j] = False
    return True


_BLOCK = 512  # entries per block of the best-score search (a multiple of 8)


@njit(cache=True, fastmath=True)
def _max8(part: np.ndarray) -> np.float32:
    """The largest entry of ``part`` (not empty; ties and NaN aside), in eight running
    maxima: LLVM vectorises neither one running maximum nor lanes kept in an array (1.2 ns
    an entry, against 0.14 here at 9K groups), nor this loop when it starts at an offset
    of a longer row (hence a view)."""
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = part[0]
    n = part.shape[0]
    whole = n - n % 8
    for j in range(0, whole, 8):
        m0, m1 = max(m0, part[j]), max(m1, part[j + 1])
        m2, m3 = max(m2, part[j + 2]), max(m3, part[j + 3])
        m4, m5 = max(m4, part[j + 4]), max(m5, part[j + 5])
        m6, m7 = max(m6, part[j + 6]), max(m7, part[j + 7])
    for j in range(whole, n):
        m0 = max(m0, part[j])
    return max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))


@njit(cache=True)
def _best_two(row: np.ndarray, g: int) -> tuple[int, np.float32, np.float32]:
    """The best of ``row[:g]`` (its first column and value) and the best of the other
    columns' values (-inf when ``g`` is 1), as one pass comparing entry by entry would
    find them, from vectorised block maxima: the pass is most of a row's decision at
    thousands of groups."""
    top, block, rest = _max8(row[: min(_BLOCK, g)]), 0, np.float32(-np.inf)
    for b0 in range(_BLOCK, g, _BLOCK):
        m = _max8(row[b0 : min(b0 + _BLOCK, g)])
        if m > top:
            rest = max(rest, top)
            top, block = m, b0
        else:
            rest = max(rest, m)
    end = min(block + _BLOCK, g)
    best = block
    while row[best] != top:
        best += 1
    if best > block:
        rest = max(rest, _max8(row[block:best]))
    if best + 1 < end:
        rest = max(rest, _max8(row[best + 1 : end]))
    return best, row[best], rest


@njit(cache=True)
def _runner(row: np.ndarray, g: int, best: int, second: np.float32) -> int:
    """The first column other than ``best`` holding ``second`` (the best of the others)."""
    for j in range(g):
        if j != best and row[j] == second:
            return j
    return -1


@njit(cache=True)
def _pick(
    i: int,
    sims: np.ndarray,
    bound: np.ndarray,
    pruned: bool,
    x: np.ndarray,
    totals: np.ndarray,
    g: int,
    threshold: float,
    eps: float,
) -> int:
    """The slot to join (>= 0), -1 for a new group, -2 when exact scores must decide.

    With ``pruned``, flagged entries of the row are upper bounds (:mod:`sketch`): one that
    is the best, or within ``2 eps`` of it, is scored before anything is decided, so a
    decision (and an exact hand-back, whose best entry is then a score) only ever rests
    on scores and on bounds below the best by more than ``2 eps``.
    """
    if g == 0:
        return -1
    row = sims[i]
    while True:
        best, top, second = _best_two(row, g)
        if pruned and bound[i, best]:
            if _resolve(i, best, sims, bound, x, totals):
                continue
            return -2
        top64 = np.float64(top)
        if top64 >= threshold + eps:
            if np.float64(second) < top64 - 2.0 * eps:
                return best
            if pruned:
                runner = _runner(row, g, best, second)
                if bound[i, runner] and _resolve(i, runner, sims, bound, x, totals):
                    continue
            return -2
        if top64 >= threshold - eps:
            return -2
        return -1


@njit(cache=True)
def _update_column(
    sims: np.ndarray, gram: np.ndarray, i: int, s: int, before: float, norm: float
) -> None:
    """Rows after ``i``: the column of group ``s`` once row ``i`` joined it."""
    b = sims.shape[0]
    scale = np.float32(1.0 / norm)
    if before > 0.0:
        f_before = np.float32(before)
        for j in range(i + 1, b):
            v = sims[j, s] * f_before
            v = v + gram[i, j]
            sims[j, s] = v * scale
    else:
        for j in range(i + 1, b):
            sims[j, s] = gram[i, j] * scale


@njit(cache=True)
def _join(
    i: int,
    s: int,
    sims: np.ndarray,
    x: np.ndarray,
    sq: np.ndarray,
    norms_l: np.ndarray,
    totals: np.ndarray,
    norms: np.ndarray,
    sizes: np.ndarray,
    changed: np.ndarray,
    ch_state: np.ndarray,
) -> float:
    """Row ``i`` joins slot ``s``: its sum, size and incremental state; returns the old norm."""
    if not changed[s]:
        before = norms[s] if sizes[s] > 0 else 0.0
        ch_state[s, 0] = before * before
        ch_state[s, 1] = before
        ch_state[s, 2] = 0.0
        changed[s] = True
    else:
        before = math.sqrt(ch_state[s, 0])
    dot = np.float64(sims[i, s]) * before if before > 0.0 else 0.0
    for k in range(x.shape[1]):
        totals[s, k] += np.float64(x[i, k])
    sizes[s] += 1
    ch_state[s, 0] = ch_state[s, 0] + 2.0 * dot + sq[i]
    ch_state[s, 1] = ch_state[s, 1] + norms_l[i]
    return before


@njit(cache=True)
def assign_rows(
    sims: np.ndarray,
    gram: np.ndarray,
    x: np.ndarray,
    sq: np.ndarray,
    norms_l: np.ndarray,
    stored: np.ndarray,
    totals: np.ndarray,
    norms: np.ndarray,
    sizes: np.ndarray,
    changed: np.ndarray,
    ch_state: np.ndarray,
    scalars: np.ndarray,
    out_slot: np.ndarray,
    bound: np.ndarray,
    pruned: bool,
    head: np.ndarray,
    link: np.ndarray,
    offset: int,
    start: int,
    g: int,
    forced: int,
    cap: int,
    count: int,
    next_rebalance: int,
    threshold: float,
) -> tuple[int, int, int]:
    """File rows ``start:`` of a chunk until done or an event; returns (stop, why, groups).

    Args:
        sims: (b, >= g + new groups) float32 scores of each row with each slot, updated.
        gram: (b, b) float32 Gram matrix of the chunk (only the upper triangle is read).
        x: (b, d) float32 rows; ``sq`` and ``norms_l`` their float64 squared norms, norms.
        stored: per row, whether its id is already stored (Python moves such a row).
        totals, norms, sizes: the index's (capacity, d) float64 sums, the norm of each at
            its last refresh, and each slot's member count (this call's view, updated).
        changed, ch_state: slots joined in this chunk, and for each [squared norm of the
            sum, mass, rewrites of its column] (see ``HierIndex.assign``).
        scalars: [worst ratio, most rewrites, eps, gamma, scale] of the chunk's bound.
        out_slot: per row, the slot it was filed under (written for filed rows).
        bound, pruned: with ``pruned``, the entries of ``sims`` flagged in ``bound`` are
            upper bounds from the centroid sketch (:func:`bound_rows`), scored when needed.
        head, link: the chains of rows waiting to be copied into their groups
            (:mod:`magnetic_core._index.filing`); row ``i`` of the chunk is ``offset + i``
            of the call.
        start: first row to file; ``forced`` its decision when >= -1 (-1: a new group),
            taken by the caller from exact scores.
        g: live slots; cap: the size cap; count: cells stored; next_rebalance: the count
            that triggers a rebalance (-1: never).
    """
    # One loop on purpose: each row's decision reads the scores the previous row's join
    # just rewrote (sequential by nature), and every event that needs Python (a stored id,
    # a score too close to call, a split, a drifted centroid, a rebalance) returns the row
    # to resume from, so a chunk crosses the compiled boundary only at events. Split into
    # helper kernels, numba inlines them anyway; the phases of one row are:
    #   1. decide: the caller's exact decision for the first row, else the best slot by
    #      the maintained scores (-2: within the error bound ``eps``, decided exactly);
    #   2. found a group (s == -1): the next slot, its sum, norm and size zeroed;
    #   3. join: add the row to the slot's sum (``_join``) and record where it went;
    #   4. keep the scores exact enough: rewrite the slot's column of ``sims`` from the
    #      Gram matrix and widen ``eps`` by the bound of the rewrites so far, or return
    #      for an exact refresh when the sum is too short against its mass
    #      (``m * m > 9 * n2``) for the incremental rewrite to be trusted;
    #   5. events after the join: the size cap (split) and the rebalance count.
    b = x.shape[0]
    eps = scalars[2]
    for i in range(start, b):
        if stored[i]:
            scalars[2] = eps
            return i, STORED, g
        if i == start and forced >= -1:
            s = forced
        else:
            s = _pick(i, sims, bound, pruned, x, totals, g, threshold, eps)
            if s == -2:
                scalars[2] = eps
                return i, EXACT, g
        if s == -1:
            s = g
            g += 1
            totals[s, :] = 0.0
            norms[s] = 0.0
            sizes[s] = 0
            changed[s] = False
            head[s] = -1
            if pruned:  # a reused slot's column: scores from the Gram matrix from now on
                bound[i + 1 :, s] = False
        before = _join(i, s, sims, x, sq, norms_l, totals, norms, sizes, changed, ch_state)
        n, n2, m = sizes[s] - 1, ch_state[s, 0], ch_state[s, 1]
        out_slot[i] = s
        link[offset + i] = head[s]
        head[s] = offset + i
        count += 1
        if n >= cap:
            scalars[2] = eps
            return i + 1, SPLIT, g
        if i + 1 < b:
            if n2 > 0.0 and m * m <= 9.0 * n2:
                norm = math.sqrt(n2)
                _update_column(sims, gram, i, s, before, norm)
                ch_state[s, 2] += 1.0
                if m > scalars[0] * norm or ch_state[s, 2] > scalars[1]:
                    scalars[0] = max(scalars[0], m / norm)
                    scalars[1] = max(scalars[1], np.floor(ch_state[s, 2]))
                    eps = score_bound(scalars[3], scalars[4], scalars[0], scalars[1])
            else:
                scalars[2] = eps
                return i + 1, REFRESH, g
        if count == next_rebalance:
            scalars[2] = eps
            return i + 1, REBALANCE, g
    scalars[2] = eps
    return b, DONE, g


@njit(cache=True)
def chain(head: np.ndarray, link: np.ndarray, slot: int) -> np.ndarray:
    """The rows chained from ``head[slot]``, first joined first; the chain is emptied."""
    n, r = 0, head[slot]
    while r >= 0:
        n += 1
        r = link[r]
    out = np.empty(n, np.int64)
    r = head[slot]
    for k in range(n - 1, -1, -1):
        out[k] = r
        r = link[r]
    head[slot] = -1
    return out


@njit(cache=True)
def chains(head: np.ndarray, link: np.ndarray, g: int) -> tuple[np.ndarray, np.ndarray]:
    """Every chain of slots ``:g`` emptied: (rows by slot, each first joined first; bounds).

    Slot ``s``'s rows are ``rows[bounds[s]:bounds[s + 1]]``.
    """
    bounds = np.zeros(g + 1, np.int64)
    for s in range(g):
        n, r = 0, head[s]
        while r >= 0:
            n += 1
            r = link[r]
        bounds[s + 1] = bounds[s] + n
    out = np.empty(bounds[g], np.int64)
    for s in range(g):
        r = head[s]
        for k in range(bounds[s + 1] - 1, bounds[s] - 1, -1):
            out[k] = r
            r = link[r]
        head[s] = -1
    return out, bounds


# Reassociation lets the dot product vectorise; its rounding stays within the bound the
# assignment assumes for a float32 product in any summation order (no nnan/ninf flags:
# -inf entries must keep their meaning).
_VECTORISE = {"reassoc", "contract", "nsz", "arcp"}


@njit(cache=True, fastmath=_VECTORISE)
def _dot32(a: np.ndarray, b: np.ndarray) -> np.float32:
    acc = np.float32(0.0)
    for k in range(a.shape[0]):
        acc += a[k] * b[k]
    return acc


# Full fast-math for the sketch passes: their inputs are finite by construction (scores of
# unit rows, residual norms) and their rounding is covered by the sketch's margin.
@njit(cache=True, fastmath=True)
def _sketch_bounds(
    row: np.ndarray, flags: np.ndarray, cres: np.ndarray, xres: np.float32, floor, margin, g
) -> None:
    """Every entry to its upper bound (plus the margin), flagged when below ``floor``."""
    for j in range(g):
        high = row[j] + xres * cres[j]
        flags[j] = high < floor
        row[j] = high + margin


_ALL_FLAGGED = np.uint64(0x0101010101010101)  # eight True bytes read as one word


@njit(cache=True)
def bound_rows(
    sims: np.ndarray,
    bound: np.ndarray,
    x: np.ndarray,
    xres: np.ndarray,
    cres: np.ndarray,
    centroids: np.ndarray,
    g: int,
    margin: float,
) -> int:
    """Turn sketch scores into exact scores or flagged upper bounds; returns the exact count.

    ``sims[:, :g]`` holds the sketch scores ``(Q'x).(Q'c)`` on entry; ``xres``/``cres``
    (float32) bound the rows' and centroids' residual norms
    (:mod:`magnetic_core._index.sketch`). Per row (``g`` >= 1), the centroid of the best
    sketch score is scored exactly, then every centroid whose upper bound reaches that
    score (less twice the margin; float32 products); any other entry becomes its upper
    bound plus the margin, flagged in ``bound``. ``bound`` rows must be C-contiguous (the
    flags are scanned eight at a time: a row of 9K centroids has about ten to score).
    """
    exact = 0
    m = np.float32(margin)
    words = g // 8
    for i in range(x.shape[0]):
        row, flags, xr = sims[i], bound[i], np.float32(xres[i])
        # The exact score of the likeliest best centroid is a lower bound of the row's best,
        # far tighter than the sketch's lower bounds: few columns stay to be scored.
        top = _best_two(row, g)[0]  # the likeliest best centroid
        floor = _dot32(x[i], centroids[top]) - 2 * m
        _sketch_bounds(row, flags, cres, xr, floor, m, g)
        packed = flags[: 8 * words].view(np.uint64)
        for w in range(words):
            if packed[w] != _ALL_FLAGGED:
                for j in range(8 * w, 8 * w + 8):
                    if not flags[j]:
                        row[j] = _dot32(x[i], centroids[j])
                        exact += 1
        for j in range(8 * words, g):
            if not flags[j]:
                row[j] = _dot32(x[i], centroids[j])
                exact += 1
    return exact


@njit(cache=True)
def centroid_rows(
    totals: np.ndarray, norms: np.ndarray, centroids: np.ndarray, slots: np.ndarray
) -> np.ndarray:
    """Refresh the given slots' centroid rows from their float64 sums, in one pass per row.

    Each slot's norm (float64) goes to ``norms``, its sum over the norm (floored at 1e-12)
    to ``centroids`` as float32; returns those rows, stacked in the order of ``slots``. A
    sum whose norm is below 1e-12 is left to the caller (its centroid is the members').
    """
    d = totals.shape[1]
    rows = np.empty((slots.shape[0], d), np.float32)
    for k in range(slots.shape[0]):
        s = slots[k]
        n2 = 0.0
        for c in range(d):
            n2 += totals[s, c] * totals[s, c]
        norm = math.sqrt(n2)
        norms[s] = norm
        den = max(norm, 1e-12)
        for c in range(d):
            v = np.float32(totals[s, c] / den)
            rows[k, c] = v
            centroids[s, c] = v
    return rows
