"""consolidate() with LlamaIndex LLMs: JSON repair, native structured output, loud failures."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import QueryBundle
from pydantic import Field

from magnetic_core import MagneticMemory, MemoryConfig
from magnetic_core._sleep.llm_json import LLMError
from magnetic_core._sleep.review import ContradictingPair, ContradictionReport
from magnetic_llamaindex import MagneticRetriever
from magnetic_llamaindex.consolidation import aconsolidate, consolidate, find_contradictions


class Scripted(CustomLLM):
    """A LlamaIndex LLM without structured output that answers ``respond(prompt)``."""

    respond: Callable[[str], str]
    prompts: list[str] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text=self.respond(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        yield self.complete(prompt)


class Native(Scripted):
    """An LLM class with its own structured_predict (as LlamaIndex's Ollama has)."""

    structured_calls: int = 0

    def structured_predict(self, output_cls, prompt, llm_kwargs=None, **prompt_args):
        self.structured_calls += 1
        text = prompt.format_messages()[-1].content
        return output_cls.model_validate(json.loads(self.respond(text)))


def _numbers(prompt: str) -> dict[str, int]:
    listing = prompt.rsplit("Facts:\n", 1)[1]
    out = {}
    for line in listing.splitlines():
        head, _, text = line.partition(". ")
        if head.isdigit():
            out[text.strip()] = int(head)
    return out


def _flag(a: str, b: str) -> Callable[[str], str]:
    def respond(prompt: str) -> str:
        n = _numbers(prompt)
        na = next((v for t, v in n.items() if a in t), None)
        nb = next((v for t, v in n.items() if b in t), None)
        pairs = [ContradictingPair(first=na, second=nb, explanation=f"{a} or {b}?").model_dump()]
        return json.dumps({"contradictions": pairs if na and nb else []})

    return respond


class _Explicit:
    name, dim = "explicit", 4

    def embed_documents(self, texts):
        raise AssertionError

    def embed_query(self, text):
        raise AssertionError


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MagneticMemory]:
    mem = MagneticMemory(
        path=str(tmp_path / "m"), embedder=_Explicit(), config=MemoryConfig(join_threshold=0.5)
    )
    mem.add(["The flight leaves at 9 am."], ids=["old"], vectors=[[1, 0.1, 0, 0]])
    time.sleep(0.01)
    mem.add(["The flight leaves at 11 am."], ids=["new"], vectors=[[1, 0, 0.1, 0]])
    yield mem
    mem.close()


def test_consolidate_repairs_json_and_records_supersession(memory: MagneticMemory):
    def damaged(prompt: str) -> str:
        return "<think>compare times</think> Here: " + _flag("9 am", "11 am")(prompt).replace(
            '"', "'"
        )

    llm = Scripted(respond=damaged)
    result = consolidate(memory, llm, check="all")
    assert result.ok and [(c.a, c.b) for c in result.contradictions] == [("old", "new")]
    assert result.superseded == (("old", "new"),)
    old, new = memory.get(["old", "new"])
    assert old.superseded_by == "new" and new.superseded_by is None
    assert "JSON schema" in llm.prompts[0]  # the schema was shown

    retriever = MagneticRetriever(memory, similarity_top_k=2)
    nodes = retriever.retrieve(QueryBundle("flight", embedding=[1.0, 0.05, 0.05, 0.0]))
    meta = {n.node.node_id: n.node.metadata for n in nodes}
    assert meta["old"]["magnetic_superseded_by"] == "new"
    assert meta["new"]["magnetic_supersedes"] == ["old"]
    assert meta["new"]["magnetic_contradictions"][0]["other"] == "old"
    assert "magnetic_superseded_by" not in nodes[0].node.excluded_llm_metadata_keys


def test_native_structured_output_is_used_first(memory: MagneticMemory):
    llm = Native(respond=_flag("9 am", "11 am"))
    result = consolidate(memory, llm, check="all", sleep=False)
    assert llm.structured_calls == 1 and llm.prompts == []
    assert len(result.contradictions) == 1


async def test_aconsolidate_and_a_retry_after_a_parse_error(memory: MagneticMemory):
    answers = iter(["not json at all", json.dumps(ContradictionReport().model_dump())])
    llm = Scripted(respond=lambda prompt: next(answers))
    result = await aconsolidate(memory, llm, check="all")
    assert result.ok and result.contradictions == () and len(llm.prompts) == 2
    assert "could not be used" in llm.prompts[1]


def test_a_failing_llm_is_reported(memory: MagneticMemory):
    def crash(prompt: str) -> str:
        raise RuntimeError("model crashed")

    result = consolidate(memory, Scripted(respond=crash), check="all")
    assert not result.ok and "model crashed" in result.failures[0]
    with pytest.raises(LLMError, match="model crashed"):
        find_contradictions(Scripted(respond=crash), [("a", "x"), ("b", "y")])


def test_find_contradictions_keeps_braces_in_facts():
    facts = [("a", "config is {debug: true}"), ("b", "config is {debug: false}")]
    llm = Native(respond=_flag("true", "false"))
    found = find_contradictions(llm, facts)
    assert [(c.a, c.b) for c in found] == [("a", "b")]


async def test_a_misspelt_setting_is_named_before_anything_runs(memory: MagneticMemory):
    before = memory.stats()
    with pytest.raises(TypeError, match="unknown consolidation setting 'max_group'"):
        consolidate(memory, Native(respond=_flag("a", "b")), max_group=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="max_groups"):
        await aconsolidate(memory, Native(respond=_flag("a", "b")), max_group=3)  # type: ignore[call-arg]
    assert memory.stats() == before  # no pass ran
