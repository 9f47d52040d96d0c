"""MagneticMemoryBlock: MagneticStorage as a long-term memory block of LlamaIndex's ``Memory``."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, TextBlock
from llama_index.core.bridge.pydantic import Field, ValidationError, ValidationInfo, field_validator
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.utils import get_tokenizer

from magnetic_core.errors import WrongTypeError
from magnetic_core.memory import MagneticMemory
from magnetic_core.types import Hit
from magnetic_core.validators import check_int, field_error

__all__ = ["MagneticMemoryBlock"]

logger = logging.getLogger(__name__)

ROLE_KEY = "role"
SESSION_KEY = "session_id"
SOURCE_KEY = "source"
SOURCE = "llama_index.memory"


def message_text(message: ChatMessage) -> str:
    """The text blocks of a chat message, joined."""
    return " ".join(b.text for b in message.blocks if isinstance(b, TextBlock)).strip()


class MagneticMemoryBlock(BaseMemoryBlock[str]):
    """A long-term memory block for ``llama_index.core.memory.Memory`` on MagneticStorage.

    Messages that ``Memory`` flushes out of its short-term queue are stored as cells (one
    per message, with its role and session), where they join concept groups like any other
    memory. When the agent next reads its memory, the block searches the cells relevant to
    the latest messages and returns them, best first, within ``token_limit`` tokens.
    Memories already visible in the chat history are not repeated.

    Args:
        memory: the :class:`~magnetic_core.MagneticMemory` holding the cells (its embedder
            embeds messages and queries).
        similarity_top_k: how many memories to retrieve at most.
        token_limit: token budget of the block's text (counted with ``tokenizer_fn``).
        retrieval_context_window: how many of the latest messages make up the query.
        session_scoped: recall only what was said in the current session (by default the
            block recalls across sessions: that is what long-term memory is for).
        priority: ``Memory``'s truncation priority (0 never truncates the block).

    Example:
        >>> import asyncio, tempfile
        >>> from llama_index.core.llms import ChatMessage
        >>> from magnetic_core import HashingEmbedder, MagneticMemory
        >>> mem = MagneticMemory(path=tempfile.mkdtemp(), embedder=HashingEmbedder())
        >>> block = MagneticMemoryBlock(memory=mem)
        >>> asyncio.run(block.aput([ChatMessage(role="user", content="my cat is named Miso")]))
        >>> asyncio.run(block.aget([ChatMessage(role="user", content="what is my cat named?")]))
        '- (user) my cat is named Miso'
        >>> mem.close()
    """

    name: str = Field(default="MagneticMemory", description="The name of the memory block.")
    memory: MagneticMemory = Field(description="The MagneticMemory holding the messages.")
    similarity_top_k: int = Field(default=5, ge=1, description="Memories to retrieve at most.")
    token_limit: int = Field(default=800, ge=1, description="Token budget of the block.")
    retrieval_context_window: int = Field(
        default=3, ge=1, description="Latest messages used as the query."
    )
    session_scoped: bool = Field(default=False, description="Recall this session only.")
    tokenizer_fn: Callable[[str], list[Any]] = Field(
        default_factory=get_tokenizer, description="Counts tokens of the block's text."
    )

    def __init__(self, **data: Any) -> None:
        """Check the fields; a bad one raises InvalidInputError (not pydantic's error)."""
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise field_error(type(self).__name__, e.errors()) from e

    @field_validator("memory", mode="before")
    @classmethod
    def _check_memory(cls, value: Any) -> MagneticMemory:
        if not isinstance(value, MagneticMemory):
            raise WrongTypeError(
                f"memory must be a magnetic_core.MagneticMemory, got {type(value).__name__}",
                hint="pass memory=MagneticMemory(...), or the .memory of a vector store",
            )
        return value

    @field_validator("similarity_top_k", "token_limit", "retrieval_context_window", mode="before")
    @classmethod
    def _check_count(cls, value: Any, info: ValidationInfo) -> int:
        # The core's rule, not pydantic's lax one (which takes "3" and 2.0 for 3 and 2).
        return int(check_int(value, str(info.field_name), low=1))

    # -- writing ---------------------------------------------------------------------
    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Store each message that has text as one cell (the same message twice, once)."""
        texts: list[str] = []
        metas: list[dict[str, Any]] = []
        ids: list[str] = []
        for message in messages:
            text = message_text(message)
            if not text:
                continue
            session = message.additional_kwargs.get(SESSION_KEY)
            meta = {ROLE_KEY: str(message.role.value), SOURCE_KEY: SOURCE}
            if session is not None:
                meta[SESSION_KEY] = str(session)
            key = f"{session}\x1f{meta[ROLE_KEY]}\x1f{text}"
            cid = hashlib.sha256(key.encode()).hexdigest()[:32]
            if cid in ids:
                continue
            texts.append(text)
            metas.append(meta)
            ids.append(cid)
        if texts:
            await self.memory.aadd(texts, metadatas=metas, ids=ids)
            logger.debug("stored %d messages in %s", len(texts), self.name)

    # -- reading ---------------------------------------------------------------------
    async def _aget(
        self,
        messages: list[ChatMessage] | None = None,
        session_id: str | None = None,
        **block_kwargs: Any,
    ) -> str:
        """The memories relevant to the latest messages, one per line, within the budget."""
        if not messages:
            return ""
        latest = [message_text(m) for m in messages[-self.retrieval_context_window :]]
        query = " ".join(t for t in latest if t)
        if not query or self.memory.count() == 0:
            return ""
        where = None
        if self.session_scoped and session_id is not None:
            where = {SESSION_KEY: str(session_id)}
        visible = {message_text(m) for m in messages}
        hits = await self.memory.asearch(
            query, k=self.similarity_top_k + len(visible), filter=where
        )
        fresh = [h for h in hits if h.text not in visible][: self.similarity_top_k]
        return "\n".join(self._within_budget(fresh))

    def _within_budget(self, hits: Sequence[Hit]) -> list[str]:
        lines: list[str] = []
        used = 0
        for hit in hits:
            line = f"- ({hit.metadata.get(ROLE_KEY, 'memory')}) {hit.text}"
            cost = len(self.tokenizer_fn(line))
            if used + cost > self.token_limit:
                break  # best first: a later memory is no better use of the budget
            lines.append(line)
            used += cost
        return lines

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Drop the least relevant memories (the last lines) until enough tokens are freed."""
        lines = content.split("\n") if content else []
        freed = 0
        while lines and freed < tokens_to_truncate:
            freed += len(self.tokenizer_fn(lines.pop()))
        return "\n".join(lines) or None
