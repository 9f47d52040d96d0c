"""Before/after across git revisions: the same measurements of several commits in one run.

Usage: ``python -m benchmarks.revisions --rev db4b595 --rev HEAD [--sizes 25000,100000]
[--scifact] [--ingest 100000] [--rounds 2] [--alternate [--synthetic 1000000]
[--probe-share 0.8]]``

Each revision is extracted with ``git archive`` into a scratch directory and measured in a
child process that imports only that revision's code (``PYTHONPATH`` is its tree), so a
reorganisation or a new ranking term is compared against the code before it on one machine,
in one run, with the same vectors and queries:

- **vector path** at each real N: the revision's MagneticMemory at its default settings, in
  memory (Chroma writes off, as ``latency_recall`` does past 100K), the same seeded split of
  the cached Reuters MiniLM vectors as ``benchmarks.latency_recall`` (held-out passages as
  queries), single queries after a warm-up, k=10; p50/p95 and tie-aware recall@10 against
  exact search. With ``--rounds 2`` the revisions run A, B, A, B and the median p50 is kept,
  because the machine is shared;
- **alternated passes** (``--alternate``): instead of a fresh process per round, each
  revision's process builds its store once and stays up, and ``--rounds`` passes over the
  queries alternate between them (A B, then B A, ...). Each pass's p50 is divided by the
  first revision's in the same round, and the median of those ratios is reported with the
  share of queries whose ten scores equal the first revision's (to 1e-6). Each pass runs
  within a second of the other revision's, so on a shared host whose speed drifts over
  minutes both see the same machine. What stays fixed for a process's life (where its
  pages landed) stays with its revision: at 1M, run the pair in both orders.
  ``--synthetic N`` adds the structured synthetic set of ``benchmarks.synthetic`` at N
  cells (queries held out as ``latency_recall`` draws them). ``--probe-share S`` searches
  with a budget of S times each set's cells instead of the default (0.75 and above: the
  exact path). The cells' texts are empty;
- **SciFact** (``--scifact``): the revision's own ``benchmarks.scifact`` (nDCG@10 of its rows);
- **persisted ingest** (``--ingest N``): the first N vectors of the same split with their
  passages, added in batches of 1000 to the revision's MagneticMemory on a fresh embedded
  store (``path=``, closed at the end), beside Chroma's own ``add`` of the same ids, vectors
  and passages into a fresh PersistentClient (the ``latency_recall``/``scale`` baseline). Each
  round runs Chroma, then every revision, each in its own process; a revision's ratio is its
  rate over that round's Chroma rate, and the median over rounds is kept. Wall and process
  (CPU) time are both reported: the host is shared.

Results: ``benchmarks/results/revisions.md`` / ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common
from magnetic_core.eval import exact_knn, recall_at_k_tie_aware

K = 10
ROOT = Path(__file__).resolve().parent.parent

# Runs inside the revision's tree; only APIs every measured revision has (benchmarks.common's
# VectorsOnly/in_memory/unpersisted/add_in_batches, MagneticMemory.search(vector=, k=)).
# Arguments: vectors (.npz), texts (.json, or "-" for empty ones), warm-up queries, and a
# probe budget in cells (0: the store's default).
_CHILD = r"""
import json, sys, time
import numpy as np
from benchmarks import common
data = np.load(sys.argv[1])
base, queries, warmup = data["base"], data["queries"], int(sys.argv[3])
texts = [""] * len(base) if sys.argv[2] == "-" else json.loads(open(sys.argv[2]).read())
memory = common.unpersisted(common.in_memory(common.VectorsOnly("bench-minilm", base.shape[1])))
ingest = common.add_in_batches(memory, texts, base, 1000, [f"c{i}" for i in range(len(base))])
if int(sys.argv[4]):
    memory.config = memory.config.with_changes(probe_cells=int(sys.argv[4]))
for i in range(min(warmup, len(queries))):
    memory.search(vector=queries[i], k=10)
def one_pass():
    lat, found = [], []
    for q in queries:
        t0 = time.perf_counter()
        hits = memory.search(vector=q, k=10)
        lat.append(time.perf_counter() - t0)
        found.append([h.score for h in hits])
    return {"lat": lat, "found": found}
"""
# One pass, then the process ends.
PROBE = (
    _CHILD
    + """
print(json.dumps({**one_pass(), "ingest_s": ingest, "groups": memory.stats().groups}))
"""
)
# The store built once, then a pass each time a line comes in (``--alternate``).
SERVE = (
    _CHILD
    + """
print("@@" + json.dumps({"ingest_s": ingest, "groups": memory.stats().groups}), flush=True)
for _ in sys.stdin:
    print("@@" + json.dumps(one_pass()), flush=True)
"""
)


# Persisted ingest in a revision's tree (kind "magnetic") or Chroma alone (kind "chroma").
INGEST = r"""
import json, sys, tempfile, time
import numpy as np
kind, data, texts = sys.argv[1], np.load(sys.argv[2])["base"], json.loads(open(sys.argv[3]).read())
ids = [f"c{i}" for i in range(len(data))]
with tempfile.TemporaryDirectory() as path:
    w0, c0 = time.perf_counter(), time.process_time()
    if kind == "chroma":
        import chromadb
        col = chromadb.PersistentClient(path=path).create_collection(
            "bench", embedding_function=None, configuration={"hnsw": {"space": "cosine"}})
        for s in range(0, len(ids), 1000):
            col.add(ids=ids[s:s + 1000], embeddings=data[s:s + 1000], documents=texts[s:s + 1000])
        groups = None
    else:
        from benchmarks import common
        from magnetic_core import MagneticMemory
        mem = MagneticMemory(path=path, embedder=common.VectorsOnly("bench-minilm", data.shape[1]))
        common.add_in_batches(mem, texts, data, 1000, ids)
        groups = mem.stats().groups
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    if kind != "chroma":
        mem.close()
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "groups": groups}))
"""


def extract(rev: str, scratch: Path) -> tuple[str, Path]:
    """The revision's full hash and a directory holding its tree."""
    sha = subprocess.check_output(["git", "rev-parse", rev], cwd=ROOT, text=True).strip()
    tree = scratch / sha[:12]
    if not tree.exists():
        tree.mkdir(parents=True)
        archive = subprocess.Popen(["git", "archive", sha], cwd=ROOT, stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(tree)], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise SystemExit(f"git archive {rev} failed")
    return sha, tree


def child(tree: Path, args: list[str], timeout: float = 3600) -> str:
    """Run ``python <args>`` with only ``tree`` on the path; its stdout."""
    env = {**os.environ, "PYTHONPATH": str(tree), "MAGNETIC_BENCH_DATA": str(common.DATA)}
    done = subprocess.run(
        [sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree.name}: {' '.join(args[:2])} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def _real_set(n: int, n_queries: int) -> tuple[np.ndarray, np.ndarray]:
    """The Reuters split's base vectors and queries (``split`` without the texts)."""
    base, _, queries = split(n, n_queries)
    return base, queries


def split(n: int, n_queries: int) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Base vectors, their texts and held-out queries: latency_recall's seeded split."""
    from benchmarks.latency_recall import reuters

    vecs, texts, _ = reuters(n, n_queries, smoke=False)
    if n_queries + n > len(vecs):
        raise SystemExit(f"only {len(vecs) - n_queries} Reuters vectors cached; {n} needed")
    base = vecs[n_queries : n_queries + n]
    return base, list(texts[n_queries : n_queries + n]), vecs[:n_queries]


def vector_path(
    trees: dict[str, Path], n: int, n_queries: int, rounds: int, scratch: Path, with_texts: bool
):
    """p50/p95 and recall@10 of each revision at N, the revisions interleaved per round."""
    base, texts, queries = split(n, n_queries)
    if not with_texts:  # the vector path never reads texts; empty ones make builds fast
        texts = [""] * len(texts)
    truth = exact_knn(base, queries, K)[1]
    data, text_file = scratch / f"data-{n}.npz", scratch / f"texts-{n}.json"
    np.savez(data, base=base, queries=queries)
    text_file.write_text(json.dumps(texts))
    runs: dict[str, list[dict[str, Any]]] = {rev: [] for rev in trees}
    for _ in range(rounds):
        for rev, tree in trees.items():
            out = child(tree, ["-c", PROBE, str(data), str(text_file), "50", "0"])
            runs[rev].append(json.loads(out.strip().splitlines()[-1]))
    rows = []
    for rev, got in runs.items():
        pct = [common.percentiles_ms(r["lat"]) for r in got]
        rows.append(
            {
                "rev": rev,
                "n": n,
                "p50_ms": round(statistics.median(p["p50_ms"] for p in pct), 3),
                "p95_ms": round(statistics.median(p["p95_ms"] for p in pct), 3),
                "p50_each_round": [p["p50_ms"] for p in pct],
                "recall_at_10": round(recall_at_k_tie_aware(got[0]["found"], truth, K), 4),
                "ingest_cells_per_s": round(n / statistics.median(r["ingest_s"] for r in got), 1),
                "groups": got[0]["groups"],
            }
        )
        print(f"N={n} {rev[:10]}: {rows[-1]}", flush=True)
    return rows


def _served(proc: subprocess.Popen[str], name: str) -> dict[str, Any]:
    """The next result a SERVE process prints (its other output skipped)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("@@"):
            return dict(json.loads(line[2:]))
    raise SystemExit(f"{name}: the measuring process ended early (exit {proc.wait()})")


def alternated(
    trees: dict[str, Path],
    sets: list[tuple[str, np.ndarray, np.ndarray]],
    rounds: int,
    scratch: Path,
    probe_share: float = 0.0,
) -> list[dict[str, Any]]:
    """``--alternate``: one long-lived process per revision and set, passes alternated;
    searched with a budget of ``probe_share`` of the set's cells when it is above 0."""
    rows = []
    for label, base, queries in sets:
        n = len(base)
        budget = round(probe_share * n)
        truth = exact_knn(base, queries, K)[1]
        data = scratch / f"alt-{label}-{n}.npz"
        np.savez(data, base=base, queries=queries)
        env = {**os.environ, "MAGNETIC_BENCH_DATA": str(common.DATA)}
        procs, built = {}, {}
        try:
            for rev, tree in trees.items():  # built one after the other: no overlap
                procs[rev] = subprocess.Popen(
                    [sys.executable, "-c", SERVE, str(data), "-", "50", str(budget)], cwd=tree,
                    text=True,
                    env={**env, "PYTHONPATH": str(tree)}, stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                )  # fmt: skip
                built[rev] = _served(procs[rev], tree.name)
            passes: dict[str, list[dict[str, Any]]] = {rev: [] for rev in trees}
            order = list(trees)
            for r in range(rounds):
                for rev in order if r % 2 == 0 else order[::-1]:
                    stdin = procs[rev].stdin
                    assert stdin is not None
                    stdin.write("go\n")
                    stdin.flush()
                    passes[rev].append(_served(procs[rev], trees[rev].name))
        finally:
            for proc in procs.values():
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(timeout=120)
        first = passes[order[0]]
        first_p50 = [common.percentiles_ms(p["lat"])["p50_ms"] for p in first]
        for rev in order:
            got = passes[rev]
            p50 = [common.percentiles_ms(p["lat"])["p50_ms"] for p in got]
            ratios = [a / b for a, b in zip(p50, first_p50, strict=True)]
            same = [
                len(x) == len(y) and bool(np.allclose(x, y, atol=1e-6))
                for x, y in zip(got[-1]["found"], first[-1]["found"], strict=True)
            ]
            rows.append(
                {
                    "rev": rev,
                    "n": n,
                    "data": label,
                    "probe_cells": budget or "default",
                    "p50_ms": round(statistics.median(p50), 4),
                    "p50_each_pass": [round(v, 4) for v in p50],
                    "ratio_to_first": round(statistics.median(ratios), 3),
                    "ratio_each_pass": [round(v, 3) for v in ratios],
                    "same_hits_share": round(sum(same) / len(same), 4),
                    "recall_at_10": round(recall_at_k_tie_aware(got[-1]["found"], truth, K), 4),
                    "groups": built[rev]["groups"],
                }
            )
            print(f"{label} N={n} {rev[:10]}: {rows[-1]}", flush=True)
    return rows


def synthetic_set(n: int, n_queries: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` structured synthetic cells and held-out queries, as ``latency_recall`` draws them."""
    from benchmarks import synthetic

    base = synthetic.structured_vectors(n)
    return base, synthetic.queries(n_queries, base=base[: min(n, 250_000)])


def scifact(trees: dict[str, Path], scratch: Path) -> list[dict[str, Any]]:
    """Each revision's own SciFact benchmark; its MagneticMemory rows' nDCG@10."""
    rows = []
    for rev, tree in trees.items():
        out = scratch / f"scifact-{tree.name}"
        child(tree, ["-m", "benchmarks.scifact", "--out", str(out)])
        got = json.loads((out / "scifact.json").read_text())
        for r in got["rows"]:
            if "agnetic" in r["system"]:
                rows.append({"rev": rev, "system": r["system"], "ndcg_at_10": r["ndcg_at_10"]})
                print(f"SciFact {rev[:10]}: {rows[-1]}", flush=True)
    return rows


def ingest(trees: dict[str, Path], n: int, n_queries: int, rounds: int, scratch: Path):
    """Persisted ingest of each revision beside Chroma's add, interleaved per round."""
    base, texts, _ = split(n, n_queries)
    data, text_file = scratch / f"ingest-{n}.npz", scratch / f"ingest-texts-{n}.json"
    np.savez(data, base=base)
    text_file.write_text(json.dumps(texts))
    args = [str(data), str(text_file)]
    # A tree's first process compiles its numba kernels into the tree's cache (tens of
    # seconds, once): a small ingest first, so no measured run pays for it.
    small, small_texts = scratch / "ingest-warmup.npz", scratch / "ingest-warmup-texts.json"
    np.savez(small, base=base[:3000])
    small_texts.write_text(json.dumps(texts[:3000]))
    for tree in trees.values():
        child(tree, ["-c", INGEST, "magnetic", str(small), str(small_texts)])
    runs: dict[str, list[dict[str, Any]]] = {rev: [] for rev in ["chroma", *trees]}
    for _ in range(rounds):
        first = next(iter(trees.values()))  # Chroma's run needs no revision's code
        runs["chroma"].append(json.loads(child(first, ["-c", INGEST, "chroma", *args])))
        for rev, tree in trees.items():
            runs[rev].append(json.loads(child(tree, ["-c", INGEST, "magnetic", *args])))
    rows = []
    for rev, got in runs.items():
        pairs = list(zip(got, runs["chroma"], strict=True))
        rows.append(
            {
                "rev": rev,
                "n": n,
                "cells_per_s": round(n / statistics.median(r["wall_s"] for r in got), 1),
                "cpu_cells_per_s": round(n / statistics.median(r["cpu_s"] for r in got), 1),
                "ratio_to_chroma": round(
                    statistics.median(c["wall_s"] / r["wall_s"] for r, c in pairs), 3
                ),
                "cpu_ratio_to_chroma": round(
                    statistics.median(c["cpu_s"] / r["cpu_s"] for r, c in pairs), 3
                ),
                "ratio_each_round": [round(c["wall_s"] / r["wall_s"], 3) for r, c in pairs],
                "groups": got[0]["groups"],
            }
        )
        print(f"ingest N={n} {rev[:10]}: {rows[-1]}", flush=True)
    return rows


def revision_parser(description: str, name: str) -> argparse.ArgumentParser:
    """The options every side-by-side run of commits takes (this script's, text_path's)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--rev", action="append", required=True, help="a commit; repeat")
    ap.add_argument("--label", action="append", default=[], help="a name per --rev, in order")
    ap.add_argument("--sizes", default="25000,100000")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--name", default=name, help="result file name")
    ap.add_argument("--out", type=Path, default=common.RESULTS)
    return ap


def checkouts(args: argparse.Namespace, scratch: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """Each ``--rev`` extracted under ``scratch``: trees and display names by commit."""
    labels = dict(zip(args.rev, args.label, strict=False))
    trees: dict[str, Path] = {}
    names: dict[str, str] = {}
    for rev in args.rev:
        sha, tree = extract(rev, scratch)
        trees[sha] = tree
        names[sha] = f"{sha[:7]} {labels.get(rev, rev)}".strip()
    return trees, names


def main(argv: list[str] | None = None) -> None:
    """Measure every ``--rev`` and write ``revisions.md`` / ``revisions.json``."""
    ap = revision_parser(__doc__.split("\n")[0], "revisions")
    ap.add_argument("--scifact", action="store_true")
    ap.add_argument("--ingest", type=int, default=0, help="also persisted ingest at this N")
    ap.add_argument(
        "--texts", action="store_true", help="store the passages' texts (else empty: faster builds)"
    )
    ap.add_argument(
        "--alternate", action="store_true", help="long-lived processes, passes alternated"
    )
    ap.add_argument(
        "--synthetic", default="", help="with --alternate: structured synthetic sizes, e.g. 1000000"
    )
    ap.add_argument(
        "--probe-share",
        type=float,
        default=0.0,
        help="with --alternate: search with a probe budget of this share of each set's cells "
        "(e.g. 0.8: the exact path past EXACT_SHARE); default: the store's budget",
    )
    args = ap.parse_args(argv)
    if (args.synthetic or args.probe_share) and not args.alternate:
        ap.error("--synthetic and --probe-share need --alternate")
    if not 0.0 <= args.probe_share <= 1.0:
        ap.error(
            f"--probe-share must be a share of the store between 0 and 1, got {args.probe_share}"
        )
    if args.texts and args.alternate:
        ap.error("--alternate stores empty texts: leave out --texts")
    scratch = Path(tempfile.mkdtemp(prefix="magnetic-revs-"))
    trees, names = checkouts(args, scratch)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    alt: list[dict[str, Any]] = []
    vector: list[dict[str, Any]] = []
    if args.alternate:
        sets = [("reuters-minilm", *_real_set(n, args.queries)) for n in sizes]
        sets += [
            ("synthetic-structured", *synthetic_set(int(n), args.queries))
            for n in args.synthetic.split(",")
            if n
        ]
        alt = alternated(trees, sets, args.rounds, scratch, args.probe_share)
    else:
        vector = [
            r
            for n in sizes
            for r in vector_path(trees, n, args.queries, args.rounds, scratch, args.texts)
        ]
    sci = scifact(trees, scratch) if args.scifact else []
    ing = ingest(trees, args.ingest, args.queries, args.rounds, scratch) if args.ingest else []
    table = common.markdown_table(
        [
            "N",
            "revision",
            "p50 ms",
            "p95 ms",
            "p50 per round",
            "recall@10",
            "ingest cells/s",
            "groups",
        ],
        [
            [
                r["n"],
                names[r["rev"]],
                r["p50_ms"],
                r["p95_ms"],
                r["p50_each_round"],
                r["recall_at_10"],
                r["ingest_cells_per_s"],
                r["groups"],
            ]
            for r in vector
        ],
    )
    table = (
        f"Vector path (search(vector=, k=10), defaults, in memory), {args.queries} held-out "
        f"Reuters MiniLM queries, {args.rounds} interleaved rounds (median p50); cells stored "
        f"{'with their passages' if args.texts else 'with empty texts'}:\n\n" + table
        if vector
        else ""
    )
    if alt:
        table += (
            f"Vector path (search(vector=, k=10), defaults, in memory, empty texts), "
            f"{args.queries} held-out queries; one process per revision and set, built once, "
            f"{args.rounds} passes alternated between them; ratio = the pass's p50 over the "
            "first revision's in the same round (median); same hits = share of queries whose "
            "ten scores equal the first revision's (last pass):\n\n"
        ) + common.markdown_table(
            ["data", "N", "probe cells", "revision", "p50 ms", "ratio", "ratio per pass",
             "same hits", "recall@10", "groups"],
            [
                [r["data"], r["n"], r.get("probe_cells", "default"), names[r["rev"]],
                 r["p50_ms"], r["ratio_to_first"],
                 r["ratio_each_pass"], r["same_hits_share"], r["recall_at_10"], r["groups"]]
                for r in alt
            ],
        )  # fmt: skip
    if sci:
        table += "\nSciFact (each revision's own benchmarks.scifact):\n\n" + common.markdown_table(
            ["revision", "system", "nDCG@10"],
            [[names[r["rev"]], r["system"], r["ndcg_at_10"]] for r in sci],
        )
    if ing:
        table += (
            f"\nPersisted ingest of {args.ingest} cells with their passages (batches of 1000, "
            f"a fresh embedded store each run; Chroma: its own add of the same rows), "
            f"{args.rounds} interleaved rounds, medians; ratio = rate / that round's Chroma "
            "rate:\n\n"
        ) + common.markdown_table(
            [
                "revision",
                "cells/s",
                "CPU cells/s",
                "ratio",
                "CPU ratio",
                "ratio per round",
                "groups",
            ],
            [
                [
                    "Chroma add" if r["rev"] == "chroma" else names[r["rev"]],
                    r["cells_per_s"],
                    r["cpu_cells_per_s"],
                    r["ratio_to_chroma"],
                    r["cpu_ratio_to_chroma"],
                    r["ratio_each_round"],
                    r["groups"],
                ]
                for r in ing
            ],
        )
    payload = {
        "revisions": names,
        "vector_path": vector,
        "alternated": alt,
        "scifact": sci,
        "ingest": ing,
    }
    common.write_results(args.out, args.name, payload, table, "Before/after across revisions")


if __name__ == "__main__":
    main()
