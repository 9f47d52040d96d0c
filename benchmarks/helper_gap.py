"""The search helper against the pause between queries: when a second core pays and when not.

Usage: ``python -m benchmarks.helper_gap [--n 100000] [--queries 150] [--rounds 4]
[--pauses 0,1,2,5,10,20,50]``

One process, one in-memory store of ``--n`` Reuters MiniLM passages (latency_recall's split,
Chroma writes off), held-out passages as vector queries, ``search(vector=v, k=10)``. For each
pause (milliseconds of ``time.sleep`` before each query, none timed) the queries run with
the helper off (``MAGNETIC_SEARCH_HELPER=0``), on (its own rule: a query goes to it only when
the one before ended at most ``STREAM_GAP`` ago) and forced (every query, ``STREAM_GAP``
infinite: where the rule's line should lie), alternated ``--rounds`` times; each row gives
the median over rounds of each p50, their ratios to off, the share of queries the helper
answered, and
the CPU per query of the calling thread (``time.thread_time``) and of the whole process
(``time.process_time``: with the helper, its core's time too, including the time its pool
spins waiting for the next call). Hits are compared query by query.

Results: ``benchmarks/results/helper_gap.md`` / ``.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common
from benchmarks.revisions import split

K = 10
GAP = 0.005  # (set from the helper's own value in main)


MODES = ("off", "on", "forced")


def _run(memory: Any, queries: np.ndarray, pause: float, mode: str) -> dict[str, Any]:
    from magnetic_core._search import helper

    os.environ["MAGNETIC_SEARCH_HELPER"] = "0" if mode == "off" else "1"
    helper.STREAM_GAP = float("inf") if mode == "forced" else GAP
    wall, thread_cpu, cpu, hits = [], [], [], []
    before = helper._HELPER.beside
    for q in queries:
        if pause:
            time.sleep(pause)
        t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
        found = memory.search(vector=q, k=K)
        wall.append(time.perf_counter() - t0)
        thread_cpu.append(time.thread_time() - c0)
        cpu.append(time.process_time() - p0)
        hits.append([(h.id, h.score) for h in found])
    return {
        "p50_ms": common.percentiles_ms(wall)["p50_ms"],
        "thread_cpu_ms": common.percentiles_ms(thread_cpu)["p50_ms"],
        "process_cpu_ms": common.percentiles_ms(cpu)["p50_ms"],
        "helped": (helper._HELPER.beside - before) / len(queries),
        "hits": hits,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--pauses", default="0,1,2,5,10,20,50", help="milliseconds, comma-separated")
    ap.add_argument("--name", default="helper_gap")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args(argv)
    base, _, queries = split(args.n, args.queries)
    memory = common.unpersisted(common.in_memory(common.VectorsOnly("bench-minilm", base.shape[1])))
    common.add_in_batches(memory, [""] * len(base), base, 5000, [f"c{i}" for i in range(len(base))])
    global GAP
    from magnetic_core._search import helper

    GAP = helper.STREAM_GAP
    for mode in MODES:  # warm-up: scorer built, kernels loaded, helper's pool started
        _run(memory, queries[:50], 0.0, mode)
    rows = []
    for pause_ms in (float(p) for p in args.pauses.split(",") if p):
        got: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
        for r in range(args.rounds):  # (the order of the modes turns each round)
            for mode in MODES[r % 3 :] + MODES[: r % 3]:
                got[mode].append(_run(memory, queries, pause_ms / 1000, mode))
        first = got["off"][0]["hits"]
        same = all(run["hits"] == first for runs in got.values() for run in runs)

        def med(mode: str, key: str, got: dict[str, list[dict[str, Any]]] = got) -> float:
            return round(statistics.median(r[key] for r in got[mode]), 4)

        row = {
            "pause_ms": pause_ms,
            **{f"{mode}_p50_ms": med(mode, "p50_ms") for mode in MODES},
            "ratio": round(med("on", "p50_ms") / med("off", "p50_ms"), 3),
            "forced_ratio": round(med("forced", "p50_ms") / med("off", "p50_ms"), 3),
            **{
                f"{mode}_p50_each_round": [round(r["p50_ms"], 4) for r in got[mode]]
                for mode in MODES
            },
            "helped_share": med("on", "helped"),
            "thread_cpu_ms": [med(mode, "thread_cpu_ms") for mode in MODES],
            "process_cpu_ms": [med(mode, "process_cpu_ms") for mode in MODES],
            "same_hits": same,
        }
        rows.append(row)
        print(row, flush=True)
    os.environ.pop("MAGNETIC_SEARCH_HELPER", None)
    table = common.markdown_table(
        [
            "pause ms",
            "p50 off ms",
            "p50 on ms",
            "on / off",
            "p50 forced ms",
            "forced / off",
            "p50 per round (off; on; forced)",
            "share helped (on)",
            "calling thread CPU ms (off, on, forced)",
            "process CPU ms (off, on, forced)",
            "same hits",
        ],
        [
            [
                r["pause_ms"],
                r["off_p50_ms"],
                r["on_p50_ms"],
                r["ratio"],
                r["forced_p50_ms"],
                r["forced_ratio"],
                f"{r['off_p50_each_round']}; {r['on_p50_each_round']}; "
                f"{r['forced_p50_each_round']}",
                r["helped_share"],
                r["thread_cpu_ms"],
                r["process_cpu_ms"],
                r["same_hits"],
            ]
            for r in rows
        ],
    )
    intro = (
        f"search(vector=, k=10) at {args.n} Reuters MiniLM passages (in memory, defaults), "
        f"{args.queries} held-out queries, each after the pause; the helper off, on (its own "
        f"rule: a query within {GAP * 1000:g} ms of the one before) and forced (every query), "
        f"alternated {args.rounds} times in turning order (medians of the rounds' p50). CPU: "
        f"median per query.\n\n"
    )
    common.write_results(
        Path(args.out),
        args.name,
        {"n": args.n, "queries": args.queries, "rounds": args.rounds, "rows": rows},
        intro + table,
        "The search helper against the pause between queries",
    )


if __name__ == "__main__":
    main()
