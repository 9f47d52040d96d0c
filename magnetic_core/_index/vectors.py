"""Unit-length rows: the one home of vector normalisation (ingest, queries, embedders).

Every vector the memory stores or searches with goes through :func:`normalize`; cosine
similarity is then a dot product everywhere downstream.
"""

from __future__ import annotations

import numpy as np

__all__ = ["normalize", "unit_rows"]


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float32). Rows must be non-zero (validated upstream).

    A row whose float32 norm over- or underflows (entries past about 1e19 or below 1e-19)
    is rescaled by :func:`unit_rows` instead, so no row comes out zero, infinite or NaN.
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    with np.errstate(over="ignore", under="ignore"):
        norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    out = vectors / np.maximum(norms, np.float32(1e-12))
    bad = ~np.isfinite(norms) | (norms < 1e-18)
    if bad.any():
        rows = np.broadcast_to(bad, out.shape)
        out = np.where(rows, unit_rows(np.where(rows, vectors, 1.0)), out)
    return out


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Non-zero rows scaled to unit length as float32, safe for any finite magnitude.

    Each row is divided by its largest absolute entry before its norm is taken (in
    float64), so squaring neither overflows (1e30 in float32) nor underflows (1e-30).
    """
    arr = np.asarray(vectors, dtype=np.float64)
    arr = arr / np.abs(arr).max(axis=-1, keepdims=True)
    arr /= np.linalg.norm(arr, axis=-1, keepdims=True)
    return arr.astype(np.float32)
