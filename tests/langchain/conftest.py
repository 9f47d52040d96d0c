"""Fixtures of the LangChain tests: stores on tmp_path that are closed after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

from magnetic_core import HashingEmbedder
from magnetic_langchain import MagneticEmbeddings, MagneticVectorStore


@pytest.fixture
def make_store(tmp_path: Path) -> Iterator[Callable[..., MagneticVectorStore]]:
    """Build stores under tmp_path (a fresh namespace each); all are closed at teardown."""
    opened: list[MagneticVectorStore] = []

    def make(embedding: Embeddings | None = None, **kwargs: Any) -> MagneticVectorStore:
        kwargs.setdefault("path", tmp_path / "store")
        kwargs.setdefault("namespace", f"ns{len(opened)}")
        store = MagneticVectorStore(
            embedding or MagneticEmbeddings(HashingEmbedder(dim=128)), **kwargs
        )
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: Callable[..., MagneticVectorStore]) -> MagneticVectorStore:
    """An empty store with the (non-semantic, word-overlap) hashing embedder."""
    return make_store()
