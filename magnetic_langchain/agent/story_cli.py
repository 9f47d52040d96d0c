"""``magnetic story``: the interactive loop and the unattended ``--continuous`` mode.

Interactive: the user types an instruction (empty = continue), the passage is written and
checked before it is shown; a passage with conflicts waits for ``a`` (accept: the new facts
supersede the old) or ``r`` (regenerate). Continuous: passages follow each other until
``--turns`` or Ctrl-C; a passage with conflicts is regenerated once, and accepted with its
conflicts shown if it still has them. The first Ctrl-C lets the current passage finish
(and be stored), a second one stops at once; either way a summary is printed.
"""

from __future__ import annotations

import argparse
import re
import signal
from collections.abc import Callable
from typing import Any, TextIO

from magnetic_core import MagneticMemory
from magnetic_core._sleep.llm_json import LLMError, LLMUnavailableError
from magnetic_core.errors import InvalidInputError
from magnetic_langchain.agent.display import Painter
from magnetic_langchain.agent.story import Draft, StoryWorld, regenerate_instruction

__all__ = ["run_story_cli", "story_namespace"]

_WORLD = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")


def story_namespace(world: str) -> str:
    """The namespace holding the story ``world``."""
    clean = world.strip().lower()
    if not _WORLD.match(clean):
        raise InvalidInputError(
            f"invalid story world name {world!r}",
            hint="use 1-40 letters, digits, '-' or '_', starting with a letter or digit",
        )
    return f"story-{clean}"


class _StoryRun:
    def __init__(self, world: StoryWorld, name: str, out: TextIO, inp: TextIO) -> None:
        self.world, self.name = world, name
        self.paint, self.inp = Painter(out), inp
        self.written = 0
        self.conflicts = 0

    def _show(self, draft: Draft) -> None:
        self.paint.line(f"\n[passage {draft.number}]")
        self.paint.line(draft.text)
        for conflict in draft.conflicts:
            self.paint.dim(f"conflict: {conflict.describe()}")

    def _accept(self, draft: Draft) -> None:
        ids = self.world.accept(draft)
        self.written += 1
        self.conflicts += len(draft.conflicts)
        superseded = f", {len(draft.conflicts)} superseded" if draft.conflicts else ""
        facts = f"{len(ids)} fact{'' if len(ids) == 1 else 's'}"
        self.paint.dim(f"stored passage {draft.number}: {facts}{superseded}")

    def _read(self, prompt: str) -> str | None:
        self.paint.write(prompt)
        line = self.inp.readline()
        if line and not (getattr(self.inp, "isatty", None) and self.inp.isatty()):
            self.paint.write(line if line.endswith("\n") else line + "\n")  # echo piped input
        return line.strip() if line else None

    def interactive(self) -> None:
        while True:
            instruction = self._read("instruction (empty: continue, /exit)> ")
            if instruction is None:
                self.paint.line()
                return
            if instruction in ("/exit", "/quit"):
                return
            draft = self._write(instruction)
            while draft is not None:
                self._show(draft)
                if not draft.conflicts:
                    self._accept(draft)
                    break
                choice = self._read("[a]ccept (new facts supersede old), [r]egenerate> ")
                if choice is None:
                    return
                if choice.lower().startswith("a"):
                    self._accept(draft)
                    break
                draft = self._write(regenerate_instruction(draft, draft.conflicts))

    def _write(self, instruction: str) -> Draft | None:
        """A checked draft, or None when the model's answer was unusable (said so)."""
        try:
            return self.world.write(instruction)
        except LLMUnavailableError:
            raise
        except LLMError as e:
            self.paint.dim(f"the model's answer could not be used ({e}); try again")
            return None

    def continuous(self, turns: int | None) -> None:
        stop = {"requested": False}

        def on_sigint(signum: int, frame: Any) -> None:
            if stop["requested"]:
                raise KeyboardInterrupt
            stop["requested"] = True
            self.paint.dim("stopping after this passage (Ctrl-C again to stop now)")

        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            while not stop["requested"] and (turns is None or self.written < turns):
                draft = self.world.write("Continue the story.")
                if draft.conflicts:
                    self._show(draft)
                    self.paint.dim("regenerating once to keep the world consistent")
                    draft = self.world.write(regenerate_instruction(draft, draft.conflicts))
                self._show(draft)
                self._accept(draft)
        except KeyboardInterrupt:
            self.paint.line()
            self.paint.dim("stopped; the unfinished passage was not stored")
        finally:
            signal.signal(signal.SIGINT, previous)


def run_story_cli(
    args: argparse.Namespace,
    llm: Any,
    world: str,
    *,
    out: TextIO,
    inp: TextIO,
    open_world: Callable[..., MagneticMemory],
) -> int:
    """Run ``magnetic story`` (or ``/story`` in a chat) on the world ``world``."""
    namespace = story_namespace(world)
    with open_world(args, namespace=namespace) as memory:
        story = StoryWorld(memory, llm)
        run = _StoryRun(story, world, out, inp)
        before = story.next_number() - 1
        run.paint.dim(
            f"story {world!r}: " + (f"resuming after passage {before}" if before else "a new story")
        )
        try:
            if getattr(args, "continuous", False):
                run.continuous(getattr(args, "turns", None))
            else:
                run.interactive()
        except KeyboardInterrupt:
            run.paint.line()
        run.paint.line(
            f"story {world!r}: {run.written} passages written this run, "
            f"{run.conflicts} conflicts resolved; {story.summary()}"
        )
    return 0
