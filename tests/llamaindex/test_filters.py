"""Every LlamaIndex FilterOperator and FilterCondition, through the store (sync and async)."""

from __future__ import annotations

import pytest
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)

from magnetic_core.errors import FilterError
from magnetic_llamaindex.filters import OPERATORS, to_predicate
from tests.llamaindex.conftest import node, vec

ROWS = {
    "p1": {"name": "Ada Lovelace", "year": 1843, "score": 9.5, "tags": ["math", "poetry"]},
    "p2": {"name": "Alan Turing", "year": 1936, "score": 9.9, "tags": ["math", "cs"]},
    "p3": {"name": "Grace Hopper", "year": 1952, "score": 8.7, "tags": ["cs"], "note": ""},
    "p4": {"name": "Linus", "year": 1991, "tags": [], "note": None, "flag": True},
    "p5": {"name": "ken", "year": "unknown", "tags": "cs", "note": "kernel", "flag": 1},
}


def f(key, value, op):
    return MetadataFilter(key=key, value=value, operator=op)


def both(*filters, condition=FilterCondition.AND):
    return MetadataFilters(filters=list(filters), condition=condition)


OPERATOR_CASES = {
    FilterOperator.EQ: [(f("year", 1936, "=="), {"p2"}), (f("flag", 1, "=="), {"p5"})],
    FilterOperator.NE: [(f("year", 1936, "!="), {"p1", "p3", "p4", "p5"})],
    FilterOperator.GT: [(f("year", 1936, ">"), {"p3", "p4"}), (f("score", 9.5, ">"), {"p2"})],
    FilterOperator.GTE: [(f("year", 1936, ">="), {"p2", "p3", "p4"})],
    FilterOperator.LT: [(f("year", 1936, "<"), {"p1"}), (f("name", "B", "<"), {"p1", "p2"})],
    FilterOperator.LTE: [(f("score", 9.5, "<="), {"p1", "p3"})],
    FilterOperator.IN: [(f("year", [1843, 1991, 2000], "in"), {"p1", "p4"})],
    FilterOperator.NIN: [(f("year", [1843, 1991], "nin"), {"p2", "p3", "p5"})],
    FilterOperator.ANY: [(f("tags", ["poetry", "cs"], "any"), {"p1", "p2", "p3", "p5"})],
    FilterOperator.ALL: [(f("tags", ["math", "cs"], "all"), {"p2"})],
    FilterOperator.CONTAINS: [(f("tags", "math", "contains"), {"p1", "p2"})],
    FilterOperator.TEXT_MATCH: [(f("name", "ing", "text_match"), {"p2"})],
    FilterOperator.TEXT_MATCH_INSENSITIVE: [
        (f("name", "KEN", "text_match_insensitive"), {"p5"}),
        (f("name", "a", "text_match_insensitive"), {"p1", "p2", "p3"}),
    ],
    FilterOperator.IS_EMPTY: [(f("note", None, "is_empty"), {"p1", "p2", "p3", "p4"})],
}

CONDITION_CASES = {
    "and": (both(f("tags", "cs", "contains"), f("year", 1950, ">")), {"p3"}),
    "or": (
        both(f("year", 1843, "=="), f("note", "kernel", "=="), condition=FilterCondition.OR),
        {"p1", "p5"},
    ),
    "not": (
        both(f("tags", "math", "contains"), f("year", 1991, "=="), condition="not"),
        {"p3", "p5"},
    ),
    "nested and-of-or": (
        both(
            both(f("year", 1900, ">"), f("year", "unknown", "=="), condition="or"),
            f("tags", ["cs"], "any"),
        ),
        {"p2", "p3", "p5"},
    ),
    "not of a nested group": (
        both(both(f("tags", "cs", "contains"), f("score", 9, ">")), condition="not"),
        {"p1", "p3", "p4", "p5"},
    ),
}


@pytest.fixture
async def people(store, call):
    nodes = [node(i, f"about {m['name']}", vec(1, n), m) for n, (i, m) in enumerate(ROWS.items())]
    await call(store, "add", nodes)
    return store


def test_every_operator_has_a_test_and_an_implementation():
    assert set(OPERATOR_CASES) == set(FilterOperator)
    assert set(OPERATORS) == set(FilterOperator)


@pytest.mark.parametrize(
    "flt, expected",
    [
        pytest.param(flt, exp, id=op.name)
        for op, cases in OPERATOR_CASES.items()
        for flt, exp in cases
    ],
)
async def test_operator_selects_the_right_nodes(people, call, flt, expected):
    query = VectorStoreQuery(query_embedding=vec(1), similarity_top_k=10, filters=both(flt))
    assert set((await call(people, "query", query)).ids) == expected
    got = await call(people, "get_nodes", filters=both(flt))
    assert {n.node_id for n in got} == expected


@pytest.mark.parametrize("filters, expected", CONDITION_CASES.values(), ids=CONDITION_CASES)
async def test_conditions_combine_and_nest(people, call, filters, expected):
    query = VectorStoreQuery(query_embedding=vec(1), similarity_top_k=10, filters=filters)
    assert set((await call(people, "query", query)).ids) == expected


async def test_delete_nodes_uses_the_same_filters(people, call):
    await call(people, "delete_nodes", filters=CONDITION_CASES["nested and-of-or"][0])
    assert {n.node_id for n in await call(people, "get_nodes")} == {"p1", "p4"}


async def test_filtered_query_still_returns_k_results_when_k_match(people, call):
    query = VectorStoreQuery(
        query_embedding=vec(0, 1), similarity_top_k=2, filters=both(f("year", 1900, ">"))
    )
    assert (await call(people, "query", query)).ids == ["p4", "p3"]


@pytest.mark.parametrize(
    "flt, fragment",
    [
        (f("year", "1900", "in"), "IN on key 'year' takes a list of values"),
        (f("tags", [1, 2], "contains"), "CONTAINS on key 'tags' takes a single value"),
        (f("name", 3, "text_match"), "TEXT_MATCH on key 'name' takes a string"),
        (f("year", [1, 2], ">"), "GT on key 'year' takes a number or a string"),
        (f("year", None, "=="), "EQ on key 'year'.*IS_EMPTY"),
        (
            MetadataFilter.model_construct(key="name", value="A.*", operator="regex"),
            "unsupported filter operator 'regex' on key 'name'",
        ),
        (MetadataFilters(filters=[]), "nested MetadataFilters holds no filters"),
    ],
)
def test_bad_filters_raise_naming_the_problem(flt, fragment):
    with pytest.raises(FilterError, match=fragment):
        to_predicate(both(flt))


def test_an_unknown_condition_is_refused_by_name():
    weird = MetadataFilters.model_construct(filters=[f("year", 1, "==")], condition="xor")
    with pytest.raises(FilterError, match="unsupported filter condition 'xor'"):
        to_predicate(weird)


def test_filters_must_be_metadata_filters():
    with pytest.raises(FilterError, match="MetadataFilters, got dict"):
        to_predicate({"year": 1936})


async def test_a_bad_filter_is_refused_before_anything_is_deleted(people, call):
    with pytest.raises(FilterError):
        await call(people, "delete_nodes", filters=both(f("year", "x", "in")))
    assert people.memory.count() == len(ROWS)


def test_no_filters_means_no_restriction():
    assert to_predicate(None) is None
    assert to_predicate(MetadataFilters(filters=[])) is None


def test_regression_all_of_no_values_still_fails_on_a_missing_value():
    # Found by the hypothesis comparison with LlamaIndex's own filter (test_filters_reference).
    match = to_predicate(both(f("tags", [], "all")))
    assert match({"tags": ["x"]}) and match({"tags": []})
    assert not match({"tags": None}) and not match({})
