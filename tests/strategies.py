"""Hypothesis strategies shared by the property tests: metadata records and ``where`` filters.

Like Chroma's ``chromadb/test/property/strategies.py``: one place that knows what a stored
record and a filter look like, so each property test draws from the same space. Records
keep a few keys with mixed types (bools beside ints, ``None``, lists with bools in them) to
reach the corners where evaluators disagree; filters cover every operator of
:mod:`magnetic_core.filters`, nested logic included.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

KEYS = ("n", "s", "b", "tags", "none")
"""The metadata keys records and filters draw from (filters also name an absent key)."""

scalars = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([0.5, -1.5, 2.0]),
    st.booleans(),
    st.text(alphabet="abAB", max_size=3),
)
"""The scalar values a metadata field holds (small domains, so filters often hit)."""

values = st.one_of(scalars, st.none(), st.lists(scalars, max_size=3))
"""A stored metadata value: a scalar, None, or a list of scalars."""

records = st.dictionaries(st.sampled_from(KEYS), values, max_size=len(KEYS))
"""One cell's metadata: some of :data:`KEYS`, each with any :data:`values` value."""

_fields = st.sampled_from((*KEYS, "absent"))
_words = st.text(alphabet="abAB", max_size=2)
_orderable = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, 2.0]), _words)
_lists = st.lists(st.one_of(scalars, st.none()), max_size=3)

_OPERANDS: dict[str, st.SearchStrategy[Any]] = {
    "$eq": values,
    "$ne": values,
    "$gt": _orderable,
    "$gte": _orderable,
    "$lt": _orderable,
    "$lte": _orderable,
    "$in": _lists,
    "$nin": _lists,
    "$contains": scalars,
    "$not_contains": scalars,
    "$contains_any": _lists,
    "$contains_all": _lists,
    "$text_match": _words,
    "$text_match_insensitive": _words,
    "$is_empty": st.booleans(),
}
"""A strategy for the operand of every field operator of the dialect."""


@st.composite
def field_conditions(draw: st.DrawFn) -> dict[str, Any]:
    """``{"field": {"$op": operand}}``, or the shorthand ``{"field": value}`` for ``$eq``."""
    field = draw(_fields)
    op = draw(st.sampled_from(sorted(_OPERANDS)))
    operand = draw(_OPERANDS[op])
    if op == "$eq" and not isinstance(operand, dict) and draw(st.booleans()):
        return {field: operand}
    return {field: {op: operand}}


def _logical(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(
            lambda op, subs: {op: subs},
            st.sampled_from(["$and", "$or", "$not"]),
            st.lists(children, min_size=1, max_size=3),
        ),
        st.builds(lambda sub: {"$not": sub}, children),  # $not also takes one dict
        # Several fields in one dict are ANDed.
        st.builds(lambda a, b: {**a, **b}, children, children).filter(lambda d: len(d) > 1),
    )


wheres = st.recursive(field_conditions(), _logical, max_leaves=8)
"""A ``where`` filter: field conditions nested in ``$and`` / ``$or`` / ``$not``."""
