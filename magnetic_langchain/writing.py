"""The write methods of the LangChain store: add and delete, sync and async.

Mixed into :class:`~magnetic_langchain.vectorstores.MagneticVectorStore`, like the search
methods of :mod:`magnetic_langchain.searches`. Every batch is validated whole by the core
before the first is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from magnetic_core import EmbeddingError, MagneticMemory
from magnetic_langchain.arguments import batches, delete_filter, pop_batch_size, prepare_texts

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from magnetic_langchain.bridge import MemoryBridge

__all__ = ["WriteMethods"]


class WriteMethods:
    """Add and delete, sync and async (a base of the store)."""

    if TYPE_CHECKING:  # provided by MagneticVectorStore
        _bridge: MemoryBridge
        _embedding: Embeddings | None

        @property
        def memory(self) -> MagneticMemory: ...

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
            InvalidInputError: neither ids nor a filter (use ``memory.clear()`` to empty
                the store).
        """
        where = delete_filter(kwargs)
        if self._deletes(ids):
            self.memory.delete(ids=ids, filter=where)
        return True

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Async :meth:`delete`."""
        where = delete_filter(kwargs)
        if self._deletes(ids):
            await self.memory.adelete(ids=ids, filter=where)
        return True

    def _deletes(self, ids: list[str] | None) -> bool:
        # An empty id list names nothing (the engine would read it as "all").
        return not (ids is not None and not ids) and not self._bridge.empty
