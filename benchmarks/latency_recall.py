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
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common
from magnetic_core import MagneticMemory, MemoryConfig
from magnetic_core._index.index import HierIndex
from magnetic_core.eval import clustered_data, exact_knn, recall_at_k_tie_aware

K = 10
TARGET_RECALL = 0.98
EMBEDDER_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def time_queries(
    search: Callable[[int], Sequence[float]], n: int, warmup: int = 100
) -> tuple[dict[str, float], list[Sequence[float]]]:
    """Run ``search(i)`` for each query alone; returns latency percentiles and found scores."""
    for i in range(min(warmup, n)):
        search(i)
    lat, found = [], []
    for i in range(n):
        t0 = time.perf_counter()
        scores = search(i)
        lat.append(time.perf_counter() - t0)
        found.append(scores)
    return common.percentiles_ms(lat), found


def flat_search(base: np.ndarray, q: np.ndarray, k: int = K) -> np.ndarray:
    """What a user writes with numpy: one product, argpartition, sort the top k."""
    sims = base @ q
    top = np.argpartition(-sims, k - 1)[:k]
    return sims[top[np.argsort(-sims[top])]]


def rescored(base: np.ndarray, q: np.ndarray, idx: Sequence[int]) -> list[float]:
    """Exact cosine of returned rows (for tie-aware recall of approximate systems)."""
    rows = np.asarray([i for i in idx if i >= 0], dtype=np.int64)
    return sorted((base[rows] @ q).tolist(), reverse=True)


def system_row(name: str, lat: dict[str, float], found: Sequence, truth: np.ndarray, **extra: Any):
    """One result row: latency percentiles, tie-aware recall@10 and extras."""
    return {
        "system": name,
        **lat,
        "recall_at_10": round(recall_at_k_tie_aware(found, truth[: len(found)], K), 4),
        **extra,
    }


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

    lat, found = time_queries(by_vector, queries.shape[0])
    rows = [system_row("magnetic", lat, found, truth, **extra)]
    if "magnetic+text" not in skip:
        lat, found = time_queries(by_text, queries.shape[0])
        rows.append(system_row("magnetic+text", lat, found, truth))
    rows[0]["curve"] = budget_curve(memory, by_vector, queries.shape[0], truth)
    stages = stage_times(memory, queries) if workdir is None else {}
    if stages:  # in-memory (synthetic) sizes: where a query's time goes
        rows[0]["stages_ms"] = stages
    memory.close()
    if workdir is not None:
        rows[0].update(cold_open("magnetic", workdir, queries[0]))
    return rows


BUDGETS = (1000, 2000, 3000, 4000, 6000, 8000, 12000, 16000, 24000)


def stage_times(memory: MagneticMemory, queries: np.ndarray) -> dict[str, float]:
    """Median ms of a default vector query's stages, run one by one on the engine's
    internals: centroid scores (int8 codes of every centroid), group choice, the probed
    sub-lists' coded scan with exact rerank, and the whole ``search`` call."""
    from magnetic_core._search.exact import group_sizes
    from magnetic_core._search.scorer import _kernels
    from magnetic_core._search.search import _budgets

    memory.search(vector=queries[0], k=K)  # brings the scorer up to date
    index, scorer, kern = memory._index, memory._scorer, _kernels()
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
        sims = scorer.centroid_scores(q)
        t1 = time.perf_counter()
        probe = np.sort(kern.probe_groups(sims, group_sizes(index), plan.n_probe, group_cells))
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
def bench_chroma(
    base: np.ndarray,
    texts: Sequence[str],
    queries: np.ndarray,
    truth: np.ndarray,
    workdir: Path,
    batch: int,
) -> dict[str, Any]:
    """Chroma PersistentClient with its default HNSW (cosine space): add rate, query, open."""
    import chromadb

    client = chromadb.PersistentClient(path=str(workdir))
    col = client.create_collection(
        "bench", embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )
    batch = min(batch, client.get_max_batch_size())
    t0 = time.perf_counter()
    for s in range(0, base.shape[0], batch):
        col.add(
            ids=[str(i) for i in range(s, min(s + batch, base.shape[0]))],
            embeddings=np.ascontiguousarray(base[s : s + batch]),
            documents=list(texts[s : s + batch]),
        )
    add_rate = base.shape[0] / (time.perf_counter() - t0)

    def search(i: int) -> list[float]:
        got = col.query(query_embeddings=[queries[i]], n_results=K)
        return rescored(base, queries[i], [int(x) for x in got["ids"][0]])

    lat, found = time_queries(search, queries.shape[0])
    row = system_row("chroma", lat, found, truth, ingest_cells_per_s=round(add_rate, 1))
    client.close() if hasattr(client, "close") else None
    row.update(cold_open("chroma", workdir, queries[0]))
    return row


_OPEN_SCRIPT = """
import json, sys, time
sys.path.insert(0, {root!r})
import numpy as np
q = np.asarray({q!r}, dtype=np.float32)
t0 = time.perf_counter()
if {kind!r} == "magnetic":
    from benchmarks.common import VectorsOnly
    from magnetic_core import MagneticMemory
    m = MagneticMemory(path={path!r}, embedder=VectorsOnly({name!r}, q.shape[0]))
    m.search(vector=q, k=10)
else:
    import chromadb
    c = chromadb.PersistentClient(path={path!r}).get_collection("bench")
    c.query(query_embeddings=[q], n_results=10)
seconds = time.perf_counter() - t0
import psutil
print(json.dumps({{"open_s": seconds, "rss_mb": psutil.Process().memory_info().rss / 2**20}}))
"""


def cold_open(kind: str, path: Path, q: np.ndarray) -> dict[str, float]:
    """Open the persisted store in a fresh process and run one query: time and resident MB."""
    script = _OPEN_SCRIPT.format(
        root=str(common.ROOT), q=q.tolist(), kind=kind, path=str(path), name=EMBEDDER_NAME
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    got = json.loads(out.strip().splitlines()[-1])
    return {"cold_open_s": round(got["open_s"], 3), "open_rss_mb": round(got["rss_mb"], 1)}


# -- faiss and hnswlib ---------------------------------------------------------------------
def tune(
    name: str, knob: str, values: Sequence[int], batch_recall: Callable[[int], float]
) -> tuple[int, float, list[dict[str, float]]]:
    """Smallest knob value reaching the target recall (else the largest tried)."""
    sweep = []
    for v in values:
        r = batch_recall(v)
        sweep.append({knob: v, "recall_at_10": round(r, 4)})
        if r >= TARGET_RECALL:
            return v, r, sweep
    return values[-1], sweep[-1]["recall_at_10"], sweep


def bench_faiss(base: np.ndarray, queries: np.ndarray, truth: np.ndarray) -> dict[str, Any] | None:
    """faiss IVF-Flat (inner product), nlist = 4 sqrt(N), nprobe tuned to recall 0.98."""
    try:
        import faiss
    except ImportError:
        return None
    n, d = base.shape
    nlist = max(1, int(4 * math.sqrt(n)))
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
    data = np.ascontiguousarray(base, dtype=np.float32)
    sample = data[np.random.default_rng(0).permutation(n)[: min(n, 40 * nlist, 60_000)]]
    t0 = time.perf_counter()
    index.train(sample)
    index.add(data)
    build = time.perf_counter() - t0

    def batch_recall(nprobe: int) -> float:
        index.nprobe = nprobe
        _, idx = index.search(queries, K)
        found = [rescored(base, queries[i], idx[i]) for i in range(len(idx))]
        return recall_at_k_tie_aware(found, truth, K)

    probes = [p for p in (1, 2, 4, 8, 16, 32, 64, 128, 256) if p <= nlist]
    nprobe, _, sweep = tune("faiss", "nprobe", probes, batch_recall)
    index.nprobe = nprobe

    def search(i: int) -> list[float]:
        _, idx = index.search(queries[i : i + 1], K)
        return rescored(base, queries[i], idx[0])

    lat, found = time_queries(search, queries.shape[0])
    return system_row(
        "faiss-ivf-flat",
        lat,
        found,
        truth,
        nlist=nlist,
        nprobe=nprobe,
        build_s=round(build, 2),
        sweep=sweep,
    )


EFS = (10, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


def bench_hnswlib(
    base: np.ndarray, queries: np.ndarray, truth: np.ndarray, match: float
) -> dict[str, Any] | None:
    """hnswlib (inner product, M=16, ef_construction=200), single-threaded queries.

    Every ``ef`` of :data:`EFS` is timed (the trade-off curve); the row reports the smallest
    ``ef`` whose recall reaches ``match`` (MagneticMemory's recall), else the largest.
    """
    try:
        import hnswlib
    except ImportError:
        return None
    n, d = base.shape
    index = hnswlib.Index(space="ip", dim=d)
    index.init_index(max_elements=n, ef_construction=200, M=16, random_seed=0)
    t0 = time.perf_counter()
    index.add_items(np.ascontiguousarray(base), np.arange(n))
    build = time.perf_counter() - t0
    index.set_num_threads(1)

    def search(i: int) -> list[float]:
        idx, _ = index.knn_query(queries[i], k=K)
        return rescored(base, queries[i], idx[0])

    curve, chosen = [], None
    for ef in EFS:
        index.set_ef(max(ef, K))
        lat, found = time_queries(search, queries.shape[0], warmup=50)
        row = system_row("hnswlib", lat, found, truth, ef=ef)
        curve.append({"ef": ef, "p50_ms": row["p50_ms"], "recall_at_10": row["recall_at_10"]})
        if chosen is None and row["recall_at_10"] >= match:
            chosen = row
    if chosen is None:
        chosen = row
    return {**chosen, "build_s": round(build, 2), "matched_recall": match, "curve": curve}


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
    n: int, n_queries: int, dim: int, structured: bool = True, smallest: int | None = None
) -> tuple[np.ndarray, np.ndarray, str]:
    """``n`` synthetic unit vectors and ``n_queries`` queries drawn alike, and their name.

    From :mod:`benchmarks.synthetic` (a mixture fitted to the Reuters MiniLM vectors) when
    it is there (and ``structured``: smoke runs have no Reuters vectors to fit it to); its
    queries near-duplicate rows of the first ``smallest`` (every base is a prefix of these);
    otherwise clustered vectors, about 200 per cluster, whose noise has norm 1
    and a decaying spectrum (far less like real embeddings: use it only as a fallback).
    """
    try:
        if not structured:
            raise ImportError("smoke run")
        from benchmarks import synthetic as mixture
    except ImportError:
        n_clusters = max(2, n // 200)
        vecs, _ = clustered_data(n + n_queries, dim, n_clusters, spread=1.0, decay=1.0, seed=7)
        return vecs[n_queries:], vecs[:n_queries], "synthetic-clustered"
    base = mixture.structured_vectors(n)
    q = mixture.queries(n_queries, base=base[: smallest or n])
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
    ax.set_xlabel("search p50 latency (ms), k=10, single query")
    ax.set_ylabel("tie-aware recall@10")
    ax.set_title("Trade-off: probe budget (magnetic) against ef (hnswlib, M 16)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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
    ax.set_xlabel("cells (N); real Reuters MiniLM vectors, then synthetic ones (see table)")
    ax.set_ylabel("search p50 latency (ms), k=10, single query")
    ax.set_title("Latency against N (MiniLM Reuters vectors; R = magnetic's recall@10)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    """Run every N and write the results."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="10000,25000,100000")
    ap.add_argument("--synthetic", default="250000,1000000", help="synthetic N, comma separated")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--hnsw-max", type=int, default=250_000, help="largest synthetic N for hnswlib")
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


def merged(previous: Path, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """This run's results with those of an earlier run at sizes not measured now, by N."""
    if not previous.exists():
        return results
    now = {(r["n"], r["data"]) for r in results}
    old = json.loads(previous.read_text()).get("results", [])
    kept = [{**r, "earlier_run": True} for r in old if (r["n"], r["data"]) not in now]
    return sorted(results + kept, key=lambda r: (r["data"] != "reuters-minilm", r["n"]))


if __name__ == "__main__":
    main()
