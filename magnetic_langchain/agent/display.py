"""How the chat shows memory at work: one compact, dimmed line per tool call."""

from __future__ import annotations

import os
from typing import Any, TextIO

from langchain_core.messages import ToolMessage

from magnetic_langchain.documents import GROUP_LABEL_KEY

__all__ = ["Painter", "describe_tool_call"]


class Painter:
    """Writes to ``out``, dimming side lines when ``out`` is a colour terminal."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        isatty = getattr(out, "isatty", None)
        self.color = bool(isatty and isatty()) and "NO_COLOR" not in os.environ

    def write(self, text: str) -> None:
        """Write text as it comes (tokens), flushed at once."""
        self.out.write(text)
        self.out.flush()

    def line(self, text: str = "") -> None:
        """Write one line."""
        self.write(text + "\n")

    def dim(self, text: str) -> None:
        """Write one side line (tool calls, notices), dimmed on a terminal."""
        self.line(f"\x1b[2m  · {text}\x1b[0m" if self.color else f"  · {text}")


def _short(text: str, width: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def describe_tool_call(call: dict[str, Any], result: ToolMessage) -> str:
    """One line for a tool call and its result.

    Example: ``searched 'Lisbon flight' -> 3 memories in [travel]``.
    """
    name, args = call.get("name", "?"), call.get("args") or {}
    content = str(result.content)
    if result.status == "error":
        return f"{name} failed: {_short(content.splitlines()[0] if content else '', 110)}"
    artifact = result.artifact if isinstance(result.artifact, list) else []
    if name == "search_memory":
        labels = list(dict.fromkeys(d.metadata.get(GROUP_LABEL_KEY) or "?" for d in artifact))
        where = f" in [{', '.join(labels[:3])}]" if labels else ""
        return f"searched {_short(args.get('query', ''))!r} -> {len(artifact)} memories{where}"
    if name == "store_memory":
        stored = content.removeprefix("Stored memory ")
        return f"stored {_short(args.get('text', ''))!r} -> {stored}"
    if name == "forget_memory":
        return f"forget {', '.join(map(str, args.get('ids', [])))} -> {_short(content, 80)}"
    if name == "list_memory_group":
        if args.get("group"):
            return f"listed group {args['group']} -> {len(artifact)} memories"
        return f"listed concept groups -> {_short(content.splitlines()[0], 60)}"
    return f"{name}({_short(str(args), 50)}) -> {_short(content, 60)}"
