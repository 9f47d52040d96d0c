"""``magnetic ingest PATH|GIT_URL ...``: the CLI face of :mod:`magnetic_langchain.ingest`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, TextIO

from magnetic_core.errors import MagneticError
from magnetic_langchain.cli.options import add_command, open_memory, positive_int
from magnetic_langchain.cli.render import plural

if TYPE_CHECKING:
    from magnetic_langchain.ingest import IngestReport

__all__ = ["register", "summary"]


def _size(text: str) -> int:
    """An argparse type: a byte count such as ``500000``, ``200k`` or ``2M``."""
    units = {"k": 1_000, "m": 1_000_000, "g": 1_000_000_000}
    raw = text.strip().lower().removesuffix("b")
    scale = units.get(raw[-1:], 1)
    try:
        value = int(float(raw[:-1] if scale > 1 else raw) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a size such as 500k or 2M, got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return value


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add ``ingest``."""
    ingest = add_command(
        subparsers,
        parents,
        "ingest",
        cmd_ingest,
        help="ingest files, folders and git repositories",
        description="Chunk files by type (code at definitions, Markdown at headings, text "
        "at paragraphs) and store each chunk with its path, line range, language and, for "
        "repositories, repo name and commit. A git URL is cloned shallowly; a local "
        "repository is read with `git ls-files`, and .gitignore is honoured in plain "
        "folders too. Unchanged files are skipped on the next run; changed ones replaced.",
    )
    ingest.add_argument("sources", nargs="+", metavar="PATH|GIT_URL", help="what to ingest")
    ingest.add_argument(
        "--prune", action="store_true", help="remove the chunks of files that no longer exist"
    )
    ingest.add_argument(
        "--max-file-size",
        type=_size,
        default=1_000_000,
        metavar="BYTES",
        help="skip files larger than this (e.g. 200k, 2M)",
    )
    ingest.add_argument(
        "--chunk-size", type=positive_int, default=1500, metavar="CHARS", help="largest chunk"
    )
    ingest.add_argument("--no-progress", action="store_true", help="draw no progress bar")


def summary(report: IngestReport) -> str:
    """A few lines saying what a run read, skipped and changed."""
    read = f"{plural(report.files_read, 'file')} read"
    if report.files_unchanged:
        read += f", {report.files_unchanged} unchanged"
    if report.files_removed:
        read += f", {plural(report.files_removed, 'file')} pruned"
    lines = [f"{report.source} ({report.kind}): {read} in {report.seconds:.1f} s"]
    if report.skipped:
        reasons = ", ".join(f"{n} {why}" for why, n in sorted(report.skipped.items()))
        lines.append(f"  skipped {plural(sum(report.skipped.values()), 'file')}: {reasons}")
    lines.append(
        f"  chunks: {report.chunks_added} added, {report.chunks_updated} updated, "
        f"{report.chunks_removed} removed" + ("" if report.changed else " (nothing changed)")
    )
    return "\n".join(lines)


def cmd_ingest(args: argparse.Namespace, out: TextIO) -> int:
    """Ingest each source; one failing source is reported and the others still run."""
    from magnetic_langchain.ingest import ingest

    failed = 0
    with open_memory(args, create=True) as mem:
        for source in args.sources:
            try:
                report = ingest(
                    mem,
                    source,
                    chunk_size=args.chunk_size,
                    max_file_size=args.max_file_size,
                    prune=args.prune,
                    progress=not args.no_progress and sys.stderr.isatty(),
                )
            except MagneticError as e:
                if len(args.sources) == 1:
                    raise
                sys.stderr.write(f"magnetic: error: {' '.join(str(e).split())}\n")
                failed += 1
                continue
            out.write(summary(report) + "\n")
        out.write(f"the memory holds {plural(mem.count(), 'cell')}\n")
    return 1 if failed else 0
