"""MagneticRetriever: a group-aware retriever that can expand each hit to its concept."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables.config import run_in_executor
from pydantic import ConfigDict, Field

from magnetic_core import Cell, Hit, InvalidInputError, compile_filter
from magnetic_langchain.documents import EXPANDED_FROM_KEY, SCORE_KEY, cell_to_document
from magnetic_langchain.vectorstores import MagneticVectorStore

__all__ = ["MagneticRetriever"]

logger = logging.getLogger(__name__)


class MagneticRetriever(BaseRetriever):
    """Retrieve memories with their concept group, optionally expanded to the concept.

    Each hit comes back with its group id and label (``magnetic_group_id``,
    ``magnetic_group_label``) and its cosine similarity (``magnetic_score``) in metadata.
    With ``expand=n``, each hit is followed by up to ``n`` other cells of its group, the
    ones closest to the group centroid first, marked with ``magnetic_expanded_from`` (the
    hit's id). The order is: hit 1, its expansions, hit 2, its expansions, ... No document
    appears twice: a hit keeps its own place, and an expansion already shown is skipped.
    The metadata filter applies to expansions too.

    ``k`` (number of hits), ``filter`` and ``expand`` can be set on the retriever and
    overridden per call: ``retriever.invoke(query, k=2)``.

    Example:
        ```python
        import tempfile

        from magnetic_core import HashingEmbedder, MemoryConfig
        from magnetic_langchain import MagneticEmbeddings, MagneticRetriever, MagneticVectorStore

        store = MagneticVectorStore(
            MagneticEmbeddings(HashingEmbedder()),
            path=tempfile.mkdtemp(),
            config=MemoryConfig(join_threshold=0.25),  # word-overlap vectors: a low bar
        )
        store.add_texts(["the cat sat on the mat", "the cat chased a mouse", "stocks fell"])
        retriever = MagneticRetriever(store=store, k=1, expand=2)
        [d.page_content for d in retriever.invoke("cat on a mat")]
        ```
        ```python
        ['the cat sat on the mat', 'the cat chased a mouse']
        ```
    """

    store: MagneticVectorStore
    """The store to search."""
    k: int = Field(default=4, ge=0)
    """Number of hits (expansions come on top)."""
    filter: dict[str, Any] | None = None
    """Chroma-style metadata filter applied to hits and expansions."""
    expand: int = Field(default=0, ge=0)
    """How many other cells of each hit's group to add after it."""
    include_group_metadata: bool = True
    """Add group id, label and score to the metadata of returned documents."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: dict[str, Any] | None = None,
        expand: int | None = None,
    ) -> list[Document]:
        k, filter, expand = self._settings(k, filter, expand)
        hits = self.store.search_hits(query, k=k, filter=filter)
        return self._assemble(hits, filter, expand)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: dict[str, Any] | None = None,
        expand: int | None = None,
    ) -> list[Document]:
        k, filter, expand = self._settings(k, filter, expand)
        hits = await self.store.asearch_hits(query, k=k, filter=filter)
        if not expand:
            return self._assemble(hits, filter, 0)
        return await run_in_executor(None, self._assemble, hits, filter, expand)

    def _settings(
        self, k: int | None, filter: dict[str, Any] | None, expand: int | None
    ) -> tuple[int, dict[str, Any] | None, int]:
        k = self.k if k is None else k
        expand = self.expand if expand is None else expand
        if not isinstance(expand, int) or isinstance(expand, bool) or expand < 0:
            raise ValueError(f"expand must be a non-negative integer, got {expand!r}")
        return k, self.filter if filter is None else filter, expand

    def _assemble(
        self, hits: Sequence[Hit], filter: dict[str, Any] | None, expand: int
    ) -> list[Document]:
        shown = {hit.id for hit in hits}
        out: list[Document] = []
        for hit in hits:
            label = hit.group_label if self.include_group_metadata else None
            extra = {SCORE_KEY: hit.score} if self.include_group_metadata else None
            out.append(cell_to_document(hit.cell, group_label=label, extra=extra))
            if expand:
                for cell in self._expansion(hit, filter, expand, shown):
                    out.append(
                        cell_to_document(cell, group_label=label, extra={EXPANDED_FROM_KEY: hit.id})
                    )
        return out

    def _expansion(
        self, hit: Hit, filter: dict[str, Any] | None, expand: int, shown: set[str]
    ) -> list[Cell]:
        """Up to ``expand`` cells of the hit's group not shown yet, closest to centroid first."""
        memory = self.store.memory
        try:
            candidates = [c for c in memory.group(hit.group_id).cell_ids if c not in shown]
        except InvalidInputError:
            # The group was merged or emptied since the search; the hit stands alone.
            logger.debug("group %s vanished before expansion", hit.group_id)
            return []
        predicate = compile_filter(filter)
        picked: list[Cell] = []
        for cell in memory.get(candidates):
            if predicate is None or predicate(cell.metadata):
                picked.append(cell)
                shown.add(cell.id)
                if len(picked) == expand:
                    break
        return picked
