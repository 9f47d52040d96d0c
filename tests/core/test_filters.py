"""Chroma-style where filters, evaluated in memory."""

from __future__ import annotations

import pytest

from magnetic_core.errors import FilterError
from magnetic_core.filters import compile_filter

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
        ({"$not": [{"topic": "ai"}]}, "unknown filter operator '\\$not'"),
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
