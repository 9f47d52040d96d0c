"""Ingest, cold open and resident memory at scale: MagneticMemory beside Chroma, in one run.

Usage: ``python -m benchmarks.scale [--n 100000] [--data real|synthetic] [--assign 1000000]``

* **Ingest**: the same vectors and texts, the same batch size, added once to a Chroma
  ``PersistentClient`` collection (``add`` with embeddings and documents: Chroma's own rate)
  and once to a persisted ``MagneticMemory`` (``add``); the ratio of the two rates. The
  in-memory assignment alone (``HierIndex.assign``, no Chroma) is timed at ``--n`` and, on
  structured synthetic vectors, at ``--assign``.
* **Cold open**: a fresh Python process opens the store and answers one vector query; the
  time from before the import of the store to the answer, and the process's RSS after it.
  MagneticMemory is opened twice: from its index snapshot (the default) and with the
  snapshot removed (rebuilt from the cells, as every open did before).

``--data real`` uses the Reuters MiniLM vectors cached so far (``benchmarks/synthetic.py``
explains the cache); ``synthetic`` draws ``structured_vectors``. Texts are the Reuters
passages either way (entity extraction and BM25 cost depend on them).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common
from benchmarks.synthetic import _source, structured_vectors

EMBEDDER_NAME = "sentence-transformers/all-MiniLM-L6-v2"
BATCH = 1000

_OPEN = """
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
import numpy as np
q = np.asarray({q!r}, dtype=np.float32)
if {kind!r} == "magnetic":
    from magnetic_core import MagneticMemory
    from benchmarks.common import VectorsOnly
    m = MagneticMemory(path={path!r}, embedder=VectorsOnly({name!r}, q.shape[0]))
    hits = len(m.search(vector=q, k=10))
else:
    import chromadb
    c = chromadb.PersistentClient(path={path!r}).get_collection("bench")
    hits = len(c.query(query_embeddings=[q], n_results=10)["ids"][0])
seconds = time.perf_counter() - t0
import psutil
rss = psutil.Process().memory_info().rss / 2**20
print(json.dumps({{"open_s": seconds, "rss_mb": rss, "hits": hits}}))
"""


def cold_open(kind: str, path: Path, q: np.ndarray) -> dict[str, float]:
    """Open in a fresh process and answer one query: seconds and resident MiB."""
    script = _OPEN.format(
        root=str(common.ROOT), q=q.tolist(), kind=kind, path=str(path), name=EMBEDDER_NAME
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert got["hits"] == 10
    return {"open_s": round(got["open_s"], 3), "rss_mb": round(got["rss_mb"], 1)}


def chroma_ingest(path: Path, ids: list[str], vecs: np.ndarray, texts: list[str]) -> float:
    """Chroma's own add rate (cells/s) for the rows, in batches of BATCH."""
    import chromadb

    client = chromadb.PersistentClient(path=str(path))
    col = client.create_collection(
        "bench", embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )
    t0 = time.perf_counter()
    for start in range(0, len(ids), BATCH):
        end = start + BATCH
        col.add(ids=ids[start:end], embeddings=vecs[start:end], documents=texts[start:end])
    rate = len(ids) / (time.perf_counter() - t0)
    client.close() if hasattr(client, "close") else None
    return rate


def magnetic_ingest(path: Path, ids: list[str], vecs: np.ndarray, texts: list[str]) -> dict:
    """MagneticMemory's persisted add rate, and its groups."""
    from magnetic_core import MagneticMemory

    mem = MagneticMemory(path=str(path), embedder=common.VectorsOnly(EMBEDDER_NAME, 384))
    seconds = common.add_in_batches(mem, texts, vecs, BATCH, ids)
    stats = mem.stats()
    t0 = time.perf_counter()
    mem.close()  # writes the group cache and the index snapshot
    return {
        "cells_per_s": round(len(ids) / seconds, 1),
        "close_s": round(time.perf_counter() - t0, 2),
        "groups": stats.groups,
        "join_threshold": round(stats.join_threshold, 4),
    }


def assignment_rate(vecs: np.ndarray, threshold: float) -> float:
    """Cells/s of the in-memory online assignment alone, at the store's default settings."""
    from magnetic_core import MemoryConfig
    from magnetic_core._index.index import HierIndex

    config = MemoryConfig()
    index = HierIndex(vecs.shape[1], config.max_group_size)
    ids = [str(i) for i in range(vecs.shape[0])]
    t0 = time.perf_counter()
    index.assign(ids, np.ascontiguousarray(vecs), threshold, config.chunk_size)
    return vecs.shape[0] / (time.perf_counter() - t0)


def run(n: int, data: str, assign_n: int) -> dict[str, Any]:
    texts = common.reuters_texts(n)
    if data == "real":
        vecs = np.ascontiguousarray(_source()[:n], np.float32)
    else:
        vecs = structured_vectors(n, seed=5)
    n = min(n, len(vecs), len(texts))
    vecs, texts = vecs[:n], texts[:n]
    ids = [f"c{i}" for i in range(n)]
    q = vecs[n // 2] * 0.9 + vecs[n // 3] * 0.1
    q = (q / np.linalg.norm(q)).astype(np.float32)
    out: dict[str, Any] = {"n": n, "data": data, "batch": BATCH}
    with tempfile.TemporaryDirectory() as tmp:
        cpath, mpath = Path(tmp) / "chroma", Path(tmp) / "magnetic"
        out["chroma_add_cells_per_s"] = round(chroma_ingest(cpath, ids, vecs, texts), 1)
        out["magnetic"] = magnetic_ingest(mpath, ids, vecs, texts)
        out["ingest_ratio"] = round(
            out["magnetic"]["cells_per_s"] / out["chroma_add_cells_per_s"], 3
        )
        out["chroma_open"] = cold_open("chroma", cpath, q)
        out["magnetic_open"] = cold_open("magnetic", mpath, q)
        aside = Path(tmp) / "snapshot-aside"
        shutil.move(str(mpath / "magnetic-index"), aside)
        out["magnetic_open_without_snapshot"] = cold_open("magnetic", mpath, q)
    out["rss_ratio"] = round(out["magnetic_open"]["rss_mb"] / out["chroma_open"]["rss_mb"], 3)
    threshold = out["magnetic"]["join_threshold"]
    out["assignment_cells_per_s"] = round(assignment_rate(vecs, threshold), 1)
    if assign_n:
        big = structured_vectors(assign_n, seed=7)
        out["assignment_n"] = assign_n
        out["assignment_big_cells_per_s"] = round(assignment_rate(big, threshold), 1)
    return out


def table(r: dict[str, Any]) -> str:
    rows = [
        [
            "persisted ingest (cells/s)",
            r["magnetic"]["cells_per_s"],
            r["chroma_add_cells_per_s"],
            r["ingest_ratio"],
            ">= 0.9",
        ],
        [
            "cold open + first query (s)",
            r["magnetic_open"]["open_s"],
            r["chroma_open"]["open_s"],
            round(r["magnetic_open"]["open_s"] / r["chroma_open"]["open_s"], 2),
            "<= 3 s",
        ],
        [
            "cold open without the snapshot (s)",
            r["magnetic_open_without_snapshot"]["open_s"],
            r["chroma_open"]["open_s"],
            None,
            "(before)",
        ],
        [
            "RSS after open + query (MiB)",
            r["magnetic_open"]["rss_mb"],
            r["chroma_open"]["rss_mb"],
            r["rss_ratio"],
            "<= 2x",
        ],
        [
            "RSS without the snapshot (MiB)",
            r["magnetic_open_without_snapshot"]["rss_mb"],
            r["chroma_open"]["rss_mb"],
            None,
            "(before)",
        ],
        [
            f"in-memory assignment at {r['n']} (cells/s)",
            r["assignment_cells_per_s"],
            None,
            None,
            ">= 50K",
        ],
    ]
    if "assignment_n" in r:
        rows.append(
            [
                f"in-memory assignment at {r['assignment_n']} (synthetic, cells/s)",
                r["assignment_big_cells_per_s"],
                None,
                None,
                ">= 30K",
            ]
        )
    head = (
        f"N = {r['n']} ({r['data']} vectors, Reuters texts), batches of {r['batch']}, "
        f"one run; MagneticMemory formed {r['magnetic']['groups']} groups, its close "
        f"(group cache + snapshot) took {r['magnetic']['close_s']} s.\n\n"
    )
    return head + common.markdown_table(
        ["measure", "MagneticMemory", "Chroma", "ratio", "target"], rows
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--data", choices=("real", "synthetic"), default="synthetic")
    ap.add_argument("--assign", type=int, default=0, help="also time assignment at this N")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    result = run(args.n, args.data, args.assign)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    common.write_results(
        common.RESULTS, "scale", result, table(result), "Ingest, cold open and memory beside Chroma"
    )


if __name__ == "__main__":
    main()
