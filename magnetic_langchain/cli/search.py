"""``magnetic search``: the memories closest to a query, with their concept groups."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from magnetic_langchain.cli.options import open_memory, parse_json
from magnetic_langchain.cli.render import SCORE_NOTE, hit_record, print_hits, write_json

__all__ = ["positive_int", "register"]


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add ``search``."""
    search = subparsers.add_parser(
        "search",
        parents=parents,
        help="search memories",
        description="The memories most similar to a query, found through the concept "
        "groups, with their group labels. " + SCORE_NOTE + ".",
    )
    search.add_argument("query", help="what to look for")
    search.add_argument("-k", type=positive_int, default=5, metavar="N", help="number of results")
    search.add_argument(
        "--filter",
        metavar="JSON",
        help='Chroma-style where-filter on metadata, e.g. \'{"topic": "ai"}\' or '
        '\'{"year": {"$gte": 2020}}\'',
    )
    search.add_argument(
        "--explain",
        action="store_true",
        help="show how each hit was found (stages, centroid similarity, entity and word boosts)",
    )
    search.add_argument(
        "--json", action="store_true", help="print JSON (with routes when --explain)"
    )
    search.set_defaults(func=cmd_search)


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
