"""The systems MagneticMemory is measured against, and how a query is timed and scored.

Used by :mod:`benchmarks.latency_recall` (and :mod:`benchmarks.ablations`): numpy flat search,
Chroma PersistentClient, faiss IVF-Flat and hnswlib, each timed on single queries after a
warm-up, with tie-aware recall@10 against exact search on the returned rows' exact cosines.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common
from magnetic_core.eval import recall_at_k_tie_aware

K = 10
TARGET_RECALL = 0.98
EMBEDDER_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def time_queries(
    search: Callable[[int], Any],
    n: int,
    warmup: int = 100,
    scores: Callable[[int, Any], Sequence[float]] | None = None,
) -> tuple[dict[str, float], list[Sequence[float]]]:
    """Run ``search(i)`` for each query alone; returns latency percentiles and found scores.

    ``scores(i, answer)``, when given, turns what ``search`` returned into the exact scores
    recall is measured by, outside the timed call: a baseline that answers with row numbers
    is timed for its own query only, not for the benchmark's rescoring of its rows.
    """
    for i in range(min(warmup, n)):
        search(i)
    lat, found = [], []
    for i in range(n):
        t0 = time.perf_counter()
        answer = search(i)
        lat.append(time.perf_counter() - t0)
        found.append(answer if scores is None else scores(i, answer))
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

    def search(i: int) -> Any:
        return col.query(query_embeddings=[queries[i]], n_results=K)

    def scores(i: int, got: Any) -> list[float]:
        return rescored(base, queries[i], [int(x) for x in got["ids"][0]])

    lat, found = time_queries(search, queries.shape[0], scores=scores)
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

    def search(i: int) -> np.ndarray:
        return index.search(queries[i : i + 1], K)[1][0]

    def scores(i: int, idx: np.ndarray) -> list[float]:
        return rescored(base, queries[i], idx)

    lat, found = time_queries(search, queries.shape[0], scores=scores)
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


# From 64 on in steps of at most an eighth: "the smallest ef that reaches our recall" then
# overshoots the ef that would just reach it by at most 12.5% (with steps of a half, as
# before session 35, by up to 50%, and hnswlib's time grows about in proportion to ef).
EFS = (
    *(10, 16, 24, 32, 48, 64, 72, 80, 88, 96, 104, 112, 120, 128),
    *(144, 160, 176, 192, 224, 256, 288, 320, 384, 448, 512),
)


def bench_hnswlib(
    base: np.ndarray, queries: np.ndarray, truth: np.ndarray, match: float
) -> dict[str, Any] | None:
    """hnswlib (inner product, M=16, ef_construction=200), built and queried on one thread.

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
    # One thread inserts, so the graph is the same in every run (with two, the insertion
    # order follows the scheduling: session 35 saw the ef reaching 0.9873 at 100K move
    # between 88 and 120 from one build to the next).
    index.set_num_threads(1)
    t0 = time.perf_counter()
    index.add_items(np.ascontiguousarray(base), np.arange(n))
    build = time.perf_counter() - t0

    def search(i: int) -> np.ndarray:
        return index.knn_query(queries[i], k=K)[0][0]

    def scores(i: int, idx: np.ndarray) -> list[float]:
        return rescored(base, queries[i], idx)

    curve, chosen = [], None
    for ef in EFS:
        index.set_ef(max(ef, K))
        lat, found = time_queries(search, queries.shape[0], warmup=50, scores=scores)
        row = system_row("hnswlib", lat, found, truth, ef=ef)
        curve.append({"ef": ef, "p50_ms": row["p50_ms"], "recall_at_10": row["recall_at_10"]})
        if chosen is None and row["recall_at_10"] >= match:
            chosen = row
    if chosen is None:
        chosen = row
    return {**chosen, "build_s": round(build, 2), "matched_recall": match, "curve": curve}
