"""Sleep mode: what one consolidation pass does to the hierarchy, to search, and what it costs.

Usage: ``python -m benchmarks.sleep [--reuters-n 100000] [--synthetic-n 100000] [--smoke]``

Three parts, each with the store's state before and after one ``mem.sleep()`` at defaults:

* ``msc``: the first 2,000 Multi-Session Chat turns (MiniLM vectors, cached beside the other
  benchmark caches): singleton share, mean cohesion, group count.
* ``reuters``: the first N Reuters passages (cached MiniLM vectors; N is capped at what the
  cache holds): recall@10 against exact search at the default budget, search p50 (measured
  interleaved against an unslept twin of the store), NMI of the groups against an offline
  k-means with as many clusters, and the pass's cost.
* ``synthetic``: N clustered vectors, the same measurements at 100K cells where the Reuters
  cache is short.

Results: ``benchmarks/results/sleep.json`` and ``sleep.md``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


class _Cached:
    """Stands in for the embedder whose vectors were cached (never asked to embed)."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim

    def embed_documents(self, texts):  # pragma: no cover - vectors are always given
        raise RuntimeError("vectors are passed explicitly")

    def embed_query(self, text):  # pragma: no cover
        raise RuntimeError("vectors are passed explicitly")


# -- data ----------------------------------------------------------------------------------
def msc_turns(n: int = 2000) -> list[str]:
    """The first ``n`` non-empty dialogue turns of the MSC session-3 test file."""
    rows = common.read_jsonl(common.DATA / "msc" / "session_3_test.jsonl")
    turns = [t["text"].strip() for r in rows for t in r["dialog"] if t["text"].strip()]
    return turns[:n]


def msc_vectors(smoke: bool) -> np.ndarray:
    turns = msc_turns()
    if smoke:
        return common.load_vectors("msc", turns[:500], dim=384)
    path = common.cache_dir() / "msc_turns_2000.npy"
    if not path.exists():
        from magnetic_core.embeddings import SentenceTransformerEmbedder

        vecs = np.asarray(SentenceTransformerEmbedder(batch_size=64).embed_documents(turns))
        np.save(path, vecs.astype(np.float32))
    return np.load(path)


def synthetic(n: int, dim: int = 128, per: int = 200, seed: int = 0) -> np.ndarray:
    """Clustered unit vectors (about ``per`` per cluster), in random order."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(2, n // per), dim))
    labels = rng.integers(0, centres.shape[0], size=n)
    scale = np.linspace(1.6, 0.4, dim)  # a decaying spectrum, as in sentence embeddings
    x = centres[labels] / np.sqrt(dim) + rng.normal(size=(n, dim)) * scale / np.sqrt(dim)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _reuters_cached() -> int:
    """How many Reuters vectors the cache holds (whole file, or chunks written so far)."""
    path = common.cache_dir() / "reuters_passages.npy"
    if path.exists():
        return int(np.load(path, mmap_mode="r").shape[0])
    parts = sorted((common.cache_dir() / "reuters_parts").glob("*.npy"))
    return sum(int(np.load(p, mmap_mode="r").shape[0]) for p in parts)


# -- measurements --------------------------------------------------------------------------
def build(vectors: np.ndarray, name: str, root: Path):
    from magnetic_core import MagneticMemory

    mem = MagneticMemory(path=str(root / name), embedder=_Cached(MINILM, vectors.shape[1]))
    t0 = time.perf_counter()
    for start in range(0, len(vectors), 5000):
        chunk = vectors[start : start + 5000]
        mem.add(
            [f"cell {i}" for i in range(start, start + len(chunk))],
            ids=[f"c{i}" for i in range(start, start + len(chunk))],
            vectors=chunk,
        )
    return mem, time.perf_counter() - t0


def health(stats: Any) -> dict[str, Any]:
    return {
        "groups": stats.groups,
        "singleton_share": round(stats.singleton_share, 4),
        "mean_cohesion": round(stats.mean_cohesion, 4),
        "largest_group": stats.largest_group,
        "imbalance": round(stats.imbalance, 3),
        "size_p50_p90_p99": [round(v, 1) for v in stats.size_percentiles],
    }


def recall_at_10(mem: Any, base: np.ndarray, queries: np.ndarray) -> float:
    """recall@10 of ``mem`` against exact search over ``base``."""
    truth = np.argsort(-(queries @ base.T), axis=1)[:, :10]
    found = [{int(h.id[1:]) for h in mem.search(vector=q, k=10)} for q in queries]
    return round(float(np.mean([len(f & set(t.tolist())) / 10 for f, t in zip(found, truth)])), 4)


def p50_interleaved(a: Any, b: Any, queries: np.ndarray, rounds: int = 3) -> tuple[float, float]:
    """Search p50 (ms) of two stores, each query run on both in turn.

    On a shared machine the load changes from minute to minute; alternating the two stores
    query by query makes them see the same load, so their p50s can be compared.
    """
    for q in queries[:20]:
        a.search(vector=q, k=10)
        b.search(vector=q, k=10)
    ta: list[float] = []
    tb: list[float] = []
    for _ in range(rounds):
        for q in queries:
            t0 = time.perf_counter()
            a.search(vector=q, k=10)
            t1 = time.perf_counter()
            b.search(vector=q, k=10)
            ta.append(t1 - t0)
            tb.append(time.perf_counter() - t1)
    return round(float(np.median(ta)) * 1e3, 4), round(float(np.median(tb)) * 1e3, 4)


def nmi_vs_kmeans(mem: Any, vectors: np.ndarray, seed: int = 0) -> float:
    """NMI between the memory's groups and a k-means of the same size on the same vectors."""
    from sklearn.cluster import KMeans, MiniBatchKMeans
    from sklearn.metrics import normalized_mutual_info_score

    ids = [c.id for c in mem.get()]
    gid = {c.id: c.group_id for c in mem.get()}
    labels = np.unique([gid[c] for c in ids], return_inverse=True)[1]
    order = np.array([int(c[1:]) for c in ids])
    k = int(labels.max()) + 1
    x = vectors[order]
    if len(x) <= 20000:
        km = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(x)
    else:
        km = MiniBatchKMeans(n_clusters=k, n_init=1, random_state=seed, batch_size=4096).fit(x)
    return round(float(normalized_mutual_info_score(labels, km.labels_)), 4)


def run_part(name: str, vectors: np.ndarray, n_queries: int, root: Path, search: bool) -> dict:
    """One pass over a store of ``vectors`` (minus the queries); with ``search``, a twin store
    left unslept serves as the 'before' side of an interleaved latency comparison."""
    queries, base = vectors[:n_queries], vectors[n_queries:]
    mem, ingest_s = build(base, name, root)
    twin = build(base, name + "-twin", root)[0] if search else None
    try:
        row: dict[str, Any] = {"part": name, "n": len(base), "ingest_s": round(ingest_s, 1)}
        row["before"] = health(mem.stats())
        if search:
            row["before"]["recall_at_10"] = recall_at_10(mem, base, queries)
            row["before"]["nmi_vs_kmeans"] = nmi_vs_kmeans(mem, base)
        plan_t0 = time.perf_counter()
        plan = mem.sleep(dry_run=True)
        plan_s = time.perf_counter() - plan_t0
        report = mem.sleep()
        row["pass"] = {
            "seconds": round(report.seconds, 2),
            "plan_only_seconds": round(plan_s, 2),
            "moved": report.moved,
            "merges": len(report.merges),
            "absorbed_fragments": len(report.absorbed),
            "splits": len(report.splits),
            "dropped": len(report.dropped),
            "relabelled": len(report.relabelled),
            "thresholds": {k: round(v, 4) for k, v in report.thresholds.items()},
            "dry_run_predicted_groups": plan.after.groups,
        }
        row["after"] = health(mem.stats())
        if search:
            row["after"]["recall_at_10"] = recall_at_10(mem, base, queries)
            row["after"]["nmi_vs_kmeans"] = nmi_vs_kmeans(mem, base)
            row["before"]["p50_ms"], row["after"]["p50_ms"] = p50_interleaved(twin, mem, queries)
        print(f"{name}: {report.summary()} in {report.seconds:.2f}s", flush=True)
        return row
    finally:
        mem.close()
        if twin is not None:
            twin.close()


def targets(rows: list[dict]) -> dict[str, bool]:
    by = {r["part"]: r for r in rows}
    out: dict[str, bool] = {}
    if "msc" in by:
        b, a = by["msc"]["before"], by["msc"]["after"]
        out["msc_singleton_share_halved"] = a["singleton_share"] <= b["singleton_share"] / 2
        out["msc_mean_cohesion_not_lower"] = a["mean_cohesion"] >= b["mean_cohesion"]
    for part in ("reuters", "synthetic"):
        if part in by and "recall_at_10" in by[part]["before"]:
            b, a = by[part]["before"], by[part]["after"]
            out[f"{part}_recall_not_lower"] = a["recall_at_10"] >= b["recall_at_10"]
            out[f"{part}_p50_not_higher"] = a["p50_ms"] <= b["p50_ms"] * 1.05
            out[f"{part}_nmi_not_lower"] = a["nmi_vs_kmeans"] >= b["nmi_vs_kmeans"]
    return out


def table(rows: list[dict]) -> str:
    headers = [
        "part",
        "N",
        "when",
        "groups",
        "singleton share",
        "mean cohesion",
        "largest",
        "recall@10",
        "p50 ms",
        "NMI vs k-means",
    ]
    lines = []
    for r in rows:
        for when in ("before", "after"):
            h = r[when]
            lines.append(
                [
                    r["part"],
                    r["n"],
                    when,
                    h["groups"],
                    h["singleton_share"],
                    h["mean_cohesion"],
                    h["largest_group"],
                    h.get("recall_at_10"),
                    h.get("p50_ms"),
                    h.get("nmi_vs_kmeans"),
                ]
            )
    text = common.markdown_table(headers, lines)
    cost = [
        [
            r["part"],
            r["n"],
            r["pass"]["seconds"],
            r["pass"]["plan_only_seconds"],
            r["pass"]["moved"],
            r["pass"]["merges"],
            r["pass"]["absorbed_fragments"],
            r["pass"]["splits"],
            r["pass"]["dropped"],
        ]
        for r in rows
    ]
    text += "\nCost of one pass:\n\n" + common.markdown_table(
        [
            "part",
            "N",
            "pass s",
            "plan only s",
            "cells moved",
            "merges",
            "fragments absorbed",
            "splits",
            "groups dropped",
        ],
        cost,
    )
    return text


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reuters-n", type=int, default=100_000)
    ap.add_argument("--synthetic-n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, hashing vectors")
    ap.add_argument("--out", type=Path, default=common.RESULTS)
    args = ap.parse_args(argv)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        msc = msc_vectors(args.smoke)
        rows.append(run_part("msc", msc, 0, root, search=False))
        n = 600 if args.smoke else args.reuters_n
        if args.smoke:
            reuters = common.load_vectors("reuters", common.reuters_texts(n + args.queries))
        else:
            reuters = common.reuters_prefix(min(n + args.queries, _reuters_cached()))
        if len(reuters) < n + args.queries:
            print(f"reuters: only {len(reuters)} cached vectors; using them all", flush=True)
        rows.append(run_part("reuters", np.asarray(reuters), args.queries, root, search=True))
        syn_n = 1000 if args.smoke else args.synthetic_n
        rows.append(
            run_part("synthetic", synthetic(syn_n + args.queries), args.queries, root, search=True)
        )
    payload = {"machine": common.machine_info(), "rows": rows, "targets": targets(rows)}
    print(json.dumps(payload["targets"], indent=2))
    name = "sleep_smoke" if args.smoke else "sleep"
    common.write_results(args.out, name, payload, table(rows), "Sleep mode: one pass at defaults")


if __name__ == "__main__":
    main()
