"""Durability promises of the store: paths, failed writes, big writes, crashes."""

from __future__ import annotations

import os

from magnetic_core import HashingEmbedder, MagneticMemory


def test_relative_paths_from_two_working_directories_are_two_stores(tmp_path, monkeypatch):
    # chromadb caches clients by the path string: "./store" from two directories must not
    # reach the first store.
    emb = HashingEmbedder(32)
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    monkeypatch.chdir(tmp_path / "one")
    first = MagneticMemory(path="./store", embedder=emb)
    first.add(["written from one"], ids=["a"])
    monkeypatch.chdir(tmp_path / "two")
    second = MagneticMemory(path="./store", embedder=emb)
    try:
        assert second.count() == 0
        second.add(["written from two"], ids=["b"])
        assert first.get(["b"]) == []
        assert os.path.isdir(tmp_path / "two" / "store")
    finally:
        second.close()
        first.close()


def test_a_reload_that_fails_midway_leaves_nothing_half_built(tmp_path, hashing, monkeypatch):
    import pytest

    from magnetic_core import PersistenceError

    mem = MagneticMemory(path=str(tmp_path), embedder=hashing)
    mem.add([f"memory {i}" for i in range(30)], ids=[f"c{i}" for i in range(30)])
    monkeypatch.setattr(mem._store.cells, "upsert", _raise)
    real_get = mem._store.cells.get
    pages = {"n": 0}

    def get_then_fail(**kwargs):
        if "offset" in kwargs:  # the reload's paging: the first page, then an outage
            pages["n"] += 1
            if pages["n"] > 1:
                raise OSError("connection reset")
            kwargs["limit"] = 10
        return real_get(**kwargs)

    monkeypatch.setattr(mem._store.cells, "get", get_then_fail)
    with pytest.raises(PersistenceError):
        mem.add(["more"], ids=["x"])
    # the reload after the failed write died after one page: nothing partial is served
    with pytest.raises(PersistenceError, match="cannot tell what is stored"):
        mem.count()
    monkeypatch.undo()
    assert mem.count() == 30
    assert mem.get(["x"]) == []
    mem.close()


def _raise(*args, **kwargs):
    raise OSError("disk full")


def test_building_a_store_or_its_writer_writes_nothing(tmp_path, hashing):
    import chromadb

    from magnetic_core._store.persistence import ChromaStore
    from magnetic_core._store.state import load_state

    client = chromadb.PersistentClient(path=str(tmp_path))
    try:
        ChromaStore(client, "quiet")
        assert client.list_collections() == []
        with MagneticMemory(namespace="quiet", embedder=hashing, client=client) as mem:
            mem.add(["one", "two"], ids=["a", "b"])
            store = mem._store
            cached = store.groups.count()
            assert cached < len(mem.groups())  # the cache is behind (written in bulk later)
            load_state(store, hashing.dim, mem.config)  # builds a WriteBack: compares only
            assert store.groups.count() == cached
    finally:
        client.close()


def _legacy_store(path, monkeypatch, hashing) -> list[str]:
    """A store built with the 2-link HNSW graph older versions used."""
    from magnetic_core._store import persistence

    legacy = {"hnsw": {"space": "cosine", "ef_construction": 2, "max_neighbors": 2}}
    monkeypatch.setattr(persistence, "_COLLECTION_CONFIG", legacy)
    with MagneticMemory(path=str(path), embedder=hashing) as mem:
        mem.add(
            [f"memory {i} of topic {i % 4}" for i in range(50)],
            ids=[f"c{i}" for i in range(50)],
            metadatas=[{"i": i} for i in range(50)],
        )
        texts = [c.text for c in mem.get()]
    monkeypatch.undo()
    return texts


def test_a_store_with_the_fragile_hnsw_graph_is_rebuilt_on_open(tmp_path, hashing, monkeypatch):
    import chromadb

    texts = _legacy_store(tmp_path, monkeypatch, hashing)
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        assert [c.text for c in mem.get()] == texts
        assert mem.get(["c7"])[0].metadata == {"i": 7}
        for col in (mem._store.cells, mem._store.groups):
            assert col.configuration["hnsw"]["max_neighbors"] >= 16
        mem.add(["after the rebuild"], ids=["new"])
    client = chromadb.PersistentClient(path=str(tmp_path))
    try:
        assert sorted(c.name for c in client.list_collections()) == [
            "mag-default-cells",
            "mag-default-groups",
        ]
    finally:
        client.close()
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        assert mem.count() == 51


def test_a_rebuild_cut_short_between_drop_and_rename_is_finished(tmp_path, hashing, monkeypatch):
    import chromadb

    texts = _legacy_store(tmp_path, monkeypatch, hashing)
    client = chromadb.PersistentClient(path=str(tmp_path))
    old = client.get_collection("mag-default-cells")
    got = old.get(include=["embeddings", "documents", "metadatas"])
    copy = client.create_collection(
        "mag-default-cells-rebuild", metadata=old.metadata, embedding_function=None
    )
    copy.add(
        ids=got["ids"],
        embeddings=got["embeddings"],
        documents=got["documents"],
        metadatas=got["metadatas"],
    )
    client.delete_collection("mag-default-cells")  # the crash came right after this
    client.close()
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        assert [c.text for c in mem.get()] == texts
