"""The ``magnetic`` command line: ingest, search and inspect a memory; run the demo."""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from magnetic_core import MagneticError, MagneticMemory, MemoryConfig
from magnetic_core.embeddings import Embedder, HashingEmbedder, default_embedder
from magnetic_langchain.sleep_cli import add_sleep_arguments, hit_json, hit_links_line, run_sleep

__all__ = ["main"]

DEMO_QUERIES = (
    "how long should bread dough rise?",
    "where is the deploy script for Atlas?",
    "what did Maria Gonzalez ask about schema changes?",
    "when does my flight to Lisbon leave?",
    "which planet has rings made of ice?",
    "how do I keep aphids off my roses?",
)


def _embedder(name: str) -> Embedder:
    if name == "hashing":
        return HashingEmbedder()
    if name == "minilm":
        from magnetic_core.embeddings import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder()
    if name == "ollama":
        from magnetic_core.embeddings import OllamaEmbedder

        return OllamaEmbedder()
    return default_embedder()


def _open(args: argparse.Namespace) -> MagneticMemory:
    config = MemoryConfig(join_threshold=args.threshold) if args.threshold else None
    return MagneticMemory(
        path=args.path, namespace=args.namespace, embedder=_embedder(args.embedder), config=config
    )


def sample_memories() -> list[dict[str, Any]]:
    """The small demo corpus shipped in the package."""
    text = resources.files("magnetic_core").joinpath("data/sample_memories.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _print_groups(mem: MagneticMemory, out: TextIO, limit: int = 20) -> None:
    groups = mem.groups()
    out.write(f"{len(groups)} concept groups over {mem.count()} cells\n")
    for info in groups[:limit]:
        first = mem.get([info.cell_ids[0]])[0].text
        out.write(
            f"  [{info.id}] {info.label}  ({info.size} cells, cohesion {info.cohesion:.2f})\n"
        )
        out.write(f"      e.g. {first[:90]}\n")


def _print_hits(mem: MagneticMemory, query: str, k: int, out: TextIO, explain: bool) -> None:
    out.write(f"\n? {query}\n")
    for hit in mem.search(query, k=k, explain=explain):
        route = ""
        if hit.route:
            # Ranking adds entity and word-match terms to the cosine; show them so the
            # order of the printed cosines makes sense.
            extras = [
                f"+{v:.2f} {name}"
                for name, v in (("entity", hit.route.boost), ("words", hit.route.lexical))
                if v > 0
            ]
            route = f"  via {'+'.join(hit.route.stages)}"
            route += f" (cos {hit.score:.3f} {' '.join(extras)})" if extras else ""
        out.write(f"  {hit.rank_score:.3f}  [{hit.group_label}]  {hit.text[:72]}{route}\n")
        out.write(hit_links_line(hit))


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    path = Path(args.path)
    if path.exists() and args.fresh:
        shutil.rmtree(path)
    with _open(args) as mem:
        rows = sample_memories()
        mem.add(
            [r["text"] for r in rows],
            metadatas=[r["metadata"] for r in rows],
            ids=[r["id"] for r in rows],
        )
        stats = mem.stats()
        out.write(
            f"embedded store at {path.resolve()} (namespace {mem.namespace!r}), "
            f"embedder {stats.embedder} ({stats.dim}-d), join threshold "
            f"{stats.join_threshold:.2f} ({stats.threshold_source})\n\n"
        )
        _print_groups(mem, out)
        for query in DEMO_QUERIES:
            _print_hits(mem, query, 3, out, explain=True)
    return 0


def cmd_add(args: argparse.Namespace, out: TextIO) -> int:
    texts = list(args.text)
    if args.file:
        with open(args.file, encoding="utf-8") as fh:
            texts += [line.strip() for line in fh if line.strip()]
    meta = json.loads(args.metadata) if args.metadata else None
    with _open(args) as mem:
        ids = mem.add(texts, metadatas=[meta] * len(texts) if meta else None)
    out.write("\n".join(ids) + "\n")
    return 0


def cmd_search(args: argparse.Namespace, out: TextIO) -> int:
    where = json.loads(args.filter) if args.filter else None
    with _open(args) as mem:
        hits = mem.search(args.query, k=args.k, filter=where, explain=args.explain)
        if args.json:
            out.write(json.dumps([hit_json(h) for h in hits], default=str, indent=2) + "\n")
        else:
            _print_hits(mem, args.query, args.k, out, args.explain)
    return 0


def cmd_groups(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args) as mem:
        _print_groups(mem, out, limit=args.limit)
    return 0


def cmd_stats(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args) as mem:
        out.write(json.dumps(mem.stats().__dict__, indent=2) + "\n")
    return 0


def cmd_delete(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args) as mem:
        out.write(f"deleted {mem.delete(ids=args.ids)}\n")
    return 0


def cmd_sleep(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args) as mem:
        return run_sleep(mem, args, out)


def _store_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """Options naming the store; accepted before or after the command."""

    def default(value: object) -> object:
        # After the command, an option left out must not reset what came before it.
        return value if defaults else argparse.SUPPRESS

    parser.add_argument("--path", default=default("./magnetic_memory"), help="store directory")
    parser.add_argument("--namespace", default=default("default"))
    parser.add_argument(
        "--embedder",
        choices=["auto", "ollama", "minilm", "hashing"],
        default=default("auto"),
        help="auto tries Ollama, then MiniLM, then the non-semantic hashing embedder",
    )
    parser.add_argument("--threshold", type=float, default=default(None), help="join threshold")
    parser.add_argument("-v", "--verbose", action="store_true", default=default(False))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="magnetic", description=__doc__)
    _store_options(parser, defaults=True)
    common = argparse.ArgumentParser(add_help=False)
    _store_options(common, defaults=False)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo", parents=[common], help="ingest the sample corpus, print groups and searches"
    )
    demo.add_argument("--keep", dest="fresh", action="store_false", help="keep an existing store")
    demo.set_defaults(func=cmd_demo)

    add = sub.add_parser("add", parents=[common], help="store texts")
    add.add_argument("text", nargs="*")
    add.add_argument("--file", help="one memory per line")
    add.add_argument("--metadata", help="JSON object attached to each text")
    add.set_defaults(func=cmd_add)

    search = sub.add_parser("search", parents=[common], help="search memories")
    search.add_argument("query")
    search.add_argument("-k", type=int, default=5)
    search.add_argument("--filter", help='Chroma-style where, e.g. \'{"topic": "ai"}\'')
    search.add_argument("--explain", action="store_true")
    search.add_argument("--json", action="store_true")
    search.set_defaults(func=cmd_search)

    groups = sub.add_parser("groups", parents=[common], help="list concept groups")
    groups.add_argument("--limit", type=int, default=50)
    groups.set_defaults(func=cmd_groups)

    sub.add_parser("stats", parents=[common], help="hierarchy health").set_defaults(func=cmd_stats)

    delete = sub.add_parser("delete", parents=[common], help="delete memories by id")
    delete.add_argument("ids", nargs="+")
    delete.set_defaults(func=cmd_delete)

    sleep = sub.add_parser(
        "sleep", parents=[common], help="consolidate the hierarchy; --check for contradictions"
    )
    add_sleep_arguments(sleep)
    sleep.set_defaults(func=cmd_sleep)

    from magnetic_langchain.agent.commands import register as register_agent

    register_agent(sub, [common])
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "check", None) and args.dry_run:
        parser.error("--check records contradictions after merging; drop --dry-run")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    stream = out or sys.stdout
    try:
        return int(args.func(args, stream))
    except MagneticError as e:
        sys.stderr.write(f"magnetic: error: {e}\n")
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
