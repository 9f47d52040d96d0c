"""MagneticMemoryBlock under LlamaIndex's Memory and a FunctionAgent with a scripted LLM."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.llms import ChatMessage
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory
from pydantic import ValidationError

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_core.errors import InvalidInputError, MagneticError, WrongTypeError
from magnetic_llamaindex import MagneticMemoryBlock


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MagneticMemory]:
    with MagneticMemory(path=str(tmp_path / "m"), embedder=HashingEmbedder(dim=256)) as mem:
        yield mem


def user(text: str, **extra: Any) -> ChatMessage:
    return ChatMessage(role="user", content=text, additional_kwargs=extra)


async def test_messages_become_cells_with_role_and_session(memory: MagneticMemory) -> None:
    block = MagneticMemoryBlock(memory=memory)
    await block.aput(
        [
            user("my cat is named Miso"),
            ChatMessage(role="assistant", content="Noted!"),
            ChatMessage(role="assistant", content=""),
        ],
        session_id="s1",
    )
    await block.aput([user("my cat is named Miso")], session_id="s1")  # seen before: kept once
    cells = {c.text: c.metadata for c in memory.get()}
    assert cells == {
        "my cat is named Miso": {
            "role": "user",
            "source": "llama_index.memory",
            "session_id": "s1",
        },
        "Noted!": {"role": "assistant", "source": "llama_index.memory", "session_id": "s1"},
    }


async def test_aget_returns_relevant_memories_best_first_not_repeating_the_chat(
    memory: MagneticMemory,
) -> None:
    block = MagneticMemoryBlock(memory=memory, similarity_top_k=2)
    await block.aput(
        [
            user("my cat is named Miso"),
            user("the train to Lyon leaves at noon"),
            user("I prefer green tea over coffee"),
        ]
    )
    text = await block.aget([user("what is the name of my cat?")])
    assert text.splitlines()[0] == "- (user) my cat is named Miso"
    assert len(text.splitlines()) == 2
    shown = await block.aget([user("my cat is named Miso"), user("what is my cat called")])
    assert "Miso" not in shown  # already in the conversation
    assert await block.aget([]) == ""


async def test_token_budget_and_truncation(memory: MagneticMemory) -> None:
    count = MagneticMemoryBlock(memory=memory).tokenizer_fn
    facts = [f"fact number {i} about the garden and its roses" for i in range(6)]
    await MagneticMemoryBlock(memory=memory).aput([user(f) for f in facts])
    wide = await MagneticMemoryBlock(memory=memory, similarity_top_k=6).aget([user("garden roses")])
    assert len(wide.splitlines()) == 6
    budget = len(count(wide.splitlines()[0])) * 2 + 1
    narrow_block = MagneticMemoryBlock(memory=memory, similarity_top_k=6, token_limit=budget)
    narrow = await narrow_block.aget([user("garden roses")])
    assert narrow.splitlines() == wide.splitlines()[:2]
    assert len(count(narrow)) <= budget
    cut = await narrow_block.atruncate(wide, tokens_to_truncate=len(count(wide.splitlines()[-1])))
    assert cut.splitlines() == wide.splitlines()[:-1]  # the least relevant line goes first
    assert await narrow_block.atruncate(wide, tokens_to_truncate=10_000) is None


async def test_session_scoping(memory: MagneticMemory) -> None:
    await MagneticMemoryBlock(memory=memory).aput([user("my cat is named Miso")], session_id="a")
    await MagneticMemoryBlock(memory=memory).aput([user("my cat is named Tofu")], session_id="b")
    shared = await MagneticMemoryBlock(memory=memory).aget([user("cat name?")], session_id="b")
    scoped = await MagneticMemoryBlock(memory=memory, session_scoped=True).aget(
        [user("cat name?")], session_id="b"
    )
    assert "Miso" in shared and "Tofu" in shared
    assert "Tofu" in scoped and "Miso" not in scoped


@pytest.mark.parametrize(
    ("fields", "error", "fragment"),
    [
        ({"memory": "./path"}, WrongTypeError, "memory must be a magnetic_core.MagneticMemory"),
        ({"similarity_top_k": 0}, InvalidInputError, "similarity_top_k must be an integer >= 1"),
        ({"token_limit": "800"}, InvalidInputError, "token_limit must be an integer >= 1"),
        ({"retrieval_context_window": 2.0}, InvalidInputError, "retrieval_context_window"),
        ({"priority": "high"}, WrongTypeError, "priority='high'"),
    ],
)
def test_a_bad_field_is_a_magnetic_error_naming_it_and_the_fix(
    memory: MagneticMemory, fields: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error, match=fragment) as caught:
        MagneticMemoryBlock(**{"memory": memory, **fields})
    assert isinstance(caught.value, MagneticError) and caught.value.hint
    assert not isinstance(caught.value, ValidationError)


class Script:
    """A scripted LLM turn: answers from the memory block when it holds the cat's name."""

    def __init__(self) -> None:
        self.calls: list[list[ChatMessage]] = []

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.calls.append(list(messages))
        system = " ".join(m.content or "" for m in messages if m.role == "system")
        asked = messages[-1].content or ""
        if "cat" in asked and "Miso" in system:
            return ChatMessage(role="assistant", content="Your cat is called Miso.")
        return ChatMessage(role="assistant", content="Got it.")


@pytest.mark.minilm
async def test_function_agent_recalls_across_sessions(tmp_path: Path, minilm: Any) -> None:
    script = Script()
    agent = FunctionAgent(tools=[], llm=MockFunctionCallingLLM(response_generator=script))
    with MagneticMemory(path=str(tmp_path / "agent"), embedder=minilm) as mem:
        block = MagneticMemoryBlock(memory=mem, similarity_top_k=3)
        # A small short-term queue, so Memory flushes older turns into the block.
        monday = Memory.from_defaults(
            session_id="monday",
            token_limit=60,
            chat_history_token_ratio=0.5,
            token_flush_size=20,
            memory_blocks=[block],
        )
        for said in [
            "My cat is named Miso.",
            "I live in Lyon, near the river.",
            "I work night shifts at a bakery.",
            "The weather is lovely today.",
        ]:
            await agent.run(said, memory=monday)
        assert "My cat is named Miso." in [c.text for c in mem.get()]
        friday = Memory.from_defaults(session_id="friday", token_limit=600, memory_blocks=[block])
        answer = await agent.run("Remind me, what is my cat called?", memory=friday)
        assert "Miso" in str(answer)
        system = [m for m in script.calls[-1] if m.role == "system"][0].content
        assert "MagneticMemory" in system and "My cat is named Miso." in system
        assert not any("Miso" in (m.content or "") for m in script.calls[-1] if m.role == "user")
