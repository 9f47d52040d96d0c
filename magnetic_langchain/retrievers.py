"""MagneticRetriever: a group-aware retriever that can expand each hit to its concept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from magnetic_core import Hit
from magnetic_core.validators import check_int, field_error
from magnetic_langchain.documents import EXPANDED_FROM_KEY, SCORE_KEY, cell_to_document
from magnetic_langchain.vectorstores import MagneticVectorStore

__all__ = ["MagneticRetriever"]


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

    def __init__(self, **data: Any) -> None:
        """Check the fields; a bad one raises InvalidInputError (not pydantic's error)."""
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise field_error(type(self).__name__, e.errors()) from e

    @field_validator("k", "expand", mode="before")
    @classmethod
    def _count(cls, value: Any, info: ValidationInfo) -> int:
        # The core's rule, not pydantic's lax one (which takes "3" and 2.0 for 3 and 2).
        return int(check_int(value, str(info.field_name)))

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
        return self._documents(self.store.search_hits(query, k=k, filter=filter, expand=expand))

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
        hits = await self.store.asearch_hits(query, k=k, filter=filter, expand=expand)
        return self._documents(hits)

    def _settings(
        self, k: int | None, filter: dict[str, Any] | None, expand: int | None
    ) -> tuple[int, dict[str, Any] | None, int]:
        k = self.k if k is None else k
        expand = self.expand if expand is None else expand
        return k, self.filter if filter is None else filter, expand

    def _documents(self, hits: Sequence[Hit]) -> list[Document]:
        """Hits (expansions after their hit, as the engine orders them) as Documents."""
        out: list[Document] = []
        for hit in hits:
            label = hit.group_label if self.include_group_metadata else None
            if hit.expanded_from is not None:
                extra: dict[str, Any] | None = {EXPANDED_FROM_KEY: hit.expanded_from}
            else:
                extra = {SCORE_KEY: hit.score} if self.include_group_metadata else None
            out.append(cell_to_document(hit.cell, group_label=label, extra=extra))
        return out
