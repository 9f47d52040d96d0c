"""run_search below the scorer's size: one compiled pass, exact, in step with writes."""

from __future__ import annotations

import numpy as np

from magnetic_core._index.index import HierIndex
from magnetic_core._search.search import SearchPlan, probe_budget, run_search
from magnetic_core._store.catalog import Catalog
from magnetic_core.eval import clustered_data, exact_knn

N = 2500


def _plan(q: np.ndarray, k: int = 10) -> SearchPlan:
    return SearchPlan(
        vector=q, k=k, n_probe=8, entities=(), entity_boost=0.0, predicate=None, min_cells=None
    )


def test_a_small_store_is_searched_exactly_and_follows_its_writes() -> None:
    vecs, _ = clustered_data(N + 20, 48, 60, spread=0.8, decay=1.5, seed=5)
    base, queries = vecs[20:], vecs[:20]
    index = HierIndex(48, 64)
    index.assign([f"c{i}" for i in range(N)], base, 0.7)
    assert len(index.slot_groups) > 8  # the default budget, not n_probe, covers them all
    truth, scores = exact_knn(base, queries, 10)
    for q, want, want_scores in zip(queries, truth, scores, strict=True):
        got = run_search(index, Catalog(), _plan(q))
        assert [c.id for c in got] == [f"c{i}" for i in want]
        np.testing.assert_allclose([c.score for c in got], want_scores, atol=1e-6)
    # A removed best match is gone; a new cell equal to the query comes first.
    q = queries[0]
    best = run_search(index, Catalog(), _plan(q))[0].id
    index.remove(best)
    assert best not in {c.id for c in run_search(index, Catalog(), _plan(q))}
    index.assign(["new"], q[None, :].copy(), 0.7)
    top = run_search(index, Catalog(), _plan(q))[0]
    assert top.id == "new" and abs(top.score - 1.0) < 1e-6


def test_the_default_budget_grows_with_the_store_then_stays_flat() -> None:
    sizes = [1_000, 10_000, 25_000, 40_000, 100_000, 1_000_000]
    budgets = [probe_budget(n) for n in sizes]
    assert budgets == sorted(budgets)
    assert budgets[0] >= 1_000  # small stores are scanned whole
    assert budgets[-2] == budgets[-1]  # flat past 100K cells
