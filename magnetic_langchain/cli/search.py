"""``magnetic search``: the memories closest to a query, with their concept groups."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from magnetic_langchain.cli.options import (
    add_command,
    add_where_option,
    open_memory,
    parse_json,
    positive_int,
)
from magnetic_langchain.cli.render import SCORE_NOTE, hit_record, print_hits, write_json

__all__ = ["register"]


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add ``search``."""
    search = add_command(
        subparsers,
        parents,
        "search",
        cmd_search,
        help="search memories",
        description="The memories most similar to a query, found through the concept "
        "groups, with their group labels. " + SCORE_NOTE + ".",
        json_help="print JSON (with routes when --explain)",
    )
    search.add_argument("query", help="what to look for")
    search.add_argument("-k", type=positive_int, default=5, metavar="N", help="number of results")
    add_where_option(
        search,
        'Chroma-style where-filter on metadata, e.g. \'{"topic": "ai"}\' or '
        '\'{"year": {"$gte": 2020}}\'',
    )
    search.add_argument(
        "--explain",
        action="store_true",
        help="show how each hit was found (stages, centroid similarity, entity and word boosts)",
    )


def cmd_search(args: argparse.Namespace, out: TextIO) -> int:
    """Print the hits as a table (or JSON); say so when nothing matched."""
    where = parse_json(args.filter, "--filter")
    with open_memory(args, create=False) as mem:
        empty = mem.count() == 0
        hits = [] if empty else mem.search(args.query, k=args.k, filter=where, explain=args.explain)
    if args.json:
        write_json(out, [hit_record(h) for h in hits])
        return 0
    if not hits:
        reason = "the store is empty" if empty else "no memory matches --filter"
        out.write(f"no results: {reason}\n")
        return 0
    print_hits(hits, out)
    if not args.explain:
        out.write(f"\n({SCORE_NOTE}; the order also weighs named entities and words: --explain)\n")
    return 0
