"""The join threshold in force, and its calibration from the data at fixed checkpoints."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from magnetic_core._index.clustering import calibrate_threshold
from magnetic_core._index.index import HierIndex
from magnetic_core.config import MemoryConfig

__all__ = ["Calibration"]

logger = logging.getLogger(__name__)


class Calibration:
    """Where the join threshold comes from: ``configured``, ``calibrated`` or ``provisional``.

    Checkpoints are fixed counts (32, 64, ... up to ``calibration_size``): when the store
    first reaches one, the threshold is recomputed from all cells and the hierarchy is
    regrouped in insertion order. Because checkpoints depend only on counts, adding a batch
    gives the same hierarchy as adding its cells one at a time.

    A new threshold is held in memory until :meth:`commit` saves it, which the memory
    does once the cells of the write are stored: a write that fails leaves the stored
    threshold as it was (and the memory, reloaded from storage, uses it again).

    Args:
        config: the memory's settings.
        settings: what the store persisted (``mag_threshold``, ``mag_calibrated_n``, and
            ``mag_join_threshold`` when one was chosen at creation).
    """

    def __init__(self, config: MemoryConfig, settings: Mapping[str, Any]) -> None:
        self.config = config
        self._pending: dict[str, Any] = {}
        self.calibrated_n = int(settings.get("mag_calibrated_n", 0))
        if config.join_threshold is not None:
            self.threshold, self.source = config.join_threshold, "configured"
        elif "mag_join_threshold" in settings:  # chosen when the store was created
            self.threshold, self.source = float(settings["mag_join_threshold"]), "configured"
        elif "mag_threshold" in settings:
            self.threshold, self.source = float(settings["mag_threshold"]), "calibrated"
        else:
            self.threshold, self.source = config.provisional_threshold, "provisional"

    def next_checkpoint(self) -> int | None:
        """The cell count at which the next calibration happens (None: no more)."""
        if self.source == "configured":
            return None
        size, point = self.config.calibration_size, min(32, self.config.calibration_size)
        while point <= self.calibrated_n and point < size:
            point = min(point * 2, size)
        return point if point > self.calibrated_n else None

    def assign(
        self,
        index: HierIndex,
        ids: list[str],
        vecs: np.ndarray,
    ) -> None:
        """Assign cells in order, recalibrating at each checkpoint reached on the way.

        A new threshold is not saved here: call :meth:`commit` once the write is stored.
        """
        chunk = self.config.chunk_size
        while ids:
            target = self.next_checkpoint()
            if target is None:
                index.assign(ids, vecs, self.threshold, chunk)
                return
            new = np.fromiter((c not in index.loc for c in ids), dtype=bool, count=len(ids))
            at = np.flatnonzero(len(index) + np.cumsum(new) >= target)
            if not at.size:
                index.assign(ids, vecs, self.threshold, chunk)
                return
            cut = int(at[0]) + 1
            index.assign(ids[:cut], vecs[:cut], self.threshold, chunk)
            self._calibrate(index)
            ids, vecs = ids[cut:], vecs[cut:]

    def commit(self, save: Callable[..., None]) -> None:
        """Persist the threshold of the calibrations since the last commit, if any.

        ``save(**settings)`` writes the store's settings; nothing is called when no
        checkpoint was reached.
        """
        if self._pending:
            save(**self._pending)
            self._pending = {}

    def _calibrate(self, index: HierIndex) -> None:
        order = list(index.loc)
        sample = index.vectors(order)
        threshold = calibrate_threshold(sample, self.config.calibration_percentile)
        logger.info("calibrated join threshold %.3f from %d cells", threshold, len(order))
        self._pending = {"mag_threshold": threshold, "mag_calibrated_n": len(order)}
        self.threshold, self.source, self.calibrated_n = threshold, "calibrated", len(order)
        index.regroup(threshold, self.config.chunk_size)
