"""Write-back: after it, the rows in Chroma say what the in-memory hierarchy says."""

from __future__ import annotations

import chromadb
import numpy as np
import pytest

from magnetic_core._index.index import HierIndex
from magnetic_core._store.catalog import Catalog
from magnetic_core._store.persistence import ChromaStore
from magnetic_core._store.record import CellRecord
from magnetic_core._store.writeback import WriteBack
from magnetic_core.errors import PersistenceError

DIM = 8


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _record(i: int) -> CellRecord:
    return CellRecord(
        text=f"cell {i}", metadata={"i": i}, entities=(f"E{i % 3}",), created_at=1.0 + i,
        updated_at=1.0 + i,
    )  # fmt: skip


class Setup:
    """A real store, an index and a catalog of ``n`` cells in clustered directions."""

    def __init__(self, path: str, n: int = 40, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.store = ChromaStore(chromadb.PersistentClient(path=path), "ns").open()
        self.store.check_stamp("test", DIM)
        self.index, self.catalog = HierIndex(DIM, max_group_size=12), Catalog()
        centres = _unit(rng, 4)
        vecs = centres[rng.integers(0, 4, n)] + 0.15 * rng.standard_normal((n, DIM))
        self.ids = [f"c{i}" for i in range(n)]
        self.index.assign(self.ids, (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)), 0.6)
        for i, cid in enumerate(self.ids):
            self.catalog.put(cid, _record(i))
        self.wb = WriteBack(self.store, self.index, self.catalog, self.store.group_cache())


@pytest.fixture
def s(tmp_path) -> Setup:
    return Setup(str(tmp_path))


def assert_stored_equals_memory(s: Setup) -> None:
    """The cells collection holds exactly the in-memory cells, groups, seqs and records."""
    rows = {row.id: row for row in s.store.load()}
    assert rows.keys() == s.index.loc.keys()
    for cid, row in rows.items():
        assert row.group_id == s.index.loc[cid].gid
        assert row.seq == s.index.seq[cid]
        assert row.record.text == s.catalog.records[cid].text
        assert row.record.metadata == s.catalog.records[cid].metadata
        np.testing.assert_allclose(row.vector, s.index.vector(cid), atol=1e-6)


def assert_cache_equals_groups(s: Setup) -> None:
    cache = s.store.group_cache()
    assert cache.keys() == s.index.groups.keys()
    for gid, g in s.index.groups.items():
        assert cache[gid][0] == g.n
        np.testing.assert_allclose(cache[gid][1], s.index.centroids[g.slot], atol=1e-5)


def test_cells_and_groups_written_back_equal_the_memory(s):
    s.wb.cells(s.ids)
    s.wb.groups()
    assert len(s.index.groups) > 1
    assert_stored_equals_memory(s)
    assert_cache_equals_groups(s)


def test_cells_moved_by_a_split_and_a_merge_are_persisted_with_the_next_write(s):
    s.wb.cells(s.ids)
    s.index.take_moved()
    big = max(s.index.groups.values(), key=lambda g: g.n)
    s.index.split(big)
    keep, absorb = sorted(s.index.groups.values(), key=lambda g: g.n)[:2]
    s.index.merge(keep, absorb)
    s.catalog.put("c0", _record(100))  # and one cell changed whole
    s.wb.cells(["c0"])
    s.wb.groups()
    assert_stored_equals_memory(s)
    assert_cache_equals_groups(s)
    assert s.index.take_moved() == set()  # nothing left to persist


def test_removed_cells_and_groups_leave_the_cache(s):
    s.wb.cells(s.ids)
    s.wb.groups()
    victim = next(iter(s.index.groups.values()))
    gone = list(victim.ids)
    for cid in gone:
        s.index.remove(cid)
        s.catalog.drop(cid)
    s.store.delete_cells(gone)
    s.wb.groups()
    assert victim.gid not in s.store.group_cache()
    assert_stored_equals_memory(s)
    assert_cache_equals_groups(s)


def test_the_group_cache_waits_for_enough_cell_traffic_unless_forced(tmp_path):
    s = Setup(str(tmp_path), n=40)
    s.wb.cells_per_group_row = 10_000  # one row due per 10,000 cells written: never yet
    s.wb.cells(s.ids)
    assert s.store.group_cache() == {}
    assert {r.id for r in s.store.load()} == set(s.ids)  # the cells are written at once
    s.wb.groups()  # forced, as on close
    assert_cache_equals_groups(s)


def test_a_new_writeback_only_compares_and_repair_fixes_a_stale_cache(tmp_path, s):
    s.wb.cells(s.ids)
    s.wb.groups()
    g = next(iter(s.index.groups.values()))
    wrong = np.roll(s.index.centroids[g.slot], 1)[None, :]
    s.store.write_groups([g.gid, "ghost"], np.vstack([wrong, wrong]), [g.n, 3])
    stale = s.store.group_cache()
    fresh = WriteBack(s.store, s.index, s.catalog, stale)
    assert s.store.group_cache().keys() == stale.keys()  # the constructor wrote nothing
    fresh.repair()
    assert_cache_equals_groups(s)  # the wrong centroid rewritten, the ghost dropped


def test_rows_of_gives_what_write_cells_would_store(s):
    vectors, texts, rows = s.wb.rows_of(["c3", "c1"])
    assert texts == ["cell 3", "cell 1"] and len(rows) == 2
    np.testing.assert_array_equal(vectors, s.index.vectors(["c3", "c1"]))
    empty = s.wb.rows_of([])
    assert empty[0].shape == (0, DIM) and empty[1:] == ([], [])


def test_a_failing_group_cache_update_does_not_fail_the_cell_write(s, caplog):
    def broken(*args, **kwargs):
        raise PersistenceError("groups collection unavailable")

    s.store.write_groups = broken  # type: ignore[method-assign]
    s.wb.cells_per_group_row = 1  # the cache is due after these few cells
    s.wb.cells(s.ids)  # the cells land; the cache is repaired on the next open
    assert {r.id for r in s.store.load()} == set(s.ids)
    assert "group cache was not updated" in caplog.text
    with pytest.raises(PersistenceError):
        s.wb.groups()
