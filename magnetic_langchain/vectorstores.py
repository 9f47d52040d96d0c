"""MagneticVectorStore: a LangChain ``VectorStore`` over a hierarchical MagneticMemory."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.runnables.config import run_in_executor
from langchain_core.vectorstores import VectorStore
from typing_extensions import Self

from magnetic_core import EmbeddingError, Hit, InvalidInputError, MagneticMemory, MemoryConfig
from magnetic_core._store.deferred import DeferredMemory
from magnetic_langchain.arguments import (
    batches,
    delete_filter,
    pop_batch_size,
    prepare_texts,
)
from magnetic_langchain.bridge import MemoryBridge
from magnetic_langchain.chroma_compat import ChromaCompatMixin
from magnetic_langchain.documents import (
    cell_to_document,
    hit_to_document,
    relevance_from_distance,
)
from magnetic_langchain.embeddings import as_core_embedder, as_langchain_embeddings
from magnetic_langchain.searches import SearchMethods

__all__ = ["MagneticVectorStore"]

logger = logging.getLogger(__name__)



class MagneticVectorStore(ChromaCompatMixin, SearchMethods, VectorStore):
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
            ValueError: a memory given together with settings that belong to it, or an
                embedding that is not the memory's.
        """
        self._deferred: DeferredMemory | None = None
        self._memory: MagneticMemory | None = None
        if memory is not None:
            clash = [
                name
                for name, value in (("path", path), ("config", config), ("client", client))
                if value is not None
            ] + (["namespace"] if namespace != "default" else [])
            if clash:
                raise InvalidInputError(
                    f"pass either memory= or {', '.join(clash)}, not both",
                    hint="the wrapped memory already has its own",
                )
            if embedding is not None and as_core_embedder(embedding).name != memory.embedder.name:
                raise InvalidInputError(
                    f"the embedding {as_core_embedder(embedding).name!r} is not the memory's "
                    f"embedder {memory.embedder.name!r}",
                    hint="omit embedding= to use the memory's",
                )
            self._memory, self._owns_memory = memory, False
        elif embedding is None:
            self._deferred = DeferredMemory(
                path=os.fspath(path) if path is not None else "./magnetic_memory",
                client=client,
                namespace=namespace,
                config=config,
            )
            self._owns_memory = True
        else:
            self._memory = MagneticMemory(
                path=os.fspath(path) if path is not None else "./magnetic_memory",
                namespace=namespace,
                embedder=as_core_embedder(embedding),
                config=config,
                client=client,
            )
            self._owns_memory = True
        self._embedding = embedding
        if embedding is None and self._memory is not None:
            self._embedding = as_langchain_embeddings(self._memory.embedder)
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
        if self._memory is None and self._deferred is not None:
            self._memory = self._deferred.existing()
        return self._memory

    def close(self) -> None:
        """Close the memory if this store opened it. Idempotent."""
        if self._deferred is not None:
            self._deferred.close()
        elif self._owns_memory and self._memory is not None:
            self._memory.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return self.override_relevance_score_fn or relevance_from_distance

    def _documents(self, hits: Sequence[Hit], options: Mapping[str, Any]) -> list[Document]:
        with_group = options.get("include_group_metadata", self.include_group_metadata)
        return [hit_to_document(hit, with_group=bool(with_group)) for hit in hits]

    # -- writing ---------------------------------------------------------------------
    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Embed and store texts; an existing id is updated in place (upsert).

        Args:
            texts: non-empty strings.
            metadatas: one dict per text, returned exactly as given by searches.
            ids: one id per text; ``None`` entries (and a ``None`` list) get UUIDs.
            **kwargs: ``batch_size``: texts embedded and written per engine call (each
                call is all-or-nothing; by default the whole list is one call).

        Returns:
            The ids, in input order.
        """
        parts = batches(*prepare_texts(texts, metadatas, ids), pop_batch_size(kwargs))
        memory = self._text_memory()
        return [cid for t, m, i in parts for cid in memory.add(t, m, i)]

    async def aadd_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Async :meth:`add_texts`: embeds with the model's native async API."""
        out: list[str] = []
        memory = self._text_memory()
        for t, m, i in batches(*prepare_texts(texts, metadatas, ids), pop_batch_size(kwargs)):
            vectors = await self._bridge.aembed_documents(t)
            out += await memory.aadd(t, m, i, vectors=vectors)
        return out

    def _text_memory(self) -> MagneticMemory:
        """The memory, for adding texts that need embedding (refused without a model)."""
        if self._embedding is None:
            raise EmbeddingError(
                "this store has no embedding model, so it cannot embed texts",
                hint="pass embedding= to the store, or add with add_embeddings()",
            )
        return self.memory

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Delete by ids (missing ids are ignored) and/or a metadata ``filter``.

        Raises:
            ValueError: neither ids nor a filter (use ``memory.clear()`` to empty the store).
        """
        where = delete_filter(kwargs)
        if (ids is not None and not ids) or self._bridge.empty:
            return True  # an empty id list names nothing; the engine would read it as "all"
        self.memory.delete(ids=ids, filter=where)
        return True

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Async :meth:`delete`."""
        where = delete_filter(kwargs)
        if (ids is not None and not ids) or self._bridge.empty:
            return True
        await self.memory.adelete(ids=ids, filter=where)
        return True

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

