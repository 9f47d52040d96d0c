"""How the CLI prints hits, cells, groups and counts: plain aligned text, or JSON."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, TextIO

from magnetic_core._sleep.supersession import describe_links
from magnetic_core.types import Cell, GroupInfo, Hit

__all__ = [
    "cell_record",
    "hit_record",
    "one_line",
    "plural",
    "print_cell",
    "print_groups_table",
    "print_hits",
    "write_json",
]

SCORE_NOTE = "score = cosine similarity of the query and the memory (1 is identical)"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 cell``, ``2 cells``; ``many`` for irregular plurals (``memories``)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def one_line(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def write_json(out: TextIO, value: Any) -> None:
    """Pretty JSON (non-ASCII kept) and a newline."""
    out.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def _links(cell: Cell) -> dict[str, Any]:
    return {
        "contradictions": list(cell.contradictions),
        "superseded_by": cell.superseded_by,
        "superseded_at": cell.superseded_at,
    }


def cell_record(cell: Cell, label: str | None = None) -> dict[str, Any]:
    """A cell as a JSON-ready dict (what ``get --json`` and ``export`` write)."""
    record: dict[str, Any] = {
        "id": cell.id,
        "text": cell.text,
        "metadata": cell.metadata,
        "group": cell.group_id,
    }
    if label is not None:
        record["label"] = label
    record.update(
        entities=list(cell.entities),
        created_at=cell.created_at,
        updated_at=cell.updated_at,
        **_links(cell),
    )
    return record


def hit_record(hit: Hit) -> dict[str, Any]:
    """A hit as a JSON-ready dict; its route is included when the search was explained."""
    record: dict[str, Any] = {
        "id": hit.id,
        "score": hit.score,
        "rank_score": hit.rank_score,
        "group": hit.group_id,
        "label": hit.group_label,
        "text": hit.text,
        "metadata": hit.metadata,
        **_links(hit.cell),
    }
    if hit.route is not None:
        route = hit.route
        record["route"] = {
            "stages": list(route.stages),
            "centroid_similarity": route.centroid_similarity,
            "entity_boost": route.boost,
            "lexical": route.lexical,
            "fallback_ran": route.fallback_ran,
            "probed_groups": route.probed_groups,
        }
    return record


def _route_line(hit: Hit) -> str:
    route = hit.route
    if route is None:
        return ""
    terms = [f"cosine {hit.score:.3f}"]
    if route.boost > 0:
        terms.append(f"entity +{route.boost:.2f}")
    if route.lexical > 0:
        terms.append(f"words +{route.lexical:.2f}")
    return (
        f"via {'+'.join(route.stages)}; ranked {hit.rank_score:.3f} = {' '.join(terms)}; "
        f"group centroid {route.centroid_similarity:.3f}"
    )


def _link_lines(cell: Cell) -> list[str]:
    links = describe_links(cell, width=80)
    return [f"! {links}"] if links else []


def print_hits(hits: Sequence[Hit], out: TextIO, *, width: int = 76) -> None:
    """A table of hits: cosine score, group label, text; explained routes underneath."""
    out.write(f"{'score':>6}  {'group':<24}  text\n")
    for hit in hits:
        out.write(
            f"{hit.score:>6.3f}  {one_line(hit.group_label, 24):<24}  {one_line(hit.text, width)}\n"
        )
        details = [f"id {hit.id}"] if hit.route is not None else []
        details += [_route_line(hit)] if hit.route is not None else []
        details += _link_lines(hit.cell)
        for line in details:
            out.write(f"{'':>6}  {'':<24}  {line}\n")


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)) if stamp else "-"


def print_cell(cell: Cell, label: str, out: TextIO) -> None:
    """One memory in full: id, group, times, metadata, links and text."""
    out.write(f"id        {cell.id}\n")
    out.write(f"group     {cell.group_id}  {label}\n")
    out.write(f"created   {_when(cell.created_at)}   updated {_when(cell.updated_at)}\n")
    if cell.metadata:
        meta = json.dumps(cell.metadata, ensure_ascii=False, default=str)
        out.write(f"metadata  {meta}\n")
    for line in _link_lines(cell):
        out.write(f"note      {line}\n")
    out.write(cell.text.rstrip("\n") + "\n")


def print_groups_table(groups: Sequence[GroupInfo], out: TextIO) -> None:
    """Groups as a table: id, size, cohesion, label."""
    wide = max([len("group"), *(len(g.id) for g in groups)])
    out.write(f"{'group':<{wide}}  {'cells':>5}  {'cohesion':>8}  label\n")
    for g in groups:
        out.write(f"{g.id:<{wide}}  {g.size:>5}  {g.cohesion:>8.2f}  {one_line(g.label, 60)}\n")
