"""A store fed vectors only opens its memory on first use, once, with the right dimension."""

from __future__ import annotations

import threading

import chromadb
import numpy as np
import pytest

from magnetic_core import MagneticMemory
from magnetic_core._store.deferred import PRECOMPUTED, DeferredMemory, StoreMemory
from magnetic_core.embeddings import VectorsOnly
from magnetic_core.errors import ClosedError


def _unit(n: int, dim: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_nothing_is_opened_before_the_first_vectors(tmp_path):
    deferred = DeferredMemory(path=str(tmp_path))
    assert deferred.existing() is None
    assert deferred.client.list_collections() == []  # no namespace created by looking
    deferred.close()


def test_the_first_vectors_fix_the_dimension_and_a_reopen_reads_it_from_the_stamp(tmp_path):
    deferred = DeferredMemory(path=str(tmp_path), namespace="notes")
    mem = deferred.ensure(6)
    assert mem.dim == 6 and mem.namespace == "notes" and mem.embedder.name == PRECOMPUTED
    assert deferred.ensure(6) is mem and deferred.existing() is mem
    mem.add(["a", "b", "c"], ids=["a", "b", "c"], vectors=_unit(3, 6))
    deferred.close()

    again = DeferredMemory(path=str(tmp_path), namespace="notes")
    found = again.existing()
    assert found is not None and found.dim == 6 and found.count() == 3
    # a stored namespace wins over the dimension asked for: its stamp says what it holds
    assert again.ensure(9) is found
    again.close()


def test_the_embedder_is_built_from_the_stored_name(tmp_path):
    made: list[tuple[int, str | None]] = []

    def make(dim: int, name: str | None) -> VectorsOnly:
        made.append((dim, name))
        return VectorsOnly(dim, name or "my-model")

    first = DeferredMemory(path=str(tmp_path), make_embedder=make)
    assert first.ensure(4).embedder.name == "my-model"
    first.close()
    second = DeferredMemory(path=str(tmp_path), make_embedder=make)
    assert second.existing() is not None
    second.close()
    assert made == [(4, None), (4, "my-model")]


def test_concurrent_first_use_opens_one_memory(tmp_path):
    deferred = DeferredMemory(path=str(tmp_path))
    start = threading.Barrier(6)
    got: list[MagneticMemory] = []

    def first_use() -> None:
        start.wait()
        got.append(deferred.ensure(5))

    threads = [threading.Thread(target=first_use) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(got) == 6 and all(m is got[0] for m in got)
    deferred.close()
    with pytest.raises(ClosedError):
        got[0].count()


def test_a_client_passed_in_is_not_closed(tmp_path):
    client = chromadb.PersistentClient(path=str(tmp_path))
    deferred = DeferredMemory(client=client)
    mem = deferred.ensure(3)
    deferred.close()
    with pytest.raises(ClosedError):
        mem.count()
    assert {c.name for c in client.list_collections()} >= {"mag-default-cells"}


def test_store_memory_closes_only_what_the_store_opened(tmp_path, hashing):
    given = MagneticMemory(path=str(tmp_path / "given"), embedder=hashing)
    StoreMemory(given, None, owned=False).close()
    assert given.count() == 0  # still open
    StoreMemory(given, None, owned=True).close()
    with pytest.raises(ClosedError):
        given.count()


def test_store_memory_opens_a_deferred_memory_on_ensure(tmp_path):
    store = StoreMemory(None, DeferredMemory(path=str(tmp_path)), owned=True)
    assert store.current() is None
    mem = store.ensure(4)
    assert store.current() is mem and mem.dim == 4
    store.close()
    store.close()  # idempotent
    with pytest.raises(ClosedError):
        mem.count()
