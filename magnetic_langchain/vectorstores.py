"""MagneticVectorStore: a LangChain ``VectorStore`` over a hierarchical MagneticMemory."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.runnables.config import run_in_executor
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from pydantic import ValidationError
from typing_extensions import Self

from magnetic_core import Hit, InvalidInputError, MagneticMemory, MemoryConfig
from magnetic_core.validators import field_error
from magnetic_langchain.bridge import MemoryBridge
from magnetic_langchain.chroma_compat import ChromaCompatMixin
from magnetic_langchain.documents import (
    cell_to_document,
    hit_to_document,
    relevance_from_distance,
)
from magnetic_langchain.embeddings import as_langchain_embeddings
from magnetic_langchain.opening import open_memory
from magnetic_langchain.searches import SearchMethods
from magnetic_langchain.writing import WriteMethods

__all__ = ["MagneticVectorStore"]

logger = logging.getLogger(__name__)


class MagneticVectorStore(ChromaCompatMixin, WriteMethods, SearchMethods, VectorStore):
    """MagneticStorage vector store: cells grouped online into concepts, on ChromaDB.

    Every added text becomes a cell that joins (or founds) a concept group as it arrives;
    searches go through the group centroids first, then score cells exactly, and fall back
    to a flat exact search so ``k`` results come back whenever ``k`` exist. Returned
    ``Document.metadata`` is exactly what was added; the concept group's id and label are
    added (under ``magnetic_group_id`` / ``magnetic_group_label``) only when asked for.

    Setup:
        Install the package with its LangChain extra:

        ```bash
        pip install "magnetic-storage[langchain]"
        ```

    Key init args — indexing params:
        embedding: Embeddings
            Any LangChain embedding model (or ``MagneticEmbeddings`` around a core embedder).
        include_group_metadata: bool
            Add the concept group id and label to every returned document's metadata.

    Key init args — client params:
        path: str | None
            Directory of the embedded Chroma store (default ``./magnetic_memory``).
        namespace: str
            Isolated memory inside one store.
        client: chromadb client | None
            Any chromadb client (persistent, HTTP, ephemeral) instead of ``path``.
        memory: MagneticMemory | None
            An open memory to wrap instead of the three above.

    Instantiate:
        ```python
        import tempfile

        from magnetic_core import HashingEmbedder
        from magnetic_langchain import MagneticEmbeddings, MagneticVectorStore

        vector_store = MagneticVectorStore(
            embedding=MagneticEmbeddings(HashingEmbedder(dim=256)),
            path=tempfile.mkdtemp(),
            namespace="docs",
        )
        ```

    Add Documents:
        ```python
        from langchain_core.documents import Document

        document_1 = Document(page_content="the cat sat on the mat", metadata={"kind": "pet"})
        document_2 = Document(page_content="stocks fell on monday", metadata={"kind": "news"})
        document_3 = Document(page_content="i will be deleted :(")

        documents = [document_1, document_2, document_3]
        ids = ["1", "2", "3"]
        vector_store.add_documents(documents=documents, ids=ids)
        ```

    Delete Documents:
        ```python
        vector_store.delete(ids=["3"])
        ```

    Search:
        ```python
        results = vector_store.similarity_search(query="a cat on a mat", k=1)
        for doc in results:
            print(f"* {doc.page_content} [{doc.metadata}]")
        ```
        ```python
        * the cat sat on the mat [{'kind': 'pet'}]
        ```

    Search with filter:
        ```python
        results = vector_store.similarity_search(
            query="a cat on a mat", k=1, filter={"kind": "news"}
        )
        for doc in results:
            print(f"* {doc.page_content} [{doc.metadata}]")
        ```
        ```python
        * stocks fell on monday [{'kind': 'news'}]
        ```

    Search with score:
        ```python
        results = vector_store.similarity_search_with_score(query="the cat sat", k=1)
        for doc, distance in results:
            print(f"* [DIST={distance:.3f}] {doc.page_content} [{doc.metadata}]")
        ```
        ```python
        * [DIST=0.222] the cat sat on the mat [{'kind': 'pet'}]
        ```

    Search with group context:
        ```python
        doc = vector_store.similarity_search("cat", k=1, include_group_metadata=True)[0]
        print(sorted(doc.metadata))
        ```
        ```python
        ['kind', 'magnetic_group_id', 'magnetic_group_label']
        ```

    Async:
        ```python
        # add documents
        # await vector_store.aadd_documents(documents=documents, ids=ids)

        # delete documents
        # await vector_store.adelete(ids=["3"])

        # search
        # results = await vector_store.asimilarity_search(query="cat", k=1)

        # search with score
        results = await vector_store.asimilarity_search_with_score(query="the cat sat", k=1)
        for doc, distance in results:
            print(f"* [DIST={distance:.3f}] {doc.page_content} [{doc.metadata}]")
        ```
        ```python
        * [DIST=0.222] the cat sat on the mat [{'kind': 'pet'}]
        ```

    Use as Retriever:
        ```python
        retriever = vector_store.as_retriever(
            search_type="mmr",
            search_kwargs={"k": 1, "fetch_k": 2, "lambda_mult": 0.5},
        )
        retriever.invoke("cat")
        ```
        ```python
        [Document(id='1', metadata={'kind': 'pet'}, page_content='the cat sat on the mat')]
        ```
    """

    def __init__(
        self,
        embedding: Embeddings | None = None,
        *,
        memory: MagneticMemory | None = None,
        path: str | os.PathLike[str] | None = None,
        namespace: str = "default",
        config: MemoryConfig | None = None,
        client: Any = None,
        include_group_metadata: bool = False,
        relevance_score_fn: Callable[[float], float] | None = None,
    ) -> None:
        """Open (or wrap) a memory.

        Args:
            embedding: the LangChain embedding model. Without it (and without ``memory``)
                the store takes vectors only (:meth:`add_embeddings`, searches by vector)
                and learns their dimension from the first ones added.
            memory: an existing memory to wrap; it is not closed by :meth:`close`.
            path: directory of the embedded Chroma store (default ``./magnetic_memory``).
            namespace: isolated memory inside one store.
            config: engine settings.
            client: any chromadb client, instead of ``path``.
            include_group_metadata: add group id and label to returned metadata.
            relevance_score_fn: maps a score of :meth:`similarity_search_with_score` to a
                relevance in [0, 1] (default ``1 - score / 2``).

        Raises:
            InvalidInputError: a memory given together with settings that belong to it, or
                an embedding that is not the memory's.
        """
        self._held = open_memory(
            embedding, memory, path=path, namespace=namespace, config=config, client=client
        )
        self._embedding = embedding
        if embedding is None and self._held.memory is not None:
            self._embedding = as_langchain_embeddings(self._held.memory.embedder)
        self._bridge = MemoryBridge(self._open, self._embedding)
        self.include_group_metadata = include_group_metadata
        self.override_relevance_score_fn = relevance_score_fn

    # -- plumbing --------------------------------------------------------------------
    @property
    def embeddings(self) -> Embeddings | None:
        """The embedding model used for queries and documents (None: vectors only)."""
        return self._embedding

    @property
    def memory(self) -> MagneticMemory:
        """The hierarchical memory underneath (groups, stats, sleep mode).

        Raises:
            InvalidInputError: a store built without an embedding model holds no vectors
                yet (it learns their dimension from the first ones added).
        """
        return self._bridge.memory

    def _open(self) -> MagneticMemory | None:
        return self._held.current()

    def close(self) -> None:
        """Close the memory if this store opened it. Idempotent."""
        self._held.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return self.override_relevance_score_fn or relevance_from_distance

    def _documents(self, hits: Sequence[Hit], options: Mapping[str, Any]) -> list[Document]:
        with_group = options.get("include_group_metadata", self.include_group_metadata)
        return [hit_to_document(hit, with_group=bool(with_group)) for hit in hits]

    # -- reading ---------------------------------------------------------------------
    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """Documents by id, in the order asked; missing ids are skipped."""
        if self._bridge.empty:
            return []
        return self._cells_to_documents(self.memory.get(list(ids)))

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """Async :meth:`get_by_ids`."""
        if self._bridge.empty:
            return []
        cells = await self.memory.aget(list(ids))
        if not self.include_group_metadata:
            return self._cells_to_documents(cells)
        return await run_in_executor(None, self._cells_to_documents, cells)

    def _cells_to_documents(self, cells: Sequence[Any]) -> list[Document]:
        if not self.include_group_metadata:
            return [cell_to_document(c) for c in cells]
        labels = {gid: self.memory.group(gid).label for gid in {c.group_id for c in cells}}
        return [cell_to_document(c, group_label=labels[c.group_id]) for c in cells]

    def as_retriever(self, **kwargs: Any) -> VectorStoreRetriever:
        """LangChain's retriever over this store (``search_type``, ``search_kwargs``, ...).

        Raises:
            InvalidInputError: an unknown ``search_type`` or a setting it needs missing
                (LangChain's own checks, raised as this package's error).
        """
        search_type = kwargs.get("search_type", "similarity")
        allowed = VectorStoreRetriever.allowed_search_types
        if search_type not in allowed:
            raise InvalidInputError(
                f"search_type must be one of {', '.join(allowed)}, got {search_type!r}",
                hint='e.g. as_retriever(search_type="mmr", search_kwargs={"k": 4})',
            )
        try:
            return super().as_retriever(**kwargs)
        except ValidationError as e:
            raise field_error("as_retriever", e.errors()) from e

    # -- construction ----------------------------------------------------------------
    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> Self:
        """Open a store (``kwargs`` go to the constructor) and add ``texts`` to it."""
        store = cls(embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    @classmethod
    async def afrom_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> Self:
        """Async :meth:`from_texts`."""
        store = await asyncio.to_thread(lambda: cls(embedding, **kwargs))
        await store.aadd_texts(texts, metadatas, ids=ids)
        return store
