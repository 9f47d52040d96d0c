"""Contradiction and supersession links between cells, kept in each cell's link list.

Links live in the cell records' ``contradictions`` list, which is persisted with the cell,
so supersession needs no storage of its own. A link is
``{"other": id, "explanation": str, "at": time}``; where one cell replaced the other, the
older cell's link also says ``"supersession": "superseded_by"`` and the newer one's
``"supersession": "supersedes"``. Both cells are always kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from magnetic_core.errors import InvalidInputError

__all__ = [
    "links_kept_by_upsert",
    "CONTRADICTIONS_KEY",
    "SUPERSEDED_AT_KEY",
    "SUPERSEDED_BY_KEY",
    "SUPERSEDES_KEY",
    "describe_links",
    "link_cells",
    "link_metadata",
    "newer_of",
    "superseded_by",
    "superseded_ids",
]

SUPERSEDED_BY = "superseded_by"
SUPERSEDES = "supersedes"

CONTRADICTIONS_KEY = "magnetic_contradictions"
"""Result metadata key: ``[{"other": id, "explanation": str}, ...]`` of a cell's links."""
SUPERSEDED_BY_KEY = "magnetic_superseded_by"
"""Result metadata key: id of the newer cell that superseded this one."""
SUPERSEDED_AT_KEY = "magnetic_superseded_at"
"""Result metadata key: UNIX time the cell was marked superseded."""
SUPERSEDES_KEY = "magnetic_supersedes"
"""Result metadata key: ids of the older cells this one superseded."""


class _Record(Protocol):
    text: str
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
    records: Mapping[str, _Record],
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


def links_kept_by_upsert(
    records: Mapping[str, _Record], cid: str, text: str
) -> tuple[list[dict[str, Any]], set[str]]:
    """The links an upsert of ``cid`` with ``text`` keeps, and the partners it changes.

    Links are the user's data and survive an upsert on both sides. A supersession, though,
    was a judgement about the old text: when the text changes, both sides of it become plain
    contradiction links (the cell is current again and supersedes nothing). The partners'
    records are updated in place; the caller writes them with the upserted cell.
    """
    record = records.get(cid)
    if record is None:
        return [], set()
    if record.text == text:
        return [dict(x) for x in record.contradictions], set()
    kept, partners = [], set()
    for link in record.contradictions:
        kept.append({k: v for k, v in link.items() if k != "supersession"})
        other = records.get(link.get("other", ""))
        if "supersession" not in link or other is None:
            continue
        for back in other.contradictions:
            if back.get("other") == cid and back.pop("supersession", None) is not None:
                partners.add(link["other"])
    return kept, partners


def superseded_ids(records: Mapping[str, _Record], candidates: set[str]) -> frozenset[str]:
    """Which of ``candidates`` are (still) superseded: an upsert may have reset a cell."""
    return frozenset(
        c for c in candidates if c in records and superseded_by(records[c].contradictions)
    )


def link_metadata(cell: Any) -> dict[str, Any]:
    """The link keys the adapters add to a result's metadata (only those that apply).

    Example:
        >>> from magnetic_core.types import Cell
        >>> link_metadata(Cell(id="a", text="x", metadata={}, group_id="g"))
        {}
    """
    out: dict[str, Any] = {}
    links = getattr(cell, "contradictions", ())
    if links:
        out[CONTRADICTIONS_KEY] = [
            {"other": x["other"], "explanation": x.get("explanation", "")} for x in links
        ]
        newer = [x["other"] for x in links if x.get("supersession") == SUPERSEDES]
        if newer:
            out[SUPERSEDES_KEY] = newer
    if getattr(cell, "superseded_by", None) is not None:
        out[SUPERSEDED_BY_KEY] = cell.superseded_by
        out[SUPERSEDED_AT_KEY] = cell.superseded_at
    return out


def describe_links(cell: Any, width: int = 0) -> str:
    """A short text of a cell's links for tools and the CLI ("" when it has none)."""
    parts = []
    if getattr(cell, "superseded_by", None) is not None:
        parts.append(f"superseded by id={cell.superseded_by}")
    for link in getattr(cell, "contradictions", ()):
        if link.get("supersession") == SUPERSEDED_BY:
            continue
        note = str(link.get("explanation", ""))
        if width and len(note) > width:
            note = note[: width - 3] + "..."
        verb = "supersedes" if link.get("supersession") == SUPERSEDES else "contradicts"
        parts.append(f"{verb} id={link['other']}" + (f" ({note})" if note else ""))
    return "; ".join(parts)
