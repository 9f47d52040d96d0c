"""Embed the benchmark corpora once with all-MiniLM-L6-v2 and cache float32 ``.npy`` files.

Usage: ``python -m benchmarks.embed_cache [--only scifact|reuters] [--chunk 2048]``

Files go to ``~/.cache/magnetic-bench`` (``MAGNETIC_BENCH_CACHE`` overrides), never into the
repository. Reuters is embedded in chunks, each saved on its own, so an interrupted run resumes
where it stopped; the chunks are joined into ``reuters_passages.npy`` at the end.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks import common


def _embedder():
    from magnetic_core.embeddings import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(batch_size=64)


def _save(path: Path, arr: np.ndarray) -> None:
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, arr.astype(np.float32))
    tmp.replace(path)


def embed_scifact(cache: Path, embedder=None) -> None:
    """Cache ``scifact_corpus.npy`` (title + text) and ``scifact_queries.npy`` (all queries)."""
    corpus_path, query_path = cache / "scifact_corpus.npy", cache / "scifact_queries.npy"
    if corpus_path.exists() and query_path.exists():
        print("scifact: cached")
        return
    embedder = embedder or _embedder()
    _, docs = common.scifact_corpus()
    _, queries = common.scifact_queries()
    t0 = time.perf_counter()
    _save(query_path, embedder.embed_documents(queries))
    _save(corpus_path, embedder.embed_documents(docs))
    print(f"scifact: {len(docs)} docs + {len(queries)} queries in {time.perf_counter() - t0:.0f}s")


def embed_reuters(cache: Path, chunk: int, embedder=None) -> None:
    """Cache ``reuters_passages.npy`` (all passages, file order), resumable per chunk."""
    final = cache / "reuters_passages.npy"
    if final.exists():
        print("reuters: cached")
        return
    texts = common.reuters_texts()
    parts = cache / "reuters_parts"
    parts.mkdir(exist_ok=True)
    embedder = embedder or _embedder()
    n_chunks = (len(texts) + chunk - 1) // chunk
    t0, done = time.perf_counter(), 0
    for i in range(n_chunks):
        part = parts / f"{chunk}_{i:05d}.npy"
        if part.exists():
            continue
        _save(part, embedder.embed_documents(texts[i * chunk : (i + 1) * chunk]))
        done += min(chunk, len(texts) - i * chunk)
        rate = done / (time.perf_counter() - t0)
        print(f"reuters: chunk {i + 1}/{n_chunks}, {rate:.1f} passages/s", flush=True)
    arr = np.concatenate([np.load(parts / f"{chunk}_{i:05d}.npy") for i in range(n_chunks)])
    if arr.shape[0] != len(texts):
        raise SystemExit(f"reuters: {arr.shape[0]} vectors for {len(texts)} passages")
    _save(final, arr)
    print(f"reuters: wrote {final} {arr.shape}")


def main(argv: list[str] | None = None) -> None:
    """Embed SciFact first (small), then Reuters."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", choices=["scifact", "reuters"])
    ap.add_argument("--chunk", type=int, default=2048)
    args = ap.parse_args(argv)
    cache = common.cache_dir()
    emb = _embedder()
    if args.only in (None, "scifact"):
        embed_scifact(cache, emb)
    if args.only in (None, "reuters"):
        embed_reuters(cache, args.chunk, emb)


if __name__ == "__main__":
    main()
