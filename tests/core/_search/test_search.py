"""run_search below the scorer's size: one compiled pass, exact, in step with writes."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from magnetic_core._index.index import HierIndex
from magnetic_core._search.search import SearchPlan, probe_budget, run_search
from magnetic_core._store.catalog import Catalog
from magnetic_core.eval import clustered_data, exact_knn

from .plans import coded_plan

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


def test_a_store_its_budget_mostly_covers_is_searched_exactly_without_the_scorer() -> None:
    """Past the scorer's size but under ``PROBE_FLOOR / EXACT_SHARE`` cells, searches score
    exactly (the scorer builds nothing, so writes leave nothing to re-code), and the probe
    keeps its best ``rerank`` cells by cosine before the other stages: the exact top k."""
    from magnetic_core._search.scorer import MIN_CELLS, Scorer
    from magnetic_core._search.search import EXACT_SHARE, PROBE_FLOOR

    n = 5000
    assert MIN_CELLS < n < PROBE_FLOOR / EXACT_SHARE
    vecs, _ = clustered_data(n + 20, 48, 80, spread=0.8, decay=1.5, seed=9)
    base, queries = vecs[20:], vecs[:20]
    index = HierIndex(48, 64)
    index.assign([f"c{i}" for i in range(n)], base, 0.7)
    scorer = Scorer(16, 32)
    truth, scores = exact_knn(base, queries, 10)

    def coded(q: np.ndarray) -> SearchPlan:
        return dataclasses.replace(_plan(q), sketch_rank=16, rerank=64)

    for q, want, want_scores in zip(queries, truth, scores, strict=True):
        got = run_search(index, Catalog(), coded(q), scorer)
        assert [c.id for c in got] == [f"c{i}" for i in want]
        np.testing.assert_allclose([c.score for c in got], want_scores, atol=1e-6)
    assert not scorer.current(index) and scorer._basis is None  # nothing built or coded
    # Grown past the line, the store is scored by code again (the scorer is built).
    more, _ = clustered_data(2000, 48, 80, spread=0.8, decay=1.5, seed=10)
    index.assign([f"m{i}" for i in range(2000)], more, 0.7)
    run_search(index, Catalog(), coded(queries[0]), scorer)
    assert scorer.current(index) and scorer._basis is not None


def test_an_exact_probe_keeps_the_lexical_and_boosted_cells_it_fuses() -> None:
    """The exact probe of a large store keeps only its best cells by cosine, and still
    ranks cells found by words and entities as a full pool would."""
    from magnetic_core._store.record import CellRecord

    n = 5000
    vecs, _ = clustered_data(n + 1, 48, 80, spread=0.8, decay=1.5, seed=11)
    base, q = vecs[1:], vecs[0]
    index = HierIndex(48, 64)
    ids = [f"c{i}" for i in range(n)]
    index.assign(ids, base, 0.7)
    catalog = Catalog()
    far = ids[int(np.argsort(base @ q)[n // 2])]  # a middling cosine: never in the best few
    for i, cid in enumerate(ids):
        text = "zebra quagga stripes" if cid == far else f"note {i} about nothing"
        catalog.put(cid, CellRecord(text, {}, ("Quagga",) if cid == far else (), 0.0, 0.0))
    plan = SearchPlan(
        vector=q,
        k=10,
        n_probe=8,
        entities=("Quagga",),
        entity_boost=0.5,
        predicate=None,
        min_cells=n,  # every group probed
        lexical_terms=catalog.lexical.query_terms("zebra quagga"),
        lexical_weight=0.5,
    )
    got = run_search(index, catalog, plan)
    assert got[0].id == far and got[0].boost == 0.5 and got[0].lexical > 0
    np.testing.assert_allclose(got[0].score, float(index.vector(far) @ q), atol=1e-6)
    rest = [c.id for c in got[1:]]
    assert rest == [ids[i] for i in np.argsort(-(base @ q), kind="stable")[:9]]


def test_a_coded_probe_fuses_a_cells_words_as_they_are_after_its_text_is_rewritten() -> None:
    """The coded probe names its cells by BM25 document number, kept in the scorer: a cell
    whose text is written again (same vector, so its group and codes stay) gets a new
    number, and the next search scores its new words, not the old document's."""
    from magnetic_core._search.scorer import Scorer
    from magnetic_core._store.record import CellRecord

    n = 8000
    vecs, _ = clustered_data(n, 64, 40, spread=0.8, decay=1.5, seed=5)
    index = HierIndex(64, 256)
    ids = [f"c{i}" for i in range(n)]
    index.assign(ids, vecs, 0.6)
    catalog = Catalog()
    target, other = ids[10], ids[4000]
    for i, cid in enumerate(ids):
        text = "zebra stripes" if cid == other else f"note {i} about nothing"
        catalog.put(cid, CellRecord(text, {}, (), 0.0, 0.0))
    q = index.vector(target)
    plan = _text_plan(q, catalog, "zebra")
    scorer = Scorer(16, 32)
    before = {c.id: c for c in run_search(index, catalog, plan, scorer)}
    assert scorer.current(index) and scorer.usable  # the coded path ran
    assert before[target].lexical == 0.0
    catalog.put(target, CellRecord("zebra zebra zebra", {}, (), 0.0, 0.0))
    after = run_search(index, catalog, plan, scorer)
    assert after[0].id == target and after[0].lexical > 0.0
    np.testing.assert_allclose(after[0].score, 1.0, atol=1e-5)
    # Its BM25 is the best of the query's (the other cell's two-word text scores lower).
    assert after[0].lexical == pytest.approx(0.5)


def _text_plan(vector: np.ndarray, catalog: Catalog, words: str) -> SearchPlan:
    """A text query over the test stores: k 10, four groups probed, 1,200 cells scored by
    code, the best 64 exactly, ``words`` at lexical weight 0.5, no entity."""
    return dataclasses.replace(
        coded_plan(vector),
        lexical_terms=catalog.lexical.query_terms(words),
        lexical_weight=0.5,
    )


def _worded_store(queries: int, seed: int) -> tuple[np.ndarray, HierIndex, Catalog]:
    """8,000 clustered cells past the scorer's size, every seventh with two animal words,
    every 37th naming "Quagga" (under 5% of the cells: it boosts); ``vecs[:queries]`` are
    left out of the store, as queries."""
    from magnetic_core._store.record import CellRecord

    n = 8000
    vecs, _ = clustered_data(n + queries, 64, 40, spread=0.8, decay=1.5, seed=seed)
    index = HierIndex(64, 256)
    ids = [f"c{i}" for i in range(n)]
    index.assign(ids, vecs[queries:], 0.6)
    catalog = Catalog()
    rng = np.random.default_rng(seed)
    words = ["zebra", "stripes", "quagga", "savanna", "herd", "plain"]
    for i, cid in enumerate(ids):
        text = " ".join(rng.choice(words, 2)) if i % 7 == 0 else f"note {i}"
        entity = ("Quagga",) if i % 37 == 0 else ()
        catalog.put(cid, CellRecord(text, {}, entity, 0.0, 0.0))
    return vecs, index, catalog


def _joined_only(monkeypatch) -> None:
    """Text queries' pending pools joined by ``Scorer.lexical_join``, then settled and ranked
    apart (the steps that ``Scorer.lexical_settle`` takes in one pass)."""
    from magnetic_core._search.scorer import Scorer

    def joined_only(self, lexical, args, have, n_top, q, *rest):
        return self.lexical_join(lexical, args, have, n_top, q), None

    monkeypatch.setattr(Scorer, "lexical_settle", joined_only)


def test_a_coded_probe_ranks_words_and_entities_as_the_numpy_fusion_does(monkeypatch) -> None:
    """The compiled fusion of a coded probe's pool (its BM25 from the same pass as the
    query's best matches, joined, settled and ranked in that pass) gives the hits, terms
    and order of the steps apart and of the numpy fusion."""
    from magnetic_core._search import fusion
    from magnetic_core._search.scorer import Scorer

    vecs, index, catalog = _worded_store(queries=1, seed=6)
    plan = SearchPlan(
        vector=vecs[0],
        k=40,
        n_probe=4,
        entities=("Quagga",),
        entity_boost=0.5,
        predicate=None,
        sketch_rank=16,
        rerank=64,
        min_cells=1200,
        lexical_terms=catalog.lexical.query_terms("zebra herd"),
        lexical_weight=0.3,
    )
    scorer = Scorer(16, 32)
    one_pass = []
    lexical_settle = Scorer.lexical_settle

    def watched(self, *args):
        got = lexical_settle(self, *args)
        one_pass.append(got[1][4] >= 0)
        return got

    monkeypatch.setattr(Scorer, "lexical_settle", watched)
    compiled = run_search(index, catalog, plan, scorer)
    assert scorer.current(index) and scorer.usable  # the coded path ran
    assert one_pass == [True]  # joined, settled and ranked in one pass
    _joined_only(monkeypatch)
    apart = run_search(index, catalog, plan, scorer)
    monkeypatch.setattr(fusion, "_compiled", lambda *args: False)
    plain = run_search(index, catalog, plan, scorer)
    assert any(c.boost > 0 for c in compiled) and any(c.lexical > 0 for c in compiled)
    for other in (apart, plain):
        assert [c.id for c in compiled] == [c.id for c in other]
        for a, b in zip(compiled, other, strict=True):
            assert (a.score, a.boost, a.lexical, a.rank_score) == (b.score, b.boost, b.lexical,
                                                                   b.rank_score)  # fmt: skip


def test_a_text_query_scores_its_coded_cells_only_as_far_as_they_can_reach_the_best_k(
    monkeypatch,
) -> None:
    """A text query's coded cells wait in the pool with their approximate cosines until
    the entity and lexical stages have joined (its best BM25 matches join so too); then
    they are scored best first by approximation plus terms, and those out of reach are
    never read. The hits are those of scoring every coded cell."""
    from magnetic_core._search import scorer as scorer_module
    from magnetic_core._search.scorer import Scorer

    vecs, index, catalog = _worded_store(queries=30, seed=7)
    read: list[int] = []
    settled_top, lexical_settle = Scorer.settled_top, Scorer.lexical_settle

    def counted(self, *args):
        got = settled_top(self, *args)
        read.append(got[-1])
        return got

    def counted_with_words(self, *args):
        got = lexical_settle(self, *args)
        if got[1][4] >= 0:
            read.append(got[1][4])
        return got

    monkeypatch.setattr(Scorer, "settled_top", counted)
    monkeypatch.setattr(Scorer, "lexical_settle", counted_with_words)
    scorer = Scorer(48, 32)  # codes close enough to stop early on this data
    runs: list[list[list[tuple[str, float, float]]]] = []
    for sds in (scorer_module.RERANK_SDS, float("inf")):
        monkeypatch.setattr(scorer_module, "RERANK_SDS", sds)
        found = []
        for j in range(30):
            plan = SearchPlan(
                vector=vecs[j],
                k=10,
                n_probe=4,
                entities=("Quagga",) if j % 2 else (),
                entity_boost=0.1,
                predicate=None,
                sketch_rank=48,
                rerank=64,
                min_cells=1200,
                lexical_terms=catalog.lexical.query_terms("zebra herd" if j % 3 else "plain"),
                lexical_weight=0.3,
            )
            found.append(
                [(c.id, c.score, c.rank_score) for c in run_search(index, catalog, plan, scorer)]
            )
        runs.append(found)
    # With no bound, every coded cell is read, and every best BM25 match that joined with
    # its code; with the bound many were out of reach.
    assert len(read) == 60 and all(r >= 64 for r in read[30:])
    assert sum(read[:30]) < 0.75 * sum(read[30:])
    assert runs[0] == runs[1]  # and the hits are the same


def test_a_text_query_whose_best_words_lie_in_changed_groups_ranks_as_the_steps_apart(
    monkeypatch,
) -> None:
    """Best BM25 matches in groups changed since they were coded have no row to be read
    from: the lexical stage's one pass then hands the pool back, and the hits are those of
    joining (those matches by id), settling and ranking apart."""
    from magnetic_core._search.scorer import Scorer
    from magnetic_core._store.record import CellRecord

    vecs, index, catalog = _worded_store(queries=20, seed=8)
    plans = [_text_plan(vecs[j], catalog, "quagga savanna") for j in range(20)]
    scorers = [Scorer(16, 32), Scorer(16, 32)]
    for scorer in scorers:
        run_search(index, catalog, plans[0], scorer)  # coded before the writes
    # Cells with the query's words join most groups: more than a search codes again.
    more, _ = clustered_data(1500, 64, 40, spread=0.8, decay=1.5, seed=8)
    new_ids = [f"n{i}" for i in range(1500)]
    index.assign(new_ids, more[:1500], 0.6)
    for cid in new_ids:
        catalog.put(cid, CellRecord("quagga savanna quagga", {}, (), 0.0, 0.0))
    handed_back = []
    lexical_settle = Scorer.lexical_settle

    def watched(self, *args):
        got = lexical_settle(self, *args)
        handed_back.append(got[1][4] < 0)
        return got

    monkeypatch.setattr(Scorer, "lexical_settle", watched)
    runs = []
    for scorer in scorers:
        runs.append(
            [
                [(c.id, c.score, c.rank_score) for c in run_search(index, catalog, plan, scorer)]
                for plan in plans
            ]
        )
        _joined_only(monkeypatch)  # the second scorer takes the steps apart
    assert len(handed_back) == 20 and any(handed_back)
    assert any(cid.startswith("n") for hits in runs[0] for cid, _, _ in hits)
    assert runs[0] == runs[1]


@pytest.mark.parametrize("via", ["table", "arrays"])
def test_a_text_query_in_one_call_ranks_as_the_staged_search(
    monkeypatch, via: str, helper_mode: str
) -> None:
    """``text_search`` (the entity stage, then the centroid stage to the ranking in one
    compiled call) gives the ids, groups, cosines and ranking scores of ``run_search``:
    with and without an entity that routes and boosts (by a positive, a negative or no
    boost), whatever the query's words. It leaves to the staged search what it cannot
    answer: a filter, a route asked for, words no cell holds, and probed groups changed
    since they were coded. The same whether the scorer's arrays reach the call as one
    table of addresses or as arrays (when one is not of the type the table holds), and
    whether the call runs on the calling thread or the helper's second core."""
    from magnetic_core._search import fusion_kernel, helper_kernels
    from magnetic_core._search import scorer as scorer_module
    from magnetic_core._search.scorer import Scorer
    from magnetic_core._search.search import text_search
    from magnetic_core._search.static_args import StaticArgs
    from magnetic_core._store.record import CellRecord

    calls = {"table": 0, "arrays": 0}
    for name, kernel, held in (
        ("table", fusion_kernel.text_top_at, "_TEXT_TOP_AT"),
        ("arrays", fusion_kernel.text_top, "_TEXT_TOP"),
    ):

        def counted(*args, _kernel=kernel, _name=name):  # type: ignore[no-untyped-def]
            calls[_name] += 1
            return _kernel(*args)

        monkeypatch.setattr(scorer_module, held, counted)
    for name, beside in (("table", "text_top_at_beside"), ("arrays", "text_top_beside")):

        @functools.wraps(getattr(helper_kernels, beside))
        def counted_beside(*args, _kernel=getattr(helper_kernels, beside), _name=name):  # type: ignore[no-untyped-def]
            calls[_name] += 1
            return _kernel(*args)

        monkeypatch.setattr(helper_kernels, beside, counted_beside)
    if via == "arrays":
        monkeypatch.setattr(StaticArgs, "table", lambda self, arrays: None)

    vecs, index, catalog = _worded_store(queries=30, seed=9)
    scorer = Scorer(16, 32)
    words = ("zebra herd", "quagga savanna stripes", "plain")

    def plan_of(j: int) -> SearchPlan:
        return dataclasses.replace(
            _text_plan(vecs[j], catalog, words[j % 3]),
            routes=False,
            entities=("Quagga",) if j % 2 else (),
            entity_boost=(0.1, -0.1, 0.0)[j % 3],
        )

    def same(plan: SearchPlan) -> bool:
        staged = run_search(index, catalog, plan, scorer)
        one = text_search(index, catalog, plan, scorer)
        if one is None:
            return False
        ids, groups, scores, ranked = one
        assert ids == [c.id for c in staged]
        assert all(g is c.group for g, c in zip(groups, staged, strict=True))
        assert scores == [c.score for c in staged]
        assert ranked == [c.rank_score for c in staged]
        return True

    assert all(same(plan_of(j)) for j in range(30))
    routed = plan_of(3)  # Quagga, boost 0.1
    # The entity routes the query to groups the centroid stage did not probe, and boosts.
    explained = run_search(index, catalog, dataclasses.replace(routed, routes=True), scorer)
    unnamed = dataclasses.replace(routed, routes=True, entities=())
    assert explained[0].probed_groups > run_search(index, catalog, unnamed, scorer)[0].probed_groups
    assert any(c.boost > 0 for c in explained)
    for other in (
        dataclasses.replace(routed, predicate=lambda meta: True),
        dataclasses.replace(routed, routes=True),
        dataclasses.replace(routed, lexical_terms=("unheardof",)),
        dataclasses.replace(routed, lexical_weight=0.0),
    ):
        assert text_search(index, catalog, other, scorer) is None
    # Groups changed since they were coded: the staged search scores them exactly.
    more, _ = clustered_data(3000, 64, 40, spread=0.8, decay=1.5, seed=9)
    new_ids = [f"n{i}" for i in range(3000)]
    index.assign(new_ids, more, 0.6)
    for cid in new_ids:
        catalog.put(cid, CellRecord("quagga herd", {}, ("Quagga",), 0.0, 0.0))
    assert text_search(index, catalog, routed, scorer) is None
    hits = run_search(index, catalog, routed, scorer)
    assert any(c.id.startswith("n") for c in hits)
    # Once every group is coded again, one call answers again, as the stages rank.
    while not scorer.is_settled(index):
        run_search(index, catalog, routed, scorer)
    assert all(same(plan_of(j)) for j in range(30))
    assert calls[via] >= 60 and calls["arrays" if via == "table" else "table"] == 0
