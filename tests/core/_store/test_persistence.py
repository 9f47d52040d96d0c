"""What a cell row holds in Chroma survives a reopen, in the current and the earlier schemas."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time

import chromadb
import pytest

from magnetic_core import MagneticMemory
from magnetic_core._store.index_file import DIRECTORY
from magnetic_core._store.persistence import ROW_KEY, SCHEMA_VERSION
from magnetic_core._store.record import TEXT_KEY
from tests import invariants


def _fill(mem: MagneticMemory) -> None:
    mem.add(
        ["Ada Lovelace wrote notes.md", "plain words only", "third one at /srv/app/run.sh"],
        ids=["a", "b", "c"],
        metadatas=[{"n": 1, "when": dt.date(2024, 5, 1), "pair": (1, "x")}, None, {"x": None}],
    )
    time.sleep(0.01)  # timestamps have millisecond resolution
    mem.add(["Ada Lovelace rewrote notes.md"], ids=["a"], metadatas=[{"n": 2, "f": 0.1}])
    mem.mark_contradiction("a", "c", "they disagree")


def test_every_field_survives_a_reopen(tmp_path, hashing):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        _fill(mem)
        before = invariants.State.of(mem)
    a = before.cells["a"]
    assert a.updated_at > a.created_at and a.entities and a.contradictions
    assert before.cells["b"].metadata == {}
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        invariants.same_state(before, invariants.State.of(mem))


def _as_schema_2(raw: str) -> str:
    """A current row rewritten as schema 2 wrote it (long names, every field present)."""
    r = json.loads(raw)
    created = r["c"]
    return json.dumps(
        {
            "group": r["g"],
            "meta": r.get("m", {}),
            "entities": r.get("e", []),
            "created": created,
            "updated": r.get("u", created),
            "seq": r["s"],
            "links": r.get("l", []),
        }
    )


def test_a_schema_2_store_is_read_and_restamped(tmp_path, hashing):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        _fill(mem)
        before = mem.get()
    client = chromadb.PersistentClient(path=str(tmp_path))
    cells = client.get_collection("mag-default-cells")
    got = cells.get(include=["metadatas"])
    rows = [(i, m) for i, m in zip(got["ids"], got["metadatas"]) if ROW_KEY in m]  # not counters
    old = [{ROW_KEY: _as_schema_2(m[ROW_KEY])} for _, m in rows]
    cells.update(ids=[i for i, _ in rows], metadatas=old)
    cells.modify(metadata={**(cells.metadata or {}), "mag_schema": 2})
    client.close()

    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        assert mem.get() == before
        assert mem._store.settings()["mag_schema"] == SCHEMA_VERSION
        mem.add(["a new cell"], ids=["d"])
        after = invariants.State.of(mem)
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        invariants.same_state(after, invariants.State.of(mem))


def test_a_schema_3_store_keeps_its_texts_as_documents_and_is_read(tmp_path, hashing):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        _fill(mem)
        before = invariants.State.of(mem)
    client = chromadb.PersistentClient(path=str(tmp_path))
    cells = client.get_collection("mag-default-cells", embedding_function=None)
    got = cells.get(include=["metadatas", "embeddings"])
    rows = [k for k, m in enumerate(got["metadatas"]) if ROW_KEY in m]  # not counters
    # as schema 3 stored them: the text as Chroma's document, no text key
    cells.update(
        ids=[got["ids"][k] for k in rows],
        embeddings=[got["embeddings"][k] for k in rows],
        documents=[got["metadatas"][k][TEXT_KEY] for k in rows],
        metadatas=[{TEXT_KEY: None} for _ in rows],
    )
    assert all(TEXT_KEY not in m for m in cells.get(include=["metadatas"])["metadatas"])
    cells.modify(metadata={**(cells.metadata or {}), "mag_schema": 3})
    client.close()
    shutil.rmtree(tmp_path / DIRECTORY)  # the cells are read from their rows, not a snapshot

    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        invariants.same_state(before, invariants.State.of(mem))
        assert mem._store.settings()["mag_schema"] == SCHEMA_VERSION
        mem.add(["Ada Lovelace wrote it again"], ids=["a"])  # a schema 4 row over a schema 3 one
        after = invariants.State.of(mem)
        mem.compact()  # copies the rows: the rewritten one without its stale document
        got = mem._store.cells.get(ids=["a", "b"], include=["documents"])
        docs = dict(zip(got["ids"], got["documents"], strict=True))
        assert not docs["a"] and docs["b"] == "plain words only"
    shutil.rmtree(tmp_path / DIRECTORY, ignore_errors=True)
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        invariants.same_state(after, invariants.State.of(mem))
        assert mem.get(["a"])[0].text == "Ada Lovelace wrote it again"
        assert mem.get(["b"])[0].text == "plain words only"


def test_a_transient_chroma_read_failure_is_retried_and_a_write_is_not(tmp_path):
    # chroma-core/chroma#4212: a server read can fail with "Nothing found on disk" while
    # another client writes the segment; the read is tried again, a write never is.
    from magnetic_core._store.persistence import ChromaStore
    from magnetic_core.errors import PersistenceError

    store = ChromaStore(chromadb.PersistentClient(path=str(tmp_path)), "retry")
    calls: list[str] = []

    def get():
        calls.append("get")
        if len(calls) < 3:
            raise RuntimeError("Error creating hnsw segment reader: Nothing found on disk")
        return "rows"

    assert store._call("read rows", get) == "rows" and len(calls) == 3
    calls.clear()

    def count():  # the same race under load, in other words (seen with two writers)
        calls.append("count")
        if len(calls) < 2:
            raise RuntimeError("Error executing plan: Error finding id")
        return 7

    assert store._call("count rows", count) == 7 and len(calls) == 2

    def upsert():
        calls.append("upsert")
        raise RuntimeError("Error creating hnsw segment reader: Nothing found on disk")

    with pytest.raises(PersistenceError, match="Nothing found on disk"):
        store._call("write rows", upsert)
    assert calls.count("upsert") == 1


def test_a_call_that_finds_the_database_locked_is_made_again(tmp_path):
    # SQLite's write lock, held a moment by another connection (another client, or Chroma's
    # own background work), fails a call that did nothing: reads and writes alike (each is
    # idempotent) are made again, and a lock that never lifts still ends in a clear error.
    from magnetic_core._store.persistence import ChromaStore
    from magnetic_core.errors import PersistenceError

    store = ChromaStore(chromadb.PersistentClient(path=str(tmp_path)), "locked")
    calls: list[str] = []

    def upsert():
        calls.append("upsert")
        if len(calls) < 3:
            raise RuntimeError("error returned from database: (code: 5) database is locked")
        return "stored"

    assert store._call("write rows", upsert) == "stored" and len(calls) == 3
    calls.clear()

    def modify():
        calls.append("modify")
        raise RuntimeError("error returned from database: (code: 5) database is locked")

    with pytest.raises(PersistenceError, match="database is locked"):
        store._call("change a setting", modify)
    assert len(calls) == 5  # the first call and four more, over about 1.75 s


def test_a_large_batch_of_new_ids_lands_whole_even_over_a_row_the_memory_skipped(tmp_path, hashing):
    # Large batches of new ids are written with Chroma's add, which ignores ids already
    # stored; a row the memory does not hold (here a corrupt one it skipped on open) must
    # still be replaced by the new cell, and another writer must see the write.
    texts = [f"note number {i} about topic {i % 7}" for i in range(300)]
    ids = [f"n{i}" for i in range(300)]
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add(["seed"], ids=["seed"])
    raw = chromadb.PersistentClient(path=str(tmp_path))
    cells = next(c for c in raw.list_collections() if c.name.endswith("-cells"))
    cells.add(ids=["n5"], embeddings=[[1.0] + [0.0] * (hashing.dim - 1)],
              documents=["old"], metadatas=[{ROW_KEY: "not json"}])  # fmt: skip
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        other = MagneticMemory(path=str(tmp_path), embedder=hashing)
        assert "n5" not in {c.id for c in mem.get()}
        mem.add(texts, ids=ids)
        assert other.refresh()
        assert len(other) == 301
        other.close()
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        got = {c.id: c.text for c in mem.get()}
    assert len(got) == 301 and got["n5"] == texts[5]


def test_the_groups_collection_is_persisted_often_so_a_cold_open_replays_little(tmp_path, hashing):
    # Chroma replays every write since its last HNSW persist when a client first reads a
    # collection; the groups collection (rewritten in bulk) is persisted every 100 writes,
    # also in a store created before (with Chroma's default of 1000).
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add([f"note {i}" for i in range(20)])
    raw = chromadb.PersistentClient(path=str(tmp_path))
    groups = raw.get_collection("mag-default-groups")
    assert groups.configuration["hnsw"]["sync_threshold"] <= 100
    groups.modify(configuration={"hnsw": {"sync_threshold": 1000}})  # as older versions left it
    cells_sync = raw.get_collection("mag-default-cells").configuration["hnsw"]["sync_threshold"]
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        assert len(mem) == 20
    groups = raw.get_collection("mag-default-groups")
    assert groups.configuration["hnsw"]["sync_threshold"] <= 100
    # the cells collection (large, appended to) keeps Chroma's setting
    assert raw.get_collection("mag-default-cells").configuration["hnsw"]["sync_threshold"] == (
        cells_sync
    )
