"""When Chroma fails mid-write, the error is clear and the memory stays as stored."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import chromadb
import numpy as np
import pytest

from magnetic_core import HashingEmbedder, MagneticMemory, PersistenceError
from magnetic_core.eval import clustered_data
from tests import invariants


class Boom(RuntimeError):
    pass


def test_failed_write_leaves_memory_as_stored(tmp_path, hashing, monkeypatch):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add(["first memory", "second memory"], ids=["a", "b"], metadatas=[{"v": 1}, {}])
        before = invariants.State.of(mem)

        def fail(*args, **kwargs):
            raise Boom("disk full")

        monkeypatch.setattr(mem._store.cells, "upsert", fail)
        with pytest.raises(PersistenceError, match="disk full") as info:
            mem.add(["third memory", "first memory, edited"], ids=["c", "a"])
        assert isinstance(info.value.__cause__, Boom)
        invariants.same_state(before, invariants.State.of(mem))
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
    # the right size but a stale centroid (e.g. one cell updated in place)
    groups.upsert(
        ids=[stored_ids[4]], embeddings=[[0.5] * 128], metadatas=[{"size": truth[stored_ids[4]]}]
    )
    client.close()
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        assert {g.id: g.size for g in mem.groups()} == truth
        invariants.hierarchy(mem)
        centroids = {g.gid: mem._index.centroids[g.slot] for g in mem._index.groups.values()}
    client = chromadb.PersistentClient(path=str(tmp_path))
    stored = client.get_collection("mag-default-groups").get(include=["metadatas", "embeddings"])
    assert {i: m["size"] for i, m in zip(stored["ids"], stored["metadatas"])} == truth
    for gid, vec in zip(stored["ids"], stored["embeddings"]):
        np.testing.assert_allclose(vec, centroids[gid], atol=1e-6)
    client.close()


def _stored_groups(path) -> dict[str, int]:
    client = chromadb.PersistentClient(path=str(path))
    try:
        got = client.get_collection("mag-default-groups").get(include=["metadatas"])
        return {i: m["size"] for i, m in zip(got["ids"], got["metadatas"])}
    finally:
        client.close()


def test_bulk_loads_write_the_group_cache_rarely_and_close_brings_it_up_to_date(
    tmp_path, hashing, monkeypatch
):
    vecs, _ = clustered_data(1600, 128, 12, seed=3)
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        rows = []
        real = mem._store.write_groups

        def counted(gids, centroids, sizes):
            rows.append(len(gids))
            real(gids, centroids, sizes)

        monkeypatch.setattr(mem._store, "write_groups", counted)
        for start in range(0, 1600, 20):
            mem.add(
                [f"cell {i}" for i in range(start, start + 20)],
                vectors=vecs[start : start + 20],
                ids=[f"c{i}" for i in range(start, start + 20)],
            )
        # every batch changes groups, but their rows are written about once per 32 cells
        assert mem._writeback.cells_per_group_row == 32
        assert 0 < sum(rows) <= 1600 / 32
        assert len(rows) < 80 / 8
        truth = {g.id: g.size for g in mem.groups()}
    assert _stored_groups(tmp_path) == truth


WRITE_AND_EXIT = textwrap.dedent(
    """
    import os, sys
    from magnetic_core import HashingEmbedder, MagneticMemory
    from magnetic_core.eval import clustered_data
    vecs, _ = clustered_data(300, 32, 6, seed=5)
    mem = MagneticMemory(path=sys.argv[1], embedder=HashingEmbedder(32))
    mem.add([f"cell {i}" for i in range(300)], vectors=vecs)
    mem.add(["one more"], vectors=vecs[:1])
    os._exit(0)  # killed: no close(), no finalizers
    """
)


def test_a_memory_never_closed_loses_nothing_and_its_group_cache_is_repaired(tmp_path):
    subprocess.run([sys.executable, "-c", WRITE_AND_EXIT, str(tmp_path)], check=True)
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder(32)) as mem:
        assert mem.count() == 301
        truth = {g.id: g.size for g in mem.groups()}
        assert sum(truth.values()) == 301
    assert _stored_groups(tmp_path) == truth


def test_a_memory_left_open_at_exit_is_closed_and_the_next_open_reads_its_snapshot(tmp_path):
    # the script ends without close(): the interpreter's exit closes the memory
    script = WRITE_AND_EXIT.replace("os._exit(0)  # killed: no close(), no finalizers", "")
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True)
    assert (tmp_path / "magnetic-index" / "default.npz").exists()
    stored = _stored_groups(tmp_path)
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder(32)) as mem:
        assert mem._state.snapshot.current  # opened from the snapshot, not from every cell
        assert mem.count() == 301
        assert stored == {g.id: g.size for g in mem.groups()}


def test_a_memory_on_a_client_passed_in_is_closed_at_exit_too(tmp_path):
    # the LlamaIndex store opens its memory this way: an embedded client it passes in
    script = WRITE_AND_EXIT.replace("os._exit(0)  # killed: no close(), no finalizers", "")
    script = script.replace(
        "MagneticMemory(path=sys.argv[1], embedder=HashingEmbedder(32))",
        "MagneticMemory(client=__import__('chromadb').PersistentClient(sys.argv[1]), "
        "embedder=HashingEmbedder(32))",
    )
    assert "PersistentClient" in script
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True)
    assert (tmp_path / "magnetic-index" / "default.npz").exists()


def test_a_store_of_another_schema_is_refused_clearly(tmp_path, hashing):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add(["x"])
        mem._store.save_settings(mag_schema=99)
    with pytest.raises(PersistenceError, match="schema 99") as info:
        MagneticMemory(path=str(tmp_path), embedder=hashing)
    assert "upgrade" in str(info.value)


def test_cells_hold_their_record_and_text_under_reserved_keys_and_no_document(tmp_path, hashing):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add(["x marks it"], metadatas=[{"user": "value"}])
        cell = mem.get()[0].id
        stored = mem._store.cells.get(ids=[cell], include=["metadatas", "documents"])
    assert sorted(stored["metadatas"][0]) == ["_mag", "_mag_x"]  # user metadata is inside
    assert stored["metadatas"][0]["_mag_x"] == "x marks it"
    assert stored["documents"] == [None]  # so Chroma builds no full-text index over it
