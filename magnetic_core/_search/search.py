"""Search through the concept layer: centroids, probed cells, entities, words, then fallback.

1. Centroid stage: cosine of the query with every centroid (in large stores, one compiled
   scan of their int8 codes; past ``centroid_tree.TREE_FROM`` groups, only the centroids
   of the clusters of centroids nearest the query, :mod:`magnetic_core._search.centroid_tree`);
   the top ``n_probe`` groups, and more until they hold ``min_cells`` cells (a work budget
   independent of group sizes).
2. Cell stage: the probed groups' cells. Small probes are scored exactly. In large stores,
   unfiltered probes go through the scorer (:mod:`magnetic_core._search.scorer`): the probed
   groups' tight sub-lists are ranked by their means, the cells of the best ones
   (``min_cells`` in all) are scored by four-bit residual code, and the best ``rerank``
   exactly; when the budget is a quarter of the store or more, every group is probed. The scorer is
   brought up to date with the groups a write changed before the query is scored.
3. Entity stage: groups holding a rare query entity are probed too; cells holding a query
   entity get a boost.
4. Lexical stage: the best BM25 cells for the query's words join the candidates, and every
   candidate's normalised BM25 score, times ``lexical_weight``, is added to its ranking score.
5. Flat fallback: when fewer than ``k`` candidates pass the filter, every cell is scored.
The final ranking is exact over the candidates (cosine + boost + lexical), so ``k`` results
come back whenever ``k`` cells match. Probing every group with no boost and no lexical weight
is exact flat search.

A coded probe names its cells by BM25 document number, the one integer numbering the text
stages share: the scorer maps numbers to its rows (slots and exact cosines by address), an
entity's numbers are kept until the lexical index changes, BM25 gives the pool's scores in
the pass that finds its best matches, and the pool is ranked in one compiled pass
(:mod:`magnetic_core._search.fusion_kernel`). Ids are made only for the hits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from magnetic_core._index.index import Group, HierIndex
from magnetic_core._search.candidates import Candidate, by_cosine, candidates, plain_candidates
from magnetic_core._search.exact import Pool, exact_pool, group_sizes, matvec
from magnetic_core._search.fusion import _NO_DOCS, boost_terms, rank, settle, settled_rank
from magnetic_core._search.scorer import FULL_SCAN_SHARE, Scorer, _kernels
from magnetic_core._search.stages import Stages, boosted_docs, entity_cells_of
from magnetic_core._store.catalog import Catalog
from magnetic_core._text.lexical import LexicalIndex
from magnetic_core.filters import Predicate

__all__ = [
    "Candidate",
    "SearchPlan",
    "plain_search",
    "probe_budget",
    "run_search",
    "text_search",
]


@dataclass(frozen=True)
class SearchPlan:
    """One query's parameters after validation."""

    vector: np.ndarray
    k: int
    n_probe: int
    entities: tuple[str, ...]
    entity_boost: float
    predicate: Predicate | None
    max_entity_share: float = 0.05
    max_route_cells: int = 256
    lexical_terms: tuple[str, ...] = ()
    lexical_weight: float = 0.0
    lexical_candidates: int = 50
    # Weights of the best neighbouring turn's score and of the thread's best score, for
    # cells in conversation threads (0: off).
    context_weight: float = 0.0
    session_weight: float = 0.0
    sketch_rank: int = 0
    rerank: int = 128  # at least 4 k are kept
    min_cells: int | None = 0  # None: scaled to the store (probe_budget)
    list_size: int = 32
    group_spread: float = 2.0
    # Cells left out whatever they score (superseded cells under ``current_only``).
    exclude: frozenset[str] = frozenset()
    # Whether candidates carry what a hit's route shows (centroid similarity, stages).
    routes: bool = True

    def for_vector(self, vector: np.ndarray) -> SearchPlan:
        """This plan for another query vector, in one copy of its fields
        (``dataclasses.replace`` sets each field again: several microseconds a query)."""
        plan = object.__new__(SearchPlan)
        plan.__dict__.update(self.__dict__, vector=vector)
        return plan

    def for_text(
        self, vector: np.ndarray, entities: tuple[str, ...], lexical_terms: tuple[str, ...]
    ) -> SearchPlan:
        """:meth:`for_vector` for a query text's vector, entities and words."""
        plan = object.__new__(SearchPlan)
        plan.__dict__.update(
            self.__dict__, vector=vector, entities=entities, lexical_terms=lexical_terms
        )
        return plan


# The default cell budget of a query (``MemoryConfig.probe_cells`` None): ``PROBE_SCALE``
# times the square root of the store's size, between ``PROBE_FLOOR`` and ``PROBE_CAP``.
# Measured on Reuters MiniLM passages (benchmarks/latency_recall.py): tie-aware recall@10
# reaches 0.98 at about 2,000 cells of 10K, 5,000 of 25K, 6,000-8,000 of 40K and 12,000 of
# 100K; past that, recall at a fixed budget falls slowly (0.975 at 1M synthetic cells), so
# the budget, and the latency, stay flat. The cap was 12,000 until the exact rerank of a
# plain vector query learnt to stop early (``scorer.RERANK_SDS``): at 100K that saved more
# time than the last thousand cells cost (12,000 cells: 0.735 -> 0.662 ms, recall@10
# 0.9857 -> 0.9840; 13,000: 0.694 ms, 0.9873), so the cap (and the scale, 40 before, so
# the cap is still reached below 100K) buys the recall back.
PROBE_SCALE = 42.0
PROBE_FLOOR = 4096
PROBE_CAP = 13000
# A store whose cell budget covers at least this share of it is scored exactly, without the
# scorer: the exact pass reads little more than the budget, and nothing has to be coded again
# after writes (the soak's stream at 4.6K cells: a search re-coded 3.4 changed groups, 4.6 ms,
# and scored the other changed ones exactly, 2.4 ms, against 1.2 ms for a whole search on
# the settled store). With the default budget, stores up to 5,461 cells.
EXACT_SHARE = 0.75


def probe_budget(n_cells: int) -> int:
    """Cells a query scores by default in a store of ``n_cells`` cells.

    >>> probe_budget(1_000), probe_budget(25_000), probe_budget(1_000_000)
    (4096, 6641, 13000)
    """
    return min(PROBE_CAP, max(PROBE_FLOOR, math.ceil(PROBE_SCALE * math.sqrt(n_cells))))


def run_search(
    index: HierIndex, catalog: Catalog, plan: SearchPlan, scorer: Scorer | None = None
) -> list[Candidate]:
    """Run the staged search and return at most ``k`` candidates, best first.

    Args:
        index: the hierarchy.
        catalog: the cell records (entities, words, metadata).
        plan: the query.
        scorer: the index's scorer (its owner keeps it across queries); None scores every
            probed cell exactly.
    """
    n_groups = len(index.slot_groups)
    if n_groups == 0 or plan.k <= 0:
        return []
    q = plan.vector
    scorer, usable, budget, group_cells = _prepared(index, plan, scorer)
    keep = max(plan.rerank, 4 * plan.k)
    if usable and scorer is not None and plan.n_probe < n_groups and _plain(catalog, plan):
        plain = _one_call(index, plan, scorer, budget, group_cells, keep)
        if plain is not None:
            return plain_candidates(*plain)
    if scorer is not None:
        probe = scorer.probe_slots(q, group_sizes(index), plan.n_probe, group_cells)
    else:
        sims = matvec(index.centroids, q)
        probe = _kernels().probe_groups(sims, group_sizes(index), plan.n_probe, group_cells)
    stages = Stages.of(index, catalog, plan, probe, scorer)
    if (
        usable
        and scorer is not None
        and plan.n_probe < n_groups
        and int(group_sizes(index)[stages.slots].sum()) > 16 * keep
    ):
        found = _coded(index, catalog, plan, stages, scorer, budget, keep)
        if not isinstance(found, Pool):
            return found
        pool = found
    else:
        pool = _exact(index, scorer, plan, stages, keep)
    picked = None
    if stages.lexical_terms:
        picked = _join_lexical(index, catalog, plan, stages, pool, scorer)
    if picked is None and scorer is not None:
        picked = settled_rank(pool, stages, catalog, plan, scorer)
    if picked is None:
        if scorer is not None:
            settle(pool, stages, catalog, plan, scorer)
        picked = rank(index, pool, stages, catalog, plan)
    fallback = len(picked) < plan.k and len(stages.slots) < n_groups
    if fallback:
        pool = exact_pool(index, scorer, range(n_groups), q)
        picked = rank(index, pool, stages, catalog, plan)
    return candidates(index, plan, stages, picked, fallback)


def plain_search(
    index: HierIndex, catalog: Catalog, plan: SearchPlan, scorer: Scorer | None
) -> tuple[list[str], list[Group], list[float], int] | None:
    """:func:`run_search` of a query only the cosine ranks (no text, filter, exclusion,
    thread lift or route), when one compiled call answers it: ``(ids, their groups, exact
    cosines, groups probed)``, best first, the candidates :func:`run_search` would return.
    None when the staged search must answer: a store scored exactly or without a usable
    scorer, a probe of every group, a probed group changed since it was coded, or fewer
    than ``k`` cells found.

    A plain vector query is most of an agent's and a benchmark's searches; answered here,
    it builds no candidates and its caller builds hits straight from the ids.
    """
    if scorer is None or plan.k <= 0 or not _plain(catalog, plan):
        return None
    ready, usable, budget, group_cells = _prepared(index, plan, scorer)
    if not usable or ready is None or len(index.slot_groups) <= plan.n_probe:
        return None
    return _one_call(index, plan, ready, budget, group_cells, max(plan.rerank, 4 * plan.k))


def text_search(
    index: HierIndex, catalog: Catalog, plan: SearchPlan, scorer: Scorer | None
) -> tuple[list[str], list[Group], list[float], list[float]] | None:
    """:func:`run_search` of a text query whose hits need no route (words scored, maybe
    entities; no filter, exclusion or thread lift), when one compiled call answers it:
    ``(ids, their groups, exact cosines, ranking scores)``, best first, the candidates
    :func:`run_search` would return. The entity stage runs first (it needs no probe), then
    the centroid stage, the coded probe, the boosted cells' join, the lexical stage and the
    ranking in one call (:meth:`Scorer.text`). None when the staged search must answer:
    what :func:`plain_search` leaves to it, no word any cell holds, or what the call
    leaves (a cell to be found by id).

    An agent's searches are mostly text; answered here, one builds no stages, pool or
    candidates, and the Python between the compiled steps (about 0.1 ms of a text query at
    100K cells) is not run.
    """
    if (
        scorer is None
        or plan.k <= 0
        or not plan.lexical_terms
        or plan.lexical_weight <= 0
        or plan.predicate is not None
        or plan.exclude
        or plan.routes
        or _threaded(catalog, plan)
    ):
        return None
    ready, usable, budget, group_cells = _prepared(index, plan, scorer)
    if not usable or ready is None or len(index.slot_groups) <= plan.n_probe:
        return None
    lexical = catalog.lexical
    args = lexical.kernel_args(plan.lexical_terms)
    if args is None:
        return None
    boosting, routing = entity_cells_of(catalog, plan)
    boost = plan.entity_boost if boosting else 0.0
    boosted = boosted_docs(catalog, boosting) if boost != 0.0 else _NO_DOCS
    routes = [catalog.entity_docs(e) for e, _ in routing]
    keep = max(plan.rerank, 4 * plan.k)
    return ready.text(
        plan.vector, group_sizes(index), plan.n_probe, group_cells, 16 * keep,
        _NO_DOCS if not routes else routes[0] if len(routes) == 1 else np.concatenate(routes),
        budget, keep, lexical, args, boosted, boost, boost > 0.0,
        max(plan.lexical_candidates, plan.k), plan.lexical_weight, plan.k,
    )  # fmt: skip


def _one_call(
    index: HierIndex, plan: SearchPlan, scorer: Scorer, budget: int, group_cells: int, keep: int
) -> tuple[list[str], list[Group], list[float], int] | None:
    """Nothing but the cosine ranks: the centroid stage and the probe in one call
    (:meth:`Scorer.plain`); None when it leaves the query to the stages or finds fewer
    than ``k`` cells."""
    plain = scorer.plain(
        plan.vector, group_sizes(index), plan.n_probe, group_cells, 16 * keep, budget, keep,
        plan.k,
    )  # fmt: skip
    if plain is None or len(plain[0]) < plan.k:
        return None
    return plain


def _join_lexical(
    index: HierIndex,
    catalog: Catalog,
    plan: SearchPlan,
    stages: Stages,
    pool: Pool,
    scorer: Scorer | None,
) -> list[tuple[str, float, float, float, float]] | None:
    """The best BM25 cells join the pool. A pool named by document number (a coded probe)
    that gains no thread neighbours gets its cells' BM25 in the same pass, so fusion reads
    it in place; others look it up in every match's score (``Stages.lexical``).

    A pool whose coded cells are still pending is also settled and ranked in that pass
    (``Scorer.lexical_settle``): then the ranked hits come back, as
    :func:`~magnetic_core._search.fusion.settled_rank` gives them, and the pool is left as
    it was; otherwise None, once the cells have joined."""
    lexical = catalog.lexical
    n_top = max(plan.lexical_candidates, plan.k)
    args = stages.lexical_args
    if (
        args is not None
        and pool.has_docs_only()
        and scorer is not None
        and not _threaded(catalog, plan)
    ):
        # (a pool named by number only comes from a coded probe: the scorer is there)
        q = plan.vector
        have = pool.docs(lexical)
        ranking = None
        if pool.pending is not None:
            # (a pending pool has no filter or exclusion: fusion ranks it compiled)
            boosted, boost = boost_terms(stages, catalog, plan)
            found, ranking = scorer.lexical_settle(
                lexical, args, have, n_top, q, pool.scores, pool.pending, boosted, boost,
                plan.lexical_weight, plan.k,
            )  # fmt: skip
        else:
            found = scorer.lexical_join(lexical, args, have, n_top, q)
        top, top_vals, at_pool, joined, scores, loose = found
        stages.lexical_best = float(top_vals[0])
        stages.lexical_top = top
        if ranking is not None and ranking[4] >= 0:
            docs, cosines, boosts, lex, _ = ranking
            return [
                (cid, c, b, x, 0.0)
                for cid, c, b, x in zip(
                    lexical.cids_of(docs), cosines.tolist(), boosts.tolist(), lex.tolist(),
                    strict=True,
                )
            ]  # fmt: skip
        pool.bm25 = at_pool
        _add_joined(index, lexical, pool, top, _EVERYWHERE, q, top_vals, joined, scores, loose)
        return None
    scored = stages.lexical
    if scored is None:
        return None
    top, _ = lexical.top_docs(*scored, n_top)
    top_ids = lexical.cids_of(top)
    pool.extend_docs(index, top, plan.vector, top_ids, scorer)
    stages.lexical_top = top
    return None


# The slots a pool's joins may come from when they may come from any (``join_rows``).
_EVERYWHERE = np.zeros(0, bool)


def _prepared(
    index: HierIndex, plan: SearchPlan, scorer: Scorer | None
) -> tuple[Scorer | None, bool, int, int]:
    """:func:`_ready`, then :func:`_budgets`: ``(scorer, usable, cells scored, cells of the
    groups probed)``. A scorer describing the index with every group coded keeps them for
    the next query of the same settings until the index changes: then ``sync`` has nothing
    to do, and the checks cost a query, with cold caches, about 18 us at 100K cells."""
    key = None
    if scorer is not None:
        key = (
            index, index.centroid_epoch, len(index), plan.predicate is None, plan.n_probe,
            plan.min_cells, plan.sketch_rank, plan.list_size, plan.group_spread,
        )  # fmt: skip
        settled = scorer.settled
        if settled is not None and settled[0] == key:
            usable, budget, group_cells = settled[1]
            return scorer, usable, budget, group_cells
    ready, usable = _ready(index, plan, scorer)
    budget, group_cells = _budgets(index, plan, usable)
    if ready is not None and ready.is_settled(index):
        ready.settled = (key, (usable, budget, group_cells))
    return ready, usable, budget, group_cells


def _ready(index: HierIndex, plan: SearchPlan, scorer: Scorer | None) -> tuple[Scorer | None, bool]:
    """The scorer brought up to date (None if it cannot describe the index), and whether
    its codes may pre-score this query (unfiltered only: a filter may reject most of the
    best)."""
    if scorer is None or _exact_store(index, plan):
        return None, False
    scorer.configure(plan.sketch_rank, plan.list_size)
    usable = scorer.sync(index)
    if not scorer.current(index):
        return None, False
    return scorer, usable and plan.predicate is None


def _exact_store(index: HierIndex, plan: SearchPlan) -> bool:
    """Whether the query's cell budget covers so much of the store that it is scored
    exactly (``EXACT_SHARE``)."""
    n = len(index)
    min_cells = probe_budget(n) if plan.min_cells is None else plan.min_cells
    return min_cells > 0 and min_cells >= EXACT_SHARE * n


def _budgets(index: HierIndex, plan: SearchPlan, usable: bool) -> tuple[int, int]:
    """``(cells scored, cells of the groups probed)`` for this query."""
    min_cells = probe_budget(len(index)) if plan.min_cells is None else plan.min_cells
    group_cells = min_cells
    budget = min_cells if min_cells > 0 else len(index)
    if usable and min_cells > 0:
        # Groups are probed wider than the cell budget; their best sub-lists fill it.
        group_cells = math.ceil(plan.group_spread * min_cells)
        if FULL_SCAN_SHARE * len(index) <= min_cells:
            group_cells = budget = len(index)
    return budget, group_cells


def _coded(
    index: HierIndex,
    catalog: Catalog,
    plan: SearchPlan,
    stages: Stages,
    scorer: Scorer,
    budget: int,
    keep: int,
) -> Pool | list[Candidate]:
    """The probed groups scored by code and reranked exactly: the answer itself when
    nothing re-ranks the best k by cosine, else the pool (with the boosted cells of the
    probed groups) that the other stages join; a pool without exclusions or thread lifts
    leaves the coded cells' exact scores pending until their terms are known
    (:func:`~magnetic_core._search.fusion.settle`)."""
    q = plan.vector
    # Only the best k are needed unless boosts, words or exclusions re-rank them.
    plain = stages.plain(plan)
    if plain:
        found = scorer.probe(index, stages.slots, q, budget, keep, plan.k)
        if len(found[0]) >= plan.k and not _threaded(catalog, plan):
            return by_cosine(index, plan, stages, *found)
        pool = Pool(*found)
    elif not plan.exclude and not _threaded(catalog, plan):
        # The other stages join the pool by BM25 document number (array operations); the
        # coded cells are scored once their terms are known (fusion.settle).
        lexical = catalog.lexical
        docs, scores, coded = scorer.probe_pending(index, stages.slots, q, budget, keep, lexical)
        pool = Pool(None, scores, docs, lexical)
        pool.pending = coded
    else:
        lexical = catalog.lexical
        docs, scores = scorer.probe_docs(index, stages.slots, q, budget, keep, lexical)
        pool = Pool(None, scores, docs, lexical)
    if stages.boosting and plan.entity_boost > 0:
        _extend_boosted(index, catalog, stages, scorer, pool, q)
    return pool


def _extend_boosted(
    index: HierIndex, catalog: Catalog, stages: Stages, scorer: Scorer, pool: Pool, q: np.ndarray
) -> None:
    """Add the boosted cells of the probed groups to a pool named by document number."""
    docs = stages.boosted_docs(catalog)
    if docs.shape[0]:
        probed = np.zeros(len(index.slot_groups), bool)
        probed[stages.slots] = True
        _join_docs(index, catalog.lexical, scorer, pool, docs, probed, q)


def _join_docs(
    index: HierIndex,
    lexical: LexicalIndex,
    scorer: Scorer,
    pool: Pool,
    docs: np.ndarray,
    probed: np.ndarray,
    q: np.ndarray,
    bm25: np.ndarray | None = None,
) -> None:
    """Add the cells of ``docs`` (distinct numbers) in ``probed`` slots (empty: in any)
    that a pool named by document number lacks, with their exact cosines: found and scored
    from the scorer's rows in one compiled pass (an entity can boost thousands of cells),
    by id only for the cells of groups changed since coded. ``bm25``: the BM25 of ``docs``."""
    joined, scores, loose = scorer.join_docs(docs, lexical, probed, pool.docs(lexical), q)
    _add_joined(index, lexical, pool, docs, probed, q, bm25, joined, scores, loose)


def _add_joined(
    index: HierIndex,
    lexical: LexicalIndex,
    pool: Pool,
    docs: np.ndarray,
    probed: np.ndarray,
    q: np.ndarray,
    bm25: np.ndarray | None,
    joined: np.ndarray,
    scores: np.ndarray,
    loose: np.ndarray,
) -> None:
    """Add what a join of ``docs`` found (``Scorer.join_docs``) to the pool: the cells
    joined with their cosines, then the loose ones in ``probed`` slots, scored by id."""
    pool.add_docs(docs[joined], scores, None if bm25 is None else bm25[joined])
    if loose.shape[0]:
        loc = index.loc
        named = [(i, c) for i, c in zip(loose.tolist(), lexical.cids_of(docs[loose]), strict=True)]
        if probed.shape[0]:
            named = [(i, c) for i, c in named if probed[loc[c].slot]]
        if named:
            at = np.array([i for i, _ in named], np.int64)
            cosines = index.vectors([c for _, c in named]) @ q
            pool.add_docs(docs[at], cosines.astype(np.float32), None if bm25 is None else bm25[at])


def _exact(
    index: HierIndex, scorer: Scorer | None, plan: SearchPlan, stages: Stages, keep: int
) -> Pool:
    """The probed groups scored exactly. Unfiltered probes of more than ``16 keep`` cells
    keep only their best ``keep`` by cosine and the boosted cells of the probed groups, as
    the coded pass does: the other stages then fuse a few hundred candidates, not every
    probed cell (4,500 string ids cost a text query about 7 ms)."""
    cells = int(group_sizes(index)[stages.slots].sum())
    if plan.predicate is not None or cells <= 16 * keep:
        return exact_pool(index, scorer, stages.slots, plan.vector)
    kept = exact_pool(index, scorer, stages.slots, plan.vector, keep)
    if stages.boosting and plan.entity_boost > 0:
        slot_set = set(stages.slots.tolist())
        boosted = (c for c in stages.boosted if index.loc[c].slot in slot_set)
        kept.extend(index, boosted, plan.vector)
    return kept


def _plain(catalog: Catalog, plan: SearchPlan) -> bool:
    """Whether only the cosine ranks this query's hits, whatever the stages find: no
    entities or words, exclusions, thread lifts or routes (``Stages.plain`` asks the same
    of the stages once they ran; this asks it of the plan, before)."""
    return not (
        plan.entities
        or plan.lexical_terms
        or plan.exclude
        or plan.routes
        or _threaded(catalog, plan)
    )


def _threaded(catalog: Catalog, plan: SearchPlan) -> bool:
    """Whether conversation threads lift this query's candidates (see fusion)."""
    weights = plan.context_weight > 0.0 or plan.session_weight > 0.0
    return weights and len(catalog.threads) > 0
