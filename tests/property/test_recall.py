"""Recall of default settings against exact search on seeded clustered data."""

from __future__ import annotations

import numpy as np

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_core.eval import clustered_data, exact_knn, recall_at_k


def test_recall_at_10_is_at_least_095_with_default_settings(tmp_path):
    vecs, _ = clustered_data(6000, 48, 60, spread=0.8, seed=13)
    queries, _ = clustered_data(200, 48, 60, spread=0.8, seed=14)
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder(48)) as mem:
        mem.add(
            [f"v{i}" for i in range(len(vecs))],
            vectors=vecs,
            ids=[str(i) for i in range(len(vecs))],
        )
        stats = mem.stats()
        assert stats.groups > mem.config.n_probe  # the centroid stage really prunes
        found = [[int(h.id) for h in mem.search(vector=q, k=10)] for q in queries]
        fallback_free = [
            not h.route.fallback_ran for h in mem.search(vector=queries[0], k=10, explain=True)
        ]
    truth, _ = exact_knn(vecs, queries, 10)
    assert recall_at_k(found, truth, 10) >= 0.95
    assert all(fallback_free)


def test_searching_with_every_group_probed_is_exact(tmp_path):
    vecs, _ = clustered_data(1500, 32, 20, seed=15)
    queries, _ = clustered_data(50, 32, 20, seed=16)
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder(32)) as mem:
        mem.add(
            [f"v{i}" for i in range(len(vecs))],
            vectors=vecs,
            ids=[str(i) for i in range(len(vecs))],
        )
        found = [[int(h.id) for h in mem.search(vector=q, k=10, n_probe=10**6)] for q in queries]
    truth, _ = exact_knn(vecs, queries, 10)
    assert np.array_equal(np.array(found), truth)
