"""The compiled search kernels against plain numpy references on random inputs.

Inputs that matter are integer valued where an order is compared (int8 and nibble codes,
small integer queries), so every sum is exact whatever order the kernel adds in and ties are
real ties: the kernels must then agree with numpy exactly, ties to the lower index.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetic_core._search import join_kernel, kernels
from magnetic_core._search.sublists import ranges, split_lists

from .postings import kernel_args, random_postings

SETTINGS = settings(max_examples=60, deadline=None)


def _ref_top(values: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-values, kind="stable")[: max(k, 0)]


@st.composite
def _ints(draw: st.DrawFn, max_n: int = 200) -> np.ndarray:
    n = draw(st.integers(0, max_n))
    seed = draw(st.integers(0, 2**31))
    spread = draw(st.sampled_from([2, 5, 1000]))  # small spreads make many ties
    return np.random.default_rng(seed).integers(-spread, spread, n).astype(np.float32)


@SETTINGS
@given(_ints(), st.integers(0, 250))
def test_top_k_is_a_stable_sort_prefix(values: np.ndarray, k: int) -> None:
    np.testing.assert_array_equal(kernels.top_k(values, k), _ref_top(values, k))


def test_top_k_of_nothing_and_of_everything() -> None:
    assert kernels.top_k(np.empty(0, np.float32), 5).shape == (0,)
    v = np.array([1.0, 3.0, 3.0, 2.0], np.float32)
    assert kernels.top_k(v, 10).tolist() == [1, 2, 3, 0]
    assert kernels.top_k(v, 0).tolist() == []


def _codes(rng: np.random.Generator, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    codes = rng.integers(-127, 128, (n, m)).astype(np.int8)
    scales = (2.0 ** rng.integers(-3, 3, n)).astype(np.float32)  # exact products
    return codes, scales


def _packed(entries: np.ndarray) -> np.ndarray:
    """Entries -8..7 as the scan reads them, as documented (fit_kernels.encode): plus 8,
    entry j in the low four bits of byte j, entry j + h in its high ones, h = (m + 1) // 2
    bytes a row, an odd rank's last high nibble a zero entry."""
    n, m = entries.shape
    h = (m + 1) // 2
    u = np.full((n, 2 * h), 8, np.int64)
    u[:, :m] = entries.astype(np.int64) + 8
    return (u[:, :h] | (u[:, h:] << 4)).astype(np.uint8)


def _nibbles(rng: np.random.Generator, n: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random nibble code rows of rank ``m``: ``(packed, scales, entries)``."""
    entries = rng.integers(-7, 8, (n, m)).astype(np.int8)
    scales = (2.0 ** rng.integers(-3, 3, n)).astype(np.float32)  # exact products
    return _packed(entries), scales, entries


@SETTINGS
@given(
    st.integers(0, 60),
    st.one_of(st.integers(1, 40), st.sampled_from([384, 768])),  # 384, 768: whole vectors
    st.integers(0, 2**31),
)
def test_code_scores_equal_the_dequantised_product(n: int, m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    codes, scales = _codes(rng, n, m)
    q = rng.integers(-3, 4, m).astype(np.float32)
    ref = (codes.astype(np.float32) @ q) * scales
    np.testing.assert_array_equal(kernels.code_scores(codes, scales, q), ref)


@SETTINGS
@given(
    st.integers(0, 50),
    st.sampled_from([384, 768, 40]),  # 384, 768: 16 rows at a time in int16 steps
    st.integers(0, 2**31),
)
def test_picked_code_rows_score_like_numpy_in_any_order(n: int, m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    codes, scales = _codes(rng, 20, m)
    codes[0] = 127  # the largest products, where an int32 sum could wrap
    codes[1] = -127
    picks = rng.integers(0, 20, n)  # scattered, repeated
    picks[: min(n, 2)] = [0, 1][: min(n, 2)]
    q = rng.standard_normal(m).astype(np.float32)
    q[:2] = np.abs(q).max() * np.array([1.0, -1.0], np.float32)  # extreme steps
    got = kernels.picked_scores(codes, scales, picks, q)
    if m in (384, 768):  # the query in int8 steps, the rows' sums exact
        q8, unit = _int8_query(q)
        sums = codes[picks].astype(np.int64) @ q8
        want = sums.astype(np.float32) * (scales[picks] * np.float32(unit))
        bound = 0.5 * unit  # the rounding of each of the query's entries
    else:
        want = (codes[picks].astype(np.float32) @ q) * scales[picks]
        bound = 1e-6 * float(np.abs(q).max())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * float(np.abs(want).max(initial=1)))
    # The rounding moves a score by at most half a step per entry, times the codes.
    exact = (codes[picks].astype(np.float64) @ q.astype(np.float64)) * scales[picks]
    reach = bound * np.abs(codes[picks]).sum(axis=1) * scales[picks]
    assert np.all(np.abs(got - exact) <= 1.001 * reach + 1e-6 * np.abs(exact))


@SETTINGS
@given(
    st.integers(1, 30),
    st.integers(0, 2**31),
    st.integers(0, 80),
    st.sampled_from([8, kernels.CODE_RANK, 131]),
)
def test_listed_code_top_ranks_the_listed_rows_like_numpy(
    n_lists: int, seed: int, keep: int, m: int
) -> None:
    rng = np.random.default_rng(seed)
    # Empty lists included; lists of 16 rows or more are scored 16 rows at a time.
    lens = rng.integers(0, 40, n_lists)
    starts = np.cumsum(lens) - lens
    codes, scales, entries = _nibbles(rng, int(lens.sum()) + 3, m)
    chosen = rng.permutation(n_lists)[: rng.integers(0, n_lists + 1)]
    base = rng.integers(-50, 50, chosen.shape[0]).astype(np.float32)
    qp = rng.integers(-2, 3, m).astype(np.float32)
    got, got_approx = kernels.listed_code_top(codes, scales, starts, lens, chosen, base, qp, keep)
    rows = ranges(starts[chosen], lens[chosen])
    q8, unit = _int8_query(qp)
    products = (entries[rows].astype(np.int64) @ q8).astype(np.float32)
    approx = np.repeat(base, lens[chosen]) + products * (scales[rows] * np.float32(unit))
    best = _ref_top(approx, keep)
    np.testing.assert_array_equal(got, rows[best])
    np.testing.assert_array_equal(got_approx, approx[best])


@SETTINGS
@given(
    st.integers(1, 8),
    st.integers(0, 2**31),
    st.sampled_from([6, 384]),
    st.sampled_from([8, kernels.CODE_RANK, 131]),
)
def test_coded_rows_score_any_rows_as_the_scan_scores_their_lists(
    n_blocks: int, seed: int, dim: int, m: int
) -> None:
    """A row anywhere in the arena gets its sub-list mean's score (``picked_scores``) plus
    its code's product with the query in int8 steps: what ``listed_code_top`` gives the
    rows of a probed sub-list whose mean scored so."""
    rng = np.random.default_rng(seed)
    # Each block's sub-lists hold its rows in one run (empty ones included).
    per_block = rng.integers(1, 5, n_blocks)
    lens = rng.integers(0, 40, int(per_block.sum()))
    lens[np.cumsum(per_block) - 1] += 1  # no block without rows
    starts = np.cumsum(lens) - lens
    block_first = np.cumsum(per_block) - per_block
    block_end = np.cumsum(per_block)
    held = [lens[f:e].sum() for f, e in zip(block_first, block_end, strict=True)]
    row_block = np.repeat(np.arange(n_blocks), held)
    codes, scales, entries = _nibbles(rng, int(lens.sum()), m)
    list_code = rng.integers(-127, 128, (lens.shape[0], dim)).astype(np.int8)
    list_scale = (2.0 ** rng.integers(-9, -5, lens.shape[0])).astype(np.float32)
    q = rng.standard_normal(dim).astype(np.float32)
    qp = rng.integers(-2, 3, m).astype(np.float32)
    rows = rng.integers(0, row_block.shape[0], int(rng.integers(0, 50))).astype(np.int64)
    got = kernels.coded_rows(rows, row_block, block_first, block_end, list_code, list_scale,
                             starts, lens, codes, scales, q, qp)  # fmt: skip
    holder = np.searchsorted(starts, rows, side="right") - 1
    for t, j in enumerate(holder):  # past empty lists: the one that holds the row
        while not starts[j] <= rows[t] < starts[j] + lens[j]:
            j -= 1
        holder[t] = j
    for t in range(rows.shape[0]):
        j = holder[t]
        base = kernels.picked_scores(list_code, list_scale, np.array([j]), q)
        scan_rows, scan_approx = kernels.listed_code_top(
            codes, scales, starts, lens, np.array([j]), base, qp, int(lens[j])
        )
        assert got[t] == scan_approx[scan_rows.tolist().index(rows[t])]
    q8, unit = _int8_query(qp)
    products = (entries[rows].astype(np.int64) @ q8).astype(np.float32)
    base = kernels.picked_scores(list_code, list_scale, holder, q)
    np.testing.assert_array_equal(got, base + products * (scales[rows] * np.float32(unit)))


def test_coded_rows_refuses_a_row_its_block_does_not_hold() -> None:
    codes, scales, _ = _nibbles(np.random.default_rng(0), 10, 8)
    with pytest.raises(ValueError, match="outside its block"):
        kernels.coded_rows(
            np.array([7]), np.zeros(10, np.int64), np.zeros(1, np.int64), np.ones(1, np.int64),
            np.ones((1, 6), np.int8), np.ones(1, np.float32), np.zeros(1, np.int64),
            np.array([5]), codes, scales, np.ones(6, np.float32), np.ones(8, np.float32),
        )  # fmt: skip


def _int8_query(qp: np.ndarray) -> tuple[np.ndarray, float]:
    """The code scan's query, as documented: ``qp`` in int8 steps of a power of two, its
    largest entry 64 to 127 steps (rounded half to even, as numpy rounds)."""
    big = float(np.abs(qp.astype(np.float64)).max(initial=0.0))
    if big == 0.0:
        return np.zeros(qp.shape[0], np.int64), 0.0
    per = 2.0 ** math.floor(math.log2(127.0 / big))
    return np.round(qp.astype(np.float64) * per).astype(np.int64), float(np.float32(1.0 / per))


@SETTINGS
@given(st.integers(0, 2**31), st.sampled_from([1, 8, kernels.CODE_RANK, 600]))
def test_the_scan_rounds_the_query_to_int8_steps(seed: int, m: int) -> None:
    rng = np.random.default_rng(seed)
    qp = (rng.standard_normal(m) * 10.0 ** rng.integers(-6, 6)).astype(np.float32)
    q8, unit = kernels._as_int8(qp)
    want_q8, want_unit = _int8_query(qp)
    np.testing.assert_array_equal(q8, want_q8)
    assert q8.dtype == np.int8 and 64 <= int(np.abs(q8.astype(np.int64)).max()) <= 127
    assert unit == np.float32(want_unit)
    assert np.all(np.abs(q8.astype(np.float64) * unit - qp) <= 0.5 * unit * (1 + 1e-6))
    # A scan with the largest nibbles for this query agrees with the float product.
    worst = np.where(q8 < 0, -8, 7).astype(np.int8)[None, :]
    got, approx = kernels.listed_code_top(
        _packed(worst), np.ones(1, np.float32), np.zeros(1, np.int64), np.ones(1, np.int64),
        np.zeros(1, np.int64), np.zeros(1, np.float32), qp, 1,
    )  # fmt: skip
    exact = float(worst[0].astype(np.float64) @ qp.astype(np.float64))
    assert got.tolist() == [0]
    assert abs(float(approx[0]) - exact) <= 1e-5 * abs(exact) + 4 * m * unit


@SETTINGS
@given(st.integers(0, 2**31), st.integers(1, 40))
def test_the_nibble_row_product_reads_both_halves_of_each_byte_like_numpy(
    seed: int, n: int
) -> None:
    from numba import njit

    from magnetic_core._search.pointers import nibble_dot

    @njit
    def every_row(codes: np.ndarray, q8: np.ndarray) -> np.ndarray:
        out = np.empty(codes.shape[0], np.int32)
        for r in range(codes.shape[0]):
            out[r] = nibble_dot(codes, r, q8)
        return out

    rng = np.random.default_rng(seed)
    codes, q8 = _nibble_rows_and_query(rng, n)
    np.testing.assert_array_equal(every_row(codes, q8), _nibble_products(codes, q8))


def _nibble_rows_and_query(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` nibble code rows (the largest nibbles on both sides in the first, where a
    sign extension would show; zeros in the second) and an int8 query with its extremes."""
    from magnetic_core._search.pointers import CODE_DOT_WIDTH

    codes = rng.integers(0, 256, (n, CODE_DOT_WIDTH // 2)).astype(np.uint8)
    codes[0] = 255
    if n > 1:
        codes[1] = 0
    q8 = rng.integers(-128, 128, CODE_DOT_WIDTH).astype(np.int8)
    q8[:4] = [-128, 127, -1, 0]
    return codes, q8


def _nibble_products(codes: np.ndarray, q8: np.ndarray) -> np.ndarray:
    """Each nibble code row times ``q8`` (low nibbles by its first half), in int64."""
    half = codes.shape[1]
    low, high = (codes & 15).astype(np.int64), (codes >> 4).astype(np.int64)
    return low @ q8[:half].astype(np.int64) + high @ q8[half:].astype(np.int64)


@SETTINGS
@given(st.integers(0, 2**31), st.integers(0, 5), st.integers(0, 3))
def test_sixteen_nibble_rows_at_once_score_as_one_row_at_a_time(
    seed: int, first: int, at: int
) -> None:
    from numba import njit

    from magnetic_core._search.pointers import ROW_BATCH, nibble_rows

    @njit
    def batch(codes, scales, r, q8, offset, unit, base, rows, approx, at):  # type: ignore[no-untyped-def]
        nibble_rows(codes, scales, r, q8, offset, unit, base, rows, approx, at)

    rng = np.random.default_rng(seed)
    codes, q8 = _nibble_rows_and_query(rng, first + ROW_BATCH + 2)
    codes[[0, 1, first, first + 1]] = codes[[first, first + 1, 0, 1]]  # the extremes in the batch
    scales = (2.0 ** rng.integers(-3, 3, codes.shape[0])).astype(np.float32)
    offset = int(8 * q8.astype(np.int64).sum())
    unit, base = np.float32(2.0**-12), np.float32(rng.integers(-50, 50))
    rows = np.full(at + ROW_BATCH + 2, -1, np.int64)
    approx = np.full(rows.shape[0], np.nan, np.float32)
    batch(codes, scales, first, q8, offset, unit, base, rows, approx, at)

    mine = slice(first, first + ROW_BATCH)
    sums = _nibble_products(codes[mine], q8) - offset
    want = base + sums.astype(np.float32) * (scales[mine] * unit)
    written = slice(at, at + ROW_BATCH)
    np.testing.assert_array_equal(rows[written], np.arange(first, first + ROW_BATCH))
    np.testing.assert_allclose(approx[written], want, rtol=1e-6)
    # Nothing is written outside the batch's places.
    assert (rows[:at] == -1).all() and (rows[at + ROW_BATCH :] == -1).all()
    assert np.isnan(approx[:at]).all() and np.isnan(approx[at + ROW_BATCH :]).all()


def test_a_query_with_no_projection_scores_the_lists_by_their_means() -> None:
    codes = _packed(np.ones((4, kernels.CODE_RANK), np.int8))
    lens, starts = np.array([2, 2]), np.array([0, 2])
    base = np.array([0.5, 0.25], np.float32)
    zero = np.zeros(kernels.CODE_RANK, np.float32)
    rows, approx = kernels.listed_code_top(
        codes, np.ones(4, np.float32), starts, lens, np.array([1, 0]), base, zero, 4
    )
    assert rows.tolist() == [2, 3, 0, 1]
    assert approx.tolist() == [0.5, 0.5, 0.25, 0.25]


def _blocks(
    rng: np.random.Generator, n_blocks: int, most_rows: int, d: int
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """Group blocks of small integer rows, their addresses, and each arena row's block and
    row in it (the scorer's layout)."""
    blocks = [
        rng.integers(-3, 4, (int(rng.integers(1, most_rows)), d)).astype(np.float32)
        for _ in range(n_blocks)
    ]
    addresses = np.array([b.ctypes.data for b in blocks], np.int64)
    owner = np.concatenate([np.full(b.shape[0], i, np.int32) for i, b in enumerate(blocks)])
    row = np.concatenate([np.arange(b.shape[0], dtype=np.int32) for b in blocks])
    return blocks, addresses, owner, row


@SETTINGS
@given(st.integers(1, 6), st.integers(0, 2**31), st.integers(0, 40))
def test_the_exact_kernels_read_the_blocks_by_address(n_blocks: int, seed: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    d = 7
    blocks, addresses, owner, row = _blocks(rng, n_blocks, 9, d)
    rows = rng.permutation(owner.shape[0])[: rng.integers(0, owner.shape[0] + 1)]
    q = rng.integers(-2, 3, d).astype(np.float32)
    exact = np.array([blocks[owner[r]][row[r]] @ q for r in rows], np.float32)
    # Unbounded, the rerank scores every row, in the order given.
    zeros, none = np.zeros(rows.shape[0], np.float32), np.empty(0, np.float32)
    got = kernels.exact_prefix(addresses, owner, row, rows, zeros, zeros, none, q, k, 1, math.inf)
    np.testing.assert_array_equal(got, exact)
    np.testing.assert_array_equal(kernels.top_k(got, k), _ref_top(exact, k))
    # The same rows scored in the order given (duplicates and no rows included).
    again = np.concatenate([rows, rows[:2]])
    ref_at = np.array([blocks[owner[r]][row[r]] @ q for r in again], np.float32)
    np.testing.assert_array_equal(kernels.exact_at(addresses, owner, row, again, q), ref_at)
    empty = kernels.exact_at(addresses, owner, row, np.empty(0, np.int64), q)
    assert empty.shape == (0,) and empty.dtype == np.float32
    # Every row of some blocks, in block order; and one block alone.
    pick = rng.permutation(n_blocks)[: rng.integers(0, n_blocks + 1)]
    counts = np.array([b.shape[0] for b in blocks], np.int64)
    ref = np.concatenate([blocks[i] @ q for i in pick]) if len(pick) else np.empty(0)
    np.testing.assert_array_equal(kernels.exact_rows(addresses, counts, pick, q), ref)
    np.testing.assert_array_equal(kernels.block_scores(blocks[0], q), blocks[0] @ q)


def _ref_exact_prefix(exact, approx, bonus, others, k, step, sds):
    """The bounded rerank's rule in numpy: how many rows it scores."""
    n = exact.shape[0]
    done = 0
    while done < n:
        done = min(n, done + max(step, k - done, 1))
        ranked = np.concatenate([exact[:done] + bonus[:done], others])
        if done < n and k > 0 and ranked.shape[0] >= k and sds < math.inf:
            err = exact[:done].astype(np.float64) - approx[:done]
            margin = abs(err.mean()) + sds * err.std()
            if approx[done] + bonus[done] < np.sort(ranked)[::-1][k - 1] - margin:
                break
    return done


@SETTINGS
@given(
    st.integers(1, 6),
    st.integers(0, 2**31),
    st.integers(0, 30),
    st.integers(1, 12),
    st.sampled_from([0.0, 1.0, 4.0, math.inf]),
    st.booleans(),
)
def test_exact_prefix_scores_the_rows_its_rule_reads(n_blocks, seed, k, step, sds, bonuses):
    rng = np.random.default_rng(seed)
    d = 5
    blocks, addresses, owner, row = _blocks(rng, n_blocks, 12, d)
    rows = rng.permutation(owner.shape[0])[: rng.integers(0, owner.shape[0] + 1)]
    q = rng.integers(-2, 3, d).astype(np.float32)
    exact = np.array([blocks[owner[r]][row[r]] @ q for r in rows], np.float32)
    # Approximations off by small integers (exact sums), rows ordered by them plus bonus.
    approx = exact + rng.integers(-2, 3, exact.shape[0]).astype(np.float32)
    n_bonus = exact.shape[0] if bonuses else 0
    bonus = np.zeros(exact.shape[0], np.float32)
    bonus[:n_bonus] = rng.integers(0, 4, n_bonus)
    others = rng.integers(-20, 20, rng.integers(0, 15) if bonuses else 0).astype(np.float32)
    order = _ref_top(approx + bonus, approx.shape[0])
    rows, exact, approx, bonus = rows[order], exact[order], approx[order], bonus[order]
    got = kernels.exact_prefix(addresses, owner, row, rows, approx, bonus, others, q, k, step, sds)
    done = _ref_exact_prefix(exact, approx, bonus, others, k, step, sds)
    assert done == rows.shape[0] or sds != math.inf  # infinite: every row
    np.testing.assert_array_equal(got, exact[:done])


def test_exact_prefix_stops_early_only_when_the_approximations_are_close() -> None:
    rng = np.random.default_rng(7)
    vecs = rng.standard_normal((400, 64)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    owner = np.zeros(400, np.int32)
    row = np.arange(400, dtype=np.int32)
    addresses = np.array([vecs.ctypes.data], np.int64)
    q = vecs[0].copy()
    exact = vecs @ q
    no_bonus, none = np.zeros(400, np.float32), np.empty(0, np.float32)
    # Row 0 is the query itself (cosine 1), given an approximation that puts it last.
    for spread, reads_all in ((1e-3, False), (0.3, True)):
        approx = (exact + rng.normal(0, spread, 400)).astype(np.float32)
        approx[0] = approx.min() - 1.0
        order = np.argsort(-approx, kind="stable")
        got = kernels.exact_prefix(
            addresses, owner, row, order, approx[order], no_bonus, none, q, 10, 32, 4.0
        )
        np.testing.assert_allclose(got, exact[order[: got.shape[0]]], atol=1e-6)
        if reads_all:  # errors of 0.3 leave no margin to stop at: every row is scored
            assert got.shape[0] == 400
        else:  # close approximations: the first 32 rows hold the rest of the best
            assert got.shape[0] == 32
    # A bonus lifts rows as the ranking will: a row the others' scores already beat by
    # more than any error seen is never read.
    approx = (exact + rng.normal(0, 1e-3, 400)).astype(np.float32)
    order = np.argsort(-approx, kind="stable")
    strong = np.full(10, 5.0, np.float32)  # ten candidates scored already, far above
    got = kernels.exact_prefix(
        addresses, owner, row, order, approx[order], no_bonus, strong, q, 10, 32, 4.0
    )
    assert got.shape[0] == 32  # the first step is read, then nothing can reach the ten


def test_exact_kernels_give_float32_cosines_of_real_vectors() -> None:
    rng = np.random.default_rng(1)
    vecs = rng.standard_normal((50, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    q = vecs[3].copy()
    scores = kernels.block_scores(vecs, q)
    np.testing.assert_allclose(scores, vecs @ q, atol=2e-7)
    assert abs(float(scores[3]) - 1.0) < 1e-6  # a cell's cosine with itself


@SETTINGS
@given(st.integers(1, 20), st.integers(1, 12), st.integers(0, 2**31))
def test_project_matches_numpy(d: int, r: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(d).astype(np.float32)
    basis = rng.standard_normal((d, r)).astype(np.float32)
    np.testing.assert_allclose(kernels.project(x, basis), x @ basis, rtol=1e-4, atol=1e-4)


def test_split_lists_covers_a_group_with_lists_near_the_target_size() -> None:
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((100, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    lists = split_lists(vecs, 25)
    assert sorted(lists.order.tolist()) == list(range(100))
    assert 1 < lists.lengths.shape[0] <= 4 and lists.lengths.sum() == 100


def _ref_wanted(sizes: np.ndarray, n_probe: int, min_cells: int) -> int:
    """Groups the centroid stage ranks: ``n_probe``, or twice the budget's worth."""
    if min_cells <= 0:
        return n_probe
    return max(n_probe, math.ceil(2 * min_cells / max(float(sizes.mean()), 1.0)))


def _ref_enough(cand: np.ndarray, sizes: np.ndarray, n_probe: int, min_cells: int):
    """The first ranked groups until they hold ``min_cells`` cells (at least ``n_probe``)."""
    if min_cells <= 0:
        return cand[:n_probe]
    need = int(np.searchsorted(np.cumsum(sizes[cand]), min_cells)) + 1
    return cand[: max(n_probe, need)]


def _ref_probe_groups(sims: np.ndarray, sizes: np.ndarray, n_probe: int, min_cells: int):
    """The centroid stage's choice of groups, in numpy."""
    if n_probe >= sims.shape[0]:
        return np.arange(sims.shape[0])
    want = _ref_wanted(sizes, n_probe, min_cells)
    return _ref_enough(_ref_top(sims, want), sizes, n_probe, min_cells)


def _same_slots(got: np.ndarray, want: np.ndarray) -> None:
    """The same slots, each once (their order is not part of the answer: callers sort)."""
    assert got.shape == want.shape and np.unique(got).shape == got.shape
    np.testing.assert_array_equal(np.sort(got), np.sort(want))


@SETTINGS
@given(_ints(60), st.integers(0, 2**31), st.integers(1, 70), st.integers(0, 400))
def test_probe_groups_takes_the_best_until_the_budget_is_held(sims, seed, n_probe, min_cells):
    sizes = np.random.default_rng(seed).integers(1, 40, sims.shape[0]).astype(np.int64)
    got = kernels.probe_groups(sims, sizes, n_probe, min_cells)
    _same_slots(got, _ref_probe_groups(sims, sizes, n_probe, min_cells))


def test_probe_groups_ranks_further_when_the_best_groups_are_small() -> None:
    # The best groups are ranked only as far as groups of the mean size (69 cells) would
    # hold the budget, with a quarter to spare: 27 here. The best 100 hold 36 cells each,
    # so 27 of them fall short of 1,000 cells and all 29 groups wanted are ranked: 28 hold
    # the budget, as when ranking them all at once.
    sims = np.linspace(1.0, 0.0, 400).astype(np.float32)
    sizes = np.where(np.arange(400) < 100, 36, 80).astype(np.int64)
    got = kernels.probe_groups(sims, sizes, 4, 1000)
    _same_slots(got, _ref_probe_groups(sims, sizes, 4, 1000))
    assert got.shape[0] == 28
    for min_cells in (30, 300, 5000):
        got = kernels.probe_groups(sims, sizes, 4, min_cells)
        _same_slots(got, _ref_probe_groups(sims, sizes, 4, min_cells))


def _ref_tree_groups(tree, q, sizes, n_probe, min_cells, spread):
    """The centroid stage through a tree of centroids, in numpy."""
    t_code, t_scale, start, members, rows, row_scale = tree
    n = members.shape[0]
    if n_probe >= n:
        return np.arange(n)
    want = _ref_wanted(sizes, n_probe, min_cells)
    if 2 * spread * want >= n:
        sims = (rows.astype(np.float64) @ q) * row_scale
        return _ref_enough(members[_ref_top(sims, want)], sizes, n_probe, min_cells)
    order = _ref_top((t_code.astype(np.float64) @ q) * t_scale, t_scale.shape[0])
    counts = np.diff(start)[order]
    taken = int(np.searchsorted(np.cumsum(counts), spread * want)) + 1
    at = np.concatenate([np.arange(start[c], start[c + 1]) for c in order[:taken]])
    sims = (rows[at].astype(np.float64) @ q) * row_scale[at]
    return _ref_enough(members[at][_ref_top(sims, want)], sizes, n_probe, min_cells)


def _tree(rng: np.random.Generator, n: int, d: int):
    """Random clusters of ``n`` slots, with integer codes and power-of-two scales."""
    c = int(rng.integers(1, 12))
    owner = rng.integers(0, c, n)
    members = np.argsort(owner, kind="stable").astype(np.int64)
    start = np.zeros(c + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=c), out=start[1:])
    t_code, t_scale = _codes(rng, c, d)
    rows, row_scale = _codes(rng, n, d)
    return t_code, t_scale, start, members, rows, row_scale


@SETTINGS
@given(
    st.integers(1, 300),
    st.integers(0, 2**31),
    st.integers(1, 40),
    st.integers(0, 600),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([8, 384]),  # 384: the centroids' rows as whole vectors
)
def test_tree_groups_chooses_among_the_nearest_clusters_centroids(
    n: int, seed: int, n_probe: int, min_cells: int, spread: int, d: int
) -> None:
    rng = np.random.default_rng(seed)
    tree = _tree(rng, n, d)
    q = rng.integers(-3, 4, d).astype(np.float32)
    sizes = rng.integers(1, 40, n).astype(np.int64)
    got = kernels.tree_groups(*tree, q, sizes, n_probe, min_cells, spread)
    want = _ref_tree_groups(tree, q, sizes, n_probe, min_cells, spread)
    _same_slots(got, want)


def test_tree_groups_finds_the_full_scans_groups_when_clusters_hold_them() -> None:
    # Four well separated families of centroids, one cluster each: a query near one
    # family reads that cluster first and chooses what scoring every centroid chooses.
    rng = np.random.default_rng(5)
    d, per = 16, 200
    axes = np.eye(d, dtype=np.float32)[:4] * 100
    cents = np.concatenate([a + rng.integers(-20, 21, (per, d)) for a in axes])
    codes = np.clip(cents, -127, 127).astype(np.int8)
    scales = np.ones(cents.shape[0], np.float32)
    start = np.arange(0, 4 * per + 1, per).astype(np.int64)
    members = np.arange(4 * per, dtype=np.int64)  # family by family
    means = np.clip(axes, -127, 127).astype(np.int8)
    tree = (means, np.ones(4, np.float32), start, members, codes, scales)
    sizes = np.full(cents.shape[0], 10, np.int64)
    for fam in range(4):
        q = (axes[fam] / 100 + rng.normal(0, 0.05, d)).astype(np.float32)
        got = kernels.tree_groups(*tree, q, sizes, 20, 150, 2)
        sims = kernels.code_scores(codes, scales, q)
        full = kernels.probe_groups(sims, sizes, 20, 150)
        assert set((got // per).tolist()) == {fam}
        _same_slots(got, full)


def _arena(rng: np.random.Generator, n_blocks: int, d: int, r: int):
    """Blocks of integer vectors split into lists, with integer means and codes (exact sums)."""
    blocks, means, lens, firsts, ends = [], [], [], [], []
    row_block, row_in_block = [], []
    for h in range(n_blocks):
        size = int(rng.integers(1, 30))
        blocks.append(rng.integers(-3, 4, (size, d)).astype(np.float32))
        cuts = np.sort(rng.choice(np.arange(1, size), min(size - 1, 3), replace=False))
        parts = np.diff(np.r_[0, cuts, size]).astype(np.int64)
        firsts.append(len(lens))
        lens.extend(parts.tolist())
        ends.append(len(lens))
        means.append(rng.integers(-127, 128, (parts.shape[0], d)).astype(np.int8))
        row_block += [h] * size
        row_in_block += list(range(size))
    n_rows = len(row_block)
    lens_a = np.array(lens, np.int64)
    codes, scales, entries = _nibbles(rng, n_rows, r)
    return {
        "blocks": blocks,
        "first": np.array(firsts, np.int64),
        "end": np.array(ends, np.int64),
        "mean_code": np.concatenate(means),
        "mean_scale": (2.0 ** rng.integers(-3, 1, lens_a.shape[0])).astype(np.float32),
        "inv": (2.0 ** rng.integers(-2, 2, lens_a.shape[0])).astype(np.float32),
        "start": np.cumsum(lens_a) - lens_a,
        "len": lens_a,
        "code": codes,
        "entries": entries,
        "scale": scales,
        "row_block": np.array(row_block, np.int32),
        "row_in_block": np.array(row_in_block, np.int32),
        "address": np.array([b.ctypes.data for b in blocks], np.int64),
    }


def _ref_probe_top(a, slots, slot_block, q, basis, budget, keep, k):
    lists = ranges(a["first"][slot_block[slots]], (a["end"] - a["first"])[slot_block[slots]])
    base = (a["mean_code"][lists].astype(np.float32) @ q) * a["mean_scale"][lists]
    cos = base * a["inv"][lists]
    if int(a["len"][lists].sum()) > budget:
        order = _ref_top(cos, cos.shape[0])
        need = int(np.searchsorted(np.cumsum(a["len"][lists][order]), max(budget, 1))) + 1
        # the lists taken are read in place (slot order), so equal code scores go to the
        # cell of the list listed first there, not to that of the better list
        taken = np.sort(order[:need])
        lists, base = lists[taken], base[taken]
    rows = ranges(a["start"][lists], a["len"][lists])
    approx = (
        np.repeat(base, a["len"][lists])
        + (a["entries"][rows].astype(np.float32) @ (q @ basis)) * a["scale"][rows]
    )
    picked = rows[_ref_top(approx, keep)]
    exact = np.array(
        [a["blocks"][a["row_block"][p]][a["row_in_block"][p]] @ q for p in picked], np.float32
    )
    best = _ref_top(exact, k)
    return picked[best], exact[best]


@SETTINGS
@given(st.integers(1, 8), st.integers(0, 2**31), st.integers(0, 120), st.integers(1, 40))
def test_probe_top_is_the_scorer_probe_step_by_step(n_blocks, seed, budget, keep):
    rng = np.random.default_rng(seed)
    d, r = 6, 4
    a = _arena(rng, n_blocks, d, r)
    slot_block = rng.permutation(n_blocks).astype(np.int64)  # slots map to blocks anyhow
    slots = rng.permutation(n_blocks)[: rng.integers(0, n_blocks + 1)].astype(np.int64)
    q = rng.integers(-2, 3, d).astype(np.float32)
    basis = rng.integers(-1, 2, (d, r)).astype(np.float32)
    k = int(rng.integers(0, keep + 3))
    got = kernels.probe_top(
        slots, slot_block, a["first"], a["end"], a["mean_code"], a["mean_scale"], a["inv"],
        a["start"], a["len"],
        a["code"], a["scale"], a["row_block"], a["row_in_block"], a["address"],
        q, basis, budget, keep, k,
    )  # fmt: skip
    want = _ref_probe_top(a, slots, slot_block, q, basis, budget, keep, k)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def _ref_doc_rows(docs, table, doc_col, row_block, block_slot, slot_block, stale, alive):
    """The rule in numpy: a recorded row counts while it names the number, the number is
    alive, and its block is the current, clean one of its slot."""
    out = np.full(docs.shape[0], -1, np.int64)
    at = np.flatnonzero((docs >= 0) & (docs < min(table.shape[0], alive.shape[0])))
    at = at[alive[docs[at]]]
    rows = table[docs[at]]
    at, rows = at[rows >= 0], rows[rows >= 0]
    at, rows = at[doc_col[rows] == docs[at]], rows[doc_col[rows] == docs[at]]
    blocks = row_block[rows]
    slots = block_slot[blocks]
    inside = (slots >= 0) & (slots < slot_block.shape[0])
    slots = np.where(inside, slots, 0)
    ok = inside & (slot_block[slots] == blocks) & ~stale[slots]
    out[at[ok]] = rows[ok]
    return out


@SETTINGS
@given(st.integers(0, 2**31), st.integers(0, 60), st.integers(1, 8))
def test_doc_rows_keeps_only_rows_of_current_blocks_like_numpy(seed: int, n_docs: int, n_slots):
    rng = np.random.default_rng(seed)
    n_rows, n_blocks, n_numbers = 40, 6, 30
    table = rng.integers(-1, n_rows, n_numbers)
    doc_col = np.where(rng.random(n_rows) < 0.8, rng.integers(0, n_numbers, n_rows), -1)
    doc_col[table[table >= 0][: n_rows // 2]] = np.flatnonzero(table >= 0)[: n_rows // 2]
    row_block = rng.integers(0, n_blocks, n_rows).astype(np.int32)
    block_slot = rng.integers(-1, n_slots + 2, n_blocks)  # some past the slots
    slot_block = rng.integers(-1, n_blocks, n_slots)
    stale = rng.random(n_slots) < 0.3
    alive = rng.random(n_numbers + int(rng.integers(-5, 5))) < 0.9
    docs = rng.integers(-2, n_numbers + 3, n_docs)  # -1s and numbers past the table
    args = (docs, table, doc_col, row_block, block_slot, slot_block, stale, alive)
    np.testing.assert_array_equal(kernels.doc_rows(*args), _ref_doc_rows(*args))


def test_top_k_ranks_nan_last_and_signed_zeros_as_equal() -> None:
    v = np.array([0.0, -0.0, np.nan, -1.5, np.inf, -np.inf, 0.0], np.float32)
    assert kernels.top_k(v, 7).tolist() == [4, 0, 1, 6, 3, 5, 2]
    assert kernels.top_k(v.astype(np.float64), 3).tolist() == [4, 0, 1]


def test_top_k_keeps_signed_zeros_equal_when_a_fastmath_kernel_compiles_it_first() -> None:
    # numba compiles a kernel with the fastmath flags of the first caller that needs it
    # (numba issue 7168): a kernel with 'nsz' made -0.0 rank below 0.0 in every later call.
    from numba import njit

    @njit(fastmath=kernels._FAST)  # the kernels' flags: 'nsz' among them, NaN kept
    def through_fastmath(values: np.ndarray, k: int) -> np.ndarray:
        return kernels.top_k(values, k)

    # A strided view: a signature no other test compiles, so the fastmath kernel is first.
    v = np.repeat(np.array([0.0, -0.0, np.nan, -1.5, np.inf, -np.inf, 0.0], np.float32), 3)[::3]
    assert through_fastmath(v, 7).tolist() == [4, 0, 1, 6, 3, 5, 2]
    assert kernels.top_k(v, 7).tolist() == [4, 0, 1, 6, 3, 5, 2]


@SETTINGS
@given(
    st.integers(128, 4000),
    st.integers(1, 600),
    st.integers(0, 2**31),
    st.sampled_from(["normal", "narrow", "constant", "nans", "tiny"]),
)
def test_top_k_by_buckets_agrees_with_a_stable_sort(n: int, k: int, seed: int, kind: str) -> None:
    # Float32 inputs of 128 values or more go through the histogram and the radix sort:
    # scores crowded in a narrow range, all equal, mostly NaN, or subnormal.
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(n).astype(np.float32)
    if kind == "narrow":
        values = (0.5 + 1e-6 * rng.integers(-3, 3, n)).astype(np.float32)
    elif kind == "constant":
        values = np.full(n, -0.25, np.float32)
        values[rng.random(n) < 0.5] = -0.0  # signed zeros tie with zeros
        values[values == -0.25] = 0.0
    elif kind == "nans":
        values[rng.random(n) < 0.9] = np.nan
    elif kind == "tiny":
        values = (values * np.float32(1e-42)).astype(np.float32)
    np.testing.assert_array_equal(kernels.top_k(values, k), _ref_top(values, k))


def _scores(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    """``n`` float32 scores of a kind that stresses a selection: normal, ties, constant,
    NaNs (a tenth or nearly all), signed zeros, infinities, or one far outlier (every other
    value then falls in one bucket)."""
    values = rng.standard_normal(n).astype(np.float32)
    if kind == "ties":
        values = np.round(values, 1)
    elif kind == "constant":
        values = np.full(n, 0.5, np.float32)
    elif kind == "nans":
        values[rng.random(n) < float(rng.choice([0.1, 0.97]))] = np.nan
    elif kind == "zeros":
        values = np.where(rng.random(n) < 0.5, np.float32(0.0), np.float32(-0.0))
        values[rng.random(n) < 0.01] = 1.0
    elif kind == "infinite":
        values[rng.random(n) < 0.02] = np.inf
        values[rng.random(n) < 0.02] = -np.inf
    elif kind == "outlier" and n:
        values[0] = 1e6
    return values


@SETTINGS
@given(
    st.integers(2048, 30_000),
    st.integers(1, 1875),
    st.integers(0, 2**31),
    st.sampled_from(["normal", "ties", "constant", "nans", "zeros", "infinite"]),
    st.sampled_from(["as drawn", "ascending", "descending"]),
)
def test_top_k_through_a_sampled_bar_agrees_with_a_stable_sort(
    n: int, k: int, seed: int, kind: str, arranged: str
) -> None:
    # Float32 inputs of 2,048 values or more with k at most a sixteenth of them (a query's
    # best 128 of 13,000 code scores) are selected by a bar drawn from a sample; a bar
    # that keeps too few or far too many (all values tied) falls back to buckets.
    from magnetic_core._search.select_kernel import _sampled_top_k

    k = min(k, n // 16)
    values = _scores(np.random.default_rng(seed), n, kind)
    if arranged == "ascending":
        values = np.sort(values)
    elif arranged == "descending":
        values = np.sort(values)[::-1].copy()
    np.testing.assert_array_equal(kernels.top_k(values, k), _ref_top(values, k))
    sampled = _sampled_top_k(values, k)
    assert sampled.shape[0] in (0, k)
    if sampled.shape[0]:
        np.testing.assert_array_equal(sampled, _ref_top(values, k))
    if kind == "constant":  # every value reaches the bar: selected another way
        assert sampled.shape[0] == 0


@SETTINGS
@given(st.integers(0, 2**31), st.integers(0, 20), st.integers(0, 5), st.integers(0, 3))
def test_the_entries_reaching_the_bar_are_kept_in_order(
    seed: int, i: int, at: int, digits: int
) -> None:
    # Sixteen entries compared with the bar at once: the positions of those at or above
    # it (a NaN never is) written in order from ``at``, nothing else written.
    from numba import njit

    from magnetic_core._search.pointers import KEPT_LANES, kept_reaching

    @njit
    def keep(values, i, bar, out, at):  # type: ignore[no-untyped-def]
        return kept_reaching(values, i, bar, out, at)

    rng = np.random.default_rng(seed)
    values = np.round(rng.standard_normal(i + KEPT_LANES + 3), digits).astype(np.float32)
    values[rng.random(values.shape[0]) < 0.1] = np.nan
    bar = np.float32(values[i + rng.integers(0, KEPT_LANES)])
    out = np.full(at + KEPT_LANES + 2, -1, np.int64)
    end = keep(values, i, bar, out, at)
    mine = np.arange(i, i + KEPT_LANES)
    want = mine[values[mine] >= bar]
    assert end == at + want.shape[0]
    np.testing.assert_array_equal(out[at:end], want)
    assert (out[:at] == -1).all() and (out[at + KEPT_LANES :] == -1).all()


@SETTINGS
@given(st.integers(1, 1200), st.integers(1, 1200), st.integers(0, 2**31), st.integers(0, 3))
def test_the_sampled_bar_is_the_jth_largest_of_the_sample(m: int, j: int, seed: int, digits: int):
    # The bar of a sample is found by insertion for small ranks, by selection past them;
    # both give the j-th largest value, ties counted (few digits: many ties).
    from magnetic_core._search.select_kernel import _jth_largest, _kth_smallest

    j = min(j, m)
    sample = np.round(np.random.default_rng(seed).standard_normal(m), digits).astype(np.float32)
    expected = np.sort(sample)[m - j]
    assert _jth_largest(sample, m, j) == expected
    assert _kth_smallest(sample.copy(), m - j) == expected


@SETTINGS
@given(
    st.integers(0, 1500),
    st.integers(0, 2**31),
    st.sampled_from(["normal", "ties", "constant", "nans", "infinite", "zeros", "outlier"]),
    st.floats(0.0, 1.2),
)
def test_best_holding_takes_the_ranked_prefix_that_holds_the_budget(n, seed, kind, share):
    # A probe's sub-lists until they hold its budget: the same entries as ranking them all
    # (top_k's order: ties to the lower index, NaN last) and taking them until the weights
    # reach the budget, returned in index order.
    from magnetic_core._search.select_kernel import best_holding

    rng = np.random.default_rng(seed)
    values = _scores(rng, n, kind)
    weights = rng.integers(0, 60, n).astype(np.int64)
    budget = int(share * weights.sum())
    order = _ref_top(values, n)
    held, taken = 0, 0
    while taken < n and held < budget:
        held += int(weights[order[taken]])
        taken += 1
    expected = np.sort(order[:taken])
    np.testing.assert_array_equal(best_holding(values, weights, budget), expected)


def test_top_k_of_a_query_sized_input_goes_through_the_sampled_bar() -> None:
    from magnetic_core._search.select_kernel import _sampled_top_k

    values = np.random.default_rng(3).standard_normal(13_000).astype(np.float32)
    np.testing.assert_array_equal(_sampled_top_k(values, 128), _ref_top(values, 128))


@SETTINGS
@given(st.integers(0, 5000), st.integers(0, 300), st.integers(0, 2**31))
def test_top_k_of_long_arrays_in_any_order(n: int, k: int, seed: int) -> None:
    # Long arrays fill and cut the selection buffer many times; ascending input is its worst.
    rng = np.random.default_rng(seed)
    values = rng.integers(-50, 50, n).astype(np.float32)
    for arranged in (values, np.sort(values), np.sort(values)[::-1].copy()):
        np.testing.assert_array_equal(kernels.top_k(arranged, k), _ref_top(arranged, k))


@SETTINGS
@given(st.integers(1, 400), st.integers(0, 2**31), st.sampled_from([2, 7, 10_000]))
def test_the_buffer_cut_selects_the_kth_smallest_with_ties_and_infinities(
    n: int, seed: int, spread: int
) -> None:
    from magnetic_core._search.select_kernel import _kth_smallest

    rng = np.random.default_rng(seed)
    values = rng.integers(-spread, spread, n).astype(np.float64)
    values[rng.random(n) < 0.05] = np.inf
    values[rng.random(n) < 0.05] = -np.inf
    kth = int(rng.integers(0, n))
    for dtype in (np.float32, np.float64):
        a = values.astype(dtype)
        assert _kth_smallest(a.copy(), kth) == np.sort(a)[kth]
    # Float64 with infinities is selected by the buffer, whatever k is.
    k = int(rng.integers(1, n + 1))
    np.testing.assert_array_equal(kernels.top_k(values, k), _ref_top(values, k))


def _sorted_unique(rng: np.random.Generator, n: int, high: int) -> np.ndarray:
    return np.unique(rng.integers(0, high, n)).astype(np.int64)


@SETTINGS
@given(st.integers(0, 2**31), st.integers(0, 50), st.integers(0, 50), st.integers(1, 80))
def test_merge_unique_is_the_sorted_union(seed: int, na: int, nb: int, high: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = _sorted_unique(rng, na, high), _sorted_unique(rng, nb, high)
    np.testing.assert_array_equal(join_kernel.merge_unique(a, b), np.union1d(a, b))


@SETTINGS
@given(st.integers(0, 2**31), st.integers(0, 60), st.integers(1, 6))
def test_join_rows_takes_the_probed_cells_the_pool_lacks_like_numpy(
    seed: int, n_docs: int, n_slots: int
) -> None:
    """Documents of probed slots not in the pool join with their exact cosines, in order;
    those without a row and not pooled are handed back to be placed by id."""
    rng = np.random.default_rng(seed)
    d, n_blocks = 5, 4
    blocks, addresses, row_block, row_in_block = _blocks(rng, n_blocks, 12, d)
    block_slot = rng.integers(0, n_slots, n_blocks)
    probed = rng.random(n_slots) < 0.6
    docs = _sorted_unique(rng, n_docs, 100)
    if seed % 2:  # BM25's best come best first, not in number order
        docs = rng.permutation(docs)
    rows = np.where(
        rng.random(docs.shape[0]) < 0.8, rng.integers(0, row_block.shape[0], docs.shape[0]), -1
    )
    # a pooled cell the lexical index lacks is numbered -1; numbers past every doc's too
    have = rng.permutation(
        np.concatenate([rng.choice(docs, docs.shape[0] // 3), rng.integers(-1, 300, 5)])
    )
    q = rng.integers(-2, 3, d).astype(np.float32)
    everywhere = seed % 3 == 0  # an empty mask: every slot counts as probed
    mask = np.zeros(0, bool) if everywhere else probed
    joined, scores, loose = join_kernel.join_rows(
        docs, rows, row_block, block_slot, mask, have, addresses, row_in_block, q
    )
    fresh = ~np.isin(docs, have)
    held = rows >= 0
    slot = block_slot[row_block[np.where(held, rows, 0)]]
    want = np.flatnonzero(fresh & held & (everywhere | probed[slot]))
    np.testing.assert_array_equal(joined, want)
    exact = [blocks[row_block[r]][row_in_block[r]] @ q for r in rows[want]]
    np.testing.assert_array_equal(scores, np.array(exact, np.float32))
    np.testing.assert_array_equal(loose, np.flatnonzero(fresh & ~held))


@SETTINGS
@given(st.integers(0, 2**31), st.integers(0, 60), st.integers(1, 6))
def test_join_docs_finds_the_rows_and_joins_as_the_two_kernels_do(
    seed: int, n_docs: int, n_slots: int
) -> None:
    """Finding the numbers' rows and joining them in one call gives what ``doc_rows``
    then ``join_rows`` give: stale, dead and unrecorded numbers fall to the loose ones."""
    rng = np.random.default_rng(seed)
    d, n_blocks, n_numbers = 5, 4, 100
    blocks, addresses, row_block, row_in_block = _blocks(rng, n_blocks, 12, d)
    n_rows = row_block.shape[0]
    table = np.where(rng.random(n_numbers) < 0.7, rng.integers(0, n_rows, n_numbers), -1)
    doc_col = np.full(n_rows, -1, np.int64)
    recorded = np.flatnonzero(table >= 0)
    doc_col[table[recorded]] = recorded  # most recorded rows still name their number
    block_slot = rng.integers(0, n_slots, n_blocks)
    slot_block = rng.integers(0, n_blocks, n_slots)
    slot_block[block_slot] = np.arange(n_blocks)  # most blocks are their slot's
    stale = rng.random(n_slots) < 0.2
    alive = rng.random(n_numbers) < 0.9
    probed = rng.random(n_slots) < 0.6
    docs = rng.permutation(_sorted_unique(rng, n_docs, n_numbers))
    have = rng.choice(n_numbers, 8).astype(np.int64)
    q = rng.integers(-2, 3, d).astype(np.float32)
    table_args = (table, doc_col, row_block, block_slot, slot_block, stale, alive)
    got = join_kernel.join_docs(docs, table_args, probed, have, addresses, row_in_block, q)
    rows = kernels.doc_rows(docs, *table_args)
    want = join_kernel.join_rows(
        docs, rows, row_block, block_slot, probed, have, addresses, row_in_block, q
    )
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@SETTINGS
@given(st.integers(0, 2**31), st.integers(1, 5), st.integers(0, 30))
def test_bm25_join_is_the_pool_pass_then_the_join_of_its_best_from_any_slot(
    seed: int, n_terms: int, n_top: int
) -> None:
    """The lexical stage in one call gives what ``bm25_pool`` then ``join_docs`` (every
    slot probed) give, and leaves the scratch row zeroed."""
    from magnetic_core._text.bm25 import bm25_pool

    rng = np.random.default_rng(seed)
    d, n_blocks, n_numbers, n_slots = 5, 4, 100, 3
    blocks, addresses, row_block, row_in_block = _blocks(rng, n_blocks, 12, d)
    n_rows = row_block.shape[0]
    table = np.where(rng.random(n_numbers) < 0.8, rng.integers(0, n_rows, n_numbers), -1)
    doc_col = np.full(n_rows, -1, np.int64)
    recorded = np.flatnonzero(table >= 0)
    doc_col[table[recorded]] = recorded
    block_slot = rng.integers(0, n_slots, n_blocks)
    slot_block = np.zeros(n_slots, np.int64)
    slot_block[block_slot] = np.arange(n_blocks)
    stale = rng.random(n_slots) < 0.2
    alive = rng.random(n_numbers) < 0.9
    table_args = (table, doc_col, row_block, block_slot, slot_block, stale, alive)
    kept = random_postings(rng, n_terms, 40, n_numbers)
    acc = np.zeros(n_numbers, np.float32)
    bm25_args = kernel_args(kept, rng.uniform(0.5, 3.0, n_terms), n_numbers, acc)
    have = rng.integers(-1, n_numbers, 12)
    q = rng.integers(-2, 3, d).astype(np.float32)
    got = join_kernel.bm25_join(bm25_args, have, n_top, table_args, addresses, row_in_block, q)
    assert not acc.any()
    top, top_vals, at_pool = bm25_pool(*bm25_args, have, n_top)
    want = (top, top_vals, at_pool) + join_kernel.join_docs(
        top, table_args, np.ones(n_slots, bool), have, addresses, row_in_block, q
    )
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_code_rows_of_another_width_than_the_query_are_refused() -> None:
    """The int8 row products read as many entries as the query has: rows of another width
    are an error, not a read past each row."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal(8).astype(np.float32)
    narrow = rng.integers(-9, 9, (5, 6)).astype(np.int8)
    scales = np.ones(5, np.float32)
    with pytest.raises(ValueError, match="differ in width"):
        kernels.code_scores(narrow, scales, q)
    with pytest.raises(ValueError, match="differ in width"):
        kernels.list_scores(narrow, scales, scales, np.arange(5), q)
    sizes = np.full(5, 10, np.int64)
    start = np.array([0, 5], np.int64)
    with pytest.raises(ValueError, match="differ in width"):
        kernels.tree_groups(narrow[:1], scales[:1], start, np.arange(5), narrow, scales, q,
                            sizes, 1, 10, 4)  # fmt: skip
    wide = rng.integers(-9, 9, (5, 8)).astype(np.int8)
    np.testing.assert_allclose(  # the same rows at the query's width are scored
        kernels.code_scores(wide, scales, q), wide.astype(np.float32) @ q, rtol=1e-5
    )


_WITHOUT_VNNI = """
import sys
import numpy as np
from numba import njit
from magnetic_core._search.pointers import ROW_BATCH, code_rows, nibble_dot, nibble_rows

@njit
def int8_rows(codes, q8):
    sums = np.empty(codes.shape[0], np.int32)
    picks = np.arange(codes.shape[0])
    for t in range(0, codes.shape[0] - ROW_BATCH + 1, ROW_BATCH):
        code_rows(codes, picks, t, q8, sums, 384)
    return sums

@njit
def scan(codes, scales, q8, offset, unit, base):
    n = codes.shape[0]
    rows = np.empty(n, np.int64)
    approx = np.empty(n, np.float32)
    one = np.empty(n, np.int32)
    for r in range(0, n - ROW_BATCH + 1, ROW_BATCH):
        nibble_rows(codes, scales, r, q8, offset, unit, base, rows, approx, r)
    for r in range(n):
        one[r] = nibble_dot(codes, r, q8)
    return approx, one

args = np.load(sys.argv[1])
approx, one = scan(
    args["codes"], args["scales"], args["q8"], int(args["offset"]), np.float32(args["unit"]),
    np.float32(args["base"]),
)
sums = int8_rows(args["int8"], np.tile(args["q8"], 3))
asm = "".join(scan.inspect_asm().values()) + "".join(int8_rows.inspect_asm().values())
np.savez(sys.argv[2], approx=approx, one=one, sums=sums, vnni=np.array(asm.count("vpdpbusd")))
"""


def _scan_in_a_process(tmp_path, name: str, features: str | None) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    """Run the nibble kernels over fixed rows in a fresh process compiling for
    ``features`` (``NUMBA_CPU_FEATURES``; None: the host's), with its own kernel cache."""
    import os
    import subprocess
    import sys

    from magnetic_core._search.pointers import ROW_BATCH

    rng = np.random.default_rng(7)
    codes, q8 = _nibble_rows_and_query(rng, 3 * ROW_BATCH)
    # int8 rows of 384 with their extremes (the query: the nibble rows' repeated)
    int8 = rng.integers(-128, 128, (2 * ROW_BATCH, 384)).astype(np.int8)
    int8[0], int8[1] = 127, -128
    args = tmp_path / "args.npz"
    np.savez(
        args, codes=codes, scales=(2.0 ** rng.integers(-3, 3, codes.shape[0])).astype(np.float32),
        q8=q8, offset=8 * int(q8.astype(np.int64).sum()), unit=2.0**-12, base=0.25,
        int8=int8,
    )  # fmt: skip
    out = tmp_path / f"{name}.npz"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / f"cache-{name}"))
    if features is not None:
        env["NUMBA_CPU_FEATURES"] = features
    subprocess.run(
        [sys.executable, "-c", _WITHOUT_VNNI, str(args), str(out)], env=env, check=True,
        timeout=300,
    )  # fmt: skip
    return dict(np.load(out)) | {"codes": codes, "q8": q8, "int8": int8}


def test_the_code_products_are_the_same_with_and_without_vnni(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The host's own compile takes vpdpbusd (nibble rows and int8 rows by an int8 query)
    # where the CPU has AVX-512 VNNI; a compile for
    # the same CPU without VNNI (neither AVX-512's nor AVX's, which LLVM also finds from a
    # plain product) takes 16-bit multiply-add pairs: the same integer sums.
    from llvmlite import binding

    host = binding.get_host_cpu_features()
    has_vnni = bool(host.get("avx512vnni")) and bool(host.get("avx512bw"))
    without = ",".join(
        "-" + f[1:] if f in ("+avx512vnni", "+avxvnni") else f for f in host.flatten().split(",")
    )
    native = _scan_in_a_process(tmp_path, "native", None)
    plain = _scan_in_a_process(tmp_path, "plain", without)
    assert (int(native["vnni"]) > 0) == has_vnni
    assert int(plain["vnni"]) == 0
    want = _nibble_products(native["codes"], native["q8"])
    np.testing.assert_array_equal(native["one"], want)
    np.testing.assert_array_equal(plain["one"], want)
    np.testing.assert_array_equal(native["approx"], plain["approx"])
    int8_want = native["int8"].astype(np.int64) @ np.tile(native["q8"], 3).astype(np.int64)
    np.testing.assert_array_equal(native["sums"], int8_want)
    np.testing.assert_array_equal(plain["sums"], int8_want)


@SETTINGS
@given(st.integers(0, 2**31), st.integers(0, 60), st.integers(1, 40))
def test_row_docs_names_the_rows_to_look_up_again(seed: int, n_rows: int, n_docs: int) -> None:
    # The numbers recorded for the rows a probe found, and which of them to look up by id:
    # none recorded (-1), or a number no longer alive (removed, or past the liveness).
    rng = np.random.default_rng(seed)
    doc_col = rng.integers(-1, n_docs + 3, 80).astype(np.int64)
    alive = rng.random(n_docs) < 0.7
    rows = rng.integers(0, 80, n_rows).astype(np.int64)
    docs, again = kernels.row_docs(doc_col, alive, rows)
    np.testing.assert_array_equal(docs, doc_col[rows])
    known = (docs >= 0) & (docs < n_docs)
    live = np.zeros(n_rows, bool)
    live[known] = alive[docs[known]]
    np.testing.assert_array_equal(again, np.flatnonzero(~live))


def test_vnni_is_read_from_the_host_where_numba_has_no_feature_method() -> None:
    # The kernels ask numba's code generator which CPU features they compile for; a numba
    # without that (private) method falls back to its setting and the host's features.
    from llvmlite import binding

    from magnetic_core._search.pointers import _vnni

    class Codegen:
        pass

    class Context:
        def codegen(self) -> Codegen:
            return Codegen()

    host = binding.get_host_cpu_features()
    assert _vnni(Context()) == (bool(host.get("avx512vnni")) and bool(host.get("avx512bw")))
