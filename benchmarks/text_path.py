"""Text queries against the vector path, across revisions: the cost of the entity and BM25 stages.

Usage: ``python -m benchmarks.text_path --rev <before> --rev HEAD [--sizes 25000,100000]
[--rounds 2] [--queries 300] [--labelled] [--words 8]``

A text query is what an agent sends: ``search(text, vector=v, k=10)`` with the store's
defaults, so the entity stage (entities of the text route and boost) and the lexical stage
(BM25 of its words, fused with the cosine) both run; the vector path is
``search(vector=v, k=10)`` on the same store. Each revision is extracted with
``git archive`` and measured in a child process that imports only its tree (as
``benchmarks.revisions`` does), on the same in-memory store built from the cached Reuters
MiniLM vectors with their passages (Chroma writes off), held-out passages as queries (their
text and their vector), 50 warm-up queries of each kind, then the two kinds interleaved
query by query so both see the same machine (each text query beside the vector query of
another one, half the queries away: right after its own vector query, a text query would
find its probe's data in the caches). With ``--rounds 2`` the revisions run A, B, A,
B and each p50 is the median over rounds. The ratio text p50 / vector p50 is the issue's
measure (target <= 1.5 at 100K). Each query's CPU time (``time.thread_time``) is kept too:
on a shared core a query that is longer is more often preempted, which inflates the wall
ratio; the CPU ratio is what the code costs. Recall@10 of both paths is tie-aware against
exact search (the text path's fusion trades some of it for lexical matches: its purpose).

A store built in the process labels each group the first time a hit lands in it (about
1 ms each at 100K), which a store opened from its snapshot (labels saved) never pays; text
queries reach more groups than vector queries. ``--labelled`` labels every group first, to
see whether that one-time cost is part of the ratio (at 100K it was not: the text p50 did
not drop, ``text_path_100k_labelled.md``).

The held-out passages are about 26 words long; an agent's question is shorter. ``--words N``
makes each query the first ``N`` words of its passage, embedded by MiniLM (once, into the
benchmark cache), for both paths; recall is then against the exact neighbours of those
vectors.

When the Reuters cache is still being written, the vectors cached so far are used (the
first ``N + queries`` passages in file order, shuffled with seed 42) and the result says so.

Results: ``benchmarks/results/text_path.md`` / ``.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common
from benchmarks.revisions import checkouts, child, revision_parser
from magnetic_core.eval import exact_knn, recall_at_k_tie_aware

K = 10

# Runs inside the revision's tree (only APIs every measured revision has).
PROBE = r"""
import json, sys, time
import numpy as np
from benchmarks import common
data = np.load(sys.argv[1])
texts = json.loads(open(sys.argv[2]).read())
base, queries, warmup = data["base"], data["queries"], int(sys.argv[3])
qtexts = texts[len(base):]
memory = common.unpersisted(common.in_memory(common.VectorsOnly("bench-minilm", base.shape[1])))
common.add_in_batches(memory, texts[:len(base)], base, 1000, [f"c{i}" for i in range(len(base))])
if sys.argv[4] == "1":
    memory.groups()  # every group labelled, as in a store opened from its snapshot
def vector(i):
    return memory.search(vector=queries[i], k=10)
def text(i):
    return memory.search(qtexts[i], vector=queries[i], k=10)
for i in range(min(warmup, len(queries))):
    vector(i)
    text(i)
out = {k: [] for k in ("vector", "text", "vector_cpu", "text_cpu", "vector_found", "text_found")}
# Each text query runs beside the vector query of another (half the queries away): the same
# query's vector query just before it would leave its probe's data in the caches.
n = len(queries)
found = {"vector": [None] * n, "text": [None] * n}
for i in range(n):
    for name, run, at in (("vector", vector, (i + n // 2) % n), ("text", text, i)):
        t0, c0 = time.perf_counter(), time.thread_time()
        hits = run(at)
        out[name + "_cpu"].append(time.thread_time() - c0)
        out[name].append(time.perf_counter() - t0)
        found[name][at] = [h.score for h in hits]
out["vector_found"], out["text_found"] = found["vector"], found["text"]
try:
    import psutil
    out["rss_mb"] = psutil.Process().memory_info().rss / 2**20
except ImportError:
    pass
print(json.dumps(out))
"""


def split(n: int, n_queries: int) -> tuple[np.ndarray, list[str], np.ndarray, list[str], str]:
    """Base vectors and texts, query vectors and texts, and which vectors they are."""
    if (common.cache_dir() / "reuters_passages.npy").exists():
        from benchmarks.revisions import split as full_split

        base, texts, queries = full_split(n, n_queries)
        from benchmarks.latency_recall import reuters

        _, all_texts, _ = reuters(n, n_queries, smoke=False)
        return base, texts, queries, list(all_texts[:n_queries]), "latency_recall split"
    vecs = common.reuters_prefix(n + n_queries)
    texts = common.reuters_texts(n + n_queries)
    perm = np.random.default_rng(42).permutation(n + n_queries)
    vecs, texts = np.asarray(vecs[perm], np.float32), [texts[i] for i in perm]
    how = f"first {n + n_queries} passages (cache still being written), shuffled"
    return vecs[n_queries:], texts[n_queries:], vecs[:n_queries], texts[:n_queries], how


def shortened(qtexts: list[str], words: int) -> tuple[list[str], np.ndarray]:
    """The first ``words`` words of each query passage and their MiniLM vectors (embedded
    once, then read from the benchmark cache)."""
    short = [" ".join(t.split()[:words]) for t in qtexts]
    key = hashlib.sha256("\n".join(short).encode("utf-8")).hexdigest()[:16]
    path = common.cache_dir() / f"reuters_queries_{words}w_{key}.npy"
    if not path.exists():
        from magnetic_core.embeddings import SentenceTransformerEmbedder

        vectors = np.asarray(SentenceTransformerEmbedder().embed_documents(short), np.float32)
        np.save(path, vectors)
    return short, np.load(path)


def measure(trees: dict[str, Path], n: int, args: argparse.Namespace, scratch: Path):
    """Per revision: vector and text p50 (median over rounds), their ratio, recall@10."""
    base, texts, queries, qtexts, how = split(n, args.queries)
    if args.words:
        qtexts, queries = shortened(qtexts, args.words)
        how += f"; queries: the first {args.words} words of each, embedded by MiniLM"
    truth = exact_knn(base, queries, K)[1]
    data, text_file = scratch / f"data-{n}.npz", scratch / f"texts-{n}.json"
    np.savez(data, base=base, queries=queries)
    text_file.write_text(json.dumps(texts + qtexts))
    runs: dict[str, list[dict[str, Any]]] = {rev: [] for rev in trees}
    for _ in range(args.rounds):
        for rev, tree in trees.items():
            labelled = "1" if args.labelled else "0"
            out = child(tree, ["-c", PROBE, str(data), str(text_file), "50", labelled])
            runs[rev].append(json.loads(out.strip().splitlines()[-1]))
    rows = []
    for rev, got in runs.items():
        vec = [common.percentiles_ms(r["vector"]) for r in got]
        txt = [common.percentiles_ms(r["text"]) for r in got]
        v50 = statistics.median(p["p50_ms"] for p in vec)
        t50 = statistics.median(p["p50_ms"] for p in txt)
        vcpu = statistics.median(common.percentiles_ms(r["vector_cpu"])["p50_ms"] for r in got)
        tcpu = statistics.median(common.percentiles_ms(r["text_cpu"])["p50_ms"] for r in got)
        rows.append(
            {
                "rev": rev,
                "n": n,
                "vectors": how,
                "vector_p50_ms": round(v50, 3),
                "text_p50_ms": round(t50, 3),
                "ratio": round(t50 / v50, 2),
                "vector_cpu_p50_ms": round(vcpu, 3),
                "text_cpu_p50_ms": round(tcpu, 3),
                "cpu_ratio": round(tcpu / vcpu, 2),
                "text_p95_ms": round(statistics.median(p["p95_ms"] for p in txt), 3),
                "p50_each_round": [[v["p50_ms"], t["p50_ms"]] for v, t in zip(vec, txt)],
                "vector_recall_at_10": round(
                    recall_at_k_tie_aware(got[0]["vector_found"], truth, K), 4
                ),
                "text_recall_at_10": round(
                    recall_at_k_tie_aware(got[0]["text_found"], truth, K), 4
                ),
                "rss_mb": round(statistics.median(r.get("rss_mb", 0.0) for r in got), 1),
            }
        )
        print(f"N={n} {rev[:10]}: {rows[-1]}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    """Measure every ``--rev`` and write ``text_path.md`` / ``text_path.json``."""
    ap = revision_parser(__doc__.split("\n")[0], "text_path")
    ap.add_argument(
        "--labelled",
        action="store_true",
        help="label every group before the warm-up (a store opened from its snapshot has "
        "its labels; a store built in the process labels each group at its first hit)",
    )
    ap.add_argument(
        "--words",
        type=int,
        default=0,
        help="queries of this many words (each held-out passage's first ones, embedded by "
        "MiniLM: an agent's short question) instead of whole passages",
    )
    args = ap.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="magnetic-text-"))
    trees, names = checkouts(args, scratch)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows = [r for n in sizes for r in measure(trees, n, args, scratch)]
    table = common.markdown_table(
        [
            "N",
            "revision",
            "vector p50 ms",
            "text p50 ms",
            "text / vector",
            "CPU p50 ms (vector, text)",
            "CPU text / vector",
            "text p95 ms",
            "p50 per round (vector, text)",
            "recall@10 vector",
            "recall@10 text",
            "RSS MB",
            "vectors",
        ],
        [
            [
                r["n"],
                names[r["rev"]],
                r["vector_p50_ms"],
                r["text_p50_ms"],
                r["ratio"],
                [r["vector_cpu_p50_ms"], r["text_cpu_p50_ms"]],
                r["cpu_ratio"],
                r["text_p95_ms"],
                r["p50_each_round"],
                r["vector_recall_at_10"],
                r["text_recall_at_10"],
                r["rss_mb"],
                r["vectors"],
            ]
            for r in rows
        ],
    )
    table = (
        f"search(text, vector=, k=10) against search(vector=, k=10), defaults, in memory; "
        f"{args.queries} held-out Reuters MiniLM passages as queries"
        + (f" (their first {args.words} words, embedded)" if args.words else "")
        + f", the two kinds interleaved (each text query beside another query's vector "
        f"query), {args.rounds} rounds of the revisions interleaved (median p50); CPU: "
        f"time.thread_time per query. "
        + (
            "Every group labelled before the warm-up (as a store opened from its snapshot)."
            if args.labelled
            else "Groups labelled at their first hit (a store built in the process)."
        )
        + "\n\n"
        + table
    )
    payload = {"revisions": names, "labelled": args.labelled, "rows": rows}
    common.write_results(
        args.out, args.name, payload, table, "Text queries against the vector path"
    )


if __name__ == "__main__":
    main()
