"""Ingest, cold open and resident memory at scale: MagneticMemory beside Chroma, in one run.

Usage: ``python -m benchmarks.scale [--n 100000] [--data real|synthetic] [--assign 1000000]
[--reuse DIR] [--open-only]``

``--reuse DIR`` keeps both stores in ``DIR`` (outside the repository, e.g. on /dev/shm) and
opens an earlier ingest of the same size found there instead of paying it again;
``--open-only`` measures only the cold opens from the snapshot (results in
``scale_open.md``).

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
MORE_QUERIES = 300  # answered after the first one: RSS of a store in use

_OPEN = """
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
import numpy as np
q = np.asarray({q!r}, dtype=np.float32)
if {kind!r} == "magnetic":
    import chromadb
    t1 = time.perf_counter()
    from magnetic_core import MagneticMemory
    t2 = time.perf_counter()
    from benchmarks.common import VectorsOnly
    m = MagneticMemory(path={path!r}, embedder=VectorsOnly({name!r}, q.shape[0]))
    t3 = time.perf_counter()
    hits = len(m.search(vector=q, k=10))
else:
    import chromadb
    t1 = t2 = time.perf_counter()
    c = chromadb.PersistentClient(path={path!r}).get_collection("bench")
    t3 = time.perf_counter()
    hits = len(c.query(query_embeddings=[q], n_results=10)["ids"][0])
t4 = time.perf_counter()
import psutil
def parts():  # resident MiB: private (anonymous) and file-backed (mapped files, shared)
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return [int(status[k].split()[0]) / 1024 for k in ("RssAnon", "RssFile")]
rss = psutil.Process().memory_info().rss / 2**20
anon, mapped = parts()
more = np.load({more!r}, mmap_mode="r")
for row in more:  # then as a store in use: RSS after more queries
    v = np.ascontiguousarray(row, np.float32)
    if {kind!r} == "magnetic":
        m.search(vector=v, k=10)
    else:
        c.query(query_embeddings=[v], n_results=10)
rss_more = psutil.Process().memory_info().rss / 2**20
anon_more, mapped_more = parts()
print(json.dumps({{"open_s": t4 - t0, "rss_mb": rss, "hits": hits, "rss_after_more_mb": rss_more,
                  "anon_mb": anon, "file_mb": mapped, "anon_after_more_mb": anon_more,
                  "file_after_more_mb": mapped_more,
                  "import_chromadb_s": t1 - t0, "import_magnetic_s": t2 - t1,
                  "open_store_s": t3 - t2, "first_query_s": t4 - t3}}))
"""


def cold_open(
    kind: str, path: Path, q: np.ndarray, runs: int = 2, more: np.ndarray | None = None
) -> dict[str, float]:
    """Open in a fresh process and answer one query: seconds (and their parts), resident MiB.

    The best of ``runs`` fresh processes (the machine is shared: one slow run is noise).
    ``more`` queries are answered after it, and the RSS after them reported too (a store
    in use reads more of its data than its first query does).
    """
    with tempfile.NamedTemporaryFile(suffix=".npy", delete=False) as fh:
        np.save(fh, more if more is not None else np.empty((0, q.shape[0]), np.float32))
    script = _OPEN.format(
        root=str(common.ROOT),
        q=q.tolist(),
        kind=kind,
        path=str(path),
        name=EMBEDDER_NAME,
        more=fh.name,
    )
    best: dict[str, float] = {}
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        ).stdout
        got = json.loads(out.strip().splitlines()[-1])
        assert got.pop("hits") == 10
        if not best or got["open_s"] < best["open_s"]:
            best = got
    Path(fh.name).unlink(missing_ok=True)
    return {k: round(v, 3) for k, v in best.items()}


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


def assignment_rate(vecs: np.ndarray, threshold: float, blas_threads: int = 0) -> dict:
    """Cells/s of the in-memory online assignment alone, at the store's default settings.

    The compiled loop is loaded by a warm-up call first (its cost, the first call of a
    process, is reported apart). ``blas_threads`` > 0 caps BLAS's threads for the run
    (threadpoolctl): the chunk's products are small, and on a busy machine BLAS threads
    contending for cores cost more than they give.
    """
    from threadpoolctl import threadpool_limits

    from magnetic_core import MemoryConfig
    from magnetic_core._index.index import HierIndex

    config = MemoryConfig()
    t0 = time.perf_counter()
    HierIndex(vecs.shape[1], config.max_group_size).assign(["a", "b"], vecs[:2], threshold)
    first_call = time.perf_counter() - t0
    index = HierIndex(vecs.shape[1], config.max_group_size)
    ids = [str(i) for i in range(vecs.shape[0])]
    with threadpool_limits(blas_threads or None, user_api="blas"):
        t0 = time.perf_counter()
        index.assign(ids, np.ascontiguousarray(vecs), threshold, config.chunk_size)
        seconds = time.perf_counter() - t0
    return {
        "cells_per_s": round(vecs.shape[0] / seconds, 1),
        "groups": len(index.slot_groups),
        "first_call_s": round(first_call, 3),
    }


def _stores(
    root: Path, ids: list[str], vecs: np.ndarray, texts: list[str], reuse: bool
) -> dict[str, Any]:
    """Ingest into ``root/chroma`` and ``root/magnetic``, or read back a kept earlier ingest.

    With ``reuse`` an ingest already under ``root`` (its rates in ``root/ingest.json``) is
    opened again instead of paid twice (about ten minutes at 100K); the stores stay there.
    """
    record = root / "ingest.json"
    if reuse and record.is_file():
        kept = json.loads(record.read_text())
        if kept["n"] == len(ids):
            return {**kept, "ingest_reused": True}
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    out: dict[str, Any] = {"n": len(ids)}
    out["chroma_add_cells_per_s"] = round(chroma_ingest(root / "chroma", ids, vecs, texts), 1)
    out["magnetic"] = magnetic_ingest(root / "magnetic", ids, vecs, texts)
    record.write_text(json.dumps(out))
    return out


def _opens(root: Path, q: np.ndarray, without_snapshot: bool, more: np.ndarray) -> dict[str, Any]:
    """The cold opens of both stores (and of MagneticMemory without its snapshot)."""
    mpath = root / "magnetic"
    out = {"chroma_open": cold_open("chroma", root / "chroma", q, more=more)}
    out["magnetic_open"] = cold_open("magnetic", mpath, q, more=more)
    if without_snapshot:
        aside = root / "snapshot-aside"
        shutil.rmtree(aside, ignore_errors=True)
        shutil.move(str(mpath / "magnetic-index"), aside)
        try:
            # one process: it closes its memory at exit, which writes a snapshot again
            out["magnetic_open_without_snapshot"] = cold_open("magnetic", mpath, q, runs=1)
        finally:
            # that process never closed its memory, so it wrote no snapshot: put the one
            # set aside back, or a later --reuse run would open without one
            if (mpath / "magnetic-index").exists():
                shutil.rmtree(aside, ignore_errors=True)
            else:
                shutil.move(str(aside), mpath / "magnetic-index")
    return out


def run(
    n: int, data: str, assign_n: int, reuse: Path | None = None, open_only: bool = False
) -> dict[str, Any]:
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
        root = reuse if reuse is not None else Path(tmp)
        out.update(_stores(root, ids, vecs, texts, reuse is not None))
        out["ingest_ratio"] = round(
            out["magnetic"]["cells_per_s"] / out["chroma_add_cells_per_s"], 3
        )
        more = vecs[np.random.default_rng(11).choice(n, MORE_QUERIES, replace=False)]
        out.update(_opens(root, q, without_snapshot=not open_only, more=more))
    out["rss_ratio"] = round(out["magnetic_open"]["rss_mb"] / out["chroma_open"]["rss_mb"], 3)
    if open_only:
        return out
    threshold = out["magnetic"]["join_threshold"]
    out["assignment"] = assignment_rate(vecs, threshold)
    out["assignment_1_blas_thread"] = assignment_rate(vecs, threshold, blas_threads=1)
    if assign_n:
        big = structured_vectors(assign_n, seed=7)
        out["assignment_n"] = assign_n
        out["assignment_big"] = assignment_rate(big, threshold)
        out["assignment_big_1_blas_thread"] = assignment_rate(big, threshold, blas_threads=1)
    return out


def _parts(r: dict[str, Any]) -> list[list[Any]]:
    """RSS split into private (anonymous) memory and mapped files (the index snapshot is
    mapped read-only: its pages are shared and the kernel can drop them under pressure)."""
    mo, co = r["magnetic_open"], r["chroma_open"]
    if "anon_after_more_mb" not in mo:
        return []
    rows = []
    for key, label in [("anon", "anonymous"), ("file", "file-backed")]:
        m, c = mo[f"{key}_after_more_mb"], co[f"{key}_after_more_mb"]
        ratio = round(m / c, 3) if c else None
        rows.append([f"  of which {label}, after the {MORE_QUERIES} (MiB)", m, c, ratio, ""])
    return rows


def table(r: dict[str, Any]) -> str:
    mo = r["magnetic_open"]
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
            "RSS after open + query (MiB)",
            r["magnetic_open"]["rss_mb"],
            r["chroma_open"]["rss_mb"],
            r["rss_ratio"],
            "<= 2x",
        ],
        [
            f"RSS after {MORE_QUERIES} more queries (MiB)",
            mo.get("rss_after_more_mb"),
            r["chroma_open"].get("rss_after_more_mb"),
            round(mo["rss_after_more_mb"] / r["chroma_open"]["rss_after_more_mb"], 3)
            if "rss_after_more_mb" in mo
            else None,
            "<= 2x",
        ],
        *_parts(r),
        [
            "  of which: import chromadb / magnetic_core (s)",
            f"{mo['import_chromadb_s']} / {mo['import_magnetic_s']}",
            r["chroma_open"]["import_chromadb_s"],
            None,
            "",
        ],
        [
            "  of which: open the store / first query (s)",
            f"{mo['open_store_s']} / {mo['first_query_s']}",
            f"{r['chroma_open']['open_store_s']} / {r['chroma_open']['first_query_s']}",
            None,
            "",
        ],
    ]
    if "magnetic_open_without_snapshot" in r:
        bare = r["magnetic_open_without_snapshot"]
        rows[2:2] = [["cold open without the snapshot (s)", bare["open_s"], None, None, "(before)"]]
        rows.insert(4, ["RSS without the snapshot (MiB)", bare["rss_mb"], None, None, "(before)"])
    for key, label, target in [
        ("assignment", f"in-memory assignment at {r['n']} (cells/s)", ">= 50K"),
        ("assignment_1_blas_thread", "  the same, BLAS capped at 1 thread", ">= 50K"),
        ("assignment_big", f"in-memory assignment at {r.get('assignment_n')} (synth.)", ">= 30K"),
        ("assignment_big_1_blas_thread", "  the same, BLAS capped at 1 thread", ">= 30K"),
    ]:
        if key in r:
            a = r[key]
            rate = round(a["cells_per_s"])
            rows.append([f"{label}, {a['groups']} groups", rate, None, None, target])
    head = (
        f"N = {r['n']} ({r['data']} vectors, Reuters texts), batches of {r['batch']}, "
        f"one run; MagneticMemory formed {r['magnetic']['groups']} groups, its close "
        f"(group cache + snapshot) took {r['magnetic']['close_s']} s.\n\n"
    )
    if r.get("ingest_reused"):
        head += (
            "The ingest rates are those of the earlier ingest kept with `--reuse` (measured "
            "then, on the same machine); the opens were measured in this run.\n\n"
        )
    return head + common.markdown_table(
        ["measure", "MagneticMemory", "Chroma", "ratio", "target"], rows
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--data", choices=("real", "synthetic"), default="synthetic")
    ap.add_argument("--assign", type=int, default=0, help="also time assignment at this N")
    ap.add_argument(
        "--assign-only",
        action="store_true",
        help="only the in-memory assignment of --assign synthetic cells (scale_assign.md)",
    )
    ap.add_argument(
        "--reuse",
        type=Path,
        help="keep the stores in this directory (outside the repository) and, when an "
        "ingest of the same --n is there already, open it instead of ingesting again",
    )
    ap.add_argument(
        "--open-only",
        action="store_true",
        help="only the ingest (or --reuse) and the cold opens from the snapshot",
    )
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.assign_only:
        result = assign_only(args.assign)
        result["wall_s"] = round(time.perf_counter() - t0, 1)
        common.write_results(
            common.RESULTS, "scale_assign", result, assign_table(result), "Assignment at scale"
        )
        return
    result = run(args.n, args.data, args.assign, args.reuse, args.open_only)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    common.write_results(
        common.RESULTS,
        "scale_open" if args.open_only else "scale",
        result,
        table(result),
        "Ingest, cold open and memory beside Chroma",
    )


def assign_only(n: int, threshold: float = 0.3824) -> dict[str, Any]:
    """In-memory assignment of ``n`` structured synthetic cells, default and 1 BLAS thread.

    The threshold defaults to the one calibrated on the Reuters vectors (20K and 100K runs).
    """
    big = structured_vectors(n, seed=7)
    return {
        "assignment_n": n,
        "join_threshold": threshold,
        "assignment_big": assignment_rate(big, threshold),
        "assignment_big_1_blas_thread": assignment_rate(big, threshold, blas_threads=1),
    }


def assign_table(r: dict[str, Any]) -> str:
    rows = [
        [f"{label}, {r[key]['groups']} groups", round(r[key]["cells_per_s"]), ">= 30K"]
        for key, label in [
            ("assignment_big", f"in-memory assignment at {r['assignment_n']} (synthetic)"),
            ("assignment_big_1_blas_thread", "  the same, BLAS capped at 1 thread"),
        ]
    ]
    return common.markdown_table(["measure", "cells/s", "target"], rows)


if __name__ == "__main__":
    main()
