"""Commands that inspect the hierarchy: ``groups`` (table, tree, one group) and ``stats``."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, TextIO

from magnetic_core import MagneticMemory
from magnetic_core.errors import InvalidInputError
from magnetic_core.types import GroupInfo
from magnetic_langchain.cli.options import (
    NotFoundError,
    add_command,
    describe_store,
    open_memory,
    positive_int,
)
from magnetic_langchain.cli.render import (
    one_line,
    plural,
    print_groups_table,
    write_json,
)

__all__ = ["register"]


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add ``groups`` and ``stats``."""
    groups = add_command(
        subparsers,
        parents,
        "groups",
        cmd_groups,
        help="list the concept groups",
        description="The concept groups, largest first, with sizes, labels and cohesion "
        "(mean similarity of the cells to their centroid), a page at a time.",
        json_help="print JSON",
    )
    groups.add_argument(
        "--limit", type=positive_int, default=20, metavar="N", help="groups per page"
    )
    groups.add_argument("--page", type=positive_int, default=1, metavar="P", help="page to show")
    groups.add_argument("--all", action="store_true", help="show every group")
    groups.add_argument(
        "--tree", action="store_true", help="show each group's closest cells under it"
    )
    groups.add_argument("--show", metavar="ID", help="list the cells of one group")
    add_command(
        subparsers,
        parents,
        "stats",
        cmd_stats,
        help="health of the hierarchy",
        description="Counts and health of the hierarchy: groups, singletons, cohesion, "
        "threshold, embedder.",
        json_help="print JSON",
    )


def _group_record(g: GroupInfo) -> dict[str, Any]:
    return {
        "id": g.id,
        "label": g.label,
        "size": g.size,
        "cohesion": g.cohesion,
        "entities": list(g.entities),
    }


def cmd_groups(args: argparse.Namespace, out: TextIO) -> int:
    """The groups as a paged table or tree, or one group's cells."""
    with open_memory(args, create=False) as mem:
        if args.show:
            return _show_group(mem, args, out)
        groups = mem.groups()
        start = 0 if args.all else (args.page - 1) * args.limit
        page = groups if args.all else groups[start : start + args.limit]
        if args.json:
            write_json(out, [_group_record(g) for g in page])
            return 0
        out.write(f"{plural(len(groups), 'concept group')} over {plural(mem.count(), 'cell')}\n\n")
        if groups and not page:
            out.write(f"page {args.page} is past the last group\n")
            return 1
        if args.tree:
            _print_tree(mem, page, out)
        else:
            print_groups_table(page, out)
        if len(page) < len(groups):
            nxt = f"--page {args.page + 1} for more, " if start + len(page) < len(groups) else ""
            out.write(
                f"\nshowing groups {start + 1}-{start + len(page)} of {len(groups)}; "
                f"{nxt}--all for every group, --show ID for one group's cells\n"
            )
    return 0


def _print_tree(
    mem: MagneticMemory, page: list[GroupInfo], out: TextIO, per_group: int = 3
) -> None:
    for g in page:
        out.write(f"{g.id}  {g.label}  ({plural(g.size, 'cell')}, cohesion {g.cohesion:.2f})\n")
        shown = mem.get(list(g.cell_ids[:per_group]))
        rest = g.size - len(shown)
        for i, cell in enumerate(shown):
            branch = "└─" if i == len(shown) - 1 and not rest else "├─"
            out.write(f"  {branch} {one_line(cell.text, 90)}\n")
        if rest:
            out.write(f"  └─ … {plural(rest, 'more cell')}\n")


def _show_group(mem: MagneticMemory, args: argparse.Namespace, out: TextIO) -> int:
    try:
        group = mem.group(args.show)
    except InvalidInputError:
        raise NotFoundError(
            f"no group with id {args.show!r}", hint="`magnetic groups` lists the group ids"
        ) from None
    cells = mem.get(list(group.cell_ids))
    if args.json:
        record = _group_record(group)
        record["cells"] = [{"id": c.id, "text": c.text, "metadata": c.metadata} for c in cells]
        write_json(out, record)
        return 0
    out.write(
        f"group {group.id}: {group.label}\n{plural(group.size, 'cell')}, cohesion "
        f"{group.cohesion:.2f}; entities: {', '.join(group.entities) or '-'}\n\n"
    )
    wide = max(len(c.id) for c in cells) if cells else 2
    out.write(f"{'id':<{wide}}  text (closest to the centroid first)\n")
    for cell in cells:
        out.write(f"{cell.id:<{wide}}  {one_line(cell.text, 90)}\n")
    return 0


def cmd_stats(args: argparse.Namespace, out: TextIO) -> int:
    """Counts and health metrics, readable or as JSON."""
    with open_memory(args, create=False) as mem:
        stats = mem.stats()
    if args.json:
        write_json(out, dataclasses.asdict(stats))
        return 0
    rows = [
        ("store", describe_store(args)),
        ("embedder", f"{stats.embedder} ({stats.dim}-d)"),
        ("cells", f"{stats.count} in {plural(stats.groups, 'group')}"),
        (
            "groups",
            f"largest {stats.largest_group}, mean {stats.mean_group_size:.1f} cells, "
            f"{plural(stats.singleton_groups, 'singleton')}",
        ),
        ("cohesion", f"{stats.mean_cohesion:.3f} (mean similarity of cells to their centroid)"),
        ("threshold", f"{stats.join_threshold:.3f} ({stats.threshold_source})"),
        ("entities", f"{stats.entities} distinct (file names, paths, names, ids)"),
    ]
    for key, value in rows:
        out.write(f"{key:<10} {value}\n")
    return 0
