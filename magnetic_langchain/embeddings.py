"""Adapters between LangChain ``Embeddings`` and the core's ``Embedder`` protocol.

:class:`LangChainEmbedder` lets the engine use any LangChain embedding model;
:class:`MagneticEmbeddings` goes the other way, so a core embedder (MiniLM, Ollama, hashing)
can be handed to anything in LangChain that wants ``Embeddings``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
from langchain_core.embeddings import Embeddings

from magnetic_core.embeddings import Embedder, OllamaEmbedder
from magnetic_core.errors import WrongTypeError
from magnetic_core.validators import check_int

__all__ = [
    "LangChainEmbedder",
    "MagneticEmbeddings",
    "as_core_embedder",
    "as_langchain_embeddings",
    "embedder_name",
]

logger = logging.getLogger(__name__)

# Attributes LangChain embedding classes use for the model they call, in order of preference.
_MODEL_ATTRIBUTES = ("model", "model_name", "model_id", "deployment", "size")


def embedder_name(embeddings: Embeddings) -> str:
    """A stable name for a LangChain embeddings object: its class and model.

    The name is stamped on the store, which then refuses to open with another model.

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> embedder_name(DeterministicFakeEmbedding(size=6))
        'langchain/DeterministicFakeEmbedding/6'
    """
    name = f"langchain/{type(embeddings).__name__}"
    for attr in _MODEL_ATTRIBUTES:
        value = getattr(embeddings, attr, None)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return f"{name}/{value}"
    return name


class LangChainEmbedder:
    """A LangChain ``Embeddings`` seen through the core :class:`Embedder` protocol.

    Args:
        embeddings: any LangChain embedding model.
        dim: its output dimension. When omitted it is probed once, with one query
            embedding, when first needed.
        name: the name stamped on the store (default: class and model, see
            :func:`embedder_name`).
        document_prefix: prepended to every document before it is embedded (task prefixes
            such as nomic-embed-text's ``search_document: ``).
        query_prefix: prepended to every query before it is embedded.

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> embedder = LangChainEmbedder(DeterministicFakeEmbedding(size=6))
        >>> embedder.dim
        6
    """

    def __init__(
        self,
        embeddings: Embeddings,
        *,
        dim: int | None = None,
        name: str | None = None,
        document_prefix: str = "",
        query_prefix: str = "",
    ) -> None:
        if not isinstance(embeddings, Embeddings):
            raise WrongTypeError(
                f"expected a LangChain Embeddings, got {type(embeddings).__name__}",
                hint="wrap core embedders directly with MagneticMemory(embedder=...)",
            )
        check_int(dim, "dim", low=1, optional=True)
        self.embeddings = embeddings
        self._dim = dim
        self._name = name or embedder_name(embeddings)
        self._document_prefix = document_prefix
        self._query_prefix = query_prefix

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        if self._dim is None:
            probe = self.embeddings.embed_query(self._query_prefix + "dimension probe")
            self._dim = len(probe)
            logger.debug("probed %s: %d dimensions", self._name, self._dim)
        return self._dim

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return self.embeddings.embed_documents([self._document_prefix + t for t in texts])

    def embed_query(self, text: str) -> list[float]:
        return self.embeddings.embed_query(self._query_prefix + text)

    async def aembed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Async :meth:`embed_documents` through the model's own async API."""
        if not texts:
            return []
        return await self.embeddings.aembed_documents([self._document_prefix + t for t in texts])

    async def aembed_query(self, text: str) -> list[float]:
        """Async :meth:`embed_query` through the model's own async API."""
        return await self.embeddings.aembed_query(self._query_prefix + text)


class MagneticEmbeddings(Embeddings):
    """A core :class:`Embedder` (e.g. MiniLM) exposed as LangChain ``Embeddings``.

    Args:
        embedder: any object with ``embed_documents`` and ``embed_query`` (the core protocol).

    Example:
        >>> from magnetic_core import HashingEmbedder
        >>> len(MagneticEmbeddings(HashingEmbedder(dim=64)).embed_query("hello"))
        64
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    @property
    def model(self) -> str:
        """The wrapped embedder's name (used when naming this model)."""
        return self.embedder.name

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return np.asarray(self.embedder.embed_documents(texts), dtype=float).tolist()

    def embed_query(self, text: str) -> list[float]:
        return np.asarray(self.embedder.embed_query(text), dtype=float).tolist()


def as_core_embedder(embeddings: Embeddings) -> Embedder:
    """The core embedder behind ``embeddings``: unwrapped when it wraps one, else adapted.

    LangChain's ``OllamaEmbeddings`` is adapted to behave as the core's
    :class:`~magnetic_core.embeddings.OllamaEmbedder`: it is stamped ``ollama/<model>`` (so
    the CLI's ``--embedder ollama`` opens the same store) and sends the model's task
    prefixes (``search_document:`` / ``search_query:`` for nomic-embed-text).
    """
    if isinstance(embeddings, MagneticEmbeddings):
        return embeddings.embedder
    model = _ollama_model(embeddings)
    if model is not None:
        doc, query = OllamaEmbedder.PREFIXES.get(model.split(":")[0], ("", ""))
        return LangChainEmbedder(
            embeddings, name=f"ollama/{model}", document_prefix=doc, query_prefix=query
        )
    return LangChainEmbedder(embeddings)


def _ollama_model(embeddings: Embeddings) -> str | None:
    """The model of a ``langchain_ollama.OllamaEmbeddings`` (found without importing it)."""
    cls = type(embeddings)
    if cls.__name__ != "OllamaEmbeddings" or not cls.__module__.startswith("langchain_ollama"):
        return None
    model = getattr(embeddings, "model", None)
    return model if isinstance(model, str) and model else None


def as_langchain_embeddings(embedder: Embedder) -> Embeddings:
    """LangChain ``Embeddings`` for a core embedder: unwrapped when it wraps one, else adapted."""
    if isinstance(embedder, LangChainEmbedder):
        return embedder.embeddings
    return MagneticEmbeddings(embedder)
