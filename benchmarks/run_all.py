"""Run every benchmark in turn (``make bench``): embeddings, then each script.

Usage: ``python -m benchmarks.run_all [--smoke] [--out DIR]``

Results (JSON, markdown, PNG) go to ``benchmarks/results/`` unless ``--out`` says otherwise.
The embedding cache is filled first when it is missing (about half an hour of MiniLM on two
cores); ``--smoke`` skips it and runs every script on a few hundred items.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks import (
    ablations,
    common,
    embed_cache,
    latency_recall,
    locomo,
    needles,
    scifact,
    summary,
)


def main(argv: list[str] | None = None) -> None:
    """Run the suite; each script writes its own result files."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", type=Path, default=common.RESULTS)
    args = ap.parse_args(argv)
    extra = ["--out", str(args.out)] + (["--smoke"] if args.smoke else [])
    if not args.smoke:
        embed_cache.main([])
    for name, module in (
        ("scifact", scifact),
        ("needles", needles),
        ("locomo", locomo),
        ("latency_recall", latency_recall),
        ("ablations", ablations),
    ):
        t0 = time.perf_counter()
        print(f"== {name}", flush=True)
        module.main(extra)
        print(f"== {name} done in {time.perf_counter() - t0:.0f}s", flush=True)
    summary.main(["--out", str(args.out)])


if __name__ == "__main__":
    main()
