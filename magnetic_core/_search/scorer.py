"""The one approximate scorer of large stores: sub-lists, residual codes, exact rerank.

Groups are concepts, and a concept can be broad: at 100K Reuters passages a group holds
about a hundred cells, and the nearest neighbours of a query are spread over many groups.
The scorer splits each group into a few tight *sub-lists* (k-means inside the group, about
``list_size`` cells each) and keeps, per cell, a four-bit *code* of its residual (its
vector minus its sub-list's mean) projected on the top ``rank`` principal directions of
those residuals, with one scale per cell (``fit_kernels.encode``). A query ranks the
probed groups' sub-lists by their mean, scores the cells of the best ones as ``q . mean +
scale * code . (q P)`` in one compiled pass (:mod:`magnetic_core._search.kernels`), and
scores the best ``keep`` of those exactly from the index's own blocks. The centroids get
int8 codes, so the centroid stage is one compiled scan of a quarter of the bytes.

Everything is kept per group version. After a write, the groups that changed are *stale*:
the next searches score them exactly from their own blocks while re-splitting and re-coding
them, a bounded number of cells per search (``RECODE_ROWS``); their new rows are appended
to the scorer's arrays, and the rows they replace become garbage, reclaimed by a compaction
once they outnumber the live ones. The basis is fitted once the store reaches ``MIN_CELLS``
and refitted each time it has grown ``REFIT_GROWTH``-fold, which recodes every group
(amortised over the growth).
The scorer never writes to the index: it reads the groups' blocks by address and holds a
reference to every block it reads (see the kernels' module docstring).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from magnetic_core._search import helper
from magnetic_core._search.centroid_tree import SPREAD, CentroidTree, kept_tree
from magnetic_core._search.scorer_state import Coded, ScorerState, restore
from magnetic_core._search.sublists import (
    SubLists,
    principal_basis,
    quantize,
    ranges,
    split_lists,
)

if TYPE_CHECKING:
    from magnetic_core._index.index import Group, HierIndex
    from magnetic_core._text.lexical import LexicalIndex

__all__ = ["FULL_SCAN_SHARE", "MIN_CELLS", "Scorer", "best_cells"]


_KERNELS: ModuleType | None = None
_TEXT_TOP: Any = None  # fusion_kernel.text_top, imported on first use
_TEXT_TOP_AT: Any = None  # fusion_kernel.text_top_at, with it


def _kernels() -> ModuleType:
    """The compiled kernels, imported on first use: importing numba takes about a second,
    which stores too small for the scorer (and commands that never search) do not pay."""
    global _KERNELS
    if _KERNELS is None:
        from magnetic_core._search import kernels

        _KERNELS = kernels
    return _KERNELS


# The scorer's policy, in one place.
MIN_CELLS = 4096  # smaller stores are scored exactly (one product per probed group is cheap)
MIN_ENERGY = 0.6  # share of the residuals' second moment the basis must hold to pre-score
REFIT_GROWTH = 4  # refit the basis each time the store has grown this many times
SAMPLE = 16384  # at most this many residuals fit the basis
# Every group is probed and every code scored when the cell budget is at least this share
# of the store: a pass over all codes costs little more than the budget's, and misses none.
FULL_SCAN_SHARE = 0.4
# Bits of a cell's code entries (``fit_kernels.encode``), saved with a persisted scorer: one
# saved with other codes is not restored but built again.
CODE_BITS = 4
# Compact the arrays when rows no longer described by a live group exceed the live ones.
GARBAGE_SHARE = 1.0
# Cells of changed groups split and coded again per search, at most; the other changed
# groups are scored exactly meanwhile. Coding a cell costs about ``rank`` times scoring it
# exactly once, so under steady writes most changed groups are cheaper to score exactly
# until they settle, and a burst of writes never makes one query pay for all of them.
RECODE_ROWS = 256
# A probe that needs only its best k by cosine scores its ``keep`` coded best exactly in
# order of their approximate scores, and stops once the next approximation is this many
# standard deviations of the approximations' error on the rows scored so far (plus its
# mean) below the k-th best cosine (``kernels.exact_prefix``). Each reranked row is a
# cache miss (256 scattered rows of a 100K Reuters store: 127 us cold, 20 us cached). The
# errors have heavier tails than a normal law, so a few neighbours are lost (100K, 12,000
# cells: recall@10 0.9857 -> 0.9840, p50 0.735 -> 0.662 ms); per unit of time, the probe
# budget buys recall back more cheaply than the last rows of the rerank (PROBE_CAP).
RERANK_SDS = 4.0

# The centroid tree's arrays when a store has none (``Scorer.plain``): typed as a tree's.
_NO_TREE = (
    np.empty((0, 0), np.int8),
    np.empty(0, np.float32),
    np.zeros(1, np.int64),
    np.empty(0, np.int64),
    np.empty((0, 0), np.int8),
    np.empty(0, np.float32),
)

# A ranked pool as the compiled rankings give it: ``(rows or document numbers, cosines,
# boost terms, lexical terms, pending rows read)``, best first.
Ranking = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]


class Scorer:
    """Sub-lists, codes and centroid codes of one index, kept in step with its groups.

    Args:
        rank: code dimension (principal directions of the residuals).
        list_size: target cells per sub-list.
    """

    def __init__(self, rank: int = 128, list_size: int = 32) -> None:
        self.rank = rank
        self.list_size = list_size
        self.energy = 0.0
        self._index: HierIndex | None = None
        self._epoch = -1
        self._basis: np.ndarray | None = None
        self._fitted_n = 0
        self._state = ScorerState(0, rank)
        # Searches run concurrently under the store's read lock: one updates, others wait.
        self._lock = threading.Lock()
        # What the last query found ready (its key, then the values), for the next one on
        # the same settled index (``search._prepared``; cleared when reconfigured).
        self.settled: tuple[Any, Any] | None = None

    # -- keeping in step -----------------------------------------------------------------
    def configure(self, rank: int, list_size: int) -> None:
        """Use these settings from now on (everything built is dropped if they differ)."""
        if (rank, list_size) != (self.rank, self.list_size):
            with self._lock:
                self.rank, self.list_size = rank, list_size
                self.settled = None
                self._index, self._epoch, self._basis, self._fitted_n = None, -1, None, 0
                self.energy = 0.0
                self._state = ScorerState(0, rank)

    def is_settled(self, index: HierIndex) -> bool:
        """Whether the scorer describes ``index`` with every group coded: until the index
        changes, :meth:`sync` has nothing to do."""
        return self.current(index) and not np.count_nonzero(self._state.stale)

    def current(self, index: HierIndex) -> bool:
        """Whether the scorer describes ``index`` as it is now (after :meth:`sync`)."""
        return self._index is index and self._epoch == index.centroid_epoch

    @property
    def usable(self) -> bool:
        """Whether the basis holds enough residual energy for codes to pre-score."""
        return self._basis is not None and self.energy >= MIN_ENERGY

    def sync(self, index: HierIndex) -> bool:
        """Bring the scorer up to date with ``index``; whether its codes may pre-score.

        Builds nothing (and returns False) for stores under ``MIN_CELLS`` cells or a rank
        not below the dimension. Otherwise the first call builds everything; later calls
        find the groups changed since and re-code up to ``RECODE_ROWS`` of their cells.
        """
        if not 0 < self.rank < index.dim or len(index) < MIN_CELLS:
            return False
        # (count_nonzero: one C call; ndarray.any goes through numpy's Python wrapper,
        # twice the time on every query)
        if self.current(index) and not np.count_nonzero(self._state.stale):
            return self.usable
        with self._lock:
            n = len(index)
            if (
                self._index is not index
                or self._basis is None
                or n >= REFIT_GROWTH * self._fitted_n
            ):
                self._rebuild(index)
            elif self._epoch != index.centroid_epoch:
                self._find_stale(index)
            self._recode(index, RECODE_ROWS)
            if self._state.rows.n - n > GARBAGE_SHARE * n + 4096:
                self._state = self._compacted(index)
            self._epoch = index.centroid_epoch
        return self.usable

    def _find_stale(self, index: HierIndex) -> None:
        """Mark the slots whose group changed or moved; re-code their centroids."""
        st = self._state
        groups = index.slot_groups
        st.resize(len(groups))
        keys = st.slot_key
        changed = [
            s
            for s, g in enumerate(groups)
            if (key := keys[s]) is None or key[0] is not g or key[1] != g.version
        ]
        st.stale[changed] = True
        self._code_centroids(index, changed)

    def _recode(self, index: HierIndex, budget: int) -> None:
        """Split and code stale groups, largest share of the budget first come first."""
        st = self._state
        groups = index.slot_groups
        done = 0
        for s in np.flatnonzero(st.stale).tolist():
            if done >= budget:
                break
            group = groups[s]
            self._register(st, s, group, split_lists(group.view, self.list_size))
            done += group.n

    def _rebuild(self, index: HierIndex) -> None:
        """Split and code every group; refit the basis on a sample of their residuals."""
        groups = index.slot_groups
        lists = [split_lists(g.view, self.list_size) for g in groups]
        step = max(1, len(index) // SAMPLE)
        sample = [lst.residuals(g.view, step) for g, lst in zip(groups, lists, strict=True)]
        self._basis, self.energy = principal_basis(np.concatenate(sample), self.rank)
        self._fitted_n = len(index)
        st = ScorerState(index.dim, self.rank)
        st.resize(len(groups))
        for s, (group, lst) in enumerate(zip(groups, lists, strict=True)):
            self._register(st, s, group, lst)
        self._state = st
        self._index = index
        self._code_centroids(index, range(len(groups)))

    def _compacted(self, index: HierIndex) -> ScorerState:
        """A copy of the state holding only the rows of the blocks slots point at."""
        old = self._state
        new = ScorerState(index.dim, self.rank)
        new.resize(len(index.slot_groups))
        for s, h in enumerate(old.slot_block.tolist()):
            key = old.slot_key[s]
            if h < 0 or key is None or old.stale[s]:
                continue
            first, end = int(old.blocks.first[h]), int(old.blocks.end[h])
            lens = old.lists.len[first:end]
            rows = ranges(old.lists.start[first:end], lens)
            means = old.lists.mean[first:end]
            rows_of = old.rows
            coded = Coded(means, lens, rows_of.code[rows], rows_of.scale[rows], rows_of.row[rows])
            new.append(s, key[0], coded)
        new.centroid_code, new.centroid_scale = old.centroid_code, old.centroid_scale
        new.tree = old.tree
        return new

    def _register(self, st: ScorerState, slot: int, group: Group, lst: SubLists) -> None:
        """Code a group's residuals and add it to ``st``."""
        assert self._basis is not None
        owner = np.repeat(np.arange(lst.lengths.shape[0]), lst.lengths)
        from magnetic_core._search.fit_kernels import encode  # numba: imported when needed

        code, scale = encode(group.view, lst.order, owner, lst.means, self._basis)
        st.append(slot, group, Coded(lst.means, lst.lengths, code, scale, lst.order))

    def _code_centroids(self, index: HierIndex, slots: range | list[int]) -> None:
        """Code the centroids of ``slots`` (and keep the centroid tree in step)."""
        st = self._state
        g = len(index.slot_groups)
        if st.centroid_scale.shape[0] != g:
            code = np.zeros((g, index.dim), np.int8)
            scale = np.zeros(g, np.float32)
            keep = min(g, st.centroid_scale.shape[0])
            code[:keep] = st.centroid_code[:keep]
            scale[:keep] = st.centroid_scale[:keep]
            st.centroid_code, st.centroid_scale = code, scale
        at = np.asarray(slots, np.int64)
        if at.shape[0]:
            st.centroid_code[at], st.centroid_scale[at] = quantize(index.centroids[at])
        if at.shape[0] or st.tree is None or st.tree.owner.shape[0] != g:
            cents, codes, scales = index.centroids, st.centroid_code, st.centroid_scale
            st.tree = kept_tree(st.tree, cents, codes, scales, at)

    # -- persisting ----------------------------------------------------------------------
    def export_arrays(self) -> dict[str, np.ndarray]:
        """The built state as plain numpy arrays, for a persisted index (empty if unbuilt).

        Cells are named by id, so :meth:`from_arrays` can restore the state into an index
        loaded in another order. Groups changed since they were coded are left out (they
        are coded again after the restore). A scorer that does not describe its index as
        it is now exports nothing: its marks of the changed groups predate the changes
        (a store that shrank below ``MIN_CELLS`` after the scorer was built is no longer
        synced, and its groups' rows no longer match what was coded).
        """
        st, index = self._state, self._index
        if self._basis is None or index is None or not self.current(index):
            return {}
        slots = np.flatnonzero(~st.stale[: len(index.slot_groups)] & (st.slot_block >= 0))
        blocks = st.slot_block[slots]
        first, end = st.blocks.first[blocks], st.blocks.end[blocks]
        lists = ranges(first, end - first)
        rows = ranges(st.lists.start[lists], st.lists.len[lists])
        groups = st.block_group
        owner, at = st.rows.block[rows].tolist(), st.rows.row[rows].tolist()
        tree = {} if st.tree is None else st.tree.export_arrays()
        return {
            **tree,
            "basis": self._basis,
            "meta": np.array([self.rank, self.list_size, self._fitted_n, CODE_BITS], np.int64),
            "energy": np.array([self.energy]),
            "gids": np.array([groups[h].gid for h in blocks.tolist()], dtype=np.str_),
            "group_lists": (end - first).astype(np.int64),
            "list_mean": st.lists.mean[lists],
            "list_len": st.lists.len[lists],
            "cell_ids": np.array([groups[h].ids[r] for h, r in zip(owner, at)], dtype=np.str_),
            "code": st.rows.code[rows],
            "scale": st.rows.scale[rows],
        }

    @staticmethod
    def same_codes(arrays: Mapping[str, np.ndarray]) -> bool:
        """Whether :meth:`export_arrays`' output holds codes of this version's kind (one
        saved before the codes took four bits has three meta entries: it is built again)."""
        return [int(v) for v in arrays["meta"][3:]] == [CODE_BITS]

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], index: HierIndex) -> Scorer:
        """A scorer for ``index`` from :meth:`export_arrays`' output.

        A group whose cells differ from the exported ones (or is missing from the export)
        starts stale: it is scored exactly and coded again by later searches.
        """
        if not cls.same_codes(arrays):
            raise ValueError(f"the saved codes are not {CODE_BITS}-bit nibble codes")
        rank, list_size, fitted_n = (int(v) for v in arrays["meta"][:3])
        scorer = cls(rank, list_size)
        scorer._basis = np.ascontiguousarray(arrays["basis"], np.float32)
        scorer.energy, scorer._fitted_n = float(arrays["energy"][0]), fitted_n
        st = ScorerState(index.dim, rank)
        st.resize(len(index.slot_groups))
        restore(st, arrays, index)
        scorer._state, scorer._index = st, index
        # The centroid tree's clusters come back as saved (each group filed to the nearest
        # of their means), not fitted again (0.7 s at 9,002 groups).
        st.tree = CentroidTree.from_arrays(arrays)
        scorer._code_centroids(index, range(len(index.slot_groups)))
        scorer._epoch = index.centroid_epoch
        return scorer

    # -- scoring -------------------------------------------------------------------------
    def centroid_scores(self, q: np.ndarray) -> np.ndarray:
        """Approximate cosine of ``q`` with every centroid, by slot (int8 codes)."""
        st = self._state
        return _kernels().code_scores(st.centroid_code, st.centroid_scale, q)

    def probe_slots(
        self, q: np.ndarray, sizes: np.ndarray, n_probe: int, min_cells: int
    ) -> np.ndarray:
        """The slots a query probes, in no set order (see
        :func:`~magnetic_core._search.kernels.probe_groups`): every centroid code scored,
        or, in stores with a centroid tree, those of the clusters nearest ``q``
        (:mod:`magnetic_core._search.centroid_tree`)."""
        st = self._state
        tree, kern = self._tree(), _kernels()
        if tree is None:
            sims = kern.code_scores(st.centroid_code, st.centroid_scale, q)
            return kern.probe_groups(sims, sizes, n_probe, min_cells)
        return kern.tree_groups(*tree, q, sizes, n_probe, min_cells, SPREAD)

    def _tree(
        self,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """The centroid tree's arrays as ``kernels.tree_groups`` reads them, or None when the
        store has no tree or its slots are not all filed to it yet."""
        st = self._state
        tree = st.tree
        if tree is None or tree.owner.shape[0] != st.centroid_scale.shape[0]:
            return None
        return tree.code, tree.scale, tree.start, tree.members, tree.rows, tree.row_scale

    def probe(
        self, index: HierIndex, slots: np.ndarray, q: np.ndarray, budget: int, keep: int, k: int
    ) -> tuple[list[str], np.ndarray]:
        """Ids and exact cosines of the best cells of the given slots' best sub-lists.

        Sub-lists are ranked by the cosine of their mean; the cells of the best ones (up
        to ``budget`` cells) are scored by code, the best ``keep`` of those exactly (in
        order of their code scores, until the rest are out of reach: ``RERANK_SDS``), and
        the best ``k`` of those are returned, best first. Stale groups among ``slots`` are
        scored exactly, every cell, and their best compete for the same ``k``. Their cells do
        not count against the budget: right after a large change (a sleep pass, a big batch)
        most probed groups are stale, and charging them would leave the coded groups that
        rank above them unread (recall@10 0.99 -> 0.97 at 30K cells, 0.96 -> 0.89 at 100K,
        until the groups were coded again). The extra exact work lasts until they are.
        """
        best, scores, extra_ids, extra = self._probe_rows(index, slots, q, budget, keep, k)
        ids = self._state.cell_ids(best)
        if extra_ids:
            # The stale groups' best join the coded ones': the best k of both, best first.
            order, merged = _merged(scores, extra, k)
            both = ids + extra_ids
            return [both[i] for i in order.tolist()], merged
        return ids, scores

    def plain(
        self,
        q: np.ndarray,
        sizes: np.ndarray,
        n_probe: int,
        min_cells: int,
        least_cells: int,
        budget: int,
        keep: int,
        k: int,
    ) -> tuple[list[str], list[Group], list[float], int] | None:
        """A plain vector query's centroid stage and :meth:`probe` in one compiled call
        (``kernels.plain_top``; ``sizes``: each slot's cells): ``(ids, their groups, exact
        cosines, groups probed)``, best first, as the two steps give them (probed groups
        holding at most ``least_cells`` cells are scored exactly, as the stages would).
        None when the call leaves the query to them: a probed group changed since it was
        coded (those are scored exactly)."""
        assert self._basis is not None
        st = self._state
        tree = self._tree()
        best, scores, probed, done = helper.call(
            _kernels().plain_top, "plain_top_beside",
            st.centroid_code, st.centroid_scale, _NO_TREE if tree is None else tree,
            tree is not None, SPREAD, sizes,
            st.stale, n_probe, min_cells, least_cells, st.probe_args(), q, self._basis,
            budget, keep, k, RERANK_SDS,
        )  # fmt: skip
        if not done:
            return None
        ids, groups = st.cells(best)
        return ids, groups, scores.tolist(), probed

    def text(
        self,
        q: np.ndarray,
        sizes: np.ndarray,
        n_probe: int,
        min_cells: int,
        least_cells: int,
        routes: np.ndarray,
        budget: int,
        keep: int,
        lexical: LexicalIndex,
        args: tuple[Any, ...],
        boosted: np.ndarray,
        boost: float,
        join_boosted: bool,
        n_top: int,
        lexical_weight: float,
        k: int,
    ) -> tuple[list[str], list[Group], list[float], list[float]] | None:
        """A text query's centroid stage, coded probe, entity join, lexical stage and
        ranking in one compiled call (``fusion_kernel.text_top``): ``(ids, their groups,
        exact cosines, ranking scores)`` of the best ``k``, best first, as the staged
        search ranks them. None when the call leaves the query to the stages (see
        ``text_top``)."""
        global _TEXT_TOP, _TEXT_TOP_AT
        if _TEXT_TOP is None:  # (imported once: an import statement costs a query ~1 us)
            from magnetic_core._search.fusion_kernel import text_top, text_top_at  # numba

            _TEXT_TOP, _TEXT_TOP_AT = text_top, text_top_at
        assert self._basis is not None
        st = self._state
        tree = self._tree()
        tree = _NO_TREE if tree is None else tree
        addresses, row_in_block = self._row_reads()
        probe = st.probe_args()[:10]
        rows_of = st.doc_row_args(lexical)
        # (held here until the call returns: the kernel reads them by address, and a search
        # beside this one may re-code groups and replace some of the state's arrays)
        arrays = (
            st.centroid_code, st.centroid_scale, *tree, sizes, *probe, *rows_of, addresses,
            row_in_block, self._basis,
        )  # fmt: skip
        table = st.text_args.table(arrays)
        use_tree, boost32 = tree is not _NO_TREE, np.float32(boost)
        step = _kernels().RERANK_STEP
        if table is not None:
            # (29 arrays handed over as one table: the call 12.9 -> 5.7 us, caches cold)
            found = helper.call(
                _TEXT_TOP_AT, "text_top_at_beside",
                table, use_tree, SPREAD, n_probe, min_cells, least_cells, routes, q, budget,
                keep, join_boosted, boosted, boost32, args, n_top, lexical_weight, k, step,
                RERANK_SDS,
            )  # fmt: skip
        else:
            found = helper.call(
                _TEXT_TOP, "text_top_beside",
                st.centroid_code, st.centroid_scale, tree, use_tree, SPREAD, sizes, n_probe,
                min_cells, least_cells, routes, probe, q, self._basis, budget, keep,
                join_boosted, boosted, boost32, args, n_top, rows_of, addresses, row_in_block,
                lexical_weight, k, step, RERANK_SDS,
            )  # fmt: skip
        del arrays
        if not found[5]:
            return None
        ids, groups = st.cells(found[0])
        return ids, groups, found[1].tolist(), found[3].tolist()

    def probe_docs(
        self,
        index: HierIndex,
        slots: np.ndarray,
        q: np.ndarray,
        budget: int,
        k: int,
        lexical: LexicalIndex,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`probe` (``keep`` = ``k``) naming the cells by BM25 document number: the
        numbers of coded cells are kept in the scorer's rows, so the text stages join them
        by array operations instead of a dict look-up per cell id."""
        best, scores, extra_ids, extra = self._probe_rows(index, slots, q, budget, k, k)
        docs = self._state.cell_docs(best, lexical)
        if extra_ids:
            order, merged = _merged(scores, extra, k)
            return np.concatenate([docs, lexical.numbers(extra_ids)])[order], merged
        return docs, scores

    def probe_pending(
        self,
        index: HierIndex,
        slots: np.ndarray,
        q: np.ndarray,
        budget: int,
        keep: int,
        lexical: LexicalIndex,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`probe_docs` without its exact rerank: the best ``keep`` coded cells with
        their approximate cosines, best first, then the stale groups' best ``keep`` scored
        exactly. Returns ``(docs, scores, rows)``: the first ``len(rows)`` entries are the
        coded cells (``rows``: their arena rows), to be scored by :meth:`score_prefix`
        once the other stages have said what each can gain."""
        assert self._basis is not None
        st = self._state
        slots, extra_ids, extra = self._without_stale(index, slots, q, keep)
        args = st.probe_args()[:10]  # up to the codes and their scales
        rows, approx, _ = _kernels().probe_coded(slots, *args, q, self._basis, budget, keep)
        docs = st.cell_docs(rows, lexical)
        if extra_ids:
            docs = np.concatenate([docs, lexical.numbers(extra_ids)])
            approx = np.concatenate([approx, extra])
        return docs, approx, rows

    def score_prefix(
        self,
        rows: np.ndarray,
        approx: np.ndarray,
        bonus: np.ndarray,
        others: np.ndarray,
        q: np.ndarray,
        k: int,
    ) -> np.ndarray:
        """Exact cosines of the prefix of ``rows`` (best first by ``approx + bonus``) that
        can hold the best ``k`` beside ``others`` (see ``RERANK_SDS`` and
        :func:`~magnetic_core._search.kernels.exact_prefix`)."""
        cols = self._state.rows.cols
        addresses = self._state.blocks.cols["address"]
        return _kernels().exact_prefix(
            addresses,
            cols["block"],
            cols["row"],
            rows,
            approx,
            bonus,
            others,
            q,
            k,
            _kernels().RERANK_STEP,
            RERANK_SDS,
        )

    def settled_top(
        self,
        pool_scores: np.ndarray,
        docs: np.ndarray,
        boosted: np.ndarray,
        boost: np.float32,
        bm25: np.ndarray,
        lexical_scale: np.float32,
        pending: np.ndarray,
        q: np.ndarray,
        k: int,
    ) -> Ranking:
        """A text query's pool settled and ranked in one pass, the pending rows read from
        this scorer's blocks: ``(rows, cosines, boost terms, lexical terms, rows read)``
        (see :func:`~magnetic_core._search.fusion_kernel.settled_top`)."""
        from magnetic_core._search.fusion_kernel import settled_top  # numba: loaded by the probe

        cols = self._state.rows.cols
        kern = _kernels()
        return settled_top(
            pool_scores,
            docs,
            boosted,
            boost,
            bm25,
            lexical_scale,
            pending,
            self._state.blocks.cols["address"],
            cols["block"],
            cols["row"],
            q,
            k,
            kern.RERANK_STEP,
            RERANK_SDS,
        )

    def doc_rows(self, docs: np.ndarray, lexical: LexicalIndex) -> np.ndarray:
        """The arena row of each document's cell (-1 where no current block holds it)."""
        return self._state.rows_of_docs(docs, lexical)

    def row_slots(self, rows: np.ndarray) -> np.ndarray:
        """The slot of each row's group (rows from :meth:`doc_rows`)."""
        return self._state.row_slots(rows)

    def join_docs(
        self,
        docs: np.ndarray,
        lexical: LexicalIndex,
        probed: np.ndarray,
        have: np.ndarray,
        q: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Which of ``docs`` (distinct numbers) join a pool holding ``have``: those in a
        ``probed`` slot, with their exact cosines, and those without a current row (see
        :func:`~magnetic_core._search.join_kernel.join_docs`)."""
        from magnetic_core._search.join_kernel import join_docs  # numba: loaded by the probe

        st = self._state
        rows_of = st.doc_row_args(lexical)
        return join_docs(docs, rows_of, probed, have, *self._row_reads(), q)

    def lexical_join(
        self,
        lexical: LexicalIndex,
        args: tuple[Any, ...],
        have: np.ndarray,
        n_top: int,
        q: np.ndarray,
    ) -> tuple[np.ndarray, ...]:
        """BM25 of a query's words (``args``: ``lexical.kernel_args`` of them) for a pool
        holding ``have``, and the join of its ``n_top`` best from any slot, in one call
        (see :func:`~magnetic_core._search.join_kernel.bm25_join`)."""
        from magnetic_core._search.join_kernel import bm25_join  # numba: loaded by the probe

        rows_of = self._state.doc_row_args(lexical)
        found = bm25_join(args, have, n_top, rows_of, *self._row_reads(), q)
        return found  # type: ignore[no-any-return]

    def lexical_settle(
        self,
        lexical: LexicalIndex,
        args: tuple[Any, ...],
        have: np.ndarray,
        n_top: int,
        q: np.ndarray,
        pool_scores: np.ndarray,
        pending: np.ndarray,
        boosted: np.ndarray,
        boost: np.float32,
        lexical_weight: float,
        k: int,
    ) -> tuple[tuple[np.ndarray, ...], Ranking]:
        """:meth:`lexical_join` of a pending pool (its best matches scored by code, pending
        too), then the pool settled and ranked (:meth:`settled_top`) in the same call:
        ``(join, ranking)`` (see
        :func:`~magnetic_core._search.fusion_kernel.lexical_settled_top`; the joined
        matches' exact cosines come back only when there is no ranking)."""
        from magnetic_core._search.fusion_kernel import lexical_settled_top  # numba: loaded

        assert self._basis is not None
        st = self._state
        kernels = _kernels()
        found = lexical_settled_top(
            args, have, n_top, st.doc_row_args(lexical), *self._row_reads(),
            st.probe_args()[:10], q, kernels.project(q, self._basis), pool_scores, pending,
            boosted, boost, lexical_weight, k, kernels.RERANK_STEP, RERANK_SDS,
        )  # fmt: skip
        return found  # type: ignore[no-any-return]

    def _row_reads(self) -> tuple[np.ndarray, np.ndarray]:
        """What a kernel reads a row's float vector by: each block's address and each arena
        row's row in its block."""
        st = self._state
        return st.blocks.cols["address"], st.rows.cols["row"]

    def row_cosines(self, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Exact cosines of the given rows' cells, read from their blocks by address."""
        cols = self._state.rows.cols
        addresses = self._state.blocks.cols["address"]
        return _kernels().exact_at(addresses, cols["block"], cols["row"], rows, q)

    def _probe_rows(
        self, index: HierIndex, slots: np.ndarray, q: np.ndarray, budget: int, keep: int, k: int
    ) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray]:
        """The coded pass of :meth:`probe` by row, and the stale groups' best by id."""
        assert self._basis is not None
        st = self._state
        slots, extra_ids, extra = self._without_stale(index, slots, q, k)
        args = st.probe_args()
        best, scores = _kernels().probe_top(
            slots, *args, q, self._basis, budget, keep, k, RERANK_SDS
        )
        return best, scores, extra_ids, extra

    def _without_stale(
        self, index: HierIndex, slots: np.ndarray, q: np.ndarray, k: int
    ) -> tuple[np.ndarray, list[str], np.ndarray]:
        """The slots whose codes are current, and the best ``k`` of the stale ones' cells,
        scored exactly: ``(coded slots, their ids, their cosines)``."""
        stale = self._state.stale[slots]
        if not np.count_nonzero(stale):
            return slots, [], np.empty(0, np.float32)
        extra_ids, extra = _exact_groups(index, slots[stale], q, k)
        return slots[~stale], extra_ids, extra

    def exact(
        self,
        index: HierIndex,
        slots: Sequence[int] | np.ndarray | range,
        q: np.ndarray,
        keep: int | None = None,
    ) -> tuple[list[str], np.ndarray]:
        """Ids and exact cosines of every cell of the given slots, or of only the best
        ``keep`` of them (ids are made only for the cells returned)."""
        st = self._state
        slots = np.asarray(slots, np.int64)
        stale = st.stale[slots]
        blocks = st.slot_block[slots[~stale]]
        scores = _kernels().exact_rows(st.blocks.address, st.blocks.count, blocks, q)
        owners = [st.block_group[h] for h in blocks.tolist()]
        if stale.any():
            extra = [index.slot_groups[s] for s in slots[stale].tolist()]
            owners += extra
            scores = np.concatenate([scores, *(_kernels().block_scores(g.view, q) for g in extra)])
        return best_cells(owners, scores, keep)


def _merged(scores: np.ndarray, extra: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of two score arrays joined: ``(positions in the join, scores)``."""
    both = np.concatenate([scores, extra])
    order = _kernels().top_k(both, k)
    return order, both[order]


def _exact_groups(
    index: HierIndex, slots: np.ndarray, q: np.ndarray, k: int | None = None
) -> tuple[list[str], np.ndarray]:
    """Exact cosines of the cells of the given groups, from their own blocks.

    Every cell, or only the best ``k`` (ids are made only for the cells returned).
    """
    groups = [index.slot_groups[s] for s in slots.tolist()]
    if not groups:
        return [], np.empty(0, np.float32)
    kern = _kernels()
    return best_cells(groups, np.concatenate([kern.block_scores(g.view, q) for g in groups]), k)


def best_cells(
    groups: Sequence[Group], scores: np.ndarray, keep: int | None = None
) -> tuple[list[str], np.ndarray]:
    """Ids and scores of the groups' cells laid end to end (``scores`` in that order):
    every cell, or only the best ``keep``, best first, ids made only for those (an id list
    of 8,000 cells costs about 0.1 ms)."""
    if keep is None or keep >= scores.shape[0]:
        return list(itertools.chain.from_iterable(g.ids for g in groups)), scores
    best = _kernels().top_k(scores, keep)
    sizes = np.fromiter((g.n for g in groups), np.int64, len(groups))
    starts = np.cumsum(sizes) - sizes
    owner = np.searchsorted(starts, best, side="right") - 1
    rows = (best - starts[owner]).tolist()
    return [groups[o].ids[r] for o, r in zip(owner.tolist(), rows, strict=True)], scores[best]
