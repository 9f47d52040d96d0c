"""ADAPTER until branch i12-sleep lands: supersession, current-only search, contradictions.

Everything here defers to the real pieces when they exist (``MagneticMemory.supersede``,
``search(current_only=True)``, ``magnetic_langchain.consolidation.find_contradictions``)
and falls back to a small stand-in otherwise. Once i12-sleep is in main, each fallback
branch can be deleted and the callers can use the real names directly.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from typing import Any

from magnetic_core import Hit, MagneticMemory
from magnetic_core.llm_json import LLMError, LLMUnavailableError
from magnetic_langchain.structured import invoke_structured

__all__ = [
    "LLMError",
    "LLMUnavailableError",
    "current_search",
    "find_contradictions",
    "invoke_structured",
    "supersede",
    "superseded_by",
]

logger = logging.getLogger(__name__)


_FALLBACK_KEY = "superseded_by"  # metadata stamp used only before i12-sleep


def superseded_by(cell: Any) -> str | None:
    """The id of the cell that supersedes ``cell``, if any."""
    if hasattr(cell, "superseded_by"):
        return cell.superseded_by  # type: ignore[no-any-return]
    value = cell.metadata.get(_FALLBACK_KEY)  # pragma: no cover - before i12-sleep
    return str(value) if value else None


def _search_takes_current_only() -> bool:
    return "current_only" in inspect.signature(MagneticMemory.search).parameters


def current_search(memory: MagneticMemory, query: str, k: int, **kwargs: Any) -> list[Hit]:
    """``memory.search(..., current_only=True)``; superseded cells filtered here before."""
    if _search_takes_current_only():
        return memory.search(query, k=k, current_only=True, **kwargs)  # type: ignore[call-arg]
    hits = memory.search(query, k=k * 2, **kwargs)
    return [h for h in hits if superseded_by(h.cell) is None][:k]


def supersede(memory: MagneticMemory, old_id: str, new_id: str, explanation: str) -> None:
    """Mark ``old_id`` superseded by ``new_id`` (before i12-sleep: link them as contradicting)."""
    method = getattr(memory, "supersede", None)
    if method is not None:
        method(old_id, new_id, explanation=explanation)
    else:  # pragma: no cover - removed once i12-sleep is merged
        (old,) = memory.get([old_id])
        memory.add([old.text], metadatas=[{**old.metadata, _FALLBACK_KEY: new_id}], ids=[old_id])
        memory.mark_contradiction(old_id, new_id, explanation or "superseded")


def find_contradictions(
    llm: Any, facts: Sequence[tuple[str, str]], **budget: Any
) -> list[tuple[str, str, str]]:
    """Contradicting pairs among ``facts`` as ``(a, b, explanation)`` tuples."""
    try:
        from magnetic_langchain.consolidation import (  # type: ignore[attr-defined]
            find_contradictions as real,
        )
    except ImportError:  # pragma: no cover - removed once i12-sleep is merged
        return _fallback_contradictions(llm, facts)
    return [(c.a, c.b, c.explanation) for c in real(llm, facts, **budget)]


def _fallback_contradictions(
    llm: Any, facts: Sequence[tuple[str, str]]
) -> list[tuple[str, str, str]]:  # pragma: no cover - removed once i12-sleep is merged
    from magnetic_langchain.consolidation import _SYSTEM, ContradictionReport

    if len(facts) < 2:
        return []
    listing = "\n".join(f"{i}. {text}" for i, (_, text) in enumerate(facts, start=1))
    system = _SYSTEM.replace("{format_instructions}", "Answer in JSON.")
    report = invoke_structured(
        llm, [("system", system), ("human", f"Facts:\n{listing}")], ContradictionReport
    )
    n = len(facts)
    return [
        (facts[p.first - 1][0], facts[p.second - 1][0], p.explanation)
        for p in report.contradictions
        if 1 <= p.first <= n and 1 <= p.second <= n and p.first != p.second
    ]
