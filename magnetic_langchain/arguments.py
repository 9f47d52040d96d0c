"""Validation of the arguments LangChain passes to the vector store, with clear errors."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from magnetic_core._text.inputs import validate_batch
from magnetic_core.errors import FilterError, InvalidInputError, WrongTypeError
from magnetic_core.validators import check_int, check_number

__all__ = [
    "SEARCH_OPTIONS",
    "batches",
    "check_mmr",
    "check_search_options",
    "delete_filter",
    "pop_batch_size",
    "prepare_texts",
]

SEARCH_OPTIONS = frozenset(
    {
        "n_probe",
        "entity_boost",
        "lexical_weight",
        "include_group_metadata",
        "current_only",
        "where_document",
    }
)
"""Keyword arguments the search methods accept besides ``k`` and ``filter``."""


def prepare_texts(
    texts: Iterable[str],
    metadatas: Sequence[Mapping[str, Any] | None] | None,
    ids: Sequence[str | None] | None,
) -> tuple[list[str], list[Mapping[str, Any] | None], list[str]]:
    """Lists of texts, metadatas and ids of equal length; missing ids become UUIDs.

    The whole input is validated by the core before any batch is written, so a bad item
    late in a long list cannot leave the items before it half-stored.
    """
    if isinstance(texts, str):
        raise WrongTypeError(
            "texts must be a list of strings, got one string", hint="wrap it: [text]"
        )
    texts = list(texts)
    if ids is not None and len(ids) != len(texts):
        raise InvalidInputError(
            f"got {len(ids)} ids for {len(texts)} texts", hint="pass one id per text"
        )
    full_ids = [cid if cid is not None else str(uuid.uuid4()) for cid in ids or [None] * len(texts)]
    texts, metas, full_ids = validate_batch(texts, metadatas, full_ids)
    return texts, list(metas), full_ids


def pop_batch_size(kwargs: dict[str, Any]) -> int | None:
    """Take ``batch_size`` out of ``kwargs``; anything else left there is an error."""
    size = kwargs.pop("batch_size", None)
    if kwargs:
        raise WrongTypeError(
            f"unexpected keyword arguments {sorted(kwargs)}", hint="only batch_size= is accepted"
        )
    return check_int(size, "batch_size", low=1, optional=True)  # type: ignore[no-any-return]


def batches(
    texts: list[str], metas: list[Mapping[str, Any] | None], ids: list[str], size: int | None
) -> list[tuple[list[str], list[Mapping[str, Any] | None], list[str]]]:
    """Split aligned lists into chunks of ``size`` (one chunk when ``size`` is None)."""
    if not texts:
        return []
    step = size or len(texts)
    return [
        (texts[i : i + step], metas[i : i + step], ids[i : i + step])
        for i in range(0, len(texts), step)
    ]


def delete_filter(kwargs: dict[str, Any]) -> Mapping[str, Any] | None:
    """Take ``filter`` (or its Chroma name ``where``) out of ``kwargs``; else an error."""
    where = kwargs.pop("filter", None)
    alias = kwargs.pop("where", None)
    if where is not None and alias is not None:
        raise FilterError("the filter was given twice, as filter= and where=", hint="pass one")
    if kwargs:
        raise WrongTypeError(
            f"unexpected keyword arguments {sorted(kwargs)}", hint="only filter= / where="
        )
    return where if where is not None else alias


def check_search_options(options: Mapping[str, Any]) -> None:
    """Refuse search keyword arguments the store does not understand."""
    unknown = set(options) - SEARCH_OPTIONS
    if unknown:
        raise WrongTypeError(
            f"unexpected search arguments {sorted(unknown)}",
            hint=f"supported: k, filter, {', '.join(sorted(SEARCH_OPTIONS))}",
        )


def check_mmr(fetch_k: int, lambda_mult: float) -> None:
    """Refuse out-of-range MMR parameters (``k`` is the engine's to check)."""
    check_number(lambda_mult, "lambda_mult", low=0.0, high=1.0)
    check_int(fetch_k, "fetch_k")
