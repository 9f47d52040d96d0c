"""The issue's targets against the measured numbers, from the result files of the other scripts.

Usage: ``python -m benchmarks.summary [--out DIR]`` (``run_all`` calls it last).
Writes ``summary.md`` and ``summary.json``; a missing result file leaves its rows out.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks import common


def _load(out: Path, name: str) -> dict[str, Any] | None:
    path = out / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _systems(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["system"]: r for r in res["systems"]}


def latency_rows(lat: dict[str, Any]) -> list[list[Any]]:
    """Rows for the latency, recall and ingest targets."""
    rows: list[list[Any]] = []
    real = [res for res in lat["results"] if res["data"] == "reuters-minilm"]
    if real:
        top = max(real, key=lambda r: r["n"])
        s = _systems(top)
        mag, n = s["magnetic"], top["n"]
        if "chroma" in s:
            ratio = mag["p50_ms"] / s["chroma"]["p50_ms"]
            rows.append([f"p50 at {n} / Chroma p50", "<= 0.25", round(ratio, 3), ratio <= 0.25])
        ratio = mag["p50_ms"] / s["numpy-flat"]["p50_ms"]
        rows.append([f"p50 at {n} / numpy flat p50", "<= 0.05", round(ratio, 3), ratio <= 0.05])
        rows.append(
            [
                f"recall@10 at {n} (tie-aware)",
                ">= 0.98",
                mag["recall_at_10"],
                mag["recall_at_10"] >= 0.98,
            ]
        )
        if "chroma" in s:
            ratio = mag["ingest_cells_per_s"] / s["chroma"]["ingest_cells_per_s"]
            rows.append(
                [
                    f"persisted ingest at {n} / Chroma add rate",
                    ">= 0.9",
                    round(ratio, 3),
                    ratio >= 0.9,
                ]
            )
        rate = mag["assignment_cells_per_s"]
        rows.append([f"in-memory assignment at {n} (cells/s)", ">= 50000", rate, rate >= 50_000])
    synth = [res for res in lat["results"] if res["data"] != "reuters-minilm"]
    if synth and real:
        small = min(real, key=lambda r: r["n"])
        big = synth[0]
        big_mag = _systems(big)["magnetic"]
        ratio = big_mag["p50_ms"] / _systems(small)["magnetic"]["p50_ms"]
        rows.append(
            [
                f"p50 at {big['n']} ({big['data']}) / p50 at {small['n']}",
                "<= 2",
                f"{ratio:.3g} (recall@10 at {big['n']}: {big_mag['recall_at_10']})",
                ratio <= 2,
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    """Write the targets table."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=common.RESULTS)
    args = ap.parse_args(argv)
    rows: list[list[Any]] = []
    lat = _load(args.out, "latency_recall")
    if lat:
        rows += latency_rows(lat)
    sci = _load(args.out, "scifact")
    if sci:
        default = next(r for r in sci["rows"] if r["system"] == "MagneticMemory default")
        flat = sci["rows"][0]["ndcg_at_10"]
        rows.append(
            [
                "SciFact nDCG@10 (flat dense / BM25: 0.645 / 0.660)",
                ">= 0.645, aim > 0.660",
                default["ndcg_at_10"],
                default["ndcg_at_10"] >= max(0.645, flat),
            ]
        )
    nd = _load(args.out, "needles")
    if nd:
        found = nd["found_top3"]["MagneticMemory default"]
        rows.append(
            [
                f"needles in top 3 ({nd['haystack']} haystack)",
                f"{nd['needles']}/{nd['needles']}",
                f"{found}/{nd['needles']}",
                found == nd["needles"],
            ]
        )
    table = common.markdown_table(
        ["target", "wanted", "measured", "met"],
        [[t, w, m, "yes" if ok else "**no**"] for t, w, m, ok in rows],
    )
    common.write_results(args.out, "summary", {"rows": rows}, table, "Targets against measurements")


if __name__ == "__main__":
    main()
