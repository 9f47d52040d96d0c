"""Why hnswlib's recall is low on the structured synthetic set: its near-duplicates, or its M?

Usage: ``python -m benchmarks.hnsw_synthetic [--n 250000] [--queries 300]``; writes
``hnsw_synthetic.md/.json`` to ``benchmarks/results``.

On the real Reuters vectors hnswlib (M 16) reaches recall@10 0.99 at ef 128 (100K); on the
synthetic set (:mod:`benchmarks.synthetic`) it stays near 0.95 even at ef 512, while faiss IVF
and MagneticMemory behave on it much as on the real vectors. This measures hnswlib on the
synthetic set as drawn, with every near-duplicate pair (neighbours above ``--dup`` cosine)
reduced to one row, and with M 32, tie-aware recall@10 against exact search on each base.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common
from benchmarks.baselines import K, rescored
from magnetic_core.eval import exact_knn, recall_at_k_tie_aware

EFS = (128, 512)


def hnsw_recall(base: np.ndarray, q: np.ndarray, m: int) -> dict[str, Any]:
    """hnswlib (inner product, ef_construction 200) on ``base``: recall@10 per ef."""
    import hnswlib

    truth = exact_knn(base, q, K)[1]
    t0 = time.perf_counter()
    index = hnswlib.Index(space="ip", dim=base.shape[1])
    index.init_index(max_elements=len(base), ef_construction=200, M=m, random_seed=0)
    index.add_items(base, np.arange(len(base)))
    build = time.perf_counter() - t0
    index.set_num_threads(1)
    out: dict[str, Any] = {"rows": len(base), "M": m, "build_s": round(build, 1)}
    for ef in EFS:
        index.set_ef(ef)
        found = [rescored(base, q[i], index.knn_query(q[i], k=K)[0][0]) for i in range(len(q))]
        out[f"recall_ef_{ef}"] = round(recall_at_k_tie_aware(found, truth, K), 4)
    return out


def deduplicated(base: np.ndarray, dup: float) -> tuple[np.ndarray, float]:
    """``base`` with the later row of every nearest-neighbour pair above ``dup`` dropped, and
    the share of rows that had such a neighbour."""
    import faiss

    flat = faiss.IndexFlatIP(base.shape[1])
    flat.add(base)
    sims, ids = flat.search(base, 2)
    close = np.flatnonzero(sims[:, 1] > dup)
    keep = np.ones(len(base), bool)
    for i in close:
        j = int(ids[i, 1])
        if keep[i] and keep[j]:
            keep[max(i, j)] = False
    return np.ascontiguousarray(base[keep]), len(close) / len(base)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=250_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--dup", type=float, default=0.99, help="near-duplicate cosine")
    ap.add_argument("--out", type=Path, default=common.RESULTS)
    args = ap.parse_args(argv)
    from benchmarks import synthetic

    # the base and queries latency_recall's 1M run draws (every size is a prefix)
    base = np.ascontiguousarray(synthetic.structured_vectors(1_000_000)[: args.n])
    q = synthetic.queries(args.queries, base=base)
    rows = [("as drawn", hnsw_recall(base, q, 16))]
    fewer, share = deduplicated(base, args.dup)
    rows.append((f"near-duplicates (> {args.dup}) reduced to one row", hnsw_recall(fewer, q, 16)))
    rows.append(("as drawn, M 32", hnsw_recall(base, q, 32)))
    table = common.markdown_table(
        ["base", "rows", "M", *[f"recall@10 ef {ef}" for ef in EFS], "build s"],
        [
            [name, r["rows"], r["M"], *[r[f"recall_ef_{ef}"] for ef in EFS], r["build_s"]]
            for name, r in rows
        ],
    )
    head = (
        f"Structured synthetic set, N = {args.n}, {args.queries} queries (model "
        f"{synthetic.STRUCTURED_VERSION}, draws at TAU {synthetic.DRAW_TAU}); {share:.1%} of "
        f"rows have a neighbour above cosine {args.dup}.\n\n"
    )
    common.write_results(
        args.out,
        "hnsw_synthetic",
        {
            "n": args.n,
            "queries": args.queries,
            "dup": args.dup,
            "dup_share": share,
            "runs": dict(rows),
        },
        head + table,
        "hnswlib on the structured synthetic set",
    )


if __name__ == "__main__":
    main()
