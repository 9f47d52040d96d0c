"""The centroid, entity and lexical stages of one query: which groups are probed, which
cells an entity boosts, and the BM25 scores of the query's words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from magnetic_core._index.index import HierIndex
from magnetic_core._store.catalog import Catalog

if TYPE_CHECKING:
    from magnetic_core._search.scorer import Scorer
    from magnetic_core._search.search import SearchPlan
    from magnetic_core._text.lexical import LexicalIndex

__all__ = [
    "Stages",
    "boosted_docs",
    "entity_stage",
    "entity_cells_of",
]


@dataclass
class Stages:
    """What the centroid, entity and lexical stages found for one query."""

    slots: np.ndarray  # probed group slots (centroid stage, then entity routes), int64
    centroid_slots: np.ndarray
    entity_slots: set[int]
    # The boosting entities and their cells; the union (``boosted``) and its document
    # numbers (``boosted_docs``) are made when first asked for.
    boosting: list[tuple[str, set[str]]]
    # The query's words when the lexical stage runs (some cell holds one), else ().
    lexical_terms: tuple[str, ...]
    # The best BM25 cells that joined the candidates, by document number (their ids, in
    # ``lexical_ids``, are made only for a hit's route).
    lexical_top: np.ndarray | None = None
    # The query's best BM25, once a search has it (see ``lexical``).
    lexical_best: float | None = None
    # The BM25 kernels' arguments for ``lexical_terms`` (``BM25Queries.kernel_args``),
    # made once: they also say whether any cell holds a word.
    lexical_args: tuple[Any, ...] | None = None
    _lexicon: LexicalIndex | None = field(default=None, repr=False)
    _lexical: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _boosted: set[str] | None = field(default=None, repr=False)
    _boosted_docs: np.ndarray | None = field(default=None, repr=False)
    _lexical_ids: set[str] | None = field(default=None, repr=False)

    @classmethod
    def of(
        cls,
        index: HierIndex,
        catalog: Catalog,
        plan: SearchPlan,
        probe: np.ndarray,
        scorer: Scorer | None = None,
    ) -> Stages:
        """The stages of ``plan`` around the centroid stage's ``probe`` (``scorer``: the
        index's, when current, to find the routed cells' groups by array operations)."""
        slots = np.sort(probe)
        boosting, entity_slots = entity_stage(index, catalog, plan, scorer)
        if entity_slots:
            # A merge of the two sorted slot lists (np.union1d sorts their concatenation).
            from magnetic_core._search.join_kernel import merge_unique  # numba

            slots = merge_unique(slots, np.array(sorted(entity_slots), np.int64))
        words: tuple[str, ...] = ()
        args = None
        if plan.lexical_weight > 0 and plan.lexical_terms:
            args = catalog.lexical.kernel_args(plan.lexical_terms)
            words = plan.lexical_terms if args is not None else ()
        return cls(
            slots, probe, entity_slots, boosting, words, lexical_args=args,
            _lexicon=catalog.lexical,
        )  # fmt: skip

    @property
    def lexical(self) -> tuple[np.ndarray, np.ndarray] | None:
        """BM25 ``(docs, scores)`` of every cell holding a query word (None when the stage
        is off), made when first asked for: a coded probe's pool gets what it needs of
        them in one pass (``Scorer.lexical_join``) and never asks."""
        if not self.lexical_terms or self._lexicon is None:
            return None
        if self._lexical is None:
            self._lexical = self._lexicon.scores_of(self.lexical_args)
            self.lexical_best = float(self._lexical[1].max())
        return self._lexical

    @property
    def lexical_ids(self) -> set[str]:
        """The ids of the best BM25 cells that joined the candidates (``lexical_top``)."""
        ids = self._lexical_ids
        if ids is None:
            top = self.lexical_top
            if top is None or self._lexicon is None:
                return set()
            ids = self._lexical_ids = set(self._lexicon.cids_of(top))
        return ids

    @property
    def boosted(self) -> set[str]:
        """The cells holding a boosting entity of the query."""
        cells = self._boosted
        if cells is None:
            cells = set().union(*(c for _, c in self.boosting)) if self.boosting else set()
            self._boosted = cells
        return cells

    def boosted_docs(self, catalog: Catalog) -> np.ndarray:
        """The boosted cells' document numbers in ``catalog.lexical``, ascending (made once
        per query: :func:`boosted_docs`)."""
        docs = self._boosted_docs
        if docs is None:
            docs = self._boosted_docs = boosted_docs(catalog, self.boosting)
        return docs

    def plain(self, plan: SearchPlan) -> bool:
        """Whether the best k by cosine are the answer (nothing re-ranks them)."""
        boosts = bool(self.boosting) and plan.entity_boost != 0.0
        return not boosts and not self.lexical_terms and not plan.exclude


def entity_stage(
    index: HierIndex, catalog: Catalog, plan: SearchPlan, scorer: Scorer | None = None
) -> tuple[list[tuple[str, set[str]]], set[int]]:
    """The entity stage of ``plan``: ``(boosting, routed slots)``, the query's entities
    held by few enough cells to boost them, with their cells, and the slots of the groups
    holding the cells of the rarer ones (:func:`entity_cells_of`), which the query probes
    too."""
    boosting, routing = entity_cells_of(catalog, plan)
    routed: set[int] = set()
    for entity, cells in routing:
        routed.update(_slots_of(index, catalog, scorer, entity, cells))
    return boosting, routed


def entity_cells_of(
    catalog: Catalog, plan: SearchPlan
) -> tuple[list[tuple[str, set[str]]], list[tuple[str, set[str]]]]:
    """``(boosting, routing)``: the query's entities held by few enough cells to boost
    them, and those of them rare enough to route the query to their groups, each with
    its cells."""
    boosting: list[tuple[str, set[str]]] = []
    routing: list[tuple[str, set[str]]] = []
    if plan.entities:
        n = len(catalog)
        boost_limit = max(10, int(plan.max_entity_share * n))
        route_limit = max(10, int(plan.max_route_cells / max(n, 1) * n))
        for entity in plan.entities:
            cells = catalog.entity_cells.get(entity)
            if not cells or len(cells) > boost_limit:
                continue
            boosting.append((entity, cells))
            if len(cells) <= route_limit:
                routing.append((entity, cells))
    return boosting, routing


def boosted_docs(catalog: Catalog, boosting: list[tuple[str, set[str]]]) -> np.ndarray:
    """The document numbers of the cells of the boosting entities (:func:`entity_cells_of`)
    in ``catalog.lexical``, ascending, from each entity's numbers (``Catalog.entity_docs``)."""
    parts = [catalog.entity_docs(e) for e, _ in boosting]
    if not parts:
        return np.empty(0, np.int64)
    docs = parts[0]
    if len(parts) > 1:
        # A merge of the sorted numbers (np.unique sorts their concatenation: 64 us for a
        # query's entities at 100K cells).
        from magnetic_core._search.join_kernel import merge_unique  # numba

        for part in parts[1:]:
            docs = merge_unique(docs, part)
    return docs


def _slots_of(
    index: HierIndex, catalog: Catalog, scorer: Scorer | None, entity: str, cells: set[str]
) -> list[int]:
    """The slots of the groups holding ``cells`` (the cells of ``entity``): from the
    scorer's rows where it holds them, by id for the others."""
    loc = index.loc
    if scorer is None:
        return [loc[c].slot for c in cells if c in loc]
    lexical = catalog.lexical
    docs = catalog.entity_docs(entity)
    rows = scorer.doc_rows(docs, lexical)
    held = rows >= 0
    found = scorer.row_slots(rows[held]).tolist()
    if not held.all():
        found += [loc[c].slot for c in lexical.cids_of(docs[~held]) if c in loc]
    return found
