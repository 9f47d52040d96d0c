"""The candidates of a search: which stages found each hit, and its scores and route."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core._search.search import SearchPlan, run_search

from .clustered import RARE, unit


def _plan(q, **kw) -> SearchPlan:
    base = dict(vector=q, k=5, n_probe=1, entities=(), entity_boost=0.1, predicate=None)
    base.update(kw)
    return SearchPlan(**base)


def test_hits_of_the_probed_groups_come_from_the_centroid_stage(store):
    index, catalog = store.mem._index, store.mem._catalog
    q = unit(np.random.default_rng(0))
    found = run_search(index, catalog, _plan(q, n_probe=3))
    best = set(np.argsort(-(index.centroids @ q))[:3].tolist())
    assert found and all(c.stages == ("centroid",) and c.group.slot in best for c in found)
    for c in found:
        assert not c.fallback_ran and c.probed_groups == 3
        assert c.rank_score == pytest.approx(c.score + c.boost + c.lexical + c.context)
        assert c.centroid_similarity == pytest.approx(
            float(index.centroids[c.group.slot] @ q), abs=1e-6
        )
        assert c.group is index.loc[c.id]


def test_a_hit_only_the_flat_scan_found_says_fallback(store):
    index, catalog = store.mem._index, store.mem._catalog
    q = unit(np.random.default_rng(1))
    best = int(np.argmax(index.centroids @ q))
    others = {c for g in index.slot_groups if g.slot != best for c in g.ids}
    target = sorted(others)[0]
    plan = _plan(q, k=1, predicate=lambda meta: meta["n"] == int(target[1:]))
    (found,) = run_search(index, catalog, plan)
    assert found.id == target and found.stages == ("fallback",)
    assert found.fallback_ran and found.probed_groups == len(index.slot_groups)


def test_entity_and_lexical_stages_are_named_on_the_hits_they_found(store):
    index, catalog = store.mem._index, store.mem._catalog
    q = unit(np.random.default_rng(2))
    from magnetic_core._text.lexical import LexicalIndex

    plan = _plan(q, k=len(store.ids), entities=("ada lovelace",),
                 lexical_terms=LexicalIndex.query_terms("castles"), lexical_weight=0.3)  # fmt: skip
    found = {c.id: c for c in run_search(index, catalog, plan)}
    for i in RARE:
        c = found[f"c{i}"]
        assert "entity" in c.stages and c.boost == pytest.approx(0.1)
    castles = [c for c in found.values() if "castles" in catalog.records[c.id].text]
    assert castles and all("lexical" in c.stages and c.lexical > 0 for c in castles)
    for c in found.values():
        assert c.stages == tuple(
            s for s in ("centroid", "entity", "lexical", "fallback") if s in c.stages
        )


def test_no_groups_or_no_k_gives_no_candidates(store, tmp_path):
    from magnetic_core._index.index import HierIndex
    from magnetic_core._store.catalog import Catalog

    q = unit(np.random.default_rng(3))
    assert run_search(HierIndex(q.shape[0], 8), Catalog(), _plan(q)) == []
    assert run_search(store.mem._index, store.mem._catalog, _plan(q, k=0)) == []


def test_the_memorys_routes_are_the_candidates(store):
    q = unit(np.random.default_rng(4))
    hits = store.mem.search("Ada Lovelace", vector=q, k=6, explain=True, n_probe=2)
    for h in hits:
        assert h.route is not None and h.route.stages
        assert h.rank_score == pytest.approx(
            h.score + h.route.boost + h.route.lexical + h.route.context
        )
