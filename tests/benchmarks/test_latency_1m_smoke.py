"""latency_recall's 1M-run options: named result files, systems left out, stage breakdown."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("matplotlib")

from benchmarks import common, latency_recall  # noqa: E402
from magnetic_core.eval import clustered_data  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    # Smoke runs never read or write the real embedding cache.
    monkeypatch.setenv("MAGNETIC_BENCH_CACHE", str(tmp_path / "cache"))


def test_named_run_leaves_out_skipped_systems(tmp_path):
    argv = ["--smoke", "--out", str(tmp_path), "--name", "latency_1m"]
    latency_recall.main([*argv, "--skip", "numpy-flat,faiss-ivf-flat,magnetic+text"])
    result = json.loads((tmp_path / "latency_1m.json").read_text())
    systems = {r["system"] for res in result["results"] for r in res["systems"]}
    assert "magnetic" in systems
    assert not systems & {"numpy-flat", "faiss-ivf-flat", "magnetic+text"}
    growth = result["magnetic_p50_over_smallest_n"]
    assert growth[min(growth, key=int)] == 1.0
    assert (tmp_path / "latency_1m_latency_vs_n.png").stat().st_size > 0
    assert not (tmp_path / "latency_recall.json").exists()  # the default files are untouched


def test_stage_times_break_a_coded_query_down():
    vecs, _ = clustered_data(8001, 384, 60, spread=0.8, decay=1.5, seed=3)
    memory = common.unpersisted(common.in_memory(common.VectorsOnly("x", 384)))
    memory.add([""] * 8000, ids=[str(i) for i in range(8000)], vectors=vecs[1:])
    stages = latency_recall.stage_times(memory, vecs[:5])
    memory.close()
    assert stages["groups_total"] > 1
    assert all(stages[k] > 0 for k in ("centroids", "groups", "cells", "search"))
