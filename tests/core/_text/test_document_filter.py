"""``where_document`` on a cell's text: the same answer as Chroma's own, and clear errors."""

from __future__ import annotations

import chromadb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magnetic_core._text.document_filter import compile_document_filter
from magnetic_core.errors import FilterError

TEXTS = [
    "The cat sat on the mat",
    "a dog and a cat",
    "Dogs bark at night",
    "nothing to see here",
    "CAT in capitals",
    "concatenate the strings",
    "the night is dark and full of cats",
    "",
]
WORDS = ["cat", "Cat", "CAT", "dog", "night", "the", "at", "concat", "zebra", "s", " a "]


@pytest.fixture(scope="module")
def chroma():
    client = chromadb.EphemeralClient()
    name = f"docs-{np.random.default_rng().integers(1 << 30)}"
    collection = client.get_or_create_collection(name, embedding_function=None)
    collection.add(
        ids=[str(i) for i in range(len(TEXTS))],
        embeddings=np.eye(len(TEXTS), dtype=np.float32).tolist(),
        documents=TEXTS,
    )
    yield collection
    client.delete_collection(name)


leaves = st.builds(
    lambda op, word: {op: word},
    st.sampled_from(["$contains", "$not_contains"]),
    st.sampled_from(WORDS),
)
filters = st.recursive(
    leaves,
    lambda inner: st.builds(
        lambda op, parts: {op: parts},
        st.sampled_from(["$and", "$or"]),
        st.lists(inner, min_size=2, max_size=3),
    ),
    max_leaves=6,
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(where=filters)
def test_the_predicate_keeps_what_chroma_keeps(chroma, where):
    keep = compile_document_filter(where)
    assert keep is not None
    ours = {str(i) for i, text in enumerate(TEXTS) if keep(text)}
    theirs = set(chroma.get(where_document=where, include=[])["ids"])
    assert ours == theirs


def test_contains_is_case_sensitive_and_matches_substrings():
    keep = compile_document_filter({"$contains": "cat"})
    assert keep is not None
    assert [keep(t) for t in ("a cat", "concatenate", "CAT", "")] == [True, True, False, False]


@pytest.mark.parametrize("empty", [None, {}])
def test_no_filter_is_none(empty):
    assert compile_document_filter(empty) is None


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ({"$contains": "a", "$not_contains": "b"}, "one operator"),
        ({"$has": "a"}, "unknown where_document operator '\\$has'"),
        ({"$contains": ""}, "non-empty string"),
        ({"$contains": 3}, "non-empty string"),
        ({"$and": []}, "non-empty list"),
        ({"$or": {"$contains": "a"}}, "non-empty list"),
        ({"$and": [{"$contains": "a"}, "b"]}, "one operator, got 'b'"),
        ("cat", "one operator"),
        ({"$or": [{"$and": [{"$regex": "x"}]}]}, "'\\$regex'"),
    ],
)
def test_a_malformed_filter_is_a_filter_error_naming_the_problem(where, message):
    with pytest.raises(FilterError, match=message):
        compile_document_filter(where)


def test_an_unknown_operator_hints_at_the_supported_ones():
    with pytest.raises(FilterError) as info:
        compile_document_filter({"$like": "x"})
    assert info.value.hint == "supported: $contains, $not_contains, $and, $or"
