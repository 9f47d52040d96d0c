"""Reading a small model's JSON answer: what it wraps around the JSON, what it gets wrong."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from magnetic_core._sleep.llm_json import (
    LLMError,
    Repair,
    StructuredOutputError,
    is_unreachable,
    parse_model_json,
    strip_reasoning,
)
from magnetic_core.errors import MagneticError


class Verdict(BaseModel):
    contradicts: bool
    pairs: list[list[int]] = []


@pytest.mark.parametrize(
    "answer",
    [
        '{"contradicts": true, "pairs": [[1, 2]]}',
        'Sure! Here it is:\n```json\n{"contradicts": true, "pairs": [[1, 2]]}\n```\nHope it helps.',
        "{'contradicts': True, 'pairs': [[1, 2]]}",  # Python literals and single quotes
        '{"contradicts": true, "pairs": [[1, 2],],}',  # trailing commas
        '<think>1 says {Monday}, 2 {Tuesday}</think>{"contradicts": true, "pairs": [[1, 2]]}',
    ],
)
def test_what_small_models_do_to_json_is_repaired(answer: str):
    assert parse_model_json(answer, Verdict) == Verdict(contradicts=True, pairs=[[1, 2]])


def test_reasoning_blocks_are_dropped_before_parsing():
    assert strip_reasoning("<think>a {b}</think>  {}").strip() == "{}"


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("", "empty answer"),
        ("I cannot find any contradiction.", "no JSON object"),
        ('{"contradicts": "maybe so"}', "does not match the schema Verdict"),
    ],
)
def test_an_unusable_answer_names_what_was_wrong(answer: str, says: str):
    with pytest.raises(StructuredOutputError, match=says) as info:
        parse_model_json(answer, Verdict)
    assert isinstance(info.value, LLMError) and isinstance(info.value, MagneticError)
    assert info.value.raw == answer  # the raw answer is kept for the report


def test_repair_asks_again_once_then_gives_up_with_a_hint():
    repair = Repair(Verdict, retries=1)
    assert repair.parse("no idea") is None
    assert "no JSON object" in repair.feedback and "Verdict" in repair.feedback
    with pytest.raises(StructuredOutputError, match=r"after 1 retry") as info:
        repair.parse("still no idea")
    assert "structured output" in (info.value.hint or "")
    assert Repair(Verdict, retries=0).parse('{"contradicts": false}') == Verdict(contradicts=False)


def test_a_refused_connection_counts_as_unreachable_and_a_bad_answer_does_not():
    assert is_unreachable(ConnectionRefusedError(111, "Connection refused"))
    try:  # a client library's own error raised from the refused connection
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as cause:
            raise RuntimeError("request failed") from cause
    except RuntimeError as wrapped:
        assert is_unreachable(wrapped)
    assert not is_unreachable(StructuredOutputError("bad json"))
    assert not is_unreachable(ValueError("something else"))
