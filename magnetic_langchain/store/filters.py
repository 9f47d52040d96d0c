"""LangGraph store filters (``{"field": value}``, ``$eq $ne $gt $gte $lt $lte``) as predicates.

LangGraph filters match an item's value the way its JSONB-backed stores do: a plain value is
an exact match (lists element by element), a dict without operators matches a nested object
key by key, a dict of ``$``-operators compares the value. Dotted keys (``"a.b"``) reach into
nested objects too. Several entries are combined with AND.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from magnetic_core.errors import FilterError

__all__ = ["ValuePredicate", "compile_value_filter"]

ValuePredicate = Callable[[Mapping[str, Any]], bool]

_MISSING = object()

_ORDER: dict[str, Callable[[float, float], bool]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}
OPERATORS = ("$eq", "$ne", *_ORDER)


def compile_value_filter(filter: Mapping[str, Any] | None) -> ValuePredicate | None:
    """Validate a LangGraph ``filter`` and return a predicate over an item's value.

    Raises:
        FilterError: a filter that is not a dict, or an unknown operator.

    Example:
        >>> p = compile_value_filter({"score": {"$gt": 3}, "meta": {"lang": "en"}})
        >>> p({"score": 4, "meta": {"lang": "en", "n": 1}}), p({"score": 2, "meta": {"lang": "en"}})
        (True, False)
    """
    if filter is None:
        return None
    if not isinstance(filter, Mapping):
        raise FilterError(
            f"a store filter must be a dict, got {type(filter).__name__}",
            hint='e.g. {"kind": "fact"} or {"score": {"$gte": 3}}',
        )
    if not filter:
        return None
    tests = [(_path(key), _compile(value, key)) for key, value in filter.items()]

    def predicate(value: Mapping[str, Any]) -> bool:
        return all(test(_lookup(value, path)) for path, test in tests)

    return predicate


def _path(key: Any) -> tuple[str, ...]:
    if not isinstance(key, str) or not key:
        raise FilterError(f"filter keys must be non-empty strings, got {key!r}")
    if key.startswith("$"):
        raise FilterError(
            f"operator {key!r} cannot stand at the top of a filter",
            hint='put it under a field: {"field": {"$gt": 1}}',
        )
    return tuple(key.split("."))


def _lookup(value: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _compile(condition: Any, where: str) -> Callable[[Any], bool]:
    if isinstance(condition, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in condition):
            ops = [_operator(op, operand, where) for op, operand in condition.items()]
            return lambda v: all(test(v) for test in ops)
        nested = {k: _compile(c, f"{where}.{k}") for k, c in condition.items()}
        return lambda v: (
            isinstance(v, Mapping) and all(test(v.get(k, _MISSING)) for k, test in nested.items())
        )
    if isinstance(condition, (list, tuple)):
        items = [_compile(c, f"{where}[{i}]") for i, c in enumerate(condition)]
        return lambda v: (
            isinstance(v, (list, tuple))
            and len(v) == len(items)
            and all(test(x) for test, x in zip(items, v))
        )
    return lambda v: v is not _MISSING and _same(v, condition)


def _same(value: Any, operand: Any) -> bool:
    # JSON has no 1 == true: a filter on a boolean must not match the number 1.
    if isinstance(value, bool) or isinstance(operand, bool):
        return isinstance(value, bool) and isinstance(operand, bool) and value == operand
    return bool(value == operand)


def _operator(op: Any, operand: Any, where: str) -> Callable[[Any], bool]:
    if op == "$eq":
        return lambda v: v is not _MISSING and _same(v, operand)
    if op == "$ne":
        return lambda v: not (v is not _MISSING and _same(v, operand))
    if op in _ORDER:
        bound = _number(operand)
        if bound is None:
            raise FilterError(f"{op} on {where!r} takes a number, got {operand!r}")
        compare = _ORDER[op]
        return lambda v: (n := _number(v)) is not None and compare(n, bound)
    raise FilterError(
        f"unknown filter operator {op!r} on {where!r}",
        hint="supported operators: " + ", ".join(OPERATORS),
    )


def _number(value: Any) -> float | None:
    """A JSON number (or numeric string, as Postgres' casts accept) as a float, else None."""
    if isinstance(value, bool) or value is _MISSING or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None
