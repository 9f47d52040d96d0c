"""langchain-tests standard suites: vector store, retriever and the three memory tools."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import (
    RetrieversIntegrationTests,
    ToolsIntegrationTests,
    VectorStoreIntegrationTests,
)
from langchain_tests.unit_tests import ToolsUnitTests

from magnetic_langchain import (
    ForgetMemoryTool,
    MagneticRetriever,
    MagneticVectorStore,
    SearchMemoryTool,
    StoreMemoryTool,
)


class TestMagneticVectorStoreStandard(VectorStoreIntegrationTests):
    """Sync, async and get_by_ids halves all run (the defaults are left on)."""

    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[MagneticVectorStore]:
        store = MagneticVectorStore(embedding=self.get_embeddings(), path=tmp_path / "store")
        try:
            yield store
        finally:
            store.close()


def _store_with_facts(path: Path) -> MagneticVectorStore:
    store = MagneticVectorStore(embedding=DeterministicFakeEmbedding(size=6), path=path)
    store.add_texts(
        [
            "cats purr when content",
            "dogs bark at strangers",
            "parrots can mimic speech",
            "goldfish need clean water",
            "hamsters store food in their cheeks",
        ],
        [{"animal": a} for a in ("cat", "dog", "parrot", "fish", "hamster")],
        ids=["cat", "dog", "parrot", "fish", "hamster"],
    )
    return store


class _FreshStore:
    """Each test gets its own five-fact store, closed afterwards."""

    store: MagneticVectorStore

    @pytest.fixture(autouse=True)
    def _fresh_store(self, tmp_path: Path) -> Iterator[None]:
        self.store = _store_with_facts(tmp_path / "facts")
        try:
            yield
        finally:
            self.store.close()


class TestMagneticRetrieverStandard(_FreshStore, RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[MagneticRetriever]:
        return MagneticRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"store": self.store}

    @property
    def retriever_query_example(self) -> str:
        return "which pet barks?"


class _ToolStandard(_FreshStore):
    tool_class: type[BaseTool]

    @property
    def tool_constructor(self) -> type[BaseTool]:
        return self.tool_class

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return {"store": self.store}


class _SearchParams(_ToolStandard):
    tool_class = SearchMemoryTool

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"query": "which pet barks?", "k": 2}


class _StoreParams(_ToolStandard):
    tool_class = StoreMemoryTool

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"text": "The user's cat is called Miso.", "metadata": {"topic": "pets"}}


class _ForgetParams(_ToolStandard):
    tool_class = ForgetMemoryTool

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"ids": ["dog", "no-such-id"]}


class TestSearchMemoryToolUnit(_SearchParams, ToolsUnitTests):
    pass


class TestSearchMemoryToolIntegration(_SearchParams, ToolsIntegrationTests):
    pass


class TestStoreMemoryToolUnit(_StoreParams, ToolsUnitTests):
    pass


class TestStoreMemoryToolIntegration(_StoreParams, ToolsIntegrationTests):
    pass


class TestForgetMemoryToolUnit(_ForgetParams, ToolsUnitTests):
    pass


class TestForgetMemoryToolIntegration(_ForgetParams, ToolsIntegrationTests):
    pass
