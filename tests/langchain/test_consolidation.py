"""The sleep-mode chain: the numeric pass, then contradictions found by scripted LLMs."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_ollama import ChatOllama
from pydantic import Field

from magnetic_core import MagneticMemory, MemoryConfig
from magnetic_core._sleep.llm_json import LLMError, LLMUnavailableError
from magnetic_langchain import ConsolidationResult, create_consolidation_chain
from magnetic_langchain.consolidation import afind_contradictions, find_contradictions
from tests.langchain.fakes import ScriptedChatModel, tool_call


def _unit(*v: float) -> np.ndarray:
    arr = np.asarray(v, dtype=np.float32)
    return arr / np.linalg.norm(arr)


FACTS = {
    "monday": ("The team meeting is on Monday.", _unit(1, 0, 0, 0)),
    "room": ("The team meeting is in room 4.", _unit(1, 0.3, 0, 0)),
    "tuesday": ("The team meeting is on Tuesday.", _unit(1, 0, 0.5, 0)),
    "cat": ("The office cat is called Miso.", _unit(0, 0, 0, 1)),
}


class _FixedDim:
    """An embedder that is never called: every vector in these tests is given explicitly."""

    name = "explicit-vectors"

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def embed_documents(self, texts):
        raise AssertionError("vectors are passed explicitly")

    def embed_query(self, text):
        raise AssertionError("vectors are passed explicitly")


class Responder(BaseChatModel):
    """A chat model without tools or structured output that answers with ``respond(messages)``."""

    respond: Callable[[list[BaseMessage]], str]
    calls: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "responder"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
        self.calls.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.respond(messages)))])


def _numbers(messages: list[BaseMessage]) -> dict[str, int]:
    human = next(m for m in reversed(messages) if m.type == "human" and "Facts:" in m.content)
    lines = human.content.split("Facts:\n", 1)[1].splitlines()
    return {text: int(n) for n, text in (line.split(". ", 1) for line in lines)}


def _pairs(messages: list[BaseMessage], *pairs: tuple[str, str]) -> list[dict[str, Any]]:
    """The scripted model's finding: each pair of texts that are both in the call."""
    numbers = _numbers(messages)
    found = []
    for a, b in pairs:
        na = next((n for t, n in numbers.items() if a in t), None)
        nb = next((n for t, n in numbers.items() if b in t), None)
        if na and nb:
            found.append({"first": na, "second": nb, "explanation": f"{a} vs {b}"})
    return found


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MagneticMemory]:
    """Monday and room share a group, Tuesday (stored later) founds its own, the cat is apart."""
    config = MemoryConfig(join_threshold=0.9)
    mem = MagneticMemory(path=str(tmp_path / "v"), embedder=_FixedDim(4), config=config)
    for ids in (["monday", "room"], ["tuesday", "cat"]):
        mem.add([FACTS[i][0] for i in ids], ids=ids, vectors=np.stack([FACTS[i][1] for i in ids]))
        time.sleep(0.01)
    groups = {mem.get([i])[0].group_id for i in FACTS}
    assert len(groups) == 3, "fixture geometry: {monday, room}, {tuesday}, {cat}"
    yield mem
    mem.close()


def _monday_vs_tuesday(messages: list[BaseMessage]) -> str:
    # prose, a code fence, single quotes and a trailing comma: repaired, not rejected
    body = json.dumps({"contradictions": _pairs(messages, ("Monday", "Tuesday"))})
    return "Sure, here you go:\n```json\n" + body.replace('"', "'")[:-1] + ",}\n```\nDone."


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_pass_then_contradiction_then_supersession(memory: MagneticMemory, mode: str):
    model = Responder(respond=_monday_vs_tuesday)
    chain = create_consolidation_chain(memory, model, check="all")
    result = (
        chain.invoke({"merge_threshold": 0.8})
        if mode == "sync"
        else await chain.ainvoke({"merge_threshold": 0.8})
    )
    assert isinstance(result, ConsolidationResult) and result.ok
    assert result.report is not None and len(result.merges) == 1
    merged = result.merges[0][0]
    assert {c.id for c in memory.get() if c.group_id == merged} == {"monday", "room", "tuesday"}
    (found,) = result.contradictions
    assert {found.a, found.b} == {"monday", "tuesday"} and found.group_id == merged
    assert result.superseded == (("monday", "tuesday"),)

    # Non-destructive: every cell is still there, linked both ways; the newer is current.
    assert memory.count() == 4
    monday, tuesday, room = memory.get(["monday", "tuesday", "room"])
    assert [x["other"] for x in monday.contradictions] == ["tuesday"]
    assert [x["other"] for x in tuesday.contradictions] == ["monday"]
    assert monday.superseded_by == "tuesday" and monday.superseded_at is not None
    assert tuesday.superseded_by is None and room.contradictions == ()
    current = memory.search(vector=FACTS["monday"][1], k=4, current_only=True)
    assert "monday" not in {h.id for h in current} and "tuesday" in {h.id for h in current}


def test_a_model_with_structured_output_uses_it(memory: MagneticMemory):
    def answer(messages: list[BaseMessage]) -> AIMessage:
        return tool_call(
            "ContradictionReport",
            {"contradictions": _pairs(messages, ("Monday", "Tuesday"))},
            "call-1",
        )

    model = ScriptedChatModel([answer] * 5)
    chain = create_consolidation_chain(memory, model, check="merged", merge_threshold=0.8)
    result = chain.invoke({})
    assert result.ok and len(result.contradictions) == 1 and result.checked_groups
    assert all(tools == ["ContradictionReport"] for tools in model.offered_tools)


def test_unrepairable_answer_is_retried_with_the_error_then_reported(memory: MagneticMemory):
    model = Responder(respond=lambda m: "They all look fine to me!")
    result = create_consolidation_chain(memory, model, check="all", sleep=False).invoke(None)
    assert not result.ok and result.contradictions == ()
    assert "no JSON object" in result.failures[0]
    assert len(model.calls) == 2 * result.calls  # one retry per call
    assert "could not be used" in model.calls[1][-1].content
    assert all(c.contradictions == () for c in memory.get())


def test_numbers_out_of_range_are_rejected(memory: MagneticMemory):
    bad = {"contradictions": [{"first": 1, "second": 9, "explanation": "x"}]}
    model = Responder(respond=lambda m: json.dumps(bad))
    result = create_consolidation_chain(memory, model, check="all", sleep=False).invoke({})
    assert result.ok and result.contradictions == ()
    assert "not two of the" in result.rejected[0]


def test_a_failing_model_is_reported_not_hidden(memory: MagneticMemory):
    def crash(messages):
        raise RuntimeError("CUDA out of memory")

    result = create_consolidation_chain(
        memory, Responder(respond=crash), check="all", sleep=False
    ).invoke({})
    assert not result.ok and "CUDA out of memory" in result.failures[0]
    with pytest.raises(LLMError, match="CUDA out of memory"):
        find_contradictions(Responder(respond=crash), [("a", "x"), ("b", "y")])


def test_unreachable_ollama_fails_once_and_names_the_fix(memory: MagneticMemory):
    llm = ChatOllama(model="llama3.2", base_url="http://127.0.0.1:9")
    result = create_consolidation_chain(memory, llm, check="all", sleep=False).invoke({})
    assert not result.ok and len(result.failures) == 1
    assert "ollama serve" in result.failures[0]
    with pytest.raises(LLMUnavailableError, match="--ollama-host"):
        find_contradictions(llm, [("a", "x"), ("b", "y")])


def _big_group(tmp_path: Path) -> tuple[MagneticMemory, list[str]]:
    """40 facts in one group; fact 2 and fact 38 (in insertion order) are near neighbours."""
    rng = np.random.default_rng(0)
    base = rng.normal(size=16)
    vecs = base + 0.35 * rng.normal(size=(40, 16))
    vecs[37] = vecs[1] + 0.01 * rng.normal(size=16)
    texts = [f"fact number {i} about the project" for i in range(40)]
    texts[1], texts[37] = "The launch is in March.", "The launch is in September."
    mem = MagneticMemory(
        path=str(tmp_path / "big"), embedder=_FixedDim(16), config=MemoryConfig(join_threshold=0.0)
    )
    mem.add(texts, ids=[f"f{i}" for i in range(40)], vectors=vecs)
    assert mem.stats().groups == 1
    return mem, texts


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_no_truncation_a_big_group_is_chunked_so_close_pairs_meet(tmp_path: Path, mode):
    mem, _ = _big_group(tmp_path)
    try:
        model = Responder(
            respond=lambda m: json.dumps(
                {"contradictions": _pairs(m, ("in March", "in September"))}
            )
        )
        chain = create_consolidation_chain(mem, model, check="all", sleep=False, cells_per_call=8)
        result = chain.invoke({}) if mode == "sync" else await chain.ainvoke({})
        assert result.calls > 1 and all(len(_numbers(c)) <= 8 for c in model.calls)
        shown = {t for c in model.calls for t in _numbers(c)}
        assert len(shown) == 40  # every fact was shown
        assert [{c.a, c.b} for c in result.contradictions] == [{"f1", "f37"}]
    finally:
        mem.close()


async def test_find_contradictions_without_vectors_shows_every_pair():
    facts = [(f"id{i}", f"fact {i}", float(i)) for i in range(30)]
    met: set[frozenset[str]] = set()

    def respond(messages):
        names = list(_numbers(messages))
        met.update(frozenset((a, b)) for a in names for b in names if a != b)
        return json.dumps({"contradictions": _pairs(messages, ("fact 3", "fact 29"))})

    found = find_contradictions(Responder(respond=respond), facts, cells_per_call=8)
    assert len(met) == 30 * 29 // 2
    assert [(c.a, c.b) for c in found] == [("id3", "id29")]
    again = await afind_contradictions(Responder(respond=respond), facts, cells_per_call=8)
    assert [(c.a, c.b) for c in again] == [("id3", "id29")]


async def test_the_chain_streams_events(memory: MagneticMemory):
    chain = create_consolidation_chain(memory, Responder(respond=_monday_vs_tuesday), check="all")
    events = [e["event"] async for e in chain.astream_events({}, version="v2")]
    assert events[0] == "on_chain_start" and events[-1] == "on_chain_end"
    assert "on_chat_model_start" in events


def test_bad_arguments(memory: MagneticMemory):
    llm = Responder(respond=lambda m: "{}")
    with pytest.raises(ValueError, match="check"):
        create_consolidation_chain(memory, llm, check="some")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cells_per_call"):
        create_consolidation_chain(memory, llm, cells_per_call=1)
    with pytest.raises(TypeError, match="MagneticMemory"):
        create_consolidation_chain("memory", llm)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown consolidation setting 'chek'.*max_groups"):
        create_consolidation_chain(memory, llm, chek="all")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="dict"):
        create_consolidation_chain(memory, llm).invoke("go")
    with pytest.raises(TypeError, match="a fact is"):
        find_contradictions(llm, ["just text"])
