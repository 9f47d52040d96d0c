"""The best ``k`` of an array, compiled: every selection of search goes through :func:`top_k`.

A query selects the best few hundred of about twelve thousand code scores, the groups to
probe among all centroids, the sub-lists to read among the probed groups' lists. Each input
is new to the branch predictor, and a comparison sort or a partition of fresh scores
mispredicts about once per element (measured here: a stable sort of 828 fresh float32 keys
31 us, 12 us when the same array is sorted again; the best 256 of 12,000 fresh scores 84 us).

Float32 scores therefore go through two passes without data-dependent branches: a
*bucket select* (one histogram of the scores over equal-width buckets between their
minimum and maximum, which names the bucket holding the k-th best; every entry of the
buckets above it and of that one is kept, in index order), then a stable *LSD radix sort*
of the kept entries on their 32 bits (four passes of one byte). Both are exact: bucket
numbers fall as scores rise (correctly rounded subtraction and product are monotonic), so
the best ``k`` are all kept, and the radix sort orders by score with ties in index order.
Long float32 inputs of which only a small share is wanted (a query's best 128 of 13,000
code scores) skip the histogram: a bar drawn from a sample of the scores keeps about twice
``k`` of them in one pass, and those are radix sorted (:func:`_sampled_top_k`).
Other inputs (float64, short arrays, infinities the buckets cannot span) keep a buffer cut
back to the best ``k`` by a partition when it fills. Either way the result is a stable
sort's first ``k``: ties go to the lower index, and NaN ranks after every number.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from magnetic_core._search.pointers import KEPT_LANES, kept_reaching

__all__ = ["best_holding", "top_k"]

_MIN_BUFFER = 64
# Shortest float32 input selected by buckets and radix sort (below, the four counting
# passes over 256 digits cost more than the comparisons they save).
_RADIX_FROM = 128
# Entries per bucket of the histogram, on average (few buckets: little to clear and scan).
_PER_BUCKET = 8
# Buckets are used when k is at least 1/_BUCKETS_FROM_SHARE of the input: for fewer, most
# entries fail the buffer's bar at once (a well-predicted branch) and its cuts are few.
_BUCKETS_FROM_SHARE = 256
_MAX_BUCKETS = 4096
# Float32 inputs at least this long, of which k is at most 1/_SAMPLED_FROM_SHARE, are
# selected through a bar drawn from a sample (_sampled_top_k): about _SAMPLE entries at
# an even stride, and the bar their (_SAMPLE_MARGIN * k / stride + 4)-th best, so that
# about twice k entries reach it (fewer than k about once in a thousand calls at worst: a
# query's best 128 of 13,000 code scores, by the binomial odds of the sample).
_SAMPLED_FROM = 2048
_SAMPLED_FROM_SHARE = 16
_SAMPLE = 256
_SAMPLE_MARGIN = 2
# The sample's bar is found by insertion up to this rank, by selection past it.
_INSERTED_UP_TO = 64


@njit(cache=True, nogil=True)
def _cut(keys: np.ndarray, index: np.ndarray, held: int, k: int) -> tuple[float, int]:
    """Keep the best ``k`` of the first ``held`` buffered entries (in index order); returns
    ``(the k-th best key, k)``. Of entries tied at that key, the lower indices stay.
    No NaN may be buffered."""
    bar = _kth_smallest(keys[:held].copy(), held - k)
    above = 0
    for t in range(held):
        above += int(keys[t] > bar)
    room = k - above
    out = 0
    for t in range(held):  # kept by conditional adds, as the buffer fills
        key = keys[t]
        tied = int(key == bar and room > 0)
        keys[out] = key
        index[out] = index[t]
        out += int(key > bar) | tied
        room -= tied
    return bar, out


@njit(cache=True, nogil=True)
def _kth_smallest(a: np.ndarray, kth: int) -> float:
    """The ``kth`` smallest entry of ``a`` (0-based; no NaN), ``a`` reordered in place.

    Hoare's selection with the median of three as pivot, on the caller's copy. With it,
    and the cut's conditional adds, fresh inputs in alternating runs: the best 50 of
    17,500 37.6 -> 32.8 us, the best 10 of 12,000 16.7 -> 14.6 us.
    """
    lo, hi = 0, a.shape[0] - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        x, y, z = a[lo], a[mid], a[hi]
        pivot = max(min(x, y), min(max(x, y), z))
        i, j = lo, hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while a[j] > pivot:
                j -= 1
            if i <= j:
                a[i], a[j] = a[j], a[i]
                i += 1
                j -= 1
        if kth <= j:
            hi = j
        elif kth >= i:
            lo = i
        else:
            break
    return a[kth]


@njit(cache=True, nogil=True)
def top_k(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest ``values``, best first; ties go to the lower index.

    Fewer than ``k`` values: all of them, sorted. NaN ranks below every number.
    """
    n = values.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.empty(0, np.int64)
    if _is_float32(values) and _RADIX_FROM <= n < 1 << 31:
        values = np.ascontiguousarray(values)  # (read through a view of its bits)
        if n >= _SAMPLED_FROM and k * _SAMPLED_FROM_SHARE <= n:
            best = _sampled_top_k(values, k)
            if best.shape[0] == k:
                return best
        if k * _BUCKETS_FROM_SHARE >= n:
            lo, hi, nans = _finite_range(values)
            if lo <= hi and hi - lo < np.inf:  # every number finite (and at least one)
                return _bucket_top_k(values, k, lo, hi, nans)
    return _buffered_top_k(values, k)


@njit(cache=True, nogil=True)
def best_holding(values: np.ndarray, weights: np.ndarray, budget: int) -> np.ndarray:
    """The positions, ascending, of the first entries of ``values`` in :func:`top_k`'s order
    (best first, ties to the lower index, NaN last) until their ``weights`` (non-negative)
    sum to ``budget`` or more; every position when they all hold less.

    A probe's sub-lists until they hold its cell budget: which ones, not their order, since
    the scan then reads them in place (900 lists' scores: the best 566 ranked by
    :func:`top_k` 16.5 us; the lists that hold 13,000 cells found so 6.2 us). The numbers
    go into buckets by value; the buckets above the one where the budget is reached are
    taken whole, and that one's entries are ordered among themselves.
    """
    n = values.shape[0]
    lo, hi, nans = _finite_range(values)
    if not (lo <= hi and hi - lo < np.inf):  # no number, or an infinite one: rank them all
        order = top_k(values, n)
        taken = 0
        held = 0
        while taken < n and held < budget:
            held += weights[order[taken]]
            taken += 1
        return np.sort(order[:taken])
    buckets = min(_MAX_BUCKETS, max(16, (n - nans) // _PER_BUCKET))
    width = np.float64(hi) - np.float64(lo)
    scale = (buckets - 1) / width if width > 0.0 else 0.0
    # Bucket b holds the numbers at or above the buckets below it (the map is monotonic);
    # bucket -1 holds the NaNs.
    bucket = np.empty(n, np.int32)
    held_in = np.zeros(buckets + 1, np.int64)  # [b + 1]: the weight of bucket b
    for i in range(n):
        v = values[i]
        b = int((np.float64(v) - np.float64(lo)) * scale) if v == v else -1
        bucket[i] = b
        held_in[b + 1] += weights[i]
    held = 0
    edge = buckets - 1
    while edge >= -1 and held + held_in[edge + 1] < budget:
        held += held_in[edge + 1]
        edge -= 1
    if edge >= -1:
        # The budget is reached in bucket ``edge`` (a few entries): they are ordered by
        # insertion (stable: ties stay in index order; NaNs are in index order already),
        # and the best until then are lifted above the edge.
        at = np.flatnonzero(bucket == edge)
        m = at.shape[0]
        if edge >= 0 and m <= _INSERTED_UP_TO:
            for u in range(1, m):
                i = at[u]
                v = values[i]
                s = u
                while s > 0 and values[at[s - 1]] < v:
                    at[s] = at[s - 1]
                    s -= 1
                at[s] = i
        elif edge >= 0:  # values bunched in one bucket (an outlier stretched the range)
            at = at[_descending(values[at])]
        t = 0
        while t < m and held < budget:
            bucket[at[t]] = buckets
            held += weights[at[t]]
            t += 1
    count = 0
    for i in range(n):
        count += bucket[i] > edge
    out = np.empty(count + 1, np.int64)  # (the last write may land one past the count)
    count = 0
    for i in range(n):
        out[count] = i
        count += bucket[i] > edge
    return out[:count]


@njit(cache=True, nogil=True)
def _sampled_top_k(values: np.ndarray, k: int) -> np.ndarray:
    """:func:`top_k` of float32 ``values`` (``0 < k``, ``_SAMPLED_FROM <= n``) through a bar
    drawn from a sample, or an empty array when the bar kept fewer than ``k`` entries or
    far more than expected (the caller then selects another way).

    The sample is every ``stride``-th entry; its ``j``-th best number is the bar, with
    ``j`` such that about ``_SAMPLE_MARGIN * k`` entries are expected to reach it. One pass
    keeps the position of every entry at or above the bar, in index order, 16 entries a
    step without data-dependent branches (:func:`~magnetic_core._search.pointers.
    kept_reaching`; a NaN never reaches it); when at least ``k`` did, the k-th best is
    among them (it is at least the bar), with every entry tied with it, so a stable radix
    sort of the kept entries gives exactly a stable sort's first ``k``. The best 128 of a
    query's 13,000 code scores, in the scan that wrote them (1M synthetic cells, a stream
    of queries): 76 us by buckets, 45 us so. The best 256 of 13,000 (100K Reuters, 300
    queries' scores selected in a compiled loop): 18.7 us with a sample of 1,024 and every
    entry written to the kept ones' place, 10.5 us with a sample of 256 and only the
    entries kept written (the sample's bar fell short of 256 entries for none of them).
    """
    n = values.shape[0]
    stride = n // _SAMPLE
    sample = np.empty((n + stride - 1) // stride, np.float32)
    m = 0
    for i in range(0, n, stride):
        v = values[i]
        sample[m] = v
        m += v == v  # NaNs left out
    j = _SAMPLE_MARGIN * k // stride + 4
    if j > m:
        return np.empty(0, np.int64)
    bar = _jth_largest(sample, m, j) if j <= _INSERTED_UP_TO else _kth_smallest(sample[:m], m - j)
    cap = 4 * (j + 1) * stride + k
    index = np.empty(cap + KEPT_LANES, np.int64)
    at = 0
    i = 0
    while i + KEPT_LANES <= n:
        at = kept_reaching(values, i, bar, index, at)  # type: ignore[call-arg]
        if at >= cap:  # a bar far too low (many ties at it): select another way
            return np.empty(0, np.int64)
        i += KEPT_LANES
    for t in range(i, n):
        index[at] = t
        at += values[t] >= bar
    if at < k or at >= cap:
        return np.empty(0, np.int64)
    bits = values.view(np.uint32)
    keys = np.empty(at, np.int64)
    for t in range(at):
        keys[t] = _descending_key(bits[index[t]])
    return _radix_order(keys, index[:at])[:k]


@njit(cache=True, nogil=True)
def _jth_largest(a: np.ndarray, m: int, j: int) -> float:
    """The ``j``-th largest of ``a[:m]`` (1-based, ``1 <= j <= m``; no NaN): the best ``j``
    kept in order in a small buffer, a new entry shifted in only when it beats the last.
    For a bar (``j`` about 46 of 1,084 sampled scores) 7.4 us against 12.2 us by
    :func:`_kth_smallest`; past ``_INSERTED_UP_TO`` the shifts cost more."""
    buf = np.empty(j, a.dtype)
    for t in range(j):
        v = a[t]
        s = t
        while s > 0 and buf[s - 1] < v:
            buf[s] = buf[s - 1]
            s -= 1
        buf[s] = v
    low = buf[j - 1]
    for t in range(j, m):
        v = a[t]
        if v > low:
            s = j - 1
            while s > 0 and buf[s - 1] < v:
                buf[s] = buf[s - 1]
                s -= 1
            buf[s] = v
            low = buf[j - 1]
    return low


@njit(cache=True, nogil=True)
def _buffered_top_k(values: np.ndarray, k: int) -> np.ndarray:
    """:func:`top_k` by a buffer cut back by partitions (any float dtype; ``0 < k <= n``)."""
    n = values.shape[0]
    cap = min(n, max(4 * k, _MIN_BUFFER))
    keys = np.empty(cap, values.dtype)
    index = np.empty(cap, np.int64)
    held = 0
    cut = False  # whether the buffer was cut once (``bar`` is then the k-th best so far)
    bar = -np.inf
    for i in range(n):
        v = values[i]
        if v != v or (cut and not v > bar):  # NaN comes after every number (below)
            continue
        keys[held] = v
        index[held] = i
        held += 1
        if held == cap and i + 1 < n:
            bar, held = _cut(keys, index, held, k)
            cut = True
    if held > k:
        bar, held = _cut(keys, index, held, k)
    best = index[:held][_descending(keys[:held])]
    if held < k:  # fewer than k numbers: the NaNs follow, in index order
        nans = np.flatnonzero(values != values)[: k - held]
        best = np.concatenate((best, nans.astype(np.int64)))
    return best


@njit(cache=True, nogil=True)
def _descending(keys: np.ndarray) -> np.ndarray:
    """Positions of ``keys`` (no NaN) from the largest down; equal keys in position order."""
    n = keys.shape[0]
    if keys.itemsize != 4 or n >= 1 << 31:
        return np.argsort(-keys, kind="mergesort")  # stable
    # float32: one int64 per key, its bits made to sort as the float does (-0.0 as 0.0)
    # above the complement of its position, so a plain sort orders by key, then position.
    # -0.0 is made 0.0 in integers: numba compiles a kernel with the fastmath flags of the
    # first caller that needs it (numba issue 7168), and under 'nsz' ``keys + 0.0`` keeps
    # the sign of a zero (a process whose first top_k came from a fastmath kernel ranked
    # -0.0 below 0.0).
    bits = np.ascontiguousarray(keys).view(np.int32).astype(np.int64)
    bits = np.where(bits == -(2**31), 0, bits)
    packed = np.where(bits < 0, bits ^ 0x7FFFFFFF, bits) << 32
    packed |= 0xFFFFFFFF - np.arange(n)
    packed = np.sort(packed)[::-1]
    return 0xFFFFFFFF - (packed & 0xFFFFFFFF)


@njit(cache=True, nogil=True, fastmath={"nsz"})
def _finite_range(values: np.ndarray) -> tuple[np.float32, np.float32, int]:
    """``(min, max, NaN count)`` of ``values``: NaNs left out (min > max when all are)."""
    lo = np.float32(np.inf)
    hi = np.float32(-np.inf)
    nans = 0
    for i in range(values.shape[0]):  # selects rather than branches on the data
        v = values[i]
        nans += v != v
        lo = v if v < lo else lo  # a NaN compares false: it never becomes lo or hi
        hi = v if v > hi else hi
    return lo, hi, nans


@njit(cache=True, nogil=True)
def _bucket_top_k(
    values: np.ndarray, k: int, lo: np.float32, hi: np.float32, nans: int
) -> np.ndarray:
    """:func:`top_k` of float32 ``values`` whose numbers are finite, in ``[lo, hi]``."""
    n = values.shape[0]
    numbers = n - nans
    buckets = min(_MAX_BUCKETS, max(16, numbers // _PER_BUCKET))
    width = np.float64(hi) - np.float64(lo)
    scale = (buckets - 1) / width if width > 0.0 else 0.0
    top = np.float64(hi)
    counts = np.zeros(buckets, np.int64)
    for i in range(n):
        v = values[i]
        if v == v:  # (the min() only guards against a rounding past the last bucket)
            counts[min(np.int64((top - v) * scale), buckets - 1)] += 1
    # The bucket holding the k-th best number (every bucket when fewer than k numbers).
    last = buckets - 1
    held = 0
    for b in range(buckets):
        held += counts[b]
        if held >= k:
            last = b
            break
    keys = np.empty(held, np.int64)
    index = np.empty(held, np.int64)
    bits = values.view(np.uint32)
    at = 0
    for i in range(n):
        v = values[i]
        if v == v and min(np.int64((top - v) * scale), buckets - 1) <= last:
            keys[at] = _descending_key(bits[i])
            index[at] = i
            at += 1
    best = _radix_order(keys, index)[: min(k, held)]
    if held < k:  # fewer than k numbers: the NaNs follow, in index order
        nan_at = np.flatnonzero(values != values)[: k - held]
        best = np.concatenate((best, nan_at.astype(np.int64)))
    return best


@njit(cache=True, nogil=True, inline="always")
def _descending_key(bits: np.uint32) -> np.int64:
    """An unsigned 32-bit key (in an int64) that is smaller the larger the float32 whose
    bits are ``bits`` (not NaN; -0.0 and 0.0 get the same key). Read from a uint32 view of
    the scores: a one-entry array per key, as before, cost 60 ns a key (500 keys: 29 us
    against 2.6 us)."""
    b = np.int64(bits)
    b = np.int64(0) if b == 0x80000000 else b  # -0.0 sorts as 0.0
    sign = b >> 31
    ascending = b ^ (0x80000000 | (sign * 0x7FFFFFFF))
    return 0xFFFFFFFF - ascending


@njit(cache=True, nogil=True)
def _radix_order(keys: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``index`` ordered by ``keys`` (unsigned 32-bit values) by a stable LSD radix sort:
    one counting pass and one scatter per byte; a byte every key shares is skipped."""
    n = keys.shape[0]
    other_keys = np.empty(n, np.int64)
    other_index = np.empty(n, np.int64)
    counts = np.empty(256, np.int64)
    for shift in range(0, 32, 8):
        counts[:] = 0
        for t in range(n):
            counts[(keys[t] >> shift) & 0xFF] += 1
        if n == 0 or counts[(keys[0] >> shift) & 0xFF] == n:
            continue
        start = 0
        for d in range(256):
            c = counts[d]
            counts[d] = start
            start += c
        for t in range(n):
            d = (keys[t] >> shift) & 0xFF
            at = counts[d]
            counts[d] = at + 1
            other_keys[at] = keys[t]
            other_index[at] = index[t]
        keys, other_keys = other_keys, keys
        index, other_index = other_index, index
    return index


def _is_float32(values: np.ndarray) -> bool:
    """Whether ``values`` holds float32 (decided when a kernel is compiled)."""
    return bool(values.dtype == np.float32)


@overload(_is_float32)
def _is_float32_compiled(values: types.Array) -> object:
    answer = values.dtype == types.float32

    def compiled(values: types.Array) -> bool:  # numba wants the same parameters
        return answer

    return compiled
