"""MagneticVectorStore: a LlamaIndex vector store over a MagneticStorage memory."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr, ValidationError
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryResult,
)

from magnetic_core._store.deferred import StoreMemory
from magnetic_core.config import MemoryConfig
from magnetic_core.errors import InvalidInputError
from magnetic_core.memory import MagneticMemory
from magnetic_core.validators import field_error
from magnetic_llamaindex.construction import no_extra_kwargs, open_store_memory
from magnetic_llamaindex.embeddings import (
    embed_query_text,
)
from magnetic_llamaindex.filters import to_predicate
from magnetic_llamaindex.nodes import REF_DOC_ID, cell_to_node, nodes_to_records
from magnetic_llamaindex.plan import id_list, plan_query

__all__ = ["MagneticVectorStore"]

logger = logging.getLogger(__name__)


class MagneticVectorStore(BasePydanticVectorStore):
    """LlamaIndex vector store on MagneticStorage: hierarchical, local-first, on ChromaDB.

    Nodes are stored as cells of a :class:`~magnetic_core.MagneticMemory`, which places
    each one in a concept group as it arrives. A query scores the cells of the groups
    nearest to it (``MemoryConfig.n_probe``; every cell when fewer than ``k`` match there)
    and ranks them by cosine similarity. Node text and content are stored, so a
    ``VectorStoreIndex`` needs no separate docstore.

    Setup:
        ``pip install "magnetic-storage[llamaindex]"``

    Args:
        memory: an existing memory to serve (for instance one the LangChain adapter also
            uses). When given, none of the settings below may be.
        path: directory of the embedded Chroma store (default ``./magnetic_memory``).
        client: any chromadb client instead of ``path`` (persistent, HTTP, ephemeral).
        namespace: the memory inside the store (default ``"default"``).
        dim: embedding size of your LlamaIndex embed model, when the store only ever gets
            vectors from LlamaIndex (it then cannot embed text itself). Optional: without
            ``dim`` and ``embed_model`` the store learns the size from the first nodes
            added (or from the stored namespace), as ``ChromaVectorStore`` does.
        embedder_name: with ``dim``, the model name stamped on the store; pass
            ``embed_model.model_name`` so that reopening with another model is refused.
        embed_model: instead of ``dim``: the LlamaIndex embed model. The store then also
            embeds text itself (queries by ``query_str``, the core's ``search("...")``).
        config: engine settings.

    Instantiate:
        .. code-block:: python

            from magnetic_llamaindex import MagneticVectorStore
            store = MagneticVectorStore(path="./memory", embed_model=embed_model)
            # or, vectors only (the store never embeds text itself):
            store = MagneticVectorStore(path="./memory", dim=384,
                                        embedder_name=embed_model.model_name)
            # or share one memory with LangChain:
            store = MagneticVectorStore(memory)

    Add and query through an index:
        .. code-block:: python

            from llama_index.core import StorageContext, VectorStoreIndex
            index = VectorStoreIndex.from_documents(
                documents,
                storage_context=StorageContext.from_defaults(vector_store=store),
                embed_model=embed_model,
            )
            index.as_retriever(similarity_top_k=3).retrieve("what do cells need?")

    Search with a filter:
        .. code-block:: python

            from llama_index.core.vector_stores import MetadataFilter, MetadataFilters
            filters = MetadataFilters(filters=[MetadataFilter(key="year", value=2020,
                                                              operator=">=")])
            index.as_retriever(filters=filters).retrieve("...")

    Query the store directly:
        .. code-block:: python

            from llama_index.core.vector_stores import VectorStoreQuery
            result = store.query(VectorStoreQuery(
                query_embedding=embed_model.get_query_embedding("what do cells need?"),
                similarity_top_k=3, mode="mmr", mmr_threshold=0.5))
            result.ids, result.similarities       # best first; cosine similarities

    Delete:
        .. code-block:: python

            index.delete_ref_doc(document.doc_id)     # every node of one document
            store.delete_nodes(["node-1"])            # or by ids and/or filters

    Use as a group-aware retriever:
        .. code-block:: python

            from magnetic_llamaindex import MagneticRetriever
            MagneticRetriever(store, embed_model=embed_model, expand=2).retrieve("...")

    Async:
        Every method has a twin (``async_add``, ``aquery``, ``adelete``, ``aget_nodes``,
        ``adelete_nodes``, ``aclear``) that runs in a worker thread, so the event loop
        never waits on Chroma.
    """

    stores_text: bool = True
    flat_metadata: bool = False
    namespace: str = "default"

    _held: StoreMemory = PrivateAttr()

    def __init__(
        self,
        memory: MagneticMemory | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        client: Any = None,
        namespace: str | None = None,
        dim: int | None = None,
        embedder_name: str | None = None,
        embed_model: BaseEmbedding | None = None,
        config: MemoryConfig | None = None,
        **kwargs: Any,
    ) -> None:
        settings = {
            "path": path,
            "client": client,
            "namespace": namespace,
            "dim": dim,
            "embedder_name": embedder_name,
            "embed_model": embed_model,
            "config": config,
        }
        held = open_store_memory(memory, settings)
        try:
            ns = held.memory.namespace if held.memory is not None else namespace or "default"
            super().__init__(namespace=ns, **kwargs)  # type: ignore[call-arg]
        except BaseException as e:
            held.close()
            if isinstance(e, ValidationError):
                raise field_error(type(self).__name__, e.errors()) from e
            raise
        self._held = held

    @classmethod
    def class_name(cls) -> str:
        return "MagneticVectorStore"

    @property
    def client(self) -> Any:
        """The chromadb client underneath."""
        if self._held.deferred is not None:
            return self._held.deferred.client
        return self.memory.client

    @property
    def memory(self) -> MagneticMemory:
        """The MagneticMemory this store reads and writes.

        Raises:
            InvalidInputError: the store learns its dimension from the first nodes, and
                none were added yet.
        """
        mem = self._open()
        if mem is None:
            raise InvalidInputError(
                "the store has no memory yet: it learns its dimension from the first nodes",
                hint="add nodes first, or build the store with dim= or embed_model=",
            )
        return mem

    def _open(self) -> MagneticMemory | None:
        """The memory, or None while a store built without a dimension is still empty."""
        return self._held.current()

    def close(self) -> None:
        """Close the memory if this store opened it (a memory passed in stays open)."""
        self._held.close()

    def __enter__(self) -> MagneticVectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------
    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Store nodes with their embeddings (upsert by node id); returns the node ids.

        Raises:
            InvalidInputError: a node without embedding or text, an embedding of the wrong
                dimension (DimensionError), or metadata that cannot be stored; nothing is
                stored then.
        """
        no_extra_kwargs("add", add_kwargs)
        if not nodes:
            return []
        mem = self._open()
        if mem is None:
            first = nodes[0].embedding if isinstance(nodes[0], BaseNode) else None
            dim = len(first) if first else 0
            rec = nodes_to_records(nodes, dim)  # checks every node before the memory opens
            mem = self._held.ensure(dim)
        else:
            rec = nodes_to_records(nodes, mem.dim)
        return mem.add(rec.texts, rec.metadatas, rec.ids, vectors=rec.vectors)

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of the source document ``ref_doc_id``."""
        no_extra_kwargs("delete", delete_kwargs)
        if not isinstance(ref_doc_id, str) or not ref_doc_id:
            raise InvalidInputError(f"ref_doc_id must be a non-empty string, got {ref_doc_id!r}")
        mem = self._open()
        removed = mem.delete(filter={REF_DOC_ID: ref_doc_id}) if mem is not None else 0
        logger.debug("deleted %d nodes of document %r", removed, ref_doc_id)

    def delete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        """Delete nodes by ids and/or filters (both given: the listed nodes that match).

        Raises:
            InvalidInputError: neither ids nor filters were given (use :meth:`clear`).
        """
        no_extra_kwargs("delete_nodes", delete_kwargs)
        predicate = to_predicate(filters)
        if node_ids is None and predicate is None:
            raise InvalidInputError(
                "delete_nodes() needs node_ids or filters", hint="use clear() to delete all"
            )
        ids = id_list(node_ids)
        mem = self._open()
        if ids == [] or mem is None:
            return  # an empty list names no node; an empty store holds none
        mem.delete(ids=ids, filter=predicate)

    def clear(self) -> None:
        """Delete every node of this store's namespace."""
        mem = self._open()
        if mem is not None:
            mem.clear()

    # -- reading ---------------------------------------------------------------------
    def get_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        """Nodes by ids (in the order asked, missing ids skipped) and/or filters.

        With neither, every node is returned, oldest first.
        """
        mem = self._open()
        predicate = to_predicate(filters)
        if mem is None:
            return []
        cells = mem.get(ids=id_list(node_ids), filter=predicate)
        return [cell_to_node(c) for c in cells]

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The nodes most similar to the query embedding, restricted and filtered.

        Args:
            query: ``similarity_top_k``, ``query_embedding`` (or ``query_str`` when the
                memory has an embedding model), ``node_ids``, ``doc_ids``, ``filters``,
                ``mode`` (DEFAULT or MMR) and ``mmr_threshold`` are honoured. Empty
                ``node_ids`` / ``doc_ids`` lists restrict nothing (``VectorStoreIndex``
                passes ``node_ids=[]`` to stores that keep the text).
            **kwargs: ``where`` (a Chroma-style dict instead of ``query.filters``),
                ``n_probe``, and for MMR ``mmr_threshold`` and one of ``mmr_prefetch_k`` /
                ``mmr_prefetch_factor`` (candidates considered; default 4 x top k).

        Returns:
            Nodes, cosine similarities and ids, best first. A query with neither
            ``query_embedding`` nor ``query_str`` is filter-only: the first
            ``similarity_top_k`` matching nodes, oldest first, with no similarities (as
            ``ChromaVectorStore`` answers it).

        Raises:
            InvalidInputError: an unsupported mode, an unsupported filter operator, a
                filter given two ways, or an unknown keyword argument.
        """
        mem = self._open()
        if mem is None:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        plan = plan_query(query, kwargs, embed_query=lambda text: embed_query_text(mem, text))
        if plan.vector is None:
            cells = mem.get(ids=plan.node_ids, filter=plan.predicate, limit=plan.k)
            return VectorStoreQueryResult(
                nodes=[cell_to_node(c) for c in cells], ids=[c.id for c in cells]
            )
        hits = mem.search(
            vector=plan.vector,
            k=plan.k,
            filter=plan.predicate,
            ids=plan.node_ids,
            n_probe=plan.n_probe,
            mmr_lambda=plan.mmr_threshold if plan.mmr else None,
            # (only MMR reads it; left out, a plain query takes the engine's shortest path)
            fetch_k=max(plan.fetch_k, 1) if plan.mmr else None,
        )
        return VectorStoreQueryResult(
            nodes=[cell_to_node(h.cell) for h in hits],
            similarities=[h.score for h in hits],
            ids=[h.id for h in hits],
        )

    # -- async twins -----------------------------------------------------------------
    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        """Async :meth:`add`."""
        return await asyncio.to_thread(self.add, nodes, **kwargs)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Async :meth:`delete`."""
        await asyncio.to_thread(self.delete, ref_doc_id, **delete_kwargs)

    async def adelete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        """Async :meth:`delete_nodes`."""
        await asyncio.to_thread(self.delete_nodes, node_ids, filters, **delete_kwargs)

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        await asyncio.to_thread(self.clear)

    async def aget_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        """Async :meth:`get_nodes`."""
        return await asyncio.to_thread(self.get_nodes, node_ids, filters)

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Async :meth:`query`."""
        return await asyncio.to_thread(self.query, query, **kwargs)
