"""Structured synthetic embeddings for scale runs: a mixture fitted to the Reuters MiniLM vectors.

Usage (the comparison at 100K against the real vectors, written to ``benchmarks/results``):
``python -m benchmarks.synthetic [--n 100000] [--queries 300]``

In a benchmark::

    from benchmarks.synthetic import queries, structured_vectors
    base = structured_vectors(1_000_000)     # (1M, 384) float32 unit rows
    q = queries(300)                          # drawn from the same mixture, other seed

The real vectors are split into many components by spherical k-means (about 100 passages
each). Each component is kept as a Gaussian: its mean, its leading principal directions with
their variances (the component's own spectrum), and one variance for the rest of the space.
A synthetic vector picks a component with the real data's proportions, draws from that
Gaussian and is scaled to unit length. So topics, their sizes, how tightly each is packed and
along which directions its passages differ all come from the data; only the passages are new.
Isotropic clusters (``magnetic_core.eval.clustered_data``) have none of this and are far
harder for every index (recall 0.53 at 1M), which says nothing about real embeddings.

The fitted model is cached beside the vectors (``~/.cache/magnetic-bench``), keyed by the
number of source vectors, so every benchmark draws the same sets.
"""

from __future__ import annotations

import argparse
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common

__all__ = ["Mixture", "fit_mixture", "load_mixture", "queries", "structured_vectors"]

logger = logging.getLogger(__name__)

DIM = 384
PER_COMPONENT = 100  # source passages per mixture component, on average
RANK = 48  # principal directions kept per component (fewer when it has fewer members)
# Every draw's distance from its component's mean is scaled by TAU. A Gaussian fitted to a
# component is tidier than the passages it came from (they trail off towards neighbouring
# topics), so at TAU 1 every index finds neighbours too easily; TAU is the one number chosen
# by comparison (faiss IVF recall against nprobe at 100K, see compare()), nothing else is.
TAU = 1.3
QUERY_SEED_OFFSET = 1_000_003  # queries come from another stream than any base set


@dataclass(frozen=True)
class Mixture:
    """A Gaussian mixture with per-component low-rank covariance plus isotropic rest.

    Attributes:
        weights: (K,) component probabilities.
        means: (K, d) component means (not unit: the mean of unit vectors).
        bases: (K, r, d) orthonormal principal directions of each component.
        scales: (K, r) standard deviation along each direction (0 past a component's rank).
        rest: (K,) standard deviation per coordinate of what the directions leave out.
        spread: (Q,) quantiles of how far a member lies from its component's mean, relative
            to the component's typical distance (pooled over components): each draw is
            scaled by one of them, so distances to the topic vary as in the data (a
            Gaussian in 384-d puts every draw at almost the same distance).
    """

    weights: np.ndarray
    means: np.ndarray
    bases: np.ndarray
    scales: np.ndarray
    rest: np.ndarray
    spread: np.ndarray

    def sample(self, n: int, seed: int = 0, tau: float = 1.0, block: int = 65536) -> np.ndarray:
        """``n`` unit rows (float32), reproducible for a given ``seed``.

        ``tau`` scales every draw's distance from its component's mean.
        """
        rng = np.random.default_rng(seed)
        labels = rng.choice(len(self.weights), size=n, p=self.weights)
        out = np.empty((n, self.means.shape[1]), np.float32)
        for start in range(0, n, block):
            end = min(start + block, n)
            self._fill(labels[start:end], rng, out[start:end], tau)
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out

    def _fill(
        self, labels: np.ndarray, rng: np.random.Generator, out: np.ndarray, tau: float
    ) -> None:
        d = self.means.shape[1]
        out[:] = rng.standard_normal((len(labels), d), dtype=np.float32)
        out *= self.rest[labels, None]
        order = np.argsort(labels, kind="stable")
        comps, starts = np.unique(labels[order], return_index=True)
        bounds = np.append(starts, len(labels))
        r = self.bases.shape[1]
        for c, lo, hi in zip(comps.tolist(), bounds[:-1].tolist(), bounds[1:].tolist()):
            rows = order[lo:hi]
            z = rng.standard_normal((len(rows), r), dtype=np.float32) * self.scales[c]
            out[rows] += z @ self.bases[c]
        q = self.spread
        factor = np.interp(rng.random(len(labels)), np.linspace(0.0, 1.0, len(q)), q)
        out *= (tau * factor).astype(np.float32)[:, None]
        out += self.means[labels]

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp.npz")
        np.savez(
            tmp,
            weights=self.weights,
            means=self.means,
            bases=self.bases,
            scales=self.scales,
            rest=self.rest,
            spread=self.spread,
        )
        tmp.replace(path)


def fit_mixture(
    vectors: np.ndarray, per_component: int = PER_COMPONENT, rank: int = RANK, seed: int = 0
) -> Mixture:
    """Fit the mixture to real unit vectors (spherical k-means, then one PCA per component)."""
    import faiss

    x = np.ascontiguousarray(vectors, dtype=np.float32)
    n, d = x.shape
    k = max(1, n // per_component)
    km = faiss.Kmeans(d, k, niter=20, spherical=True, seed=seed, verbose=False)
    km.train(x)
    _, assigned = km.index.search(x, 1)
    labels = assigned[:, 0]
    weights = np.zeros(k, np.float64)
    means = np.zeros((k, d), np.float32)
    bases = np.zeros((k, rank, d), np.float32)
    scales = np.zeros((k, rank), np.float32)
    rest = np.zeros(k, np.float32)
    ratios: list[np.ndarray] = []
    order = np.argsort(labels, kind="stable")
    comps, starts = np.unique(labels[order], return_index=True)
    bounds = np.append(starts, n)
    for c, lo, hi in zip(comps.tolist(), bounds[:-1].tolist(), bounds[1:].tolist()):
        members = x[order[lo:hi]].astype(np.float64)
        m = len(members)
        weights[c] = m
        means[c] = members.mean(axis=0)
        if m < 2:
            continue
        resid = members - members.mean(axis=0)
        _, sv, vt = np.linalg.svd(resid, full_matrices=False)
        var = sv**2 / (m - 1)  # variance along each principal direction
        keep = min(rank, len(var))
        bases[c, :keep] = vt[:keep]
        scales[c, :keep] = np.sqrt(var[:keep])
        # What the kept directions leave out, spread over the remaining coordinates.
        rest[c] = math.sqrt(float(var[keep:].sum()) / max(d - keep, 1))
        dist = np.linalg.norm(resid, axis=1)
        typical = math.sqrt(float((dist**2).mean()))
        if typical > 1e-9:  # a component of duplicates has no spread to learn from
            ratios.append(dist / typical)
    weights /= weights.sum()
    pooled = np.concatenate(ratios) if ratios else np.ones(1)
    spread = np.quantile(pooled, np.linspace(0.0, 1.0, 1001)).astype(np.float32)
    return Mixture(weights, means, bases, scales, rest, spread)


def _source() -> np.ndarray:
    """The Reuters MiniLM vectors: the finished cache, or the chunks written so far."""
    path = common.cache_dir() / "reuters_passages.npy"
    if path.exists():
        return np.asarray(np.load(path, mmap_mode="r"), np.float32)
    parts = sorted((common.cache_dir() / "reuters_parts").glob("*.npy"))
    if not parts:
        raise SystemExit(f"{path} is missing: run `python -m benchmarks.embed_cache` first")
    logger.warning("fitting to the %d Reuters chunks cached so far, not all 105K", len(parts))
    return np.concatenate([np.load(p) for p in parts]).astype(np.float32)


_CACHE: dict[int, Mixture] = {}


def load_mixture() -> Mixture:
    """The mixture fitted to the cached Reuters vectors (fitted once, then read from disk)."""
    source = _source()
    n = len(source)
    if n in _CACHE:
        return _CACHE[n]
    path = common.cache_dir() / f"synthetic_mixture_{n}_{PER_COMPONENT}_{RANK}.npz"
    if path.exists():
        with np.load(path) as f:
            model = Mixture(
                f["weights"],
                f["means"],
                f["bases"],
                f["scales"],
                f["rest"],
                f["spread"],
            )
    else:
        t0 = time.perf_counter()
        model = fit_mixture(source)
        model.save(path)
        logger.info("fitted %d components in %.1f s", len(model.weights), time.perf_counter() - t0)
    _CACHE[n] = model
    return model


def structured_vectors(n: int, seed: int = 0) -> np.ndarray:
    """``n`` synthetic 384-d unit vectors (float32) with the structure of Reuters MiniLM ones.

    The same ``(n, seed)`` always gives the same rows, and a larger ``n`` with the same seed
    does not start with the smaller set (draw once at the largest size and slice if nested
    sets are needed).
    """
    return load_mixture().sample(n, seed, TAU)


def queries(n: int, seed: int = 0) -> np.ndarray:
    """``n`` query vectors from the same mixture, independent of every base set's rows."""
    return load_mixture().sample(n, seed + QUERY_SEED_OFFSET, TAU)


# -- the comparison at 100K ------------------------------------------------------------------
def faiss_curve(
    base: np.ndarray, q: np.ndarray, truth: np.ndarray, probes: tuple[int, ...]
) -> dict[int, float]:
    """faiss IVF-Flat (inner product, nlist = 4 sqrt(N)): tie-aware recall@10 per nprobe."""
    import faiss

    from magnetic_core.eval import recall_at_k_tie_aware

    n, d = base.shape
    nlist = max(1, int(4 * math.sqrt(n)))
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
    sample = base[np.random.default_rng(0).permutation(n)[: min(n, 40 * nlist, 60_000)]]
    index.train(np.ascontiguousarray(sample))
    index.add(np.ascontiguousarray(base))
    curve = {}
    for nprobe in probes:
        index.nprobe = nprobe
        _, idx = index.search(q, 10)
        found = [
            sorted((base[row[row >= 0]] @ q[i]).tolist(), reverse=True) for i, row in enumerate(idx)
        ]
        curve[nprobe] = round(recall_at_k_tie_aware(found, truth, 10), 4)
    return curve


def engine_curve(
    base: np.ndarray, q: np.ndarray, truth: np.ndarray, budgets: tuple[int, ...]
) -> dict[str, Any]:
    """MagneticMemory at defaults (in memory): recall@10 at its default and other probe budgets."""
    from dataclasses import replace

    from magnetic_core.eval import recall_at_k_tie_aware

    memory = common.unpersisted(common.in_memory(common.VectorsOnly("minilm", base.shape[1])))
    ids = [f"c{i}" for i in range(len(base))]
    common.add_in_batches(memory, [""] * len(base), base, 5000, ids)
    stats = memory.stats()
    default = memory.config.probe_cells
    curve = {}
    for budget in sorted({*budgets, default}):
        memory.config = replace(memory.config, probe_cells=budget)
        found = [[h.score for h in memory.search(vector=v, k=10)] for v in q]
        curve[budget] = round(recall_at_k_tie_aware(found, truth, 10), 4)
    memory.close()
    return {
        "groups": stats.groups,
        "join_threshold": round(stats.join_threshold, 4),
        "default_probe_cells": default,
        "recall_by_probe_cells": curve,
    }


def _real(n: int, n_queries: int) -> tuple[np.ndarray, np.ndarray]:
    """The latency benchmark's split: seeded shuffle, queries held out first, then the base."""
    vecs = _source()
    perm = np.random.default_rng(42).permutation(len(vecs))
    vecs = np.asarray(vecs[perm], np.float32)
    return vecs[n_queries : n_queries + n], vecs[:n_queries]


def compare(n: int, n_queries: int) -> dict[str, Any]:
    """Real against synthetic at ``n``: faiss IVF and engine recall curves side by side."""
    from magnetic_core.eval import exact_knn

    probes = (1, 2, 4, 8, 16, 32, 64)
    budgets = (2000, 4000, 8000)
    real = _real(n, n_queries)
    if len(real[0]) < n:
        logger.warning("only %d real vectors beside the queries: comparing at that N", len(real[0]))
        n = len(real[0])
    out: dict[str, Any] = {"n": n, "queries": n_queries, "source_vectors": len(_source())}
    sets = {"real": real, "synthetic": (structured_vectors(n), queries(n_queries))}
    for name, (base, q) in sets.items():
        truth = exact_knn(base, q, 10)[1]
        t0 = time.perf_counter()
        out[name] = {
            "faiss_recall_by_nprobe": faiss_curve(base, q, truth, probes),
            "engine": engine_curve(base, q, truth, budgets),
            "nn_similarity_p50": round(float(np.median(truth[:, 0])), 4),
        }
        logger.info("%s done in %.0f s", name, time.perf_counter() - t0)
    real, syn = out["real"], out["synthetic"]
    out["max_faiss_gap"] = max(
        abs(real["faiss_recall_by_nprobe"][p] - syn["faiss_recall_by_nprobe"][p]) for p in probes
    )
    r_eng, s_eng = real["engine"]["recall_by_probe_cells"], syn["engine"]["recall_by_probe_cells"]
    out["max_engine_gap"] = max(abs(r_eng[b] - s_eng[b]) for b in r_eng)
    return out


def _table(result: dict[str, Any]) -> str:
    real, syn = result["real"], result["synthetic"]
    rows = [
        [
            f"faiss IVF-Flat nprobe {p}",
            real["faiss_recall_by_nprobe"][p],
            syn["faiss_recall_by_nprobe"][p],
        ]
        for p in real["faiss_recall_by_nprobe"]
    ]
    r_eng, s_eng = real["engine"]["recall_by_probe_cells"], syn["engine"]["recall_by_probe_cells"]
    default = real["engine"]["default_probe_cells"]
    for b in r_eng:
        label = f"MagneticMemory probe_cells {b}" + (" (default)" if b == default else "")
        rows.append([label, r_eng[b], s_eng[b]])
    rows.append(["groups formed", real["engine"]["groups"], syn["engine"]["groups"]])
    rows.append(
        ["median nearest-neighbour cosine", real["nn_similarity_p50"], syn["nn_similarity_p50"]]
    )
    head = (
        f"Recall@10 (tie-aware) at N = {result['n']}, {result['queries']} queries, real Reuters "
        f"MiniLM vectors against `structured_vectors` (TAU {TAU}). Largest gap: faiss "
        f"{result['max_faiss_gap']:.4f}, MagneticMemory {result['max_engine_gap']:.4f}.\n\n"
    )
    return head + common.markdown_table(["measure", "real", "synthetic"], rows)


def main(argv: list[str] | None = None) -> None:
    """Fit (or load) the mixture and compare it with the real vectors at ``--n``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    result = compare(args.n, args.queries)
    common.write_results(
        common.RESULTS,
        "synthetic",
        {"tau": TAU, "per_component": PER_COMPONENT, "rank": RANK, **result},
        _table(result),
        "Structured synthetic vectors against the real ones",
    )


if __name__ == "__main__":
    main()
