"""Contradiction and supersession links between cells, kept in each cell's link list.

Links live in the cell records' ``contradictions`` list, which is persisted with the cell,
so supersession needs no storage of its own. A link is
``{"other": id, "explanation": str, "at": time}``; where one cell replaced the other, the
older cell's link also says ``"supersession": "superseded_by"`` and the newer one's
``"supersession": "supersedes"``. Both cells are always kept.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any, Protocol

from magnetic_core.errors import InvalidInputError

__all__ = ["link_cells", "newer_of", "superseded_by", "superseded_ids"]

SUPERSEDED_BY = "superseded_by"
SUPERSEDES = "supersedes"


class _Record(Protocol):
    contradictions: list[dict[str, Any]]
    created_at: float
    updated_at: float


def superseded_by(links: Sequence[Mapping[str, Any]]) -> tuple[str, float] | None:
    """``(newer_id, when)`` if a link says this cell was superseded (the latest such link)."""
    found = None
    for link in links:
        if link.get("supersession") == SUPERSEDED_BY:
            when = float(link.get("at", 0.0))
            if found is None or when >= found[1]:
                found = (str(link["other"]), when)
    return found


def newer_of(records: Mapping[str, _Record], a: str, b: str) -> tuple[str, str] | None:
    """``(older, newer)`` by the time each fact was stored; None when they tie."""
    ta = (records[a].updated_at, records[a].created_at)
    tb = (records[b].updated_at, records[b].created_at)
    if ta == tb:
        return None
    return (a, b) if ta < tb else (b, a)


def link_cells(
    records: MutableMapping[str, _Record],
    a: str,
    b: str,
    explanation: str,
    now: float,
    *,
    supersede: tuple[str, str] | None = None,
) -> None:
    """Link two cells both ways; with ``supersede=(old, new)``, mark the old one superseded.

    An existing link between the two is updated in place (explanation kept unless a new
    one is given, supersession added), so recording the same finding twice changes nothing.

    Raises:
        InvalidInputError: an id is unknown, the ids are equal, or ``supersede`` names
            other cells.
    """
    if a == b:
        raise InvalidInputError(f"a cell cannot contradict or supersede itself ({a!r})")
    for cid in (a, b):
        if cid not in records:
            raise InvalidInputError(f"no cell with id {cid!r}", hint="check the ids with get()")
    if supersede is not None and set(supersede) != {a, b}:
        raise InvalidInputError("supersede must name the two linked cells")
    for me, other in ((a, b), (b, a)):
        links = records[me].contradictions
        link = next((x for x in links if x.get("other") == other), None)
        if link is None:
            link = {"other": other, "explanation": explanation, "at": now}
            links.append(link)
        elif explanation:
            link["explanation"] = explanation
        if supersede is not None:
            link["supersession"] = SUPERSEDED_BY if me == supersede[0] else SUPERSEDES
            link["at"] = now


def superseded_ids(records: Mapping[str, _Record], candidates: set[str]) -> frozenset[str]:
    """Which of ``candidates`` are (still) superseded: an upsert may have reset a cell."""
    return frozenset(
        c for c in candidates if c in records and superseded_by(records[c].contradictions)
    )
