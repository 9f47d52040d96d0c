"""``magnetic sleep``: merge groups whose centroids converged; ``--check`` asks an LLM for
contradictions in the merged groups (LangChain is imported only then)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from magnetic_langchain.cli.options import UsageError, open_memory

__all__ = ["register"]


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add ``sleep``."""
    sleep = subparsers.add_parser(
        "sleep",
        parents=parents,
        help="consolidate: merge groups whose centroids converged",
        description="One consolidation pass: merge groups whose centroids converged; with "
        "--check an Ollama chat model then looks for contradictions (both sides are kept "
        "and linked).",
    )
    sleep.add_argument(
        "--merge-threshold",
        type=float,
        default=None,
        metavar="SIM",
        help="centroid similarity at which two groups merge (default: the store's setting)",
    )
    sleep.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    sleep.add_argument(
        "--check",
        nargs="?",
        const="merged",
        choices=["merged", "all"],
        help="after merging, ask an Ollama chat model for contradictions in the merged "
        "groups (or in all groups with --check all); both sides are kept and linked",
    )
    sleep.add_argument("--llm-model", default="llama3.2", help="Ollama chat model for --check")
    sleep.add_argument(
        "--ollama-host", default=None, help="Ollama address for --check (default: OLLAMA_HOST)"
    )
    sleep.set_defaults(func=cmd_sleep, check_args=_check_args)


def _check_args(args: argparse.Namespace) -> None:
    if args.check and args.dry_run:
        raise UsageError("--check records contradictions after merging; drop --dry-run")


def cmd_sleep(args: argparse.Namespace, out: TextIO) -> int:
    """Plan merges and apply them (unless ``--dry-run``), or merge and check."""
    if args.check:
        return _sleep_and_check(args, out)
    with open_memory(args, create=False) as mem:
        plan = mem.plan_merges(args.merge_threshold)
        out.write(f"{len(plan)} merges planned at threshold {plan.threshold:.2f}\n")
        for keep, absorb, sim in plan.pairs:
            out.write(f"  {absorb} -> {keep}  (similarity {sim:.3f})\n")
        if not args.dry_run:
            kept = mem.apply_merges(plan)
            out.write(f"merged into {len(kept)} groups\n")
    return 0


def _sleep_and_check(args: argparse.Namespace, out: TextIO) -> int:
    """Merge, then have an Ollama chat model look for contradictions in merged groups."""
    from langchain_ollama import ChatOllama

    from magnetic_langchain.consolidation import create_consolidation_chain

    llm = ChatOllama(model=args.llm_model, base_url=args.ollama_host, temperature=0)
    with open_memory(args, create=False) as mem:
        chain = create_consolidation_chain(
            mem, llm, merge_threshold=args.merge_threshold, check=args.check
        )
        result = chain.invoke({})
        out.write(f"merged {len(result.merges)} group pairs\n")
        for keep, absorb, sim in result.merges:
            out.write(f"  {absorb} -> {keep}  (similarity {sim:.3f})\n")
        out.write(
            f"checked {len(result.checked_groups)} groups with {args.llm_model}: "
            f"{len(result.contradictions)} contradictions recorded\n"
        )
        for c in result.contradictions:
            a, b = mem.get([c.cell_a, c.cell_b])
            out.write(f"  ! {a.text[:70]}\n    vs {b.text[:70]}\n    {c.explanation}\n")
        for problem in result.rejected:
            out.write(f"  (unusable answer) {problem}\n")
    return 0
