"""The sleep-mode chain: merges in the core, contradictions found by a (scripted) LLM."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage

from magnetic_core import MagneticMemory, MemoryConfig
from magnetic_langchain import ConsolidationResult, create_consolidation_chain
from tests.langchain.fakes import ScriptedChatModel


def _unit(*v: float) -> np.ndarray:
    arr = np.asarray(v, dtype=np.float32)
    return arr / np.linalg.norm(arr)


FACTS = {
    "monday": ("The team meeting is on Monday.", _unit(1, 0, 0, 0)),
    "room": ("The team meeting is in room 4.", _unit(1, 0.3, 0, 0)),
    "tuesday": ("The team meeting is on Tuesday.", _unit(1, 0, 0.5, 0)),
    "cat": ("The office cat is called Miso.", _unit(0, 0, 0, 1)),
}


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MagneticMemory]:
    """Monday and room share a group; Tuesday founds its own close by; the cat is apart."""
    config = MemoryConfig(join_threshold=0.9, merge_threshold=0.85)
    mem = MagneticMemory(path=str(tmp_path / "v"), embedder=_FixedDim(4), config=config)
    ids = list(FACTS)
    mem.add([FACTS[i][0] for i in ids], ids=ids, vectors=np.stack([FACTS[i][1] for i in ids]))
    groups = {mem.get([i])[0].group_id for i in ids}
    assert len(groups) == 3, "fixture geometry: {monday, room}, {tuesday}, {cat}"
    yield mem
    mem.close()


class _FixedDim:
    """An embedder that is never called: every vector in these tests is given explicitly."""

    name = "explicit-vectors"

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def embed_documents(self, texts):
        raise AssertionError("vectors are passed explicitly")

    def embed_query(self, text):
        raise AssertionError("vectors are passed explicitly")


def _number_of(messages: list[BaseMessage], needle: str) -> int:
    facts = messages[-1].content.splitlines()
    return next(int(line.split(".")[0]) for line in facts if needle in line)


def _flag_monday_vs_tuesday(messages: list[BaseMessage]) -> AIMessage:
    pair = {
        "first": _number_of(messages, "Monday"),
        "second": _number_of(messages, "Tuesday"),
        "explanation": "The meeting cannot be on both Monday and Tuesday.",
    }
    return AIMessage(content="```json\n" + json.dumps({"contradictions": [pair]}) + "\n```")


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_merge_then_record_contradictions(memory: MagneticMemory, mode: str):
    model = ScriptedChatModel(script=[_flag_monday_vs_tuesday])
    chain = create_consolidation_chain(memory, model)
    result = chain.invoke({}) if mode == "sync" else await chain.ainvoke({})

    assert isinstance(result, ConsolidationResult)
    assert len(result.merges) == 1 and len(result.checked_groups) == 1
    merged = result.checked_groups[0]
    assert {c.id for c in memory.get() if c.group_id == merged} == {"monday", "room", "tuesday"}
    (found,) = result.contradictions
    assert {found.cell_a, found.cell_b} == {"monday", "tuesday"}
    assert result.rejected == ()

    # Non-destructive: every cell is still there, and both sides link to each other.
    assert memory.count() == 4
    monday, tuesday, room = memory.get(["monday", "tuesday", "room"])
    assert [(x["other"], x["explanation"]) for x in monday.contradictions] == [
        ("tuesday", "The meeting cannot be on both Monday and Tuesday.")
    ]
    assert [x["other"] for x in tuesday.contradictions] == ["monday"]
    assert room.contradictions == ()

    prompt = model.calls[0]
    assert "cannot both be true" in prompt[0].content and "contradictions" in prompt[0].content
    numbered = [line.split(". ", 1) for line in prompt[1].content.splitlines()[1:]]
    assert [n for n, _ in numbered] == ["1", "2", "3"]
    assert sorted(text for _, text in numbered) == sorted(
        FACTS[k][0] for k in ("monday", "room", "tuesday")
    )


async def test_unusable_answers_are_rejected_not_recorded(memory: MagneticMemory):
    bad_numbers = json.dumps(
        {
            "contradictions": [
                {"first": 1, "second": 9, "explanation": "x"},
                {"first": 2, "second": 2, "explanation": "y"},
            ]
        }
    )
    chain = create_consolidation_chain(memory, GenericFakeChatModel(messages=iter([bad_numbers])))
    result = chain.invoke(None)
    assert result.contradictions == ()
    assert len(result.rejected) == 2 and "not two of the 3 facts" in result.rejected[0]
    assert all(c.contradictions == () for c in memory.get())

    nonsense = GenericFakeChatModel(messages=iter(["I think they are all fine!"]))
    result = create_consolidation_chain(memory, nonsense, check="all").invoke({})
    assert result.merges == () and len(result.checked_groups) == 1
    assert result.contradictions == () and len(result.rejected) == 1


def test_nothing_to_merge_means_no_llm_call(memory: MagneticMemory):
    model = ScriptedChatModel(script=[])
    result = create_consolidation_chain(memory, model).invoke({"merge_threshold": 0.999})
    assert result == ConsolidationResult((), (), (), ())
    assert model.calls == []


def test_bad_arguments(memory: MagneticMemory):
    llm = ScriptedChatModel(script=[])
    with pytest.raises(ValueError, match="check"):
        create_consolidation_chain(memory, llm, check="some")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="MagneticMemory"):
        create_consolidation_chain("memory", llm)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dict"):
        create_consolidation_chain(memory, llm).invoke("go")
