"""The ``magnetic chat`` loop: read a line, stream the agent's answer, show its tool calls.

Lines starting with ``/`` are commands (see :data:`HELP`); anything else goes to the agent.
Ctrl-C during an answer abandons that answer; Ctrl-C or end of input at the prompt ends the
chat.
"""

from __future__ import annotations

import logging
import shlex
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any, TextIO

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    trim_messages,
)

from magnetic_core import MagneticError, MagneticMemory
from magnetic_langchain.agent.agent import create_memory_agent
from magnetic_langchain.agent.display import Painter, describe_tool_call
from magnetic_langchain.agent.models import explain_llm_failure
from magnetic_langchain.agent.personas import Persona, PersonaBook
from magnetic_langchain.tools import create_memory_tools
from magnetic_langchain.vectorstores import MagneticVectorStore

__all__ = ["HELP", "HISTORY_MESSAGES", "ChatSession"]

HISTORY_MESSAGES = 40
"""At most this many recent messages of the chat are sent with each new one."""

logger = logging.getLogger(__name__)

HELP = """commands:
  /persona [list | show NAME | use NAME]   the active persona, or list / show / switch
  /search QUERY                            search memory yourself
  /groups                                  the concept groups of memory
  /forget ID [ID ...]                      delete memories by id
  /sleep                                   consolidate memory (merge converged groups)
  /story [WORLD]                           play an interactive story (back here on /exit)
  /help                                    this list
  /exit                                    leave (also Ctrl-D)"""


class ChatSession:
    """One chat: the agent, its memory tools, the persona and the conversation so far.

    Args:
        memory: the memory the agent searches and writes.
        llm: a chat model with ``bind_tools``.
        personas: where the active persona is read from and switched.
        out: where answers, tool lines and notices go.
        inp: where the user's lines come from.
        quiet: hide the tool-call lines.
        remember_all: also store every user message (source "chat", role "user").
        max_tool_rounds: tool rounds per message before the model must answer.
        model_name: for error messages.
        host: the Ollama address, for error messages.
        story: called with a world name for ``/story``.
        persona: the persona of this chat (default: the active one).
    """

    def __init__(
        self,
        memory: MagneticMemory,
        llm: Any,
        personas: PersonaBook,
        *,
        out: TextIO,
        inp: TextIO,
        quiet: bool = False,
        remember_all: bool = False,
        max_tool_rounds: int = 4,
        model_name: str = "",
        host: str | None = None,
        story: Callable[[str | None], None] | None = None,
        persona: Persona | None = None,
    ) -> None:
        self.memory, self.llm, self.personas = memory, llm, personas
        self.paint, self.inp = Painter(out), inp
        self.quiet, self.remember_all = quiet, remember_all
        self.max_tool_rounds, self.model_name, self.host = max_tool_rounds, model_name, host
        self.story = story
        self.session_id = uuid.uuid4().hex[:12]
        self.store = MagneticVectorStore(memory=memory)
        self.tools = create_memory_tools(
            self.store,
            metadata={"source": "chat", "session": self.session_id},
            timestamp_key="timestamp",
        )
        self.history: list[BaseMessage] = []
        self.persona = persona or personas.active()
        self.agent = self._agent()

    def _agent(self) -> Any:
        return create_memory_agent(
            self.store,
            self.llm,
            persona=self.persona,
            tools=self.tools,
            max_tool_rounds=self.max_tool_rounds,
        )

    # -- the loop -----------------------------------------------------------------------
    def run(self) -> int:
        """Chat until ``/exit``, end of input or Ctrl-C at the prompt; returns 0."""
        self.paint.dim(
            f"persona {self.persona.name}; session {self.session_id}; /help for commands"
        )
        while True:
            try:
                line = self._read("you> ")
            except KeyboardInterrupt:
                self.paint.line()
                break
            if line is None:
                break
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if not self.command(line):
                    break
                continue
            self.turn(line)
        self.paint.dim(f"bye; {self.memory.count()} memories")
        return 0

    def _read(self, prompt: str) -> str | None:
        if self.inp is sys.stdin and sys.stdin.isatty():
            try:
                return input(prompt)
            except EOFError:
                return None
        self.paint.write(prompt)
        line = self.inp.readline()
        if line:
            self.paint.write(line if line.endswith("\n") else line + "\n")  # echo piped input
        return line if line else None

    def turn(self, text: str) -> None:
        """Send one user message to the agent, streaming its answer."""
        if self.remember_all:
            meta = {"source": "chat", "session": self.session_id, "role": "user"}
            self.store.add_texts([text], [{**meta, "timestamp": time.time()}])
        question = HumanMessage(text)
        new: list[BaseMessage] = []
        # Long-term memory carries what matters; the window keeps the prompt bounded.
        recent = trim_messages(
            [*self.history, question],
            max_tokens=HISTORY_MESSAGES,
            token_counter=len,
            strategy="last",
            start_on="human",
        )
        try:
            self._stream(recent, new)
        except KeyboardInterrupt:
            self.paint.line()
            self.paint.dim("(answer interrupted)")
            return
        except MagneticError:
            raise
        except Exception as e:
            raise explain_llm_failure(e, model=self.model_name, host=self.host) from e
        self.history += [question, *new]

    def _stream(self, messages: list[BaseMessage], new: list[BaseMessage]) -> None:
        calls: dict[str, dict[str, Any]] = {}
        speaking = False
        inputs = {"messages": messages}
        for mode, item in self.agent.stream(inputs, stream_mode=["messages", "updates"]):
            if mode == "messages":
                chunk, meta = item
                if meta.get("langgraph_node") == "agent" and isinstance(chunk, AIMessageChunk):
                    text = chunk.text if isinstance(chunk.text, str) else chunk.text()
                    if text:
                        if not speaking:
                            self.paint.write("ai> ")
                            speaking = True
                        self.paint.write(text)
                continue
            for node, update in item.items():
                for message in (update or {}).get("messages", []):
                    new.append(message)
                    if isinstance(message, AIMessage):
                        calls.update({str(c["id"]): dict(c) for c in message.tool_calls if c["id"]})
                    elif node == "tools":
                        if speaking:
                            self.paint.line()
                            speaking = False
                        if not self.quiet:
                            call = calls.get(message.tool_call_id, {"name": message.name})
                            self.paint.dim(describe_tool_call(call, message))
        if speaking:
            self.paint.line()

    # -- slash commands -------------------------------------------------------------------
    def command(self, line: str) -> bool:
        """Run one slash command; False when the chat should end."""
        try:
            words = shlex.split(line)
        except ValueError as e:
            self.paint.dim(f"cannot read the command: {e}")
            return True
        name, args = words[0].lower(), words[1:]
        if name in ("/exit", "/quit"):
            return False
        handler = _COMMANDS.get(name)
        if handler is None:
            self.paint.dim(f"unknown command {name}; /help lists them")
            return True
        try:
            handler(self, args)
        except MagneticError as e:
            self.paint.dim(f"error: {e}")
        return True

    def _help(self, args: list[str]) -> None:
        self.paint.line(HELP)

    def _persona(self, args: list[str]) -> None:
        if not args:
            self.paint.line(f"persona {self.persona.name}: {self.persona.prompt}")
        elif args[0] == "list":
            for p in self.personas.list():
                mark = "*" if p.name == self.persona.name else " "
                self.paint.line(f" {mark} {p.name}")
        elif args[0] == "show" and len(args) == 2:
            self.paint.line(self.personas.get(args[1]).prompt)
        elif args[0] == "use" and len(args) == 2:
            self.persona = self.personas.use(args[1])
            self.agent = self._agent()
            self.paint.dim(f"persona is now {self.persona.name}")
        else:
            self.paint.dim("usage: /persona [list | show NAME | use NAME]")

    def _search(self, args: list[str]) -> None:
        if not args:
            self.paint.dim("usage: /search QUERY")
            return
        for hit in self.memory.search(" ".join(args), k=5):
            self.paint.line(f"  {hit.score:.2f}  [{hit.group_label}]  {hit.text}  (id {hit.id})")

    def _groups(self, args: list[str]) -> None:
        groups = self.memory.groups()
        self.paint.line(f"{len(groups)} concept groups over {self.memory.count()} memories")
        for g in groups[:20]:
            self.paint.line(f"  [{g.id}] {g.label}  ({g.size})")

    def _forget(self, args: list[str]) -> None:
        if not args:
            self.paint.dim("usage: /forget ID [ID ...]")
            return
        found = [c.id for c in self.memory.get(args)]
        deleted = self.memory.delete(ids=found) if found else 0
        missing = sorted(set(args) - set(found))
        self.paint.dim(
            f"forgot {deleted}" + (f"; no memory {', '.join(missing)}" if missing else "")
        )

    def _sleep(self, args: list[str]) -> None:
        sleep = getattr(self.memory, "sleep", None)
        if sleep is not None:
            report = sleep()
            summary = getattr(report, "summary", None)
            self.paint.dim(f"sleep: {summary() if callable(summary) else report}")
            return
        plan = self.memory.plan_merges()
        kept = self.memory.apply_merges(plan)
        self.paint.dim(f"sleep: {len(plan)} merges planned, {len(kept)} groups absorbed others")

    def _story(self, args: list[str]) -> None:
        if self.story is None:
            self.paint.dim("stories are not available here")
            return
        self.story(args[0] if args else None)
        self.paint.dim("back in the chat")


_COMMANDS: dict[str, Callable[[ChatSession, list[str]], None]] = {
    "/help": ChatSession._help,
    "/persona": ChatSession._persona,
    "/search": ChatSession._search,
    "/groups": ChatSession._groups,
    "/forget": ChatSession._forget,
    "/sleep": ChatSession._sleep,
    "/story": ChatSession._story,
}
