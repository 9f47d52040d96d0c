"""LangGraph store filters translated into the core's ``where`` dialect (evaluated there).

LangGraph filters match an item's value the way its JSONB-backed stores do: a plain value is
an exact match (lists element by element), a dict without operators matches a nested object
key by key, a dict of ``$``-operators (``$eq $ne $gt $gte $lt $lte``) compares the value.
Dotted keys (``"a.b"``) reach into nested objects too. Several entries are combined with AND.

This module only translates, as the LlamaIndex filters do: every key becomes a path of keys
(``("meta", "lang")``, which the core's :func:`~magnetic_core.filters.compile_filter` reads
as a path into nested dicts), every operator one core condition, and the core evaluates
them. A bool never equals a number (JSON has no ``1 == true``), and the order operators
compare numbers only (a numeric string operand such as ``"3"`` is read as the number).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from magnetic_core.errors import FilterError
from magnetic_core.filters import Predicate, compile_filter

__all__ = ["OPERATORS", "ValuePredicate", "compile_value_filter", "to_where"]

ValuePredicate = Predicate
"""A test of an item's value (its dict), as the core compiles it."""

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_ORDER = frozenset(OPERATORS[2:])

_Path = tuple[str, ...]


def compile_value_filter(filter: Mapping[str, Any] | None) -> ValuePredicate | None:
    """Validate a LangGraph ``filter`` and return the core's predicate over an item's value.

    Raises:
        FilterError: a filter that is not a dict, or an unknown operator.

    Example:
        >>> p = compile_value_filter({"score": {"$gt": 3}, "meta": {"lang": "en"}})
        >>> p({"score": 4, "meta": {"lang": "en", "n": 1}}), p({"score": 2, "meta": {"lang": "en"}})
        (True, False)
    """
    return compile_filter(to_where(filter))


def to_where(filter: Mapping[str, Any] | None) -> dict[Any, Any] | None:
    """A LangGraph ``filter`` in the core's ``where`` dialect (None for no filter).

    Example:
        >>> for condition in to_where({"meta.lang": "en", "score": {"$gte": 3, "$lt": 5}})["$and"]:
        ...     print(condition)
        {('meta', 'lang'): {'$eq': 'en'}}
        {('score',): {'$gte': 3.0}}
        {('score',): {'$lt': 5.0}}
    """
    if filter is None:
        return None
    if not isinstance(filter, Mapping):
        raise FilterError(
            f"a store filter must be a dict, got {type(filter).__name__}",
            hint='e.g. {"kind": "fact"} or {"score": {"$gte": 3}}',
        )
    conditions: list[dict[Any, Any]] = []
    for key, condition in filter.items():
        conditions += _conditions(_top_path(key), condition)
    if not conditions:
        return None
    return conditions[0] if len(conditions) == 1 else {"$and": conditions}


def _top_path(key: Any) -> _Path:
    if not isinstance(key, str) or not key:
        raise FilterError(f"filter keys must be non-empty strings, got {key!r}")
    if key.startswith("$"):
        raise FilterError(
            f"operator {key!r} cannot stand at the top of a filter",
            hint='put it under a field: {"field": {"$gt": 1}}',
        )
    return tuple(key.split("."))


def _conditions(path: _Path, condition: Any) -> list[dict[Any, Any]]:
    """The core conditions, all to hold, that ``condition`` on ``path`` means."""
    if not isinstance(condition, Mapping):
        return [{path: {"$eq": _operand("$eq", condition, path)}}]
    if any(isinstance(k, str) and k.startswith("$") for k in condition):
        return [{path: {op: _operand(op, v, path)}} for op, v in condition.items()]
    if not condition:
        raise FilterError(
            f"the condition on {'.'.join(path)!r} is an empty dict, which tests nothing",
            hint="leave the key out, or give the nested keys to match",
        )
    out: list[dict[Any, Any]] = []
    for key, sub in condition.items():
        if not isinstance(key, str) or not key:
            raise FilterError(f"filter keys must be non-empty strings, got {key!r}")
        out += _conditions((*path, key), sub)
    return out


def _operand(op: Any, operand: Any, path: _Path) -> Any:
    where = ".".join(path)
    if op not in OPERATORS:
        raise FilterError(
            f"unknown filter operator {op!r} on {where!r}",
            hint="supported operators: " + ", ".join(OPERATORS),
        )
    if op in _ORDER:
        number = _number(operand)
        if number is None:
            raise FilterError(f"{op} on {where!r} takes a number, got {operand!r}")
        return number
    return list(operand) if isinstance(operand, tuple) else operand


def _number(value: Any) -> float | None:
    """A JSON number (or numeric string, as Postgres' casts accept) as a float, else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None
