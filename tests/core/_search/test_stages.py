"""The centroid, entity and lexical stages of a query: probed groups, boosts, BM25 scores."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core._search.search import SearchPlan
from magnetic_core._search.stages import Stages
from magnetic_core._text.lexical import LexicalIndex

from .clustered import RARE, unit


def _plan(q, **kw) -> SearchPlan:
    base = dict(vector=q, k=5, n_probe=2, entities=(), entity_boost=0.1, predicate=None)
    base.update(kw)
    return SearchPlan(**base)


def _probe(index, q, n: int) -> np.ndarray:
    return np.argsort(-(index.centroids @ q))[:n].astype(np.int64)


def test_without_entities_or_words_the_probe_is_the_centroid_stage(store):
    index, catalog = store.mem._index, store.mem._catalog
    q = unit(np.random.default_rng(0))
    probe = _probe(index, q, 3)
    stages = Stages.of(index, catalog, _plan(q), probe)
    assert stages.slots.tolist() == sorted(probe.tolist())
    assert stages.centroid_slots is probe and not stages.boosted and not stages.entity_slots
    assert stages.lexical is None and stages.plain(_plan(q))


def test_a_rare_entity_boosts_its_cells_and_routes_to_their_groups(store):
    index, catalog = store.mem._index, store.mem._catalog
    q = unit(np.random.default_rng(1))
    probe = _probe(index, q, 1)
    plan = _plan(q, entities=("ada lovelace",))
    stages = Stages.of(index, catalog, plan, probe)
    rare = {f"c{i}" for i in RARE}
    assert stages.boosted == rare
    assert stages.entity_slots == {index.loc[c].slot for c in rare}
    assert set(stages.slots.tolist()) == set(probe.tolist()) | stages.entity_slots
    assert list(stages.slots) == sorted(stages.slots)
    assert not stages.plain(plan)  # boosts re-rank the cosine order
    assert stages.plain(_plan(q, entities=("ada lovelace",), entity_boost=0.0))


def test_an_entity_held_by_many_cells_neither_boosts_nor_routes(store):
    index, catalog = store.mem._index, store.mem._catalog
    q = unit(np.random.default_rng(2))
    common = max(catalog.entity_cells, key=lambda e: len(catalog.entity_cells[e]))
    assert len(catalog.entity_cells[common]) > 10  # above max(10, 5% of 160)
    stages = Stages.of(index, catalog, _plan(q, entities=(common, "unknown")), _probe(index, q, 1))
    assert not stages.boosted and not stages.entity_slots


def test_a_larger_share_lets_a_common_entity_boost(store):
    index, catalog = store.mem._index, store.mem._catalog
    q = unit(np.random.default_rng(3))
    common = max(catalog.entity_cells, key=lambda e: len(catalog.entity_cells[e]))
    plan = _plan(q, entities=(common,), max_entity_share=0.5, max_route_cells=1)
    stages = Stages.of(index, catalog, plan, _probe(index, q, 1))
    assert stages.boosted == catalog.entity_cells[common]
    assert not stages.entity_slots  # more cells than the route limit: boosted, not routed


def test_the_lexical_stage_scores_the_bm25_of_the_query_words(store):
    catalog = store.mem._catalog
    q = unit(np.random.default_rng(4))
    terms = LexicalIndex.query_terms("bakeries and castles")
    plan = _plan(q, lexical_terms=terms, lexical_weight=0.3)
    stages = Stages.of(store.mem._index, catalog, plan, _probe(store.mem._index, q, 1))
    found = stages.lexical
    assert found is not None
    docs, vals = found
    want_docs, want_vals = catalog.lexical.scores(terms)
    np.testing.assert_array_equal(docs, want_docs)
    np.testing.assert_array_equal(vals, want_vals)
    assert (vals > 0).all() and docs.size > 0
    assert stages.lexical_best == float(want_vals.max())
    assert not stages.plain(_plan(q, lexical_terms=terms))


@pytest.mark.parametrize(
    ("terms", "weight"), [((), 0.3), (("bakeri",), 0.0), (("zzzunknown",), 0.3)]
)
def test_the_lexical_stage_is_off_without_words_weight_or_matches(store, terms, weight):
    q = unit(np.random.default_rng(5))
    plan = _plan(q, lexical_terms=terms, lexical_weight=weight)
    stages = Stages.of(store.mem._index, store.mem._catalog, plan, _probe(store.mem._index, q, 1))
    assert stages.lexical is None and stages.lexical_terms == ()


def test_an_exclusion_makes_the_ranking_not_plain(store):
    q = unit(np.random.default_rng(6))
    stages = Stages.of(
        store.mem._index, store.mem._catalog, _plan(q), _probe(store.mem._index, q, 1)
    )
    assert not stages.plain(_plan(q, exclude=frozenset({"c1"})))


def test_boosted_cells_and_their_numbers_are_the_union_of_the_boosting_entities(store):
    index, catalog = store.mem._index, store.mem._catalog
    q = unit(np.random.default_rng(7))
    names = sorted(catalog.entity_cells, key=lambda e: len(catalog.entity_cells[e]))[:3]
    plan = _plan(q, entities=tuple(names), max_entity_share=0.5)
    stages = Stages.of(index, catalog, plan, _probe(index, q, 1))
    want = set().union(*(catalog.entity_cells[e] for e in names))
    assert stages.boosted == want
    docs = stages.boosted_docs(catalog)
    np.testing.assert_array_equal(docs, np.sort(catalog.lexical.numbers(sorted(want))))
