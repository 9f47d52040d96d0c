"""Search under steady writes: the soak's stream on a store of a few thousand cells.

Usage: ``python -m benchmarks.churn [--cells 4500] [--ops 3000] [--seed 7] [--reps 2]``

A persisted store (``HashingEmbedder``, in a temporary directory) is filled with
``--cells`` cells and then fed ``--ops`` operations drawn from ``benchmarks.soak.MIX`` (40%
adds of 1-8 cells, upserts, deletes, 17% searches, a few merges), as the soak does. Every
search is timed, and the time spent bringing the scorer up to date (``Scorer.sync``) and
scoring changed groups exactly is summed; then the same searches are timed again on the
store as it stands (no write between them). Each repetition runs the stream twice, with
the scorer (``search.EXACT_SHARE`` out of reach, as before session 8) and at the default
(stores the budget mostly covers are scored exactly), one after the other so both see the
same machine load. Results go to ``benchmarks/results/churn.md`` (and ``.json``).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import common
from benchmarks.soak import MIX, _text
from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_core._search import scorer as scorer_module
from magnetic_core._search import search as search_module

NO_EXACT_SHARE = 1e9  # a share no budget reaches: every store past MIN_CELLS is coded


def _timed(owner: Any, name: str, spent: dict[str, float]) -> Callable[[], None]:
    """Wrap ``owner.name`` to add its time to ``spent[name]``; returns the undo."""
    real = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t

    setattr(owner, name, wrapper)
    return lambda: setattr(owner, name, real)


def run(cells: int, ops: int, seed: int, exact_share: float) -> dict[str, Any]:
    search_module.EXACT_SHARE = exact_share
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        mem = MagneticMemory(path=tmp, embedder=HashingEmbedder())
        live: list[str] = []
        for start in range(0, cells, 500):
            ids = [f"p{start + j}" for j in range(min(500, cells - start))]
            mem.add([_text(rng, start + j) for j in range(len(ids))], ids=ids)
            live += ids
        kinds, weights = zip(*MIX.items(), strict=True)
        serial, lat, queries = 0, [], []
        spent: dict[str, float] = {}
        undo = [
            _timed(scorer_module.Scorer, "sync", spent),
            _timed(scorer_module, "_exact_groups", spent),
        ]
        try:
            for op in range(ops):
                kind = rng.choices(kinds, weights)[0]
                if kind == "add":
                    k = rng.randint(1, 8)
                    ids = [f"n{serial + j}" for j in range(k)]
                    serial += k
                    mem.add([_text(rng, serial + j) for j in range(k)], ids=ids)
                    live.extend(ids)
                elif kind == "upsert":
                    ids = list({rng.choice(live) for _ in range(rng.randint(1, 4))})
                    mem.add([_text(rng, serial + j) for j in range(len(ids))], ids=ids)
                elif kind == "delete" and len(live) > 100:
                    n = rng.randint(1, 4) + max(0, len(live) - cells) // 20
                    gone = {rng.choice(live) for _ in range(n)}
                    mem.delete(ids=list(gone))
                    live[:] = [c for c in live if c not in gone]
                elif kind == "search":
                    query = _text(rng, op)
                    t = time.perf_counter()
                    mem.search(query, k=10)
                    lat.append(time.perf_counter() - t)
                    queries.append(query)
                elif kind == "merge":
                    mem.apply_merges(mem.plan_merges())
        finally:
            for u in undo:
                u()
        static = []
        for query in queries:
            t = time.perf_counter()
            mem.search(query, k=10)
            static.append(time.perf_counter() - t)
        count = mem.count()
        mem.close()
    n = max(len(lat), 1)
    return {
        "machine": common.machine_info(),
        "cells_start": cells,
        "cells_end": count,
        "ops": ops,
        "searches": len(lat),
        "min_cells": scorer_module.MIN_CELLS,
        "exact_share": exact_share,
        "search_p50_ms": float(np.median(lat) * 1e3),
        "search_p95_ms": float(np.percentile(lat, 95) * 1e3),
        "static_p50_ms": float(np.median(static) * 1e3),
        "sync_ms_per_search": spent.get("sync", 0.0) * 1e3 / n,
        "exact_stale_ms_per_search": spent.get("_exact_groups", 0.0) * 1e3 / n,
    }


def table(runs: list[dict[str, Any]]) -> str:
    r = runs[0]
    lines = [
        "# Search under steady writes (the soak's stream)",
        "",
        f"Machine: {r['machine']['cpu_model']}, {r['machine']['logical_cores']} logical cores, "
        f"load {r['machine'].get('load_avg_at_start')} at the start; "
        f"{r['machine']['date_utc']} UTC.",
        "",
        f"{r['cells_start']} cells (HashingEmbedder), then {r['ops']} operations of "
        f"`benchmarks.soak.MIX` (about {r['searches']} searches); about {r['cells_end']} cells "
        f"at the end. `scorer.MIN_CELLS` = {r['min_cells']}. Times in ms; `sync` is the "
        "scorer's re-coding and `stale exact` the exact scoring of groups changed since they "
        "were coded, per search; `static` times the same searches again afterwards.",
        "",
        "| run | search | p50 under writes | p95 | sync | stale exact | static p50 |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for i, r in enumerate(runs):
        how = (
            "scorer (as before)"
            if r["exact_share"] >= NO_EXACT_SHARE
            else f"exact while budget >= {r['exact_share']} N"
        )
        lines.append(
            f"| {i // 2 + 1} | {how} | {r['search_p50_ms']:.3g} | {r['search_p95_ms']:.3g} | "
            f"{r['sync_ms_per_search']:.3g} | {r['exact_stale_ms_per_search']:.3g} | "
            f"{r['static_p50_ms']:.3g} |"
        )
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=4500)
    parser.add_argument("--ops", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--out", default="churn", help="results file name (no suffix)")
    args = parser.parse_args(argv)
    default = search_module.EXACT_SHARE
    runs = [
        run(args.cells, args.ops, args.seed + rep, share)
        for rep in range(args.reps)
        for share in (NO_EXACT_SHARE, default)
    ]
    search_module.EXACT_SHARE = default
    out = common.RESULTS / f"{args.out}.json"
    out.write_text(json.dumps(runs, indent=2))
    out.with_suffix(".md").write_text(table(runs))
    print(table(runs))


if __name__ == "__main__":
    main()
