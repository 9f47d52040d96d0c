"""``magnetic sleep``: one consolidation pass; ``--check`` asks an LLM for contradictions.
``magnetic compact``: the cells collection rewritten without the deleted vectors Chroma keeps.

``magnetic sleep`` prints the pass's report (``--dry-run``: the plan; ``--json``: machine
readable). When the model of ``--check`` cannot be reached or fails, the command says so and
exits non-zero, naming the fix. LangChain is imported only for ``--check``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
from typing import TYPE_CHECKING, Any, TextIO

from magnetic_core import InvalidInputError, MagneticMemory
from magnetic_core._sleep.llm_json import LLMError, LLMUnavailableError
from magnetic_core.types import SleepReport
from magnetic_langchain.cli.options import UsageError, add_command, open_memory
from magnetic_langchain.cli.render import plural

if TYPE_CHECKING:
    from magnetic_core._sleep.consolidate import ConsolidationResult

__all__ = ["register"]


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add ``sleep``."""
    sleep = add_command(
        subparsers,
        parents,
        "sleep",
        cmd_sleep,
        check_args=_check_args,
        help="consolidate the hierarchy; --check looks for contradictions",
        description="One consolidation pass (merge converged groups, absorb fragments, split "
        "incoherent groups, reassign cells, relabel); with --check an Ollama chat model then "
        "looks for contradictions in the groups it changed (both sides are kept and linked, "
        "the newer supersedes the older).",
    )
    add_sleep_arguments(sleep)
    add_command(
        subparsers,
        parents,
        "compact",
        cmd_compact,
        help="give back the space of deleted memories",
        description="Rewrite the cells collection without the deleted vectors Chroma's index "
        "keeps (on disk and in memory). The store does this by itself once the deleted "
        "memories outnumber the live ones; run it after a large delete. Other processes "
        "writing to the store wait meanwhile; nothing is lost if it is interrupted.",
        json_help="print JSON",
    )


def cmd_compact(args: argparse.Namespace, out: TextIO) -> int:
    """Compact the namespace's cells collection and say what it did."""
    with open_memory(args, create=False) as mem:
        report = mem.compact()
        kept = mem.count()
    if getattr(args, "json", False):
        out.write(json.dumps({**dataclasses.asdict(report), "done": report.done}) + "\n")
    elif report.done:
        freed = f", {report.freed_mb:.1f} MB of index files removed" if report.freed_mb else ""
        memories = plural(kept, "memory", "memories")
        out.write(f"compacted the store ({memories}) in {report.seconds:.1f} s{freed}\n")
    else:
        out.write(f"not compacted: {report.skipped}; run it again later\n")
    return 0 if report.done else 1


def _check_args(args: argparse.Namespace) -> None:
    if args.check and args.dry_run:
        raise UsageError("--check records contradictions after the pass; drop --dry-run")


def cmd_sleep(args: argparse.Namespace, out: TextIO) -> int:
    """Run the pass (or print its plan with ``--dry-run``), then the check if asked."""
    with open_memory(args, create=False) as mem:
        return run_sleep(mem, args, out)


_FIX = "start Ollama (`ollama serve`, then `ollama pull {model}`) or pass --ollama-host HOST:PORT"


def add_sleep_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``magnetic sleep``."""
    parser.add_argument(
        "--merge-threshold",
        type=float,
        default=None,
        help="centroid similarity for merging (default: fitted to the data; the seed used 0.85)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    parser.add_argument(
        "--check",
        nargs="?",
        const="changed",
        choices=["changed", "merged", "all"],
        help="after the pass, ask an Ollama chat model for contradictions in the groups it "
        "changed (or merged, or all); both sides are kept, linked, the newer supersedes",
    )
    parser.add_argument("--llm-model", default="llama3.2", help="Ollama chat model for --check")
    parser.add_argument("--ollama-host", default=None, help="Ollama address for --check")
    parser.add_argument("--max-groups", type=int, default=50, help="groups reviewed per run")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run_sleep(mem: MagneticMemory, args: argparse.Namespace, out: TextIO) -> int:
    """Run the command on an open memory; returns the exit code.

    Raises:
        LLMError: ``--check`` could not reach or use the model (after printing the pass).
    """
    if args.check and args.dry_run:
        raise InvalidInputError(
            "--check records contradictions after the pass", hint="drop --dry-run"
        )
    if args.check:
        return _sleep_and_check(mem, args, out)
    settings = {} if args.merge_threshold is None else {"merge_threshold": args.merge_threshold}
    report = mem.sleep(dry_run=args.dry_run, **settings)
    if args.json:
        out.write(json.dumps(_report_json(report), indent=2, default=str) + "\n")
    else:
        _print_report(report, out)
    return 0


def _sleep_and_check(mem: MagneticMemory, args: argparse.Namespace, out: TextIO) -> int:
    """The pass, then the Ollama model's contradiction check (``--check``)."""
    from langchain_ollama import ChatOllama

    from magnetic_langchain.consolidation import create_consolidation_chain

    llm = ChatOllama(model=args.llm_model, base_url=args.ollama_host, temperature=0)
    chain = create_consolidation_chain(
        mem, llm, check=args.check, max_groups=args.max_groups, merge_threshold=args.merge_threshold
    )
    # The failures are printed below and end the run as its one error line: the core's log
    # line about them would say it twice.
    logging.getLogger("magnetic_core._sleep.consolidate").setLevel(logging.CRITICAL)
    result = chain.invoke({})
    if args.json:
        payload = {
            "report": _report_json(result.report) if result.report else None,
            **{k: v for k, v in dataclasses.asdict(result).items() if k != "report"},
            "ok": result.ok,
        }
        out.write(json.dumps(payload, indent=2, default=str) + "\n")
    else:
        if result.report is not None:
            _print_report(result.report, out)
        _print_check(mem, result, args.llm_model, out)
    if not result.ok:
        raise _check_failed(result, args.llm_model)
    return 0


def _check_failed(result: ConsolidationResult, model: str) -> LLMError:
    """The one error that ends a check whose model calls failed, naming the fix."""
    unreachable = any("could not be reached" in f for f in result.failures)
    kind = LLMUnavailableError if unreachable else LLMError
    failed = f"{len(result.failures)} of {plural(result.calls, 'model call')} failed"
    return kind(
        f"the contradiction check with {model!r} did not finish: {failed}"
        + (" (the model could not be reached)" if unreachable else f": {result.failures[0]}"),
        hint=_FIX.format(model=model) if unreachable else "check the model runs",
    )


def _print_report(report: SleepReport, out: TextIO) -> None:
    out.write(("plan: " if report.dry_run else "sleep: ") + report.summary() + "\n")
    t, src = report.thresholds, report.sources
    if t:
        out.write(
            "  thresholds: "
            + ", ".join(f"{k} {v:.3f}" + (f" ({src[k]})" if k in src else "") for k, v in t.items())
            + "\n"
        )
    for keep, absorb, sim in report.merges:
        out.write(f"  merge {absorb} -> {keep}  (similarity {sim:.3f})\n")
    for group, new in report.splits[:20]:
        out.write(f"  split {group} -> {group} + {new}\n")
    for gid, old, new in report.relabelled[:20]:
        out.write(f"  relabel {gid}: {old} -> {new}\n")
    out.write(f"  took {report.seconds:.2f} s\n")


def _print_check(mem: MagneticMemory, result: Any, model: str, out: TextIO) -> None:
    out.write(
        f"checked {plural(len(result.checked_groups), 'group')} with {model} in "
        f"{plural(result.calls, 'call')}: "
        f"{plural(len(result.contradictions), 'contradiction')} recorded\n"
    )
    superseded = dict(result.superseded)
    for c in result.contradictions:
        a, b = mem.get([c.a, c.b])
        out.write(f"  ! {a.text[:70]}\n    vs {b.text[:70]}\n    {c.explanation}\n")
        for old in (c.a, c.b):
            if old in superseded:
                out.write(f"    -> {old} superseded by {superseded[old]}\n")
    for problem in result.rejected:
        out.write(f"  (unusable answer) {problem}\n")
    for failure in result.failures:
        out.write(f"  (failed) {failure}\n")
    if result.skipped_groups:
        out.write(f"  {len(result.skipped_groups)} groups left for the next run (--max-groups)\n")


def _report_json(report: SleepReport) -> dict[str, Any]:
    return dataclasses.asdict(report)
