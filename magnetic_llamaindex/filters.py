"""Translate LlamaIndex ``MetadataFilters`` into a predicate over a cell's metadata.

Every :class:`~llama_index.core.vector_stores.types.FilterOperator` and
:class:`~llama_index.core.vector_stores.types.FilterCondition` is supported, nested filters
included. The translation is a few small pure functions around one operator table; anything
not in the table raises a :class:`~magnetic_core.errors.FilterError` naming it.

Semantics (they follow LlamaIndex's in-memory ``SimpleVectorStore`` where it defines them):

* a missing key and a ``None`` value behave alike: only ``NE``, ``NIN`` and ``IS_EMPTY``
  match them;
* ``IS_EMPTY`` matches a missing key, ``None``, ``""``, ``[]`` and ``()``;
* ``EQ`` never equates a bool with a number (``True == 1`` in Python, not here);
* ordered comparisons (``GT``, ``GTE``, ``LT``, ``LTE``) between incomparable types are false;
* ``IN`` / ``NIN``: the stored scalar is (not) one of the given values;
* ``CONTAINS`` / ``ANY`` / ``ALL``: the stored value is read as a set of items (a list or
  tuple is its items, a scalar is itself) holding the value / any / all of the values;
* ``TEXT_MATCH`` is a substring test on string values, ``TEXT_MATCH_INSENSITIVE`` ignores case;
* ``NOT`` matches when none of its filters match (as in ``SimpleVectorStore``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from magnetic_core.errors import FilterError
from magnetic_core.filters import Predicate

__all__ = ["OPERATORS", "all_of", "to_predicate"]

Test = Callable[[Any, Any], bool]


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _equal(value: Any, operand: Any) -> bool:
    if _is_bool(value) or _is_bool(operand):
        return _is_bool(value) and _is_bool(operand) and value == operand
    if isinstance(value, (list, tuple)) and isinstance(operand, (list, tuple)):
        return len(value) == len(operand) and all(map(_equal, value, operand))
    return bool(value == operand)


def _ordered(compare: Callable[[Any, Any], Any]) -> Test:
    def test(value: Any, operand: Any) -> bool:
        if value is None or _is_bool(value):
            return False
        try:
            return bool(compare(value, operand))
        except TypeError:  # e.g. a string field compared with a number
            return False

    return test


def _items(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _one_of(value: Any, operand: Any) -> bool:
    return any(_equal(value, o) for o in operand)


def _contains(value: Any, operand: Any) -> bool:
    return any(_equal(item, operand) for item in _items(value))


def _text_match(value: Any, operand: Any) -> bool:
    return isinstance(value, str) and operand in value


def _text_match_insensitive(value: Any, operand: Any) -> bool:
    return isinstance(value, str) and operand.casefold() in value.casefold()


def _is_empty(value: Any, operand: Any) -> bool:
    return value is None or (isinstance(value, (str, list, tuple)) and len(value) == 0)


OPERATORS: dict[FilterOperator, Test] = {
    FilterOperator.EQ: _equal,
    FilterOperator.NE: lambda v, o: not _equal(v, o),
    FilterOperator.GT: _ordered(operator.gt),
    FilterOperator.GTE: _ordered(operator.ge),
    FilterOperator.LT: _ordered(operator.lt),
    FilterOperator.LTE: _ordered(operator.le),
    FilterOperator.IN: _one_of,
    FilterOperator.NIN: lambda v, o: not _one_of(v, o),
    FilterOperator.ANY: lambda v, o: any(_contains(v, x) for x in o),
    FilterOperator.ALL: lambda v, o: all(_contains(v, x) for x in o),
    FilterOperator.CONTAINS: _contains,
    FilterOperator.TEXT_MATCH: _text_match,
    FilterOperator.TEXT_MATCH_INSENSITIVE: _text_match_insensitive,
    FilterOperator.IS_EMPTY: _is_empty,
}
"""Each operator's test of ``(stored value, filter value)``; the single source of truth."""

# The operators a missing key (or a None value) satisfies; every other one fails on it.
_MATCH_MISSING = frozenset({FilterOperator.NE, FilterOperator.NIN, FilterOperator.IS_EMPTY})

# What each operator needs as its filter value: a description and a check.
_SCALAR = (int, float, str)
_OPERAND_RULES: dict[FilterOperator, tuple[str, Callable[[Any], bool]]] = {
    **{
        op: ("a number or a string", lambda o: isinstance(o, _SCALAR) and not _is_bool(o))
        for op in (FilterOperator.GT, FilterOperator.GTE, FilterOperator.LT, FilterOperator.LTE)
    },
    **{
        op: ("a list of values", lambda o: isinstance(o, list))
        for op in (FilterOperator.IN, FilterOperator.NIN, FilterOperator.ANY, FilterOperator.ALL)
    },
    FilterOperator.EQ: ("a value (use IS_EMPTY to find missing values)", lambda o: o is not None),
    FilterOperator.NE: ("a value (use IS_EMPTY to find missing values)", lambda o: o is not None),
    FilterOperator.CONTAINS: ("a single value", lambda o: isinstance(o, _SCALAR)),
    FilterOperator.TEXT_MATCH: ("a string", lambda o: isinstance(o, str)),
    FilterOperator.TEXT_MATCH_INSENSITIVE: ("a string", lambda o: isinstance(o, str)),
}


def to_predicate(filters: MetadataFilters | None) -> Predicate | None:
    """Translate LlamaIndex filters into a predicate over a metadata dict.

    Args:
        filters: the filters of a query, ``get_nodes`` or ``delete_nodes`` call.

    Returns:
        A function of a metadata mapping returning whether it matches, or None when there
        is nothing to filter on.

    Raises:
        FilterError: an unsupported operator or condition, or a filter value of the wrong
            type for its operator (the message names the key and the operator).

    Example:
        >>> from llama_index.core.vector_stores import MetadataFilter, MetadataFilters
        >>> match = to_predicate(MetadataFilters(filters=[
        ...     MetadataFilter(key="year", value=2020, operator=">="),
        ...     MetadataFilter(key="tags", value=["ai", "ml"], operator="any"),
        ... ]))
        >>> match({"year": 2024, "tags": ["ml"]}), match({"year": 2024, "tags": ["db"]})
        (True, False)
    """
    if filters is None:
        return None
    if not isinstance(filters, MetadataFilters):
        raise FilterError(
            f"filters must be MetadataFilters, got {type(filters).__name__}",
            hint="wrap them: MetadataFilters(filters=[MetadataFilter(...), ...])",
        )
    if not filters.filters:
        return None
    return _group(filters)


def all_of(*predicates: Predicate | None) -> Predicate | None:
    """The conjunction of the given predicates, skipping None (None when none are left).

    Example:
        >>> both = all_of(lambda m: m["a"] == 1, None, lambda m: m["b"] == 2)
        >>> both({"a": 1, "b": 2}), both({"a": 1, "b": 3})
        (True, False)
    """
    parts = [p for p in predicates if p is not None]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return lambda meta: all(p(meta) for p in parts)


def _group(filters: MetadataFilters) -> Predicate:
    parts = [_node(f) for f in filters.filters]
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.AND:
        return lambda meta: all(p(meta) for p in parts)
    if condition == FilterCondition.OR:
        return lambda meta: any(p(meta) for p in parts)
    if condition == FilterCondition.NOT:
        return lambda meta: not any(p(meta) for p in parts)
    raise FilterError(
        f"unsupported filter condition {condition!r}",
        hint="use FilterCondition.AND, OR or NOT",
    )


def _node(item: MetadataFilter | MetadataFilters) -> Predicate:
    if isinstance(item, MetadataFilters):
        if not item.filters:
            raise FilterError(
                "a nested MetadataFilters holds no filters",
                hint="remove it, or give it at least one MetadataFilter",
            )
        return _group(item)
    if isinstance(item, MetadataFilter):
        return _leaf(item)
    raise FilterError(
        f"cannot filter with {type(item).__name__}",
        hint="use MetadataFilter or a nested MetadataFilters",
    )


def _leaf(item: MetadataFilter) -> Predicate:
    key, op, operand = item.key, item.operator, item.value
    test = OPERATORS.get(op)
    if test is None:
        raise FilterError(
            f"unsupported filter operator {op!r} on key {key!r}",
            hint="supported operators: " + ", ".join(o.name for o in OPERATORS),
        )
    rule = _OPERAND_RULES.get(op)
    if rule is not None and not rule[1](operand):
        raise FilterError(
            f"{op.name} on key {key!r} takes {rule[0]}, got {operand!r}",
            hint=f"MetadataFilter(key={key!r}, operator={op.name}, value=...)",
        )

    when_missing = op in _MATCH_MISSING

    def predicate(meta: Mapping[str, Any]) -> bool:
        value = meta.get(key)  # a missing key reads as None
        return when_missing if value is None else test(value, operand)

    return predicate
