"""The search snapshot: sub-lists per group, residual sketches, and staleness after writes."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core._index.index import HierIndex
from magnetic_core._search.search import _SNAPSHOTS, SearchPlan, run_search
from magnetic_core._search.snapshot import split_lists
from magnetic_core._store.catalog import Catalog
from magnetic_core.eval import clustered_data, exact_knn, recall_at_k_tie_aware

N = 6000


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    # Noise concentrated in few directions (decay), as in real sentence embeddings, so the
    # sketches are used; queries are drawn from the same clusters.
    vecs, _ = clustered_data(N + 50, 64, 40, spread=0.8, decay=1.5, seed=3)
    return vecs[50:], vecs[:50]


def _index(base: np.ndarray) -> HierIndex:
    index = HierIndex(base.shape[1], 256)
    index.assign([f"c{i}" for i in range(len(base))], base, 0.6)
    return index


def _plan(q: np.ndarray, min_cells: int = 1200, k: int = 10) -> SearchPlan:
    return SearchPlan(
        vector=q,
        k=k,
        n_probe=4,
        entities=(),
        entity_boost=0.0,
        predicate=None,
        sketch_rank=16,
        rerank=64,
        min_cells=min_cells,
        list_size=32,
    )


def _search(index: HierIndex, q: np.ndarray, **kw: int) -> list[str]:
    return [c.id for c in run_search(index, Catalog(), _plan(q, **kw))]


def test_split_lists_partitions_a_group_into_tight_lists() -> None:
    vecs, labels = clustered_data(200, 32, 4, spread=0.2, seed=1)
    lists = split_lists(vecs, 50)
    assert sorted(lists.order.tolist()) == list(range(200))
    assert int(lists.lengths.sum()) == 200
    assert 1 < len(lists.lengths) <= 4
    bounds = np.concatenate([[0], np.cumsum(lists.lengths)])
    for j in range(len(lists.lengths)):
        members = lists.order[bounds[j] : bounds[j + 1]]
        np.testing.assert_allclose(lists.means[j], vecs[members].mean(axis=0), atol=1e-5)
        # Each list is a piece of one cluster: k-means finds the well separated clusters.
        assert len(set(labels[members].tolist())) == 1


def test_snapshot_search_keeps_recall_against_exact(data) -> None:
    base, queries = data
    index = _index(base)
    for q in queries[:2]:
        _search(index, q)  # the snapshot is built on the second search
    assert _SNAPSHOTS[index].snapshot is not None
    _, truth = exact_knn(base, queries, 10)
    found = [[float(base[int(c[1:])] @ q) for c in _search(index, q)] for q in queries]
    assert recall_at_k_tie_aware(found, truth, 10) >= 0.95


def test_writes_are_searched_at_once_and_the_snapshot_is_kept_for_clean_groups(data) -> None:
    base, queries = data
    index = _index(base)
    q = queries[0]
    _search(index, q)
    _search(index, q)
    built = _SNAPSHOTS[index].snapshot
    assert built is not None
    # A new cell equal to the query comes first right after it is added: its group is
    # dirty and scored from its own block, while the other groups stay in the snapshot.
    index.assign(["new"], q[None, :].copy(), 0.6)
    assert _search(index, q)[0] == "new"
    assert _SNAPSHOTS[index].snapshot is built
    # Removed cells never come back, whether their group is dirty or rebuilt.
    index.remove("new")
    assert "new" not in _search(index, q)
    first = _search(index, q)[0]
    index.remove(first)
    assert first not in _search(index, q)
    assert _SNAPSHOTS[index].snapshot is built


def test_many_dirty_groups_rebuild_the_snapshot_and_recall_holds(data) -> None:
    base, queries = data
    index = _index(base)
    _search(index, queries[0])
    _search(index, queries[0])
    built = _SNAPSHOTS[index].snapshot
    gone = {f"c{i}" for i in range(0, N, 7)}  # touches nearly every group
    for cid in sorted(gone):
        index.remove(cid)
    keep = np.array([i for i in range(N) if f"c{i}" not in gone])
    _, truth = exact_knn(base[keep], queries, 10)
    results = [_search(index, q) for q in queries]
    assert _SNAPSHOTS[index].snapshot is not built
    assert not gone & {c for r in results for c in r}
    found = [[float(base[int(c[1:])] @ q) for c in r] for r, q in zip(results, queries)]
    assert recall_at_k_tie_aware(found, truth, 10) >= 0.95


def test_vectors_survive_the_snapshot_and_later_writes(data) -> None:
    base, queries = data
    index = _index(base)
    _search(index, queries[0])
    _search(index, queries[0])  # groups' blocks now live in the packed matrix
    rng = np.random.default_rng(0)
    gone = {f"c{i}" for i in rng.choice(N, 300, replace=False).tolist()}
    for cid in sorted(gone):
        index.remove(cid)
    extra, _ = clustered_data(300, 64, 40, spread=0.8, decay=1.5, seed=9)
    index.assign([f"x{i}" for i in range(300)], extra, 0.6)
    _search(index, queries[1])
    _search(index, queries[1])  # and a second snapshot over the changed groups
    for i in range(N):
        cid = f"c{i}"
        if cid not in gone:
            np.testing.assert_array_equal(index.vector(cid), base[i])
    for i in range(300):
        np.testing.assert_array_equal(index.vector(f"x{i}"), extra[i])
    for group in index.slot_groups:
        total = group.view.sum(axis=0, dtype=np.float64)
        np.testing.assert_allclose(group.total, total, atol=1e-4)


def test_blocked_matvec_equals_the_plain_product() -> None:
    from magnetic_core._search.search import MATVEC_BLOCK, matvec

    rng = np.random.default_rng(0)
    a = rng.standard_normal((2 * MATVEC_BLOCK + 17, 16)).astype(np.float32)
    x = rng.standard_normal(16).astype(np.float32)
    np.testing.assert_allclose(matvec(a, x), a @ x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(matvec(a[:5], x), a[:5] @ x, rtol=1e-5, atol=1e-5)


def test_a_regrouped_index_gets_fresh_sub_lists_and_sketches(data) -> None:
    # Regrouping makes new groups that reuse the old ids (g0, g1, ...): nothing cached for
    # the old groups may be served for them.
    base, queries = data
    index = _index(base)
    _search(index, queries[0])
    _search(index, queries[0])
    index.regroup(0.75)
    _, truth = exact_knn(base, queries, 10)
    results = [_search(index, q) for q in queries]
    results = [_search(index, q) for q in queries]  # from the rebuilt snapshot
    assert _SNAPSHOTS[index].snapshot.epoch == index.centroid_epoch
    found = [[float(base[int(c[1:])] @ q) for c in r] for r, q in zip(results, queries)]
    assert recall_at_k_tie_aware(found, truth, 10) >= 0.95


def test_a_budget_near_the_store_size_scores_every_sketch_in_one_pass(data) -> None:
    base, queries = data
    index = _index(base)
    for q in queries[:2]:
        _search(index, q)
    _, truth = exact_knn(base, queries, 10)

    def found(min_cells: int) -> tuple[list[list[float]], set[int]]:
        scores, probed = [], set()
        for q in queries:
            got = run_search(index, Catalog(), _plan(q, min_cells=min_cells))
            scores.append([float(base[int(c.id[1:])] @ q) for c in got])
            probed |= {c.probed_groups for c in got}
        return scores, probed

    # A budget of a third of the store: every group is probed, none is left out.
    full, probed = found(N // 3)
    assert probed == {len(index.slot_groups)}
    assert recall_at_k_tie_aware(full, truth, 10) >= 0.99
    # A smaller budget probes fewer groups and gathers their best sub-lists.
    _, probed = found(N // 6)
    assert max(probed) < len(index.slot_groups)


def test_a_group_emptied_after_the_build_never_returns_its_cells(data) -> None:
    base, queries = data
    index = _index(base)
    for q in queries[:2]:
        _search(index, q)
    built = _SNAPSHOTS[index].snapshot
    assert built is not None
    # Empty a group that is not in the last slot: the last slot's group moves into its
    # slot, unchanged, and must still be searched under its own sub-lists.
    victim = index.slot_groups[0]
    tail = index.slot_groups[-1]
    gone = list(victim.ids)
    for cid in gone:
        index.remove(cid)
    assert tail.slot == 0
    for cid in gone:
        q = base[int(cid[1:])]
        assert not set(_search(index, q)) & set(gone)
    q = tail.view[0].copy()
    assert _search(index, q)[0] in tail.ids


def test_exact_scans_of_every_group_use_the_packed_vectors_and_stay_exact(data) -> None:
    base, queries = data
    index = _index(base)
    for q in queries[:2]:
        _search(index, q)
    # A budget of the whole store probes every group; k=100 keeps 400 candidates, too many
    # to pre-score by sketch: every cell is scored exactly.
    q = queries[5]
    truth = np.argsort(-(base @ q), kind="stable")[:101]
    assert _search(index, q, k=100, min_cells=N) == [f"c{i}" for i in truth[:100]]
    # A changed group: the scan goes group by group, still exact, without the removed cell.
    index.remove(f"c{truth[0]}")
    assert _search(index, q, k=100, min_cells=N) == [f"c{i}" for i in truth[1:101]]
