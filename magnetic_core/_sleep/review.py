"""The contradiction review, framework-free: which facts go into which LLM call, and back.

Both adapters (LangChain, LlamaIndex) run the same review; only the model call differs.
Nothing is truncated: a group larger than ``cells_per_call`` is cut into overlapping
calls chosen so that every pair of facts that are close to each other (each fact's
``neighbours`` most similar ones) appears together in some call; without vectors, every
pair does. The model answers with numbered pairs; numbers that do not name two of the
facts it was shown are rejected (reported, not recorded).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, Field

from magnetic_core.errors import InvalidInputError

__all__ = [
    "Call",
    "ContradictingPair",
    "Contradiction",
    "ContradictionReport",
    "Fact",
    "Review",
    "SYSTEM_PROMPT",
    "conclude",
    "plan_calls",
    "plan_chunks",
]

SYSTEM_PROMPT = (
    "You review an agent's long-term memory. The facts below were filed under one topic. "
    "List every pair of facts that cannot both be true at the same time. Facts that add "
    "detail, differ in wording or are about different things are not contradictions. "
    "Refer to facts by their number. Return an empty list of contradictions when there "
    "are none."
)


class ContradictingPair(BaseModel):
    """Two facts, by their number in the list, that cannot both be true."""

    first: int = Field(description="number of the first fact")
    second: int = Field(description="number of the second fact")
    explanation: str = Field(description="one sentence on why both cannot be true")


class ContradictionReport(BaseModel):
    """What the LLM returns for one call."""

    contradictions: list[ContradictingPair] = Field(
        default_factory=list, description="contradicting pairs; empty when there are none"
    )


@dataclass(frozen=True)
class Fact:
    """One fact to review: its id, text and (optionally) when it was stored."""

    id: str
    text: str
    timestamp: float | None = None


@dataclass(frozen=True)
class Contradiction:
    """Two facts that cannot both be true.

    Attributes:
        a: id of one fact.
        b: id of the other.
        explanation: the model's reason.
        group_id: the group reviewed, when the facts came from a memory.
    """

    a: str
    b: str
    explanation: str
    group_id: str | None = None

    @property
    def cell_a(self) -> str:
        """Alias of ``a``."""
        return self.a

    @property
    def cell_b(self) -> str:
        """Alias of ``b``."""
        return self.b


@dataclass(frozen=True)
class Call:
    """One model call: which facts it shows, and its messages as ``(role, text)`` pairs."""

    group_id: str | None
    facts: tuple[Fact, ...]

    @property
    def messages(self) -> list[tuple[str, str]]:
        listing = "\n".join(f"{i}. {f.text}" for i, f in enumerate(self.facts, start=1))
        return [("system", SYSTEM_PROMPT), ("human", f"Facts:\n{listing}")]


@dataclass
class Review:
    """The outcome of a review: what was found, rejected, and which calls failed."""

    contradictions: list[Contradiction] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    calls: int = 0


def plan_chunks(
    n: int, size: int, vectors: np.ndarray | None = None, neighbours: int = 4
) -> list[list[int]]:
    """Index lists, each at most ``size`` long, that together show every close pair.

    Args:
        n: number of facts.
        size: facts per call (at least 2).
        vectors: (n, d) unit vectors; pairs to cover are each fact and its ``neighbours``
            most similar facts. Without vectors every pair is covered.
        neighbours: near neighbours per fact.
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 2:
        raise InvalidInputError(f"cells_per_call must be an integer >= 2, got {size!r}")
    if n <= size:
        return [list(range(n))] if n >= 2 else []
    if vectors is None:
        half = size // 2
        blocks = [list(range(i, min(i + half, n))) for i in range(0, n, half)]
        return [a + b for a, b in itertools.combinations(blocks, 2)]
    sims = np.asarray(vectors, np.float32) @ np.asarray(vectors, np.float32).T
    np.fill_diagonal(sims, -np.inf)
    k = max(1, min(neighbours, n - 1))
    near = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    pairs = {(min(i, int(j)), max(i, int(j))) for i in range(n) for j in near[i]}
    return _cover(n, size, pairs)


def _cover(n: int, size: int, pairs: set[tuple[int, int]]) -> list[list[int]]:
    """Greedy chunks until every pair in ``pairs`` sits in one chunk."""
    open_pairs = set(pairs)
    adjacency: dict[int, set[int]] = {i: set() for i in range(n)}
    for i, j in open_pairs:
        adjacency[i].add(j)
        adjacency[j].add(i)
    chunks: list[list[int]] = []
    while open_pairs:
        members: list[int] = []
        chosen: set[int] = set()
        while len(members) < size:
            gains = {c: len(adjacency[c] & chosen) for c in range(n) if c not in chosen}
            best = max(gains, key=lambda c: (gains[c], len(adjacency[c]), -c), default=None)
            if best is None or (gains[best] == 0 and members and not adjacency[best]):
                break
            if gains[best] == 0 and members:
                # nothing left joins this cluster: start another one in the same call
                best = max(
                    (c for c in range(n) if c not in chosen),
                    key=lambda c: (len(adjacency[c]), -c),
                )
                if not adjacency[best]:
                    break
            members.append(best)
            chosen.add(best)
        for i, j in itertools.combinations(sorted(chosen), 2):
            if (i, j) in open_pairs:
                open_pairs.discard((i, j))
                adjacency[i].discard(j)
                adjacency[j].discard(i)
        chunks.append(sorted(members))
    return chunks


def plan_calls(
    facts: Sequence[Fact],
    *,
    cells_per_call: int = 24,
    vectors: np.ndarray | None = None,
    neighbours: int = 4,
    group_id: str | None = None,
) -> list[Call]:
    """The calls that review ``facts`` (see :func:`plan_chunks`)."""
    chunks = plan_chunks(len(facts), cells_per_call, vectors, neighbours)
    return [Call(group_id, tuple(facts[i] for i in chunk)) for chunk in chunks]


def conclude(
    calls: Sequence[Call], answers: Sequence[ContradictionReport | BaseException | None]
) -> Review:
    """Turn the answers of ``calls`` into contradictions (deduplicated across calls).

    ``None`` marks a call that was not made (the model was found unreachable before it).
    """
    review = Review(calls=sum(1 for a in answers if a is not None))
    seen: set[frozenset[str]] = set()
    for call, answer in zip(calls, answers, strict=True):
        where = call.group_id or "facts"
        if answer is None:
            continue
        if isinstance(answer, BaseException):
            review.failures.append(f"{where}: {answer}")
            continue
        n = len(call.facts)
        for pair in answer.contradictions:
            if not (1 <= pair.first <= n and 1 <= pair.second <= n) or pair.first == pair.second:
                review.rejected.append(
                    f"{where}: pair ({pair.first}, {pair.second}) is not two of the {n} facts"
                )
                continue
            a, b = call.facts[pair.first - 1], call.facts[pair.second - 1]
            key = frozenset((a.id, b.id))
            if key in seen or a.id == b.id:
                continue
            seen.add(key)
            review.contradictions.append(
                Contradiction(
                    a.id, b.id, pair.explanation.strip() or "contradiction", call.group_id
                )
            )
    return review
