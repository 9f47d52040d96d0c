"""Where the join threshold comes from, and its recalibration at fixed cell counts."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core._index.calibration import Calibration
from magnetic_core._index.clustering import calibrate_threshold
from magnetic_core._index.index import HierIndex
from magnetic_core.config import MemoryConfig

D = 12


def _data(n: int, seed: int = 0) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((6, D))
    v = centres[rng.integers(0, 6, n)] + 0.5 * rng.standard_normal((n, D))
    return [f"c{i}" for i in range(n)], (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(
        np.float32
    )


@pytest.mark.parametrize(
    ("join", "settings", "want"),
    [
        (0.7, {"mag_join_threshold": 0.6, "mag_threshold": 0.5}, (0.7, "configured")),
        (None, {"mag_join_threshold": 0.6, "mag_threshold": 0.5}, (0.6, "configured")),
        (None, {"mag_threshold": 0.5, "mag_calibrated_n": 64}, (0.5, "calibrated")),
        (None, {}, (0.42, "provisional")),
    ],
)
def test_the_threshold_in_force_and_where_it_comes_from(join, settings, want):
    config = MemoryConfig(join_threshold=join, provisional_threshold=0.42)
    cal = Calibration(config, settings)
    assert (cal.threshold, cal.source) == want


@pytest.mark.parametrize(
    ("size", "calibrated", "want"),
    [(256, 0, 32), (256, 32, 64), (256, 100, 128), (256, 128, 256), (256, 256, None),
     (300, 256, 300), (300, 300, None), (20, 0, 20), (2, 0, 2)],
)  # fmt: skip
def test_checkpoints_double_from_32_up_to_the_calibration_size(size, calibrated, want):
    cal = Calibration(MemoryConfig(calibration_size=size), {"mag_calibrated_n": calibrated})
    assert cal.next_checkpoint() == want


def test_a_configured_threshold_is_never_recalibrated():
    cal = Calibration(MemoryConfig(join_threshold=0.3), {})
    assert cal.next_checkpoint() is None
    index = HierIndex(D, 64)
    ids, vecs = _data(100)
    cal.assign(index, ids, vecs)
    saved: list[dict] = []
    cal.commit(lambda **s: saved.append(s))
    assert cal.threshold == 0.3 and saved == [] and len(index) == 100


def test_reaching_a_checkpoint_recalibrates_from_every_cell_and_commit_saves_it():
    config = MemoryConfig(calibration_size=64, calibration_percentile=10.0)
    cal = Calibration(config, {})
    index = HierIndex(D, 256)
    ids, vecs = _data(50)
    cal.assign(index, ids, vecs)  # passes the checkpoint 32
    want = calibrate_threshold(vecs[:32], 10.0)
    assert cal.source == "calibrated" and cal.calibrated_n == 32
    assert cal.threshold == pytest.approx(want)
    saved: list[dict] = []
    cal.commit(lambda **s: saved.append(s))
    assert saved == [{"mag_threshold": cal.threshold, "mag_calibrated_n": 32}]
    cal.commit(lambda **s: saved.append(s))
    assert len(saved) == 1  # saved once
    assert cal.next_checkpoint() == 64


def test_nothing_is_saved_before_commit_so_a_failed_write_keeps_the_stored_threshold():
    cal = Calibration(MemoryConfig(), {"mag_threshold": 0.55, "mag_calibrated_n": 0})
    ids, vecs = _data(40)
    cal.assign(HierIndex(D, 256), ids, vecs)
    assert cal.threshold != 0.55  # recalibrated in memory...
    reopened = Calibration(MemoryConfig(), {"mag_threshold": 0.55, "mag_calibrated_n": 0})
    assert reopened.threshold == 0.55  # ...but what a reload reads is unchanged


@pytest.mark.parametrize("batch", [1, 7, 33, 500])
def test_adding_in_batches_gives_the_hierarchy_of_one_at_a_time(batch: int):
    ids, vecs = _data(300, seed=3)
    config = MemoryConfig(calibration_size=256, max_group_size=40)

    def build(step: int) -> tuple[dict[str, str], float]:
        cal, index = Calibration(config, {}), HierIndex(D, 40)
        for start in range(0, len(ids), step):
            cal.assign(index, ids[start : start + step], vecs[start : start + step])
        return {c: g.gid for c, g in index.loc.items()}, cal.threshold

    assert build(batch) == build(1)


def test_upserts_count_only_new_cells_towards_a_checkpoint():
    cal = Calibration(MemoryConfig(), {})
    index = HierIndex(D, 256)
    ids, vecs = _data(31)
    cal.assign(index, ids, vecs)
    cal.assign(index, ids[:10], vecs[:10])  # 10 upserts: still 31 cells
    assert cal.source == "provisional"
    _, more = _data(1, seed=9)
    cal.assign(index, ["new"], more)
    assert cal.source == "calibrated" and cal.calibrated_n == 32
