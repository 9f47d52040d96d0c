"""The memory agent: a LangGraph tool loop where the model decides when to search and store.

::

    START -> agent --(tool calls, rounds left)--> tools -> agent
                   \\--(an answer)--------------> END

``agent`` calls the chat model (with the memory tools bound) on the persona's system prompt
plus the conversation; ``tools`` runs the calls it asked for with LangGraph's ``ToolNode``.
After ``max_tool_rounds`` rounds of tool calls in one user turn the model is called once
more without tools, so a model that keeps calling tools still has to answer.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode

from magnetic_core import MagneticMemory
from magnetic_core.validators import check_int
from magnetic_langchain.agent.errors import ToolsUnsupportedError
from magnetic_langchain.agent.personas import Persona
from magnetic_langchain.tools import create_memory_tools
from magnetic_langchain.vectorstores import MagneticVectorStore

__all__ = ["MEMORY_POLICY", "create_memory_agent", "system_prompt"]

logger = logging.getLogger(__name__)

MEMORY_POLICY = (
    "You have a long-term memory that outlives this conversation, reached through tools. "
    "Before answering anything about the user, earlier conversations or facts you may have "
    "been told, call search_memory. When the user tells you something worth keeping "
    "(names, preferences, plans, decisions, dates), call store_memory with one "
    "self-contained sentence per fact. Use forget_memory when told to forget something or "
    "a memory is wrong, and list_memory_group to browse a concept. Do not store small talk. "
    "If a tool reports invalid arguments, correct them and call it again."
)
"""Appended to the persona's prompt: when the model should use its memory tools."""

_OUT_OF_ROUNDS = (
    "You have used every tool call allowed for this message. Answer the user now from what "
    "the tools returned, without calling tools."
)


def system_prompt(persona: Persona | str | None) -> str:
    """The system prompt of the agent: the persona's text, then the memory policy."""
    if persona is None:
        from magnetic_langchain.agent.personas import BUILTIN_PERSONAS

        persona = BUILTIN_PERSONAS["default"]
    text = persona.prompt if isinstance(persona, Persona) else str(persona)
    return f"{text.strip()}\n\n{MEMORY_POLICY}"


def _tool_rounds(messages: Sequence[BaseMessage]) -> int:
    """Tool-calling replies of the model since the user's last message."""
    rounds = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, AIMessage) and message.tool_calls:
            rounds += 1
    return rounds


def _bind(llm: BaseChatModel, tools: Sequence[BaseTool]) -> Any:
    try:
        return llm.bind_tools(list(tools))
    except NotImplementedError as e:
        raise ToolsUnsupportedError(
            f"the chat model {type(llm).__name__} does not support tool calling (bind_tools)",
            hint="use a model with tool calling, e.g. ChatOllama(model='qwen2.5:3b')",
        ) from e


def create_memory_agent(
    store: MagneticVectorStore | MagneticMemory,
    llm: BaseChatModel,
    *,
    persona: Persona | str | None = None,
    tools: Sequence[BaseTool] | None = None,
    max_tool_rounds: int = 4,
    checkpointer: Any = None,
) -> CompiledStateGraph:
    """A LangGraph agent that uses ``store`` as its long-term memory through tools.

    Args:
        store: the memory (or a :class:`MagneticVectorStore` around one).
        llm: any LangChain chat model with ``bind_tools`` (``ChatOllama``, ``ChatOpenAI``...).
        persona: the system prompt, as a :class:`Persona` or text (default: the built-in
            assistant). The memory policy is appended to it.
        tools: the tools to offer (default: :func:`create_memory_tools` of ``store``).
        max_tool_rounds: tool-calling rounds allowed per user message; then the model
            must answer without tools.
        checkpointer: a LangGraph checkpointer, to keep conversations per ``thread_id``.

    Returns:
        A compiled graph over ``{"messages": [...]}``; it streams with LangGraph's
        ``stream_mode="messages"`` (tokens) and ``"updates"`` (tool results).

    Raises:
        ToolsUnsupportedError: the model cannot call tools.

    Example:
        ```python
        from langchain_ollama import ChatOllama

        agent = create_memory_agent(store, ChatOllama(model="qwen2.5:3b"), persona="You are terse.")
        state = agent.invoke({"messages": [("user", "I moved to Lisbon last week.")]})
        print(state["messages"][-1].content)
        ```
    """
    if isinstance(store, MagneticMemory):
        store = MagneticVectorStore(memory=store)
    check_int(max_tool_rounds, "max_tool_rounds", low=1)
    tool_list = list(tools) if tools is not None else create_memory_tools(store)
    graph = _graph(llm, tool_list, system_prompt(persona), max_tool_rounds)
    return graph.compile(checkpointer=checkpointer, name="magnetic_memory_agent")


def _graph(
    llm: BaseChatModel, tool_list: list[BaseTool], prompt: str, max_tool_rounds: int
) -> StateGraph:
    """The agent's loop: the model answers or calls tools, at most ``max_tool_rounds`` times."""
    with_tools = _bind(llm, tool_list)

    def agent(state: MessagesState, config: RunnableConfig) -> dict[str, list[BaseMessage]]:
        messages = [SystemMessage(prompt), *state["messages"]]
        if _tool_rounds(state["messages"]) >= max_tool_rounds:
            logger.info("tool budget of %d rounds used; asking for an answer", max_tool_rounds)
            return {"messages": [llm.invoke([*messages, SystemMessage(_OUT_OF_ROUNDS)], config)]}
        return {"messages": [with_tools.invoke(messages, config)]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tool_list, handle_tool_errors=True))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph
