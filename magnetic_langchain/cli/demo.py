"""``magnetic demo``: the sample corpus in a store of its own, its groups, and answers.

The demo never touches the user's memory: by default it builds a temporary store and
removes it afterwards; with ``--path`` it writes only into a new (or empty) directory, or
one an earlier demo made (marked by a ``.magnetic-demo`` file), and never deletes it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from magnetic_langchain.cli.options import UsageError, add_command, open_memory
from magnetic_langchain.cli.render import plural, print_groups_table, print_hits

__all__ = ["DEMO_QUERIES", "register", "sample_memories"]

DEMO_QUERIES = (
    "how long should bread dough rise?",
    "where is the deploy script for Atlas?",
    "what did Maria Gonzalez ask about schema changes?",
    "when does my flight to Lisbon leave?",
    "which planet has rings made of ice?",
    "how do I keep aphids off my roses?",
)
MARKER = ".magnetic-demo"


def sample_memories() -> list[dict[str, Any]]:
    """The small demo corpus shipped in the package."""
    text = resources.files("magnetic_core").joinpath("data/sample_memories.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add ``demo``."""
    demo = add_command(
        subparsers,
        parents,
        "demo",
        cmd_demo,
        help="store the sample corpus in a demo store; print groups and answers",
        description="Ingest the shipped sample corpus into a store of its own (a temporary "
        "one unless --path names a new directory), then print its groups and a few "
        "explained searches. Your ./magnetic_memory is never touched.",
    )
    demo.add_argument(
        "--keep", action="store_true", help="keep the temporary demo store and print its path"
    )


def _demo_dir(path: Path) -> None:
    """Refuse a directory the demo did not make; mark the one it uses."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"--path {path} is a file")
    if path.is_dir() and any(path.iterdir()) and not (path / MARKER).exists():
        raise UsageError(
            f"{path} is not empty and was not made by the demo; the demo writes only into "
            "a new directory",
            hint="pass a new --path, or leave --path out for a temporary store",
        )
    path.mkdir(parents=True, exist_ok=True)
    (path / MARKER).write_text("made by `magnetic demo`\n", encoding="utf-8")


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    """Run the demo in its own store."""
    if args.server:
        raise UsageError("the demo runs on an embedded store of its own", hint="drop --server")
    temporary = args.path is None
    path = Path(tempfile.mkdtemp(prefix="magnetic-demo-")) if temporary else Path(args.path)
    path = path.expanduser().resolve()
    if not temporary:
        _demo_dir(path)
    try:
        _run(argparse.Namespace(**{**vars(args), "path": str(path)}), path, out)
    finally:
        if temporary and not args.keep:
            shutil.rmtree(path, ignore_errors=True)  # made above, by this command
    if temporary and not args.keep:
        out.write("\n(the temporary demo store was removed; --keep keeps it)\n")
    else:
        out.write(f"\nexplore it: magnetic --path {path} groups --tree | search QUERY --explain\n")
    return 0


def _run(args: argparse.Namespace, path: Path, out: TextIO) -> None:
    rows = sample_memories()
    with open_memory(args, create=True) as mem:
        # Fixed ids: running the demo again on its own store updates it in place.
        mem.add(
            [r["text"] for r in rows],
            metadatas=[r["metadata"] for r in rows],
            ids=[r["id"] for r in rows],
        )
        stats = mem.stats()
        out.write(
            f"demo store at {path} (namespace {mem.namespace!r}), embedder {stats.embedder} "
            f"({stats.dim}-d), join threshold {stats.join_threshold:.2f} "
            f"({stats.threshold_source})\n\n"
        )
        groups = mem.groups()
        out.write(f"{plural(len(groups), 'concept group')} over {plural(mem.count(), 'cell')}\n")
        print_groups_table(groups[:12], out)
        for query in DEMO_QUERIES:
            out.write(f"\n? {query}\n")
            print_hits(mem.search(query, k=3, explain=True), out)
