"""The `magnetic` command line: ingest files and repositories, search and inspect a memory.

Each command lives in a module with a ``register(subparsers, parents)`` function that adds
its subparser and sets ``func`` to a handler ``(args, out) -> int``. User mistakes are
``MagneticError`` subclasses, printed by :func:`main` as one ``magnetic: error:`` line.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from magnetic_core.errors import InvalidInputError, MagneticError
from magnetic_langchain.agent import commands as agent_commands
from magnetic_langchain.cli import demo, hierarchy, ingest, memories, search, sleep
from magnetic_langchain.cli.demo import sample_memories
from magnetic_langchain.cli.options import UsageError, add_global_options

__all__ = ["build_parser", "main", "sample_memories"]

DESCRIPTION = (
    "MagneticStorage: a local-first hierarchical memory for LLM agents. Memories are cells "
    "nested under concept groups that form as data arrives."
)
EPILOG = """examples:
  magnetic demo                                 the sample corpus: groups and answers
  magnetic ingest ./docs https://github.com/org/repo.git
  magnetic search "where is deploy.sh configured?" --explain
  magnetic groups --tree          magnetic groups --show g3          magnetic stats
  magnetic --path ./mem add "a memory" --metadata '{"topic": "x"}'
"""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows defaults that mean something (not None/False) and keeps epilogs as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, argparse.SUPPRESS) or "default:" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose subcommands share the CLI's help format."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command, the agent's included."""
    parser = Parser(prog="magnetic", description=DESCRIPTION, epilog=EPILOG)
    add_global_options(parser, defaults=True)
    common = Parser(add_help=False)
    add_global_options(common, defaults=False)
    parents: list[argparse.ArgumentParser] = [common]
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=Parser
    )
    for module in (demo, memories, ingest, search, hierarchy, sleep):
        module.register(sub, parents)
    agent_commands.register(sub, parents)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 failed, 2 usage mistake)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    check = getattr(args, "check_args", None)
    if check is not None:
        try:
            check(args)
        except UsageError as e:
            parser.error(str(e))
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="magnetic: %(levelname)s: %(message)s",
    )
    stream = out or sys.stdout
    try:
        return int(args.func(args, stream))
    except InvalidInputError as e:
        return _fail(e, 2)
    except MagneticError as e:
        return _fail(e, 1)
    except KeyboardInterrupt:
        sys.stderr.write("magnetic: interrupted\n")
        return 130
    except BrokenPipeError:  # `magnetic export | head`: the reader left; not an error
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _fail(error: MagneticError, code: int) -> int:
    sys.stderr.write(f"magnetic: error: {' '.join(str(error).split())}\n")
    return code
