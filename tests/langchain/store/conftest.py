"""Fixtures of the MagneticStore tests: stores built twice, ours and LangGraph's reference."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from magnetic_langchain.store import MagneticStore
from tests.langchain.store.helpers import DIMS, CharProfileEmbeddings, Twin


@pytest.fixture
def emb() -> CharProfileEmbeddings:
    return CharProfileEmbeddings(DIMS)


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Any]:
    opened: list[MagneticStore] = []

    def build(index: dict[str, Any] | None = None, **kwargs: Any) -> Twin:
        store = MagneticStore(str(tmp_path / f"s{len(opened)}"), index=index, **kwargs)
        opened.append(store)
        return Twin(store, InMemoryStore(index=index))

    yield build
    for store in opened:
        store.close()


@pytest.fixture
def twin(make: Any) -> Twin:
    return make()


@pytest.fixture
def vtwin(make: Any, emb: CharProfileEmbeddings) -> Twin:
    return make({"dims": DIMS, "embed": emb, "fields": ["text"]})
