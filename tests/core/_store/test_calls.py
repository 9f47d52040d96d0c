"""Calls into Chroma: a failure becomes a PersistenceError with the hint; racy reads retry."""

from __future__ import annotations

import chromadb
import numpy as np
import pytest

from magnetic_core._store import calls
from magnetic_core._store.calls import HINT, ChromaCalls, filler
from magnetic_core.errors import PersistenceError


@pytest.fixture(autouse=True)
def _short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    # the real waits add up to 1.75 s; the count of retries is what is under test
    monkeypatch.setattr(calls, "_READ_RETRIES", (0.001,) * len(calls._READ_RETRIES))


@pytest.fixture
def collection():
    client = chromadb.EphemeralClient()
    name = f"calls-{np.random.default_rng().integers(1 << 30)}"
    yield client.get_or_create_collection(name, embedding_function=None)
    client.delete_collection(name)


def test_a_real_chroma_failure_becomes_a_persistence_error_naming_the_call(collection):
    collection.add(ids=["a"], embeddings=[[1.0, 0.0, 0.0]])
    with pytest.raises(PersistenceError) as info:
        # a 2-d vector into a 3-d collection: Chroma refuses it
        ChromaCalls("notes")._call(
            "write cells", collection.upsert, ids=["b"], embeddings=[[1.0, 0.0]]
        )
    err = info.value
    assert "write cells" in str(err) and "'notes'" in str(err)
    assert err.hint == HINT and HINT in str(err)
    assert err.__cause__ is not None  # chained from Chroma's own error
    assert collection.count() == 1


def test_a_successful_call_returns_chromas_answer(collection):
    collection.add(ids=["a", "b"], embeddings=[[1.0, 0.0], [0.0, 1.0]])
    got = ChromaCalls("ns")._call("read", collection.get, ids=["b"], include=[])
    assert got["ids"] == ["b"]


class Flaky:
    """A callable named like a Chroma method that fails ``failures`` times, then answers."""

    def __init__(self, name: str, failures: int, message: str = "Nothing found on disk") -> None:
        self.__name__ = name
        self.failures, self.message, self.calls = failures, message, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(f"{self.message}: segment 7")
        return {"args": args, "kwargs": kwargs}


@pytest.mark.parametrize("name", ["get", "count", "query", "peek"])
def test_a_transiently_failing_read_is_retried_until_it_answers(name: str):
    fn = Flaky(name, failures=3)
    assert ChromaCalls("ns")._call("read", fn, 1, k=2) == {"args": (1,), "kwargs": {"k": 2}}
    assert fn.calls == 4


def test_a_read_failing_on_every_retry_raises_after_the_last():
    fn = Flaky("get", failures=100, message="Error finding id")
    with pytest.raises(PersistenceError, match="Error finding id"):
        ChromaCalls("ns")._call("read", fn)
    assert fn.calls == len(calls._READ_RETRIES) + 1


def test_a_write_is_never_retried_even_on_a_transient_message():
    fn = Flaky("upsert", failures=1)
    with pytest.raises(PersistenceError, match="upsert rows"):
        ChromaCalls("ns")._call("upsert rows", fn)
    assert fn.calls == 1


def test_a_read_failing_for_another_reason_is_not_retried():
    fn = Flaky("get", failures=1, message="permission denied")
    with pytest.raises(PersistenceError, match="permission denied"):
        ChromaCalls("ns")._call("read", fn)
    assert fn.calls == 1


def test_a_call_on_a_vanished_collection_fails_when_nothing_replaced_it():
    # the base class knows no collection to rebind to: one more try, then the error
    fn = Flaky("get", failures=100, message="Collection [x] does not exist")
    with pytest.raises(PersistenceError, match="does not exist"):
        ChromaCalls("ns")._call("read", fn)
    assert fn.calls == 2


@pytest.mark.parametrize("call", ["get", "upsert"])
def test_a_call_on_a_replaced_collection_goes_to_the_new_one(tmp_path, call: str):
    from magnetic_core._store.persistence import ChromaStore

    client = chromadb.PersistentClient(path=str(tmp_path))
    store = ChromaStore(client, "ns").open()
    store.cells.add(ids=["old"], embeddings=[[1.0, 0.0]])
    stale = store.cells
    client.delete_collection(stale.name)  # another client swaps in a copy (a compaction)
    client.create_collection(stale.name, embedding_function=None).add(
        ids=["copied"], embeddings=[[0.0, 1.0]]
    )
    if call == "get":
        got = store._call("read cells", stale.get, include=[])
        assert got["ids"] == ["copied"]
    else:
        store._call("write cells", stale.upsert, ids=["new"], embeddings=[[1.0, 1.0]])
        assert sorted(store.cells.get(include=[])["ids"]) == ["copied", "new"]
    assert store.cells is not stale


@pytest.mark.parametrize("dim", [1, 3, 384])
def test_filler_is_one_unit_row_of_the_dimension(dim: int):
    row = filler(dim)
    assert row.shape == (1, dim) and row.dtype == np.float32
    assert np.linalg.norm(row) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "message",
    [
        "Missing field: [Missing metadata segment]",
        "Error executing plan: Error sending backfill request to compactor",
    ],
)
def test_a_call_failing_while_its_collection_is_dropped_goes_to_the_new_one(tmp_path, message):
    # how chromadb 1.5 failed reads that raced another client's drop of the collection
    # (beside "does not exist"), in threaded trials: the call is made on the copy now in place
    from magnetic_core._store.persistence import ChromaStore

    client = chromadb.PersistentClient(path=str(tmp_path))
    store = ChromaStore(client, "ns").open()
    stale = store.cells
    client.delete_collection(stale.name)
    client.create_collection(stale.name, embedding_function=None).add(
        ids=["copied"], embeddings=[[0.0, 1.0]]
    )
    racing = Flaky("get", failures=100, message=message)
    racing.__self__ = stale  # a call on the collection being dropped
    got = store._call("read cells", racing, include=[])
    assert got["ids"] == ["copied"] and store.cells is not stale
