"""In-memory assignment rate across git revisions: one ``HierIndex.assign`` pass per size.

Usage: ``python -m benchmarks.assignment --rev 6c001ad --label before --rev HEAD --label after
[--sizes real:10000,real:25000,real:100000,synthetic:250000,synthetic:1000000]
[--recall-max 250000] [--rounds 2] [--beside]``

What ``benchmarks.latency_recall`` reports as ``assignment_cells_per_s``, measured for each
revision side by side, in child processes that import only that revision's tree
(``benchmarks.revisions``): a fresh ``HierIndex(d, max_group_size)`` assigns the whole base
in one call at the store's join threshold with the store's chunk size. The threshold is the
one the revision's own ``MagneticMemory`` calibrates on the same base (its first cells).
Every kernel is compiled by a throwaway pass before the timed one.
Rounds interleave the revisions (A, B, A, B) and the median rate is kept, because the
machine is shared; the CPU time of the pass is reported beside the wall time.

For sizes up to ``--recall-max`` each revision's store (defaults, in memory, Chroma writes
off, vectors added in batches of 1000) also answers 300 held-out queries (k=10) and its
tie-aware recall@10 against exact search is reported, with its group count.

Data: real sizes are ``latency_recall``'s seeded split of the cached Reuters MiniLM vectors
(held-out passages as queries); synthetic sizes are prefixes of one draw of the structured
mixture (:mod:`benchmarks.synthetic`) at the largest synthetic size, queries held out from
the smallest synthetic base, as ``latency_recall`` draws them.

Each pass's system time and minor page faults (``getrusage``) are reported beside its rate.
With ``--beside`` each process then times a second pass while the first pass's index stays
alive, as a pass into a large live store runs: on the Intel Xeon VM of sessions 33-34 its
page faults cost about ten times the system time, because memory that VM has not used
recently is slow to touch the first time (see the results README, session 34).

Results: ``benchmarks/results/assignment.md`` / ``.json``.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common
from benchmarks.revisions import checkouts, child, revision_parser, split
from magnetic_core.eval import exact_knn, recall_at_k_tie_aware

K = 10
SIZES = "real:10000,real:25000,real:100000,synthetic:250000,synthetic:1000000"

# Runs inside the revision's tree: the store's threshold, optionally its recall, then the pass.
PROBE = r"""
import json, sys, time
import numpy as np
from benchmarks import common
from magnetic_core import MemoryConfig
from magnetic_core._index.index import HierIndex
data = np.load(sys.argv[1])
base, queries, recall = data["base"], data["queries"], sys.argv[2] == "1"
n = base.shape[0]
memory = common.unpersisted(common.in_memory(common.VectorsOnly("bench-minilm", base.shape[1])))
size = n if recall else min(n, 5000)
common.add_in_batches(memory, [""] * size, base[:size], 1000, [f"c{i}" for i in range(size)])
stats = memory.stats()
out = {"join_threshold": stats.join_threshold}
if recall:
    found = []
    for q in queries:
        found.append([h.score for h in memory.search(vector=q, k=10)])
    out.update(found=found, store_groups=stats.groups)
cap, chunk = memory.config.max_group_size, MemoryConfig().chunk_size
memory.close()
del memory
try:  # compile every kernel before the clock starts (a sketch past 8 groups, if any)
    warm = HierIndex(base.shape[1], 8, sketch_from=8)
except TypeError:
    warm = HierIndex(base.shape[1], 8)
warm.assign([str(i) for i in range(3000)], np.ascontiguousarray(base[:3000]), 0.5, chunk)
import resource
ids = [str(i) for i in range(n)]
def timed_pass():
    index = HierIndex(base.shape[1], cap)
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    index.assign(ids, np.ascontiguousarray(base), stats.join_threshold, chunk)
    seconds, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    return index, {"seconds": seconds,
                   "cpu_seconds": r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime,
                   "sys_seconds": r1.ru_stime - r0.ru_stime,
                   "minor_faults": r1.ru_minflt - r0.ru_minflt}
index, got = timed_pass()
out.update(got, groups=len(index.slot_groups))
if sys.argv[3] == "1":  # a second pass while the first pass's index stays alive
    _, beside = timed_pass()
    out.update({"beside_" + key: value for key, value in beside.items()})
print(json.dumps(out))
"""


def datasets(specs: list[tuple[str, int]], n_queries: int, scratch: Path) -> dict[tuple, Path]:
    """Each (kind, n) base with its queries, saved once as ``.npz`` for the children."""
    files: dict[tuple, Path] = {}
    synthetic = sorted(n for kind, n in specs if kind == "synthetic")
    if synthetic:
        from benchmarks import synthetic as mixture

        drawn = mixture.structured_vectors(synthetic[-1])
        q = mixture.queries(n_queries, base=drawn[: synthetic[0]])
        for n in synthetic:
            files["synthetic", n] = scratch / f"synthetic-{n}.npz"
            np.savez(files["synthetic", n], base=drawn[:n], queries=q)
        del drawn
    for kind, n in specs:
        if kind == "real":
            base, _, queries = split(n, n_queries)
            files[kind, n] = scratch / f"real-{n}.npz"
            np.savez(files[kind, n], base=base, queries=queries)
    return files


def measure(
    trees: dict[str, Path], path: Path, recall: bool, rounds: int, beside: bool = False
) -> dict[str, list[dict[str, Any]]]:
    """Every revision's probe on one base, interleaved per round (recall in round 1 only;
    ``beside``: a second pass in each process while the first one's index stays alive)."""
    runs: dict[str, list[dict[str, Any]]] = {rev: [] for rev in trees}
    for r in range(rounds):
        for rev, tree in trees.items():
            flag = "1" if recall and r == 0 else "0"
            args = ["-c", PROBE, str(path), flag, "1" if beside else "0"]
            out = child(tree, args, timeout=7200)
            runs[rev].append(json.loads(out.strip().splitlines()[-1]))
    return runs


def rows_for(
    kind: str, n: int, path: Path, runs: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """One result row per revision: median rate, each round's, groups, recall."""
    truth = None
    if "found" in next(iter(runs.values()))[0]:
        data = np.load(path)
        truth = exact_knn(data["base"], data["queries"], K)[1]
    rows = []
    for rev, got in runs.items():
        rates = [n / g["seconds"] for g in got]
        row: dict[str, Any] = {
            "rev": rev,
            "data": kind,
            "n": n,
            "cells_per_s": round(statistics.median(rates), 1),
            "cells_per_s_each_round": [round(r, 1) for r in rates],
            "cpu_cells_per_s": round(statistics.median(n / g["cpu_seconds"] for g in got), 1),
            "sys_seconds": _median(got, "sys_seconds"),
            "minor_faults": _median(got, "minor_faults"),
            "groups": got[0]["groups"],
            "join_threshold": round(got[0]["join_threshold"], 4),
        }
        if "beside_seconds" in got[0]:
            row["beside_cells_per_s"] = round(
                statistics.median(n / g["beside_seconds"] for g in got), 1
            )
            row["beside_sys_seconds"] = _median(got, "beside_sys_seconds")
            row["beside_minor_faults"] = _median(got, "beside_minor_faults")
        if truth is not None:
            row["recall_at_10"] = round(recall_at_k_tie_aware(got[0]["found"], truth, K), 4)
            row["store_groups"] = got[0]["store_groups"]
        rows.append(row)
        print(f"{kind} N={n} {rev[:10]}: {row}", flush=True)
    return rows


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    """The median of ``key`` over the rounds (None when a revision's probe lacks it);
    counts stay whole numbers."""
    values = [g[key] for g in runs if g.get(key) is not None]
    if not values:
        return None
    if all(isinstance(v, int) for v in values):
        return int(statistics.median(values))
    return round(statistics.median(values), 2)


def describe(
    rows: list[dict[str, Any]], names: dict[str, str], rounds: int, queries: int, recall_max: int
) -> str:
    """The markdown table of the result rows, with the line saying how they were measured."""
    beside = any("beside_cells_per_s" in r for r in rows)
    extra = ["beside: cells/s", "beside: system s", "beside: minor faults"] if beside else []
    table = common.markdown_table(
        ["data", "N", "revision", "cells/s (median)", "per round", "CPU cells/s", "system s",
         "minor faults", *extra, "groups", "threshold", "store recall@10", "store groups"],
        [
            [r["data"], r["n"], names[r["rev"]], round(r["cells_per_s"]),
             [round(v) for v in r["cells_per_s_each_round"]], round(r["cpu_cells_per_s"]),
             _cell(r.get("sys_seconds")), _cell(r.get("minor_faults")),
             *([round(r["beside_cells_per_s"]), _cell(r["beside_sys_seconds"]),
                _cell(r["beside_minor_faults"])] if beside else []),
             r["groups"], r["join_threshold"], r.get("recall_at_10", "-"),
             r.get("store_groups", "-")]
            for r in rows
        ],
    )  # fmt: skip
    how = (
        "; *beside*: a second pass in the same process while the first pass's index stays "
        "alive, as a pass into a large live store runs (system time and minor page faults "
        "from `getrusage`)"
        if beside
        else ""
    )
    return (
        "One `HierIndex.assign` pass over the whole base (store threshold and chunk size), "
        f"{rounds} interleaved rounds per revision (median); CPU cells/s divides by the "
        "pass's process time (the core is shared: wall time also counts other processes); "
        f"recall@10 of each revision's default store on {queries} held-out queries up to "
        f"N = {recall_max}{how}:\n\n" + table
    )


def _cell(value: float | None) -> Any:
    """A table cell for a figure that older probes may not give."""
    return "-" if value is None else value


def main(argv: list[str] | None = None) -> None:
    """Measure every ``--rev`` and write ``assignment.md`` / ``assignment.json``."""
    ap = revision_parser(__doc__.split("\n")[0], "assignment")
    ap.set_defaults(sizes=SIZES)
    ap.add_argument("--recall-max", type=int, default=250_000, help="largest N with recall")
    ap.add_argument(
        "--beside",
        action="store_true",
        help="also time a second pass while the first pass's index stays alive",
    )
    args = ap.parse_args(argv)
    specs = []
    for spec in args.sizes.split(","):
        kind, _, n = spec.partition(":")
        if kind not in ("real", "synthetic") or not n.isdigit():
            raise SystemExit(f"--sizes takes kind:N items (real or synthetic), not {spec!r}")
        specs.append((kind, int(n)))
    scratch = Path(tempfile.mkdtemp(prefix="magnetic-assign-"))
    try:  # the scratch holds the trees and ~2 GB of vectors at 1M
        trees, names = checkouts(args, scratch)
        files = datasets(specs, args.queries, scratch)
        rows = []
        for kind, n in specs:
            runs = measure(trees, files[kind, n], n <= args.recall_max, args.rounds, args.beside)
            rows += rows_for(kind, n, files[kind, n], runs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    table = describe(rows, names, args.rounds, args.queries, args.recall_max)
    payload = {"revisions": names, "rows": rows}
    common.write_results(args.out, args.name, payload, table, "Assignment rate across revisions")


if __name__ == "__main__":
    main()
