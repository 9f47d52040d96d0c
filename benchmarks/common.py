"""Shared plumbing for the benchmark scripts: paths, data loading, cache, machine info, output."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
DATA = Path(os.environ.get("MAGNETIC_BENCH_DATA", str(ROOT.parent / "shared" / "data")))
REUTERS = DATA / "reuters" / "passages.jsonl"
SCIFACT = DATA / "scifact"


def cache_dir() -> Path:
    """Embedding cache, outside the repository (``MAGNETIC_BENCH_CACHE`` overrides)."""
    path = Path(os.environ.get("MAGNETIC_BENCH_CACHE", "~/.cache/magnetic-bench")).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def read_jsonl(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file (the first ``limit`` when given)."""
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: the evaluation data lives in ../shared/data beside the "
            "checkout; set MAGNETIC_BENCH_DATA to its path"
        )
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
                if limit is not None and len(rows) >= limit:
                    break
    return rows


def reuters_texts(limit: int | None = None) -> list[str]:
    """Reuters passage texts in file order."""
    return [row["text"] for row in read_jsonl(REUTERS, limit)]


def scifact_corpus() -> tuple[list[str], list[str]]:
    """SciFact ``(doc_ids, texts)``; each text is ``title + " " + text`` (BEIR convention)."""
    rows = read_jsonl(SCIFACT / "corpus.jsonl")
    return [r["_id"] for r in rows], [(r["title"] + " " + r["text"]).strip() for r in rows]


def scifact_queries() -> tuple[list[str], list[str]]:
    """All SciFact ``(query_ids, texts)`` in file order."""
    rows = read_jsonl(SCIFACT / "queries.jsonl")
    return [r["_id"] for r in rows], [r["text"] for r in rows]


def scifact_qrels(split: str = "test") -> dict[str, dict[str, int]]:
    """``{query_id: {doc_id: relevance}}`` from ``qrels/<split>.tsv``."""
    qrels: dict[str, dict[str, int]] = {}
    with (SCIFACT / "qrels" / f"{split}.tsv").open(encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, did, score = line.strip().split("\t")
            qrels.setdefault(qid, {})[did] = int(score)
    return qrels


def machine_info() -> dict[str, Any]:
    """Cores, CPU model, memory and library versions, stored beside every result."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "cpu_model": cpu,
        "logical_cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": np.__version__,
        "openblas_env": {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS")},
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }
    try:
        import psutil

        info["memory_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
        info["load_avg_at_start"] = [round(x, 2) for x in os.getloadavg()]
    except ImportError:
        pass
    for mod in ("chromadb", "faiss", "hnswlib"):
        try:
            info[mod] = __import__(mod).__version__
        except (ImportError, AttributeError):
            info[mod] = None
    return info


def rss_mb() -> float:
    """Resident set size of this process in MiB (0 when psutil is missing)."""
    try:
        import psutil
    except ImportError:
        return 0.0
    return psutil.Process().memory_info().rss / 2**20


def percentiles_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p95/mean of per-query latencies, in milliseconds."""
    arr = np.asarray(seconds, dtype=np.float64) * 1e3
    return {
        "p50_ms": round(float(np.percentile(arr, 50)), 4),
        "p95_ms": round(float(np.percentile(arr, 95)), 4),
        "mean_ms": round(float(arr.mean()), 4),
    }


def batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """Consecutive slices of ``items`` of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub markdown table; floats are shown with 4 significant digits."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return "" if v is None else str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_results(
    out_dir: Path, name: str, payload: dict[str, Any], table_md: str, title: str
) -> None:
    """Write ``<name>.json`` and ``<name>.md`` (title, machine line, table) into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {"machine": machine_info(), **payload}
    (out_dir / f"{name}.json").write_text(json.dumps(payload, indent=2, default=str) + "\n")
    m = payload["machine"]
    header = (
        f"# {title}\n\nMachine: {m['cpu_model']}, {m['logical_cores']} logical cores, "
        f"{m.get('memory_gb', '?')} GB, numpy {m['numpy']}, chromadb {m['chromadb']}; "
        f"{m['date_utc']} UTC.\n\n"
    )
    (out_dir / f"{name}.md").write_text(header + table_md)
    print(f"wrote {out_dir / (name + '.json')} and .md")


def load_vectors(name: str, smoke_texts: Sequence[str] | None = None, dim: int = 384) -> np.ndarray:
    """Cached MiniLM vectors ``<name>.npy``; in smoke mode, hashing vectors of ``smoke_texts``.

    Raises:
        SystemExit: the cache file is missing (run ``python -m benchmarks.embed_cache``).
    """
    if smoke_texts is not None:
        from magnetic_core.embeddings import HashingEmbedder

        return np.asarray(HashingEmbedder(dim=dim).embed_documents(smoke_texts), np.float32)
    path = cache_dir() / f"{name}.npy"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run `python -m benchmarks.embed_cache` first")
    return np.load(path, mmap_mode="r")


def reuters_prefix(n: int) -> np.ndarray:
    """MiniLM vectors of the first ``n`` Reuters passages (file order).

    Reads the finished cache, or the chunks already written while it is still being filled.
    """
    path = cache_dir() / "reuters_passages.npy"
    if path.exists():
        return np.asarray(np.load(path, mmap_mode="r")[:n], np.float32)
    parts = sorted((cache_dir() / "reuters_parts").glob("*.npy"))
    got: list[np.ndarray] = []
    for part in parts:
        got.append(np.load(part))
        if sum(len(g) for g in got) >= n:
            return np.concatenate(got)[:n]
    raise SystemExit(f"only {sum(len(g) for g in got)} Reuters vectors cached; {n} needed")


def embedder(smoke: bool) -> Any:
    """MiniLM for real runs; the (non-semantic) hashing embedder in smoke mode."""
    if smoke:
        from magnetic_core.embeddings import HashingEmbedder

        return HashingEmbedder(dim=384)
    from magnetic_core.embeddings import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


class VectorsOnly:
    """An embedder stand-in for stores fed precomputed vectors (it refuses to embed)."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("benchmarks pass vectors; embedding here is a bug")

    def embed_query(self, text: str) -> np.ndarray:
        raise RuntimeError("benchmarks pass vectors; embedding here is a bug")


def unpersisted(memory: Any) -> Any:
    """Turn off a MagneticMemory's Chroma writes, for in-memory-only runs (1M cells, ablations).

    Assignment, the catalog and search run exactly as in a persisted store; only the writes
    to Chroma become no-ops, because persisting a million cells would take longer than the
    whole benchmark. The store must not be reopened afterwards.
    """
    store = memory._store
    store.write_cells = lambda *a, **k: None
    store.relocate_cells = lambda *a, **k: None
    store.write_groups = lambda *a, **k: None
    store.delete_groups = lambda *a, **k: None
    store.save_settings = lambda **k: None
    return memory


def add_in_batches(
    memory: Any, texts: Sequence[str], vectors: np.ndarray, batch: int, ids: Sequence[str]
) -> float:
    """Add through the public API in batches; returns the wall time in seconds."""
    t0 = time.perf_counter()
    for start in range(0, len(texts), batch):
        end = start + batch
        memory.add(list(texts[start:end]), ids=list(ids[start:end]), vectors=vectors[start:end])
    return time.perf_counter() - t0


def in_memory(embedder: Any, config: Any = None) -> Any:
    """A MagneticMemory on a fresh namespace of a Chroma EphemeralClient."""
    import uuid

    import chromadb

    from magnetic_core import MagneticMemory

    return MagneticMemory(
        client=chromadb.EphemeralClient(),
        namespace=f"bench-{uuid.uuid4().hex[:12]}",
        embedder=embedder,
        config=config,
    )
