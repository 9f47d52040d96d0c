"""How the vector store talks to the engine: search options, async embedding.

Every search (plain, MMR, with group expansion, restricted by ``where_document``) is one
call of :meth:`magnetic_core.MagneticMemory.search`; this module only maps the store's
options onto it. The async methods embed with the LangChain model's own async API first,
so no thread is blocked on the embedding call, then run the engine call in an executor.
A ``where_document`` filter (a test on the text) restricts the search to the cells whose
text passes, which the engine scores exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.runnables.config import run_in_executor

from magnetic_core import EmbeddingError, EmptyTextError, Hit, InvalidInputError, MagneticMemory
from magnetic_core._search.topk import rank_ceiling, ranking_distance
from magnetic_core._text.document_filter import compile_document_filter
from magnetic_langchain.arguments import check_mmr, check_search_options
from magnetic_langchain.embeddings import LangChainEmbedder

__all__ = ["MemoryBridge"]


class MemoryBridge:
    """Searches a memory on behalf of a LangChain store.

    Args:
        opener: returns the engine, or None while a store fed vectors only has none yet
            (every search then finds nothing).
        embedding: the LangChain model used for async query and document embedding (None
            for a store fed vectors only).
    """

    def __init__(
        self, opener: Callable[[], MagneticMemory | None], embedding: Embeddings | None
    ) -> None:
        self._opener = opener
        self.embedding = embedding

    @property
    def memory(self) -> MagneticMemory:
        """The engine (open)."""
        memory = self._opener()
        if memory is None:
            raise InvalidInputError(
                "this store holds no vectors yet, so its dimension is unknown",
                hint="add documents with their embeddings first (add_embeddings)",
            )
        return memory

    @property
    def empty(self) -> bool:
        """Whether there is no engine yet (nothing stored)."""
        return self._opener() is None

    def search(
        self,
        query: str | None,
        vector: Any,
        k: int,
        filter: dict[str, Any] | None,
        options: Mapping[str, Any],
        *,
        expand: int = 0,
        mmr: tuple[int, float] | None = None,
    ) -> list[Hit]:
        """The engine's hits for a query text and/or vector; ``options`` as the store's.

        ``mmr=(fetch_k, lambda_mult)``: ``fetch_k`` hits by similarity, then ``k`` of them
        picked by maximal marginal relevance (still one engine call).
        """
        self._check(options, mmr)
        if self.empty:
            return []
        if vector is None and query is None:
            raise EmptyTextError("the query is empty", hint="pass a non-empty query")
        picks: dict[str, Any] = {}
        if mmr is not None:
            picks = {"mmr_lambda": mmr[1], "fetch_k": max(k, mmr[0], 1)}
        return self.memory.search(
            query,
            k=k,
            filter=filter,
            vector=vector,
            expand=expand,
            **picks,
            **self._engine(filter, options),
        )

    async def asearch(
        self,
        query: str | None,
        vector: Any,
        k: int,
        filter: dict[str, Any] | None,
        options: Mapping[str, Any],
        *,
        expand: int = 0,
        mmr: tuple[int, float] | None = None,
    ) -> list[Hit]:
        """Async :meth:`search`, embedding the query with the model's async API."""
        self._check(options, mmr)
        if self.empty:
            return []
        if vector is None:
            vector = await self.aembed_query(query or "")
        call = partial(self.search, query, vector, k, filter, options, expand=expand, mmr=mmr)
        return await run_in_executor(None, call)

    @staticmethod
    def _check(options: Mapping[str, Any], mmr: tuple[int, float] | None) -> None:
        """Refuse unknown options and bad MMR settings before anything embeds."""
        check_search_options(options)
        if mmr is not None:
            check_mmr(mmr[0], mmr[1])

    def _engine(self, filter: dict[str, Any] | None, options: Mapping[str, Any]) -> dict[str, Any]:
        """The store's search options as the engine's keyword arguments.

        A ``where_document`` filter (a test on the text) becomes the ids of the cells whose
        text passes; the engine scores exactly those (the metadata filter still applies).
        """
        keep = compile_document_filter(options.get("where_document"))
        restricted = None
        if keep is not None:
            restricted = [c.id for c in self.memory.get(filter=filter) if keep(c.text)]
        return {
            "ids": restricted,
            "n_probe": options.get("n_probe"),
            "entity_boost": options.get("entity_boost"),
            "lexical_weight": options.get("lexical_weight"),
            "current_only": bool(options.get("current_only", False)),
        }

    def distances(
        self, hits: list[Hit], query: str | None, options: Mapping[str, Any]
    ) -> list[float]:
        """Distances in [0, 2] that follow the ranking (see :func:`ranking_distance`).

        For a text query the engine's ranking adds entity and lexical boosts to the cosine;
        the distance rescales that ranking score, so it grows down the list. With the boosts
        off, and for searches by vector, it is the cosine distance ``1 - cos``.
        """
        config = self.memory.config
        boost = options.get("entity_boost")
        weight = options.get("lexical_weight")
        ceiling = rank_ceiling(
            config.entity_boost if boost is None else boost,
            config.lexical_weight if weight is None else weight,
            None if options.get("where_document") is not None else query,
        )
        return [ranking_distance(h.rank_score, ceiling) for h in hits]

    def _async_model(self) -> Embeddings | LangChainEmbedder:
        """The memory's own adapter of the model when it has one: it adds task prefixes."""
        memory = self._opener()
        adapter = memory.embedder if memory is not None else None
        if isinstance(adapter, LangChainEmbedder) and adapter.embeddings is self.embedding:
            return adapter
        assert self.embedding is not None  # checked by the callers
        return self.embedding

    async def aembed_query(self, query: str) -> list[float]:
        """The query embedding from the model's async API; failures are EmbeddingErrors."""
        if not isinstance(query, str) or not query.strip():
            raise EmptyTextError("the query is empty", hint="pass a non-empty query")
        if self.embedding is None:
            raise _no_model("the query")
        try:
            return await self._async_model().aembed_query(query)
        except Exception as e:
            raise EmbeddingError(f"embedding the query failed: {e}") from e

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Document embeddings from the model's async API; failures are EmbeddingErrors."""
        if self.embedding is None:
            raise _no_model(f"{len(texts)} texts")
        try:
            return await self._async_model().aembed_documents(texts)
        except Exception as e:
            raise EmbeddingError(f"embedding {len(texts)} texts failed: {e}") from e


def _no_model(what: str) -> EmbeddingError:
    return EmbeddingError(
        f"this store has no embedding model, so it cannot embed {what}",
        hint="search by vector and add with add_embeddings(), or pass embedding= to the store",
    )
