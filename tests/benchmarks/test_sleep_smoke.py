"""The sleep benchmark runs end to end on small hashing data (not a timing test)."""

from __future__ import annotations

import json

from benchmarks import sleep


def test_sleep_benchmark_smoke(tmp_path, monkeypatch):
    monkeypatch.setenv("MAGNETIC_BENCH_CACHE", str(tmp_path / "cache"))
    sleep.main(["--smoke", "--queries", "50", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "sleep_smoke.json").read_text())
    parts = {r["part"]: r for r in result["rows"]}
    assert set(parts) == {"msc", "reuters", "synthetic"}
    for row in parts.values():
        assert row["before"]["groups"] > 0 and row["pass"]["seconds"] >= 0
    assert 0.0 <= parts["reuters"]["after"]["recall_at_10"] <= 1.0
    assert 0.0 <= parts["synthetic"]["after"]["nmi_vs_kmeans"] <= 1.0
    assert (tmp_path / "sleep_smoke.md").read_text().startswith("# ")
