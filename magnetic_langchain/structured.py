"""Structured answers from any LangChain model, including small local ones.

:func:`invoke_structured` asks ``llm`` for an instance of a pydantic schema:

1. through the model's own mechanism when it has one (``with_structured_output``; for
   ``ChatOllama`` its JSON-schema ``format``, so the server constrains decoding);
2. otherwise (or when the native answer does not parse) by instructing the model to answer
   in JSON and repairing what it returns (``<think>`` blocks, code fences, prose around the
   JSON, single quotes, trailing commas);
3. when that still fails, by showing the model its parse error and asking once more
   (``retries`` times).

It raises :class:`LLMUnavailableError` when the model cannot be reached and
:class:`StructuredOutputError` when its answer cannot be repaired, both
:class:`~magnetic_core.MagneticError` subclasses with a hint for the fix.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel, BaseLanguageModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    convert_to_messages,
)
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel

from magnetic_core._sleep.llm_json import (
    LLMError,
    LLMUnavailableError,
    Repair,
    StructuredOutputError,
    format_instructions,
    is_unreachable,
)

__all__ = [
    "LLMError",
    "LLMUnavailableError",
    "StructuredOutputError",
    "ainvoke_structured",
    "invoke_structured",
    "native_structured",
]

logger = logging.getLogger(__name__)

S = TypeVar("S", bound=BaseModel)

_UNREACHABLE_HINT = (
    "start the model's server (for Ollama: `ollama serve`, then `ollama pull <model>`) or "
    "point at the right one (`--ollama-host HOST:PORT`, OLLAMA_HOST)"
)


def native_structured(llm: BaseLanguageModel[Any], schema: type[BaseModel]) -> Runnable | None:
    """The model's own structured-output runnable (with raw output), or None if it has none.

    ``ChatOllama`` gets ``method="json_schema"`` (the schema goes into Ollama's ``format``).
    A chat model whose ``with_structured_output`` needs tool calling it does not implement
    (``bind_tools`` left to the base class) has none.
    """
    if not isinstance(llm, BaseChatModel):
        return None
    kind = type(llm)
    if (
        kind.with_structured_output is BaseChatModel.with_structured_output
        and kind.bind_tools is BaseChatModel.bind_tools
    ):
        return None
    kwargs: dict[str, Any] = {"include_raw": True}
    if kind.__name__ == "ChatOllama":
        kwargs["method"] = "json_schema"
    try:
        return llm.with_structured_output(schema, **kwargs)
    except NotImplementedError:
        return None


def invoke_structured(
    llm: BaseLanguageModel[Any],
    messages: Any,
    schema: type[S],
    *,
    retries: int = 1,
    config: RunnableConfig | None = None,
) -> S:
    """Ask ``llm`` for an answer that is an instance of ``schema``.

    Args:
        llm: a LangChain chat model or LLM.
        messages: anything ``convert_to_messages`` takes: a string, ``(role, text)``
            tuples, message objects.
        schema: the pydantic model of the answer.
        retries: how many times to show the model its parse error and ask again.
        config: a RunnableConfig passed to every model call (callbacks, tags).

    Returns:
        A validated instance of ``schema``.

    Raises:
        LLMUnavailableError: the model's server could not be reached.
        LLMError: the model raised.
        StructuredOutputError: the answer could not be repaired into ``schema``.

    Example:
        ```python
        from langchain_ollama import ChatOllama
        from pydantic import BaseModel

        class City(BaseModel):
            name: str
            country: str

        city = invoke_structured(ChatOllama(model="llama3.2"), "Capital of France?", City)
        ```
    """
    conversation = _as_messages(messages)
    native = native_structured(llm, schema)
    if native is not None:
        answer = _call(native, conversation, config)
        parsed, raw = _from_native(answer, schema)
        if parsed is not None:
            return parsed
        instructed = _instructed(conversation, schema)
        return _with_retries(llm, instructed, schema, retries, config, first_raw=raw)
    return _with_retries(llm, _instructed(conversation, schema), schema, retries, config)


async def ainvoke_structured(
    llm: BaseLanguageModel[Any],
    messages: Any,
    schema: type[S],
    *,
    retries: int = 1,
    config: RunnableConfig | None = None,
) -> S:
    """Async twin of :func:`invoke_structured`."""
    conversation = _as_messages(messages)
    native = native_structured(llm, schema)
    first_raw: str | None = None
    if native is not None:
        answer = await _acall(native, conversation, config)
        parsed, first_raw = _from_native(answer, schema)
        if parsed is not None:
            return parsed
    conversation = _instructed(conversation, schema)
    repair = Repair(schema, retries)
    raw = first_raw if first_raw is not None else _text(await _acall(llm, conversation, config))
    while (parsed := repair.parse(raw)) is None:
        conversation = _corrected(conversation, raw, repair)
        raw = _text(await _acall(llm, conversation, config))
    return parsed


def _with_retries(
    llm: BaseLanguageModel[Any],
    conversation: list[BaseMessage],
    schema: type[S],
    retries: int,
    config: RunnableConfig | None,
    *,
    first_raw: str | None = None,
) -> S:
    repair = Repair(schema, retries)
    raw = first_raw if first_raw is not None else _text(_call(llm, conversation, config))
    while (parsed := repair.parse(raw)) is None:
        conversation = _corrected(conversation, raw, repair)
        raw = _text(_call(llm, conversation, config))
    return parsed


def _as_messages(messages: Any) -> list[BaseMessage]:
    if isinstance(messages, str):
        return [HumanMessage(messages)]
    return list(convert_to_messages(messages))


def _instructed(conversation: list[BaseMessage], schema: type[BaseModel]) -> list[BaseMessage]:
    """The conversation with the JSON instruction added to (or as) the system message."""
    instruction = format_instructions(schema)
    if conversation and isinstance(conversation[0], SystemMessage):
        first = conversation[0]
        merged = SystemMessage(f"{_text(first)}\n\n{instruction}")
        return [merged, *conversation[1:]]
    return [SystemMessage(instruction), *conversation]


def _corrected(
    conversation: Sequence[BaseMessage], raw: str, repair: Repair[Any]
) -> list[BaseMessage]:
    """The conversation plus the model's failed answer and what was wrong with it."""
    return [*conversation, AIMessage(raw or "(empty answer)"), HumanMessage(repair.feedback)]


def _from_native(answer: Any, schema: type[S]) -> tuple[S | None, str]:
    """The parsed value of an ``include_raw`` answer, or None and the raw text to repair."""
    if isinstance(answer, schema):
        return answer, ""
    if not isinstance(answer, dict):
        return None, _text(answer)
    parsed = answer.get("parsed")
    if isinstance(parsed, schema):
        return parsed, ""
    raw = answer.get("raw")
    text = _text(raw)
    if not text and isinstance(raw, AIMessage) and raw.tool_calls:
        import json

        text = json.dumps(raw.tool_calls[0].get("args", {}))
    if answer.get("parsing_error") is not None:
        logger.info("native structured output did not parse: %s", answer["parsing_error"])
    return None, text


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseMessage):
        content = value.content
        if isinstance(content, str):
            return content
        parts = [c if isinstance(c, str) else c.get("text", "") for c in content]
        return "".join(p for p in parts if isinstance(p, str))
    return "" if value is None else str(value)


def _call(runnable: Runnable, conversation: list[BaseMessage], config: RunnableConfig | None):
    try:
        return runnable.invoke(conversation, config)
    except Exception as e:
        raise _llm_error(e) from e


async def _acall(
    runnable: Runnable, conversation: list[BaseMessage], config: RunnableConfig | None
):
    try:
        return await runnable.ainvoke(conversation, config)
    except Exception as e:
        raise _llm_error(e) from e


def _llm_error(error: Exception) -> LLMError:
    if isinstance(error, LLMError):
        return error
    if is_unreachable(error):
        return LLMUnavailableError(
            f"the language model could not be reached: {error}", hint=_UNREACHABLE_HINT
        )
    return LLMError(
        f"the language model failed: {type(error).__name__}: {error}",
        hint="check the model name and that the model runs (e.g. `ollama run <model>`)",
    )
