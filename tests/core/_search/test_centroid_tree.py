"""The tree over the centroids of large stores: fitting, keeping it in step, and its use."""

from __future__ import annotations

import math

import numpy as np
import pytest

from magnetic_core._index.index import HierIndex
from magnetic_core._search import centroid_tree
from magnetic_core._search import scorer as scorer_module
from magnetic_core._search.centroid_tree import CentroidTree, kept_tree
from magnetic_core._search.scorer import Scorer
from magnetic_core._search.search import SearchPlan, run_search
from magnetic_core._search.sublists import quantize
from magnetic_core._store.catalog import Catalog
from magnetic_core.eval import clustered_data, exact_knn, recall_at_k_tie_aware


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _check(tree: CentroidTree, g: int, cents: np.ndarray | None = None) -> None:
    """Every slot in exactly one cluster, listed in its cluster's range; the rows are the
    members' centroid codes."""
    assert tree.owner.shape == (g,)
    np.testing.assert_array_equal(tree.at[tree.members], np.arange(g))
    if cents is not None:
        codes, scales = quantize(cents)
        np.testing.assert_array_equal(tree.rows, codes[tree.members])
        np.testing.assert_array_equal(tree.row_scale, scales[tree.members])
    assert sorted(tree.members.tolist()) == list(range(g))
    for c in range(tree.means.shape[0]):
        in_c = tree.members[tree.start[c] : tree.start[c + 1]]
        assert (tree.owner[in_c] == c).all()
        assert (np.diff(in_c) > 0).all()  # slot order within a cluster


def test_fit_partitions_the_slots_and_is_deterministic() -> None:
    cents = _unit(np.random.default_rng(0), 500, 24)
    tree = CentroidTree.fit(cents, *quantize(cents))
    _check(tree, 500, cents)
    # CLUSTERS_PER_ROOT clusters per square root of the groups (179 of 500 at 8)
    assert tree.means.shape[0] == math.ceil(centroid_tree.CLUSTERS_PER_ROOT * math.sqrt(500))
    again = CentroidTree.fit(cents, *quantize(cents))
    np.testing.assert_array_equal(tree.owner, again.owner)
    # A centroid sits in the cluster whose mean is nearest (k-means ends on an assignment).
    held = tree.start[1:] > tree.start[:-1]
    nearest = np.argmax(cents @ tree.means[held].T, axis=1)
    np.testing.assert_array_equal(tree.owner, np.flatnonzero(held)[nearest])


def test_moved_and_new_slots_go_to_their_nearest_cluster() -> None:
    rng = np.random.default_rng(1)
    cents = _unit(rng, 400, 16)
    tree = CentroidTree.fit(cents, *quantize(cents))
    none = np.array([], np.int64)
    assert tree.moved(cents, *quantize(cents), none) is tree  # nothing moved: same tree
    nudged = cents.copy()
    nudged[5] = nudged[5] * 0.999 + 0.001 * nudged[6]
    nudged[5] /= np.linalg.norm(nudged[5])
    same = tree.moved(nudged, *quantize(nudged), np.array([5]))  # its cluster kept: in place
    assert same is tree
    _check(same, 400, nudged)
    grown = np.concatenate([nudged, _unit(rng, 30, 16)])
    grown[[3, 77]] = -grown[[3, 77]]  # two groups changed a lot
    after = tree.moved(grown, *quantize(grown), np.array([3, 77]))
    _check(after, 430, grown)
    expect = np.argmax(grown[[3, 77, *range(400, 430)]] @ tree.means.T, axis=1)
    np.testing.assert_array_equal(after.owner[[3, 77, *range(400, 430)]], expect)
    untouched = np.setdiff1d(np.arange(400), [3, 77])
    np.testing.assert_array_equal(after.owner[untouched], tree.owner[untouched])
    shrunk = after.moved(grown[:380], *quantize(grown[:380]), none)  # the last slots removed
    _check(shrunk, 380, grown[:380])


def test_kept_tree_exists_only_for_many_groups_and_refits_on_growth(monkeypatch) -> None:
    monkeypatch.setattr(centroid_tree, "TREE_FROM", 100)
    rng = np.random.default_rng(2)
    cents = _unit(rng, 200, 16)
    none = np.array([], np.int64)

    def kept(tree: CentroidTree | None, g: int, slots: np.ndarray) -> CentroidTree | None:
        return kept_tree(tree, cents[:g], *quantize(cents[:g]), slots)

    assert kept(None, 99, np.arange(99)) is None
    tree = kept(None, 120, np.arange(120))
    assert tree is not None and tree.fitted == 120
    same = kept(tree, 170, none)  # under 1.5x: re-filed
    assert same is not None and same.fitted == 120 and same.means is tree.means
    _check(same, 170, cents[:170])
    refit = kept(same, 180, none)  # 1.5x: fitted again
    assert refit is not None and refit.fitted == 180
    assert kept(refit, 90, np.arange(90)) is None


N = 8000


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    vecs, _ = clustered_data(N + 50, 64, 160, spread=0.8, decay=1.5, seed=4)
    return vecs[50:], vecs[:50]


def _plan(q: np.ndarray) -> SearchPlan:
    return SearchPlan(
        vector=q, k=10, n_probe=4, entities=(), entity_boost=0.0, predicate=None,
        sketch_rank=16, rerank=64, min_cells=300, list_size=32,
    )  # fmt: skip


def test_a_store_searched_through_its_tree_keeps_recall_across_writes(data, monkeypatch) -> None:
    monkeypatch.setattr(centroid_tree, "TREE_FROM", 64)
    monkeypatch.setattr(scorer_module, "SPREAD", 2)  # few clusters read: a real choice
    base, queries = data
    index = HierIndex(64, 32)  # small groups: hundreds of them
    index.assign([f"c{i}" for i in range(6000)], base[:6000], 0.6)
    scorer = Scorer(16, 32)

    def recall(live: np.ndarray) -> tuple[float, float]:
        """Recall@10 through the tree, and scoring every centroid instead."""
        _, sims = exact_knn(base[live], queries, 10)
        found = [[c.score for c in run_search(index, Catalog(), _plan(q), scorer)] for q in queries]
        tree, scorer._state.tree = scorer._state.tree, None
        every = [[c.score for c in run_search(index, Catalog(), _plan(q), scorer)] for q in queries]
        scorer._state.tree = tree
        return recall_at_k_tie_aware(found, sims, 10), recall_at_k_tie_aware(every, sims, 10)

    through, every = recall(np.arange(6000))
    groups = len(index.slot_groups)
    assert scorer._state.tree is not None and groups >= 64
    # The probe reads less than half the centroids (else it scores them all) ...
    wanted = 2 * 2 * 300 / (6000 / groups)
    assert scorer_module.SPREAD * wanted * 2 < groups
    # ... and finds nearly what scoring all of them finds.
    assert through >= every - 0.05 and through >= 0.9
    index.assign([f"c{i}" for i in range(6000, N)], base[6000:], 0.6)  # new groups
    for i in range(600):  # some groups emptied: slots move
        index.remove(f"c{i}")
    after = [[c.id for c in run_search(index, Catalog(), _plan(q), scorer)] for q in queries]
    tree = scorer._state.tree
    assert tree is not None
    _check(tree, len(index.slot_groups), index.centroids)
    assert not any(int(c[1:]) < 600 for hits in after for c in hits)
    through, every = recall(np.arange(600, N))
    assert through >= every - 0.05 and through >= 0.9


def test_a_persisted_store_searches_through_its_tree_before_and_after_reopening(
    tmp_path, monkeypatch
) -> None:
    """A store with many groups keeps its tree through writes and a reopen (the snapshot
    keeps the clusters; the groups are filed to them again): its searches find what scoring
    every centroid finds, and new cells at once."""
    from magnetic_core import HashingEmbedder, MagneticMemory, MemoryConfig

    monkeypatch.setattr(centroid_tree, "TREE_FROM", 64)
    monkeypatch.setattr(scorer_module, "SPREAD", 2)
    vecs, _ = clustered_data(4650, 64, 160, spread=0.8, decay=1.5, seed=6)
    base, queries = vecs[50:], vecs[:50]
    config = MemoryConfig(join_threshold=0.6, max_group_size=16, probe_cells=200, sketch_rank=16)

    def open_store() -> MagneticMemory:
        return MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder(64), config=config)

    def hits(mem: MagneticMemory) -> list[list[tuple[str, float]]]:
        return [[(h.id, round(h.score, 5)) for h in mem.search(vector=q, k=10)] for q in queries]

    def recall(found: list[list[tuple[str, float]]], live: np.ndarray) -> float:
        _, sims = exact_knn(base[live], queries, 10)
        return recall_at_k_tie_aware([[s for _, s in f] for f in found], sims, 10)

    with open_store() as mem:
        mem.add([""] * 4600, ids=[f"c{i}" for i in range(4600)], vectors=base)
        before = hits(mem)
        tree = mem._scorer._state.tree
        groups = len(mem._index.slot_groups)
        wanted = math.ceil(2 * 2 * 200 / (4600 / groups))  # twice the groups' cells budget
        assert tree is not None and 2 * scorer_module.SPREAD * wanted < groups  # read a part
        mem._scorer._state.tree = None  # every centroid scored, for comparison
        every = hits(mem)
        mem._scorer._state.tree = tree
        assert recall(before, np.arange(4600)) >= recall(every, np.arange(4600)) - 0.05
        means = tree.means.copy()

    def refit(*args: object) -> None:
        raise AssertionError("the clusters were fitted again")

    with monkeypatch.context() as patch:  # from the snapshot: the saved clusters, refilled
        patch.setattr(CentroidTree, "fit", refit)
        mem = open_store()
        assert hits(mem) == before
        np.testing.assert_array_equal(mem._scorer._state.tree.means, means)
    with mem:
        mem.delete([f"c{i}" for i in range(300)])
        mem.add([""] * 3, ids=["q0", "q1", "q2"], vectors=queries[:3])
        found = hits(mem)
        assert [f[0][0] for f in found[:3]] == ["q0", "q1", "q2"]
        assert not any(int(c[1:]) < 300 for f in found for c, _ in f if c.startswith("c"))
        _check(mem._scorer._state.tree, len(mem._index.slot_groups))


def test_a_text_query_through_the_tree_in_one_call_ranks_as_the_staged_search(
    data, monkeypatch, helper_mode: str
) -> None:
    """A text query of a store with a centroid tree takes its one compiled call through
    the tree's clusters and ranks as the staged search, words and a routing entity
    included (``search.text_search``)."""
    import dataclasses

    from magnetic_core._search.search import text_search
    from magnetic_core._store.record import CellRecord

    monkeypatch.setattr(centroid_tree, "TREE_FROM", 64)
    monkeypatch.setattr(scorer_module, "SPREAD", 2)
    base, queries = data
    index = HierIndex(64, 32)
    ids = [f"c{i}" for i in range(6000)]
    index.assign(ids, base[:6000], 0.6)
    catalog = Catalog()
    words = ["otter", "heron", "marsh", "reed", "delta"]
    for i, cid in enumerate(ids):
        text = f"{words[i % 5]} {words[(i * 7) % 5]}" if i % 5 == 0 else f"entry {i}"
        catalog.put(cid, CellRecord(text, {}, ("Delta Lab",) if i % 53 == 0 else (), 0.0, 0.0))
    scorer = Scorer(16, 32)
    answered = 0
    for j, q in enumerate(queries[:20]):
        plan = dataclasses.replace(  # (a small probe, coded: 16 kept of each)
            _plan(q), k=4, rerank=16, routes=False, lexical_weight=0.4, entity_boost=0.1,
            lexical_terms=catalog.lexical.query_terms("otter in the marsh"),
            entities=("Delta Lab",) if j % 2 else (),
        )  # fmt: skip
        staged = run_search(index, catalog, plan, scorer)
        one = text_search(index, catalog, plan, scorer)
        if one is not None:
            answered += 1
            assert one[0] == [c.id for c in staged]
            assert one[2] == [c.score for c in staged] and one[3] == [c.rank_score for c in staged]
    assert scorer._tree() is not None  # the tree's clusters chose the groups
    assert answered == 20
