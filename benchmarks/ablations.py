"""Ablations: n_probe, join threshold percentile, group size cap and sketch rank.

Usage: ``python -m benchmarks.ablations [--n 100000]``

Each variant builds a MagneticMemory in memory (same Reuters MiniLM vectors and held-out
queries as ``latency_recall``) and sweeps ``n_probe``; every point is (search p50, tie-aware
recall@10 against exact). The plot is the latency/recall trade-off curve per variant.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common
from benchmarks.latency_recall import EMBEDDER_NAME, K, reuters, time_queries
from magnetic_core import MemoryConfig
from magnetic_core.eval import exact_knn, recall_at_k_tie_aware

PROBES = (8, 16, 32, 64, 96, 128, 192)
BUDGETS = (2048, 4096, 8192, 12000, 16384, 24000)


def build(base: np.ndarray, texts: list[str], config: MemoryConfig, rebalance_from: int = 0) -> Any:
    """An in-memory MagneticMemory holding ``base`` (optionally with Lloyd rebalancing)."""
    memory = common.unpersisted(
        common.in_memory(common.VectorsOnly(EMBEDDER_NAME, base.shape[1]), config)
    )
    if rebalance_from:
        # An engine option not exposed in MemoryConfig: set it on the fresh, empty index.
        memory._index.rebalance_from = rebalance_from
        memory._index._next_rebalance = rebalance_from
    common.add_in_batches(memory, texts, base, 5000, [f"c{i}" for i in range(base.shape[0])])
    return memory


def sweep(memory: Any, queries: np.ndarray, truth: np.ndarray, probes: tuple[int, ...]):
    """(n_probe, p50, p95, recall) for each n_probe (exactly that many groups)."""
    points = []
    for n_probe in probes:

        def search(i: int, n_probe: int = n_probe) -> list[float]:
            return [h.score for h in memory.search(vector=queries[i], k=K, n_probe=n_probe)]

        lat, found = time_queries(search, queries.shape[0])
        points.append(
            {
                "n_probe": n_probe,
                **lat,
                "recall_at_10": round(recall_at_k_tie_aware(found, truth, K), 4),
            }
        )
    return points


def budget_sweep(memory: Any, queries: np.ndarray, truth: np.ndarray) -> list[dict[str, Any]]:
    """Default search (n_probe from the config) for several ``probe_cells`` budgets."""
    default = memory.config
    points = []
    for cells in BUDGETS:
        memory.config = default.with_changes(probe_cells=cells)

        def search(i: int) -> list[float]:
            return [h.score for h in memory.search(vector=queries[i], k=K)]

        lat, found = time_queries(search, queries.shape[0])
        points.append(
            {
                "n_probe": f"{cells} cells",
                **lat,
                "recall_at_10": round(recall_at_k_tie_aware(found, truth, K), 4),
            }
        )
    memory.config = default
    return points


def run(n: int, n_queries: int, smoke: bool) -> list[dict[str, Any]]:
    """Every variant; returns one record per variant with its curve."""
    vecs, texts, _ = reuters(n, n_queries, smoke)
    queries, base, btexts = (
        vecs[:n_queries],
        vecs[n_queries : n_queries + n],
        texts[n_queries : n_queries + n],
    )
    _, truth = exact_knn(base, queries, K)
    default = MemoryConfig()
    variants: list[tuple[str, str, dict[str, Any]]] = [("default", "default", {})]
    variants += [
        ("percentile", f"percentile={p}", {"calibration_percentile": float(p)})
        for p in (10, 25, 50)
    ]
    variants += [("cap", f"max_group_size={c}", {"max_group_size": c}) for c in (64, 128, 512)]
    variants += [("percentile", "Lloyd rebalance at 4096*2^k", {"rebalance_from": 4096})]
    records = []
    for family, name, changes in variants:
        rebalance = changes.pop("rebalance_from", 0)
        memory = build(base, btexts, default.with_changes(**changes), rebalance)
        stats = memory.stats()
        curve = sweep(memory, queries, truth, PROBES)
        records.append(
            {
                "family": family,
                "variant": name,
                "groups": stats.groups,
                "mean_group_size": round(stats.mean_group_size, 1),
                "join_threshold": round(stats.join_threshold, 4),
                "curve": curve,
            }
        )
        print(
            f"{name}: {stats.groups} groups; "
            + ", ".join(
                f"{p['n_probe']}:{p['p50_ms']:.2f}ms/{p['recall_at_10']:.3f}" for p in curve
            ),
            flush=True,
        )
        if family == "default":
            for rank, rerank in ((0, 256), (64, 256), (96, 256), (128, 128)):
                memory.config = default.with_changes(sketch_rank=rank, rerank=rerank)
                curve = sweep(memory, queries, truth, PROBES)
                records.append(
                    {
                        "family": "sketch",
                        "variant": f"sketch_rank={rank}, rerank={rerank}",
                        "groups": stats.groups,
                        "curve": curve,
                    }
                )
            memory.config = default
            records.append(
                {
                    "family": "sketch",
                    "variant": "default n_probe, probe_cells budget",
                    "groups": stats.groups,
                    "curve": budget_sweep(memory, queries, truth),
                }
            )
        memory.close()
    return records


def plot(path: Path, records: list[dict[str, Any]]) -> None:
    """Recall@10 against p50 latency, one panel per family, one line per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = ["percentile", "cap", "sketch"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    default = next(r for r in records if r["family"] == "default")
    for ax, family in zip(axes, families, strict=True):
        for rec in [default] + [r for r in records if r["family"] == family]:
            xs = [p["p50_ms"] for p in rec["curve"]]
            ys = [p["recall_at_10"] for p in rec["curve"]]
            ax.plot(xs, ys, marker="o", label=f"{rec['variant']} ({rec['groups']} groups)")
            for p in rec["curve"]:
                ax.annotate(str(p["n_probe"]), (p["p50_ms"], p["recall_at_10"]), fontsize=6)
        ax.axhline(0.98, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_xlabel("search p50 (ms); labels are n_probe")
        ax.set_title(family)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("tie-aware recall@10")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    """Run and write ``ablations.json`` / ``ablations.md`` / ``ablations.png``."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--smoke", action="store_true", help="300 cells, hashing vectors")
    ap.add_argument("--out", type=Path, default=common.RESULTS)
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.queries = 300, 20
    records = run(args.n, args.queries, args.smoke)
    rows = [
        [r["variant"], r["groups"], p["n_probe"], p["p50_ms"], p["p95_ms"], p["recall_at_10"]]
        for r in records
        for p in r["curve"]
    ]
    table = common.markdown_table(
        ["variant", "groups", "n_probe", "p50 ms", "p95 ms", "recall@10"], rows
    )
    common.write_results(
        args.out, "ablations", {"n": args.n, "records": records}, table, f"Ablations at N={args.n}"
    )
    plot(args.out / "ablations.png", records)


if __name__ == "__main__":
    main()
