"""Read-only views of the hierarchy: cells, hits, group summaries, stats and merge plans."""

from __future__ import annotations

import time

import numpy as np
import pytest

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_core._search.views import cell_view, group_info, merge_plan, stats_view


def test_a_cell_view_is_a_copy_the_caller_may_change(store):
    index, catalog = store.mem._index, store.mem._catalog
    cell = cell_view(index, catalog, "c5")
    cell.metadata["n"] = -1
    cell.metadata["new"] = True
    again = cell_view(index, catalog, "c5")
    assert again.metadata == {"n": 5, "topic": again.metadata["topic"], "even": False}
    assert again.group_id == index.loc["c5"].gid and again.is_current
    assert store.mem.get(["c5"])[0] == again


def test_a_superseded_cell_names_its_successor_and_links_are_copies(tmp_path):
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder(32)) as mem:
        mem.add(["the office is in Paris"], ids=["old"])
        time.sleep(0.002)
        mem.add(["the office is in Berlin"], ids=["new"])
        mem.mark_contradiction("old", "new", "one office")
        old = cell_view(mem._index, mem._catalog, "old")
        assert old.superseded_by == "new" and old.superseded_at is not None
        assert not old.is_current and old.contradictions[0]["other"] == "new"
        old.contradictions[0]["other"] = "tampered"
        assert cell_view(mem._index, mem._catalog, "old").contradictions[0]["other"] == "new"
        assert cell_view(mem._index, mem._catalog, "new").is_current
        assert mem.stats().superseded == 1


def test_group_info_lists_cells_closest_to_the_centroid_first(store):
    index, catalog = store.mem._index, store.mem._catalog
    for group in index.slot_groups:
        info = group_info(index, catalog, group)
        centroid = index.centroids[group.slot]
        sims = {c: float(index.vector(c) @ centroid) for c in group.ids}
        assert info.id == group.gid and info.size == group.n == len(info.cell_ids)
        assert [sims[c] for c in info.cell_ids] == sorted(sims.values(), reverse=True)
        assert info.cohesion == pytest.approx(np.mean(list(sims.values())), abs=1e-6)
        assert info.label


def test_stats_are_the_numbers_of_the_groups(store):
    index, catalog = store.mem._index, store.mem._catalog
    stats = stats_view(index, catalog, threshold=0.75, threshold_source="configured",
                       embedder="precomputed", namespace="default")  # fmt: skip
    sizes = np.array([g.n for g in index.slot_groups])
    n = len(store.ids)
    cohesion = sum(float(index.vector(c) @ index.centroids[g.slot]) for g in index.slot_groups
                   for c in g.ids)  # fmt: skip
    assert (stats.count, stats.groups, stats.largest_group) == (n, len(sizes), sizes.max())
    assert stats.singleton_groups == int((sizes == 1).sum())
    assert stats.mean_group_size == pytest.approx(sizes.mean())
    assert stats.mean_cohesion == pytest.approx(cohesion / n, abs=1e-6)
    assert stats.imbalance == pytest.approx(len(sizes) * (sizes**2).sum() / n**2)
    assert stats.size_percentiles == tuple(np.percentile(sizes, [50, 90, 99]))
    assert stats.entities == len(catalog.entity_cells) and stats.dim == index.dim
    assert store.mem.stats().count == n


def test_stats_of_an_empty_store_are_zeros(tmp_path):
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder(16)) as mem:
        stats = mem.stats()
    assert (stats.count, stats.groups, stats.mean_cohesion, stats.imbalance) == (0, 0, 0.0, 0.0)
    assert stats.size_percentiles == (0.0, 0.0, 0.0) and stats.singleton_share == 0.0


def test_a_merge_plan_keeps_the_larger_group_of_each_pair(store):
    index = store.mem._index
    plan = merge_plan(index, -1.0, 10_000)
    assert plan.threshold == -1.0 and len(plan) == len(index.slot_groups) // 2
    sizes = {g.gid: g.n for g in index.slot_groups}
    named = [g for keep, gone, _ in plan.pairs for g in (keep, gone)]
    assert len(named) == len(set(named))
    assert all(sizes[keep] >= sizes[gone] for keep, gone, _ in plan.pairs)
    assert len(merge_plan(index, 1.0, 10_000)) == 0
