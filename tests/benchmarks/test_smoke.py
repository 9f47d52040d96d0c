"""Each benchmark script runs end to end on a few hundred items (not a timing test)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("matplotlib")

from benchmarks import (  # noqa: E402
    ablations,
    latency_recall,
    locomo,
    needles,
    run_all,
    scifact,
    summary,
)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    # Smoke runs never read or write the real embedding cache.
    monkeypatch.setenv("MAGNETIC_BENCH_CACHE", str(tmp_path / "cache"))


def _load(path):
    assert path.exists(), f"{path.name} was not written"
    return json.loads(path.read_text())


def test_latency_recall_smoke(tmp_path):
    latency_recall.main(["--smoke", "--out", str(tmp_path)])
    result = _load(tmp_path / "latency_recall.json")
    systems = {r["system"] for res in result["results"] for r in res["systems"]}
    assert {"numpy-flat", "magnetic", "chroma"} <= systems
    for res in result["results"]:
        for row in res["systems"]:
            assert 0.0 <= row["recall_at_10"] <= 1.0
            assert row["p50_ms"] > 0
    assert result["machine"]["logical_cores"]
    assert (tmp_path / "latency_vs_n.png").stat().st_size > 0
    assert (tmp_path / "latency_recall.md").read_text().startswith("# ")


def test_scifact_smoke(tmp_path):
    scifact.main(["--smoke", "--out", str(tmp_path)])
    rows = _load(tmp_path / "scifact.json")["rows"]
    assert rows[0]["system"].startswith("flat")
    assert all(0.0 <= r["ndcg_at_10"] <= 1.0 for r in rows)


def test_needles_smoke(tmp_path):
    needles.main(["--smoke", "--out", str(tmp_path)])
    result = _load(tmp_path / "needles.json")
    assert result["needles"] >= 20
    assert set(result["found_top3"]) >= {"MagneticMemory default", "flat exact (dense)"}


def test_ablations_smoke(tmp_path):
    ablations.main(["--smoke", "--out", str(tmp_path)])
    records = _load(tmp_path / "ablations.json")["records"]
    assert {r["family"] for r in records} >= {"default", "percentile", "cap", "sketch"}
    assert (tmp_path / "ablations.png").exists()


def test_run_all_smoke_writes_every_result(tmp_path, monkeypatch):
    calls = []
    for module in (scifact, needles, locomo, latency_recall, ablations):
        monkeypatch.setattr(module, "main", lambda argv, m=module: calls.append((m, argv)))
    monkeypatch.setattr(summary, "main", lambda argv: calls.append((summary, argv + ["--smoke"])))
    run_all.main(["--smoke", "--out", str(tmp_path)])
    assert len(calls) == 6
    assert all("--smoke" in argv and str(tmp_path) in argv for _, argv in calls)


def test_summary_reads_the_smoke_results(tmp_path):
    latency_recall.main(["--smoke", "--out", str(tmp_path)])
    needles.main(["--smoke", "--out", str(tmp_path)])
    summary.main(["--out", str(tmp_path)])
    text = (tmp_path / "summary.md").read_text()
    assert "Chroma p50" in text and "needles in top 3" in text
