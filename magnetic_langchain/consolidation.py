"""Sleep mode as an LCEL chain: merge converged groups, then let an LLM flag contradictions.

The numeric half (``plan_merges`` / ``apply_merges``) runs in the core. The chain then shows
each merged group's cells to an LLM as a numbered list, asks for pairs that cannot both be
true, and records them with ``mark_contradiction``: nothing is deleted, both cells are kept
and linked to each other with the LLM's explanation.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.language_models import BaseLanguageModel
from langchain_core.output_parsers import PydanticOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import run_in_executor
from pydantic import BaseModel, Field

from magnetic_core import Cell, MagneticError, MagneticMemory
from magnetic_langchain.vectorstores import MagneticVectorStore

__all__ = [
    "ConsolidationResult",
    "ContradictingPair",
    "Contradiction",
    "ContradictionReport",
    "create_consolidation_chain",
]

logger = logging.getLogger(__name__)

_SYSTEM = (
    "You review an agent's long-term memory. The facts below were filed under one topic. "
    "List every pair of facts that cannot both be true at the same time. Facts that add "
    "detail, differ in wording or are about different things are not contradictions. "
    "Return an empty list when there are none.\n\n{format_instructions}"
)
_HUMAN = "Facts:\n{facts}"


class ContradictingPair(BaseModel):
    """Two facts, by their number in the list, that cannot both be true."""

    first: int = Field(description="number of the first fact")
    second: int = Field(description="number of the second fact")
    explanation: str = Field(description="one sentence on why both cannot be true")


class ContradictionReport(BaseModel):
    """What the LLM returns for one group."""

    contradictions: list[ContradictingPair] = Field(
        default_factory=list, description="contradicting pairs; empty when there are none"
    )


@dataclass(frozen=True)
class Contradiction:
    """A recorded contradiction between two cells of one group."""

    cell_a: str
    cell_b: str
    explanation: str
    group_id: str


@dataclass(frozen=True)
class ConsolidationResult:
    """The outcome of one sleep pass.

    Attributes:
        merges: the applied ``(kept_group, absorbed_group, centroid_similarity)`` pairs.
        checked_groups: groups whose cells were shown to the LLM.
        contradictions: contradictions recorded on the cells.
        rejected: LLM answers that could not be used (unparseable, numbers out of range),
            each with the group id; nothing was recorded for them.
    """

    merges: tuple[tuple[str, str, float], ...]
    checked_groups: tuple[str, ...]
    contradictions: tuple[Contradiction, ...]
    rejected: tuple[str, ...]


@dataclass(frozen=True)
class _Review:
    group_id: str
    cells: tuple[Cell, ...]


def create_consolidation_chain(
    memory: MagneticMemory | MagneticVectorStore,
    llm: BaseLanguageModel[Any],
    *,
    merge_threshold: float | None = None,
    check: Literal["merged", "all"] = "merged",
    max_cells: int = 30,
) -> Runnable[Mapping[str, Any] | None, ConsolidationResult]:
    """Build the sleep-mode chain over ``memory`` using ``llm`` to spot contradictions.

    Args:
        memory: the memory (or a :class:`MagneticVectorStore` around one).
        llm: any LangChain chat model or LLM; it must answer in the JSON it is asked for.
        merge_threshold: centroid similarity for merging (default: the memory's config).
            An input ``{"merge_threshold": x}`` overrides it per run.
        check: ``"merged"`` reviews only groups that absorbed another in this run;
            ``"all"`` reviews every group of two or more cells.
        max_cells: at most this many cells per group are shown, closest to the centroid
            first, to bound the prompt.

    Returns:
        A Runnable taking an optional dict and returning a :class:`ConsolidationResult`.

    Example:
        ```python
        from langchain_ollama import ChatOllama

        chain = create_consolidation_chain(memory, ChatOllama(model="llama3.2"))
        result = chain.invoke({})
        for c in result.contradictions:
            print(c.cell_a, "<->", c.cell_b, ":", c.explanation)
        ```
    """
    mem = memory.memory if isinstance(memory, MagneticVectorStore) else memory
    if not isinstance(mem, MagneticMemory):
        raise TypeError(f"expected a MagneticMemory or store, got {type(memory).__name__}")
    if check not in ("merged", "all"):
        raise ValueError(f"check must be 'merged' or 'all', got {check!r}")
    if not isinstance(max_cells, int) or max_cells < 2:
        raise ValueError(f"max_cells must be an integer >= 2, got {max_cells!r}")
    parser = PydanticOutputParser(pydantic_object=ContradictionReport)
    prompt = ChatPromptTemplate.from_messages([("system", _SYSTEM), ("human", _HUMAN)]).partial(
        format_instructions=parser.get_format_instructions()
    )
    reviewer = prompt | llm | parser
    sleeper = _Sleeper(mem, reviewer, merge_threshold, check, max_cells)
    return RunnableLambda(sleeper.run, afunc=sleeper.arun, name="magnetic_consolidation")


class _Sleeper:
    """The steps of one pass; sync and async share everything but the I/O calls."""

    def __init__(
        self,
        memory: MagneticMemory,
        reviewer: Runnable[dict[str, Any], ContradictionReport],
        merge_threshold: float | None,
        check: str,
        max_cells: int,
    ) -> None:
        self.memory = memory
        self.reviewer = reviewer
        self.merge_threshold = merge_threshold
        self.check = check
        self.max_cells = max_cells

    def _threshold(self, inputs: Mapping[str, Any] | None) -> float | None:
        if inputs is not None and not isinstance(inputs, Mapping):
            raise TypeError(f"the chain takes a dict or None, got {type(inputs).__name__}")
        return (inputs or {}).get("merge_threshold", self.merge_threshold)

    def _reviews(self, kept: Sequence[str]) -> list[_Review]:
        if self.check == "all":
            candidates = [g.id for g in self.memory.groups() if g.size >= 2]
        else:
            candidates = list(dict.fromkeys(kept))
        reviews = []
        for gid in candidates:
            try:
                ids = self.memory.group(gid).cell_ids[: self.max_cells]
            except MagneticError:
                continue  # merged again or emptied since; nothing to review
            cells = tuple(self.memory.get(list(ids)))
            if len(cells) >= 2:
                reviews.append(_Review(gid, cells))
        return reviews

    def run(self, inputs: Mapping[str, Any] | None, config: RunnableConfig) -> ConsolidationResult:
        plan = self.memory.plan_merges(self._threshold(inputs))
        kept = self.memory.apply_merges(plan)
        reviews = self._reviews(kept)
        answers = self.reviewer.batch(
            [_prompt_input(r) for r in reviews], config, return_exceptions=True
        )
        found, rejected = _interpret(reviews, answers)
        recorded = []
        for item in found:
            try:
                self.memory.mark_contradiction(item.cell_a, item.cell_b, item.explanation)
                recorded.append(item)
            except MagneticError as e:
                rejected.append(f"{item.group_id}: {e}")
        return _result(plan.pairs, kept, reviews, recorded, rejected)

    async def arun(
        self, inputs: Mapping[str, Any] | None, config: RunnableConfig
    ) -> ConsolidationResult:
        plan = await run_in_executor(None, self.memory.plan_merges, self._threshold(inputs))
        kept = await self.memory.aapply_merges(plan)
        reviews = await run_in_executor(None, self._reviews, kept)
        answers = await self.reviewer.abatch(
            [_prompt_input(r) for r in reviews], config, return_exceptions=True
        )
        found, rejected = _interpret(reviews, answers)
        recorded = []
        for item in found:
            try:
                await self.memory.amark_contradiction(item.cell_a, item.cell_b, item.explanation)
                recorded.append(item)
            except MagneticError as e:
                rejected.append(f"{item.group_id}: {e}")
        return _result(plan.pairs, kept, reviews, recorded, rejected)


def _prompt_input(review: _Review) -> dict[str, Any]:
    facts = "\n".join(f"{i}. {c.text}" for i, c in enumerate(review.cells, start=1))
    return {"facts": facts}


def _interpret(
    reviews: Sequence[_Review], answers: Sequence[ContradictionReport | Exception]
) -> tuple[list[Contradiction], list[str]]:
    """Map the LLM's numbered pairs back to cell ids; anything unusable is rejected."""
    found: list[Contradiction] = []
    rejected: list[str] = []
    for review, answer in zip(reviews, answers):
        if isinstance(answer, Exception):
            logger.warning("contradiction check of group %s failed: %s", review.group_id, answer)
            rejected.append(f"{review.group_id}: {answer}")
            continue
        n = len(review.cells)
        for pair in answer.contradictions:
            if not (1 <= pair.first <= n and 1 <= pair.second <= n) or pair.first == pair.second:
                rejected.append(
                    f"{review.group_id}: pair ({pair.first}, {pair.second}) is not two of "
                    f"the {n} facts"
                )
                continue
            a, b = review.cells[pair.first - 1], review.cells[pair.second - 1]
            found.append(Contradiction(a.id, b.id, pair.explanation.strip(), review.group_id))
    return found, rejected


def _result(
    pairs: Sequence[tuple[str, str, float]],
    kept: Sequence[str],
    reviews: Sequence[_Review],
    recorded: Sequence[Contradiction],
    rejected: Sequence[str],
) -> ConsolidationResult:
    applied = tuple(p for p in pairs if p[0] in set(kept))
    return ConsolidationResult(
        merges=applied,
        checked_groups=tuple(r.group_id for r in reviews),
        contradictions=tuple(recorded),
        rejected=tuple(rejected),
    )
