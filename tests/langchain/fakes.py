"""Test doubles that stand in for services absent here: table embeddings, a scripted
tool-calling chat model, a minimal agent loop, and a fake Ollama HTTP server."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field


class TableEmbeddings(Embeddings):
    """Embeddings looked up in a table, so tests can place vectors exactly.

    Texts missing from the table (such as the store's one-off dimension probe) get the
    last axis, which tests keep clear of.
    """

    def __init__(self, table: dict[str, Sequence[float]]) -> None:
        self.table = {k: list(map(float, v)) for k, v in table.items()}
        dim = len(next(iter(self.table.values())))
        self.other = [0.0] * (dim - 1) + [1.0]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.table.get(t, self.other) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.table.get(text, self.other)


class ScriptedChatModel(GenericFakeChatModel):
    """langchain-core's generic fake chat model, made able to call tools.

    The fake lacks ``bind_tools``; this adds it (tools are converted to the OpenAI schema,
    as real providers do, and recorded per call). Script steps may also be callables of
    the conversation so far, so a reply can use what earlier tool calls returned.
    """

    messages: Iterator[Any] = Field(default_factory=lambda: iter(()))
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    offered_tools: list[list[str]] = Field(default_factory=list)

    def __init__(self, script: list[Any], **kwargs: Any) -> None:
        super().__init__(messages=iter(script), **kwargs)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.calls.append(list(messages))
        self.offered_tools.append([t["function"]["name"] for t in kwargs.get("tools", [])])
        step = next(self.messages, None)
        if step is None:
            raise AssertionError("the scripted model ran out of replies")
        reply = step(messages) if callable(step) else step
        return ChatResult(generations=[ChatGeneration(message=reply)])


def tool_call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    """An assistant message that calls one tool."""
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def run_agent(
    model: Runnable[Any, AIMessage], tools: list[BaseTool], question: str, max_turns: int = 8
) -> list[BaseMessage]:
    """The classic tool-calling loop: call the model, run its tool calls, repeat."""
    by_name = {t.name: t for t in tools}
    messages: list[BaseMessage] = [HumanMessage(question)]
    for _ in range(max_turns):
        reply = model.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return messages
        for call in reply.tool_calls:
            result = by_name[call["name"]].invoke(call)
            messages.append(result)
    raise AssertionError("the agent did not finish")


async def arun_agent(
    model: Runnable[Any, AIMessage], tools: list[BaseTool], question: str, max_turns: int = 8
) -> list[BaseMessage]:
    """Async :func:`run_agent`."""
    by_name = {t.name: t for t in tools}
    messages: list[BaseMessage] = [HumanMessage(question)]
    for _ in range(max_turns):
        reply = await model.ainvoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return messages
        for call in reply.tool_calls:
            messages.append(await by_name[call["name"]].ainvoke(call))
    raise AssertionError("the agent did not finish")


def last_tool_output(messages: list[BaseMessage]) -> str:
    """Content of the most recent tool message."""
    tool_messages = [m for m in messages if isinstance(m, ToolMessage)]
    return str(tool_messages[-1].content)
