"""Chroma-style where filters, evaluated in memory."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_core.errors import FilterError
from magnetic_core.filters import compile_filter
from tests.strategies import KEYS, records, wheres

DOC = {"topic": "ai", "year": 2024, "score": 0.5, "draft": False, "tags": ["x"]}


@pytest.mark.parametrize(
    "where, expected",
    [
        ({"topic": "ai"}, True),
        ({"topic": "bio"}, False),
        ({"topic": {"$eq": "ai"}}, True),
        ({"topic": {"$ne": "ai"}}, False),
        ({"missing": {"$ne": "ai"}}, True),
        ({"year": {"$gt": 2023}}, True),
        ({"year": {"$gt": 2024}}, False),
        ({"year": {"$gte": 2024}}, True),
        ({"year": {"$lt": 2024}}, False),
        ({"year": {"$lte": 2024}}, True),
        ({"score": {"$lt": 1}}, True),
        ({"topic": {"$in": ["bio", "ai"]}}, True),
        ({"topic": {"$nin": ["bio", "ai"]}}, False),
        ({"$and": [{"topic": "ai"}, {"year": 2024}]}, True),
        ({"$and": [{"topic": "ai"}, {"year": 2020}]}, False),
        ({"$or": [{"topic": "bio"}, {"year": 2024}]}, True),
        ({"$or": [{"topic": "bio"}, {"year": 2020}]}, False),
        ({"topic": "ai", "year": 2020}, False),
        ({"draft": False}, True),
        ({"draft": 0}, False),
        ({"year": {"$gt": "a"}}, False),
        ({"missing": {"$gt": 1}}, False),
        ({"tags": {"$eq": ["x"]}}, True),
        ({"tags": {"$contains": "x"}}, True),
        ({"tags": {"$contains": "y"}}, False),
        ({"topic": {"$contains": "ai"}}, True),  # a scalar is a set of one item
        ({"tags": {"$not_contains": "x"}}, False),
        ({"missing": {"$not_contains": "x"}}, True),
        ({"tags": {"$contains_any": ["y", "x"]}}, True),
        ({"tags": {"$contains_all": ["y", "x"]}}, False),
        ({"tags": {"$contains_all": []}}, True),
        ({"missing": {"$contains_all": []}}, False),  # a missing value holds nothing
        ({"topic": {"$text_match": "a"}}, True),
        ({"topic": {"$text_match": "A"}}, False),
        ({"topic": {"$text_match_insensitive": "A"}}, True),
        ({"year": {"$text_match": "20"}}, False),  # only strings match text
        ({"missing": {"$is_empty": True}}, True),
        ({"topic": {"$is_empty": True}}, False),
        ({"topic": {"$is_empty": False}}, True),
        ({"$not": [{"topic": "bio"}, {"year": 2020}]}, True),
        ({"$not": [{"topic": "ai"}, {"year": 2020}]}, False),
        ({"$not": {"topic": "ai"}}, False),
    ],
)
def test_operators(where, expected):
    predicate = compile_filter(where)
    assert predicate is not None
    assert predicate(DOC) is expected


def test_no_filter_means_no_predicate():
    assert compile_filter(None) is None
    assert compile_filter({}) is None


@pytest.mark.parametrize(
    "where, fragment",
    [
        ({"topic": {"$like": "a%"}}, "unknown filter operator '\\$like'"),
        ({"$nor": [{"topic": "ai"}]}, "unknown filter operator '\\$nor'"),
        ({"topic": {"$text_match": 3}}, "takes a string"),
        ({"tags": {"$contains": ["x"]}}, "takes a single value"),
        ({"tags": {"$contains_all": "x"}}, "takes a list"),
        ({"tags": {"$is_empty": 1}}, "True or False"),
        ({"$not": []}, "non-empty list"),
        ({"$and": {"topic": "ai"}}, "non-empty list"),
        ({"$or": []}, "non-empty list"),
        ({"topic": {"$in": "ai"}}, "takes a list"),
        ({"year": {"$gt": [1]}}, "number or string"),
        ({"year": {"$gt": 1, "$lt": 3}}, "exactly one operator"),
        (["topic"], "must be a dict"),
    ],
)
def test_bad_filters_raise_naming_the_problem(where, fragment):
    with pytest.raises(FilterError, match=fragment):
        compile_filter(where)


def test_a_list_equals_only_a_list_with_equal_items_and_no_bool_equals_a_number():
    # The disagreement the LlamaIndex translation used to have: [1] must not match [True].
    match = compile_filter({"t": {"$eq": [1]}})
    assert match({"t": [1]}) and not match({"t": [True]}) and not match({"t": 1})
    assert compile_filter({"t": {"$in": [True]}})({"t": True})
    assert not compile_filter({"t": {"$in": [True]}})({"t": 1})


# -- the evaluator against a plain reference, on random filters and records -------------

_MISSING = object()


def _same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is bool and type(b) is bool and a == b
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b))
        )
    return a is not _MISSING and a == b


def _less(a, b):
    """a < b when both are numbers (not bools) or both strings; None when incomparable."""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    if numbers or (isinstance(a, str) and isinstance(b, str)):
        return a < b
    return None


def _items(v):
    return [] if v is _MISSING or v is None else v if isinstance(v, list) else [v]


def _field(v, op, o):
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if _less(v, o) is None:
            return False
        return {
            "$gt": _less(o, v),
            "$gte": not _less(v, o),
            "$lt": _less(v, o),
            "$lte": not _less(o, v),
        }[op]
    contains = lambda x: any(_same(i, x) for i in _items(v))  # noqa: E731
    empty = v is _MISSING or v is None or v == "" or v == []
    table = {
        "$eq": lambda: _same(v, o),
        "$ne": lambda: not _same(v, o),
        "$in": lambda: any(_same(v, x) for x in o),
        "$nin": lambda: not any(_same(v, x) for x in o),
        "$contains": lambda: contains(o),
        "$not_contains": lambda: not contains(o),
        "$contains_any": lambda: any(contains(x) for x in o),
        "$contains_all": lambda: bool(_items(v) or v == []) and all(contains(x) for x in o),
        "$text_match": lambda: isinstance(v, str) and o in v,
        "$text_match_insensitive": lambda: isinstance(v, str) and o.lower() in v.lower(),
        "$is_empty": lambda: empty == o,
    }
    return table[op]()


def _reference(where, record):
    results = []
    for key, cond in where.items():
        if key == "$and":
            results.append(all(_reference(w, record) for w in cond))
        elif key == "$or":
            results.append(any(_reference(w, record) for w in cond))
        elif key == "$not":
            subs = [cond] if isinstance(cond, dict) else cond
            results.append(not any(_reference(w, record) for w in subs))
        else:
            ((op, operand),) = cond.items() if isinstance(cond, dict) else [("$eq", cond)]
            results.append(_field(record.get(key, _MISSING), op, operand))
    return all(results)


@settings(max_examples=400, deadline=None)
@given(where=wheres, record=records)
def test_compiled_filter_agrees_with_the_plain_reference(where, record):
    assert compile_filter(where)(record) == _reference(where, record)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A memory holding 40 seeded records with the strategy's keys and value corners."""
    corners = [None, True, False, 0, 1, 0.5, "ab", "A", "", [], [1, True], ["a", "b"], [None]]
    rng = random.Random(7)
    pool = [{k: rng.choice(corners) for k in KEYS if rng.random() < 0.7} for _ in range(40)]
    mem = MagneticMemory(path=str(tmp_path_factory.mktemp("filters")), embedder=HashingEmbedder(16))
    ids = mem.add([f"record {i}" for i in range(len(pool))], metadatas=pool)
    yield mem, dict(zip(ids, pool))
    mem.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(where=wheres)
def test_stored_cells_are_selected_as_the_reference_selects_them(stored, where):
    mem, rows = stored
    expected = {cid for cid, meta in rows.items() if _reference(where, meta)}
    assert {c.id for c in mem.get(filter=where)} == expected


def test_a_tuple_field_is_a_path_into_nested_dicts():
    p = compile_filter({("meta", "lang"): "en", ("meta", "n"): {"$gte": 2}})
    assert p({"meta": {"lang": "en", "n": 3}})
    assert not p({"meta": {"lang": "en", "n": 1}})
    assert not p({"meta": "en"}) and not p({})  # a path through a non-dict is missing
    assert compile_filter({("meta", "lang"): {"$ne": "en"}})({"meta": 5})
    with pytest.raises(FilterError, match="tuple of non-empty strings"):
        compile_filter({("meta", ""): 1})
