"""Sleep mode, numeric half: what one pass does to a store, dry runs, background passes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from magnetic_core import HashingEmbedder, InvalidInputError, MagneticMemory, MemoryConfig
from magnetic_core._sleep.plan import SleepConfig, _neighbours
from tests import invariants
from tests.invariants import assignment


def clustered(seed: int = 0, k: int = 30, per: int = 40, d: int = 48, noise: float = 1.2):
    """Unit vectors around ``k`` random centres, in shuffled order, and their cluster labels."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    labels = np.repeat(np.arange(k), per)
    rng.shuffle(labels)
    x = centres[labels] + noise * rng.normal(size=(labels.size, d)) / np.sqrt(d)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), labels


def open_memory(path: Path, **config) -> MagneticMemory:
    return MagneticMemory(
        path=str(path), embedder=HashingEmbedder(dim=48), config=MemoryConfig(**config)
    )


@pytest.fixture
def loaded(tmp_path: Path):
    x, labels = clustered()
    mem = open_memory(tmp_path / "store")
    mem.add([f"fact {i}" for i in range(len(x))], ids=[f"c{i}" for i in range(len(x))], vectors=x)
    yield mem, x, labels
    mem.close()


def test_a_pass_halves_singletons_and_keeps_cohesion(loaded):
    mem, x, _ = loaded
    before = mem.stats()
    report = mem.sleep()
    after = mem.stats()
    assert after == report.after and report.before == before
    assert after.count == before.count == len(x)
    assert after.singleton_share <= 0.6 * before.singleton_share
    assert after.mean_cohesion >= before.mean_cohesion
    assert report.moved > 0 and report.absorbed and report.changed_groups
    assert report.sources["absorb"] == "fitted" and report.sources["merge"] == "fitted"
    # every cell is still found, exactly, by its own vector
    for i in (0, 17, 333, 1199):
        assert mem.search(vector=x[i], k=1)[0].id == f"c{i}"


def test_group_views_agree_with_the_cells_after_a_pass(loaded):
    mem, _, _ = loaded
    mem.sleep()
    # every cell in one group, the one its view names; sizes, centroids, vectors as they must be
    invariants.hierarchy(mem, cap=mem.config.max_group_size)


def test_dry_run_changes_nothing_and_predicts_the_pass(loaded):
    mem, _, _ = loaded
    before = assignment(mem)
    plan = mem.sleep(dry_run=True)
    assert plan.dry_run and assignment(mem) == before and mem.stats() == plan.before
    done = mem.sleep()
    assert (done.moved, len(done.merges), len(done.splits)) == (
        plan.moved,
        len(plan.merges),
        len(plan.splits),
    )
    assert done.after.groups == plan.after.groups
    assert done.after.mean_cohesion == pytest.approx(plan.after.mean_cohesion, abs=1e-5)


def test_the_pass_survives_reopening(loaded, tmp_path: Path):
    mem, x, _ = loaded
    mem.sleep()
    expected = assignment(mem)
    mem.close()
    with open_memory(tmp_path / "store") as again:
        assert assignment(again) == expected
        assert again.search(vector=x[5], k=1)[0].id == "c5"


def test_the_seeds_explicit_merge_threshold_still_works(tmp_path: Path):
    rng = np.random.default_rng(1)
    base = rng.normal(size=48)
    a = base + 0.05 * rng.normal(size=(4, 48))
    b = base + 0.05 * rng.normal(size=(4, 48)) + 0.6 * rng.normal(size=48)
    with open_memory(tmp_path / "s", join_threshold=0.99) as mem:
        mem.add([f"a{i}" for i in range(4)], vectors=a)
        mem.add([f"b{i}" for i in range(4)], vectors=b)
        n = mem.stats().groups
        report = mem.sleep(merge_threshold=0.3, reassign=False, absorb_threshold=1.0)
        assert report.sources["merge"] == "configured" and report.thresholds["merge"] == 0.3
        assert report.merges and mem.stats().groups < n


def test_unknown_or_invalid_settings_are_refused(loaded):
    mem, _, _ = loaded
    with pytest.raises(InvalidInputError, match="merge_treshold"):
        mem.sleep(merge_treshold=0.8)
    with pytest.raises(InvalidInputError, match="merge_threshold"):
        mem.sleep(merge_threshold=3)
    with pytest.raises(InvalidInputError, match="background"):
        mem.sleep(dry_run=True, background=True)


def test_neighbours_in_blocks_equal_the_full_matrix():
    rng = np.random.default_rng(3)
    c = rng.normal(size=(300, 16)).astype(np.float32)
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    live = np.ones(300, bool)
    live[[5, 77]] = False
    idx, sim = _neighbours(c, live, 6, block=64)
    full = c @ c.T
    np.fill_diagonal(full, -np.inf)
    full[:, ~live] = -np.inf
    expected = np.sort(full, axis=1)[:, ::-1][:, :6]
    np.testing.assert_allclose(sim, expected, rtol=0, atol=1e-6)
    assert not np.isin(idx, [5, 77]).any()


def test_an_empty_store_sleeps_without_error(tmp_path: Path):
    with open_memory(tmp_path / "e") as mem:
        report = mem.sleep()
        assert report.moved == 0 and report.after.count == 0


def test_stats_report_health(loaded):
    mem, _, _ = loaded
    s = mem.stats()
    assert s.singleton_share == pytest.approx(s.singleton_groups / s.groups)
    assert s.imbalance >= 1.0
    assert s.size_percentiles[0] <= s.size_percentiles[1] <= s.size_percentiles[2]
    assert s.size_percentiles[2] <= s.largest_group


def test_readers_do_not_wait_for_a_background_pass_and_writes_stay_correct(loaded, monkeypatch):
    mem, x, _ = loaded
    import magnetic_core._sleep.sleeper as sleeper

    planning, release = threading.Event(), threading.Event()
    real_plan = sleeper.plan_pass

    def slow_plan(*args, **kwargs):
        planning.set()
        release.wait(10)
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(sleeper, "plan_pass", slow_plan)
    before = assignment(mem)
    future = mem.sleep(background=True)
    assert planning.wait(10)
    # A reader gets its answer while the pass is under way, and sees the old state.
    t0 = time.monotonic()
    assert mem.search(vector=x[3], k=1)[0].id == "c3"
    assert time.monotonic() - t0 < 5
    assert assignment(mem) == before
    # A writer waits for the pass, then lands.
    done = threading.Event()
    writer = threading.Thread(
        target=lambda: (mem.add(["late fact"], ids=["late"], vectors=x[:1]), done.set())
    )
    writer.start()
    assert not done.wait(0.3)
    release.set()
    report = future.result(30)
    writer.join(30)
    assert done.is_set() and report.moved > 0
    assert mem.get(["late"])[0].text == "late fact"
    assert mem.count() == len(x) + 1


def test_sleep_every_n_writes_runs_in_the_background(tmp_path: Path):
    x, _ = clustered(seed=4, k=10, per=60)
    with open_memory(tmp_path / "bg") as mem:
        mem.sleep_every(500)
        mem.add([f"f{i}" for i in range(400)], vectors=x[:400])
        assert mem._sleeper._pending is None
        mem.add([f"g{i}" for i in range(200)], vectors=x[400:600])
        report = mem._sleeper._pending.result(30)
        assert report.before.count == 600 and not report.dry_run
        with pytest.raises(InvalidInputError):
            mem.sleep_every(-1)


def test_contractions_and_chit_chat_never_label_a_group(tmp_path: Path):
    texts = [
        "I'm sure I've got a lot of pottery glaze recipes",
        "I'm really into pottery glaze, I've tried many",
        "I've been firing pottery glaze in a kiln, I'm happy",
        "yeah I'm thinking I've seen that pottery glaze",
    ]
    vecs = np.tile(np.eye(48, dtype=np.float32)[0], (4, 1)) + 0.01 * np.eye(48)[1:5]
    with open_memory(tmp_path / "lab") as mem:
        mem.add(texts, vectors=vecs)
        mem.sleep()
        labels = [g.label for g in mem.groups()]
    assert labels and all("'" not in lab and "really" not in lab for lab in labels)
    assert any("pottery" in lab or "glaze" in lab for lab in labels)


def test_cohesion_is_cell_weighted_mean_of_member_similarity(loaded):
    mem, _, _ = loaded
    mem.sleep(config=SleepConfig(neighbours=4))
    groups = mem.groups()
    weighted = sum(g.cohesion * g.size for g in groups) / sum(g.size for g in groups)
    assert mem.stats().mean_cohesion == pytest.approx(weighted, abs=1e-5)
