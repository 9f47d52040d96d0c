"""The agent pieces used as a library: create_memory_agent and StoryWorld on fake models."""

from __future__ import annotations

import json

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from ollama import ResponseError

from magnetic_langchain import MagneticVectorStore
from magnetic_langchain.agent import StoryWorld, create_memory_agent
from magnetic_langchain.agent.errors import ToolsUnsupportedError
from magnetic_langchain.agent.models import explain_llm_failure
from tests.langchain.fakes import ScriptedChatModel, last_tool_output, tool_call


def test_memory_agent_graph_stores_searches_and_keeps_threads(store: MagneticVectorStore):
    model = ScriptedChatModel(
        script=[
            tool_call("store_memory", {"text": "Ada's cat is called Pixel."}, "c1"),
            AIMessage("Saved."),
            tool_call("search_memory", {"query": "Ada's cat"}, "c2"),
            lambda messages: AIMessage("Memory says: " + last_tool_output(messages)),
        ]
    )
    agent = create_memory_agent(
        store, model, persona="You are terse.", checkpointer=InMemorySaver()
    )
    thread = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [("user", "My cat is Pixel.")]}, thread)
    state = agent.invoke({"messages": [("user", "What is my cat called?")]}, thread)
    assert "Ada's cat is called Pixel." in state["messages"][-1].content
    roles = [type(m).__name__ for m in state["messages"]]
    assert roles.count("HumanMessage") == 2 and roles.count("ToolMessage") == 2
    assert model.calls[0][0].content.startswith("You are terse.")
    assert "search_memory" in model.calls[0][0].content  # the memory policy follows
    assert [c.text for c in store.memory.get()] == ["Ada's cat is called Pixel."]


def test_a_model_without_tool_calling_is_refused(store: MagneticVectorStore):
    with pytest.raises(ToolsUnsupportedError, match="does not support tool calling"):
        create_memory_agent(store, GenericFakeChatModel(messages=iter([])))


def test_bad_arguments_become_a_tool_message_the_agent_can_read(store: MagneticVectorStore):
    model = ScriptedChatModel(
        script=[
            tool_call("forget_memory", {"ids": "not-a-list"}, "c1"),
            lambda messages: AIMessage(f"Tool said: {last_tool_output(messages)}"),
        ]
    )
    state = create_memory_agent(store, model).invoke({"messages": [("user", "forget x")]})
    error = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert error.status == "error" and "ids: Input should be a valid list" in error.content


def _facts(*texts: str) -> AIMessage:
    return AIMessage(json.dumps({"facts": [{"text": t, "kind": "character"} for t in texts]}))


def test_story_world_writes_checks_and_supersedes(store: MagneticVectorStore):
    green, blue = "Mira's eyes are green.", "Mira's eyes are blue."
    pair = {"first": 1, "second": 2, "explanation": "eye colour differs"}
    llm = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage("Mira had green eyes."),  # passage 1
                _facts(green),  # its facts (no stored facts yet: nothing to check)
                AIMessage("Mira's blue eyes shone."),  # passage 2
                _facts(blue),
                AIMessage(json.dumps({"contradictions": [pair]})),  # stored 1 vs new 2
            ]
        )
    )
    world = StoryWorld(store.memory, llm)
    first = world.write("Introduce Mira.")
    assert (first.number, first.text, first.conflicts) == (1, "Mira had green eyes.", ())
    world.accept(first)
    second = world.write("She looks up.")
    (conflict,) = second.conflicts
    assert (conflict.old_text, conflict.new_text, conflict.old_passage) == (green, blue, 1)
    assert "passage 1 said" in conflict.describe()
    assert green in world.prompt("Mira's eyes")[1].content  # retrieved into the next prompt
    (new_id,) = world.accept(second)
    (old,) = store.memory.get([conflict.old_id])
    assert old.superseded_by == new_id
    assert [c.text for c in world.facts()] == [blue]
    assert (
        world.next_number() == 3 and world.summary() == "2 passages, 1 current facts (1 superseded)"
    )


@pytest.mark.parametrize(
    ("raised", "kind", "says"),
    [
        (ConnectionError("refused"), "LLMUnavailableError", "ollama serve"),
        (ResponseError("model 'tiny' not found", 404), "ModelNotFoundError", "ollama pull tiny"),
        (ResponseError("tiny does not support tools", 400), "ToolsUnsupportedError", "--model"),
        (RuntimeError("boom"), "LLMError", "boom"),
    ],
)
def test_model_failures_mid_chat_become_one_clear_error(raised, kind, says):
    try:
        raise RuntimeError("while streaming") from raised
    except RuntimeError as outer:
        error = explain_llm_failure(outer, model="tiny", host="127.0.0.1:1")
    assert type(error).__name__ == kind and says in str(error)
