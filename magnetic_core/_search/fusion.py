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
from magnetic_core._search.topk import top_indices

if TYPE_CHECKING:
    from magnetic_core._index.index import HierIndex
    from magnetic_core._search.exact import Pool
    from magnetic_core._search.scorer import Scorer
    from magnetic_core._search.search import SearchPlan
    from magnetic_core._search.stages import Stages
    from magnetic_core._store.catalog import Catalog

__all__ = ["Fused", "boost_terms", "fuse", "rank", "settle", "settled_rank"]

# The best cells whose neighbours are lifted (a bound on the work per query).
CONTEXT_TOP = 64


@dataclass
class Fused:
    """The ranking terms of a pool's rows (``at``: which rows, None for all in order), in
    parallel (None for a term that is off)."""

    pool: Pool
    cosine: np.ndarray
    boost: np.ndarray | None
    lexical: np.ndarray | None
    context: np.ndarray | None
    rank: np.ndarray
    at: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.rank.shape[0])

    @property
    def ids(self) -> list[str]:
        """The rows' cell ids."""
        ids = self.pool.ids
        return ids if self.at is None else [ids[i] for i in self.at.tolist()]

    def keep(self, rows: np.ndarray) -> Fused:
        """The same terms for the given rows only."""

        def take(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[rows]

        return Fused(
            self.pool,
            self.cosine[rows],
            take(self.boost),
            take(self.lexical),
            take(self.context),
            self.rank[rows],
            rows if self.at is None else self.at[rows],
        )

    def concat(self, more: Fused) -> Fused:
        """These rows followed by ``more``'s, both every row of one pool in order (terms
        off in both stay off)."""

        def cat(a: np.ndarray | None, b: np.ndarray | None, n: int, m: int) -> np.ndarray | None:
            if a is None and b is None:
                return None
            a = np.zeros(n, np.float32) if a is None else a
            b = np.zeros(m, np.float32) if b is None else b
            return np.concatenate([a, b])

        n, m = len(self), len(more)
        return Fused(
            more.pool,
            np.concatenate([self.cosine, more.cosine]),
            cat(self.boost, more.boost, n, m),
            cat(self.lexical, more.lexical, n, m),
            None,
            np.concatenate([self.rank, more.rank]),
        )

    def row(self, i: int) -> tuple[str, float, float, float, float]:
        """``(id, cosine, boost, lexical, context)`` of row ``i``."""

        def at(a: np.ndarray | None) -> float:
            return 0.0 if a is None else float(a[i])

        return (
            self.pool.id_at(i if self.at is None else int(self.at[i])),
            float(self.cosine[i]),
            at(self.boost),
            at(self.lexical),
            at(self.context),
        )


def fuse(
    index: HierIndex,
    pool: Pool,
    stages: Stages,
    catalog: Catalog,
    plan: SearchPlan,
) -> Fused:
    """The ranking terms of every pooled cell (the pool gains the best cells' neighbours)."""
    fused = _terms(pool, 0, stages, catalog, plan)
    threads = catalog.threads
    if not len(threads) or not len(fused):
        return fused
    if plan.context_weight <= 0.0 and plan.session_weight <= 0.0:
        return fused
    if plan.context_weight > 0.0:
        # The best cells' neighbours join the pool, so a lifted turn can come back.
        have = len(pool)
        top = top_indices(fused.rank, CONTEXT_TOP).tolist()
        ids = pool.ids
        pool.extend(index, (nb for i in top for nb in threads.neighbours(ids[i])), plan.vector)
        if len(pool) > have:
            fused = fused.concat(_terms(pool, have, stages, catalog, plan))
    lifted = lift(
        threads, fused.ids, fused.rank, plan.context_weight, plan.session_weight, CONTEXT_TOP
    )
    fused.context = lifted - fused.rank
    fused.rank = lifted
    return fused


def settle(pool: Pool, stages: Stages, catalog: Catalog, plan: SearchPlan, scorer: Scorer) -> None:
    """Score the pool's pending rows (a text query's coded probe) that can still reach the
    best ``k``: each row's entity and lexical terms are known by now, so the rows are read
    best first by approximate cosine plus those terms, until the rest are out of reach of
    the ranking scores seen (``scorer.RERANK_SDS``). The rows not read leave the pool.

    Pools that threads lift or exclusions thin are never pending (their ranking is not
    the sum of these terms alone).
    """
    rows = pool.pending
    if rows is None:
        return
    from magnetic_core._search.scorer import _kernels  # numba: loaded by the probe

    m = rows.shape[0]
    terms = _terms(pool, 0, stages, catalog, plan)
    bonus = np.zeros(len(pool), np.float32)
    if terms.boost is not None:
        bonus += terms.boost
    if terms.lexical is not None:
        bonus += terms.lexical
    approx = pool.scores[:m]
    order = _kernels().top_k(approx + bonus[:m], m)
    others = terms.rank[m:]
    exact = scorer.score_prefix(
        rows[order], approx[order], bonus[:m][order], others, plan.vector, plan.k
    )
    pool.settled(order[: exact.shape[0]], exact)


def settled_rank(
    pool: Pool, stages: Stages, catalog: Catalog, plan: SearchPlan, scorer: Scorer
) -> list[tuple[str, float, float, float, float]] | None:
    """:func:`settle` then :func:`rank` in one compiled pass, for a pending pool that
    :func:`rank` would rank compiled (a text query's coded probe: its BM25 at hand, no
    filter, exclusion or thread lift); None for any other pool, which the caller settles
    and ranks. The pool is left as it was: only the hits are wanted of it."""
    pending = pool.pending
    if pending is None or not len(pool) or not _compiled(pool, stages, catalog, plan):
        return None
    docs, boosted, boost, bm25, scale = _kernel_terms(pool, stages, catalog, plan)
    rows, cosines, boosts, lex, _ = scorer.settled_top(
        pool.scores, docs, boosted, boost, bm25, scale, pending, plan.vector, plan.k
    )
    return [
        (pool.id_at(r), c, b, x, 0.0)
        for r, c, b, x in zip(
            rows.tolist(), cosines.tolist(), boosts.tolist(), lex.tolist(), strict=True
        )
    ]


def _terms(
    pool: Pool,
    start: int,
    stages: Stages,
    catalog: Catalog,
    plan: SearchPlan,
) -> Fused:
    """The terms of the pool's rows from ``start`` on."""
    scores = pool.scores[start:]
    boosts = None
    if stages.boosting and plan.entity_boost != 0.0:
        boosts = _boosted(pool, start, stages, catalog).astype(np.float32)
        boosts *= np.float32(plan.entity_boost)
    lex = None
    if stages.lexical_terms:
        # BM25 normalised by the query's best BM25, so the weight means the same for every
        # query: the best lexical match gains ``lexical_weight`` on top of its cosine.
        bm25 = pool.bm25
        if bm25 is None or stages.lexical_best is None:
            scored = stages.lexical
            assert scored is not None and stages.lexical_best is not None  # terms: scored
            bm25 = catalog.lexical.scores_at(pool.docs(catalog.lexical)[start:], *scored)
        else:
            bm25 = bm25[start:]
        lex = bm25 * np.float32(plan.lexical_weight / stages.lexical_best)
    rank = scores
    if boosts is not None:
        rank = rank + boosts
    if lex is not None:
        rank = rank + lex
    at = np.arange(start, len(pool)) if start else None
    return Fused(pool, scores, boosts, lex, None, rank, at)


def _boosted(pool: Pool, start: int, stages: Stages, catalog: Catalog) -> np.ndarray:
    """Whether each pooled cell from ``start`` on holds a query entity: by document number
    when the pool names its cells so, else by id."""
    lexical = catalog.lexical
    n = len(pool) - start
    if pool.has_docs_only():
        boosted_docs = stages.boosted_docs(catalog)
        # Membership in the sorted boosted numbers by one search (np.isin costs ten
        # times more on a few hundred numbers).
        if not boosted_docs.shape[0]:
            return np.zeros(n, bool)
        docs = pool.docs(lexical)[start:]
        at = np.minimum(np.searchsorted(boosted_docs, docs), boosted_docs.shape[0] - 1)
        return boosted_docs[at] == docs
    ids = pool.ids[start:] if start else pool.ids
    return np.fromiter(map(stages.boosted.__contains__, ids), dtype=bool, count=n)


def rank(
    index: HierIndex,
    pool: Pool,
    stages: Stages,
    catalog: Catalog,
    plan: SearchPlan,
) -> list[tuple[str, float, float, float, float]]:
    """The best ``k`` (id, cosine, boost, lexical, context) by their sum that pass the filter."""
    if not len(pool):
        return []
    if _compiled(pool, stages, catalog, plan):
        return _compiled_rank(pool, stages, catalog, plan)
    fused = fuse(index, pool, stages, catalog, plan)
    k = plan.k
    if plan.exclude:
        # Excluded cells (few) are dropped before the top k are taken.
        drop = np.fromiter((c in plan.exclude for c in fused.ids), dtype=bool, count=len(fused))
        if drop.any():
            fused = fused.keep(np.flatnonzero(~drop))
    rank = fused.rank
    if plan.predicate is None:
        if len(fused) > k:
            top = np.argpartition(-rank, k - 1)[:k]
            order = top[np.argsort(-rank[top], kind="stable")]
        else:
            order = np.argsort(-rank, kind="stable")
        return [fused.row(int(i)) for i in order]
    # With a filter, walk candidates best first and test lazily: only about k/selectivity
    # predicates run.
    picked = []
    records = catalog.records
    for i in np.argsort(-rank, kind="stable").tolist():
        row = fused.row(i)
        if plan.predicate(records[row[0]].metadata):
            picked.append(row)
            if len(picked) == k:
                break
    return picked


# No document numbers (an empty int64 array, never written to).
_NO_DOCS = np.empty(0, np.int64)


def _compiled(pool: Pool, stages: Stages, catalog: Catalog, plan: SearchPlan) -> bool:
    """Whether the pool is ranked in one compiled pass: named by document number, its BM25
    at hand (or the stage off), no filter, no exclusion and no conversation lift."""
    if plan.predicate is not None or plan.exclude or not pool.has_docs_only():
        return False
    if stages.lexical_terms and (pool.bm25 is None or stages.lexical_best is None):
        return False
    threaded = plan.context_weight > 0.0 or plan.session_weight > 0.0
    return not threaded or not len(catalog.threads)


def _kernel_terms(
    pool: Pool, stages: Stages, catalog: Catalog, plan: SearchPlan
) -> tuple[np.ndarray, np.ndarray, np.float32, np.ndarray, np.float32]:
    """What the compiled rankings read of a pool :func:`_compiled` accepts: ``(docs,
    boosted docs, boost, bm25, lexical scale)`` (zeros for a term that is off)."""
    lexical = catalog.lexical
    boosted, boost = boost_terms(stages, catalog, plan)
    bm25, scale = pool.bm25, np.float32(0.0)
    if stages.lexical_terms and stages.lexical_best is not None:
        scale = np.float32(plan.lexical_weight / stages.lexical_best)
    if bm25 is None:
        bm25 = np.zeros(len(pool), np.float32)
    return pool.docs(lexical), boosted, boost, bm25, scale


def boost_terms(
    stages: Stages, catalog: Catalog, plan: SearchPlan
) -> tuple[np.ndarray, np.float32]:
    """What the compiled rankings read of the entity boost: ``(boosted cells' document
    numbers ascending, boost)``; no numbers and 0 when the boost is off."""
    if stages.boosting and plan.entity_boost != 0.0:
        return stages.boosted_docs(catalog), np.float32(plan.entity_boost)
    return _NO_DOCS, np.float32(0.0)


def _compiled_rank(
    pool: Pool, stages: Stages, catalog: Catalog, plan: SearchPlan
) -> list[tuple[str, float, float, float, float]]:
    """:func:`rank` of a pool that :func:`_compiled` accepts (the same terms and sums)."""
    from magnetic_core._search.fusion_kernel import fused_top  # numba: loaded by the probe

    docs, boosted, boost, bm25, scale = _kernel_terms(pool, stages, catalog, plan)
    rows, boosts, lex = fused_top(pool.scores, docs, boosted, boost, bm25, scale, plan.k)
    cosines = pool.scores[rows].tolist()
    return [
        (pool.id_at(r), c, b, x, 0.0)
        for r, c, b, x in zip(rows.tolist(), cosines, boosts.tolist(), lex.tolist(), strict=True)
    ]
