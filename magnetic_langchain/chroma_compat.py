"""The part of langchain-chroma's ``Chroma`` API that users call beyond ``VectorStore``.

Mixed into :class:`~magnetic_langchain.MagneticVectorStore`, so code written against
``langchain_chroma.Chroma`` keeps working: ``get(ids=, where=, limit=, offset=,
where_document=, include=)``, ``update_document(s)``, ``similarity_search_with_vectors``,
``similarity_search_by_vector_with_relevance_scores`` and ``add_embeddings`` (for stores fed
vectors computed elsewhere).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.documents import Document

from magnetic_core import InvalidInputError
from magnetic_core._text.document_filter import compile_document_filter
from magnetic_langchain.arguments import prepare_texts

if TYPE_CHECKING:
    from collections.abc import Mapping

    from magnetic_core import Cell, Hit, MagneticMemory
    from magnetic_core._store.deferred import StoreMemory
    from magnetic_langchain.bridge import MemoryBridge

__all__ = ["ChromaCompatMixin", "GET_INCLUDE"]

GET_INCLUDE = ("documents", "metadatas", "embeddings")
"""What :meth:`ChromaCompatMixin.get` can include (ids always are)."""


class ChromaCompatMixin:
    """langchain-chroma's extra methods, on the engine."""

    if TYPE_CHECKING:  # provided by MagneticVectorStore
        _bridge: MemoryBridge
        _held: StoreMemory

        @property
        def memory(self) -> MagneticMemory: ...

        def _open(self) -> MagneticMemory | None: ...

        def _cells_to_documents(self, cells: Sequence[Cell]) -> list[Document]: ...

        def _documents(self, hits: Sequence[Hit], options: Mapping[str, Any]) -> list[Document]: ...

        def add_texts(
            self,
            texts: Iterable[str],
            metadatas: list[dict[str, Any]] | None = None,
            *,
            ids: list[str] | None = None,
            **kwargs: Any,
        ) -> list[str]: ...

    def add_embeddings(
        self,
        text_embeddings: Iterable[tuple[str, Sequence[float]]],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
    ) -> list[str]:
        """Store texts with embeddings computed elsewhere (no embedding model needed).

        A store built without ``embedding=`` learns its dimension from the first call.
        Texts may be empty here: such a document is found by its vector and metadata.

        Returns:
            The ids, in input order.
        """
        pairs = list(text_embeddings)
        if not pairs:
            return []
        texts = [t for t, _ in pairs]
        vectors = np.asarray([list(v) for _, v in pairs], dtype=np.float32)
        if vectors.ndim != 2:
            raise InvalidInputError("every embedding must be a list of floats of one length")
        placeholder = [t if t.strip() else "x" for t in texts]  # validated apart from vectors
        _, metas, full_ids = prepare_texts(placeholder, metadatas, ids)
        memory = self._held.ensure(int(vectors.shape[1]))
        return memory.add(texts, metas, full_ids, vectors=vectors)

    def get(
        self,
        ids: str | list[str] | None = None,
        where: dict[str, Any] | None = None,
        limit: int | None = None,
        offset: int | None = None,
        where_document: dict[str, Any] | None = None,
        include: list[str] | None = None,
    ) -> dict[str, Any]:
        """Stored documents as Chroma returns them: ``{"ids", "documents", "metadatas", ...}``.

        Args:
            ids: one id or a list; missing ids are skipped.
            where: metadata filter (Chroma syntax).
            limit: at most this many (after ``offset``).
            offset: skip this many first (oldest first without ``ids``).
            where_document: ``{"$contains": ...}`` / ``{"$not_contains": ...}`` on the text.
            include: any of ``"documents"``, ``"metadatas"``, ``"embeddings"`` (default the
                first two); what is not included is None.
        """
        wanted = list(include) if include is not None else ["metadatas", "documents"]
        unknown = sorted(set(wanted) - set(GET_INCLUDE))
        if unknown:
            raise InvalidInputError(
                f"get() cannot include {unknown}", hint="choose from " + ", ".join(GET_INCLUDE)
            )
        keep = compile_document_filter(where_document)
        id_list = [ids] if isinstance(ids, str) else ids
        cells = [] if self._bridge.empty else self.memory.get(id_list, filter=where)
        cells = [c for c in cells if keep is None or keep(c.text)]
        start = offset or 0
        cells = cells[start : None if limit is None else start + limit]
        docs = self._cells_to_documents(cells) if "metadatas" in wanted else []
        vectors = self.memory.get_vectors([c.id for c in cells]) if cells else None
        return {
            "ids": [c.id for c in cells],
            "documents": [c.text for c in cells] if "documents" in wanted else None,
            "metadatas": [d.metadata for d in docs] if "metadatas" in wanted else None,
            "embeddings": (
                (vectors if vectors is not None else np.empty((0, 0), np.float32))
                if "embeddings" in wanted
                else None
            ),
            "included": wanted,
        }

    def update_document(self, document_id: str, document: Document) -> None:
        """Replace one stored document (text, metadata and vector)."""
        self.update_documents([document_id], [document])

    def update_documents(self, ids: list[str], documents: list[Document]) -> None:
        """Replace stored documents: re-embedded, re-placed in their groups, ids kept.

        Raises:
            InvalidInputError: an id that is not stored (nothing is changed then), or
                unequal numbers of ids and documents.
        """
        if len(ids) != len(documents):
            raise InvalidInputError(f"got {len(ids)} ids for {len(documents)} documents")
        present = {c.id for c in self._cells_by_ids(ids)}
        missing = [i for i in ids if i not in present]
        if missing:
            raise InvalidInputError(
                f"cannot update {missing[0]!r}: no such document", hint="add it instead"
            )
        self.add_texts(
            [d.page_content for d in documents], [d.metadata for d in documents], ids=ids
        )

    def _cells_by_ids(self, ids: Sequence[str]) -> list[Any]:
        """The engine's cells for ``ids`` (missing skipped)."""
        return [] if self._bridge.empty else self.memory.get(list(ids))

    def similarity_search_with_vectors(
        self,
        query: str,
        k: int = 4,
        filter: dict[str, Any] | None = None,
        where_document: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, np.ndarray]]:
        """Documents most similar to ``query``, each with its stored (unit) vector."""
        options = {**kwargs, "where_document": where_document}
        hits = self._bridge.search(query, None, k, filter, options)
        if not hits:
            return []
        vectors = self.memory.get_vectors([h.id for h in hits])
        return list(zip(self._documents(hits, options), list(vectors)))

    def similarity_search_by_vector_with_relevance_scores(
        self,
        embedding: list[float],
        k: int = 4,
        filter: dict[str, Any] | None = None,
        where_document: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """Documents most similar to a query embedding, with their cosine distance.

        As in langchain-chroma, the number is a distance (lower is more similar, here
        ``1 - cos`` in [0, 2]); map it with ``1 - d / 2`` for a relevance in [0, 1].
        """
        options = {**kwargs, "where_document": where_document}
        hits = self._bridge.search(None, embedding, k, filter, options)
        return list(
            zip(self._documents(hits, options), self._bridge.distances(hits, None, options))
        )
