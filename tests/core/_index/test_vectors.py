"""Rows come out unit length whatever their magnitude, never zero, infinite or NaN."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core._index.vectors import normalize, unit_rows


@pytest.mark.parametrize("scale", [1e-30, 1e-20, 1.0, 1e20, 1e30])
def test_rows_of_any_magnitude_become_unit_rows(scale):
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((5, 16)).astype(np.float32)
    with np.errstate(over="ignore", under="ignore"):
        scaled = (rows.astype(np.float64) * scale).astype(np.float32)
    out = normalize(scaled)
    assert out.dtype == np.float32 and np.isfinite(out).all()
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    want = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    np.testing.assert_allclose(out, want, atol=1e-5)


def test_unit_rows_matches_normalize_on_ordinary_rows():
    rows = np.array([[3.0, 4.0], [0.0, -2.0]], np.float32)
    np.testing.assert_allclose(unit_rows(rows), [[0.6, 0.8], [0.0, -1.0]], atol=1e-7)
    np.testing.assert_allclose(normalize(rows), unit_rows(rows), atol=1e-7)
