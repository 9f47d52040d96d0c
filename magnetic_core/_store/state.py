"""The in-memory state of one namespace, built from the cells collection in one piece.

A memory swaps a whole new :class:`MemoryState` in at once (on open, after a failed write,
when another writer changed the store), so nothing half-built is ever visible: if reading
the store fails midway, the state in use is untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from magnetic_core._index.calibration import Calibration
from magnetic_core._index.index import HierIndex
from magnetic_core._store.catalog import Catalog
from magnetic_core._store.persistence import ChromaStore
from magnetic_core._store.writeback import WriteBack
from magnetic_core.config import MemoryConfig

__all__ = ["MemoryState", "load_state"]


@dataclass(frozen=True)
class MemoryState:
    """The hierarchy, the cell records, the threshold and the writer of one namespace."""

    index: HierIndex
    catalog: Catalog
    calibration: Calibration
    writeback: WriteBack


def load_state(
    store: ChromaStore, dim: int, config: MemoryConfig, replay: Mapping[str, str] | None = None
) -> MemoryState:
    """Read every stored cell into a new state (writes nothing).

    ``replay`` maps cell ids to the group an interrupted sleep pass was moving them to;
    those cells are placed there and marked moved, so the next write-back persists them.

    Raises:
        PersistenceError: Chroma could not be read; nothing was changed.
    """
    index = HierIndex(dim, config.max_group_size)
    catalog = Catalog()
    for row in store.load():
        gid = replay.get(row.id, row.group_id) if replay else row.group_id
        index.place(row.id, row.vector, gid, row.seq)
        catalog.put(row.id, row.record)
    index.finish_placing()
    if replay:
        index.moved.update(c for c in replay if c in index.loc)
    calibration = Calibration(config, store.settings())
    writeback = WriteBack(store, index, catalog, store.group_cache())
    return MemoryState(index, catalog, calibration, writeback)
