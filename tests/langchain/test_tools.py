"""Agent memory tools: schemas, direct calls, and a tool-calling agent loop."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from magnetic_langchain import GROUP_LABEL_KEY, MagneticVectorStore, create_memory_tools
from tests.langchain.fakes import (
    ScriptedChatModel,
    arun_agent,
    last_tool_output,
    run_agent,
    tool_call,
)


def _tools(store: MagneticVectorStore) -> dict[str, Any]:
    return {t.name: t for t in create_memory_tools(store)}


def test_tools_have_documented_schemas(store: MagneticVectorStore):
    tools = create_memory_tools(store)
    assert [t.name for t in tools] == [
        "search_memory",
        "store_memory",
        "forget_memory",
        "list_memory_group",
    ]
    for tool in tools:
        spec = convert_to_openai_tool(tool)["function"]
        assert len(spec["description"]) > 60
        params = spec["parameters"]["properties"]
        assert params and all(p.get("description") for p in params.values()), spec
    required = {
        t.name: convert_to_openai_tool(t)["function"]["parameters"].get("required") for t in tools
    }
    assert required == {
        "search_memory": ["query"],
        "store_memory": ["text"],
        "forget_memory": ["ids"],
        "list_memory_group": None,
    }
    with pytest.raises(TypeError, match="MagneticVectorStore"):
        create_memory_tools(object())  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_store_search_forget(store: MagneticVectorStore, mode: str):
    tools = _tools(store)

    async def run(name: str, args: dict[str, Any]) -> Any:
        call = {"name": name, "args": args, "id": f"call-{name}", "type": "tool_call"}
        tool = tools[name]
        return tool.invoke(call) if mode == "sync" else await tool.ainvoke(call)

    stored = await run(
        "store_memory", {"text": "The wifi password is hunter2.", "metadata": {"room": "office"}}
    )
    cid = stored.content.removeprefix("Stored memory id=").rstrip(".")
    assert store.get_by_ids([cid])[0].metadata == {"room": "office"}

    found = await run("search_memory", {"query": "what is the wifi password", "k": 3})
    assert f"id={cid}" in found.content and "hunter2" in found.content
    assert isinstance(found.artifact[0], Document)
    assert found.artifact[0].id == cid and GROUP_LABEL_KEY in found.artifact[0].metadata

    forgot = await run("forget_memory", {"ids": [cid, "made-up"]})
    assert f"Deleted 1 memories: {cid}." in forgot.content
    assert "No memory with id made-up" in forgot.content
    assert store.memory.count() == 0
    empty = await run("search_memory", {"query": "wifi"})
    assert empty.content == "No memories found."


async def test_bad_arguments_come_back_to_the_model_as_text(store: MagneticVectorStore):
    search = _tools(store)["search_memory"]
    reply = search.invoke(
        {"name": "search_memory", "args": {"query": "x", "k": 0}, "id": "1", "type": "tool_call"}
    )
    assert isinstance(reply, ToolMessage) and reply.content == (
        "Invalid arguments (k: Input should be greater than or equal to 1). "
        "Expected arguments: query (required), k (optional). Fix them and call the tool again."
    )
    assert reply.status == "error"
    misnamed = search.invoke(
        {"name": "search_memory", "args": {"q": "x"}, "id": "1", "type": "tool_call"}
    )
    assert "query: Field required" in misnamed.content
    assert "q: Extra inputs are not permitted" in misnamed.content
    store.close()
    reply = search.invoke(
        {"name": "search_memory", "args": {"query": "x"}, "id": "2", "type": "tool_call"}
    )
    assert "closed" in reply.content


def _forget_the_dog(messages: list[BaseMessage]) -> AIMessage:
    found = last_tool_output(messages)
    dog_line = next(line for line in found.splitlines() if "Biscuit" in line)
    dog_id = dog_line.split("id=")[1].split(" |")[0]
    return tool_call("forget_memory", {"ids": [dog_id]}, "c4")


def _answer(messages: list[BaseMessage]) -> AIMessage:
    return AIMessage(content=f"Done. {last_tool_output(messages)}")


def _script() -> list[Any]:
    return [
        tool_call(
            "store_memory",
            {"text": "The user's dog is called Biscuit.", "metadata": {"topic": "pets"}},
            "c1",
        ),
        tool_call("store_memory", {"text": "The user lives in Lisbon."}, "c2"),
        tool_call("search_memory", {"query": "what is the dog called", "k": 1}, "c3"),
        _forget_the_dog,
        _answer,
    ]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_agent_loop_with_scripted_tool_calls(store: MagneticVectorStore, mode: str):
    model = ScriptedChatModel(script=_script())
    tools = create_memory_tools(store)
    bound = model.bind_tools(tools)
    question = "Remember my dog Biscuit and that I live in Lisbon, then forget the dog."
    messages = (
        run_agent(bound, tools, question)
        if mode == "sync"
        else await arun_agent(bound, tools, question)
    )
    names = ["search_memory", "store_memory", "forget_memory", "list_memory_group"]
    assert model.offered_tools == [names] * 5
    tool_messages = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in tool_messages] == ["c1", "c2", "c3", "c4"]
    assert "Biscuit" in tool_messages[2].content
    assert messages[-1].content.startswith("Done. Deleted 1 memories")
    remaining = store.memory.get()
    assert [c.text for c in remaining] == ["The user lives in Lisbon."]


def test_store_stamps_session_metadata_and_groups_are_browsable(store: MagneticVectorStore):
    tools = {
        t.name: t
        for t in create_memory_tools(
            store, metadata={"source": "chat", "session": "s1"}, timestamp_key="timestamp"
        )
    }
    call = {"name": "store_memory", "id": "1", "type": "tool_call"}
    stored = tools["store_memory"].invoke(
        {**call, "args": {"text": "Ada likes tea.", "metadata": {"source": "model-made-up"}}}
    )
    cid = stored.content.removeprefix("Stored memory id=").rstrip(".")
    (cell,) = store.memory.get([cid])
    assert cell.metadata["source"] == "chat" and cell.metadata["session"] == "s1"
    assert abs(cell.metadata["timestamp"] - cell.created_at) < 60

    listing = tools["list_memory_group"].invoke({**call, "args": {}}).content
    gid = cell.group_id
    assert f"group={gid}" in listing and "1 memories" in listing
    members = tools["list_memory_group"].invoke({**call, "args": {"group": gid}})
    assert f"id={cid} | Ada likes tea." in members.content
    assert members.artifact[0].id == cid
    unknown = tools["list_memory_group"].invoke({**call, "args": {"group": "nope"}})
    assert unknown.status == "error" and "No concept group with id 'nope'" in unknown.content


def test_search_leaves_superseded_memories_out_and_shows_links(store: MagneticVectorStore):
    store.add_texts(
        ["Mira has green eyes.", "Mira has blue eyes.", "Oren is tall.", "Oren is short."],
        ids=["green", "blue", "tall", "short"],
    )
    store.memory.supersede("green", "blue", explanation="her eyes changed colour")
    store.memory.mark_contradiction("tall", "short", "height differs")
    search = _tools(store)["search_memory"]

    def found(query: str) -> str:
        call = {"name": "search_memory", "args": {"query": query}, "id": "1", "type": "tool_call"}
        return search.invoke(call).content

    eyes = found("Mira eyes")
    assert not any(line.startswith("- id=green ") for line in eyes.splitlines())
    assert "Mira has blue eyes. | NOTE: supersedes id=green (her eyes changed colour)" in eyes
    assert "NOTE: contradicts id=short (height differs)" in found("Oren tall")
