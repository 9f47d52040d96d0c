"""Metadata filters in Chroma's ``where`` syntax, validated once and evaluated in memory.

Supported: ``{"field": value}`` (equality), ``{"field": {"$op": value}}`` with
``$eq $ne $gt $gte $lt $lte $in $nin``, and ``{"$and": [...]}`` / ``{"$or": [...]}``.
Several fields in one dict are combined with AND. ``$and`` / ``$or`` nest at most
:data:`~magnetic_core.validators.MAX_DEPTH` (32) levels deep. A callable taking the
metadata dict and returning a bool is accepted as a ready-made predicate (adapters
translate richer filter languages, such as LlamaIndex's, into one).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from magnetic_core.errors import FilterError
from magnetic_core.validators import MAX_DEPTH

__all__ = ["Predicate", "compile_filter"]

Predicate = Callable[[Mapping[str, Any]], bool]

_MISSING = object()


def _ordered(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def compare(value: Any, operand: Any) -> bool:
        if value is _MISSING or isinstance(value, bool) != isinstance(operand, bool):
            return False
        try:
            return bool(op(value, operand))
        except TypeError:
            return False

    return compare


def _eq(value: Any, operand: Any) -> bool:
    if value is _MISSING:
        return False
    # True == 1 in Python; a filter on a bool field must not match the integer 1.
    if isinstance(value, bool) or isinstance(operand, bool):
        return isinstance(value, bool) and isinstance(operand, bool) and value == operand
    return bool(value == operand)


def _in(value: Any, operand: Any) -> bool:
    return any(_eq(value, o) for o in operand)


_FIELD_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": _eq,
    "$ne": lambda v, o: not _eq(v, o),
    "$gt": _ordered(operator.gt),
    "$gte": _ordered(operator.ge),
    "$lt": _ordered(operator.lt),
    "$lte": _ordered(operator.le),
    "$in": _in,
    "$nin": lambda v, o: not _in(v, o),
}
_LIST_OPS = frozenset({"$in", "$nin"})
_ORDER_OPS = frozenset({"$gt", "$gte", "$lt", "$lte"})


def compile_filter(where: Mapping[str, Any] | Predicate | None) -> Predicate | None:
    """Validate ``where`` and return a predicate over a metadata dict (None for no filter).

    A callable ``where`` is already a predicate and is returned unchanged.

    Raises:
        FilterError: an unknown operator, or an operand of the wrong type.

    Example:
        >>> p = compile_filter({"$and": [{"topic": "ai"}, {"year": {"$gte": 2020}}]})
        >>> p({"topic": "ai", "year": 2024}), p({"topic": "ai", "year": 2019})
        (True, False)
    """
    if where is None:
        return None
    if callable(where) and not isinstance(where, Mapping):
        return where
    if not isinstance(where, Mapping):
        raise FilterError(
            f"a filter must be a dict, got {type(where).__name__}",
            hint='use Chroma syntax, e.g. {"topic": "ai"} or {"year": {"$gte": 2020}}',
        )
    if not where:
        return None
    return _compile(where, 0)


def _compile(where: Mapping[str, Any], depth: int) -> Predicate:
    """``depth``: how many ``$and`` / ``$or`` enclose ``where``."""
    parts: list[Predicate] = []
    for key, value in where.items():
        if not isinstance(key, str):
            raise FilterError(f"filter keys must be strings, got {key!r}")
        if key in ("$and", "$or"):
            parts.append(_compile_logical(key, value, depth))
        elif key.startswith("$"):
            raise FilterError(
                f"unknown filter operator {key!r}",
                hint="logical operators are $and and $or; field operators are "
                + ", ".join(sorted(_FIELD_OPS)),
            )
        else:
            parts.append(_compile_field(key, value))
    if len(parts) == 1:
        return parts[0]
    return lambda meta: all(p(meta) for p in parts)


def _compile_logical(key: str, value: Any, depth: int) -> Predicate:
    if depth >= MAX_DEPTH:
        raise FilterError(
            f"the filter nests $and/$or more than {MAX_DEPTH} levels deep",
            hint="flatten it: one $and or $or takes any number of conditions",
        )
    if not isinstance(value, list) or not value:
        raise FilterError(f"{key} takes a non-empty list of filters, got {value!r}")
    subs = []
    for sub in value:
        if not isinstance(sub, Mapping) or not sub:
            raise FilterError(f"each filter inside {key} must be a non-empty dict, got {sub!r}")
        subs.append(_compile(sub, depth + 1))  # bounded by MAX_DEPTH above
    if key == "$and":
        return lambda meta: all(p(meta) for p in subs)
    return lambda meta: any(p(meta) for p in subs)


def _compile_field(field: str, condition: Any) -> Predicate:
    if isinstance(condition, Mapping):
        if len(condition) != 1:
            raise FilterError(
                f"the condition on {field!r} must have exactly one operator, got {condition!r}",
                hint=f'combine several with $and: {{"$and": [{{"{field}": ...}}, ...]}}',
            )
        ((op, operand),) = condition.items()
    else:
        op, operand = "$eq", condition
    if op not in _FIELD_OPS:
        raise FilterError(
            f"unknown filter operator {op!r} on field {field!r}",
            hint="supported operators: " + ", ".join(sorted(_FIELD_OPS)),
        )
    if op in _LIST_OPS:
        if not isinstance(operand, (list, tuple)):
            raise FilterError(f"{op} on {field!r} takes a list, got {operand!r}")
        operand = list(operand)
    elif op in _ORDER_OPS and (
        isinstance(operand, bool) or not isinstance(operand, (int, float, str))
    ):
        raise FilterError(f"{op} on {field!r} takes a number or string, got {operand!r}")
    test = _FIELD_OPS[op]

    def predicate(meta: Mapping[str, Any]) -> bool:
        return test(meta.get(field, _MISSING), operand)

    return predicate
