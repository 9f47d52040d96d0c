"""Sleep mode for LlamaIndex users: the same consolidation run, with a LlamaIndex LLM.

:func:`consolidate` runs the core's numeric pass, then shows the changed groups' facts to
``llm`` in calls that cover every close pair, and records contradictions (the newer fact
superseding the older), exactly as the LangChain chain does; only the model call differs.
Answers come through the model's own structured output when it has one (a function
calling model, or an LLM class with its own ``structured_predict`` such as LlamaIndex's
Ollama, which passes the JSON schema as ``format``), else from its chat text, repaired
(:func:`magnetic_core._sleep.llm_json.parse_model_json`) and retried once with the parse error.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from llama_index.core.llms import LLM, ChatMessage
from llama_index.core.prompts import ChatPromptTemplate
from pydantic import BaseModel, ValidationError

from magnetic_core._sleep.consolidate import (
    ConsolidationResult,
    ConsolidationSettings,
    Consolidator,
    aask_each,
    as_facts,
    ask_each,
    raise_failures,
)
from magnetic_core._sleep.llm_json import (
    LLMError,
    LLMUnavailableError,
    Repair,
    format_instructions,
    is_unreachable,
)
from magnetic_core._sleep.review import Call, Contradiction, ContradictionReport, plan_calls
from magnetic_core.memory import MagneticMemory

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "ConsolidationResult",
    "ConsolidationSettings",
    "Contradiction",
    "aconsolidate",
    "afind_contradictions",
    "consolidate",
    "find_contradictions",
    "predict_structured",
]

logger = logging.getLogger(__name__)

S = TypeVar("S", bound=BaseModel)


def _has_native(llm: LLM) -> bool:
    # LlamaIndex wraps methods per class, so compare where they were defined, not identity
    own = getattr(type(llm).structured_predict, "__qualname__", "") != "LLM.structured_predict"
    return own or bool(getattr(llm.metadata, "is_function_calling_model", False))


def _messages(call_messages: Sequence[tuple[str, str]]) -> list[ChatMessage]:
    return [
        ChatMessage(role=role if role != "human" else "user", content=text)
        for role, text in call_messages
    ]


def _template(chat: list[ChatMessage]) -> ChatPromptTemplate:
    # facts are data, not template variables: braces in them must survive formatting
    escaped = [
        ChatMessage(role=m.role, content=(m.content or "").replace("{", "{{").replace("}", "}}"))
        for m in chat
    ]
    return ChatPromptTemplate(message_templates=escaped)


def _error(e: Exception) -> LLMError:
    if isinstance(e, LLMError):
        return e
    if is_unreachable(e):
        return LLMUnavailableError(
            f"the language model could not be reached: {e}",
            hint="start the model's server (for Ollama: `ollama serve`) or fix its base_url",
        )
    return LLMError(f"the language model failed: {type(e).__name__}: {e}")


def predict_structured(
    llm: LLM, messages: Sequence[tuple[str, str]], schema: type[S], *, retries: int = 1
) -> S:
    """A LlamaIndex LLM's answer as an instance of ``schema`` (see the module docstring).

    Raises:
        LLMUnavailableError: the model could not be reached.
        LLMError: the model raised.
        StructuredOutputError: the answer could not be repaired into ``schema``.
    """
    chat = _messages(messages)
    if _has_native(llm):
        try:
            return llm.structured_predict(schema, _template(chat))
        except (ValidationError, ValueError) as e:
            logger.info("native structured output failed (%s); parsing the chat text", e)
        except Exception as e:
            raise _error(e) from e
    chat = [ChatMessage(role="system", content=format_instructions(schema)), *chat]
    repair = Repair(schema, retries)
    while (parsed := repair.parse(raw := _answer(llm.chat, chat))) is None:
        chat = _with_retry(chat, raw, repair)
    return parsed


def _with_retry(chat: list[ChatMessage], raw: str, repair: Repair[Any]) -> list[ChatMessage]:
    """The conversation again, with the unusable answer and the parse error shown to the model."""
    return [
        *chat,
        ChatMessage(role="assistant", content=raw or "(empty answer)"),
        ChatMessage(role="user", content=repair.feedback),
    ]


def _answer(chat_call: Any, chat: list[ChatMessage]) -> str:
    """The text of one chat call; a failure of the model is an LLMError."""
    try:
        return chat_call(chat).message.content or ""
    except Exception as e:
        raise _error(e) from e


async def _aanswer(llm: LLM, chat: list[ChatMessage]) -> str:
    """Async :func:`_answer`."""
    try:
        return (await llm.achat(chat)).message.content or ""
    except Exception as e:
        raise _error(e) from e


async def apredict_structured(
    llm: LLM, messages: Sequence[tuple[str, str]], schema: type[S], *, retries: int = 1
) -> S:
    """Async :func:`predict_structured`."""
    chat = _messages(messages)
    if _has_native(llm):
        try:
            return await llm.astructured_predict(schema, _template(chat))
        except (ValidationError, ValueError) as e:
            logger.info("native structured output failed (%s); parsing the chat text", e)
        except Exception as e:
            raise _error(e) from e
    chat = [ChatMessage(role="system", content=format_instructions(schema)), *chat]
    repair = Repair(schema, retries)
    while (parsed := repair.parse(raw := await _aanswer(llm, chat))) is None:
        chat = _with_retry(chat, raw, repair)
    return parsed


def consolidate(
    memory: MagneticMemory | Any,
    llm: LLM,
    *,
    retries: int = 1,
    **settings: Unpack[ConsolidationSettings],
) -> ConsolidationResult:
    """Run one consolidation pass over ``memory`` with a LlamaIndex ``llm``.

    Args:
        memory: a :class:`~magnetic_core.MagneticMemory` or this package's vector store.
        llm: any LlamaIndex LLM (e.g. ``llama_index.llms.ollama.Ollama``).
        retries: parse-error retries per call.
        **settings: ``check``, ``max_groups``, ``cells_per_call``, ``neighbours``,
            ``sleep``, ``merge_threshold``; their meaning and defaults are listed on
            ``magnetic_llamaindex.consolidation.ConsolidationSettings`` (the same as
            LangChain's chain).

    Returns:
        A :class:`~magnetic_core._sleep.consolidate.ConsolidationResult`; ``ok`` is False when a
        model call failed (the failures are listed, nothing is hidden).

    Example:
        ```python
        from llama_index.llms.ollama import Ollama

        result = consolidate(store.memory, Ollama(model="llama3.2"), check="all")
        print(result.contradictions, result.failures)
        ```
    """
    worker = Consolidator.of(memory, **settings)
    return worker.run(
        lambda call: predict_structured(llm, call.messages, ContradictionReport, retries=retries)
    )


async def aconsolidate(
    memory: MagneticMemory | Any,
    llm: LLM,
    *,
    retries: int = 1,
    **settings: Unpack[ConsolidationSettings],
) -> ConsolidationResult:
    """Async :func:`consolidate`."""
    worker = Consolidator.of(memory, **settings)

    async def ask(call: Call) -> ContradictionReport:
        return await apredict_structured(llm, call.messages, ContradictionReport, retries=retries)

    return await worker.arun(ask)


def find_contradictions(
    llm: LLM, facts: Sequence[Any], *, retries: int = 1, **budget: Any
) -> list[Contradiction]:
    """Contradicting pairs among ``(id, text[, timestamp])`` facts, with a LlamaIndex LLM.

    ``budget``: ``cells_per_call``, ``vectors``, ``neighbours`` (see the core's review).
    """
    calls = plan_calls(as_facts(facts), **budget)
    answers = ask_each(
        calls, lambda c: predict_structured(llm, c.messages, ContradictionReport, retries=retries)
    )
    return raise_failures(calls, answers).contradictions


async def afind_contradictions(
    llm: LLM, facts: Sequence[Any], *, retries: int = 1, **budget: Any
) -> list[Contradiction]:
    """Async :func:`find_contradictions`."""
    calls = plan_calls(as_facts(facts), **budget)

    async def ask(call: Call) -> ContradictionReport:
        return await apredict_structured(llm, call.messages, ContradictionReport, retries=retries)

    return raise_failures(calls, await aask_each(calls, ask)).contradictions
