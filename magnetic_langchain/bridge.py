"""How the vector store talks to the engine: search options, async embedding, MMR picks.

The store's async methods embed with the LangChain model's own async API and then use the
core's async twins, so no thread is blocked on the embedding call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.runnables.config import run_in_executor

from magnetic_core import EmbeddingError, EmptyTextError, Hit, MagneticMemory
from magnetic_langchain.arguments import check_mmr, check_search_options
from magnetic_langchain.documents import maximal_marginal_relevance
from magnetic_langchain.embeddings import LangChainEmbedder

__all__ = ["MemoryBridge"]


class MemoryBridge:
    """Searches a memory on behalf of a LangChain store.

    Args:
        memory: the engine.
        embedding: the LangChain model used for async query and document embedding.
    """

    def __init__(self, memory: MagneticMemory, embedding: Embeddings) -> None:
        self.memory = memory
        # The memory's own adapter when it has one: it adds the model's task prefixes.
        adapter = memory.embedder
        self.embedding: Embeddings | LangChainEmbedder = (
            adapter
            if isinstance(adapter, LangChainEmbedder) and adapter.embeddings is embedding
            else embedding
        )

    def search(
        self,
        query: str | None,
        vector: Any,
        k: int,
        filter: dict[str, Any] | None,
        options: Mapping[str, Any],
    ) -> list[Hit]:
        """The engine's hits for a query text and/or vector; ``options`` as the store's."""
        check_search_options(options)
        return self.memory.search(
            query,
            k=k,
            filter=filter,
            vector=vector,
            n_probe=options.get("n_probe"),
            entity_boost=options.get("entity_boost"),
            lexical_weight=options.get("lexical_weight"),
        )

    async def asearch(
        self,
        query: str | None,
        vector: Any,
        k: int,
        filter: dict[str, Any] | None,
        options: Mapping[str, Any],
    ) -> list[Hit]:
        """Async :meth:`search`, embedding the query with the model's async API."""
        check_search_options(options)
        if vector is None and query is not None:
            vector = await self.aembed_query(query)
        return await self.memory.asearch(
            query,
            k=k,
            filter=filter,
            vector=vector,
            n_probe=options.get("n_probe"),
            entity_boost=options.get("entity_boost"),
            lexical_weight=options.get("lexical_weight"),
        )

    def mmr(
        self,
        query: str | None,
        vector: Any,
        k: int,
        fetch_k: int,
        lambda_mult: float,
        filter: dict[str, Any] | None,
        options: Mapping[str, Any],
    ) -> list[Hit]:
        """``fetch_k`` hits by similarity, then ``k`` of them picked by MMR."""
        check_mmr(k, lambda_mult)
        if vector is None:
            vector = self.memory.embed_query(query or "")
        hits = self.search(query, vector, max(k, fetch_k), filter, options)
        return self.pick_mmr(hits, vector, k, lambda_mult)

    async def ammr(
        self,
        query: str | None,
        vector: Any,
        k: int,
        fetch_k: int,
        lambda_mult: float,
        filter: dict[str, Any] | None,
        options: Mapping[str, Any],
    ) -> list[Hit]:
        """Async :meth:`mmr`."""
        check_mmr(k, lambda_mult)
        if vector is None:
            vector = await self.aembed_query(query or "")
        hits = await self.asearch(query, vector, max(k, fetch_k), filter, options)
        return await run_in_executor(None, self.pick_mmr, hits, vector, k, lambda_mult)

    def pick_mmr(self, hits: list[Hit], vector: Any, k: int, lambda_mult: float) -> list[Hit]:
        """Up to ``k`` of ``hits`` chosen by MMR against the query ``vector``."""
        if not hits:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        query = query / np.linalg.norm(query)
        candidates = self.memory.get_vectors([h.id for h in hits])
        return [hits[i] for i in maximal_marginal_relevance(query, candidates, k, lambda_mult)]

    async def aembed_query(self, query: str) -> list[float]:
        """The query embedding from the model's async API; failures are EmbeddingErrors."""
        if not isinstance(query, str) or not query.strip():
            raise EmptyTextError("the query is empty", hint="pass a non-empty query")
        try:
            return await self.embedding.aembed_query(query)
        except Exception as e:
            raise EmbeddingError(f"embedding the query failed: {e}") from e

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Document embeddings from the model's async API; failures are EmbeddingErrors."""
        try:
            return await self.embedding.aembed_documents(texts)
        except Exception as e:
            raise EmbeddingError(f"embedding {len(texts)} texts failed: {e}") from e
