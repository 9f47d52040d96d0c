"""Chroma's ``where_document`` filters on a cell's text: ``$contains``, ``$not_contains``.

``{"$contains": "word"}`` keeps texts holding the substring (case-sensitive, as Chroma),
``{"$not_contains": "word"}`` the others; ``{"$and": [...]}`` and ``{"$or": [...]}`` combine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from magnetic_core.errors import FilterError

__all__ = ["TextPredicate", "compile_document_filter"]

TextPredicate = Callable[[str], bool]
_OPS = ("$contains", "$not_contains", "$and", "$or")


def compile_document_filter(where_document: Mapping[str, Any] | None) -> TextPredicate | None:
    """A predicate over a text for a ``where_document`` dict (None for no filter).

    Raises:
        FilterError: an unknown operator or a malformed operand.

    Example:
        >>> both = {"$and": [{"$contains": "cat"}, {"$not_contains": "dog"}]}
        >>> keep = compile_document_filter(both)
        >>> keep("a cat"), keep("a cat and a dog")
        (True, False)
    """
    if where_document is None or (isinstance(where_document, Mapping) and not where_document):
        return None
    return _compile(where_document)


def _compile(where: Any) -> TextPredicate:
    if not isinstance(where, Mapping) or len(where) != 1:
        raise FilterError(
            f"a where_document filter is a dict with one operator, got {where!r}",
            hint='e.g. {"$contains": "hello"}; combine several with $and / $or',
        )
    ((op, operand),) = where.items()
    if op in ("$contains", "$not_contains"):
        if not isinstance(operand, str) or not operand:
            raise FilterError(f"{op} takes a non-empty string, got {operand!r}")
        if op == "$contains":
            return lambda text: operand in text
        return lambda text: operand not in text
    if op in ("$and", "$or"):
        if not isinstance(operand, list) or not operand:
            raise FilterError(f"{op} takes a non-empty list of filters, got {operand!r}")
        parts = [_compile(sub) for sub in operand]
        if op == "$and":
            return lambda text: all(p(text) for p in parts)
        return lambda text: any(p(text) for p in parts)
    raise FilterError(
        f"unknown where_document operator {op!r}", hint="supported: " + ", ".join(_OPS)
    )
