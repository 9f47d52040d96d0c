"""The sleep pass's intent log lives in the namespace's journal; old stores still recover."""

from __future__ import annotations

import json
from pathlib import Path

import chromadb

from magnetic_core._sleep.journal import SleepJournal
from tests.core._sleep.test_sleeper import clustered, open_memory
from tests.invariants import assignment


def _two_groups(path: Path) -> tuple[str, str]:
    """A store with several groups; returns one cell and a group it is not in."""
    x, _ = clustered(seed=3, k=4, per=10)
    with open_memory(path) as mem:
        mem.add(
            [f"fact {i}" for i in range(len(x))], ids=[f"c{i}" for i in range(len(x))], vectors=x
        )
        where = assignment(mem)
    other = next(g for g in sorted(set(where.values())) if g != where["c0"])
    return "c0", other


def test_a_pass_recorded_but_not_finished_is_replayed_on_open(tmp_path: Path):
    cell, target = _two_groups(tmp_path)
    with open_memory(tmp_path) as mem:
        SleepJournal(mem._store, mem.dim).begin({cell: target}, "p1")
        mem._closed = True  # die without the pass's writes (and without close())
    with open_memory(tmp_path) as mem:
        assert assignment(mem)[cell] == target
        assert SleepJournal(mem._store, mem.dim).pending() == {}
        names = {c.name for c in mem.client.list_collections()}
        assert names == {"mag-default-cells", "mag-default-groups"}  # one journal, no third
    with open_memory(tmp_path) as mem:
        assert assignment(mem)[cell] == target


def test_entries_without_a_head_are_dropped(tmp_path: Path):
    cell, target = _two_groups(tmp_path)
    with open_memory(tmp_path) as mem:
        journal = SleepJournal(mem._store, mem.dim)
        journal.begin({cell: target}, "p1")
        mem._store.log_delete({"_mag_j": "sh"})  # a crash before the head was written
        before = assignment(mem)
    with open_memory(tmp_path) as mem:
        assert assignment(mem) == before


def test_an_old_store_with_its_own_journal_collection_still_recovers(tmp_path: Path):
    cell, target = _two_groups(tmp_path)
    # The format of stores written before the journals were one: a collection of its own.
    client = chromadb.PersistentClient(path=str(tmp_path))
    old = client.get_or_create_collection("mag-default-journal", embedding_function=None)
    old.upsert(ids=["p1-0"], embeddings=[[1.0]], documents=[json.dumps({cell: target})])
    old.upsert(
        ids=["head"],
        embeddings=[[1.0]],
        documents=[json.dumps({"pass": "p1", "records": ["p1-0"]})],
    )
    with open_memory(tmp_path) as mem:
        assert assignment(mem)[cell] == target
        assert "mag-default-journal" not in {c.name for c in mem.client.list_collections()}
    with open_memory(tmp_path) as mem:
        assert assignment(mem)[cell] == target
