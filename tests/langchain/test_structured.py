"""invoke_structured: native structured output, JSON repair, one retry, loud failures."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage
from langchain_ollama import ChatOllama
from pydantic import BaseModel

from magnetic_core import MagneticError
from magnetic_langchain.structured import (
    LLMError,
    LLMUnavailableError,
    StructuredOutputError,
    ainvoke_structured,
    invoke_structured,
    native_structured,
)
from tests.fake_ollama import FakeOllama
from tests.langchain.fakes import ScriptedChatModel, tool_call


class Fact(BaseModel):
    subject: str
    year: int


class RecordingList(FakeListChatModel):
    """A chat model with no structured output that records every conversation it is sent."""

    seen: list[list[Any]] = []

    def _call(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> str:
        self.seen.append(list(messages))
        return super()._call(messages, stop, run_manager, **kw)


class Broken(FakeListChatModel):
    error: Any = RuntimeError("model crashed")

    def _call(self, *args: Any, **kwargs: Any) -> str:
        raise self.error


DAMAGED = [
    '```json\n{"subject": "Ada", "year": 1843}\n```',
    'Sure! Here is the JSON you asked for: {"subject": "Ada", "year": 1843} Hope it helps.',
    "{'subject': 'Ada', 'year': 1843}",
    '{"subject": "Ada", "year": 1843,}',
    '<think>The user wants {"subject": "Bob", "year": 1}? No, Ada.</think>\n{"subject": "Ada",'
    ' "year": 1843}',
]


@pytest.mark.parametrize("answer", DAMAGED)
def test_damaged_json_from_a_model_without_structured_output_is_repaired(answer: str):
    model = RecordingList(responses=[answer], seen=[])
    assert native_structured(model, Fact) is None
    fact = invoke_structured(model, "Who wrote the first program, and when?", Fact)
    assert fact == Fact(subject="Ada", year=1843)
    system = model.seen[0][0]
    assert system.type == "system" and '"year"' in system.content  # the schema was shown


def test_one_retry_shows_the_model_its_parse_error():
    model = RecordingList(responses=["I cannot say.", '{"subject": "Ada", "year": 1843}'], seen=[])
    assert invoke_structured(model, "When?", Fact) == Fact(subject="Ada", year=1843)
    retry = model.seen[1]
    assert retry[-2].content == "I cannot say."
    assert "could not be used" in retry[-1].content and "no JSON object" in retry[-1].content


def test_schema_mismatch_is_retried_then_raised_with_the_raw_answer():
    model = RecordingList(responses=['{"subject": "Ada"}', '{"year": "soon"}'], seen=[])
    with pytest.raises(StructuredOutputError) as info:
        invoke_structured(model, "When?", Fact)
    assert isinstance(info.value, MagneticError)
    assert "year" in str(info.value) and info.value.raw == '{"year": "soon"}'
    assert "after 1 retry" in str(info.value)
    assert "subject" in model.seen[1][-1].content or "year" in model.seen[1][-1].content


def test_plain_llm_is_supported():
    llm = FakeListLLM(responses=["{'subject': 'Ada', 'year': 1843,}"])
    assert invoke_structured(llm, "When?", Fact).year == 1843


def test_tool_calling_model_uses_its_own_structured_output():
    model = ScriptedChatModel([tool_call("Fact", {"subject": "Ada", "year": 1843}, "c1")])
    assert invoke_structured(model, "When?", Fact) == Fact(subject="Ada", year=1843)
    assert model.offered_tools == [["Fact"]]


def test_native_answer_that_does_not_parse_falls_back_to_repair():
    model = ScriptedChatModel([AIMessage("{'subject': 'Ada', 'year': 1843}"), AIMessage("unused")])
    assert invoke_structured(model, "When?", Fact).subject == "Ada"


def test_failing_model_raises_llm_error_naming_the_cause():
    with pytest.raises(LLMError, match="model crashed") as info:
        invoke_structured(Broken(responses=["x"]), "When?", Fact)
    assert not isinstance(info.value, LLMUnavailableError)


def test_unreachable_ollama_raises_llm_unavailable_with_the_fix():
    model = ChatOllama(model="llama3.2", base_url="http://127.0.0.1:9")  # nothing listens
    with pytest.raises(LLMUnavailableError) as info:
        invoke_structured(model, "When?", Fact)
    assert "ollama serve" in str(info.value) and "--ollama-host" in str(info.value)


def _honour_format(body: dict[str, Any]) -> dict[str, Any]:
    # a constrained server answers with exactly the schema it was sent in ``format``
    schema = body["format"]
    assert isinstance(schema, dict) and set(schema["required"]) == {"subject", "year"}
    return {"content": json.dumps({"subject": "Ada", "year": 1843})}


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_chat_ollama_sends_the_json_schema_in_format(mode: str):
    with FakeOllama([_honour_format]) as server:
        model = ChatOllama(model="qwen3:0.6b", base_url=server.url)
        if mode == "sync":
            fact = invoke_structured(model, "When?", Fact)
        else:
            fact = await ainvoke_structured(model, "When?", Fact)
    assert fact == Fact(subject="Ada", year=1843)
    assert server.chat_requests[0]["format"]["title"] == "Fact"


async def test_async_repair_and_retry():
    model = RecordingList(
        responses=["nope", "```\n{'subject': 'Ada', 'year': 1843,}\n```"], seen=[]
    )
    assert (await ainvoke_structured(model, "When?", Fact)).year == 1843
    assert len(model.seen) == 2
