"""MagneticStore as an agent's long-term memory: LangMem's memory tools and a LangGraph agent
that stores a fact in one conversation thread and recalls it in another."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langmem import create_manage_memory_tool, create_search_memory_tool

from magnetic_langchain import MagneticEmbeddings, MagneticStore
from tests.langchain.fakes import ScriptedChatModel, tool_call
from tests.langchain.store.helpers import DIMS, CharProfileEmbeddings


def test_langmem_tools_create_search_update_delete(tmp_path: Path) -> None:
    index = {"dims": DIMS, "embed": CharProfileEmbeddings(DIMS)}
    with MagneticStore(str(tmp_path), index=index) as store:
        ns = ("memories", "alice")
        manage = create_manage_memory_tool(namespace=ns, store=store)
        search = create_search_memory_tool(namespace=ns, store=store)
        created = manage.invoke({"content": "Alice likes ramen", "action": "create"})
        manage.invoke({"content": "Alice works in Lyon", "action": "create"})
        assert "created memory" in created
        key = created.split()[-1]
        hits = search.invoke({"query": "likes ramen"})
        assert "Alice likes ramen" in hits and hits.index("ramen") < hits.index("Lyon")
        manage.invoke({"content": "Alice likes udon", "action": "update", "id": key})
        assert store.get(ns, key).value["content"] == "Alice likes udon"
        manage.invoke({"action": "delete", "id": key})
        assert store.get(ns, key) is None
        assert [i.value["content"] for i in store.search(ns)] == ["Alice works in Lyon"]


async def test_langmem_tools_async(tmp_path: Path) -> None:
    index = {"dims": DIMS, "embed": CharProfileEmbeddings(DIMS)}
    with MagneticStore(str(tmp_path), index=index) as store:
        ns = ("memories", "bob")
        manage = create_manage_memory_tool(namespace=ns, store=store)
        search = create_search_memory_tool(namespace=ns, store=store)
        await manage.ainvoke({"content": "Bob has a cat named Miso", "action": "create"})
        assert "Miso" in await search.ainvoke({"query": "cat named Miso"})


def _answer_from_memory(messages: list[BaseMessage]) -> AIMessage:
    recalled = [m for m in messages if isinstance(m, ToolMessage)][-1].content
    return AIMessage(content=f"From memory: {recalled}")


@pytest.mark.minilm
def test_agent_stores_in_one_thread_and_recalls_in_another(tmp_path: Path, minilm: Any) -> None:
    index = {"dims": minilm.dim, "embed": MagneticEmbeddings(minilm), "fields": ["content"]}
    with MagneticStore(str(tmp_path), index=index) as store:
        ns = ("memories", "{user_id}")
        tools = [create_manage_memory_tool(namespace=ns), create_search_memory_tool(namespace=ns)]
        model = ScriptedChatModel(
            [
                tool_call(
                    "manage_memory",
                    {"content": "The user's favourite food is ramen", "action": "create"},
                    "c1",
                ),
                AIMessage(content="Noted."),
                tool_call("search_memory", {"query": "what does the user like to eat?"}, "c2"),
                _answer_from_memory,
            ]
        )
        agent = create_agent(model, tools, store=store, checkpointer=InMemorySaver())
        alice = {"user_id": "alice"}
        agent.invoke(
            {"messages": [HumanMessage("Remember that I love ramen.")]},
            {"configurable": {"thread_id": "monday", **alice}},
        )
        later = agent.invoke(
            {"messages": [HumanMessage("What should we have for dinner?")]},
            {"configurable": {"thread_id": "friday", **alice}},
        )
        assert "ramen" in later["messages"][-1].content
        # The second thread saw nothing of the first: the fact came from the store.
        seen = " ".join(str(m.content) for m in model.calls[2])
        assert "Remember that I love ramen" not in seen
        assert [i.value["content"] for i in store.search(("memories", "alice"))] == [
            "The user's favourite food is ramen"
        ]
        assert store.list_namespaces() == [("memories", "alice")]
