"""Read-only views of the hierarchy: cells, hits, group summaries, stats, merge plans."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from magnetic_core._index.clustering import plan_merge_pairs
from magnetic_core._index.index import Group, HierIndex
from magnetic_core._search.candidates import Candidate
from magnetic_core._sleep.supersession import superseded_by
from magnetic_core._store.catalog import Catalog
from magnetic_core._store.record import CellRecord
from magnetic_core.types import Cell, GroupInfo, Hit, MergePlan, Route, Stats, defer_label

__all__ = [
    "cell_view",
    "group_info",
    "hit_view",
    "hit_views",
    "merge_plan",
    "plain_hits",
    "stats_view",
]

_new = object.__new__


def cell_view(index: HierIndex, catalog: Catalog, cid: str) -> Cell:
    """The frozen public view of one stored cell (metadata copied)."""
    return _cell(cid, catalog.records[cid], index.loc[cid].gid)


def _cell(cid: str, record: CellRecord, gid: str) -> Cell:
    """:func:`cell_view` of a record already looked up.

    Built without the frozen dataclass's ``__init__`` (which sets each field through
    ``object.__setattr__``): every field is set in one ``__dict__`` update, and the cell is
    equal to, and as frozen as, one ``Cell(...)`` builds (a search builds ten: 2.0 us a
    cell against 3.6 us through a dict of values and the defaults)."""
    links = record.contradictions
    contradictions: tuple[dict[str, Any], ...] = ()
    newer = None
    if links:  # most cells have none: nothing to copy or read
        newer = superseded_by(links)
        contradictions = tuple(dict(link) for link in links)
    cell = _new(Cell)
    cell.__dict__.update(
        id=cid,
        text=record.text,
        metadata=dict(record.metadata),
        group_id=gid,
        entities=record.entities,
        created_at=record.created_at,
        updated_at=record.updated_at,
        contradictions=contradictions,
        superseded_by=newer[0] if newer else None,
        superseded_at=newer[1] if newer else None,
    )
    return cell


def hit_view(
    catalog: Catalog,
    found: Candidate,
    explain: bool,
    label_of: Callable[[str, int, list[str]], str] | None = None,
) -> Hit:
    """A search candidate as a public Hit, with its route when ``explain`` is set.

    With ``label_of`` (group id, version, member ids -> label) the group label is left
    to be worked out the first time it is read; without it, it is read from the catalog
    now.
    """
    return hit_views(catalog, [found], explain, label_of)[0]


def hit_views(
    catalog: Catalog,
    found: list[Candidate],
    explain: bool,
    label_of: Callable[[str, int, list[str]], str] | None = None,
) -> list[Hit]:
    """:func:`hit_view` of each candidate, in order."""
    routes = None
    if explain:
        routes = [
            Route(
                stages=cand.stages,
                centroid_similarity=cand.centroid_similarity,
                boost=cand.boost,
                lexical=cand.lexical,
                fallback_ran=cand.fallback_ran,
                probed_groups=cand.probed_groups,
                context=cand.context,
            )
            for cand in found
        ]
    return _hits(
        catalog,
        [cand.id for cand in found],
        [cand.group for cand in found],
        [cand.score for cand in found],
        [cand.rank_score for cand in found],
        routes,
        label_of,
    )


def plain_hits(
    catalog: Catalog,
    ids: list[str],
    groups: list[Group],
    scores: list[float],
    label_of: Callable[[str, int, list[str]], str] | None = None,
    rank_scores: list[float] | None = None,
) -> list[Hit]:
    """The hits of a search whose candidates need no route, in order, from the cells'
    ids, groups and exact cosines (:func:`~magnetic_core._search.search.plain_search`,
    :func:`~magnetic_core._search.search.text_search`): no candidates in between.
    ``rank_scores``: the ranking's scores, when not the cosines."""
    return _hits(
        catalog, ids, groups, scores, scores if rank_scores is None else rank_scores, None, label_of
    )


def _hits(
    catalog: Catalog,
    ids: list[str],
    groups: list[Group],
    scores: list[float],
    rank_scores: list[float],
    routes: list[Route] | None,
    label_of: Callable[[str, int, list[str]], str] | None,
) -> list[Hit]:
    """Public hits, built in one loop (every search builds its ten here, and per-hit calls
    would cost more than the hits themselves). ``routes``: one per hit, or None."""
    records = catalog.records.many(ids)
    hits = []
    for i, group in enumerate(groups):
        gid = group.gid
        hit = _new(Hit)
        state = hit.__dict__
        state.update(
            cell=_cell(ids[i], records[i], gid),
            score=scores[i],
            rank_score=rank_scores[i],
            group_id=gid,
            route=None if routes is None else routes[i],
            expanded_from=None,
        )
        if label_of is not None:
            defer_label(hit, partial(label_of, gid, group.version, group.ids))
        else:
            state["group_label"] = catalog.label(gid, group.version, group.ids)[0]
        hits.append(hit)
    return hits


def group_info(index: HierIndex, catalog: Catalog, group: Group) -> GroupInfo:
    """Summary of one group; its cells ordered closest to the centroid first."""
    sims = group.view @ index.centroids[group.slot]
    order = np.argsort(-sims, kind="stable")
    label, entities = catalog.label(group.gid, group.version, group.ids)
    return GroupInfo(
        id=group.gid,
        label=label,
        size=group.n,
        entities=entities,
        cell_ids=tuple(group.ids[i] for i in order),
        cohesion=float(sims.mean()),
    )


def stats_view(
    index: HierIndex,
    catalog: Catalog,
    *,
    threshold: float,
    threshold_source: str,
    embedder: str,
    namespace: str,
) -> Stats:
    """Counts and health metrics of the hierarchy."""
    groups = index.slot_groups
    sizes = np.array([g.n for g in groups]) if groups else np.zeros(0)
    cohesion = sum(float((g.view @ index.centroids[g.slot]).sum()) for g in groups)
    n = len(index)
    g = len(groups)
    pct = tuple(float(v) for v in np.percentile(sizes, [50, 90, 99])) if g else (0.0, 0.0, 0.0)
    return Stats(
        count=n,
        groups=len(groups),
        singleton_groups=int((sizes == 1).sum()),
        largest_group=int(sizes.max()) if groups else 0,
        mean_group_size=float(sizes.mean()) if groups else 0.0,
        mean_cohesion=cohesion / n if n else 0.0,
        join_threshold=threshold,
        threshold_source=threshold_source,
        embedder=embedder,
        dim=index.dim,
        namespace=namespace,
        entities=len(catalog.entity_cells),
        singleton_share=float((sizes == 1).sum() / g) if g else 0.0,
        imbalance=float(g * (sizes.astype(np.float64) ** 2).sum() / (n * n)) if n else 0.0,
        size_percentiles=pct,  # type: ignore[arg-type]
        superseded=_superseded_count(catalog),
    )


def _superseded_count(catalog: Catalog) -> int:
    """Cells superseded by a newer one: only linked cells are read where the records can
    list them (a store opened from its snapshot decodes a record on first use)."""
    records = catalog.records
    with_links = getattr(records, "with_links", None)
    linked = with_links() if with_links is not None else records.items()
    return sum(1 for _, r in linked if superseded_by(r.contradictions) is not None)


def merge_plan(index: HierIndex, threshold: float, max_group_size: int) -> MergePlan:
    """Disjoint pairs of groups whose centroids reach ``threshold``; the larger one is kept."""
    groups = index.slot_groups
    sizes = np.array([g.n for g in groups])
    pairs = plan_merge_pairs(index.centroids, threshold, sizes, max_group_size)
    named = tuple(
        (groups[i].gid, groups[j].gid, sim)
        if groups[i].n >= groups[j].n
        else (groups[j].gid, groups[i].gid, sim)
        for i, j, sim in pairs
    )
    return MergePlan(pairs=named, threshold=threshold)
