"""A sleep pass against a compaction in another memory: the pass's moves are never lost."""

from __future__ import annotations

import threading
from pathlib import Path

import chromadb
import pytest

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_core._store import compaction
from tests.core._sleep.test_sleeper import assignment, clustered


def _memory(client) -> MagneticMemory:
    return MagneticMemory(namespace="ns", embedder=HashingEmbedder(48), client=client)


def test_moves_landing_after_the_compactions_last_check_are_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # b's pass moves cells (a metadata-only rewrite of their group) in the old collection after
    # a's compaction made its last check: the copy misses them, so b must write them again
    x, _ = clustered()
    client = chromadb.PersistentClient(str(tmp_path / "store"))
    a, b = _memory(client), _memory(client)
    try:
        a.add([f"fact {i}" for i in range(len(x))], ids=[f"c{i}" for i in range(len(x))], vectors=x)
        a.delete([f"c{i}" for i in range(40)])
        b.refresh()
        moving, landed, release = threading.Event(), threading.Event(), threading.Event()
        relocate = b._store.relocate_cells

        def relocate_when_released(*args, **kwargs):
            moving.set()
            release.wait(20)
            relocate(*args, **kwargs)
            landed.set()

        monkeypatch.setattr(b._store, "relocate_cells", relocate_when_released)
        reports = []
        sleeper = threading.Thread(target=lambda: reports.append(b.sleep()))
        sleeper.start()
        assert moving.wait(60)  # b has planned its pass and is about to write the moves
        swap_in = compaction.swap_in

        def land_then_swap(*args, **kwargs):
            release.set()
            assert landed.wait(20)  # b's moves are in the old collection only
            return swap_in(*args, **kwargs)

        monkeypatch.setattr(compaction, "swap_in", land_then_swap)
        assert a.compact().done
        sleeper.join(60)
        assert not sleeper.is_alive() and reports[0].moved > 0
        expected = assignment(b)
    finally:
        a.close()
        b.close()
    reopened = chromadb.PersistentClient(str(tmp_path / "store"))
    with _memory(reopened) as again:
        assert assignment(again) == expected
        assert again.count() == len(x) - 40
