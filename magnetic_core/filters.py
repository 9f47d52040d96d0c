"""Metadata filters in Chroma's ``where`` syntax, validated once and evaluated in memory.

The one filter evaluator of MagneticStorage: the adapters translate their own filter
languages (LlamaIndex's ``MetadataFilters``) into this dialect rather than evaluating them.

Supported: ``{"field": value}`` (equality) and ``{"field": {"$op": value}}`` with

* ``$eq $ne``: equality (a bool never equals a number; lists compare item by item);
* ``$gt $gte $lt $lte``: ordered comparisons (false between incomparable types);
* ``$in $nin``: the stored value is (not) one of a list of values;
* ``$contains``, ``$not_contains``: the stored value, read as a set of items (a list is its
  items, a scalar is itself), holds (does not hold) the value;
* ``$contains_any``, ``$contains_all``: it holds any / all of a list of values;
* ``$text_match``, ``$text_match_insensitive``: a string value contains the given string
  (the second ignoring case);
* ``$is_empty``: ``True`` matches a missing key, ``None``, ``""``, ``[]``; ``False`` the rest;

and the logical ``{"$and": [...]}``, ``{"$or": [...]}`` and ``{"$not": [...]}`` (true when
none of its filters match; a single dict is a list of one). Several fields in one dict are
combined with AND. A field may also be a tuple of keys, a path into nested dicts
(``{("meta", "lang"): "en"}`` tests ``metadata["meta"]["lang"]``; a path that runs into
anything but a dict is missing): the LangGraph store's filters translate into those.
A missing key (or a ``None`` value) matches only ``$ne``, ``$nin``,
``$not_contains`` and ``$is_empty: True`` (and ``$eq``/``$in`` of ``None`` itself).
Logical operators nest at most :data:`~magnetic_core.validators.MAX_DEPTH` (32) levels
deep. A callable taking the metadata dict and returning a bool is accepted as a
ready-made predicate.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from magnetic_core.errors import FilterError
from magnetic_core.validators import MAX_DEPTH

__all__ = ["FIELD_OPERATORS", "LOGICAL_OPERATORS", "Predicate", "compile_filter"]

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
    if isinstance(value, (list, tuple)) and isinstance(operand, (list, tuple)):
        return len(value) == len(operand) and all(map(_eq, value, operand))
    return bool(value == operand)


def _in(value: Any, operand: Any) -> bool:
    return any(_eq(value, o) for o in operand)


def _items(value: Any) -> list[Any]:
    """The stored value as a set of items: a list or tuple is its items, a scalar itself."""
    if value is _MISSING or value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _contains(value: Any, operand: Any) -> bool:
    return any(_eq(item, operand) for item in _items(value))


def _contains_all(value: Any, operand: Any) -> bool:
    # A missing value holds nothing, not even "all of none".
    return value is not _MISSING and value is not None and all(_contains(value, o) for o in operand)


def _text_match(value: Any, operand: Any) -> bool:
    return isinstance(value, str) and operand in value


def _text_match_insensitive(value: Any, operand: Any) -> bool:
    return isinstance(value, str) and operand.casefold() in value.casefold()


def _is_empty(value: Any, operand: Any) -> bool:
    empty = (
        value is _MISSING
        or value is None
        or (isinstance(value, (str, list, tuple)) and len(value) == 0)
    )
    return empty is operand


_FIELD_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": _eq,
    "$ne": lambda v, o: not _eq(v, o),
    "$gt": _ordered(operator.gt),
    "$gte": _ordered(operator.ge),
    "$lt": _ordered(operator.lt),
    "$lte": _ordered(operator.le),
    "$in": _in,
    "$nin": lambda v, o: not _in(v, o),
    "$contains": _contains,
    "$not_contains": lambda v, o: not _contains(v, o),
    "$contains_any": lambda v, o: any(_contains(v, x) for x in o),
    "$contains_all": _contains_all,
    "$text_match": _text_match,
    "$text_match_insensitive": _text_match_insensitive,
    "$is_empty": _is_empty,
}
FIELD_OPERATORS = frozenset(_FIELD_OPS)
"""Every field operator of the dialect."""
LOGICAL_OPERATORS = frozenset({"$and", "$or", "$not"})
"""The logical operators of the dialect."""

_LIST_OPS = frozenset({"$in", "$nin", "$contains_any", "$contains_all"})
_ORDER_OPS = frozenset({"$gt", "$gte", "$lt", "$lte"})
_TEXT_OPS = frozenset({"$text_match", "$text_match_insensitive"})
_SCALAR_OPS = frozenset({"$contains", "$not_contains"})


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
        if isinstance(key, tuple):
            parts.append(_compile_field(_path(key), value))
            continue
        if not isinstance(key, str):
            raise FilterError(f"filter keys must be strings, got {key!r}")
        if key in LOGICAL_OPERATORS:
            parts.append(_compile_logical(key, value, depth))
        elif key.startswith("$"):
            raise FilterError(
                f"unknown filter operator {key!r}",
                hint="logical operators are $and, $or and $not; field operators are "
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
            f"the filter nests $and/$or/$not more than {MAX_DEPTH} levels deep",
            hint="flatten it: one $and or $or takes any number of conditions",
        )
    if key == "$not" and isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list) or not value:
        raise FilterError(f"{key} takes a non-empty list of filters, got {value!r}")
    subs = []
    for sub in value:
        if not isinstance(sub, Mapping) or not sub:
            raise FilterError(f"each filter inside {key} must be a non-empty dict, got {sub!r}")
        subs.append(_compile(sub, depth + 1))  # bounded by MAX_DEPTH above
    if key == "$and":
        return lambda meta: all(p(meta) for p in subs)
    if key == "$not":
        return lambda meta: not any(p(meta) for p in subs)
    return lambda meta: any(p(meta) for p in subs)


def _path(key: tuple[Any, ...]) -> tuple[str, ...]:
    """A field given as a path of keys into nested dicts."""
    if not key or not all(isinstance(part, str) and part for part in key):
        raise FilterError(
            f"a field path must be a tuple of non-empty strings, got {key!r}",
            hint='e.g. {("meta", "lang"): "en"} for metadata["meta"]["lang"]',
        )
    return key


def _lookup(meta: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = meta
    for part in path:
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _compile_field(field: str | tuple[str, ...], condition: Any) -> Predicate:
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
    operand = _check_operand(field, op, operand)
    test = _FIELD_OPS[op]
    if isinstance(field, tuple):
        path = field
        return lambda meta: test(_lookup(meta, path), operand)

    def predicate(meta: Mapping[str, Any]) -> bool:
        return test(meta.get(field, _MISSING), operand)

    return predicate


def _check_operand(field: str | tuple[str, ...], op: str, operand: Any) -> Any:
    """``operand`` if it has the type ``op`` takes (a list comes back as a list)."""
    if op in _LIST_OPS:
        if not isinstance(operand, (list, tuple)):
            raise FilterError(f"{op} on {field!r} takes a list, got {operand!r}")
        return list(operand)
    if op in _ORDER_OPS and (
        isinstance(operand, bool) or not isinstance(operand, (int, float, str))
    ):
        raise FilterError(f"{op} on {field!r} takes a number or string, got {operand!r}")
    if op in _TEXT_OPS and not isinstance(operand, str):
        raise FilterError(f"{op} on {field!r} takes a string, got {operand!r}")
    if op in _SCALAR_OPS and not isinstance(operand, (int, float, str)):
        raise FilterError(f"{op} on {field!r} takes a single value, got {operand!r}")
    if op == "$is_empty" and not isinstance(operand, bool):
        raise FilterError(
            f"$is_empty on {field!r} takes True or False, got {operand!r}",
            hint=f'{{"{field}": {{"$is_empty": true}}}} finds missing or empty values',
        )
    return operand
