"""Translate LlamaIndex ``MetadataFilters`` into the core's ``where`` dialect.

A pure translator, as LlamaIndex's own Chroma and Qdrant stores are: every
:class:`~llama_index.core.vector_stores.types.FilterOperator` maps to one operator of
:mod:`magnetic_core.filters` (the one evaluator), every
:class:`~llama_index.core.vector_stores.types.FilterCondition` to ``$and`` / ``$or`` /
``$not``, nested filters included. Anything not in the table, and a filter value of the
wrong type for its operator, raises a :class:`~magnetic_core.errors.FilterError` naming the
key and the LlamaIndex operator.

The semantics follow LlamaIndex's in-memory ``SimpleVectorStore`` where it defines them
(checked by a property test against it): a missing key and a ``None`` value behave alike
(only ``NE``, ``NIN`` and ``IS_EMPTY`` match them), ``EQ`` never equates a bool with a
number, ``CONTAINS`` / ``ANY`` / ``ALL`` read the stored value as a set of items,
``TEXT_MATCH`` is a substring test, ``NOT`` matches when none of its filters match.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from magnetic_core.errors import FilterError
from magnetic_core.filters import Predicate, compile_filter

__all__ = ["CONDITIONS", "OPERATORS", "to_predicate", "to_where"]

OPERATORS: dict[FilterOperator, str] = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
    FilterOperator.ANY: "$contains_any",
    FilterOperator.ALL: "$contains_all",
    FilterOperator.CONTAINS: "$contains",
    FilterOperator.TEXT_MATCH: "$text_match",
    FilterOperator.TEXT_MATCH_INSENSITIVE: "$text_match_insensitive",
    FilterOperator.IS_EMPTY: "$is_empty",
}
"""Each LlamaIndex operator's operator in the core's ``where`` dialect."""

CONDITIONS: dict[FilterCondition, str] = {
    FilterCondition.AND: "$and",
    FilterCondition.OR: "$or",
    FilterCondition.NOT: "$not",
}
"""Each LlamaIndex condition's logical operator in the core's ``where`` dialect."""

# What each operator needs as its filter value: a description and a check.
_SCALAR = (int, float, str)
_OPERAND_RULES: dict[FilterOperator, tuple[str, Callable[[Any], bool]]] = {
    **{
        op: ("a number or a string", lambda o: isinstance(o, _SCALAR) and not isinstance(o, bool))
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


def to_where(filters: MetadataFilters | None) -> dict[str, Any] | None:
    """Translate LlamaIndex filters into a core ``where`` dict (None: nothing to filter on).

    Raises:
        FilterError: an unsupported operator or condition, or a filter value of the wrong
            type for its operator (the message names the key and the operator).

    Example:
        >>> from llama_index.core.vector_stores import MetadataFilter, MetadataFilters
        >>> to_where(MetadataFilters(filters=[
        ...     MetadataFilter(key="year", value=2020, operator=">="),
        ...     MetadataFilter(key="tags", value=["ai", "ml"], operator="any"),
        ... ]))
        {'$and': [{'year': {'$gte': 2020}}, {'tags': {'$contains_any': ['ai', 'ml']}}]}
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


def to_predicate(filters: MetadataFilters | None) -> Predicate | None:
    """LlamaIndex filters as a predicate over a metadata dict (the core compiles them).

    Example:
        >>> from llama_index.core.vector_stores import MetadataFilter, MetadataFilters
        >>> match = to_predicate(MetadataFilters(filters=[
        ...     MetadataFilter(key="year", value=2020, operator=">="),
        ...     MetadataFilter(key="tags", value=["ai", "ml"], operator="any"),
        ... ]))
        >>> match({"year": 2024, "tags": ["ml"]}), match({"year": 2024, "tags": ["db"]})
        (True, False)
    """
    return compile_filter(to_where(filters))


def _group(filters: MetadataFilters) -> dict[str, Any]:
    condition = filters.condition or FilterCondition.AND
    logical = CONDITIONS.get(condition)
    if logical is None:
        raise FilterError(
            f"unsupported filter condition {condition!r}",
            hint="use FilterCondition.AND, OR or NOT",
        )
    return {logical: [_node(f) for f in filters.filters]}


def _node(item: MetadataFilter | MetadataFilters) -> dict[str, Any]:
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


def _leaf(item: MetadataFilter) -> dict[str, Any]:
    key, op, operand = item.key, item.operator, item.value
    target = OPERATORS.get(op)
    if target is None:
        raise FilterError(
            f"unsupported filter operator {op!r} on key {key!r}",
            hint="supported operators: " + ", ".join(o.name for o in OPERATORS),
        )
    if key.startswith("$"):
        raise FilterError(
            f"cannot filter on key {key!r}: a key starting with '$' reads as an operator",
            hint="rename the metadata key",
        )
    rule = _OPERAND_RULES.get(op)
    if rule is not None and not rule[1](operand):
        raise FilterError(
            f"{op.name} on key {key!r} takes {rule[0]}, got {operand!r}",
            hint=f"MetadataFilter(key={key!r}, operator={op.name}, value=...)",
        )
    value: Any = operand
    if op == FilterOperator.IS_EMPTY:
        value = True
    elif op in (FilterOperator.IN, FilterOperator.NIN):
        # A None value reads as missing here: IN never matches it, NIN always does.
        value = [o for o in operand if o is not None]  # type: ignore[union-attr]
    return {key: {target: value}}
