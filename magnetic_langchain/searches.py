"""The search methods of the LangChain store: LangChain's names mapped onto one engine call.

Every method here asks :class:`~magnetic_langchain.bridge.MemoryBridge` (one
:meth:`magnetic_core.MagneticMemory.search` call) and turns the hits into Documents; the
store (:class:`~magnetic_langchain.vectorstores.MagneticVectorStore`) mixes them in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document

from magnetic_core import Hit
from magnetic_langchain.bridge import MemoryBridge

__all__ = ["DEFAULT_K", "SearchMethods"]

DEFAULT_K = 4


class SearchMethods:
    """Similarity, scored, by-vector and MMR search, sync and async (a base of the store)."""

    _bridge: MemoryBridge

    def _documents(self, hits: Sequence[Hit], options: Mapping[str, Any]) -> list[Document]:
        raise NotImplementedError  # the store's

    def similarity_search(
        self, query: str, k: int = DEFAULT_K, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """The ``k`` documents most similar to ``query``.

        Args:
            query: the query text.
            k: number of documents.
            filter: Chroma-style metadata filter, e.g. ``{"year": {"$gte": 2020}}``.
            **kwargs: ``include_group_metadata`` (group keys and the cell's contradiction
                and supersession links), ``current_only`` (leave superseded cells out), and
                the engine's ``n_probe``, ``entity_boost`` and ``lexical_weight``.
        """
        return self._documents(self._bridge.search(query, None, k, filter, kwargs), kwargs)

    async def asimilarity_search(
        self, query: str, k: int = DEFAULT_K, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """Async :meth:`similarity_search`."""
        return self._documents(await self._bridge.asearch(query, None, k, filter, kwargs), kwargs)

    def similarity_search_with_score(
        self, query: str, k: int = DEFAULT_K, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Documents with a distance to ``query`` that follows their order (lower is better).

        The order is the engine's ranking: cosine similarity ``cos`` plus a boost ``b`` for
        cells that share an entity (file name, proper noun, ...) with the query and the
        weighted, normalised BM25 score ``l`` of the query's words. The score returned is
        that ranking ``r = cos + b + l`` rescaled into [0, 2]:
        ``2 (c - r) / (c + 1)``, where ``c`` is the best ``r`` possible for this query
        (1, plus ``entity_boost`` if the query names an entity, plus ``lexical_weight`` if
        it has indexed words). It therefore increases down the list; with
        ``entity_boost=0.0, lexical_weight=0.0`` it is exactly the cosine distance
        ``1 - cos``. ``similarity_search_with_relevance_scores`` maps it to
        ``1 - score / 2`` in [0, 1] (or your ``relevance_score_fn``). The exact cosine of
        each result is ``Hit.score`` in :meth:`search_hits`.

        ``where_document`` (``{"$contains": "..."}``, ``{"$not_contains": "..."}``) keeps
        only results whose text passes; those are ranked by exact cosine.
        """
        hits = self._bridge.search(query, None, k, filter, kwargs)
        distances = self._bridge.distances(hits, query, kwargs) if hits else []
        return list(zip(self._documents(hits, kwargs), distances))

    async def asimilarity_search_with_score(
        self, query: str, k: int = DEFAULT_K, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Async :meth:`similarity_search_with_score`."""
        hits = await self._bridge.asearch(query, None, k, filter, kwargs)
        distances = self._bridge.distances(hits, query, kwargs) if hits else []
        return list(zip(self._documents(hits, kwargs), distances))

    def similarity_search_by_vector(
        self,
        embedding: list[float],
        k: int = DEFAULT_K,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """The ``k`` documents most similar to a query embedding."""
        return self._documents(self._bridge.search(None, embedding, k, filter, kwargs), kwargs)

    async def asimilarity_search_by_vector(
        self,
        embedding: list[float],
        k: int = DEFAULT_K,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Async :meth:`similarity_search_by_vector`."""
        hits = await self._bridge.asearch(None, embedding, k, filter, kwargs)
        return self._documents(hits, kwargs)

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = DEFAULT_K,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Documents relevant to ``query`` yet diverse among themselves.

        Args:
            query: the query text.
            k: number of documents.
            fetch_k: candidates fetched by similarity before MMR picks (at least ``k``).
            lambda_mult: 1 for pure relevance, 0 for maximum diversity.
            filter: Chroma-style metadata filter.
            **kwargs: as for :meth:`similarity_search`.
        """
        hits = self._bridge.search(query, None, k, filter, kwargs, mmr=(fetch_k, lambda_mult))
        return self._documents(hits, kwargs)

    async def amax_marginal_relevance_search(
        self,
        query: str,
        k: int = DEFAULT_K,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Async :meth:`max_marginal_relevance_search`."""
        hits = await self._bridge.asearch(
            query, None, k, filter, kwargs, mmr=(fetch_k, lambda_mult)
        )
        return self._documents(hits, kwargs)

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = DEFAULT_K,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """:meth:`max_marginal_relevance_search` for a query embedding."""
        hits = self._bridge.search(None, embedding, k, filter, kwargs, mmr=(fetch_k, lambda_mult))
        return self._documents(hits, kwargs)

    async def amax_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = DEFAULT_K,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Async :meth:`max_marginal_relevance_search_by_vector`."""
        hits = await self._bridge.asearch(
            None, embedding, k, filter, kwargs, mmr=(fetch_k, lambda_mult)
        )
        return self._documents(hits, kwargs)

    def search_hits(
        self,
        query: str,
        k: int = DEFAULT_K,
        filter: dict[str, Any] | None = None,
        *,
        expand: int = 0,
        **kwargs: Any,
    ) -> list[Hit]:
        """The engine's own hits for ``query``: cell, cosine score, group id and label.

        With ``expand=n``, each hit is followed by up to ``n`` other cells of its group
        (``Hit.expanded_from`` names the hit), as :class:`MagneticRetriever` returns them.

        Example:
            >>> import tempfile
            >>> from magnetic_core import HashingEmbedder
            >>> from magnetic_langchain import MagneticEmbeddings, MagneticVectorStore
            >>> vector_store = MagneticVectorStore(
            ...     MagneticEmbeddings(HashingEmbedder()), path=tempfile.mkdtemp()
            ... )
            >>> vector_store.add_texts(["the cat sat on the mat"], ids=["1"])
            ['1']
            >>> hit = vector_store.search_hits("cat", k=1)[0]
            >>> hit.id, hit.group_label
            ('1', 'cat / mat / sat')
        """
        return self._bridge.search(query, None, k, filter, kwargs, expand=expand)

    async def asearch_hits(
        self,
        query: str,
        k: int = DEFAULT_K,
        filter: dict[str, Any] | None = None,
        *,
        expand: int = 0,
        **kwargs: Any,
    ) -> list[Hit]:
        """Async :meth:`search_hits`."""
        return await self._bridge.asearch(query, None, k, filter, kwargs, expand=expand)
