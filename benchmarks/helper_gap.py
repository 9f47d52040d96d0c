"""The search helper against the pause between queries: when a second core pays and when not.

Usage: ``python -m benchmarks.helper_gap [--n 100000] [--queries 150] [--rounds 4]
[--pauses 0,1,2,5,10,20,50]``

One process, one in-memory store of ``--n`` Reuters MiniLM passages (latency_recall's split,
Chroma writes off), held-out passages as vector queries, ``search(vector=v, k=10)``. For each
pause (milliseconds of ``time.sleep`` before each query, none timed) the queries run with
the helper off (``MAGNETIC_SEARCH_HELPER=0``) and on, alternated ``--rounds`` times; each row
gives the median over rounds of each p50, their ratio, the share of queries the helper
answered (a query goes to it only when the one before ended at most ``STREAM_GAP`` ago), and
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


def _run(memory: Any, queries: np.ndarray, pause: float, on: bool) -> dict[str, Any]:
    from magnetic_core._search import helper

    os.environ["MAGNETIC_SEARCH_HELPER"] = "1" if on else "0"
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
    for on in (False, True):  # warm-up: scorer built, kernels loaded, helper's pool started
        _run(memory, queries[:50], 0.0, on)
    rows = []
    for pause_ms in (float(p) for p in args.pauses.split(",") if p):
        got: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
        for _ in range(args.rounds):
            for on in (False, True):
                got[on].append(_run(memory, queries, pause_ms / 1000, on))
        same = all(r["hits"] == got[False][0]["hits"] for r in got[False] + got[True])

        def med(on: bool, key: str, got: dict[bool, list[dict[str, Any]]] = got) -> float:
            return round(statistics.median(r[key] for r in got[on]), 4)

        row = {
            "pause_ms": pause_ms,
            "off_p50_ms": med(False, "p50_ms"),
            "on_p50_ms": med(True, "p50_ms"),
            "ratio": round(med(True, "p50_ms") / med(False, "p50_ms"), 3),
            "on_p50_each_round": [round(r["p50_ms"], 4) for r in got[True]],
            "off_p50_each_round": [round(r["p50_ms"], 4) for r in got[False]],
            "helped_share": med(True, "helped"),
            "thread_cpu_ms": [med(False, "thread_cpu_ms"), med(True, "thread_cpu_ms")],
            "process_cpu_ms": [med(False, "process_cpu_ms"), med(True, "process_cpu_ms")],
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
            "p50 per round (off; on)",
            "share helped",
            "calling thread CPU ms (off, on)",
            "process CPU ms (off, on)",
            "same hits",
        ],
        [
            [
                r["pause_ms"],
                r["off_p50_ms"],
                r["on_p50_ms"],
                r["ratio"],
                f"{r['off_p50_each_round']}; {r['on_p50_each_round']}",
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
        f"{args.queries} held-out queries, each after the pause; the helper off and on "
        f"alternated {args.rounds} times (medians of the rounds' p50). CPU: median per query.\n\n"
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
