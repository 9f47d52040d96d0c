"""Embedders on both sides of the seam: LlamaIndex-supplied vectors, and core models for LlamaIndex.

* :class:`PrecomputedEmbedder` is the core :class:`~magnetic_core.embeddings.Embedder` of a
  store whose vectors all come from LlamaIndex (nodes carry embeddings, queries carry
  ``query_embedding``). It only names the model and its dimension for the store's stamp, and
  refuses to embed text.
* :class:`MagneticEmbedding` is a LlamaIndex ``BaseEmbedding`` over any core embedder (e.g.
  the offline all-MiniLM-L6-v2), so LlamaIndex and the engine embed with the same model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr, ValidationError

from magnetic_core.embeddings import Embedder, VectorsOnly
from magnetic_core.errors import EmbeddingError, InvalidInputError
from magnetic_core.memory import MagneticMemory
from magnetic_core.validators import check_int, field_error

__all__ = [
    "PRECOMPUTED_NAME",
    "LlamaIndexEmbedder",
    "MagneticEmbedding",
    "PrecomputedEmbedder",
    "embed_query_text",
]

PRECOMPUTED_NAME = "llamaindex-precomputed"


class PrecomputedEmbedder(VectorsOnly):
    """The engine-side stand-in for an embedding model that runs in LlamaIndex.

    The store records ``name`` and ``dim`` and refuses to reopen with different ones, so
    pass the name of the LlamaIndex embed model (``embed_model.model_name``): a store filled
    through LangChain or the core with the same model then opens here too.

    Args:
        dim: the embedding dimension.
        name: the model name to stamp on the store.

    Example:
        >>> e = PrecomputedEmbedder(384, "sentence-transformers/all-MiniLM-L6-v2")
        >>> e.name, e.dim
        ('sentence-transformers/all-MiniLM-L6-v2', 384)
        >>> e.embed_query("hello")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        magnetic_core.errors.EmbeddingError: ... (hint: ...)
    """

    def __init__(self, dim: int, name: str = PRECOMPUTED_NAME) -> None:
        check_int(dim, "dim", low=1)
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError(f"the embedder name must be a non-empty string, got {name!r}")
        super().__init__(
            dim,
            name,
            reason=f"this store has no embedding model: its vectors come from LlamaIndex "
            f"({name!r}, {dim}-d), so it cannot embed text itself",
            hint="pass embeddings (node.embedding, VectorStoreQuery.query_embedding), give "
            "the retriever an embed_model, or build the store with embed_model=",
        )


class LlamaIndexEmbedder:
    """A LlamaIndex embed model seen as a core :class:`~magnetic_core.embeddings.Embedder`.

    A store built with one can embed text itself: queries by ``query_str``, a
    ``MagneticRetriever`` without ``embed_model``, and the core's ``search("text")`` all
    work, with the same model LlamaIndex uses for the nodes.

    Args:
        embed_model: any LlamaIndex ``BaseEmbedding``.
        dim: its embedding size; measured by embedding one probe text when omitted.

    Example:
        >>> from magnetic_core import HashingEmbedder
        >>> e = LlamaIndexEmbedder(MagneticEmbedding(HashingEmbedder(dim=16)))
        >>> e.name, e.dim, e.embed_documents(["a b", "c"]).shape
        ('hashing-16(not-semantic)', 16, (2, 16))
    """

    def __init__(self, embed_model: BaseEmbedding, dim: int | None = None) -> None:
        if not isinstance(embed_model, BaseEmbedding):
            raise InvalidInputError(
                f"embed_model must be a LlamaIndex BaseEmbedding, got {type(embed_model).__name__}"
            )
        self._model = embed_model
        self._name = embed_model.model_name
        if dim is None:
            try:
                dim = len(embed_model.get_text_embedding("dimension probe"))
            except Exception as e:
                raise EmbeddingError(
                    f"the embed model {self._name!r} failed to embed a probe text: {e}",
                    hint="check the model, or pass dim= explicitly",
                ) from e
        self._dim = PrecomputedEmbedder(dim, self._name).dim

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def embed_model(self) -> BaseEmbedding:
        """The LlamaIndex model underneath."""
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return np.asarray(self._model.get_text_embedding_batch(list(texts)), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(self._model.get_query_embedding(text), dtype=np.float32)


def embed_query_text(memory: MagneticMemory, text: str) -> np.ndarray:
    """The memory's unit query vector for ``text``.

    Raises:
        EmbeddingError: the memory's vectors come from LlamaIndex, so it has no model to
            embed with (raised directly, not wrapped as a failure of a model).
    """
    if isinstance(memory.embedder, PrecomputedEmbedder):
        raise memory.embedder.refusal()
    return memory.embed_query(text)


class MagneticEmbedding(BaseEmbedding):
    """A LlamaIndex embed model backed by a MagneticStorage core embedder.

    Args:
        embedder: any core embedder, such as
            :class:`~magnetic_core.embeddings.SentenceTransformerEmbedder` (offline MiniLM).
        embed_batch_size: texts per call of the underlying model.

    Example:
        >>> from magnetic_core import HashingEmbedder
        >>> embed_model = MagneticEmbedding(HashingEmbedder(dim=64))
        >>> embed_model.model_name, len(embed_model.get_text_embedding("hello"))
        ('hashing-64(not-semantic)', 64)
    """

    _embedder: Embedder = PrivateAttr()

    def __init__(self, embedder: Embedder, *, embed_batch_size: int = 64, **kwargs: Any) -> None:
        if not isinstance(embedder, Embedder):
            raise InvalidInputError(
                f"embedder must implement the core Embedder protocol, got "
                f"{type(embedder).__name__}",
                hint="pass e.g. magnetic_core.SentenceTransformerEmbedder()",
            )
        try:
            super().__init__(model_name=embedder.name, embed_batch_size=embed_batch_size, **kwargs)
        except ValidationError as e:
            raise field_error(type(self).__name__, e.errors()) from e
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        return "MagneticEmbedding"

    @property
    def embedder(self) -> Embedder:
        """The core embedder underneath."""
        return self._embedder

    @property
    def dim(self) -> int:
        """The embedding dimension."""
        return self._embedder.dim

    def _get_query_embedding(self, query: str) -> list[float]:
        return np.asarray(self._embedder.embed_query(query), dtype=float).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return np.asarray(self._embedder.embed_documents(texts), dtype=float).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)
