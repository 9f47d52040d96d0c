"""The agent's CLI commands: ``magnetic chat``, ``magnetic persona`` and ``magnetic story``.

:func:`register` adds them to the ``magnetic`` parser. LangChain and the chat model are
imported inside the handlers that need them, so ``magnetic persona`` loads neither.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from magnetic_core import MagneticMemory
from magnetic_langchain.cli.options import add_command

__all__ = ["open_store", "register"]


def open_store(
    args: argparse.Namespace, *, namespace: str | None = None, embedder: str | None = None
) -> MagneticMemory:
    """The memory the global options name, in ``namespace`` (default ``--namespace``).

    Created when missing (a chat or story starts its namespace), with the embedder the
    namespace was built with unless ``embedder`` names one.
    """
    from magnetic_langchain.cli.options import open_memory

    changed = dict(vars(args))
    if namespace is not None:
        changed["namespace"] = namespace
    if embedder is not None:
        changed["embedder"] = embedder
    return open_memory(argparse.Namespace(**changed), create=True)


def _personas(args: argparse.Namespace) -> Any:
    from magnetic_langchain.agent.personas import PERSONA_NAMESPACE, PersonaBook

    return PersonaBook(open_store(args, namespace=PERSONA_NAMESPACE, embedder="hashing"))


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", default=None, help="Ollama chat model with tool calling (default qwen2.5:3b)"
    )
    parser.add_argument("--ollama-host", default=None, help="Ollama address, e.g. 127.0.0.1:11434")
    parser.add_argument(
        "--llm",
        default=None,
        metavar="PROVIDER:MODEL",
        help="any LangChain chat model through init_chat_model (needs `langchain`), "
        "e.g. openai:gpt-4o-mini",
    )


def _chat_model(args: argparse.Namespace, *, tools: bool) -> tuple[Any, str]:
    from magnetic_langchain.agent.models import DEFAULT_MODEL, check_ollama, make_chat_model

    model = args.model or DEFAULT_MODEL
    if args.llm is None or args.llm.startswith("ollama:"):
        model = args.llm.removeprefix("ollama:") if args.llm else model
        check_ollama(args.ollama_host, model, tools=tools)
        return make_chat_model(model=model, host=args.ollama_host), model
    return make_chat_model(llm=args.llm), args.llm


def cmd_chat(args: argparse.Namespace, out: TextIO) -> int:
    """``magnetic chat``: talk to the memory agent."""
    from magnetic_langchain.agent.chat import ChatSession

    llm, model = _chat_model(args, tools=True)
    with open_store(args) as memory, _personas(args) as book:
        persona = book.get(args.persona) if args.persona else None

        def story(world: str | None) -> None:
            _run_story(args, memory, llm, world or args.world_default, out, sys.stdin)

        session = ChatSession(
            memory,
            llm,
            book,
            out=out,
            inp=sys.stdin,
            quiet=args.quiet,
            remember_all=args.remember_all,
            max_tool_rounds=args.max_tool_rounds,
            model_name=model,
            host=args.ollama_host,
            story=story,
            persona=persona,
        )
        return session.run()


def cmd_persona(args: argparse.Namespace, out: TextIO) -> int:
    """``magnetic persona list|show|set|use|delete``."""
    with _personas(args) as book:
        action = args.persona_action
        if action == "list":
            active = book.active().name
            for p in book.list():
                kind = (
                    "built-in, customised"
                    if p.customised
                    else "built-in"
                    if p.builtin
                    else "custom"
                )
                mark = "*" if p.name == active else " "
                out.write(f"{mark} {p.name:<18} ({kind})  {p.prompt[:60]}\n")
        elif action == "show":
            out.write(book.get(args.name).prompt + "\n")
        elif action == "set":
            persona = book.set(args.name, args.text)
            out.write(f"saved persona {persona.name}\n")
        elif action == "use":
            out.write(f"active persona: {book.use(args.name).name}\n")
        else:
            restored = book.delete(args.name)
            out.write(
                f"restored the built-in {restored.name}\n"
                if restored
                else f"deleted persona {args.name}\n"
            )
    return 0


def _run_story(
    args: argparse.Namespace,
    memory: MagneticMemory | None,
    llm: Any,
    world: str,
    out: TextIO,
    inp: TextIO,
) -> int:
    from magnetic_langchain.agent.story_cli import run_story_cli

    return run_story_cli(args, llm, world, out=out, inp=inp, open_world=open_store)


def _check_chat(args: argparse.Namespace) -> None:
    from magnetic_langchain.cli.options import UsageError

    if args.max_tool_rounds < 1:
        raise UsageError(f"--max-tool-rounds must be 1 or more, got {args.max_tool_rounds}")


def _check_story(args: argparse.Namespace) -> None:
    from magnetic_langchain.cli.options import UsageError

    if args.turns is not None and not args.continuous:
        raise UsageError("--turns only applies with --continuous (add --continuous)")
    if args.turns is not None and args.turns < 1:
        raise UsageError(f"--turns must be 1 or more, got {args.turns}")


def cmd_story(args: argparse.Namespace, out: TextIO) -> int:
    """``magnetic story``: an interactive (or continuous) story that keeps its world consistent."""
    llm, _ = _chat_model(args, tools=False)
    return _run_story(args, None, llm, args.world, out, sys.stdin)


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add ``chat``, ``persona`` and ``story`` to the ``magnetic`` command line."""
    _register_chat(subparsers, parents)
    _register_persona(subparsers, parents)
    _register_story(subparsers, parents)


def _register_chat(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    chat = add_command(
        subparsers,
        parents,
        "chat",
        cmd_chat,
        help="chat with an agent that searches and stores memories itself",
        check_args=_check_chat,
        world_default="default",
        continuous=False,
        turns=None,
    )
    _model_options(chat)
    chat.add_argument("--persona", default=None, help="persona for this chat (default: active)")
    chat.add_argument("--quiet", action="store_true", help="hide the tool-call lines")
    chat.add_argument(
        "--remember-all", action="store_true", help="also store every message you type"
    )
    chat.add_argument(
        "--max-tool-rounds", type=int, default=4, help="tool rounds per message (default: 4)"
    )


def _register_persona(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    persona = add_command(
        subparsers,
        parents,
        "persona",
        cmd_persona,
        help="list, show, set, use or delete personas",
    )
    actions = persona.add_subparsers(dest="persona_action", required=True)
    actions.add_parser("list", parents=parents, help="every persona; * marks the active one")
    for name, text in (
        ("show", "print a persona's prompt"),
        ("use", "make a persona active"),
        ("delete", "delete a custom persona or revert a built-in"),
    ):
        actions.add_parser(name, parents=parents, help=text).add_argument("name")
    setter = actions.add_parser("set", parents=parents, help="create or replace a persona")
    setter.add_argument("name")
    setter.add_argument("text", help="the persona's system prompt")


def _register_story(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    story = add_command(
        subparsers,
        parents,
        "story",
        cmd_story,
        help="an interactive story whose world stays consistent",
        check_args=_check_story,
    )
    _model_options(story)
    story.add_argument("--world", default="default", help="the story's name (resumable)")
    story.add_argument(
        "--continuous", action="store_true", help="write unattended until --turns or Ctrl-C"
    )
    story.add_argument("--turns", type=int, default=None, help="passages in continuous mode")
