"""The store's filters are a translation into the core's ``where`` dialect, and they keep
LangGraph's meaning: checked on random items and filters against LangGraph's InMemoryStore."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore

from magnetic_core.errors import FilterError
from magnetic_langchain.store.filters import compile_value_filter, to_where

_numbers = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -1.5, 2.0]))
_words = st.text(alphabet="ab", max_size=2)
# Numbers are always present (InMemoryStore's float(None) raises on a missing one); words
# and nested objects may be missing. Bools are left out: InMemoryStore's Python
# comparison has True == 1, which the JSON stores (and this one) do not.
items = st.fixed_dictionaries(
    {"n": _numbers, "m": st.fixed_dictionaries({"n": _numbers}, optional={"s": _words})},
    optional={"s": _words, "l": st.lists(st.integers(0, 2), max_size=2)},
)
_order = st.sampled_from(["$gt", "$gte", "$lt", "$lte"])
_numeric = st.one_of(
    _numbers,
    st.dictionaries(st.sampled_from(["$eq", "$ne"]), _numbers, min_size=1),
    st.dictionaries(_order, _numbers, min_size=1, max_size=2),
)
_textual = st.one_of(_words, st.dictionaries(st.sampled_from(["$eq", "$ne"]), _words, min_size=1))
filters = st.fixed_dictionaries(
    {},
    optional={
        "n": _numeric,
        "s": _textual,
        "l": st.lists(st.integers(0, 2), max_size=2),
        "m": st.fixed_dictionaries({}, optional={"n": _numeric, "s": _textual}),
    },
).filter(lambda f: f.get("m") != {})


@settings(max_examples=150, deadline=None)
@given(st.lists(items, min_size=1, max_size=6), filters)
def test_the_translation_matches_langgraphs_own_store(values: list[dict[str, Any]], flt):
    reference = InMemoryStore()
    for i, value in enumerate(values):
        reference.put(("t",), str(i), value)
    expected = {item.key for item in reference.search(("t",), filter=flt, limit=100)}
    predicate = compile_value_filter(flt)
    ours = {str(i) for i, v in enumerate(values) if predicate is None or predicate(v)}
    assert ours == expected, to_where(flt)


@settings(max_examples=50, deadline=None)
@given(items, _numeric)
def test_a_dotted_key_means_the_nested_object(value: dict[str, Any], condition: Any):
    # Our extension (the SQL stores' JSON paths); InMemoryStore has no dotted keys.
    dotted, nested = (
        compile_value_filter({"m.n": condition}),
        compile_value_filter({"m": {"n": condition}}),
    )
    assert dotted is not None and nested is not None
    assert dotted(value) == nested(value)


def test_keys_become_paths_and_operators_core_conditions():
    assert to_where({"a.b": 1, "c": {"d": {"$ne": "x"}}}) == {
        "$and": [{("a", "b"): {"$eq": 1}}, {("c", "d"): {"$ne": "x"}}]
    }
    assert to_where({}) is None and to_where(None) is None


@pytest.mark.parametrize(
    ("flt", "fragment"),
    [
        ({"v": {"$regex": "x"}}, r"unknown filter operator '\$regex'.*supported"),
        ({"v": {"$gt": "many"}}, r"\$gt on 'v' takes a number"),
        ({"$and": [{"v": 1}]}, "cannot stand at the top"),
        ({"meta": {}}, "empty dict"),
        (["v"], "must be a dict"),
    ],
)
def test_what_langgraph_does_not_define_is_refused_clearly(flt: Any, fragment: str):
    with pytest.raises(FilterError, match=fragment):
        compile_value_filter(flt)
