"""Sleep mode on the memory: planned merges, applying them, and the settings of a pass."""

from __future__ import annotations

import asyncio
import math
from concurrent.futures import Future

import numpy as np
import pytest

from magnetic_core import MagneticMemory, MemoryConfig, SleepConfig
from magnetic_core.embeddings import VectorsOnly
from magnetic_core.errors import ClosedError, InvalidInputError
from magnetic_core.types import SleepReport
from tests.invariants import assignment

D = 16


@pytest.fixture
def mem(tmp_path):
    """12 tight topics of 6 cells each, joined at 0.8 so every topic is its own group."""
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((12, D))
    vecs = np.repeat(centres, 6, axis=0) + 0.05 * rng.standard_normal((72, D))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    config = MemoryConfig(join_threshold=0.8, max_group_size=14)
    memory = MagneticMemory(path=str(tmp_path), embedder=VectorsOnly(D), config=config)
    memory.add([f"cell {i}" for i in range(72)], ids=[f"c{i}" for i in range(72)], vectors=vecs)
    yield memory
    memory.close()


def _centroid(mem: MagneticMemory, gid: str) -> np.ndarray:
    v = mem.get_vectors(list(mem.group(gid).cell_ids)).sum(axis=0)
    return v / np.linalg.norm(v)


def test_planned_merges_are_disjoint_pairs_over_the_threshold_keeping_the_larger(mem):
    plan = mem.plan_merges(-1.0)  # every pair qualifies: the cap and disjointness decide
    assert plan.threshold == -1.0 and len(plan) > 0
    named = [g for keep, gone, _ in plan.pairs for g in (keep, gone)]
    assert len(named) == len(set(named))
    sims = [s for _, _, s in plan.pairs]
    assert sims == sorted(sims, reverse=True)
    for keep, gone, sim in plan.pairs:
        a, b = mem.group(keep), mem.group(gone)
        assert a.size >= b.size and a.size + b.size <= 14
        assert sim == pytest.approx(float(_centroid(mem, keep) @ _centroid(mem, gone)), abs=1e-4)


def test_no_pair_is_planned_over_a_threshold_no_centroids_reach(mem):
    assert len(mem.plan_merges(0.99)) == 0
    assert mem.plan_merges().threshold == mem.config.merge_threshold


def test_applied_merges_move_every_cell_and_survive_a_reopen(mem, tmp_path):
    plan = mem.plan_merges(-1.0)
    before = assignment(mem)
    kept = mem.apply_merges(plan)
    assert kept == [keep for keep, _, _ in plan.pairs]
    after = assignment(mem)
    for keep, gone, _ in plan.pairs:
        moved = [c for c, g in before.items() if g == gone]
        assert moved and all(after[c] == keep for c in moved)
    assert {g.id for g in mem.groups()}.isdisjoint({gone for _, gone, _ in plan.pairs})
    assert mem.apply_merges(plan) == []  # the absorbed groups are gone: nothing to do
    mem.close()
    with MagneticMemory(path=str(tmp_path), embedder=VectorsOnly(D)) as again:
        assert assignment(again) == after


@pytest.mark.parametrize("bad", [1.5, -1.01, math.nan, math.inf, "0.9", True])
def test_a_bad_merge_threshold_is_refused_naming_it(mem, bad):
    with pytest.raises(InvalidInputError, match="threshold"):
        mem.plan_merges(bad)


def test_sleep_settings_are_sleep_config_fields(mem):
    with pytest.raises(InvalidInputError, match="merge_treshold") as info:
        mem.sleep(dry_run=True, merge_treshold=0.9)
    assert "merge_threshold" in (info.value.hint or "")
    with pytest.raises(InvalidInputError, match="SleepConfig.fragment_size"):
        mem.sleep(dry_run=True, fragment_size=0)
    report = mem.sleep(dry_run=True, config=SleepConfig(absorb_threshold=0.5), split_threshold=0.1)
    assert report.thresholds["absorb"] == 0.5 and report.thresholds["split"] == 0.1
    assert report.sources["absorb"] == report.sources["split"] == "configured"


def test_a_dry_run_changes_nothing_and_cannot_run_in_the_background(mem):
    before = assignment(mem)
    report = mem.sleep(dry_run=True, merge_threshold=-1.0)
    assert report.dry_run and report.merges and assignment(mem) == before
    with pytest.raises(InvalidInputError, match="background"):
        mem.sleep(dry_run=True, background=True)


def test_a_background_pass_returns_a_future_of_its_report(mem):
    future = mem.sleep(background=True, merge_threshold=-1.0)
    assert isinstance(future, Future)
    report = future.result(timeout=60)
    assert isinstance(report, SleepReport) and not report.dry_run and report.merges
    assert mem.stats().groups == report.after.groups


async def test_the_async_twins_plan_and_apply(mem):
    plan = await mem.aplan_merges(-1.0)
    kept = await mem.aapply_merges(plan)
    assert kept and len(mem.groups()) == 12 - len(kept)
    report = await asyncio.wait_for(mem.asleep(dry_run=True), 60)
    assert report.dry_run


def test_sleep_mode_refuses_a_closed_memory(mem):
    mem.close()
    for call in (mem.plan_merges, lambda: mem.sleep(dry_run=True), lambda: mem.sleep_every(5)):
        with pytest.raises(ClosedError):
            call()
