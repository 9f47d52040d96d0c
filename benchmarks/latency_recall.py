"""Latency and recall against N: MagneticMemory vs numpy flat, Chroma, faiss IVF-Flat, hnswlib.

Usage: ``python -m benchmarks.latency_recall [--sizes 10000,25000,100000]
[--synthetic 250000,1000000] [--append] [--name latency_recall] [--skip SYSTEMS]``
(``--append`` keeps the sizes of the results already written that this run does not measure,
marked ``earlier_run``; ``--name`` names the result files and plots; ``--skip`` leaves out
``numpy-flat``, ``faiss-ivf-flat`` or ``magnetic+text``). The 1M run of issue 15:
``--sizes 10000 --synthetic 250000,1000000 --hnsw-max 1000000 --name latency_1m``.

Real N use cached all-MiniLM-L6-v2 vectors of the Reuters passages (run
``python -m benchmarks.embed_cache`` first; while it runs, the chunks written so far are used
and sizes beyond them are skipped); held-out passages are the queries. Synthetic N are drawn
from ``benchmarks.synthetic`` (a mixture fitted to the Reuters vectors), or from isotropic
clusters when that module is absent. Every system is measured in the same run, single queries
after a warm-up, k=10, and recall@10 is tie-aware against exact search (Reuters has
duplicates). MagneticMemory runs at its default settings; its probe budget (``probe_cells``)
is then swept for the trade-off curve, beside hnswlib's ``ef`` (M 16), whose smallest ``ef``
reaching MagneticMemory's recall gives "hnswlib at equal recall". At synthetic sizes Chroma is
left out (building it takes longer than the rest of the run), hnswlib too past
``--hnsw-max`` cells, and MagneticMemory runs in memory (its Chroma writes turned off).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common
from benchmarks.baselines import (
    EMBEDDER_NAME,
    K,
    bench_chroma,
    bench_faiss,
    bench_hnswlib,
    cold_open,
    flat_search,
    system_row,
    time_queries,
)
from benchmarks.latency_report import merged, write
from magnetic_core import MagneticMemory, MemoryConfig
from magnetic_core._index.index import HierIndex
from magnetic_core.eval import clustered_data, exact_knn, recall_at_k_tie_aware


# -- MagneticMemory ------------------------------------------------------------------------
def assignment_rate(base: np.ndarray, threshold: float, cap: int) -> float:
    """Cells/s of the engine's in-memory online assignment alone (one pass, same threshold)."""
    index = HierIndex(base.shape[1], cap)
    ids = [str(i) for i in range(base.shape[0])]
    t0 = time.perf_counter()
    index.assign(ids, np.ascontiguousarray(base), threshold, MemoryConfig().chunk_size)
    return base.shape[0] / (time.perf_counter() - t0)


def build_magnetic(
    base: np.ndarray, texts: Sequence[str], path: Path | None, batch: int
) -> tuple[MagneticMemory, float]:
    """Fill a MagneticMemory through ``add``; persisted at ``path``, in memory when None."""
    embedder = common.VectorsOnly(EMBEDDER_NAME, base.shape[1])
    if path is None:
        memory = common.unpersisted(common.in_memory(embedder))
    else:
        memory = MagneticMemory(path=str(path), embedder=embedder)
    ids = [f"c{i}" for i in range(base.shape[0])]
    seconds = common.add_in_batches(memory, texts, base, batch, ids)
    return memory, seconds


def bench_magnetic(
    base: np.ndarray,
    texts: Sequence[str],
    queries: np.ndarray,
    qtexts: Sequence[str],
    truth: np.ndarray,
    workdir: Path | None,
    batch: int,
    skip: frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    """Persisted (or in-memory) ingest, cold open, and search latency/recall."""
    memory, seconds = build_magnetic(base, texts, workdir, batch)
    stats = memory.stats()
    extra = {
        "ingest_cells_per_s": round(base.shape[0] / seconds, 1),
        "ingest_persisted": workdir is not None,
        "groups": stats.groups,
        "mean_group_size": round(stats.mean_group_size, 1),
        "join_threshold": round(stats.join_threshold, 4),
        "assignment_cells_per_s": round(
            assignment_rate(base, stats.join_threshold, memory.config.max_group_size), 1
        ),
    }

    def by_vector(i: int) -> list[float]:
        return [h.score for h in memory.search(vector=queries[i], k=K)]

    def by_text(i: int) -> list[float]:
        return [h.score for h in memory.search(qtexts[i], vector=queries[i], k=K)]

    helped = _helped()
    lat, found = time_queries(by_vector, queries.shape[0])
    rows = [system_row("magnetic", lat, found, truth, **extra, **helped(queries.shape[0]))]
    if "magnetic+text" not in skip:
        helped = _helped()
        lat, found = time_queries(by_text, queries.shape[0])
        rows.append(system_row("magnetic+text", lat, found, truth, **helped(queries.shape[0])))
    rows[0]["curve"] = budget_curve(memory, by_vector, queries.shape[0], truth)
    stages = stage_times(memory, queries) if workdir is None else {}
    if stages:  # in-memory (synthetic) sizes: where a query's time goes
        rows[0]["stages_ms"] = stages
    memory.close()
    if workdir is not None:
        rows[0].update(cold_open("magnetic", workdir, queries[0]))
    return rows


def _helped() -> Callable[[int], dict[str, float]]:
    """From now: the share of the queries of a ``time_queries`` run over ``n`` queries (its
    warm-up of up to 100 included) that the search helper answered on its second core
    (revisions without it: none)."""
    try:
        from magnetic_core._search import helper
    except ImportError:
        return lambda n: {}
    before = helper._HELPER.beside

    def share(n: int) -> dict[str, float]:
        return {"helper_share": round((helper._HELPER.beside - before) / (n + min(100, n)), 3)}

    return share


BUDGETS = (1000, 2000, 3000, 4000, 6000, 8000, 12000, 16000, 24000)


def stage_times(memory: MagneticMemory, queries: np.ndarray) -> dict[str, float]:
    """Median ms of a default vector query's stages, run one by one on the engine's
    internals: "centroids", the int8 codes of every centroid scored (for comparison: with
    a centroid tree, searches read only some); "groups", the centroid stage as a search runs
    it (scores and choice of groups, through the tree when the store has one); the probed
    sub-lists' coded scan with exact rerank; and the whole ``search`` call."""
    from magnetic_core._search.exact import group_sizes
    from magnetic_core._search.search import _budgets

    memory.search(vector=queries[0], k=K)  # brings the scorer up to date
    index, scorer = memory._index, memory._scorer
    if scorer is None or not scorer.usable:  # small stores are scored exactly, no stages
        return {}
    times: dict[str, list[float]] = {k: [] for k in ("centroids", "groups", "cells", "search")}
    for q in queries:
        plan = memory._plan(
            None,
            q,
            K,
            None,
            n_probe=None,
            entity_boost=None,
            lexical_weight=None,
            context_weight=0.0,
            session_weight=0.0,
        )
        budget, group_cells = _budgets(index, plan, True)
        keep = max(plan.rerank, 4 * K)
        t0 = time.perf_counter()
        scorer.centroid_scores(q)
        t1 = time.perf_counter()
        probe = np.sort(scorer.probe_slots(q, group_sizes(index), plan.n_probe, group_cells))
        t2 = time.perf_counter()
        scorer.probe(index, probe, q, budget, keep, K)
        t3 = time.perf_counter()
        memory.search(vector=q, k=K)
        t4 = time.perf_counter()
        for key, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            times[key].append(dt)
    out = {k: round(1e3 * float(np.median(v)), 4) for k, v in times.items()}
    out["groups_total"] = len(index.slot_groups)
    return out


def budget_curve(
    memory: MagneticMemory, search: Callable[[int], Sequence[float]], n: int, truth: np.ndarray
) -> list[dict[str, float]]:
    """p50 and recall against the probe budget (``probe_cells``), the rest at defaults."""
    default = memory.config
    curve = []
    for budget in BUDGETS:
        if budget > 2 * len(memory._index):
            break
        memory.config = default.with_changes(probe_cells=budget)
        lat, found = time_queries(search, n, warmup=50)
        recall = recall_at_k_tie_aware(found, truth[: len(found)], K)
        curve.append({"probe_cells": budget, "p50_ms": lat["p50_ms"], "recall_at_10": recall})
    memory.config = default
    return curve


# -- Chroma --------------------------------------------------------------------------------
# -- one N ---------------------------------------------------------------------------------
def bench_size(
    base: np.ndarray,
    texts: Sequence[str],
    queries: np.ndarray,
    qtexts: Sequence[str],
    *,
    persisted: bool,
    full: bool,
    flat_queries: int,
    batch: int,
    hnsw_max: int = 0,
    skip: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Every system at one N, in this process, on the same vectors and queries."""
    n = base.shape[0]
    print(f"N={n}: exact truth", flush=True)
    _, truth = exact_knn(base, queries, K, block=64)
    rows = []
    if "numpy-flat" not in skip:
        lat, found = time_queries(lambda i: flat_search(base, queries[i]), flat_queries)
        rows.append(system_row("numpy-flat", lat, found, truth))
    with tempfile.TemporaryDirectory(prefix="magbench-") as tmp:
        work = Path(tmp)
        print(f"N={n}: magnetic", flush=True)
        rows += bench_magnetic(
            base, texts, queries, qtexts, truth, work / "mag" if persisted else None, batch, skip
        )
        if full:
            print(f"N={n}: chroma", flush=True)
            rows.append(bench_chroma(base, texts, queries, truth, work / "chroma", batch))
    if "faiss-ivf-flat" not in skip:
        print(f"N={n}: faiss", flush=True)
        rows.append(bench_faiss(base, queries, truth))
    if full or n <= hnsw_max:
        print(f"N={n}: hnswlib", flush=True)
        match = next(r["recall_at_10"] for r in rows if r["system"] == "magnetic")
        rows.append(bench_hnswlib(base, queries, truth, match))
    rows = [r for r in rows if r is not None]
    by = {r["system"]: r for r in rows}
    mag = by["magnetic"]["p50_ms"]
    ratios = {f"{s}_p50_over_magnetic": round(r["p50_ms"] / mag, 2) for s, r in by.items()}
    for other in ("chroma", "hnswlib"):
        if other in by:  # the targets: <= 0.25 x Chroma, <= hnswlib at equal recall
            ratios[f"magnetic_p50_over_{other}"] = round(mag / by[other]["p50_ms"], 3)
    if "chroma" in by:
        ratios["magnetic_ingest_over_chroma"] = round(
            by["magnetic"]["ingest_cells_per_s"] / by["chroma"]["ingest_cells_per_s"], 3
        )
    for r in rows:
        print(f"  {r['system']:>16}: p50 {r['p50_ms']:.3f} ms  recall {r['recall_at_10']:.4f}")
    return {"n": n, "persisted": persisted, "systems": rows, "ratios": ratios}


# -- data ----------------------------------------------------------------------------------
def reuters(n_max: int, n_queries: int, smoke: bool) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Seeded shuffle of the passages: queries held out first, then nested bases.

    While the embedding cache is still being written, only the passages embedded so far
    (a prefix in file order) are shuffled and used.
    """
    texts = common.reuters_texts(n_max + n_queries if smoke else None)
    if smoke or (common.cache_dir() / "reuters_passages.npy").exists():
        vecs = common.load_vectors("reuters_passages", texts if smoke else None)
    else:
        parts = sorted((common.cache_dir() / "reuters_parts").glob("*.npy"))
        vecs = np.concatenate([np.load(part) for part in parts])
        texts = texts[: len(vecs)]
    perm = np.random.default_rng(42).permutation(len(texts))
    return np.asarray(vecs[perm], np.float32), [texts[i] for i in perm], perm


def synthetic(
    n: int,
    n_queries: int,
    dim: int,
    structured: bool = True,
    smallest: int | None = None,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, str]:
    """``n`` synthetic unit vectors and ``n_queries`` queries drawn alike, and their name.

    From :mod:`benchmarks.synthetic` (a mixture fitted to the Reuters MiniLM vectors) when
    it is there (and ``structured``: smoke runs have no Reuters vectors to fit it to); its
    queries near-duplicate rows of the first ``smallest`` (every base is a prefix of these);
    otherwise clustered vectors, about 200 per cluster, whose noise has norm 1
    and a decaying spectrum (far less like real embeddings: use it only as a fallback).
    ``seed``: the structured draw's (base and queries).
    """
    try:
        if not structured:
            raise ImportError("smoke run")
        from benchmarks import synthetic as mixture
    except ImportError:
        n_clusters = max(2, n // 200)
        vecs, _ = clustered_data(n + n_queries, dim, n_clusters, spread=1.0, decay=1.0, seed=7)
        return vecs[n_queries:], vecs[:n_queries], "synthetic-clustered"
    base = mixture.structured_vectors(n, seed)
    q = mixture.queries(n_queries, seed, base=base[: smallest or n])
    return base, q, "synthetic-structured"


_FIRST_QUERY = """
import os, sys, time
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
import numpy as np
from benchmarks import common
from magnetic_core.eval import clustered_data
t1 = time.perf_counter()
vecs, _ = clustered_data(6001, 384, 40, spread=0.8, decay=1.5, seed=3)
memory = common.unpersisted(common.in_memory(common.VectorsOnly("x", 384)))
memory.add([""] * 6000, ids=[str(i) for i in range(6000)], vectors=vecs[1:])
t2 = time.perf_counter()
memory.search(vector=vecs[0], k=10)
t3 = time.perf_counter()
memory.search(vector=vecs[0], k=10)
t4 = time.perf_counter()
print(t1 - t0, t3 - t2, t4 - t3)
"""


def first_query() -> dict[str, float]:
    """Import and first query of a fresh process (6000 cells, so the scorer and every kernel
    run): with the kernels' disk cache as it is, and with an empty cache (compiled anew)."""
    import os

    out: dict[str, float] = {}
    script = _FIRST_QUERY.format(root=str(common.ROOT))
    with tempfile.TemporaryDirectory(prefix="numba-cache-") as empty:
        for name, extra in (("cached", {}), ("uncached", {"NUMBA_CACHE_DIR": empty})):
            env = {**os.environ, **extra}
            got = subprocess.run(
                [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
            ).stdout.split()
            imp, first, second = (float(x) for x in got[-3:])
            out[f"import_s_{name}"] = round(imp, 3)
            out[f"first_query_s_{name}"] = round(first, 3)
            out[f"second_query_ms_{name}"] = round(1e3 * second, 3)
    return out


def embedding_rate(texts: Sequence[str], smoke: bool) -> dict[str, Any]:
    """End-to-end ingest is bound by the embedder: MiniLM passages/s, batched, measured here."""
    emb = common.embedder(smoke)
    sample = list(texts[: 64 if smoke else 1024])
    emb.embed_documents(sample[:32])
    t0 = time.perf_counter()
    emb.embed_documents(sample)
    rate = len(sample) / (time.perf_counter() - t0)
    print(f"embedding: {rate:.1f} passages/s ({emb.name})", flush=True)
    return {"embedder": emb.name, "passages": len(sample), "passages_per_s": round(rate, 1)}


# -- output --------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    """Run every N and write the results."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="10000,25000,100000")
    ap.add_argument("--synthetic", default="250000,1000000", help="synthetic N, comma separated")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--hnsw-max", type=int, default=250_000, help="largest synthetic N for hnswlib")
    ap.add_argument("--synthetic-seed", type=int, default=0, help="seed of the synthetic draw")
    ap.add_argument("--smoke", action="store_true", help="a few hundred items, hashing vectors")
    ap.add_argument("--out", type=Path, default=common.RESULTS)
    ap.add_argument(
        "--append",
        action="store_true",
        help="keep the sizes of the existing results this run does not measure (one table)",
    )
    ap.add_argument("--name", default="latency_recall", help="result file name (no suffix)")
    ap.add_argument(
        "--skip", default="", help="systems left out: numpy-flat, faiss-ivf-flat, magnetic+text"
    )
    args = ap.parse_args(argv)
    skip = frozenset(s for s in args.skip.split(",") if s)
    if args.smoke:
        args.sizes, args.synthetic, args.queries, args.batch = "200,300", "600", 20, 100
    sizes = [int(s) for s in args.sizes.split(",") if s]
    vecs, texts, _ = reuters(max(sizes, default=0), args.queries, args.smoke)
    queries, qtexts = vecs[: args.queries], texts[: args.queries]
    embedding = embedding_rate(texts[args.queries :], args.smoke) if sizes else {}
    results = []
    for n in sizes:
        if args.queries + n > len(vecs):
            print(f"N={n}: skipped, only {len(vecs) - args.queries} vectors cached", flush=True)
            continue
        base = vecs[args.queries : args.queries + n]
        res = bench_size(
            base,
            texts[args.queries : args.queries + n],
            queries,
            qtexts,
            persisted=True,
            full=True,
            flat_queries=args.queries,
            batch=args.batch,
            skip=skip,
        )
        results.append({"data": "reuters-minilm", **res})
    synthetic_sizes = [int(s) for s in args.synthetic.split(",") if s]
    if synthetic_sizes:
        biggest, squeries, data = synthetic(
            max(synthetic_sizes),
            args.queries,
            vecs.shape[1],
            structured=not args.smoke,
            smallest=min(synthetic_sizes),
            seed=args.synthetic_seed,
        )
        for n in synthetic_sizes:
            base = biggest[:n]
            res = bench_size(
                base,
                [""] * n,
                squeries,
                [""] * args.queries,
                persisted=False,
                full=False,
                flat_queries=min(args.queries, 100),
                batch=10_000,
                hnsw_max=args.hnsw_max,
                skip=skip,
            )
            results.append({"data": data, **res})
    compile_times = {} if args.smoke else first_query()
    if args.append:
        results = merged(args.out / f"{args.name}.json", results)
    write(args.out, results, args, embedding, compile_times, args.name)


if __name__ == "__main__":
    main()
