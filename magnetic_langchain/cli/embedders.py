"""The ``--embedder`` choices, and the embedder a store's stamp names, loaded on first use."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from magnetic_core.embeddings import (
    MINILM,
    Embedder,
    HashingEmbedder,
    OllamaEmbedder,
    SentenceTransformerEmbedder,
    default_embedder,
)
from magnetic_core.errors import EmbedderMismatchError, EmbeddingError

__all__ = ["EMBEDDERS", "StampedEmbedder", "create_embedder", "family", "stamped_embedder"]

logger = logging.getLogger(__name__)

EMBEDDERS = ("auto", "ollama", "minilm", "hashing")
# The name LangChain's OllamaEmbeddings was stamped with before it was stamped ollama/<model>.
_LEGACY_OLLAMA = "langchain/OllamaEmbeddings/"


def family(stamped_name: str) -> str | None:
    """The ``--embedder`` value that rebuilds a stamped embedder, or None if none does."""
    if re.fullmatch(r"hashing-\d+\(not-semantic\)", stamped_name):
        return "hashing"
    if stamped_name.startswith(("ollama/", _LEGACY_OLLAMA)):
        return "ollama"
    if stamped_name == MINILM:
        return "minilm"
    return None


def _quiet_minilm(model: str = MINILM) -> Embedder:
    # transformers draws a "Loading weights" bar on every load; a CLI call should not.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # sentence-transformers reports its own missing dependency
        pass
    return SentenceTransformerEmbedder(model)


def create_embedder(choice: str) -> Embedder:
    """The embedder for a new store: ``auto``, ``ollama``, ``minilm`` or ``hashing``."""
    if choice == "hashing":
        return HashingEmbedder()
    if choice == "minilm":
        return _quiet_minilm()
    if choice == "ollama":
        return OllamaEmbedder()
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    return default_embedder()


class _UnprefixedOllama(OllamaEmbedder):
    """Ollama as LangChain's OllamaEmbeddings called it before: no task prefixes."""

    def __init__(self, model: str, name: str) -> None:
        super().__init__(model)
        self._doc_prefix = self._query_prefix = ""
        self._legacy_name = name

    @property
    def name(self) -> str:
        return self._legacy_name


def _factory(name: str, dim: int) -> Callable[[], Embedder] | None:
    kind = family(name)
    if kind == "hashing":
        return lambda: HashingEmbedder(dim)
    if kind == "minilm":
        return _quiet_minilm
    if name.startswith("ollama/"):
        return lambda: OllamaEmbedder(name.removeprefix("ollama/"))
    if name.startswith(_LEGACY_OLLAMA):
        return lambda: _UnprefixedOllama(name.removeprefix(_LEGACY_OLLAMA), name)
    return None


class StampedEmbedder:
    """The embedder a store was stamped with, loaded when something is first embedded.

    ``name`` and ``dim`` come from the stamp, so opening the store, listing groups or
    exporting never loads the model.

    Args:
        name: the stamped embedder name.
        dim: the stamped dimension.
        factory: builds the real embedder; None when the CLI cannot (a model that only
            a Python caller can provide).
    """

    def __init__(self, name: str, dim: int, factory: Callable[[], Embedder] | None) -> None:
        self._name, self._dim, self._factory = name, dim, factory
        self._model: Embedder | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def loaded(self) -> bool:
        """Whether the model has been loaded."""
        return self._model is not None

    def _load(self) -> Embedder:
        if self._model is None:
            if self._factory is None:
                raise EmbeddingError(
                    f"the store was built with embedder {self._name!r}, which the CLI cannot load",
                    hint="search it from Python with the same model",
                )
            model = self._factory()
            if model.name != self._name or model.dim != self._dim:
                raise EmbedderMismatchError(
                    f"the store was built with {self._name!r} ({self._dim}-d) but the model "
                    f"loaded is {model.name!r} ({model.dim}-d)"
                )
            logger.info("loaded embedder %s", model.name)
            self._model = model
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]] | np.ndarray:
        return self._load().embed_documents(texts)

    def embed_query(self, text: str) -> list[float] | np.ndarray:
        return self._load().embed_query(text)


def stamped_embedder(stamp: Mapping[str, Any], choice: str | None, where: str) -> StampedEmbedder:
    """The embedder of an existing store, checked against ``--embedder`` when one is named.

    Raises:
        EmbedderMismatchError: ``--embedder`` names another model; the message says which
            value to pass.
    """
    name, dim = str(stamp["mag_embedder"]), int(stamp["mag_dim"])
    kind = family(name)
    if choice not in (None, "auto") and choice != kind:
        fix = f"pass --embedder {kind} or leave --embedder out" if kind else "leave --embedder out"
        raise EmbedderMismatchError(
            f"{where} was built with embedder {name!r} ({dim}-d), not --embedder {choice}",
            hint=fix,
        )
    return StampedEmbedder(name, dim, _factory(name, dim))
