"""Validation of what callers pass in, done before anything is written."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from magnetic_core._store.codec import validate_metadata
from magnetic_core.config import MemoryConfig
from magnetic_core.embeddings import validate_vectors
from magnetic_core.errors import DuplicateIdError, EmptyTextError, InvalidInputError
from magnetic_core.validators import check_id_list, check_int, check_utf8

__all__ = ["check_id_list", "check_k", "validate_batch", "validate_batch_vectors"]
# check_id_list lives in magnetic_core.validators and is re-exported here for callers.


def validate_batch(
    texts: Sequence[str],
    metadatas: Sequence[Mapping[str, Any] | None] | None,
    ids: Sequence[str] | None,
    *,
    max_chars: int | None = MemoryConfig.max_text_chars,
    allow_empty: bool = False,
) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    """Texts, metadata copies and ids of one ``add`` call, or an error naming the bad item.

    Missing ids become random UUIDs. A text longer than ``max_chars`` characters
    (``MemoryConfig.max_text_chars``) is refused. ``allow_empty`` accepts empty texts (cells
    given by their vector alone, such as image nodes: they get no lexical entry).
    """
    if isinstance(texts, str):
        raise InvalidInputError(
            "texts must be a list of strings, got one string", hint="wrap it: [text]"
        )
    check_id_list(ids)
    if isinstance(metadatas, (Mapping, str)):
        raise InvalidInputError(
            f"metadatas must be a list of dicts (one per text), got one {type(metadatas).__name__}",
            hint="wrap it: [metadata]",
        )
    texts = list(texts)
    for i, text in enumerate(texts):
        _check_text(i, text, max_chars=max_chars, allow_empty=allow_empty)
    if metadatas is not None and len(metadatas) != len(texts):
        raise InvalidInputError(
            f"got {len(metadatas)} metadatas for {len(texts)} texts",
            hint="pass one metadata dict (or None) per text",
        )
    metas = [validate_metadata(m, i) for i, m in enumerate(metadatas or [None] * len(texts))]
    ids = [str(uuid.uuid4()) for _ in texts] if ids is None else list(ids)
    if len(ids) != len(texts):
        raise InvalidInputError(
            f"got {len(ids)} ids for {len(texts)} texts", hint="pass one id per text"
        )
    return texts, metas, _checked_ids(ids)


def _check_text(i: int, text: Any, *, max_chars: int | None, allow_empty: bool) -> None:
    if not isinstance(text, str):
        raise InvalidInputError(
            f"text {i} is {type(text).__name__}, not str", hint="store texts as strings"
        )
    if not allow_empty and not text.strip():
        raise EmptyTextError(f"text {i} is empty", hint="store only non-empty texts")
    check_utf8(text, f"text {i}")
    if max_chars is not None and len(text) > max_chars:
        raise InvalidInputError(
            f"text {i} has {len(text):,} characters, more than the limit of {max_chars:,} "
            "(MemoryConfig.max_text_chars)",
            hint="split it into chunks first (e.g. a text splitter), or raise "
            "MemoryConfig.max_text_chars",
        )


def _checked_ids(ids: list[Any]) -> list[str]:
    """``ids`` if each is a non-empty string and none comes twice."""
    for i, cid in enumerate(ids):
        if not isinstance(cid, str) or not cid:
            raise InvalidInputError(f"id {i} must be a non-empty string, got {cid!r}")
        check_utf8(cid, f"id {i}")
    seen: set[str] = set()
    for cid in ids:
        if cid in seen:
            raise DuplicateIdError(f"id {cid!r} appears twice", hint="give each text its own id")
        seen.add(cid)
    return ids


def validate_batch_vectors(vectors: Any, n: int, dim: int) -> np.ndarray:
    """Caller-supplied embeddings for ``n`` texts as an (n, dim) float32 array."""
    vecs = validate_vectors(vectors, dim)
    if vecs.shape[0] != n:
        raise InvalidInputError(
            f"got {vecs.shape[0]} vectors for {n} texts", hint="pass one vector per text"
        )
    return vecs


def check_k(k: Any) -> int:
    """``k`` as a non-negative int, or an error."""
    return int(check_int(k, "k"))
