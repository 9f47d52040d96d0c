"""Fusing the search signals into one ranking score: cosine, entity boost, BM25, context.

Each candidate's ranking score is its exact cosine, plus the entity boost when it holds a
query entity, plus ``lexical_weight`` times its BM25 over the query's best BM25 (so the
weight means the same for every query), plus, for cells that belong to a conversation
thread (see :mod:`magnetic_core._search.context`), ``context_weight`` times the best
ranking score among its neighbouring turns and ``session_weight`` times the best in its
thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from magnetic_core._search.context import lift

if TYPE_CHECKING:
    from magnetic_core._index.index import HierIndex
    from magnetic_core._search.search import SearchPlan, _Pool
    from magnetic_core._store.catalog import Catalog

__all__ = ["Fused", "fuse"]

# The best cells whose neighbours are lifted (a bound on the work per query).
CONTEXT_TOP = 64


@dataclass
class Fused:
    """The pool's ranking terms, in parallel with ``ids`` (None for a term that is off)."""

    ids: list[str]
    cosine: np.ndarray
    boost: np.ndarray | None
    lexical: np.ndarray | None
    context: np.ndarray | None
    rank: np.ndarray

    def keep(self, rows: np.ndarray) -> Fused:
        """The same terms for the given rows only."""

        def take(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[rows]

        return Fused(
            [self.ids[i] for i in rows.tolist()],
            self.cosine[rows],
            take(self.boost),
            take(self.lexical),
            take(self.context),
            self.rank[rows],
        )

    def row(self, i: int) -> tuple[str, float, float, float, float]:
        """``(id, cosine, boost, lexical, context)`` of row ``i``."""

        def at(a: np.ndarray | None) -> float:
            return 0.0 if a is None else float(a[i])

        return (
            self.ids[i],
            float(self.cosine[i]),
            at(self.boost),
            at(self.lexical),
            at(self.context),
        )


def fuse(
    index: HierIndex,
    pool: _Pool,
    boosted: set[str],
    lexical: tuple[np.ndarray, np.ndarray] | None,
    catalog: Catalog,
    plan: SearchPlan,
) -> Fused:
    """The ranking terms of every pooled cell (the pool gains the best cells' neighbours)."""
    lifting = (plan.context_weight > 0.0 or plan.session_weight > 0.0) and len(catalog.threads) > 0
    if lifting and plan.context_weight > 0.0 and pool.ids:
        base = _terms(pool.ids, pool.scores, boosted, lexical, catalog, plan)
        top = np.argsort(-base.rank, kind="stable")[:CONTEXT_TOP].tolist()
        threads = catalog.threads
        pool.extend(index, (nb for i in top for nb in threads.neighbours(pool.ids[i])), plan.vector)
    fused = _terms(pool.ids, pool.scores, boosted, lexical, catalog, plan)
    if lifting and fused.ids:
        lifted = lift(
            catalog.threads,
            fused.ids,
            fused.rank,
            plan.context_weight,
            plan.session_weight,
            CONTEXT_TOP,
        )
        fused.context = lifted - fused.rank
        fused.rank = lifted
    return fused


def _terms(
    ids: list[str],
    scores: np.ndarray,
    boosted: set[str],
    lexical: tuple[np.ndarray, np.ndarray] | None,
    catalog: Catalog,
    plan: SearchPlan,
) -> Fused:
    boosts = None
    if boosted and plan.entity_boost != 0.0:
        hit = np.fromiter((cid in boosted for cid in ids), dtype=bool, count=len(ids))
        boosts = hit.astype(np.float32) * np.float32(plan.entity_boost)
    lex = None
    if lexical is not None:
        # BM25 normalised by the query's best BM25, so the weight means the same for every
        # query: the best lexical match gains ``lexical_weight`` on top of its cosine.
        docs, vals = lexical
        scale = np.float32(plan.lexical_weight / float(vals.max()))
        lex = catalog.lexical.lookup(ids, docs, vals) * scale
    rank = scores
    if boosts is not None:
        rank = rank + boosts
    if lex is not None:
        rank = rank + lex
    return Fused(ids, scores, boosts, lex, None, rank)
