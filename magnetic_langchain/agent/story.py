"""A story whose world stays consistent: passages, the facts they establish, and conflicts.

A :class:`StoryWorld` keeps one story in one namespace of the memory: every accepted
passage is a cell (``kind="passage"``) and so is every fact extracted from it
(``kind="fact"``, with the number of its passage). Writing a passage shows the model only
the latest passage and the stored facts the engine retrieves for the instruction, so the
prompt does not grow with the story. Checking a passage extracts its facts (structured
output, JSON repair as fallback) and runs the contradiction check against the stored facts
the engine finds relevant to each; accepting a passage whose facts conflict makes the new
facts supersede the old ones.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from magnetic_core import Cell, MagneticMemory
from magnetic_core._sleep.llm_json import LLMError
from magnetic_langchain.agent.personas import BUILTIN_PERSONAS
from magnetic_langchain.consolidation import find_contradictions
from magnetic_langchain.structured import invoke_structured

__all__ = ["Conflict", "Draft", "StoryFact", "StoryFacts", "StoryWorld"]

logger = logging.getLogger(__name__)

_WRITER = (
    "{persona}\n\nYou are writing one continuing story, one passage at a time "
    "(about {words} words). Stay consistent with the established facts below unless the "
    "instruction changes them. Answer with the passage only: no title, no notes."
)
_EXTRACT = (
    "Extract the facts this story passage establishes about its world: characters and "
    "their traits, places, objects, rules of the world, and events in their order. Each "
    "fact is one short self-contained sentence naming who or what it is about (e.g. "
    "'Mira's eyes are green.'). Leave out style and mood."
)


class StoryFact(BaseModel):
    """One established fact of the story's world."""

    text: str = Field(description="one short self-contained sentence")
    kind: Literal["character", "place", "object", "rule", "event", "other"] = Field(
        default="other", description="what the fact is about"
    )


class StoryFacts(BaseModel):
    """The facts one passage establishes."""

    facts: list[StoryFact] = Field(default_factory=list)


@dataclass(frozen=True)
class Conflict:
    """A fact of a new passage that contradicts a stored one.

    Attributes:
        old_id: id of the stored fact.
        old_text: its text.
        old_passage: number of the passage it came from.
        new_text: the new passage's fact.
        explanation: why both cannot be true.
    """

    old_id: str
    old_text: str
    old_passage: int
    new_text: str
    explanation: str

    def describe(self) -> str:
        """One line for the user."""
        return (
            f"passage {self.old_passage} said: {self.old_text!r}; this passage says: "
            f"{self.new_text!r} ({self.explanation})"
        )


@dataclass(frozen=True)
class Draft:
    """A passage written but not yet accepted, with its facts and conflicts."""

    number: int
    instruction: str
    text: str
    facts: tuple[StoryFact, ...]
    conflicts: tuple[Conflict, ...] = field(default=())


def _text_of(message: Any) -> str:
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content.strip()
    return "".join(c if isinstance(c, str) else c.get("text", "") for c in content).strip()


class StoryWorld:
    """One story over a memory namespace of its own.

    Args:
        memory: the memory holding this story (one namespace per story).
        llm: a LangChain chat model (tools not needed).
        persona: the writer's voice (default: the built-in storyteller).
        facts_per_query: stored facts retrieved per instruction or per new fact.
        words: the passage length asked for.

    Example:
        ```python
        world = StoryWorld(MagneticMemory(path="./stories", namespace="story-mira"), llm)
        draft = world.write("Mira reaches the harbour at dusk.")
        for conflict in draft.conflicts:
            print(conflict.describe())
        world.accept(draft)           # new facts supersede the ones they contradict
        ```
    """

    def __init__(
        self,
        memory: MagneticMemory,
        llm: Any,
        *,
        persona: str | None = None,
        facts_per_query: int = 4,
        words: int = 150,
    ) -> None:
        self.memory, self.llm = memory, llm
        self.persona = persona or BUILTIN_PERSONAS["storyteller"].prompt
        self.facts_per_query, self.words = facts_per_query, words

    # -- what is stored -------------------------------------------------------------------
    def passages(self) -> list[Cell]:
        """The accepted passages, in order."""
        cells = self.memory.get(filter={"kind": "passage"})
        return sorted(cells, key=lambda c: int(c.metadata["passage"]))

    def next_number(self) -> int:
        """The number the next passage gets (stories resume where they stopped)."""
        numbers = [int(c.metadata["passage"]) for c in self.memory.get(filter={"kind": "passage"})]
        return max(numbers, default=0) + 1

    def facts(self, *, current_only: bool = True) -> list[Cell]:
        """The stored facts, oldest first; superseded ones left out unless asked."""
        cells = self.memory.get(filter={"kind": "fact"})
        if current_only:
            cells = [c for c in cells if c.superseded_by is None]
        return cells

    def relevant_facts(self, query: str, k: int | None = None) -> list[Cell]:
        """Current facts the engine finds for ``query`` (not the whole history)."""
        if not self.memory.count():
            return []
        hits = self.memory.search(
            query, k=k or self.facts_per_query, filter={"kind": "fact"}, current_only=True
        )
        return [h.cell for h in hits]

    # -- writing ----------------------------------------------------------------------------
    def prompt(self, instruction: str) -> list[Any]:
        """The messages for the next passage: persona, retrieved facts, last passage."""
        facts = self.relevant_facts(instruction)
        previous = self.passages()[-1:]
        if previous:
            facts += self.relevant_facts(previous[0].text)
        unique = list({c.id: c for c in facts}.values())
        context = "\n".join(f"- {c.text}" for c in unique) or "- (none yet: a new story)"
        human = f"Established facts:\n{context}\n\n"
        if previous:
            human += f"The story so far ends with:\n{previous[0].text}\n\n"
        human += f"Instruction for the next passage: {instruction}"
        system = _WRITER.format(persona=self.persona, words=self.words)
        return [SystemMessage(system), HumanMessage(human)]

    def write(self, instruction: str) -> Draft:
        """Write the next passage for ``instruction`` and check it (nothing is stored yet)."""
        instruction = instruction.strip() or "Continue the story."
        text = _text_of(self.llm.invoke(self.prompt(instruction)))
        if not text:
            raise LLMError("the model wrote an empty passage", hint="try again")
        facts, conflicts = self.check(text)
        return Draft(self.next_number(), instruction, text, tuple(facts), tuple(conflicts))

    def extract(self, passage: str) -> list[StoryFact]:
        """The facts ``passage`` establishes (structured output, repaired JSON otherwise)."""
        messages = [("system", _EXTRACT), ("human", f"Passage:\n{passage}")]
        found = invoke_structured(self.llm, messages, StoryFacts)
        return [f for f in found.facts if f.text.strip()]

    def check(self, passage: str) -> tuple[list[StoryFact], list[Conflict]]:
        """Extract the passage's facts and find those contradicting stored facts.

        Returns:
            The new facts and their conflicts with the relevant stored facts.
        """
        facts = self.extract(passage)
        stored: dict[str, Cell] = {}
        for fact in facts:
            stored.update({c.id: c for c in self.relevant_facts(fact.text)})
        if not facts or not stored:
            return facts, []
        new_ids = {f"new-{i}": f for i, f in enumerate(facts)}
        pairs = [(cid, c.text) for cid, c in stored.items()]
        pairs += [(nid, f.text) for nid, f in new_ids.items()]
        conflicts = []
        for found in find_contradictions(self.llm, pairs):
            a, b, why = found.a, found.b, found.explanation
            old, new = (a, b) if b in new_ids else (b, a)
            if old in stored and new in new_ids:
                cell = stored[old]
                conflicts.append(
                    Conflict(old, cell.text, int(cell.metadata["passage"]), new_ids[new].text, why)
                )
        return facts, conflicts

    def accept(self, draft: Draft) -> list[str]:
        """Store the passage and its facts; new facts supersede the ones they contradict.

        Returns:
            The ids of the stored facts.
        """
        n = draft.number
        texts = [draft.text] + [f.text for f in draft.facts]
        ids = [f"passage-{n:05d}"] + [f"fact-{n:05d}-{i:02d}" for i in range(len(draft.facts))]
        metas: list[dict[str, Any]] = [{"kind": "passage", "passage": n}]
        metas += [
            {"kind": "fact", "passage": n, "fact_kind": f.kind, "source": ids[0]}
            for f in draft.facts
        ]
        self.memory.add(texts, metadatas=metas, ids=ids)
        fact_ids = dict(zip((f.text for f in draft.facts), ids[1:]))
        for conflict in draft.conflicts:
            self.memory.supersede(
                conflict.old_id, fact_ids[conflict.new_text], explanation=conflict.explanation
            )
        return ids[1:]

    def summary(self) -> str:
        """How long the story is and how much of its world is recorded."""
        facts = self.memory.get(filter={"kind": "fact"})
        superseded = sum(1 for c in facts if c.superseded_by is not None)
        return f"{len(self.passages())} passages, {len(facts) - superseded} current facts" + (
            f" ({superseded} superseded)" if superseded else ""
        )


def regenerate_instruction(draft: Draft, conflicts: Sequence[Conflict]) -> str:
    """The instruction for a second try that avoids the conflicts of the first."""
    keep = "; ".join(c.old_text for c in conflicts)
    return f"{draft.instruction} Keep these established facts unchanged: {keep}"
