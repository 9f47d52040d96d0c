"""A real Chroma server that dies mid-stream and comes back: the memory never lies."""

from __future__ import annotations

import pytest

from magnetic_core import HashingEmbedder, MagneticMemory, PersistenceError
from tests import invariants

EMB = HashingEmbedder(32)


def _stored_ids(server) -> set[str]:
    """What the server holds, read by a client of its own."""
    got = server.client().get_collection("mag-outage-cells").get(include=["metadatas"])
    return {i for i, m in zip(got["ids"], got["metadatas"]) if "_mag" in m}


def _consistent_or_refusing(mem: MagneticMemory, stored: set[str] | None) -> None:
    """Either every read answers with what is stored, or it refuses with a PersistenceError."""
    try:
        count = mem.count()
    except PersistenceError as e:
        assert "server" in str(e) or "Chroma" in str(e)
        with pytest.raises(PersistenceError):
            mem.search("anything", k=3)
        with pytest.raises(PersistenceError):
            mem.get()
        return
    if stored is not None:
        assert count == len(stored)
        assert {c.id for c in mem.get()} == stored


def test_the_memory_recovers_after_its_server_dies_and_returns(own_chroma_server):
    server = own_chroma_server
    mem = MagneticMemory(namespace="outage", embedder=EMB, client=server.client())
    mem.add(
        [f"memory number {i} about topic {i % 5}" for i in range(60)],
        ids=[f"c{i}" for i in range(60)],
    )
    server.stop()
    with pytest.raises(PersistenceError):
        mem.add(["written while the server is down"], ids=["lost"])
    _consistent_or_refusing(mem, None)
    with pytest.raises(PersistenceError):
        mem.delete(ids=["c1"])
    _consistent_or_refusing(mem, None)

    server.start()
    # once the server is back every call tells the truth and every write lands
    assert mem.count() == 60
    assert {c.id for c in mem.get()} == _stored_ids(server)
    assert mem.search("memory number 7 about topic 2", k=1)[0].id == "c7"
    assert mem.add(["a new memory after the outage"], ids=["new"]) == ["new"]
    mem.add(["memory number 3, edited"], ids=["c3"])
    assert mem.delete(ids=["c4", "c5"]) == 2
    stored = _stored_ids(server)
    assert "new" in stored and "lost" not in stored and not {"c4", "c5"} & stored
    assert len(stored) == mem.count() == 59
    mem.close()
    with MagneticMemory(namespace="outage", embedder=EMB, client=server.client()) as again:
        assert again.get(["c3"])[0].text == "memory number 3, edited"
        assert again.count() == 59
        assert set(invariants.hierarchy(again)) == stored


def test_a_write_during_the_outage_is_not_acknowledged_after_it(own_chroma_server):
    server = own_chroma_server
    mem = MagneticMemory(namespace="outage", embedder=EMB, client=server.client())
    mem.add(["kept"], ids=["k"])
    server.stop()
    for _ in range(3):  # repeated failures change nothing
        with pytest.raises(PersistenceError):
            mem.add(["during"], ids=["d"])
        _consistent_or_refusing(mem, None)
    server.start()
    _consistent_or_refusing(mem, {"k"})
    assert mem.get(["d"]) == []
    mem.close()
