"""When Chroma fails mid-write, the error is clear and the memory stays as stored."""

from __future__ import annotations

import chromadb
import pytest

from magnetic_core import MagneticMemory, PersistenceError


class Boom(RuntimeError):
    pass


def test_failed_write_leaves_memory_as_stored(tmp_path, hashing, monkeypatch):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add(["first memory", "second memory"], ids=["a", "b"], metadatas=[{"v": 1}, {}])
        before = (mem.get(), sorted(g.id for g in mem.groups()))

        def fail(*args, **kwargs):
            raise Boom("disk full")

        monkeypatch.setattr(mem._store.cells, "upsert", fail)
        with pytest.raises(PersistenceError, match="disk full") as info:
            mem.add(["third memory", "first memory, edited"], ids=["c", "a"])
        assert isinstance(info.value.__cause__, Boom)
        assert (mem.get(), sorted(g.id for g in mem.groups())) == before
        monkeypatch.undo()
        mem.add(["third memory"], ids=["c"])
        assert mem.count() == 3


def test_failed_delete_keeps_every_cell(tmp_path, hashing, monkeypatch):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add(["one", "two"], ids=["a", "b"])
        monkeypatch.setattr(
            mem._store.cells, "delete", lambda **kw: (_ for _ in ()).throw(Boom("io"))
        )
        with pytest.raises(PersistenceError):
            mem.delete(ids=["a"])
        assert mem.count() == 2
        assert [h.id for h in mem.search("one", k=1)] == ["a"]


def test_stale_group_cache_is_repaired_on_open(tmp_path, hashing):
    # Simulates a crash between the cells write and the groups write: the cells
    # collection is the truth, groups are recomputed from it.
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add([f"memory about topic {i}" for i in range(40)])
        truth = {g.id: g.size for g in mem.groups()}
    client = chromadb.PersistentClient(path=str(tmp_path))
    groups = client.get_collection("mag-default-groups")
    stored_ids = groups.get()["ids"]
    groups.delete(ids=stored_ids[:3])
    groups.upsert(ids=[stored_ids[3]], embeddings=[[1.0] * 128], metadatas=[{"size": 1234}])
    groups.upsert(ids=["g-stale"], embeddings=[[1.0] * 128], metadatas=[{"size": 99}])
    client.close()
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        assert {g.id: g.size for g in mem.groups()} == truth
    client = chromadb.PersistentClient(path=str(tmp_path))
    stored = client.get_collection("mag-default-groups").get(include=["metadatas"])
    assert {i: m["size"] for i, m in zip(stored["ids"], stored["metadatas"])} == truth
    client.close()


def test_a_store_of_another_schema_is_refused_clearly(tmp_path, hashing):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add(["x"])
        mem._store.save_settings(mag_schema=99)
    with pytest.raises(PersistenceError, match="schema 99") as info:
        MagneticMemory(path=str(tmp_path), embedder=hashing)
    assert "upgrade" in str(info.value)


def test_cells_hold_one_reserved_metadata_key(tmp_path, hashing):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add(["x"], metadatas=[{"user": "value"}])
        stored = mem._store.cells.get(include=["metadatas"])["metadatas"][0]
    assert list(stored) == ["_mag"]
