"""Filter translation agrees with LlamaIndex's own in-memory filter where both define a result.

The reference is ``llama_index.core.vector_stores.utils.build_metadata_filter_fn`` (used by
SimpleVectorStore). It handles flat filter lists only and raises on mixed-type comparisons,
so the generated metadata keeps one type per key: ``n`` ints, ``s`` strings, ``tags`` lists.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from llama_index.core.vector_stores.utils import build_metadata_filter_fn

from magnetic_llamaindex.filters import to_predicate

words = st.text(alphabet="abcAB", min_size=0, max_size=3)
ints = st.integers(-3, 3)


def maybe(strategy):
    """A value, None, or a missing key (drawn as the sentinel ``...``)."""
    return st.one_of(strategy, st.none(), st.just(...))


metadata = st.fixed_dictionaries(
    {"n": maybe(ints), "s": maybe(words), "tags": maybe(st.lists(words, max_size=3))}
).map(lambda d: {k: v for k, v in d.items() if v is not ...})

OPERANDS = {
    "n": {
        FilterOperator.EQ: ints,
        FilterOperator.NE: ints,
        FilterOperator.GT: ints,
        FilterOperator.GTE: ints,
        FilterOperator.LT: ints,
        FilterOperator.LTE: ints,
        FilterOperator.IN: st.lists(ints, max_size=3),
        FilterOperator.NIN: st.lists(ints, max_size=3),
        FilterOperator.IS_EMPTY: st.none(),
    },
    "s": {
        FilterOperator.EQ: words,
        FilterOperator.NE: words,
        FilterOperator.LT: words,
        FilterOperator.GTE: words,
        FilterOperator.TEXT_MATCH: words,
        FilterOperator.TEXT_MATCH_INSENSITIVE: words,
        FilterOperator.IN: st.lists(words, max_size=3),
        FilterOperator.IS_EMPTY: st.none(),
    },
    "tags": {
        FilterOperator.CONTAINS: words,
        FilterOperator.ANY: st.lists(words, max_size=3),
        FilterOperator.ALL: st.lists(words, max_size=3),
        FilterOperator.IS_EMPTY: st.none(),
    },
}


@st.composite
def leaf(draw):
    key = draw(st.sampled_from(sorted(OPERANDS)))
    op = draw(st.sampled_from(sorted(OPERANDS[key], key=lambda o: o.name)))
    return MetadataFilter(key=key, value=draw(OPERANDS[key][op]), operator=op)


flat_filters = st.builds(
    lambda filters, condition: MetadataFilters(filters=filters, condition=condition),
    st.lists(leaf(), min_size=1, max_size=3),
    st.sampled_from(list(FilterCondition)),
)


@settings(max_examples=300, deadline=None)
@given(filters=flat_filters, meta=metadata)
def test_to_predicate_agrees_with_llamaindex_simple_filter(filters, meta):
    reference = build_metadata_filter_fn(lambda _: meta, filters)
    assert to_predicate(filters)(meta) == reference("node")
