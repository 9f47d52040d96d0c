"""A callable predicate is accepted wherever a ``where`` dict is (search, get, delete)."""

from __future__ import annotations

import chromadb
import pytest

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_core.filters import compile_filter


@pytest.fixture
def mem(tmp_path):
    client = chromadb.PersistentClient(path=str(tmp_path))
    memory = MagneticMemory(namespace="pred", embedder=HashingEmbedder(dim=64), client=client)
    memory.add(
        ["red apples", "green apples", "red cars"],
        metadatas=[{"tags": ["fruit", "red"]}, {"tags": ["fruit"]}, {"tags": ["red"]}],
        ids=["a", "b", "c"],
    )
    yield memory
    memory.close()
    client.close()


def is_red(meta):
    return "red" in meta.get("tags", [])


def test_compile_filter_returns_a_callable_unchanged():
    assert compile_filter(is_red) is is_red


def test_search_get_and_delete_accept_a_predicate(mem):
    assert {h.id for h in mem.search("apples", k=3, filter=is_red)} == {"a", "c"}
    assert [c.id for c in mem.get(filter=is_red)] == ["a", "c"]
    assert mem.delete(filter=is_red) == 2
    assert [c.id for c in mem.get()] == ["b"]
