"""The scorer's building kernels (residual codes, sub-list k-means) against numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetic_core._search import fit_kernels

SETTINGS = settings(max_examples=60, deadline=None)


@SETTINGS
@given(st.integers(1, 40), st.integers(1, 20), st.integers(1, 12), st.integers(0, 2**31))
def test_encode_matches_numpy(n: int, d: int, r: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, d)).astype(np.float32)
    basis = rng.standard_normal((d, r)).astype(np.float32)
    means = rng.standard_normal((3, d)).astype(np.float32)
    order = rng.permutation(n)
    owner = rng.integers(0, 3, n)
    codes, scales = fit_kernels.encode(vecs, order, owner, means, basis)
    residuals = (vecs[order] - means[owner]) @ basis
    ref_scales = np.abs(residuals).max(axis=1) / 7.0
    ref = np.clip(np.rint(residuals / ref_scales[:, None]), -7, 7).astype(np.int16)
    np.testing.assert_allclose(scales, ref_scales, rtol=1e-4, atol=1e-6)
    # As documented: two entries a byte plus 8, entry j low and j + h high, h = (r + 1) // 2.
    h = (r + 1) // 2
    assert codes.dtype == np.uint8 and codes.shape == (n, h)
    low, high = (codes & 15).astype(np.int16) - 8, (codes >> 4).astype(np.int16) - 8
    entries = np.concatenate([low, high], axis=1)
    assert not entries[:, r:].any()  # an odd rank's last high nibble is a zero entry
    # Rounding at a half step may go either way after a reordered sum: one step at most.
    assert np.abs(entries[:, :r] - ref).max() <= 1


def test_encode_of_a_zero_residual_is_zero() -> None:
    vecs = np.ones((2, 4), np.float32)
    codes, scales = fit_kernels.encode(
        vecs, np.arange(2), np.zeros(2, np.int64), vecs[:1], np.eye(4, 2, dtype=np.float32)
    )
    assert np.all(codes == 0x88) and not scales.any()  # entries 0, stored plus 8


def _ref_kmeans(vecs: np.ndarray, centres: np.ndarray, iters: int) -> np.ndarray:
    centres = centres.copy()
    for _ in range(iters):
        owner = (vecs.astype(np.float64) @ centres.T.astype(np.float64)).argmax(axis=1)
        for j in range(centres.shape[0]):
            total = vecs[owner == j].sum(axis=0, dtype=np.float64)
            norm = np.linalg.norm(total)
            if norm > 1e-12:
                centres[j] = total / norm
    return (vecs.astype(np.float64) @ centres.T.astype(np.float64)).argmax(axis=1)


@SETTINGS
@given(st.integers(2, 80), st.integers(1, 6), st.integers(0, 2**31))
def test_spherical_kmeans_matches_the_reference(n: int, s: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    # distinct starting centres: with s > n the same vector would seed two centres, an exact
    # tie that the kernel and the reference may break differently (both correct)
    centres = vecs[np.linspace(0, n - 1, min(s, n)).astype(np.int64)]
    got = fit_kernels.spherical_kmeans(vecs, centres, 4)
    ref = _ref_kmeans(vecs, centres, 4)
    # Random unit vectors have no exact ties; float32 vs float64 sums may flip a row
    # whose two best centres are within rounding, so allow a rare disagreement.
    assert (got != ref).mean() <= 0.05


@SETTINGS
@given(st.integers(1, 120), st.integers(1, 9), st.integers(1, 40), st.integers(0, 2**31))
def test_list_means_are_numpys_stable_order_counts_and_float64_sums(
    n: int, s: int, d: int, seed: int
) -> None:
    """The rows list by list, the lengths of the lists that have rows and their means:
    what the numpy calls it replaced gave, bit for bit (lists left empty included)."""
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, d)).astype(np.float32)
    owner = rng.integers(0, s, n)
    owner[owner == s - 1] = 0  # the last list always empty (unless s is 1)
    order, lengths, means = fit_kernels.list_means(vecs, owner, s)
    ref_order = np.argsort(owner, kind="stable")
    counts = np.bincount(owner, minlength=s)
    used = counts > 0
    starts = (np.cumsum(counts) - counts)[used]
    sums = np.add.reduceat(vecs[ref_order].astype(np.float64), starts, axis=0)
    ref_means = (sums / counts[used][:, None]).astype(np.float32)
    np.testing.assert_array_equal(order, ref_order)
    np.testing.assert_array_equal(lengths, counts[used])
    np.testing.assert_array_equal(means.view(np.uint32), ref_means.view(np.uint32))
