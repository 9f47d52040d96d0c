"""Agent memory tools: search, store and forget memories in a MagneticVectorStore."""

from __future__ import annotations

import logging
from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, ConfigDict, Field

from magnetic_core import Hit, MagneticError
from magnetic_core.supersession import describe_links
from magnetic_langchain.documents import hit_to_document
from magnetic_langchain.vectorstores import MagneticVectorStore

__all__ = [
    "ForgetMemoryInput",
    "ForgetMemoryTool",
    "SearchMemoryInput",
    "SearchMemoryTool",
    "StoreMemoryInput",
    "StoreMemoryTool",
    "create_memory_tools",
]

logger = logging.getLogger(__name__)

MetadataValue = str | int | float | bool


class SearchMemoryInput(BaseModel):
    """Arguments of ``search_memory``."""

    query: str = Field(
        min_length=1,
        description="What to look for, in natural language, e.g. 'the user's dog's name'.",
    )
    k: int = Field(default=4, ge=1, le=50, description="How many memories to return (1-50).")


class StoreMemoryInput(BaseModel):
    """Arguments of ``store_memory``."""

    text: str = Field(
        min_length=1,
        description="The fact to remember, as one self-contained sentence "
        "(e.g. 'The user's dog is called Biscuit.').",
    )
    metadata: dict[str, MetadataValue] | None = Field(
        default=None,
        description="Optional labels, e.g. {'source': 'chat', 'topic': 'pets'}.",
    )


class ForgetMemoryInput(BaseModel):
    """Arguments of ``forget_memory``."""

    ids: list[str] = Field(
        min_length=1,
        description="Ids of the memories to delete, exactly as shown by search_memory "
        "(the value after 'id=').",
    )


def _explain_invalid_arguments(error: Any) -> str:
    """Tell the model which argument was wrong and why, so it can retry."""
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in error.errors()
    )
    return f"Invalid arguments ({problems}). Fix them and call the tool again."


class _MemoryTool(BaseTool):
    """Shared plumbing: the store, and bad arguments or engine errors turned into a
    message the model can read and correct, instead of an exception that ends the run."""

    store: MagneticVectorStore
    handle_tool_error: bool | str | Any = True
    handle_validation_error: bool | str | Any = _explain_invalid_arguments
    model_config = ConfigDict(arbitrary_types_allowed=True)


def _format_hits(hits: list[Hit]) -> str:
    if not hits:
        return "No memories found."
    lines = [f"Found {len(hits)} memories (best first):"]
    for hit in hits:
        links = describe_links(hit.cell, width=120)
        lines.append(
            f"- id={hit.id} | concept: {hit.group_label or 'unlabelled'} | "
            f"similarity {hit.score:.2f} | {hit.text}" + (f" | NOTE: {links}" if links else "")
        )
    return "\n".join(lines)


class SearchMemoryTool(_MemoryTool):
    """Search long-term memory; returns text for the model and Documents as the artifact."""

    name: str = "search_memory"
    description: str = (
        "Search long-term memory for facts stored earlier. Use it before answering "
        "questions about the user, past conversations or anything you may have been told "
        "before. Returns the best matching memories with their id, concept and similarity "
        "(1.0 = identical meaning)."
    )
    args_schema: type[BaseModel] = SearchMemoryInput
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    def _run(self, query: str, k: int = 4, **_: Any) -> tuple[str, list[Document]]:
        try:
            hits = self.store.search_hits(query, k=k)
        except MagneticError as e:
            raise ToolException(str(e)) from e
        return _format_hits(hits), [hit_to_document(h, with_group=True) for h in hits]

    async def _arun(self, query: str, k: int = 4, **_: Any) -> tuple[str, list[Document]]:
        try:
            hits = await self.store.asearch_hits(query, k=k)
        except MagneticError as e:
            raise ToolException(str(e)) from e
        return _format_hits(hits), [hit_to_document(h, with_group=True) for h in hits]


class StoreMemoryTool(_MemoryTool):
    """Store one fact in long-term memory."""

    name: str = "store_memory"
    description: str = (
        "Save one fact to long-term memory so it can be found later with search_memory. "
        "Store durable facts (preferences, names, decisions, dates), one per call, written "
        "as a self-contained sentence. Returns the new memory's id."
    )
    args_schema: type[BaseModel] = StoreMemoryInput

    def _run(self, text: str, metadata: dict[str, Any] | None = None, **_: Any) -> str:
        try:
            (cid,) = self.store.add_texts([text], [metadata or {}])
        except MagneticError as e:
            raise ToolException(str(e)) from e
        return f"Stored memory id={cid}."

    async def _arun(self, text: str, metadata: dict[str, Any] | None = None, **_: Any) -> str:
        try:
            (cid,) = await self.store.aadd_texts([text], [metadata or {}])
        except MagneticError as e:
            raise ToolException(str(e)) from e
        return f"Stored memory id={cid}."


class ForgetMemoryTool(_MemoryTool):
    """Delete memories by id."""

    name: str = "forget_memory"
    description: str = (
        "Delete memories that are wrong, outdated or that the user asked you to forget. "
        "Find their ids with search_memory first. Unknown ids are reported, not an error."
    )
    args_schema: type[BaseModel] = ForgetMemoryInput

    def _run(self, ids: list[str], **_: Any) -> str:
        try:
            found = {d.id for d in self.store.get_by_ids(ids) if d.id is not None}
            if found:
                self.store.delete(ids=list(found))
        except MagneticError as e:
            raise ToolException(str(e)) from e
        return _forget_report(ids, found)

    async def _arun(self, ids: list[str], **_: Any) -> str:
        try:
            found = {d.id for d in await self.store.aget_by_ids(ids) if d.id is not None}
            if found:
                await self.store.adelete(ids=list(found))
        except MagneticError as e:
            raise ToolException(str(e)) from e
        return _forget_report(ids, found)


def _forget_report(ids: list[str], found: set[str]) -> str:
    missing = [i for i in dict.fromkeys(ids) if i not in found]
    deleted = [i for i in dict.fromkeys(ids) if i in found]
    parts = [f"Deleted {len(deleted)} memories" + (f": {', '.join(deleted)}." if deleted else ".")]
    if missing:
        parts.append(f"No memory with id {', '.join(missing)} (nothing to delete).")
    return " ".join(parts)


def create_memory_tools(store: MagneticVectorStore) -> list[BaseTool]:
    """The agent memory tools ``[search_memory, store_memory, forget_memory]`` for ``store``.

    Args:
        store: the store the tools read and write.

    Example:
        ```python
        tools = create_memory_tools(store)
        llm_with_tools = chat_model.bind_tools(tools)
        ```
    """
    if not isinstance(store, MagneticVectorStore):
        raise TypeError(f"expected a MagneticVectorStore, got {type(store).__name__}")
    return [
        SearchMemoryTool(store=store),
        StoreMemoryTool(store=store),
        ForgetMemoryTool(store=store),
    ]
