"""Agent memory tools: search, store, forget and browse memories in a MagneticVectorStore.

Every tool answers in text a small model can read: results name each memory's id, concept
group and links to contradicting or superseding memories, and bad arguments come back as a
message saying which argument was wrong and what is expected, so the model can call again.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.runnables.config import run_in_executor
from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, ConfigDict, Field

from magnetic_core import Cell, Hit, MagneticError
from magnetic_core._sleep.supersession import describe_links
from magnetic_core.errors import WrongTypeError
from magnetic_langchain.documents import cell_to_document, hit_to_document
from magnetic_langchain.vectorstores import MagneticVectorStore

__all__ = [
    "ForgetMemoryInput",
    "ForgetMemoryTool",
    "ListMemoryGroupInput",
    "ListMemoryGroupTool",
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

    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        description="What to look for, in natural language, e.g. 'the user's dog's name'.",
    )
    k: int = Field(default=4, ge=1, le=50, description="How many memories to return (1-50).")


class StoreMemoryInput(BaseModel):
    """Arguments of ``store_memory``."""

    model_config = ConfigDict(extra="forbid")

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

    model_config = ConfigDict(extra="forbid")

    ids: list[str] = Field(
        min_length=1,
        description="Ids of the memories to delete, exactly as shown by search_memory "
        "(the value after 'id=').",
    )


class ListMemoryGroupInput(BaseModel):
    """Arguments of ``list_memory_group``."""

    model_config = ConfigDict(extra="forbid")

    group: str | None = Field(
        default=None,
        description="Id of a concept group, as shown by search_memory after 'group='. "
        "Leave it out to list the groups themselves.",
    )
    limit: int = Field(default=10, ge=1, le=50, description="At most this many rows (1-50).")


def _explain_invalid_arguments(error: Any) -> str:
    """Tell the model which argument was wrong and what is expected, so it can retry."""
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in error.errors()
    )
    expected = ""
    schema = getattr(error, "title", None)
    model = _SCHEMAS.get(schema or "")
    if model is not None:
        expected = (
            " Expected arguments: "
            + ", ".join(
                f"{name} ({'required' if field.is_required() else 'optional'})"
                for name, field in model.model_fields.items()
            )
            + "."
        )
    return f"Invalid arguments ({problems}).{expected} Fix them and call the tool again."


_SCHEMAS: dict[str, type[BaseModel]] = {
    m.__name__: m
    for m in (SearchMemoryInput, StoreMemoryInput, ForgetMemoryInput, ListMemoryGroupInput)
}


class _MemoryTool(BaseTool):
    """Shared plumbing: the store, and bad arguments or engine errors turned into a
    message the model can read and correct, instead of an exception that ends the run."""

    store: MagneticVectorStore
    handle_tool_error: bool | str | Any = True
    handle_validation_error: bool | str | Any = _explain_invalid_arguments
    model_config = ConfigDict(arbitrary_types_allowed=True)


def _links(cell: Cell) -> str:
    """Contradiction and supersession links of a cell, for the model to weigh."""
    links = describe_links(cell, width=120)
    return f" | NOTE: {links}" if links else ""


def _format_hits(hits: list[Hit]) -> str:
    if not hits:
        return "No memories found."
    lines = [f"Found {len(hits)} memories (best first):"]
    for hit in hits:
        lines.append(
            f"- id={hit.id} | concept: {hit.group_label or 'unlabelled'} (group={hit.group_id}) "
            f"| similarity {hit.score:.2f} | {hit.text}{_links(hit.cell)}"
        )
    return "\n".join(lines)


class SearchMemoryTool(_MemoryTool):
    """Search long-term memory; returns text for the model and Documents as the artifact.

    Superseded memories are left out (their successors are found instead); contradiction
    links recorded by sleep mode are shown beside the memories that carry them.
    """

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
            hits = self.store.memory.search(query, k=k, current_only=True)
        except MagneticError as e:
            raise ToolException(str(e)) from e
        return _format_hits(hits), [hit_to_document(h, with_group=True) for h in hits]

    async def _arun(self, query: str, k: int = 4, **_: Any) -> tuple[str, list[Document]]:
        return await run_in_executor(None, self._run, query, k)


class StoreMemoryTool(_MemoryTool):
    """Store one fact in long-term memory.

    Attributes:
        default_metadata: labels written on every memory this tool stores (e.g. the
            source and session id); the model's own metadata cannot override them.
        timestamp_key: when set, the UNIX time of the write is stored under this key.
    """

    name: str = "store_memory"
    description: str = (
        "Save one fact to long-term memory so it can be found later with search_memory. "
        "Store durable facts (preferences, names, decisions, dates), one per call, written "
        "as a self-contained sentence. Returns the new memory's id."
    )
    args_schema: type[BaseModel] = StoreMemoryInput
    default_metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    timestamp_key: str | None = None

    def _metadata(self, given: dict[str, Any] | None) -> dict[str, Any]:
        metadata = {**(given or {}), **self.default_metadata}
        if self.timestamp_key:
            metadata[self.timestamp_key] = time.time()
        return metadata

    def _run(self, text: str, metadata: dict[str, Any] | None = None, **_: Any) -> str:
        try:
            (cid,) = self.store.add_texts([text], [self._metadata(metadata)])
        except MagneticError as e:
            raise ToolException(str(e)) from e
        return f"Stored memory id={cid}."

    async def _arun(self, text: str, metadata: dict[str, Any] | None = None, **_: Any) -> str:
        try:
            (cid,) = await self.store.aadd_texts([text], [self._metadata(metadata)])
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


class ListMemoryGroupTool(_MemoryTool):
    """List the concept groups of memory, or the memories of one group."""

    name: str = "list_memory_group"
    description: str = (
        "Browse memory by concept. Without 'group', lists the concept groups (id, label, "
        "size). With 'group' (an id from search_memory or from this list), lists the "
        "memories filed under that concept, most typical first."
    )
    args_schema: type[BaseModel] = ListMemoryGroupInput
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    def _run(
        self, group: str | None = None, limit: int = 10, **_: Any
    ) -> tuple[str, list[Document]]:
        memory = self.store.memory
        try:
            if group is None:
                return _format_groups(memory.groups(), limit), []
            known = {g.id: g for g in memory.groups()}
            info = known.get(group.strip())
            if info is None:
                raise ToolException(
                    f"No concept group with id {group!r}. Call list_memory_group without "
                    f"arguments to see the groups, or use a group= value from search_memory."
                )
            cells = memory.get(list(info.cell_ids[:limit]))
        except MagneticError as e:
            raise ToolException(str(e)) from e
        lines = [f"Group {info.id} [{info.label}]: {info.size} memories, showing {len(cells)}:"]
        lines += [f"- id={c.id} | {c.text}{_links(c)}" for c in cells]
        docs = [cell_to_document(c, group_label=info.label) for c in cells]
        return "\n".join(lines), docs

    async def _arun(
        self, group: str | None = None, limit: int = 10, **_: Any
    ) -> tuple[str, list[Document]]:
        return await run_in_executor(None, self._run, group, limit)


def _format_groups(groups: list[Any], limit: int) -> str:
    if not groups:
        return "Memory is empty: no concept groups yet."
    lines = [f"{len(groups)} concept groups (largest first, showing {min(limit, len(groups))}):"]
    lines += [f"- group={g.id} | {g.label or 'unlabelled'} | {g.size} memories" for g in groups]
    return "\n".join(lines[: limit + 1])


def create_memory_tools(
    store: MagneticVectorStore,
    *,
    metadata: dict[str, MetadataValue] | None = None,
    timestamp_key: str | None = None,
) -> list[BaseTool]:
    """The agent memory tools for ``store``.

    ``[search_memory, store_memory, forget_memory, list_memory_group]``.

    Args:
        store: the store the tools read and write.
        metadata: labels ``store_memory`` writes on every memory (e.g.
            ``{"source": "chat", "session": "..."}``) so they can be filtered and forgotten.
        timestamp_key: when set, ``store_memory`` also records the UNIX time under this key.

    Example:
        ```python
        tools = create_memory_tools(store, metadata={"source": "chat"})
        llm_with_tools = chat_model.bind_tools(tools)
        ```
    """
    if not isinstance(store, MagneticVectorStore):
        raise WrongTypeError(
            f"expected a MagneticVectorStore, got {type(store).__name__}",
            hint="wrap a memory first: MagneticVectorStore(memory=memory)",
        )
    return [
        SearchMemoryTool(store=store),
        StoreMemoryTool(
            store=store, default_metadata=dict(metadata or {}), timestamp_key=timestamp_key
        ),
        ForgetMemoryTool(store=store),
        ListMemoryGroupTool(store=store),
    ]
