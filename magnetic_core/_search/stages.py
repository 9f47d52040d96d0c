"""The centroid, entity and lexical stages of one query: which groups are probed, which
cells an entity boosts, and the BM25 scores of the query's words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from magnetic_core._index.index import HierIndex
from magnetic_core._store.catalog import Catalog

if TYPE_CHECKING:
    from magnetic_core._search.search import SearchPlan
    from magnetic_core._text.lexical import LexicalIndex

__all__ = ["Stages", "lexical_scores"]


@dataclass
class Stages:
    """What the centroid, entity and lexical stages found for one query."""

    slots: np.ndarray  # probed group slots (centroid stage, then entity routes), int64
    centroid_slots: np.ndarray
    entity_slots: set[int]
    boosted: set[str]
    lexical: tuple[np.ndarray, np.ndarray] | None
    lexical_ids: set[str]
    _boosted_docs: np.ndarray | None = field(default=None, repr=False)

    @classmethod
    def of(cls, index: HierIndex, catalog: Catalog, plan: SearchPlan, probe: np.ndarray) -> Stages:
        boosted: set[str] = set()
        entity_slots: set[int] = set()
        slots = np.sort(probe)
        if plan.entities:
            # Cells of entities held by few enough cells boost; of rarer ones, route too.
            n = len(catalog)
            boost_limit = max(10, int(plan.max_entity_share * n))
            route_limit = max(10, int(plan.max_route_cells / max(n, 1) * n))
            loc = index.loc
            for entity in plan.entities:
                cells = catalog.entity_cells.get(entity)
                if not cells or len(cells) > boost_limit:
                    continue
                boosted |= cells
                if len(cells) <= route_limit:
                    entity_slots.update(loc[c].slot for c in cells if c in loc)
            if entity_slots:
                slots = np.union1d(probe, np.fromiter(entity_slots, np.int64, len(entity_slots)))
        return cls(slots, probe, entity_slots, boosted, lexical_scores(catalog, plan), set())

    def boosted_docs(self, lexical: LexicalIndex) -> np.ndarray:
        """The boosted cells' document numbers in ``lexical``, ascending (made once)."""
        docs = self._boosted_docs
        if docs is None:
            docs = np.sort(lexical.numbers(self.boosted))
            self._boosted_docs = docs = docs[np.searchsorted(docs, 0) :]
        return docs

    def plain(self, plan: SearchPlan) -> bool:
        """Whether the best k by cosine are the answer (nothing re-ranks them)."""
        boosts = bool(self.boosted) and plan.entity_boost != 0.0
        return not boosts and self.lexical is None and not plan.exclude


def lexical_scores(catalog: Catalog, plan: SearchPlan) -> tuple[np.ndarray, np.ndarray] | None:
    """BM25 ``(docs, scores)`` of the query's words, or None when the stage is off or idle."""
    if plan.lexical_weight <= 0 or not plan.lexical_terms:
        return None
    docs, vals = catalog.lexical.scores(plan.lexical_terms)
    return (docs, vals) if vals.size else None
