"""One consolidation run, framework-free: the numeric pass, the review, the recording.

The adapters supply only the model call, as a function from a :class:`~.review.Call`
to a :class:`~.review.ContradictionReport` (sync or async). A run:

1. the numeric pass (``memory.sleep()``), unless turned off;
2. the groups to review (changed by the pass, merged, or all), largest first, at most
   ``max_groups`` (the rest are reported as skipped);
3. the calls covering each group's close pairs (:func:`~magnetic_core._sleep.review.plan_calls`);
4. the answers: a model found unreachable stops the run's remaining calls (reported once);
5. each contradiction recorded with ``mark_contradiction`` (the newer fact supersedes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from magnetic_core._sleep.llm_json import LLMError, LLMUnavailableError
from magnetic_core._sleep.review import (
    Call,
    Contradiction,
    ContradictionReport,
    Fact,
    Review,
    conclude,
    plan_calls,
)
from magnetic_core.errors import InvalidInputError, MagneticError, WrongTypeError
from magnetic_core.types import SleepReport

if TYPE_CHECKING:  # only annotations use it (Python 3.10 has no typing.Unpack)
    from typing_extensions import Unpack

__all__ = [
    "Check",
    "ConsolidationResult",
    "ConsolidationSettings",
    "Consolidator",
    "aask_each",
    "ask_each",
    "raise_failures",
]

logger = logging.getLogger(__name__)

Answer = ContradictionReport | BaseException | None
Ask = Callable[[Call], ContradictionReport]
AAsk = Callable[[Call], Awaitable[ContradictionReport]]
Check = Literal["changed", "merged", "all"]
CHECKS = ("changed", "merged", "all")


class ConsolidationSettings(TypedDict, total=False):
    """What one consolidation run reviews, and how; the same keywords in both adapters.

    Attributes:
        check: ``"changed"`` (default) reviews groups whose membership the pass changed;
            ``"merged"`` only groups that absorbed another; ``"all"`` every group of two
            or more cells.
        max_groups: groups reviewed per run, largest first (default 50); the rest are
            reported in ``skipped_groups`` (run again to review them).
        cells_per_call: facts per model call (default 24, at least 2); larger groups are
            spread over several calls so that every pair of close facts meets in one.
        neighbours: near neighbours per fact that must share a call with it (default 4).
        sleep: run the numeric pass (``mem.sleep()``) first (default True).
        merge_threshold: the pass's merge threshold (default: fitted to the data).
    """

    check: Check
    max_groups: int
    cells_per_call: int
    neighbours: int
    sleep: bool
    merge_threshold: float | None


@dataclass(frozen=True)
class ConsolidationResult:
    """The outcome of one consolidation run.

    Attributes:
        report: the numeric pass's report (None when the pass was turned off).
        merges: ``(kept_group, absorbed_group, centroid_similarity)`` of the pass.
        checked_groups: groups whose facts were shown to the LLM.
        contradictions: contradictions recorded on the cells.
        superseded: ``(older, newer)`` cell ids where the newer one now supersedes.
        rejected: answers that could not be used (numbers out of range, unknown cells).
        failures: model calls that failed (unreachable, raised, unrepairable output).
        skipped_groups: groups left for a later run by the ``max_groups`` budget.
        calls: model calls made.
    """

    report: SleepReport | None = None
    merges: tuple[tuple[str, str, float], ...] = ()
    checked_groups: tuple[str, ...] = ()
    contradictions: tuple[Contradiction, ...] = ()
    superseded: tuple[tuple[str, str], ...] = ()
    rejected: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()
    skipped_groups: tuple[str, ...] = ()
    calls: int = 0

    @property
    def ok(self) -> bool:
        """Whether every model call succeeded."""
        return not self.failures


def ask_each(calls: Sequence[Call], ask: Ask) -> list[Answer]:
    """Each call's answer or error; after an unreachable model the rest are None."""
    answers: list[Answer] = []
    for call in calls:
        try:
            answers.append(ask(call))
        except LLMError as e:
            if _failed(calls, answers, e):
                break
    return answers


async def aask_each(calls: Sequence[Call], ask: AAsk) -> list[Answer]:
    """Async :func:`ask_each`."""
    answers: list[Answer] = []
    for call in calls:
        try:
            answers.append(await ask(call))
        except LLMError as e:
            if _failed(calls, answers, e):
                break
    return answers


def _failed(calls: Sequence[Call], answers: list[Answer], error: LLMError) -> bool:
    """Record the next call's failure; True (stop, the rest answer None) if unreachable."""
    call = calls[len(answers)]
    answers.append(error)
    if isinstance(error, LLMUnavailableError):
        answers.extend([None] * (len(calls) - len(answers)))
        return True
    logger.warning("contradiction check of %s failed: %s", call.group_id, error)
    return False


def raise_failures(calls: Sequence[Call], answers: list[Answer]) -> Review:
    """Conclude the answers, raising the first failure (as an LLMError) if any call failed."""
    review = conclude(calls, answers)
    errors = [a for a in answers if isinstance(a, BaseException)]
    if errors:
        first = errors[0]
        kind = LLMUnavailableError if isinstance(first, LLMUnavailableError) else LLMError
        hint = first.hint if isinstance(first, MagneticError) else None
        raise kind(
            f"{len(errors)} of {len(calls)} contradiction checks failed; first: {first}",
            hint=hint,
        ) from first
    return review


def as_facts(items: Sequence[Any]) -> list[Fact]:
    """``(id, text)`` / ``(id, text, timestamp)`` items (or Facts) as Facts."""
    facts = []
    for item in items:
        if isinstance(item, Fact):
            facts.append(item)
        elif isinstance(item, (tuple, list)) and len(item) in (2, 3):
            facts.append(Fact(str(item[0]), str(item[1]), *(item[2:])))
        else:
            raise WrongTypeError(f"a fact is (id, text) or (id, text, timestamp), got {item!r}")
    return facts


class Consolidator:
    """The steps of one run over ``memory`` with the given budget.

    Args:
        memory: a :class:`~magnetic_core.MagneticMemory`.
        check: ``"changed"``, ``"merged"`` or ``"all"`` (see the adapters' docs).
        max_groups: groups reviewed per run.
        cells_per_call: facts per model call.
        neighbours: near neighbours per fact that must share a call with it.
        sleep: run the numeric pass first.
        merge_threshold: passed to the pass (None: fitted).
    """

    @classmethod
    def of(cls, memory: Any, **settings: Unpack[ConsolidationSettings]) -> Consolidator:
        """A consolidator of ``memory``: a MagneticMemory, or an adapter's store holding one
        as ``.memory`` (the LangChain and LlamaIndex vector stores)."""
        from magnetic_core.memory import MagneticMemory  # the facade imports this package

        mem = getattr(memory, "memory", memory)
        if not isinstance(mem, MagneticMemory):
            raise WrongTypeError(
                f"expected a MagneticMemory or a MagneticStorage store, "
                f"got {type(memory).__name__}",
                hint="pass the memory or the vector store to consolidate",
            )
        unknown = sorted(set(settings) - set(ConsolidationSettings.__annotations__))
        if unknown:
            raise WrongTypeError(
                f"unknown consolidation setting {', '.join(map(repr, unknown))}",
                hint=f"the settings are {', '.join(ConsolidationSettings.__annotations__)}",
            )
        return cls(mem, **settings)

    def __init__(
        self,
        memory: Any,
        *,
        check: str = "changed",
        max_groups: int = 50,
        cells_per_call: int = 24,
        neighbours: int = 4,
        sleep: bool = True,
        merge_threshold: float | None = None,
    ) -> None:
        if check not in CHECKS:
            raise InvalidInputError(f"check must be 'changed', 'merged' or 'all', got {check!r}")
        for name, value, low in (
            ("max_groups", max_groups, 1),
            ("cells_per_call", cells_per_call, 2),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidInputError(f"{name} must be an integer >= {low}, got {value!r}")
        self.memory, self.check = memory, check
        self.max_groups, self.cells_per_call = max_groups, cells_per_call
        self.neighbours, self.sleep, self.merge_threshold = neighbours, sleep, merge_threshold

    def numeric_pass(self, merge_threshold: float | None = None) -> SleepReport | None:
        """The pass (or None when turned off); ``merge_threshold`` overrides the default."""
        if not self.sleep:
            return None
        threshold = self.merge_threshold if merge_threshold is None else merge_threshold
        settings = {} if threshold is None else {"merge_threshold": threshold}
        return self.memory.sleep(**settings)  # type: ignore[no-any-return]

    def plan(self, report: SleepReport | None) -> tuple[list[Call], list[str], list[str]]:
        """The calls of this run, the groups reviewed and those left for later."""
        mem = self.memory
        infos = {g.id: g for g in mem.groups()}
        if self.check == "all" or report is None:
            wanted = list(infos)
        elif self.check == "merged":
            wanted = list(dict.fromkeys(keep for keep, _, _ in report.merges))
        else:
            wanted = list(report.changed_groups)
        wanted = [gid for gid in wanted if gid in infos and infos[gid].size >= 2]
        wanted.sort(key=lambda gid: (-infos[gid].size, gid))
        chosen, skipped = wanted[: self.max_groups], wanted[self.max_groups :]
        calls: list[Call] = []
        for gid in chosen:
            cells = mem.get(list(infos[gid].cell_ids))
            facts = [Fact(c.id, c.text, c.updated_at) for c in cells]
            calls += plan_calls(
                facts,
                cells_per_call=self.cells_per_call,
                vectors=mem.get_vectors([c.id for c in cells]),
                neighbours=self.neighbours,
                group_id=gid,
            )
        return calls, chosen, skipped

    def record(self, review: Review) -> tuple[list[Contradiction], list[tuple[str, str]]]:
        """Record each contradiction; returns those recorded and the supersessions made."""
        recorded, superseded = [], []
        for item in review.contradictions:
            try:
                self.memory.mark_contradiction(item.a, item.b, item.explanation)
            except MagneticError as e:
                review.rejected.append(f"{item.group_id}: {e}")
                continue
            recorded.append(item)
            for cell in self.memory.get([item.a, item.b]):
                if cell.superseded_by in (item.a, item.b):
                    superseded.append((cell.id, cell.superseded_by))
        return recorded, superseded

    def result(
        self,
        report: SleepReport | None,
        chosen: list[str],
        skipped: list[str],
        answers: list[Answer],
        calls: list[Call],
    ) -> tuple[ConsolidationResult, Review]:
        review = conclude(calls, answers)
        recorded, superseded = self.record(review)
        result = ConsolidationResult(
            report=report,
            merges=report.merges if report is not None else (),
            checked_groups=tuple(chosen),
            contradictions=tuple(recorded),
            superseded=tuple(superseded),
            rejected=tuple(review.rejected),
            failures=tuple(review.failures),
            skipped_groups=tuple(skipped),
            calls=review.calls,
        )
        if result.failures:
            logger.error(
                "consolidation: %d model calls failed: %s", len(result.failures), result.failures[0]
            )
        return result, review

    def run(self, ask: Ask, merge_threshold: float | None = None) -> ConsolidationResult:
        """One run with a synchronous model call."""
        report = self.numeric_pass(merge_threshold)
        calls, chosen, skipped = self.plan(report)
        return self.result(report, chosen, skipped, ask_each(calls, ask), calls)[0]

    async def arun(self, ask: AAsk, merge_threshold: float | None = None) -> ConsolidationResult:
        """One run with an async model call (the memory's work runs in worker threads)."""
        report = await asyncio.to_thread(self.numeric_pass, merge_threshold)
        calls, chosen, skipped = await asyncio.to_thread(self.plan, report)
        answers = await aask_each(calls, ask)
        done = await asyncio.to_thread(self.result, report, chosen, skipped, answers, calls)
        return done[0]
