"""Search restricted to named cells: exact cosine over exactly those ids."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core._search.restricted import search_restricted

from .clustered import unit


@pytest.mark.parametrize("seed", range(5))
def test_the_best_k_of_the_named_cells_by_exact_cosine(store, seed: int):
    rng = np.random.default_rng(seed)
    among = list(rng.choice(store.ids, 40, replace=False))
    q = unit(rng)
    index = store.mem._index
    found = search_restricted(index, among + ["missing", among[0]], q, 7)
    assert [c.id for c in found] == store.exact(q, 7, among)
    for c in found:
        assert c.score == pytest.approx(float(store.vectors[store.ids.index(c.id)] @ q), abs=1e-6)
        assert c.rank_score == c.score and c.boost == 0.0 and c.stages == ("restricted",)
        assert c.group is index.loc[c.id]
        assert c.centroid_similarity == pytest.approx(
            float(index.centroids[c.group.slot] @ q), abs=1e-6
        )


def test_fewer_named_cells_than_k_give_them_all_and_nothing_gives_nothing(store):
    q = unit(np.random.default_rng(1))
    index = store.mem._index
    assert sorted(c.id for c in search_restricted(index, ["c1", "c2", "nope"], q, 10)) == [
        "c1",
        "c2",
    ]
    assert search_restricted(index, ["nope"], q, 3) == []
    assert search_restricted(index, [], q, 3) == []
    assert search_restricted(index, ["c1"], q, 0) == []


def test_ties_keep_the_order_the_ids_were_given_in(tmp_path):
    from magnetic_core import MagneticMemory
    from magnetic_core.embeddings import VectorsOnly

    e = np.eye(4, dtype=np.float32)
    with MagneticMemory(path=str(tmp_path), embedder=VectorsOnly(4)) as mem:
        mem.add(["a", "b", "c"], ids=["a", "b", "c"], vectors=np.stack([e[0], e[0], e[1]]))
        for order in (["a", "b", "c"], ["b", "a", "c"], ["c", "b", "a"]):
            found = search_restricted(mem._index, order, e[0], 3)
            assert [c.id for c in found] == [x for x in order if x != "c"] + ["c"]


def test_the_memorys_search_among_is_this_search(store):
    rng = np.random.default_rng(2)
    q = unit(rng)
    among = store.ids[::3]
    hits = store.mem.search_among(among, vector=q, k=5)
    assert [h.id for h in hits] == store.exact(q, 5, among)
    assert all(h.rank_score == h.score for h in hits)
    routed = store.mem.search(vector=q, k=5, ids=among, explain=True)
    assert all(h.route is not None and h.route.stages == ("restricted",) for h in routed)
