"""The LoCoMo benchmark runs end to end on two short conversations (hashing vectors)."""

from __future__ import annotations

import json

from benchmarks import locomo


def test_locomo_smoke(tmp_path, monkeypatch, shared_data):
    monkeypatch.setenv("MAGNETIC_BENCH_CACHE", str(tmp_path / "cache"))
    locomo.main(["--smoke", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "locomo_smoke.json").read_text())
    systems = {r["system"]: r for r in result["rows"]}
    assert set(locomo.SYSTEMS) | set(locomo.VARIANTS) == set(systems)
    assert result["questions"] > 20
    for row in systems.values():
        for k in locomo.KS:
            assert set(row[f"recall_at_{k}"]) >= {"all", "train"}
            assert all(0.0 <= v <= 1.0 for v in row[f"recall_at_{k}"].values())
        assert row["recall_at_10"]["all"] >= row["recall_at_5"]["all"]
    assert systems["MagneticMemory default"]["p50_ms"] > 0
    assert "Turn recall@10" in (tmp_path / "locomo_smoke.md").read_text()


def test_evidence_ids_are_normalised():
    assert locomo.evidence_ids(["D8:6; D9:17", "D:11:26", "D1:3"]) == (
        "D8:6",
        "D9:17",
        "D11:26",
        "D1:3",
    )
    assert locomo.session_timestamp("1:56 pm on 8 May, 2023") == "2023-05-08T13:56:00"
