"""Loading a namespace's state in one piece, and saving its snapshot only when it is true."""

from __future__ import annotations

import shutil

import chromadb
import pytest

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_core._store.index_file import DIRECTORY
from magnetic_core._store.journal import WriterClock
from magnetic_core._store.persistence import ChromaStore
from magnetic_core._store.state import load_state, save_snapshot
from magnetic_core.config import MemoryConfig
from magnetic_core.errors import PersistenceError
from tests import invariants

EMB = HashingEmbedder(32)
TOPICS = ("red apples and pears", "jazz trumpet solos", "rust borrow checker")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A store written and closed by a memory: its groups and cells as the memory had them."""
    path = tmp_path_factory.mktemp("written")
    with MagneticMemory(path=str(path), embedder=EMB) as mem:
        texts = [f"{TOPICS[i % 3]} note {i}" for i in range(30)]
        mem.add(texts, ids=[f"c{i}" for i in range(30)], metadatas=[{"i": i} for i in range(30)])
        groups = {gid: sorted(g.ids) for gid, g in mem._index.groups.items()}
        cells = {c.id: (c.text, c.metadata) for c in mem.get()}
    return path, groups, cells


@pytest.fixture
def stored(written, tmp_path):
    """A copy of the written store for one test to change."""
    path, groups, cells = written
    shutil.copytree(path, tmp_path / "store")
    return tmp_path / "store", groups, cells


def _open(path) -> ChromaStore:
    return ChromaStore(chromadb.PersistentClient(path=str(path)), "default").open()


def _groups_of(state) -> dict[str, list[str]]:
    return {gid: sorted(g.ids) for gid, g in state.index.groups.items()}


def _loaded_without_snapshot(path):
    """The store's state read from its rows (its snapshot removed), and a clock that saw it."""
    shutil.rmtree(path / DIRECTORY)
    clock = WriterClock(_open(path))
    state = load_state(clock.store, EMB.dim, MemoryConfig(), clock=clock)
    clock.seen = state.seen
    return state, clock


def _dump(store: ChromaStore) -> tuple:
    cells = store.cells.get(include=["metadatas", "documents"])
    groups = store.groups.get(include=["metadatas"])
    meta = dict(store.settings())
    return cells["ids"], cells["metadatas"], cells["documents"], groups["ids"], meta


@pytest.mark.parametrize("snapshot", [True, False])
def test_the_loaded_state_is_the_state_that_was_stored(stored, snapshot: bool):
    path, groups, cells = stored
    if not snapshot:
        shutil.rmtree(path / DIRECTORY)
    store = _open(path)
    state = load_state(store, EMB.dim, MemoryConfig())
    assert state.snapshot.current is snapshot
    assert _groups_of(state) == groups
    assert {c: (r.text, r.metadata) for c, r in state.catalog.records.items()} == cells
    assert len(state.index) == len(state.catalog) == 30
    invariants.centroids_are_member_means(state.index)  # from the snapshot's sums or summed


def test_loading_writes_nothing_to_chroma(stored):
    path, _, _ = stored
    shutil.rmtree(path / DIRECTORY)
    store = _open(path)
    before = _dump(store)
    load_state(store, EMB.dim, MemoryConfig(), clock=WriterClock(store))
    assert _dump(store) == before


def test_replayed_moves_are_placed_and_marked_for_write_back(stored):
    path, groups, _ = stored
    (a, members_a), (b, _) = sorted(groups.items(), key=lambda kv: -len(kv[1]))[:2]
    mover = members_a[0]
    state = load_state(_open(path), EMB.dim, MemoryConfig(), replay={mover: b})
    assert state.index.loc[mover].gid == b
    assert mover in state.index.moved
    assert sorted(state.index.groups[a].ids) == [c for c in members_a if c != mover]


def test_a_failing_read_raises_persistence_error(stored):
    path, _, _ = stored
    shutil.rmtree(path / DIRECTORY)
    store = _open(path)
    store.client.delete_collection(store.cells.name)
    with pytest.raises(PersistenceError, match="default"):
        load_state(store, EMB.dim, MemoryConfig())


def test_the_snapshot_is_saved_when_missing_and_gives_back_the_extra(stored):
    path, groups, _ = stored
    state, clock = _loaded_without_snapshot(path)
    asked: list[int] = []

    def extra():
        asked.append(1)
        import numpy as np

        return {"probe": np.arange(3)}

    save_snapshot(state, clock, extra)
    assert asked == [1] and (path / DIRECTORY / "default.npz").exists()
    again = load_state(_open(path), EMB.dim, MemoryConfig())
    assert again.snapshot.current and _groups_of(again) == groups
    assert again.extra["probe"].tolist() == [0, 1, 2]
    save_snapshot(again, clock, extra)  # current already: nothing asked, nothing written
    assert asked == [1]


def test_no_snapshot_is_saved_after_another_writer_changed_the_store(stored):
    path, _, _ = stored
    state, clock = _loaded_without_snapshot(path)
    with MagneticMemory(path=str(path), embedder=EMB) as other:
        other.add(["written by someone else"], ids=["x"])
    shutil.rmtree(path / DIRECTORY)  # the other writer saved its own at close
    save_snapshot(state, clock)
    # this state misses "x": a file of it would hide the cell from the next open
    assert not (path / DIRECTORY / "default.npz").exists()
