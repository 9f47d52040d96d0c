"""The written results of :mod:`benchmarks.latency_recall`: JSON, markdown and plots."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks import common


def write(
    out: Path,
    results: list[dict[str, Any]],
    args: argparse.Namespace,
    embedding: dict[str, Any],
    compile_times: dict[str, float],
    name: str = "latency_recall",
) -> None:
    """JSON, markdown table and the plots (``<name>.json/.md``; plots ``latency_vs_n.png``
    and ``latency_tradeoff.png``, prefixed ``<name>_`` under another name)."""
    headers = [
        "N",
        "data",
        "system",
        "p50 ms",
        "p95 ms",
        "recall@10",
        "ingest cells/s",
        "cold open s",
        "open RSS MB",
        "setting",
    ]
    rows = []
    for res in results:
        for r in res["systems"]:
            setting = next((f"{k}={r[k]}" for k in ("nprobe", "ef", "groups") if k in r), "")
            if "helper_share" in r:  # (the share of its queries the search helper answered)
                setting = f"{setting} helper={r['helper_share']}".strip()
            rows.append(
                [
                    res["n"],
                    res["data"] + (" (earlier run)" if res.get("earlier_run") else ""),
                    r["system"],
                    r["p50_ms"],
                    r["p95_ms"],
                    r["recall_at_10"],
                    r.get("ingest_cells_per_s"),
                    r.get("cold_open_s"),
                    r.get("open_rss_mb"),
                    setting,
                ]
            )
    table = common.markdown_table(headers, rows)
    ratio_rows = [[res["n"], json.dumps(res["ratios"])] for res in results]
    table += "\nRatios (same run):\n\n" + common.markdown_table(["N", "ratios"], ratio_rows)
    if embedding:
        table += (
            f"\nEmbedding ({embedding['embedder']}, batched): {embedding['passages_per_s']} "
            "passages/s; it bounds end-to-end ingest, so the ingest rates above use cached "
            "vectors.\n"
        )
    stage_rows = [
        [res["n"], res["data"], json.dumps(r["stages_ms"])]
        for res in results
        for r in res["systems"]
        if "stages_ms" in r
    ]
    if stage_rows:
        table += "\nWhere a default query's time goes (median ms per stage, in memory):\n\n"
        table += common.markdown_table(["N", "data", "stages"], stage_rows)
    if compile_times:
        table += (
            "\nFresh process, 6000 cells (import; first query, which builds the scorer and loads"
            f" or compiles every kernel): {json.dumps(compile_times)}\n"
        )
    growth = p50_growth(results)
    table += "\nMagneticMemory p50 over its p50 at the smallest N: " + json.dumps(growth) + "\n"
    curve_rows = [
        [res["n"], r["system"], c.get("probe_cells", c.get("ef")), c["p50_ms"], c["recall_at_10"]]
        for res in results
        for r in res["systems"]
        for c in r.get("curve", [])
    ]
    table += "\nTrade-off curves (probe_cells for magnetic, ef for hnswlib):\n\n"
    table += common.markdown_table(["N", "system", "knob", "p50 ms", "recall@10"], curve_rows)
    common.write_results(
        out,
        name,
        {
            "args": vars(args),
            "embedding": embedding,
            "first_query": compile_times,
            "magnetic_p50_over_smallest_n": growth,
            "results": results,
        },
        table,
        "Latency and recall against N",
    )
    prefix = "" if name == "latency_recall" else f"{name}_"
    plot(out / f"{prefix}latency_vs_n.png", results)
    plot_tradeoff(out / f"{prefix}latency_tradeoff.png", results)


def p50_growth(results: list[dict[str, Any]]) -> dict[int, float]:
    """MagneticMemory's p50 at each N over its p50 at the smallest N (the flatness target)."""
    p50 = {
        res["n"]: r["p50_ms"]
        for res in results
        for r in res["systems"]
        if r["system"] == "magnetic"
    }
    if not p50:
        return {}
    first = p50[min(p50)]
    return {n: round(v / first, 3) for n, v in sorted(p50.items())}


def plot_tradeoff(path: Path, results: list[dict[str, Any]]) -> None:
    """Recall against p50: magnetic's probe budget and hnswlib's ef, one line per N."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for res in results:
        for r in res["systems"]:
            curve = r.get("curve")
            if not curve:
                continue
            style = "-o" if r["system"] == "magnetic" else "--s"
            knob = "probe_cells" if r["system"] == "magnetic" else "ef"
            ax.plot(
                [c["p50_ms"] for c in curve],
                [c["recall_at_10"] for c in curve],
                style,
                markersize=3,
                label=f"{r['system']} ({knob}) N={res['n']:,} {res['data']}",
            )
    ax.set_xscale("log")
    _finish(
        fig,
        ax,
        path,
        ("search p50 latency (ms), k=10, single query", "tie-aware recall@10"),
        "Trade-off: probe budget (magnetic) against ef (hnswlib, M 16)",
        legend_size=6,
    )


def plot(path: Path, results: list[dict[str, Any]]) -> None:
    """Search p50 against N, one line per system (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    systems = dict.fromkeys(r["system"] for res in results for r in res["systems"])
    for name in systems:
        pts = [
            (res["n"], r["p50_ms"])
            for res in results
            for r in res["systems"]
            if r["system"] == name
        ]
        ax.plot(*zip(*pts, strict=True), marker="o", label=name)
        if name == "magnetic":
            for res in results:
                row = next(r for r in res["systems"] if r["system"] == name)
                ax.annotate(
                    f"R={row['recall_at_10']:.2f}",
                    (res["n"], row["p50_ms"]),
                    textcoords="offset points",
                    xytext=(4, -12),
                    fontsize=7,
                )
    ax.set_xscale("log")
    ax.set_yscale("log")
    _finish(
        fig,
        ax,
        path,
        (
            "cells (N); real Reuters MiniLM vectors, then synthetic ones (see table)",
            "search p50 latency (ms), k=10, single query",
        ),
        "Latency against N (MiniLM Reuters vectors; R = magnetic's recall@10)",
        legend_size=8,
    )


def _finish(
    fig: Any, ax: Any, path: Path, labels: tuple[str, str], title: str, legend_size: int
) -> None:
    """Label, grid and legend a plot, then write it to ``path`` and close it."""
    import matplotlib.pyplot as plt

    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def merged(previous: Path, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """This run's results with those of an earlier run at sizes not measured now, by N."""
    if not previous.exists():
        return results
    now = {(r["n"], r["data"]) for r in results}
    old = json.loads(previous.read_text()).get("results", [])
    kept = [{**r, "earlier_run": True} for r in old if (r["n"], r["data"]) not in now]
    return sorted(results + kept, key=lambda r: (r["data"] != "reuters-minilm", r["n"]))
