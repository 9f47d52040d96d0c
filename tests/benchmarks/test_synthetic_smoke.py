"""The structured synthetic set: its fit, its draws, and the comparison script end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("faiss")

from benchmarks import synthetic  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    # Smoke runs never read or write the real embedding cache.
    monkeypatch.setenv("MAGNETIC_BENCH_CACHE", str(tmp_path / "cache"))


def _with_duplicates(n_plain: int, n_dups: int, cosine: float, seed: int) -> np.ndarray:
    """Topics (20 means, isotropic noise: nearest neighbours at cosine 0.5-0.7) plus
    ``n_dups`` near-copies of random rows at ``cosine``, all unit rows."""
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((20, synthetic.DIM))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    plain = means[rng.integers(20, size=n_plain)] + 0.05 * rng.standard_normal(
        (n_plain, synthetic.DIM)
    )
    plain /= np.linalg.norm(plain, axis=1, keepdims=True)
    parents = plain[rng.integers(n_plain, size=n_dups)]
    noise = rng.standard_normal(parents.shape)
    noise -= np.sum(noise * parents, axis=1, keepdims=True) * parents
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    dups = cosine * parents + np.sqrt(1 - cosine**2) * noise
    return np.concatenate([plain, dups]).astype(np.float32)


def _near_share(x: np.ndarray, base: np.ndarray | None = None, above: float = 0.95) -> float:
    """Share of rows of ``x`` whose nearest other row (of ``base``, else of ``x``) is above."""
    if base is None:
        return float(np.mean(synthetic.nn_cosines(x, sample=len(x)) > above))
    return float(np.mean((x @ base.T).max(axis=1) > above))


def test_near_duplicates_are_fitted_and_drawn_like_the_source():
    source = _with_duplicates(1600, 400, 0.97, seed=1)
    model = synthetic.fit_mixture(source, per_component=40, rank=4, tau=1.0)
    # 400 copies of 400 random rows: about 700 of 2000 rows have a near-duplicate.
    assert 0.15 < model.query_share < 0.6
    assert 0.9 < float(np.median(model.dup_cosines)) < 0.995
    drawn = model.sample(2000, seed=3, tau=1.0)
    assert drawn.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(drawn, axis=1), 1.0, atol=1e-5)
    assert abs(_near_share(drawn) - _near_share(source)) < 0.15  # 0.37 in the source
    # Generated, not copied: no drawn row is a source row.
    assert float((drawn @ source.T).max()) < 0.9999


def test_draws_are_reproducible_and_queries_near_duplicate_the_base():
    source = _with_duplicates(1600, 400, 0.97, seed=2)
    model = synthetic.fit_mixture(source, per_component=40, rank=4, tau=1.0)
    base = model.sample(1500, seed=0, tau=1.0)
    np.testing.assert_array_equal(base, model.sample(1500, seed=0, tau=1.0))
    q = model.sample_queries(400, seed=9, tau=1.0, base=base)
    alone = model.sample_queries(400, seed=9, tau=1.0, base=None)
    expected = model.query_share * float(np.mean(model.dup_cosines > 0.95))
    assert abs(_near_share(q, base) - expected) < 0.08
    assert _near_share(alone, base) < 0.05


def test_mixture_round_trips_through_its_file(tmp_path):
    source = _with_duplicates(800, 200, 0.97, seed=4)
    model = synthetic.fit_mixture(source, per_component=40, rank=4, tau=1.0)
    model.save(tmp_path / "m.npz")
    again = synthetic.Mixture.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(model.sample(300, 5, 1.2), again.sample(300, 5, 1.2))


def test_synthetic_comparison_smoke(tmp_path):
    synthetic.main(["--smoke", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "synthetic.json").read_text())
    for side in ("real", "synthetic"):
        curve = result[side]["faiss_recall_by_nprobe"]
        assert all(0.0 <= r <= 1.0 for r in curve.values())
        assert result[side]["engine"]["recall_by_probe_cells"]
    assert 0.0 <= result["max_faiss_gap"] <= 1.0
    assert result["max_faiss_gap_standard_error"] >= 0.0
    assert result["max_engine_gap_standard_error"] >= 0.0
    assert "standard errors" in (tmp_path / "synthetic.md").read_text()
    assert (tmp_path / "synthetic.md").read_text().startswith("# ")


def test_recall_standard_error_and_largest_gap():
    truth = np.tile(np.linspace(1.0, 0.1, 10), (4, 1))
    perfect = [list(row) for row in truth]
    assert synthetic._recall(perfect, truth) == (1.0, 0.0)
    # Two queries all found, two none: mean 0.5, per-query spread 0.577 over sqrt(4).
    half = perfect[:2] + [[0.0] * 10] * 2
    assert synthetic._recall(half, truth) == (0.5, round(0.57735 / 2, 4))
    real = ({1: 0.90, 2: 0.95}, {1: 0.003, 2: 0.004})
    syn = ({1: 0.91, 2: 0.92}, {1: 0.002, 2: 0.003})
    assert synthetic._largest_gap(real, syn) == (pytest.approx(0.03), 0.005)


def _with_family(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Topics with near-duplicates, plus a family of 150 template passages (each at cosine
    about 0.9 to one template row); returns the rows and the template."""
    rng = np.random.default_rng(seed)
    rows = _with_duplicates(1600, 200, 0.97, seed=seed)
    template = rng.standard_normal(synthetic.DIM)
    template /= np.linalg.norm(template)
    noise = rng.standard_normal((150, synthetic.DIM))
    noise -= np.outer(noise @ template, template)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    family = 0.9 * template + np.sqrt(1 - 0.9**2) * noise
    return np.concatenate([rows, family]).astype(np.float32), template


def test_clumps_are_fitted_to_template_families_and_drawn_around_their_centres():
    source, template = _with_family(seed=6)
    centres, weights, cosines = synthetic.fit_clumps(source, neighbours=16)
    assert len(centres) >= 1
    family = centres @ template > 0.97  # the family's mean direction (maybe cut in parts)
    assert family.any() and float((centres[~family] @ template).max(initial=0.0)) < 0.5
    assert float(weights[family].sum()) == pytest.approx(150 / len(source), rel=0.1)
    assert float((centres @ source.T).max()) < 0.9999  # means, not copied rows
    model = synthetic.fit_structured(source, synthetic.fit_mixture(source, 40, 4, tau=1.0))
    drawn = model.sample(4000, seed=1, tau=1.0)
    np.testing.assert_allclose(np.linalg.norm(drawn, axis=1), 1.0, atol=1e-5)
    near = drawn @ template > 0.8
    # The family's share of draws is its share of the source (150 of 1,950 rows).
    assert abs(float(near.mean()) - 150 / len(source)) < 0.03
    assert float((drawn @ source.T).max()) < 0.9999  # generated, not copied
    # A source without dense rows has no clumps, and the model draws topics alone.
    spread = _with_duplicates(400, 0, 0.97, seed=7)
    assert len(synthetic.fit_clumps(spread, neighbours=16)[0]) == 0


def test_regions_spread_draws_towards_neighbouring_topics_and_the_floor_lifts_the_spread():
    source = _with_duplicates(1600, 0, 0.97, seed=8)
    topics = synthetic.fit_mixture(source, per_component=40, rank=4, tau=1.0)
    wide = synthetic.with_regions(topics, k=4, beta=2.0)
    assert wide.bases.shape[1] == topics.bases.shape[1] + 4
    unit = topics.means / np.linalg.norm(topics.means, axis=1, keepdims=True)
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    c = int(np.argmax(topics.weights))
    towards = topics.means[int(np.argmax(sims[c]))] - topics.means[c]
    towards /= np.linalg.norm(towards)
    labels = np.full(3000, c)
    rng = np.random.default_rng(0)
    spread = [float(np.std(m._topics(labels, rng, 1.0) @ towards)) for m in (topics, wide)]
    assert spread[1] > 1.5 * spread[0]  # draws reach towards the nearest topic
    floored = synthetic.floor_spread(topics, 0.05)
    assert floored.spread.min() == pytest.approx(float(np.quantile(topics.spread, 0.05)))
    assert (floored.spread >= topics.spread).all()


def test_the_structured_model_round_trips_through_its_file(tmp_path):
    source, _ = _with_family(seed=9)
    model = synthetic.fit_structured(source, synthetic.fit_mixture(source, 40, 4, tau=1.0))
    model.save(tmp_path / "s.npz")
    again = synthetic.Structured.load(tmp_path / "s.npz")
    np.testing.assert_array_equal(model.sample(500, 2, 0.9), again.sample(500, 2, 0.9))
    base = model.sample(500, 3, 0.9)
    np.testing.assert_array_equal(
        model.sample_queries(50, 4, 0.9, base), again.sample_queries(50, 4, 0.9, base)
    )
