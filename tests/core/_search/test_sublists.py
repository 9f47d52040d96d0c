"""The scorer's building blocks against numpy references: ranges, sub-lists, basis, int8 codes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetic_core._search.sublists import principal_basis, quantize, ranges, split_lists


@settings(max_examples=60, deadline=None)
@given(spans=st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 6)), max_size=12))
def test_ranges_is_the_concatenation_of_aranges(spans):
    starts = np.array([s for s, _ in spans], np.int64)
    lengths = np.array([n for _, n in spans], np.int64)
    want = [x for s, n in spans for x in range(s, s + n)]
    got = ranges(starts, lengths)
    assert got.dtype == np.int64 and got.tolist() == want


def _unit(rng, n, dim=8):
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.mark.parametrize(("n", "size"), [(1, 32), (31, 32), (32, 32), (100, 32), (257, 16)])
def test_sub_lists_partition_the_group_and_hold_their_members_means(n: int, size: int):
    vecs = _unit(np.random.default_rng(n), n)
    lists = split_lists(vecs, size)
    assert sorted(lists.order.tolist()) == list(range(n))  # every member once
    assert int(lists.lengths.sum()) == n and (lists.lengths > 0).all()
    assert len(lists.lengths) <= max(1, -(-n // size))
    start = 0
    for length, mean in zip(lists.lengths, lists.means, strict=True):
        members = vecs[lists.order[start : start + length]]
        np.testing.assert_allclose(mean, members.mean(axis=0), atol=1e-6)
        start += length
    owner = np.repeat(np.arange(len(lists.lengths)), lists.lengths)
    np.testing.assert_allclose(
        lists.residuals(vecs), vecs[lists.order] - lists.means[owner], atol=1e-7
    )
    np.testing.assert_array_equal(lists.residuals(vecs, step=3), lists.residuals(vecs)[::3])


def test_sub_lists_are_deterministic_and_tighter_than_the_whole_group():
    rng = np.random.default_rng(0)
    centres = _unit(rng, 4)
    vecs = centres[rng.integers(0, 4, 128)] + 0.1 * rng.standard_normal((128, 8))
    vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
    a, b = split_lists(vecs, 32), split_lists(vecs, 32)
    np.testing.assert_array_equal(a.order, b.order)
    spread = float(np.linalg.norm(a.residuals(vecs), axis=1).mean())
    whole = float(np.linalg.norm(vecs - vecs.mean(axis=0), axis=1).mean())
    assert spread < 0.6 * whole


@pytest.mark.parametrize("rank", [1, 3, 8])
def test_the_principal_basis_is_the_top_eigenvectors_of_the_second_moment(rank: int):
    rng = np.random.default_rng(rank)
    sample = rng.standard_normal((200, 8)) * np.linspace(3, 0.1, 8)
    basis, energy = principal_basis(sample, rank)
    assert basis.shape == (8, rank) and basis.dtype == np.float32
    np.testing.assert_allclose(basis.T @ basis, np.eye(rank), atol=1e-5)
    values = np.linalg.svd(sample, compute_uv=False) ** 2
    assert energy == pytest.approx(values[:rank].sum() / values.sum(), rel=1e-6)
    _, _, vt = np.linalg.svd(sample, full_matrices=False)
    # the same subspace as the top right singular vectors
    np.testing.assert_allclose(np.abs(basis.T @ vt[:rank].T), np.eye(rank), atol=1e-3)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(0, 20), d=st.integers(1, 12),
       scale=st.sampled_from([1e-6, 1.0, 1e3]))  # fmt: skip
def test_int8_codes_are_within_half_a_step_of_the_rows(seed, n, d, scale):
    rows = (np.random.default_rng(seed).standard_normal((n, d)) * scale).astype(np.float32)
    if n:
        rows[0] = 0.0  # an all-zero row
    codes, steps = quantize(rows)
    assert codes.dtype == np.int8 and codes.shape == (n, d) and steps.shape == (n,)
    assert (np.abs(codes.astype(np.int64)) <= 127).all()
    err = np.abs(codes * steps[:, None] - rows)
    assert (err <= steps[:, None] / 2 + 1e-6 * np.abs(rows).max(initial=1.0)).all()
    if n:
        assert steps[0] == 0 and not codes[0].any()
        live = np.abs(rows).max(axis=1) > 0
        assert (np.abs(codes[live]).max(axis=1) == 127).all()  # the largest maps to 127
