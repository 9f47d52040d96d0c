"""The scorer: sub-lists per group, int8 residual codes, and its incremental update after writes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from magnetic_core._index.index import HierIndex
from magnetic_core._search.exact import exact_pool
from magnetic_core._search.scorer import FULL_SCAN_SHARE, Scorer
from magnetic_core._search.search import run_search
from magnetic_core._search.sublists import split_lists
from magnetic_core._store.catalog import Catalog
from magnetic_core.eval import clustered_data, exact_knn, recall_at_k_tie_aware

from .plans import coded_plan

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


# One scorer per index, as a memory keeps one.
_SCORERS: dict[int, Scorer] = {}


def _scorer(index: HierIndex) -> Scorer:
    return _SCORERS.setdefault(id(index), Scorer(16, 32))


def _search(index: HierIndex, q: np.ndarray, **kw: int) -> list[str]:
    return [c.id for c in run_search(index, Catalog(), coded_plan(q, **kw), _scorer(index))]


def _searched(base: np.ndarray, q: np.ndarray) -> tuple[HierIndex, Scorer]:
    """An index of ``base`` with its scorer built by a first search for ``q``."""
    index = _index(base)
    _search(index, q)
    return index, _scorer(index)


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


def test_scorer_search_keeps_recall_against_exact(data) -> None:
    base, queries = data
    index = _index(base)
    _search(index, queries[0])
    assert _scorer(index).usable  # the codes pre-score: this is the approximate path
    _, truth = exact_knn(base, queries, 10)
    found = [[float(base[int(c[1:])] @ q) for c in _search(index, q)] for q in queries]
    assert recall_at_k_tie_aware(found, truth, 10) >= 0.95


def test_a_write_recodes_only_the_groups_it_changed(data) -> None:
    q = data[1][0]
    index, scorer = _searched(data[0], q)
    rows_before, basis = scorer._state.rows.n, scorer._basis
    # A new cell equal to the query comes first right after it is added.
    index.assign(["new"], q[None, :].copy(), 0.6)
    assert _search(index, q)[0] == "new"
    # Only its group was split and coded again: its rows were appended, nothing else.
    assert scorer._state.rows.n - rows_before == index.loc["new"].n
    assert scorer._basis is basis
    # Removed cells never come back.
    index.remove("new")
    assert "new" not in _search(index, q)
    first = _search(index, q)[0]
    index.remove(first)
    assert first not in _search(index, q)


def test_many_writes_compact_the_scorer_and_recall_holds(data) -> None:
    base, queries = data
    index = _index(base)
    _search(index, queries[0])
    scorer = _scorer(index)
    gone = {f"c{i}" for i in range(0, N, 7)}  # touches nearly every group
    for cid in sorted(gone):
        index.remove(cid)
        if len(gone) and int(cid[1:]) % 10 == 0:
            _search(index, queries[0])  # searches between the writes, as in a soak
    keep = np.array([i for i in range(N) if f"c{i}" not in gone])
    _, truth = exact_knn(base[keep], queries, 10)
    results = [_search(index, q) for q in queries]
    # Rows of replaced group versions are reclaimed: the arrays stay near the store's size.
    assert scorer._state.rows.n <= 2 * len(index) + 4096
    assert not gone & {c for r in results for c in r}
    found = [[float(base[int(c[1:])] @ q) for c in r] for r, q in zip(results, queries)]
    assert recall_at_k_tie_aware(found, truth, 10) >= 0.95


def test_search_never_rebinds_the_index_storage(data) -> None:
    base, queries = data
    index = _index(base)
    blocks = {g.gid: g.vecs for g in index.slot_groups}
    _search(index, queries[0])
    _search(index, queries[1], min_cells=N)
    assert all(g.vecs is blocks[g.gid] for g in index.slot_groups)


def test_vectors_survive_the_scorer_and_later_writes(data) -> None:
    base, queries = data
    index = _index(base)
    _search(index, queries[0])
    rng = np.random.default_rng(0)
    gone = {f"c{i}" for i in rng.choice(N, 300, replace=False).tolist()}
    for cid in sorted(gone):
        index.remove(cid)
    extra, _ = clustered_data(300, 64, 40, spread=0.8, decay=1.5, seed=9)
    index.assign([f"x{i}" for i in range(300)], extra, 0.6)
    _search(index, queries[1])  # the changed groups are coded again
    for i in range(N):
        cid = f"c{i}"
        if cid not in gone:
            np.testing.assert_array_equal(index.vector(cid), base[i])
    for i in range(300):
        np.testing.assert_array_equal(index.vector(f"x{i}"), extra[i])
    for group in index.slot_groups:
        total = group.view.sum(axis=0, dtype=np.float64)
        np.testing.assert_allclose(group.total, total, atol=1e-4)


def test_a_regrouped_index_gets_fresh_sub_lists_and_sketches(data) -> None:
    # Regrouping makes new groups that reuse the old ids (g0, g1, ...): nothing cached for
    # the old groups may be served for them.
    base, queries = data
    index = _index(base)
    _search(index, queries[0])
    index.regroup(0.75)
    _, truth = exact_knn(base, queries, 10)
    results = [_search(index, q) for q in queries]
    assert _scorer(index).current(index)
    found = [[float(base[int(c[1:])] @ q) for c in r] for r, q in zip(results, queries)]
    assert recall_at_k_tie_aware(found, truth, 10) >= 0.95


def test_a_budget_near_the_store_size_scores_every_sketch_in_one_pass(data) -> None:
    base, queries = data
    index = _index(base)
    _, truth = exact_knn(base, queries, 10)

    def found(min_cells: int) -> tuple[list[list[float]], set[int]]:
        scores, probed = [], set()
        for q in queries:
            got = run_search(index, Catalog(), coded_plan(q, min_cells=min_cells), _scorer(index))
            scores.append([float(base[int(c.id[1:])] @ q) for c in got])
            probed |= {c.probed_groups for c in got}
        return scores, probed

    # A budget of FULL_SCAN_SHARE of the store: every group is probed, none is left out.
    full, probed = found(math.ceil(FULL_SCAN_SHARE * N))
    assert probed == {len(index.slot_groups)}
    assert recall_at_k_tie_aware(full, truth, 10) >= 0.99
    # A smaller budget probes fewer groups and gathers their best sub-lists.
    _, probed = found(N // 6)
    assert max(probed) < len(index.slot_groups)


def test_a_group_emptied_after_the_build_never_returns_its_cells(data) -> None:
    base, queries = data
    index = _index(base)
    _search(index, queries[0])
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


def test_exact_scans_of_every_group_stay_exact(data) -> None:
    base, queries = data
    index = _index(base)
    _search(index, queries[0])
    # A budget of the whole store probes every group; k=100 keeps 400 candidates, too many
    # to pre-score by sketch: every cell is scored exactly.
    q = queries[5]
    truth = np.argsort(-(base @ q), kind="stable")[:101]
    assert _search(index, q, k=100, min_cells=N) == [f"c{i}" for i in truth[:100]]
    # A changed group: the scan goes group by group, still exact, without the removed cell.
    index.remove(f"c{truth[0]}")
    assert _search(index, q, k=100, min_cells=N) == [f"c{i}" for i in truth[1:101]]


def test_the_scorers_exact_pass_keeps_the_best_cells_of_current_and_changed_groups(data) -> None:
    q = data[1][7]
    index, scorer = _searched(data[0], q)
    slots = np.arange(0, len(index.slot_groups), 2)
    for _ in range(2):  # as built, then with a changed (stale) group among the slots
        every = exact_pool(index, None, slots, q)
        ids, scores = scorer.exact(index, slots, q)
        assert sorted(ids) == sorted(every.ids)
        best_ids, best = scorer.exact(index, slots, q, keep=30)
        want = np.argsort(-every.scores, kind="stable")[:30]
        assert best_ids == [every.ids[i] for i in want]
        np.testing.assert_allclose(best, index.vectors(best_ids) @ q, atol=1e-6)
        changed = index.loc[best_ids[0]].slot
        index.remove(best_ids[0])
        scorer._find_stale(index)  # what the next search's sync does before re-coding
        assert scorer._state.stale[changed]


def _reloaded(index: HierIndex, seed: int) -> HierIndex:
    """The same groups and cells, placed in another order (as a reopen from Chroma may)."""
    cells = [(cid, g.gid) for g in index.slot_groups for cid in g.ids]
    order = np.random.default_rng(seed).permutation(len(cells))
    again = HierIndex(index.dim, index.max_group_size)
    for i in order.tolist():
        cid, gid = cells[i]
        again.place(cid, index.vector(cid).copy(), gid)
    again.finish_placing()
    return again


def test_exported_arrays_restore_the_scorer_into_a_reloaded_index(data) -> None:
    base, queries = data
    index = _index(base)
    before = [_search(index, q) for q in queries[:10]]
    arrays = _scorer(index).export_arrays()
    assert all(isinstance(v, np.ndarray) for v in arrays.values())
    again = _reloaded(index, seed=1)
    restored = Scorer.from_arrays(arrays, again)
    assert not restored._state.stale.any()  # every group restored, none to code again
    after = [
        [c.id for c in run_search(again, Catalog(), coded_plan(q), restored)] for q in queries[:10]
    ]
    assert after == before
    # A group changed before the restore is coded again rather than served stale.
    victim = again.slot_groups[0]
    gone = victim.ids[0]
    again.remove(gone)
    changed = Scorer.from_arrays(arrays, again)
    assert changed._state.stale[victim.slot]
    q = base[int(victim.ids[0][1:])]
    assert gone not in [c.id for c in run_search(again, Catalog(), coded_plan(q), changed)]


def test_a_restore_fills_the_arrays_as_coding_group_by_group_does(data) -> None:
    """The bulk restore (one append for every group) gives every column, sub-list and row
    the values a group-by-group append of the same codes gives, whatever the slot order."""
    base, _ = data
    index = _index(base)
    built = _scorer(index)
    built.sync(index)
    again = _reloaded(index, seed=2)
    restored = Scorer.from_arrays(built.export_arrays(), again)
    st = restored._state
    src = built._state
    assert not st.stale[: len(again.slot_groups)].any()
    for group in again.slot_groups:
        h, ref = st.slot_block[group.slot], src.slot_block[index.groups[group.gid].slot]
        assert st.block_group[h] is group
        first, end = int(st.blocks.first[h]), int(st.blocks.end[h])
        rfirst, rend = int(src.blocks.first[ref]), int(src.blocks.end[ref])
        assert end - first == rend - rfirst
        np.testing.assert_array_equal(st.lists.len[first:end], src.lists.len[rfirst:rend])
        np.testing.assert_array_equal(st.lists.code[first:end], src.lists.code[rfirst:rend])
        np.testing.assert_array_equal(st.lists.inv[first:end], src.lists.inv[rfirst:rend])
        for j, rj in zip(range(first, end), range(rfirst, rend), strict=True):
            rows = np.arange(st.lists.start[j], st.lists.start[j] + st.lists.len[j])
            rrows = np.arange(src.lists.start[rj], src.lists.start[rj] + src.lists.len[rj])
            np.testing.assert_array_equal(st.rows.code[rows], src.rows.code[rrows])
            assert (st.rows.block[rows] == h).all()
            # The same cells, found at their rows in the reloaded group's block.
            got = [group.ids[r] for r in st.rows.row[rows].tolist()]
            old = index.groups[group.gid]
            assert got == [old.ids[r] for r in src.rows.row[rrows].tolist()]
        assert int(st.blocks.count[h]) == group.n
        assert int(st.blocks.address[h]) == group.vecs.ctypes.data


def test_small_stores_build_nothing_and_growth_refits_the_basis() -> None:
    vecs, _ = clustered_data(20000, 32, 60, spread=0.8, decay=1.5, seed=5)
    index = HierIndex(32, 256)
    index.assign([f"c{i}" for i in range(3000)], vecs[:3000], 0.6)
    scorer = Scorer(8, 32)
    assert not scorer.sync(index) and not scorer.current(index)  # under MIN_CELLS
    index.assign([f"c{i}" for i in range(3000, 5000)], vecs[3000:5000], 0.6)
    assert scorer.sync(index)
    basis = scorer._basis
    index.assign([f"c{i}" for i in range(5000, 12000)], vecs[5000:12000], 0.6)
    scorer.sync(index)
    assert scorer._basis is basis  # grown 2.4-fold: the basis is kept
    index.assign([f"c{i}" for i in range(12000, 20000)], vecs[12000:], 0.6)
    scorer.sync(index)
    assert scorer._basis is not basis  # grown 4-fold: refitted, every group coded again
    assert not scorer._state.stale.any()
    scorer.configure(4, 32)  # other settings: everything is dropped and rebuilt
    assert scorer._basis is None
    assert scorer.sync(index) and scorer._basis.shape == (32, 4)


def test_a_search_without_routes_finds_the_same_cells_and_scores(data) -> None:
    # Candidates skip what only a route shows (centroid similarity, stages) when nobody
    # asked to explain: the hits, their scores and their order are the same.
    from dataclasses import replace

    base, queries = data
    index = _index(base)
    for q in queries[:10]:
        plan = coded_plan(q)
        routed = run_search(index, Catalog(), plan, _scorer(index))
        plain = run_search(index, Catalog(), replace(plan, routes=False), _scorer(index))
        assert [(c.id, c.score, c.rank_score) for c in plain] == [
            (c.id, c.score, c.rank_score) for c in routed
        ]
        assert all(c.stages == ("centroid",) and c.centroid_similarity > 0 for c in routed)


def test_a_plain_vector_query_in_one_call_finds_what_the_stages_find(
    data, monkeypatch, helper_mode: str
) -> None:
    """The centroid stage and the probe in one compiled call (``Scorer.plain``) give the
    cells, scores, groups and probe counts of the stages run one by one: on a store just
    coded, after writes (the changed groups' queries go the stages' way, which scores them
    exactly), and through a centroid tree, whether the call runs on the calling thread or
    on the helper's second core."""
    from dataclasses import replace

    from magnetic_core._search import centroid_tree, search
    from magnetic_core._search import scorer as scorer_module

    base, queries = data
    calls: list[bool] = []
    one_call = Scorer.plain

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        found = one_call(self, *args, **kwargs)
        calls.append(found is not None)
        return found

    monkeypatch.setattr(Scorer, "plain", counted)

    def both(index: HierIndex, q: np.ndarray, k: int, ties: bool = False, **changes: int) -> None:
        plan = replace(coded_plan(q, k=k), routes=False, **changes)
        scorer = _scorer(index)
        fused = run_search(index, Catalog(), plan, scorer)
        with monkeypatch.context() as m:
            m.setattr(search, "_plain", lambda catalog, plan: False)
            apart = run_search(index, Catalog(), plan, scorer)
        if ties:
            # The stages order equal scores as numpy's argpartition leaves them: the same
            # scores in the same order, and the same cells at each score above the last.
            assert [(c.score, c.probed_groups) for c in fused] == [
                (c.score, c.probed_groups) for c in apart
            ]
            last = fused[-1].score
            assert {(c.id, c.group.gid) for c in fused if c.score > last} == {
                (c.id, c.group.gid) for c in apart if c.score > last
            }
        else:
            assert [(c.id, c.score, c.group, c.probed_groups) for c in fused] == [
                (c.id, c.score, c.group, c.probed_groups) for c in apart
            ]
        assert all(c.group is index.loc[c.id] for c in fused)
        assert len(fused) == k

    index = _index(base[:5000])
    for q in queries[:8]:
        both(index, q, 10)
    assert calls and all(calls)  # every query was answered in one call
    # A probe of few cells for its k is scored exactly in the same call, as the stages
    # score it (the same scores, ties in the same order): too few cells for its k, and an
    # explicit n_probe with no cell budget.
    calls.clear()
    both(index, queries[8], 60)
    both(index, queries[9], 10, n_probe=2, min_cells=0)
    both(index, queries[10], 10, n_probe=1, min_cells=0)
    assert calls == [True, True, True]
    # Every vector twice: ties everywhere.
    twice = HierIndex(base.shape[1], 256)
    twice.assign([f"d{i}" for i in range(6000)], np.concatenate([base[:3000], base[:3000]]), 0.6)
    calls.clear()
    for q in queries[:4]:
        both(twice, q, 10, ties=True, n_probe=2, min_cells=0)
    assert calls == [True] * 4
    calls.clear()
    # New cells change groups: a query probing one goes the stages' way until it is coded.
    index.assign([f"c{i}" for i in range(5000, 5400)], base[5000:5400], 0.6)
    index.remove("c3")
    for q in queries[:8]:
        both(index, q, 10)
    assert False in calls
    # Through a centroid tree (many small groups).
    monkeypatch.setattr(centroid_tree, "TREE_FROM", 64)
    monkeypatch.setattr(scorer_module, "SPREAD", 2)
    small = HierIndex(base.shape[1], 32)
    small.assign([f"c{i}" for i in range(N)], base, 0.6)
    calls.clear()
    for q in queries[:8]:
        both(small, q, 10)
    assert _scorer(small)._state.tree is not None and calls and all(calls)
