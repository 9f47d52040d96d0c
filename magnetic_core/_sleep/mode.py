"""Sleep mode's face on the memory: plan and apply merges, run a consolidation pass.

:class:`SleepMode` is the part of :class:`~magnetic_core.MagneticMemory` that reshapes the
hierarchy (the numeric half of sleep mode); the pass itself is
:class:`~magnetic_core._sleep.sleeper.Sleeper`'s, its plan :mod:`magnetic_core._sleep.plan`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, Literal, overload

from magnetic_core._search.views import merge_plan
from magnetic_core._sleep.plan import SleepConfig
from magnetic_core._store.concurrency import async_twin
from magnetic_core._store.lifecycle import StoreLifecycle
from magnetic_core.errors import InvalidInputError
from magnetic_core.types import CompactionReport, MergePlan, SleepReport
from magnetic_core.validators import check_number

__all__ = ["SleepMode"]


class SleepMode(StoreLifecycle):
    """Merges and sleep passes (a base of ``MagneticMemory``)."""

    def plan_merges(self, threshold: float | None = None) -> MergePlan:
        """Pairs of groups whose centroids converged (sleep mode, numeric half).

        Args:
            threshold: centroid similarity needed (default ``config.merge_threshold``).
        """
        self._check_open()
        threshold = self.config.merge_threshold if threshold is None else threshold
        check_number(threshold, "threshold", low=-1.0, high=1.0)
        with self._lock.read():
            return merge_plan(self._index, threshold, self.config.max_group_size)

    def apply_merges(self, plan: MergePlan) -> list[str]:
        """Merge the planned groups (skipping pairs that no longer exist); returns kept ids."""
        self._check_open()
        kept: list[str] = []
        with self._writing(), self._guarded():
            groups = self._index.groups
            for keep, absorb, _ in plan.pairs:
                if keep in groups and absorb in groups and keep != absorb:
                    self._index.merge(groups[keep], groups[absorb])
                    kept.append(keep)
            if kept:
                self._writeback.cells(counter=self._clock.tick())
                self._writeback.groups()
        return kept

    @overload
    def sleep(
        self,
        *,
        dry_run: bool = ...,
        background: Literal[False] = ...,
        config: SleepConfig | None = ...,
        **settings: Any,
    ) -> SleepReport: ...

    @overload
    def sleep(
        self,
        *,
        dry_run: bool = ...,
        background: Literal[True],
        config: SleepConfig | None = ...,
        **settings: Any,
    ) -> Future[SleepReport]: ...

    def sleep(
        self,
        *,
        dry_run: bool = False,
        background: bool = False,
        config: SleepConfig | None = None,
        **settings: Any,
    ) -> SleepReport | Future[SleepReport]:
        """Run one consolidation pass (sleep mode, numeric half) and report it.

        Merges converged groups, absorbs fragments, splits incoherent or oversized groups,
        refiles cells whose nearest centroid changed (one bounded Lloyd step), drops empty
        groups and refreshes labels. Thresholds are fitted to the data unless set. Readers
        are not blocked (they see the state before the pass until it is swapped in); other
        writes wait. A crash at any moment reopens to the state before or after the pass.

        Args:
            dry_run: plan only; the report's ``after`` is the predicted state.
            background: run on the memory's sleep thread and return a ``Future``.
            config: a :class:`~magnetic_core._sleep.plan.SleepConfig`.
            **settings: fields of ``SleepConfig`` (e.g. ``merge_threshold=0.85``).

        Returns:
            A :class:`~magnetic_core.types.SleepReport` (or a future of one).

        Example:
            >>> import tempfile
            >>> from magnetic_core import HashingEmbedder, MagneticMemory
            >>> mem = MagneticMemory(path=tempfile.mkdtemp(), embedder=HashingEmbedder())
            >>> _ = mem.add(["tea with milk", "green tea", "tea without sugar"])
            >>> report = mem.sleep(dry_run=True)
            >>> report.dry_run, report.before.count
            (True, 3)
            >>> mem.close()
        """
        self._check_open()
        cfg = _sleep_config(config, settings)
        if background:
            if dry_run:
                raise InvalidInputError("a dry run cannot run in the background")
            return self._sleeper.submit(cfg)
        return self._sleeper.run(cfg, dry_run)

    def sleep_every(self, writes: int, config: SleepConfig | None = None) -> None:
        """Run a background sleep pass after every ``writes`` cells written (0: never)."""
        self._check_open()
        self._sleeper.schedule(writes, config)

    def compact(self) -> CompactionReport:
        """Rewrite the cells collection without the deleted vectors Chroma keeps.

        Chroma's vector index keeps every deleted vector, in memory and on disk, so a store
        of steady size under deletes grows. A compaction copies the live rows into a new
        collection and swaps it in (a crash at any point reopens to the old or the new one,
        whole), then, when this memory opened its own client, reopens it so Chroma frees the
        dropped index, and removes its files.

        It runs by itself in the background once the cells deleted since the last
        compaction (by any process) outnumber the live ones and are at least 2,000; call it
        to compact now, e.g. after a large delete. Readers are not blocked; writers wait,
        those of other processes too (they see the compaction's mark). If another process's
        write still gets through while the rows are copied, the compaction gives up
        (``report.skipped`` says why) and nothing is lost.

        Returns:
            A :class:`~magnetic_core.types.CompactionReport`.

        Raises:
            PersistenceError: Chroma failed (the store stays as it was).
        """
        self._check_open()
        return self._sleeper.compact()

    acompact = async_twin(compact)
    aplan_merges = async_twin(plan_merges)
    aapply_merges = async_twin(apply_merges)

    async def asleep(
        self, *, dry_run: bool = False, config: SleepConfig | None = None, **settings: Any
    ) -> SleepReport:
        """Async :meth:`sleep` (the pass runs in a worker thread, never in the background)."""
        settings.pop("background", None)
        return await asyncio.to_thread(
            lambda: self.sleep(dry_run=dry_run, config=config, **settings)
        )


def _sleep_config(config: SleepConfig | None, settings: Mapping[str, Any]) -> SleepConfig:
    base = config or SleepConfig()
    if not settings:
        return base
    known = set(SleepConfig.__dataclass_fields__)
    unknown = sorted(set(settings) - known)
    if unknown:
        raise InvalidInputError(
            f"unknown sleep setting(s): {', '.join(unknown)}",
            hint=f"use one of: {', '.join(sorted(known))}",
        )
    return replace(base, **settings)
