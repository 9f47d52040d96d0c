"""The soak benchmark runs end to end on a few hundred operations (not a timing test)."""

from __future__ import annotations

import json

from benchmarks import soak


def test_soak_smoke_survives_and_reopens_everything(tmp_path):
    assert soak.main(["--smoke", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "soak.json").read_text())
    assert result["status"] == "ok"
    assert result["ops_done"] == result["ops_planned"] == 300
    reopened = result["reopened"]
    assert reopened["reopened_count"] == reopened["expected"] > 0
    steps = result["checkpoints"]
    assert [p["ops"] for p in steps] == [100, 200, 300]
    assert all(p["rss_mb"] > 0 and p["search"]["p50_ms"] > 0 for p in steps)
    assert (tmp_path / "soak.md").read_text().startswith("# Soak")


def test_the_chroma_baseline_runs_the_same_stream(tmp_path):
    assert soak.main(["--smoke", "--system", "chroma", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "soak_chroma.json").read_text())
    assert result["status"] == "ok" and result["ops_done"] == 300
    assert result["reopened"]["reopened_count"] == result["reopened"]["expected"] > 0
    steps = result["checkpoints"]
    assert all(p["groups"] == 0 and p["index_files_mb"] >= 0 for p in steps)
    assert steps[-1]["deleted"] > 0  # the stream deletes, as the magnetic run's does
