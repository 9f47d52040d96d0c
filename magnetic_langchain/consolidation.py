"""Sleep mode as an LCEL chain: the numeric pass, then an LLM looks for contradictions.

The chain first runs the core's consolidation pass (:meth:`MagneticMemory.sleep`), then
shows the facts of the groups that changed to an LLM, in calls of at most
``cells_per_call`` facts chosen so that every pair of close facts meets in some call
(:mod:`magnetic_core._sleep.review`). Answers come through :func:`invoke_structured` (the
model's own structured output, else repaired JSON and one retry). Each contradiction is
recorded with :meth:`MagneticMemory.mark_contradiction`: both cells are kept and linked,
and where their timestamps differ the newer one supersedes the older. A model that
fails or cannot be reached is reported in the result (``failures``, ``ok``), never
passed over silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseLanguageModel
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from magnetic_core import MagneticMemory
from magnetic_core._sleep.consolidate import (
    ConsolidationResult,
    ConsolidationSettings,
    Consolidator,
    aask_each,
    as_facts,
    ask_each,
    raise_failures,
)
from magnetic_core._sleep.review import (
    Call,
    ContradictingPair,
    Contradiction,
    ContradictionReport,
    plan_calls,
)
from magnetic_core.errors import WrongTypeError
from magnetic_langchain.structured import ainvoke_structured, invoke_structured
from magnetic_langchain.vectorstores import MagneticVectorStore

__all__ = [
    "ConsolidationResult",
    "ConsolidationSettings",
    "ContradictingPair",
    "Contradiction",
    "ContradictionReport",
    "afind_contradictions",
    "create_consolidation_chain",
    "find_contradictions",
]

if TYPE_CHECKING:
    from typing_extensions import Unpack


def _asker(llm: BaseLanguageModel[Any], retries: int, config: RunnableConfig | None):
    def ask(call: Call) -> ContradictionReport:
        return invoke_structured(
            llm, call.messages, ContradictionReport, retries=retries, config=config
        )

    return ask


def _aasker(llm: BaseLanguageModel[Any], retries: int, config: RunnableConfig | None):
    async def ask(call: Call) -> ContradictionReport:
        return await ainvoke_structured(
            llm, call.messages, ContradictionReport, retries=retries, config=config
        )

    return ask


def find_contradictions(
    llm: BaseLanguageModel[Any],
    facts: Sequence[Any],
    *,
    cells_per_call: int = 24,
    vectors: Any = None,
    neighbours: int = 4,
    retries: int = 1,
    config: RunnableConfig | None = None,
) -> list[Contradiction]:
    """Ask ``llm`` which of ``facts`` contradict each other, without truncating any.

    Args:
        llm: a LangChain chat model or LLM.
        facts: ``(id, text)`` or ``(id, text, timestamp)`` items.
        cells_per_call: facts shown per call; more facts are spread over several calls.
        vectors: their unit vectors: only close pairs must meet in a call (fewer calls).
            Without vectors every pair meets in some call.
        neighbours: near neighbours per fact that must be shown with it.
        retries: parse-error retries per call.
        config: RunnableConfig for the model calls.

    Returns:
        The contradictions, each with ids ``a``, ``b`` and an ``explanation``.

    Raises:
        LLMUnavailableError: the model could not be reached.
        LLMError: a call failed (the message names how many).

    Example:
        ```python
        found = find_contradictions(llm, [("a", "The meeting is on Monday."),
                                          ("b", "The meeting is on Tuesday.")])
        ```
    """
    calls = plan_calls(
        as_facts(facts), cells_per_call=cells_per_call, vectors=vectors, neighbours=neighbours
    )
    return raise_failures(calls, ask_each(calls, _asker(llm, retries, config))).contradictions


async def afind_contradictions(
    llm: BaseLanguageModel[Any], facts: Sequence[Any], **kwargs: Any
) -> list[Contradiction]:
    """Async :func:`find_contradictions`."""
    config = kwargs.pop("config", None)
    retries = kwargs.pop("retries", 1)
    calls = plan_calls(as_facts(facts), **kwargs)
    answers = await aask_each(calls, _aasker(llm, retries, config))
    return raise_failures(calls, answers).contradictions


def create_consolidation_chain(
    memory: MagneticMemory | MagneticVectorStore,
    llm: BaseLanguageModel[Any],
    *,
    retries: int = 1,
    **settings: Unpack[ConsolidationSettings],
) -> Runnable[Mapping[str, Any] | None, ConsolidationResult]:
    """Build the sleep-mode chain over ``memory`` using ``llm`` to spot contradictions.

    Args:
        memory: the memory (or a :class:`MagneticVectorStore` around one).
        llm: any LangChain chat model or LLM (``ChatOllama`` uses its JSON-schema format).
        retries: parse-error retries per call.
        **settings: what a run reviews and how: ``check`` (``"changed"``, ``"merged"``
            or ``"all"``), ``max_groups``, ``cells_per_call``, ``neighbours``, ``sleep``
            (run the numeric pass first) and ``merge_threshold``; their meaning and
            defaults are listed on ``ConsolidationSettings``. An input
            ``{"merge_threshold": x}`` overrides the threshold per run.

    Returns:
        A Runnable taking an optional dict and returning a :class:`ConsolidationResult`.

    Example:
        ```python
        from langchain_ollama import ChatOllama

        chain = create_consolidation_chain(memory, ChatOllama(model="llama3.2"), check="all")
        result = chain.invoke({})
        if not result.ok:
            print("the model failed:", result.failures)
        for c in result.contradictions:
            print(c.a, "<->", c.b, ":", c.explanation)
        ```
    """
    return _runnable(Consolidator.of(memory, **settings), llm, retries)


def _runnable(
    worker: Consolidator, llm: BaseLanguageModel[Any], retries: int
) -> Runnable[Mapping[str, Any] | None, ConsolidationResult]:
    """The chain: one run of ``worker`` per input, asking ``llm`` (sync and async)."""

    def threshold(inputs: Mapping[str, Any] | None) -> float | None:
        if inputs is not None and not isinstance(inputs, Mapping):
            raise WrongTypeError(f"the chain takes a dict or None, got {type(inputs).__name__}")
        return (inputs or {}).get("merge_threshold")

    def run(inputs: Mapping[str, Any] | None, config: RunnableConfig) -> ConsolidationResult:
        return worker.run(_asker(llm, retries, config), threshold(inputs))

    async def arun(inputs: Mapping[str, Any] | None, config: RunnableConfig) -> ConsolidationResult:
        return await worker.arun(_aasker(llm, retries, config), threshold(inputs))

    return RunnableLambda(run, afunc=arun, name="magnetic_consolidation")
