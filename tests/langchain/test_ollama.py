"""ChatOllama and OllamaEmbeddings against a fake Ollama HTTP server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_ollama import ChatOllama, OllamaEmbeddings

from magnetic_langchain import MagneticVectorStore, create_memory_tools
from tests.fake_ollama import FakeOllama
from tests.langchain.fakes import arun_agent, run_agent


def _answer_from_tool_result(body: dict[str, Any]) -> dict[str, Any]:
    """The final turn: quote the search result the server was sent."""
    tool_results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    line = next(x for x in tool_results[-1].splitlines() if x.startswith("- id="))
    return {"content": "From memory: " + line.rsplit(" | ", 1)[1]}


def _script() -> list[Any]:
    return [
        {
            "tool_calls": [
                {
                    "function": {
                        "name": "store_memory",
                        "arguments": {"text": "Maria prefers tea over coffee."},
                    }
                }
            ]
        },
        {
            "tool_calls": [
                {
                    "function": {
                        "name": "search_memory",
                        "arguments": {"query": "what does Maria prefer", "k": 1},
                    }
                }
            ]
        },
        _answer_from_tool_result,
    ]


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama(_script()) as server:
        yield server


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_chat_ollama_agent_uses_the_memory_tools(
    ollama: FakeOllama, store: MagneticVectorStore, mode: str
):
    tools = create_memory_tools(store)
    model = ChatOllama(model="fake-llm", base_url=ollama.url).bind_tools(tools)
    question = "Note that Maria prefers tea, then tell me what she prefers."
    messages = (
        run_agent(model, tools, question)
        if mode == "sync"
        else await arun_agent(model, tools, question)
    )
    assert messages[-1].content == "From memory: Maria prefers tea over coffee."
    assert [c.text for c in store.memory.get()] == ["Maria prefers tea over coffee."]

    first = ollama.chat_requests[0]
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert set(offered) == {"search_memory", "store_memory", "forget_memory", "list_memory_group"}
    assert offered["store_memory"]["parameters"]["required"] == ["text"]
    second_roles = [m["role"] for m in ollama.chat_requests[1]["messages"]]
    assert second_roles == ["user", "assistant", "tool"]
    assert ollama.chat_requests[1]["messages"][2]["content"].startswith("Stored memory id=")


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_ollama_embeddings_drive_the_store(make_store: Any, ollama: FakeOllama, mode: str):
    store = make_store(OllamaEmbeddings(model="nomic-embed-text", base_url=ollama.url))
    texts = ["tea is brewed from leaves", "espresso is pressed coffee"]
    if mode == "sync":
        store.add_texts(texts, ids=["tea", "coffee"])
        docs = store.similarity_search("leaves for tea", k=1)
    else:
        await store.aadd_texts(texts, ids=["tea", "coffee"])
        docs = await store.asimilarity_search("leaves for tea", k=1)
    assert [d.id for d in docs] == ["tea"]
    sent = [x for r in ollama.embed_requests for x in r["input"]]
    # nomic-embed-text's task prefixes are sent, as the core's OllamaEmbedder sends them,
    # and the store is stamped with the name `magnetic --embedder ollama` opens.
    assert "search_document: " + texts[0] in sent and "search_query: leaves for tea" in sent
    assert store.memory.stats().embedder == "ollama/nomic-embed-text"
