"""Commands on individual memories: ``add``, ``get``, ``export`` and ``forget``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from magnetic_core import MagneticMemory
from magnetic_langchain.cli.options import (
    NotFoundError,
    UsageError,
    add_command,
    add_where_option,
    open_memory,
    parse_json,
)
from magnetic_langchain.cli.render import cell_record, plural, print_cell, write_json

__all__ = ["register"]


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add ``add``, ``get``, ``export`` and ``forget`` (alias ``delete``)."""
    _register_add(subparsers, parents)
    _register_reading(subparsers, parents)
    _register_forget(subparsers, parents)


def _register_add(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    add = add_command(
        subparsers,
        parents,
        "add",
        cmd_add,
        help="store texts as memories",
        description="Store each text as one memory (creating the store if needed); "
        "prints the new ids.",
    )
    add.add_argument("text", nargs="*", help="texts to store")
    add.add_argument(
        "--file", metavar="FILE", help="also store each non-empty line of FILE ('-': stdin)"
    )
    add.add_argument(
        "--metadata",
        metavar="JSON",
        help='JSON object attached to each text, e.g. \'{"topic": "x"}\'',
    )


def _register_reading(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    get = add_command(
        subparsers,
        parents,
        "get",
        cmd_get,
        help="show memories by id",
        description="Show memories in full.",
        json_help="print JSON records",
    )
    get.add_argument("ids", nargs="+", metavar="ID")

    export = add_command(
        subparsers,
        parents,
        "export",
        cmd_export,
        help="write every memory with its metadata and group",
        description="Write every memory (oldest first) with its metadata, group and links.",
    )
    export.add_argument(
        "--format",
        choices=("jsonl", "json"),
        default="jsonl",
        help="one JSON object per line, or one JSON array",
    )
    export.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    add_where_option(export, "only memories whose metadata match this where-filter")


def _register_forget(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    forget = add_command(
        subparsers,
        parents,
        "forget",
        cmd_forget,
        aliases=["delete"],
        help="delete memories by id or by filter",
        description="Delete memories by id, or every memory matching --filter (asks first "
        "unless --yes).",
    )
    forget.add_argument("ids", nargs="*", metavar="ID")
    add_where_option(forget, 'where-filter on metadata, e.g. \'{"source": "chat"}\'')
    forget.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")


def _texts(args: argparse.Namespace) -> list[str]:
    texts = [t for t in args.text if t.strip()]
    if args.file:
        try:
            lines = (
                sys.stdin.readlines()
                if args.file == "-"
                else Path(args.file).read_text(encoding="utf-8").splitlines()
            )
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"cannot read --file {args.file}: {e}") from None
        texts += [line.strip() for line in lines if line.strip()]
    if not texts:
        raise UsageError(
            "nothing to add", hint='give texts (magnetic add "a memory") or --file FILE'
        )
    return texts


def cmd_add(args: argparse.Namespace, out: TextIO) -> int:
    """Store texts; print their ids, one per line."""
    meta = parse_json(args.metadata, "--metadata")
    texts = _texts(args)
    with open_memory(args, create=True) as mem:
        ids = mem.add(texts, metadatas=[meta] * len(texts) if meta else None)
    out.write("\n".join(ids) + "\n")
    return 0


def _labels(mem: MagneticMemory) -> dict[str, str]:
    return {g.id: g.label for g in mem.groups()}


def cmd_get(args: argparse.Namespace, out: TextIO) -> int:
    """Show memories by id; unknown ids are an error after the known ones are shown."""
    with open_memory(args, create=False) as mem:
        cells = mem.get(list(args.ids))
        labels = {c.group_id: mem.group(c.group_id).label for c in cells}
    if args.json:
        write_json(out, [cell_record(c, labels[c.group_id]) for c in cells])
    for i, cell in enumerate([] if args.json else cells):
        out.write("\n" if i else "")
        print_cell(cell, labels[cell.group_id], out)
    _report_missing(args.ids, {c.id for c in cells})
    return 0


def _report_missing(asked: list[str], found: set[str]) -> None:
    missing = [i for i in dict.fromkeys(asked) if i not in found]
    if missing:
        raise NotFoundError(
            f"no memory with id {', '.join(map(repr, missing))}",
            hint="`magnetic search` or `magnetic export` lists ids",
        )


def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    """Write every memory as JSON lines (or one array) to stdout or ``--output``."""
    where = parse_json(args.filter, "--filter")
    with open_memory(args, create=False) as mem:
        labels = _labels(mem)
        records = [cell_record(c, labels.get(c.group_id, "")) for c in mem.get(filter=where)]
    try:
        sink = open(args.output, "w", encoding="utf-8") if args.output else out  # noqa: SIM115
    except OSError as e:
        raise UsageError(f"cannot write --output {args.output}: {e.strerror}") from None
    try:
        if args.format == "json":
            write_json(sink, records)
        else:
            for record in records:
                sink.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    finally:
        if sink is not out:
            sink.close()
    if args.output:
        out.write(f"exported {plural(len(records), 'memory', 'memories')} to {args.output}\n")
    return 0


def cmd_forget(args: argparse.Namespace, out: TextIO) -> int:
    """Delete by ids, or by filter after confirmation."""
    where = parse_json(args.filter, "--filter")
    if not args.ids and where is None:
        raise UsageError(
            "forget needs ids or --filter", hint="magnetic forget ID ... or --filter JSON"
        )
    with open_memory(args, create=False) as mem:
        if where is None:
            found = {c.id for c in mem.get(list(args.ids))}
            deleted = mem.delete(ids=list(args.ids))
            out.write(f"forgot {plural(deleted, 'memory', 'memories')}\n")
            _report_missing(args.ids, found)
            return 0
        matches = mem.get(list(args.ids) if args.ids else None, filter=where)
        if not matches:
            out.write("no memories match the filter; nothing was forgotten\n")
            return 1
        what = plural(len(matches), "memory", "memories")
        if not args.yes and not _confirm(f"forget {what} matching {args.filter}?"):
            out.write("nothing was forgotten (answer y, or pass --yes)\n")
            return 1
        deleted = mem.delete(ids=[c.id for c in matches])
    out.write(f"forgot {plural(deleted, 'memory', 'memories')}\n")
    return 0


def _confirm(question: str) -> bool:
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()  # "" at end of input: no answer is no
    if not answer:
        sys.stderr.write("\n")
    return answer.strip().lower() in ("y", "yes")
