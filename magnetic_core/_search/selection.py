"""What one search returns: the candidates, restricted to ids, re-ranked by MMR, expanded.

Everything here runs on one query under the read lock of the search itself, so an adapter
gets hits, MMR picks and group expansions from one call: no second round trip for vectors
that a concurrent delete could break, and no copy of the logic per framework.

- **Restriction** (``ids``): exact cosine over the named cells that pass the filter (for
  restrictions a ``where`` cannot say: LlamaIndex's ``node_ids``, LangChain's
  ``where_document``).
- **MMR** (``mmr_lambda``): ``fetch_k`` candidates by the usual ranking, then ``k`` picked by
  maximal marginal relevance (:func:`~magnetic_core._search.topk.maximal_marginal_relevance`).
- **Expansion** (``expand``): after each hit, up to ``expand`` other cells of its group that
  pass the filter, closest to the group centroid first, each scored by its own cosine and
  marked with ``Hit.expanded_from``; no cell appears twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from magnetic_core._index.index import HierIndex
from magnetic_core._search.candidates import Candidate
from magnetic_core._search.restricted import search_restricted
from magnetic_core._search.scorer import Scorer
from magnetic_core._search.search import SearchPlan, run_search
from magnetic_core._search.topk import maximal_marginal_relevance
from magnetic_core._search.views import cell_view, hit_view, hit_views
from magnetic_core._store.catalog import Catalog
from magnetic_core.types import Hit, Route

__all__ = ["Selection", "select_hits"]


@dataclass(frozen=True)
class Selection:
    """How the candidates of one search become its hits (validated by the facade).

    Attributes:
        ids: restrict the search to these cells (exact scoring), or None for all.
        expand: other cells of each hit's group to add after it (0 for none).
        mmr_lambda: re-rank by MMR with this relevance weight (None: plain ranking).
        fetch_k: candidates MMR chooses from (at least ``k``).
    """

    ids: tuple[str, ...] | None = None
    expand: int = 0
    mmr_lambda: float | None = None
    fetch_k: int = 0


def select_hits(
    index: HierIndex,
    catalog: Catalog,
    plan: SearchPlan,
    selection: Selection,
    explain: bool,
    scorer: Scorer | None = None,
    label_of: Callable[[str, int, list[str]], str] | None = None,
) -> list[Hit]:
    """The hits of ``plan`` shaped by ``selection``, best first (expansions after their hit).

    ``label_of`` (see :func:`~magnetic_core._search.views.hit_view`) leaves the hits' group
    labels to be worked out when first read.
    """
    fetch = plan.k if selection.mmr_lambda is None else max(plan.k, selection.fetch_k)
    if selection.ids is not None:
        found = _restricted(index, catalog, plan, selection.ids, fetch)
    else:
        found = run_search(
            index, catalog, plan if fetch == plan.k else replace(plan, k=fetch), scorer
        )
    if selection.mmr_lambda is not None and found:
        vectors = index.vectors([c.id for c in found])
        order = maximal_marginal_relevance(plan.vector, vectors, plan.k, selection.mmr_lambda)
        found = [found[i] for i in order]
    if not selection.expand:
        return hit_views(catalog, found, explain, label_of)
    shown = {c.id for c in found}
    hits: list[Hit] = []
    for cand in found:
        hits.append(hit_view(catalog, cand, explain, label_of))
        hits.extend(_expansion(index, catalog, plan, cand, selection.expand, shown, explain))
    return hits


def _restricted(
    index: HierIndex, catalog: Catalog, plan: SearchPlan, ids: Sequence[str], k: int
) -> list[Candidate]:
    """Exact search among ``ids`` that exist, pass the filter and are not excluded."""
    records = catalog.records
    allowed = [
        c
        for c in dict.fromkeys(ids)
        if c in records
        and c not in plan.exclude
        and (plan.predicate is None or plan.predicate(records[c].metadata))
    ]
    return search_restricted(index, allowed, plan.vector, k)


def _expansion(
    index: HierIndex,
    catalog: Catalog,
    plan: SearchPlan,
    hit: Candidate,
    n: int,
    shown: set[str],
    explain: bool,
) -> list[Hit]:
    """Up to ``n`` cells of the hit's group not shown yet, closest to the centroid first."""
    group = hit.group
    rows = group.view
    centroid = index.centroids[group.slot]
    order = np.argsort(-(rows @ centroid), kind="stable")
    records = catalog.records
    label = catalog.label(group.gid, group.version, group.ids)[0]
    out: list[Hit] = []
    for i in order:
        cid = group.ids[int(i)]
        if cid in shown or cid in plan.exclude:
            continue
        if plan.predicate is not None and not plan.predicate(records[cid].metadata):
            continue
        shown.add(cid)
        score = float(rows[int(i)] @ plan.vector)
        route = None
        if explain:
            csim = float(centroid @ plan.vector)
            route = Route(("expansion",), csim, 0.0, 0.0, hit.fallback_ran, hit.probed_groups)
        cell = cell_view(index, catalog, cid)
        out.append(Hit(cell, score, score, group.gid, label, route, expanded_from=hit.id))
        if len(out) == n:
            break
    return out
