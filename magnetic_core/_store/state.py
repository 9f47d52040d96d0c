"""The in-memory state of one namespace, built from the cells collection in one piece.

A memory swaps a whole new :class:`MemoryState` in at once (on open, after a failed write,
when another writer changed the store), so nothing half-built is ever visible: if reading
the store fails midway, the state in use is untouched.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from magnetic_core._index.calibration import Calibration
from magnetic_core._index.index import HierIndex
from magnetic_core._store.catalog import Catalog
from magnetic_core._store.index_file import Snapshot
from magnetic_core._store.journal import WriterClock
from magnetic_core._store.persistence import ChromaStore
from magnetic_core._store.writeback import WriteBack
from magnetic_core.config import MemoryConfig

__all__ = ["MemoryState", "load_state", "save_snapshot"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemoryState:
    """The hierarchy, the cell records, the threshold and the writer of one namespace."""

    index: HierIndex
    catalog: Catalog
    calibration: Calibration
    writeback: WriteBack
    snapshot: Snapshot
    # What was saved beside the index (save_snapshot's ``extra``); empty when rebuilt.
    extra: Mapping[str, np.ndarray] = field(default_factory=dict)
    # The other writers' change counters this state reflects (WriterClock.seen).
    seen: dict[str, int] = field(default_factory=dict)


def load_state(
    store: ChromaStore,
    dim: int,
    config: MemoryConfig,
    replay: Mapping[str, str] | None = None,
    clock: WriterClock | None = None,
) -> MemoryState:
    """Read every stored cell into a new state (writes nothing to Chroma).

    An embedded store's index snapshot (:mod:`magnetic_core._store.index_file`) is used
    when it matches the cells collection; otherwise every cell is read from Chroma.
    ``replay`` maps cell ids to the group an interrupted sleep pass was moving them to;
    those cells are placed there and marked moved, so the next write-back persists them.
    ``MemoryState.seen`` holds the other writers' change counters the state reflects: as
    recorded in the snapshot, or read from ``clock`` before the cells were.

    Raises:
        PersistenceError: Chroma could not be read; nothing was changed.
    """
    # A fresh writer token per load: group ids this process creates cannot collide with
    # those of another process writing the same namespace (issue 10).
    writer = secrets.token_hex(4)
    snapshot = _snapshot(store, dim)
    snapshot.loaded()  # before reading: a write landing during the read moves the epoch
    loaded = None if replay else snapshot.load(config.max_group_size, writer)
    extra: dict[str, np.ndarray] = {}
    if loaded is not None:
        index, catalog, extra = loaded.index, loaded.catalog, loaded.extra
        seen = dict(loaded.counters)
    else:
        # Read before the cells: a write landing during the load is seen by the next sync.
        seen = clock.read() if clock is not None else {}
        index, catalog = _read_cells(store, dim, config, writer, replay)
    if clock is not None:
        seen.pop(clock.row_id, None)
    calibration = Calibration(config, store.settings())
    writeback = WriteBack(store, index, catalog, store.group_cache())
    return MemoryState(index, catalog, calibration, writeback, snapshot, extra, seen)


def save_snapshot(
    state: MemoryState,
    clock: WriterClock,
    extra: Callable[[], Mapping[str, np.ndarray]] | None = None,
) -> None:
    """Write the state's snapshot at close, when it may describe the cells collection.

    Nothing is written when the file is current (no write since it was read) or another
    writer changed the cells since this memory last looked (its state would miss that).
    ``extra`` gives more arrays (the search scorer's built state), asked for only when the
    file is written; they come back as ``MemoryState.extra`` on the next open from it.
    """
    snapshot = state.snapshot
    if snapshot.path is None or snapshot.current:
        return
    if clock.read() != clock.seen or not snapshot.may_save():
        logger.info("no index snapshot at close: another writer changed the store")
        return
    if len(state.index) != len(state.catalog):
        logger.warning("no index snapshot at close: the index and the catalog disagree")
        return
    try:
        snapshot.save(state.index, state.catalog, extra() if extra is not None else None)
    except Exception as e:  # noqa: BLE001 - a cache must never make close() fail
        logger.warning("the index snapshot was not written (the next open reads Chroma): %s", e)


def _snapshot(store: ChromaStore, dim: int) -> Snapshot:
    found = store.before_write
    if isinstance(getattr(found, "__self__", None), Snapshot):
        return found.__self__  # type: ignore[union-attr]
    return Snapshot(store, str(store.settings().get("mag_embedder", "")), dim)


def _read_cells(
    store: ChromaStore,
    dim: int,
    config: MemoryConfig,
    writer: str,
    replay: Mapping[str, str] | None,
) -> tuple[HierIndex, Catalog]:
    index = HierIndex(dim, config.max_group_size, writer=writer)
    catalog = Catalog()
    for row in store.load():
        gid = replay.get(row.id, row.group_id) if replay else row.group_id
        index.place(row.id, row.vector, gid, row.seq)
        catalog.put(row.id, row.record)
    index.finish_placing()
    if replay:
        index.moved.update(c for c in replay if c in index.loc)
    return index, catalog
