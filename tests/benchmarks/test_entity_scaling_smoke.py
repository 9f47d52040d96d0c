"""The entity-scaling benchmark runs end to end on small logs (not a timing test)."""

from __future__ import annotations

import json

from benchmarks import entity_scaling


def test_entity_scaling_smoke(tmp_path):
    entity_scaling.main(["--smoke", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "entity_scaling.json").read_text())
    rows = result["rows"]
    assert all(r["chars"] >= n for r, n in zip(rows, entity_scaling.SMOKE_SIZES, strict=True))
    assert rows[1]["entities"] > rows[0]["entities"] > 100
    assert (tmp_path / "entity_scaling.md").read_text().startswith("# ")
