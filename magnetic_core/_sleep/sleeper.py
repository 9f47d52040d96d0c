"""Running a sleep pass on a live memory: plan aside, journal, swap in, persist (or in background).

The pass holds the memory lock's *intent* mode throughout (other writers wait; readers go
on, seeing the state before the pass), plans on copies of the group sums, writes its moves
to the journal (:mod:`magnetic_core._store.journal`), then takes the write lock only to swap the
new group blocks in (built beforehand), and persists the moved cells and the group cache.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from magnetic_core._index.index import Group, HierIndex
from magnetic_core._sleep.journal import SleepJournal
from magnetic_core._sleep.plan import PassPlan, SleepConfig, plan_pass
from magnetic_core._store.compaction import COMPACT_FROM, compact_cells
from magnetic_core.errors import InvalidInputError, MagneticError, PersistenceError
from magnetic_core.types import CompactionReport, SleepReport, Stats

if TYPE_CHECKING:
    from magnetic_core.memory import MagneticMemory

__all__ = ["Sleeper"]

logger = logging.getLogger(__name__)


class Sleeper:
    """Sleep passes of one memory: on demand, in the background, or every N writes.

    Args:
        memory: the memory (its lock, index, catalog, store and write-back are used).
    """

    def __init__(self, memory: MagneticMemory) -> None:
        self.memory = memory
        self._executor: ThreadPoolExecutor | None = None
        self._every = 0
        self._config = SleepConfig()
        self._writes = 0
        self._pending: Future[SleepReport] | None = None
        self._compacting: Future[CompactionReport] | None = None
        self.compactions = 0  # swapped in by this memory since it was opened
        self._guard = threading.Lock()
        self.last_error: BaseException | None = None

    # -- scheduling ------------------------------------------------------------------
    def schedule(self, every: int, config: SleepConfig | None = None) -> None:
        """Run a background pass after every ``every`` written cells (0 turns it off)."""
        if isinstance(every, bool) or not isinstance(every, int) or every < 0:
            raise InvalidInputError(f"every must be an integer >= 0, got {every!r}")
        self._every, self._writes = every, 0
        self._config = config or SleepConfig()

    def note_writes(self, n: int) -> None:
        """Count written cells; start a background pass when the schedule says so."""
        if not self._every:
            return
        with self._guard:
            self._writes += n
            if self._writes < self._every:
                return
            self._writes = 0
            if self._pending is not None and not self._pending.done():
                return  # one pass at a time; the next one starts at the next threshold
        self._pending = self.submit(self._config)

    def submit(self, config: SleepConfig) -> Future[SleepReport]:
        """Run one pass on the background thread; returns its future."""
        return self._background(self.run, config, False)

    def _background(self, fn: Any, *args: Any) -> Future[Any]:
        with self._guard:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="magnetic-sleep")
            future = self._executor.submit(fn, *args)
        future.add_done_callback(self._log_failure)
        return future

    # -- compaction ------------------------------------------------------------------
    def note_deletes(self) -> None:
        """After a delete: compact in the background once the deleted outnumber the live."""
        mem = self.memory
        deleted = mem._deleted_base + mem._deleted_own
        if deleted < max(COMPACT_FROM, len(mem._index)):
            return
        with self._guard:
            if self._compacting is not None and not self._compacting.done():
                return
        self._compacting = self._background(self.compact)

    def compact(self) -> CompactionReport:
        """Compact the cells collection (see :meth:`MagneticMemory.compact`)."""
        mem = self.memory
        with mem._lock.intent():
            mem._check_open()
            mem._sync()  # copy what is stored, with this memory up to date
            result = compact_cells(mem._store)
            if result.done:
                with mem._lock.write():
                    mem._deleted_base = mem._deleted_own = 0
                    result = replace(result, freed_mb=mem._renew_client())
        if result.done:
            self.compactions += 1
            logger.info("compaction: %d rows in %.1f s, %.1f MB of dropped index files removed",
                        result.rows, result.seconds, result.freed_mb)  # fmt: skip
        else:
            logger.info("compaction skipped: %s", result.skipped)
        return result

    def _log_failure(self, future: Future[SleepReport]) -> None:
        error = future.exception()
        if error is not None:
            self.last_error = error
            logger.error("background sleep pass failed: %s", error)

    def shutdown(self) -> None:
        """Wait for a running background pass, then stop the thread."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    # -- one pass --------------------------------------------------------------------
    def run(self, config: SleepConfig, dry_run: bool) -> SleepReport:
        """Plan (and unless ``dry_run``, apply) one pass; see :meth:`MagneticMemory.sleep`."""
        mem = self.memory
        start = time.perf_counter()
        with mem._lock.intent():
            mem._check_open()
            mem._sync()  # plan on what is stored, other writers' changes included
            before = mem.stats()
            index: HierIndex = mem._index
            groups = list(index.slot_groups)
            if not groups:
                return _empty_report(before, dry_run, start)
            vectors, ids, plan = _plan(mem, index, groups, config)
            extra = plan.totals.shape[0] - len(groups)
            # a dry run names the groups it would create without taking ids from the index
            fresh = (
                [f"new-{k}" for k in range(extra)]
                if dry_run
                else [index.new_gid() for _ in range(extra)]
            )
            gids = [g.gid for g in groups] + fresh
            old_labels = {g.gid: mem._catalog.label(g.gid, g.version, g.ids)[0] for g in groups}
            if dry_run:
                predicted = _predicted(before, plan)
                return _report(plan, gids, groups, old_labels, {}, before, predicted, True, start)
            blocks = _blocks(plan, gids, ids, vectors)
            moves = {ids[r]: gids[int(plan.labels[r])] for r in plan.moved.tolist()}
            if moves:
                self._commit(moves, blocks, plan, gids)
            after = mem.stats()
            new_labels = {
                g.gid: mem._catalog.label(g.gid, g.version, g.ids)[0]
                for g in mem._index.slot_groups
            }
            report = _report(
                plan, gids, groups, old_labels, new_labels, before, after, False, start
            )
        logger.info("sleep pass: %s", report.summary())
        return report

    def _commit(
        self,
        moves: dict[str, str],
        blocks: dict[str, tuple[list[str], np.ndarray]],
        plan: PassPlan,
        gids: list[str],
    ) -> None:
        mem = self.memory
        journal = SleepJournal(mem._store, mem.dim)
        journal.begin(moves, uuid.uuid4().hex[:12])
        try:
            with mem._lock.write():
                _swap(mem._index, blocks, moves)
            # confirmed as a write is: a compaction elsewhere may copy the cells before these
            # rows land, and they would then be in the dropped copy only
            with mem._confirmed():
                mem._writeback.cells(counter=mem._clock.tick())
            mem._writeback.groups()
            journal.clear()
        except (PersistenceError, MagneticError):
            with mem._lock.write():
                mem._after_failure()  # replays the journal where Chroma lets it
            raise


def _blocks(
    plan: PassPlan, gids: list[str], ids: list[str], vectors: np.ndarray
) -> dict[str, tuple[list[str], np.ndarray]]:
    """New member ids and vector blocks of every group whose membership changes."""
    moved = plan.moved
    touched = np.unique(np.concatenate([plan.labels[moved], plan.original[moved]]))
    order = np.argsort(plan.labels, kind="stable")
    bounds = np.searchsorted(plan.labels[order], np.arange(plan.totals.shape[0] + 1))
    out: dict[str, tuple[list[str], np.ndarray]] = {}
    for slot in touched.tolist():
        rows = order[bounds[slot] : bounds[slot + 1]]
        out[gids[slot]] = ([ids[r] for r in rows.tolist()], vectors[rows])
    return out


def _swap(index: HierIndex, blocks: dict[str, tuple[list[str], np.ndarray]], moves: dict) -> None:
    """Put the prepared blocks in place (under the write lock; no vector math but sums)."""
    touched: list[Group] = []
    for gid, (members, vecs) in blocks.items():
        group = index.groups.get(gid) or index._add_group(gid)
        index.note_gid(gid)
        capacity = max(8, 1 << max(len(members) - 1, 0).bit_length())
        block = np.empty((capacity, index.dim), np.float32)
        block[: len(members)] = vecs
        group.vecs, group.ids, group.n = block, list(members), len(members)
        group.rows = {cid: i for i, cid in enumerate(members)}
        group.total[:] = vecs.sum(axis=0, dtype=np.float64) if len(members) else 0.0
        group.version += len(members) + 1
        touched.append(group)
    for cid, gid in moves.items():
        index.loc[cid] = index.groups[gid]
    index.moved.update(moves)
    for group in touched:
        if group.n == 0:
            index._drop_group(group)
    index._refresh_many([g for g in touched if g.n])


def _predicted(before: Stats, plan: PassPlan) -> Stats:
    sizes = plan.sizes[plan.sizes > 0]
    n, g = int(sizes.sum()), len(sizes)
    return replace(
        before,
        groups=g,
        singleton_groups=int((sizes == 1).sum()),
        largest_group=int(sizes.max()) if g else 0,
        mean_group_size=float(sizes.mean()) if g else 0.0,
        mean_cohesion=plan.cohesion(),
        singleton_share=float((sizes == 1).sum() / g) if g else 0.0,
        imbalance=float(g * (sizes.astype(np.float64) ** 2).sum() / (n * n)) if n else 0.0,
        size_percentiles=tuple(float(v) for v in np.percentile(sizes, [50, 90, 99])),  # type: ignore[arg-type]
    )


def _report(
    plan: PassPlan,
    gids: list[str],
    groups: list[Group],
    old_labels: dict[str, str],
    new_labels: dict[str, str],
    before: Stats,
    after: Stats,
    dry_run: bool,
    start: float,
) -> SleepReport:
    moved = plan.moved
    changed = sorted(
        {gids[int(s)] for s in plan.labels[moved].tolist()}
        & {gids[int(s)] for s in np.flatnonzero(plan.sizes > 0).tolist()}
    )
    dropped = tuple(g.gid for s, g in enumerate(groups) if plan.sizes[s] == 0)
    relabelled = tuple(
        (gid, old_labels[gid], new_labels[gid])
        for gid in sorted(old_labels.keys() & new_labels.keys())
        if old_labels[gid] != new_labels[gid]
    )
    return SleepReport(
        dry_run=dry_run,
        merges=tuple((gids[a], gids[b], s) for a, b, s in plan.merges),
        absorbed=tuple((gids[a], gids[b]) for a, b in plan.absorbed),
        splits=tuple((gids[a], gids[b]) for a, b in plan.splits),
        moved=int(moved.size),
        dropped=dropped,
        relabelled=relabelled,
        changed_groups=tuple(changed),
        thresholds=dict(plan.thresholds),
        sources=dict(plan.sources),
        before=before,
        after=after,
        seconds=time.perf_counter() - start,
    )


def _plan(
    mem: Any, index: HierIndex, groups: list[Group], config: SleepConfig
) -> tuple[np.ndarray, list[str], PassPlan]:
    """The pass's plan over the groups as they are: their cells' vectors, ids, and the plan."""
    sizes = [g.n for g in groups]
    vectors = np.concatenate([g.view for g in groups])
    labels = np.repeat(np.arange(len(groups)), sizes)
    totals = np.stack([g.total for g in groups])
    ids = [cid for g in groups for cid in g.ids]
    plan = plan_pass(vectors, labels, totals, mem.join_threshold, index.max_group_size, config)
    return vectors, ids, plan


def _empty_report(before: Stats, dry_run: bool, start: float) -> SleepReport:
    return SleepReport(
        dry_run=dry_run,
        merges=(),
        absorbed=(),
        splits=(),
        moved=0,
        dropped=(),
        relabelled=(),
        changed_groups=(),
        thresholds={},
        sources={},
        before=before,
        after=before,
        seconds=time.perf_counter() - start,
    )


def recover(memory: Any) -> dict[str, str]:
    """The moves of an interrupted pass of ``memory``'s namespace (to finish on open)."""
    return SleepJournal(memory._store, memory.dim).pending()


def finish_recovery(memory: Any) -> None:
    """After an open replayed a journal: persist the replayed rows, then drop the journal."""
    memory._writeback.cells(counter=memory._clock.tick())
    memory._writeback.groups()
    SleepJournal(memory._store, memory.dim).clear()
