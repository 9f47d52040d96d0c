"""The global options of every command, and opening the store they name.

``--path`` / ``--server`` / ``--namespace`` name a store; ``--embedder`` names the model. A
store remembers the embedder it was built with (its stamp), so commands open it with that
one when none is named, and load the model only when they embed something: ``groups``,
``stats``, ``get`` and ``export`` never load one.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from magnetic_core import MagneticMemory, MemoryConfig
from magnetic_core._store.persistence import open_client, read_settings
from magnetic_core.embeddings import Embedder
from magnetic_core.errors import InvalidInputError, MagneticError, PersistenceError
from magnetic_langchain.cli.embedders import EMBEDDERS, create_embedder, stamped_embedder

__all__ = [
    "DEFAULT_PATH",
    "NotFoundError",
    "UsageError",
    "add_command",
    "add_global_options",
    "add_where_option",
    "describe_store",
    "open_memory",
    "parse_json",
    "positive_int",
    "store_exists",
]

logger = logging.getLogger(__name__)

DEFAULT_PATH = "./magnetic_memory"
# Deeper JSON is refused before it reaches the engine (Python's parser gives up near 1000).
MAX_JSON_DEPTH = 32


class UsageError(InvalidInputError):
    """A command-line mistake: a bad option value, a missing argument (exit code 2)."""


class NotFoundError(MagneticError):
    """A store, namespace, memory or group the user named does not exist (exit code 1)."""


def add_command(
    subparsers: Any,
    parents: list[argparse.ArgumentParser],
    name: str,
    func: Callable[[argparse.Namespace, TextIO], int],
    *,
    help: str,
    description: str | None = None,
    aliases: Sequence[str] = (),
    json_help: str | None = None,
    **defaults: Any,
) -> argparse.ArgumentParser:
    """Add one command: its parser (taking the store options too) and its handler ``func``.

    ``json_help`` adds a ``--json`` flag with that help; ``defaults`` are set on the parsed
    arguments (``check_args=`` is called before the handler, for checks across options).
    """
    parser = subparsers.add_parser(
        name, aliases=list(aliases), parents=parents, help=help, description=description
    )
    if json_help is not None:
        parser.add_argument("--json", action="store_true", help=json_help)
    parser.set_defaults(func=func, **defaults)
    return parser  # type: ignore[no-any-return]


def add_where_option(parser: argparse.ArgumentParser, help: str) -> None:
    """Add ``--filter JSON``, a where-filter on metadata (read with :func:`parse_json`)."""
    parser.add_argument("--filter", metavar="JSON", help=help)


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_global_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """Add the options every command takes.

    They are accepted before and after the command: the top-level parser holds the
    defaults, and each command's copy (``defaults=False``) leaves an omitted option alone.
    """

    def default(value: object) -> object:
        return value if defaults else argparse.SUPPRESS

    group = parser.add_argument_group("store options (before or after the command)")
    group.add_argument(
        "--path",
        default=default(None),
        metavar="DIR",
        help=f"directory of the embedded store (default: {DEFAULT_PATH})",
    )
    group.add_argument(
        "--server",
        default=default(None),
        metavar="HOST:PORT",
        help="use a Chroma server (started with `chroma run`) instead of --path",
    )
    group.add_argument(
        "--namespace",
        default=default("default"),
        help="isolated memory inside the store (default: default)",
    )
    group.add_argument(
        "--embedder",
        choices=EMBEDDERS,
        default=default(None),
        help="embedding model; an existing store uses the one it was built with, a new "
        "store 'auto' (Ollama nomic-embed-text, then MiniLM, then the non-semantic "
        "hashing embedder)",
    )
    group.add_argument(
        "--threshold",
        type=float,
        default=default(None),
        metavar="SIM",
        help="join threshold of a new store (saved with it; default: calibrated from the data)",
    )
    group.add_argument(
        "-v", "--verbose", action="store_true", default=default(False), help="log progress"
    )


def parse_json(text: str | None, option: str) -> dict[str, Any] | None:
    """Parse the JSON object given to ``option``, or raise a one-line :class:`UsageError`."""
    if text is None:
        return None
    example = '{"topic": "ai"}'
    try:
        value = json.loads(text)
    except RecursionError:
        raise UsageError(f"{option} is nested too deeply", hint=_depth_hint()) from None
    except json.JSONDecodeError as e:
        raise UsageError(
            f"{option} is not valid JSON ({e.msg} at character {e.pos})",
            hint=f"quote the object for the shell: {option} '{example}'",
        ) from None
    if not isinstance(value, dict):
        raise UsageError(
            f"{option} must be a JSON object, got {type(value).__name__}",
            hint=f"for example {option} '{example}'",
        )
    if _depth(value) > MAX_JSON_DEPTH:
        raise UsageError(f"{option} is nested too deeply", hint=_depth_hint())
    return value


def _depth_hint() -> str:
    return f"nest objects and lists at most {MAX_JSON_DEPTH} levels deep"


def _depth(value: Any) -> int:
    # Iterative, so a deep value cannot exhaust Python's stack here.
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        children = item.values() if isinstance(item, dict) else item
        if isinstance(item, (dict, list)) and level <= MAX_JSON_DEPTH:
            stack.extend((child, level + 1) for child in children)
    return deepest


def describe_store(args: argparse.Namespace) -> str:
    """Where the options point, for messages: a server address or a resolved path."""
    if args.server:
        return f"server {args.server} (namespace {args.namespace!r})"
    return f"{_local_path(args)} (namespace {args.namespace!r})"


def _local_path(args: argparse.Namespace) -> Path:
    # Resolved: chromadb caches clients by the string it is given.
    return Path(args.path or DEFAULT_PATH).expanduser().resolve()


def store_exists(args: argparse.Namespace) -> bool:
    """Whether the store directory exists and holds a Chroma database (local stores only)."""
    path = _local_path(args)
    return path.is_dir() and (path / "chroma.sqlite3").is_file()


def _client(args: argparse.Namespace, *, create: bool) -> Any:
    if args.server:
        host, port = _server_address(args.server)
        if args.path:
            raise UsageError("--server and --path name two stores", hint="pass one of them")
        return _http_client(host, port)
    path = _local_path(args)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--path {path} is a file, not a store directory")
    if not create and not store_exists(args):
        raise NotFoundError(
            f"no memory store at {path}",
            hint="check --path; `magnetic add` or `magnetic ingest` creates a store",
        )
    return open_client(str(path))


def _server_address(address: str) -> tuple[str, int]:
    match = re.fullmatch(r"\[?([^\[\]]+?)\]?:(\d{1,5})", address.strip())
    if not match or not 0 < int(match.group(2)) < 65536:
        raise UsageError(
            f"--server {address!r} is not HOST:PORT", hint="e.g. --server 127.0.0.1:8000"
        )
    return match.group(1), int(match.group(2))


def _http_client(host: str, port: int) -> Any:
    import chromadb

    try:
        return chromadb.HttpClient(host=host, port=port)
    except Exception as e:
        raise PersistenceError(
            f"cannot reach a Chroma server at {host}:{port}: {e}",
            hint=f"start one with `chroma run --path DIR --host {host} --port {port}`",
        ) from e


def _namespaces(client: Any) -> list[str]:
    names = [getattr(c, "name", str(c)) for c in client.list_collections()]
    return sorted(m.group(1) for n in names if (m := re.fullmatch(r"mag-(.+)-cells", n)))


def open_memory(args: argparse.Namespace, *, create: bool) -> MagneticMemory:
    """Open the store the options name.

    Args:
        args: parsed global options (``path``, ``server``, ``namespace``, ``embedder``,
            ``threshold``).
        create: create the store (or namespace) if it does not exist; otherwise a missing
            one is a :class:`NotFoundError`.

    Returns:
        The memory, with the embedder the store was built with unless ``--embedder``
        names another (then it is an ``EmbedderMismatchError`` naming the right one). The
        model is loaded on first use, so commands that do not embed never load it.
    """
    client = _client(args, create=create)
    stamp = read_settings(client, args.namespace)
    if stamp is None and not create:
        known = _namespaces(client)
        raise NotFoundError(
            f"namespace {args.namespace!r} does not exist in {describe_store(args)}",
            hint=f"existing namespaces: {', '.join(known)}" if known else "the store is empty",
        )
    embedder: Embedder
    if stamp is None or "mag_embedder" not in stamp:
        embedder = create_embedder(args.embedder or "auto")
    else:
        embedder = stamped_embedder(stamp, args.embedder, describe_store(args))
    config = _config(args, stamp)
    if not args.server:
        # The memory opens (and later closes) its own client at the same resolved path.
        if hasattr(client, "close"):
            client.close()
        return MagneticMemory(
            path=str(_local_path(args)),
            namespace=args.namespace,
            embedder=embedder,
            config=config,
        )
    return MagneticMemory(client=client, namespace=args.namespace, embedder=embedder, config=config)


def _config(args: argparse.Namespace, stamp: dict[str, Any] | None) -> MemoryConfig | None:
    threshold = args.threshold
    if threshold is None:
        return None
    if stamp is not None and "mag_embedder" in stamp:
        stored = stamp.get("mag_join_threshold")
        if stored is None or abs(float(stored) - threshold) > 1e-9:
            kept = f"{float(stored):.3g}" if stored is not None else "calibrated from the data"
            raise UsageError(
                f"--threshold is chosen when a store is created; this one's is {kept}",
                hint="leave --threshold out, or create a new store with another --path",
            )
    try:
        return MemoryConfig(join_threshold=threshold)
    except InvalidInputError as e:
        raise UsageError(
            f"--threshold {threshold}: {e.message}", hint="pass a number in [-1, 1]"
        ) from None
