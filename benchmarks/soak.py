"""Soak: a long stream of mixed operations on one persisted store; RSS and search p50 over time.

The stream mixes adds, upserts of existing ids, deletes, searches and merge passes on a store
prefilled with a few thousand cells (hashing embedder, so no model is needed). The operations
run in a child process that reports a checkpoint every ``--every`` operations; the parent
records each one and the child's exit status, so a native crash (e.g. SIGSEGV inside Chroma)
shows in the result file as the signal and the last operation reached instead of losing it.

``--system chroma`` runs the same stream (without merges) on a plain Chroma collection, the
baseline for the RSS curve: Chroma's HNSW keeps every deleted vector, so a store of steady size
under deletes grows there; the memory compacts its cells collection in the background once the
deleted cells outnumber the live (each checkpoint counts the compactions so far).

Writes ``soak.json`` and ``soak.md`` (``soak_chroma.*`` for the baseline) to ``--out`` (default
``benchmarks/results``)::

    nice python -m benchmarks.soak                 # 100K operations (tens of minutes)
    python -m benchmarks.soak --system chroma      # the baseline
    python -m benchmarks.soak --smoke --out /tmp/s # 300 operations, for CI
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS, markdown_table, percentiles_ms, rss_mb, write_results

# Operation mix (shares of the stream); merges are rare and heavy, as a sleep pass is.
MIX = {"add": 0.4, "upsert": 0.24, "delete": 0.17, "search": 0.17, "merge": 0.02}
TOPICS = [
    "cell biology mitochondria membrane protein enzyme",
    "stock market shares trading earnings dividend",
    "football league match goal striker season",
    "python code function module import error",
    "weather storm rain forecast wind temperature",
    "cooking recipe oven flour butter sugar",
    "space rocket orbit launch satellite moon",
    "music guitar concert album band song",
    "travel flight hotel airport passport luggage",
    "law court judge appeal contract evidence",
]


def _text(rng: random.Random, i: int) -> str:
    topic = rng.randrange(len(TOPICS))
    words = TOPICS[topic].split()
    picked = rng.sample(words, 3) + [f"{words[0]}{rng.randint(0, 60)}" for _ in range(4)]
    return " ".join(picked) + f" note {i} ref{rng.randint(0, 999)}"


class _Chroma:
    """The same stream on a plain Chroma collection (the baseline): upsert, delete, query."""

    def __init__(self, path: str) -> None:
        import chromadb

        from magnetic_core import HashingEmbedder

        self.embedder = HashingEmbedder()
        self.client = chromadb.PersistentClient(path=path)
        self.col = self.client.get_or_create_collection(
            "soak", configuration={"hnsw": {"space": "cosine"}}
        )

    def add(self, texts: list[str], ids: list[str]) -> None:
        vectors = self.embedder.embed_documents(texts)
        self.col.upsert(ids=ids, embeddings=vectors, documents=texts)

    def delete(self, ids: list[str]) -> int:
        self.col.delete(ids=ids)
        return len(ids)

    def search(self, text: str, k: int) -> None:
        self.col.query(query_embeddings=[self.embedder.embed_query(text)], n_results=k)

    def merge(self) -> None:
        """Chroma has no groups to merge."""

    def compactions(self) -> int:
        """Plain Chroma never compacts."""
        return 0

    def count(self) -> int:
        return self.col.count()

    def groups(self) -> int:
        return 0

    def close(self) -> None:
        """Nothing to flush: Chroma persists every call."""

    def reopened(self, path: str) -> int:
        return _Chroma(path).count()


class _Magnetic:
    """The stream on a MagneticMemory."""

    def __init__(self, path: str) -> None:
        from magnetic_core import HashingEmbedder, MagneticMemory

        self.mem = MagneticMemory(path=path, embedder=HashingEmbedder())

    def add(self, texts: list[str], ids: list[str]) -> None:
        self.mem.add(texts, ids=ids)

    def delete(self, ids: list[str]) -> int:
        return self.mem.delete(ids=ids)

    def search(self, text: str, k: int) -> None:
        self.mem.search(text, k=k)

    def merge(self) -> None:
        self.mem.apply_merges(self.mem.plan_merges())

    def compactions(self) -> int:
        # the background compactions of the cells collection that were swapped in so far
        return self.mem._sleeper.compactions

    def count(self) -> int:
        return self.mem.count()

    def groups(self) -> int:
        return len(self.mem.groups())

    def close(self) -> None:
        self.mem.close()

    def reopened(self, path: str) -> int:
        from magnetic_core import HashingEmbedder, MagneticMemory

        with MagneticMemory(path=path, embedder=HashingEmbedder()) as again:
            return again.count()


def _index_files_mb(path: str) -> float:
    """Size of Chroma's vector index files under ``path`` (one directory per segment).

    Chroma's HNSW marks a deleted vector and keeps it, in its files and in memory
    (chroma-core/chroma#2594), so this grows with every delete even at a steady size.
    """
    total = 0
    for sub in Path(path).iterdir():
        if sub.is_dir():
            total += sum(f.stat().st_size for f in sub.iterdir() if f.is_file())
    return round(total / 2**20, 1)


class _MallInfo2(ctypes.Structure):
    # glibc's struct mallinfo2 (glibc 2.33 and newer): ten size_t fields
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _native_heap() -> dict[str, float]:
    """Anonymous resident memory, and what glibc's heap holds in use and free, in MiB.

    Chroma's native code allocates through glibc's malloc, so these tell a native leak (in use
    grows) from memory glibc keeps after it was freed (free grows). Empty where unavailable.
    """
    out: dict[str, float] = {}
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    out["rss_anon_mb"] = round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return out
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError):
        return out
    out["heap_in_use_mb"] = round((info.uordblks + info.hblkhd) / 2**20, 1)
    out["heap_free_mb"] = round(info.fordblks / 2**20, 1)
    return out


def _store_hnsw() -> str:
    """The HNSW settings the store gives its collections (Chroma's defaults for the rest)."""
    from magnetic_core._store import persistence

    hnsw = persistence._COLLECTION_CONFIG["hnsw"]
    return ", ".join(f"{k} {v}" for k, v in hnsw.items() if k != "space") or "chroma default"


def _worker(args: argparse.Namespace) -> None:
    """Run the stream; one JSON line per checkpoint on stdout."""
    from magnetic_core._store import persistence

    if args.hnsw_links:
        # the experiment behind the HNSW settings: collections built with this many links
        links = args.hnsw_links
        persistence._COLLECTION_CONFIG = {
            "hnsw": {"space": "cosine", "ef_construction": links, "max_neighbors": links}
        }
    rng = random.Random(args.seed)
    store = _Chroma(args.path) if args.system == "chroma" else _Magnetic(args.path)
    live: list[str] = []
    where: dict[str, int] = {}

    def remember(new: list[str]) -> None:
        for cid in new:
            if cid not in where:
                where[cid] = len(live)
                live.append(cid)

    def forget(cid: str) -> None:
        row = where.pop(cid)
        last = live.pop()
        if last != cid:
            live[row] = last
            where[last] = row

    serial = 0
    for start in range(0, args.prefill, 500):
        n = min(500, args.prefill - start)
        ids = [f"p{start + j}" for j in range(n)]
        store.add([_text(rng, start + j) for j in range(n)], ids=ids)
        remember(ids)
    kinds, weights = zip(*MIX.items())
    counts = dict.fromkeys(kinds, 0)
    latencies: list[float] = []
    deleted = 0
    began = time.perf_counter()
    for op in range(1, args.ops + 1):
        kind = rng.choices(kinds, weights)[0]
        counts[kind] += 1
        if kind == "add":
            n = rng.randint(1, 8)
            ids = [f"n{serial + j}" for j in range(n)]
            serial += n
            store.add([_text(rng, serial + j) for j in range(n)], ids=ids)
            remember(ids)
        elif kind == "upsert" and live:
            ids = list({rng.choice(live) for _ in range(rng.randint(1, 4))})
            store.add([_text(rng, serial + j) for j in range(len(ids))], ids=ids)
        elif kind == "delete" and len(live) > 100:
            # sized so that the store stays near its prefilled size (a steady state)
            n = rng.randint(1, 4) + max(0, len(live) - args.prefill) // 20
            ids = list({rng.choice(live) for _ in range(n)})
            deleted += store.delete(ids)
            for cid in ids:
                forget(cid)
        elif kind == "search":
            t0 = time.perf_counter()
            store.search(_text(rng, op), k=10)
            latencies.append(time.perf_counter() - t0)
        elif kind == "merge":
            store.merge()
        if op % args.every == 0 or op == args.ops:
            if store.count() != len(live):
                raise SystemExit(f"count {store.count()} != {len(live)} expected at op {op}")
            point = {
                "ops": op,
                "seconds": round(time.perf_counter() - began, 2),
                "cells": store.count(),
                "groups": store.groups(),
                "rss_mb": round(rss_mb(), 1),
                **_native_heap(),
                "index_files_mb": _index_files_mb(args.path),
                "search": percentiles_ms(latencies or [0.0]),
                "deleted": deleted,
                "compactions": store.compactions(),
                "counts": dict(counts),
            }
            latencies.clear()
            print(json.dumps(point), flush=True)
    store.close()
    print(
        json.dumps({"reopened_count": store.reopened(args.path), "expected": len(live)}), flush=True
    )


def _run_child(
    args: argparse.Namespace, path: str, on_point: Any
) -> tuple[list[dict[str, Any]], int, str]:
    cmd = [sys.executable, "-m", "benchmarks.soak", "--worker", "--path", path]
    cmd += ["--ops", str(args.ops), "--prefill", str(args.prefill)]
    cmd += ["--every", str(args.every), "--seed", str(args.seed)]
    cmd += ["--hnsw-links", str(args.hnsw_links), "--system", args.system]
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    points: list[dict[str, Any]] = []
    # stderr goes to a file: a pipe nobody reads until the end could fill and stall the child
    with tempfile.TemporaryFile("w+") as err_file:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err_file, text=True, env=env)
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                if line.startswith("{"):
                    points.append(json.loads(line))
                    print(line.strip(), file=sys.stderr, flush=True)
                    on_point(points, None)
            code = proc.wait()
        except KeyboardInterrupt:  # stopped by the operator: keep the curve so far
            proc.terminate()
            proc.wait()
            code = STOPPED
        err_file.seek(0)
        err = err_file.read()
    return points, code, err[-4000:]


STOPPED = 1000  # the exit code recorded when the operator interrupts a run


def _status(code: int | None) -> str:
    if code is None:
        return "running (partial result)"
    if code == STOPPED:
        return "stopped by the operator (partial result)"
    if code == 0:
        return "ok"
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"failed (exit {code})"


def _summary(
    points: list[dict[str, Any]], code: int | None, args: argparse.Namespace
) -> dict[str, Any]:
    steps = [p for p in points if "ops" in p]
    reopened = next((p for p in points if "reopened_count" in p), None)
    status = _status(code)
    rss = [p["rss_mb"] for p in steps]
    p50 = [p["search"]["p50_ms"] for p in steps]
    half = len(steps) // 2

    def ratio(values: list[float]) -> float | None:
        # flatness: the second half's mean over the first half's (1.0 = flat)
        if not half:
            return None
        first, second = values[:half], values[half:]
        return round((sum(second) / len(second)) / max(sum(first) / len(first), 1e-9), 3)

    return {
        "status": status,
        "exit_code": code,
        "ops_done": steps[-1]["ops"] if steps else 0,
        "ops_planned": args.ops,
        "prefill": args.prefill,
        "mix": MIX,
        "hnsw_links": args.hnsw_links
        or ("chroma default" if args.system == "chroma" else _store_hnsw()),
        "reopened": reopened,
        "rss_growth_second_half": ratio(rss),
        "p50_second_half_over_first": ratio(p50),
        "checkpoints": steps,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--prefill", type=int, default=4500)
    parser.add_argument("--every", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="a few hundred operations")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--path", help="store directory (default: a temporary one)")
    parser.add_argument(
        "--hnsw-links",
        type=int,
        default=0,
        help="build Chroma's HNSW with this many links per node (default: Chroma's own; "
        "2 is what the store used before, which crashed)",
    )
    parser.add_argument(
        "--system",
        choices=("magnetic", "chroma"),
        default="magnetic",
        help="run the stream on a MagneticMemory (default) or on a plain Chroma collection "
        "(the baseline; results in soak_chroma.*)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args)
        return 0
    if args.smoke:
        args.ops, args.prefill, args.every = 300, 200, 100

    def report(points: list[dict[str, Any]], code: int | None, err: str = "") -> None:
        # written at every checkpoint, so a run cut short still leaves its curve
        result = _summary(points, code, args)
        if code:
            result["stderr_tail"] = err
        rows = [
            [
                *(
                    p["ops"],
                    p["cells"],
                    p["groups"],
                    p["deleted"],
                    p.get("compactions", ""),
                    p["rss_mb"],
                    p.get("rss_anon_mb", ""),
                    p.get("heap_in_use_mb", ""),
                    p.get("heap_free_mb", ""),
                ),
                *(p.get("index_files_mb", ""), p["search"]["p50_ms"], p["seconds"]),
            ]
            for p in result["checkpoints"]
        ]
        head = [
            "ops",
            "cells",
            "groups",
            "deleted so far",
            "compactions",
            "RSS MiB",
            "anonymous MiB",
            "malloc in use MiB",
            "malloc free MiB",
            "Chroma index files MiB",
        ]
        table = markdown_table([*head, "search p50 ms", "s"], rows)
        verdict = (
            f"Status: **{result['status']}** after {result['ops_done']} of {args.ops} "
            f"operations (prefill {args.prefill}; mix {MIX}). Reopened: {result['reopened']}. "
            f"RSS second half / first half: {result['rss_growth_second_half']}; search p50 "
            f"second half / first half: {result['p50_second_half_over_first']}.\n\n"
        )
        name, title = "soak", "Soak: mixed operations over time"
        if args.system == "chroma":
            name, title = "soak_chroma", "Soak baseline: the same stream on plain Chroma"
        write_results(args.out, name, result, verdict + table, title)

    with tempfile.TemporaryDirectory(prefix="magnetic-soak-") as tmp:
        points, code, err = _run_child(args, args.path or tmp, report)
    report(points, code, err)
    return 0 if code == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
