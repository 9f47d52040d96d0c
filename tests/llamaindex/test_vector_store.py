"""Conformance of MagneticVectorStore, modelled on LangChain's standard VectorStore suite.

Every behaviour runs through the sync method and its async twin (the ``call`` fixture).
"""

from __future__ import annotations

import asyncio
import datetime as dt

import numpy as np
import pytest
from llama_index.core.schema import IndexNode
from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from magnetic_core.errors import DimensionError, FilterError, InvalidInputError, InvalidVectorError
from tests.llamaindex.conftest import DIM, node, unit, vec


def q(embedding, k=10, **kwargs):
    return VectorStoreQuery(query_embedding=embedding, similarity_top_k=k, **kwargs)


@pytest.fixture
def three():
    return [
        node("a", "apples are red", vec(1, 0, 0), {"kind": "fruit", "n": 1}, doc="doc1"),
        node("b", "bananas are yellow", vec(0.8, 0.6, 0), {"kind": "fruit", "n": 2}, doc="doc1"),
        node("c", "cars are fast", vec(0, 0, 1), {"kind": "vehicle", "n": 3}, doc="doc2"),
    ]


async def test_empty_store_returns_nothing(store, call):
    result = await call(store, "query", q(vec(1)))
    assert result.ids == [] and result.nodes == [] and result.similarities == []
    assert await call(store, "get_nodes") == []
    assert await call(store, "get_nodes", ["missing"]) == []


async def test_add_returns_ids_and_nodes_come_back_whole(store, call, three):
    assert await call(store, "add", three) == ["a", "b", "c"]
    got = {n.node_id: n for n in await call(store, "get_nodes", ["a", "b", "c"])}
    for original in three:
        back = got[original.node_id]
        assert type(back) is type(original)
        assert back.text == original.text
        assert back.metadata == original.metadata
        assert back.ref_doc_id == original.ref_doc_id
        assert back.relationships == original.relationships


async def test_index_nodes_come_back_as_index_nodes(store, call):
    sub = IndexNode(id_="i", text="summary of a sub-index", index_id="sub", embedding=vec(1))
    await call(store, "add", [sub])
    (back,) = await call(store, "get_nodes", ["i"])
    assert isinstance(back, IndexNode) and back.index_id == "sub" and back.text == sub.text


async def test_add_nothing_is_a_no_op(store, call):
    assert await call(store, "add", []) == []
    assert store.memory.count() == 0


async def test_query_ranks_by_cosine_with_scores(store, call, three):
    await call(store, "add", three)
    result = await call(store, "query", q(vec(1, 0.1, 0), k=2))
    assert result.ids == ["a", "b"]
    assert [n.node_id for n in result.nodes] == ["a", "b"]
    expected = [float(unit(vec(1, 0.1, 0)) @ unit(n.embedding)) for n in three[:2]]
    assert result.similarities == pytest.approx(expected, abs=1e-5)


async def test_query_matches_brute_force_on_random_vectors(store, call):
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(40, DIM))
    nodes = [node(f"n{i}", f"text {i}", v.tolist()) for i, v in enumerate(vectors)]
    await call(store, "add", nodes)
    for query in rng.normal(size=(5, DIM)):
        scores = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)) @ unit(query)
        expected = [f"n{i}" for i in np.argsort(-scores)[:5]]
        result = await call(store, "query", q(query.tolist(), k=5))
        assert result.ids == expected


async def test_top_k_larger_than_the_store_returns_everything(store, call, three):
    await call(store, "add", three)
    assert sorted((await call(store, "query", q(vec(1), k=50))).ids) == ["a", "b", "c"]
    assert (await call(store, "query", q(vec(1), k=0))).ids == []


async def test_upsert_is_idempotent_and_updates_in_place(store, call, three):
    await call(store, "add", three)
    await call(store, "add", three)
    assert store.memory.count() == 3
    changed = node("a", "apples are green", vec(0, 0, 1), {"kind": "fruit", "n": 9}, doc="doc1")
    await call(store, "add", [changed])
    assert store.memory.count() == 3
    (back,) = await call(store, "get_nodes", ["a"])
    assert back.text == "apples are green" and back.metadata == {"kind": "fruit", "n": 9}
    top = await call(store, "query", q(vec(0, 0, 1), k=2))
    assert set(top.ids) == {"a", "c"}


async def test_delete_by_ref_doc_id_removes_only_that_document(store, call, three):
    await call(store, "add", three)
    await call(store, "delete", "doc1")
    assert [n.node_id for n in await call(store, "get_nodes")] == ["c"]
    assert (await call(store, "query", q(vec(1), k=3))).ids == ["c"]
    await call(store, "delete", "no-such-doc")
    assert store.memory.count() == 1


async def test_get_nodes_by_ids_keeps_the_order_asked_and_skips_missing(store, call, three):
    await call(store, "add", three)
    got = await call(store, "get_nodes", ["c", "missing", "a"])
    assert [n.node_id for n in got] == ["c", "a"]


async def test_get_nodes_by_filters_and_by_both(store, call, three):
    await call(store, "add", three)
    fruit = MetadataFilters(filters=[MetadataFilter(key="kind", value="fruit")])
    assert [n.node_id for n in await call(store, "get_nodes", filters=fruit)] == ["a", "b"]
    got = await call(store, "get_nodes", ["b", "c"], fruit)
    assert [n.node_id for n in got] == ["b"]


async def test_delete_nodes_by_ids_filters_or_both(store, call, three):
    await call(store, "add", three)
    await call(store, "delete_nodes", ["a", "missing"])
    assert [n.node_id for n in await call(store, "get_nodes")] == ["b", "c"]
    await call(store, "add", three)
    vehicles = MetadataFilters(filters=[MetadataFilter(key="kind", value="vehicle")])
    await call(store, "delete_nodes", filters=vehicles)
    assert [n.node_id for n in await call(store, "get_nodes")] == ["a", "b"]
    fruit = MetadataFilters(filters=[MetadataFilter(key="kind", value="fruit")])
    await call(store, "delete_nodes", ["b", "c"], fruit)
    assert [n.node_id for n in await call(store, "get_nodes")] == ["a"]


async def test_delete_nodes_with_neither_ids_nor_filters_is_refused(store, call, three):
    await call(store, "add", three)
    with pytest.raises(InvalidInputError, match="needs node_ids or filters"):
        await call(store, "delete_nodes")
    await call(store, "delete_nodes", [])  # an empty list names no node: nothing goes
    assert store.memory.count() == 3
    assert await call(store, "get_nodes", []) == []


async def test_clear_empties_the_store_which_stays_usable(store, call, three):
    await call(store, "add", three)
    await call(store, "clear")
    assert await call(store, "get_nodes") == []
    await call(store, "add", three[:1])
    assert (await call(store, "query", q(vec(1)))).ids == ["a"]


async def test_node_ids_and_doc_ids_restrict_the_query(store, call, three):
    await call(store, "add", three)
    only = await call(store, "query", q(vec(1), node_ids=["b", "c", "missing"]))
    assert only.ids == ["b", "c"]
    assert only.similarities[0] == pytest.approx(0.8, abs=1e-5)
    by_doc = await call(store, "query", q(vec(0, 0, 1), doc_ids=["doc1"]))
    assert set(by_doc.ids) == {"a", "b"}
    both = await call(store, "query", q(vec(1), node_ids=["a", "c"], doc_ids=["doc2"]))
    assert both.ids == ["c"]


async def test_concurrent_async_writes_all_land(store):
    batches = [
        [node(f"b{b}-{i}", f"text {b} {i}", vec(1, b, i)) for i in range(4)] for b in range(6)
    ]
    returned = await asyncio.gather(*(store.async_add(batch) for batch in batches))
    assert returned == [[n.node_id for n in batch] for batch in batches]
    assert store.memory.count() == 24
    answers = await asyncio.gather(*(store.aquery(q(vec(1, b, 0), k=1)) for b in range(6)))
    assert [a.ids for a in answers] == [[f"b{b}-0"] for b in range(6)]


async def test_empty_restriction_lists_restrict_nothing(store, call, three):
    # VectorStoreIndex.as_retriever() passes node_ids=[] to a store that keeps the text.
    await call(store, "add", three)
    result = await call(store, "query", q(vec(1), k=3, node_ids=[], doc_ids=[]))
    assert result.ids == ["a", "b", "c"]


async def test_metadata_round_trips_exactly(store, call):
    meta = {
        "when": dt.datetime(2024, 5, 1, 12, 30),
        "day": dt.date(2024, 5, 1),
        "nested": {"a": [1, 2, {"b": None}], "t": (1, "x")},
        "flag": True,
        "ratio": 0.25,
    }
    await call(store, "add", [node("m", "metadata test", vec(1), meta)])
    (back,) = await call(store, "get_nodes", ["m"])
    assert back.metadata == meta
    assert type(back.metadata["nested"]["t"]) is tuple
    (hit,) = (await call(store, "query", q(vec(1)))).nodes
    assert hit.metadata == meta


async def test_where_dict_filters_but_not_together_with_filters(store, call, three):
    await call(store, "add", three)
    got = await call(store, "query", q(vec(1)), where={"n": {"$gte": 2}})
    assert got.ids == ["b", "c"]
    filters = MetadataFilters(filters=[MetadataFilter(key="n", value=1)])
    with pytest.raises(FilterError, match="given two ways"):
        await call(store, "query", q(vec(1), filters=filters), where={"n": 1})


@pytest.mark.parametrize(
    "mode",
    [m for m in VectorStoreQueryMode if m not in (VectorStoreQueryMode.DEFAULT, "mmr")],
)
async def test_unsupported_modes_are_refused_by_name(store, call, mode):
    with pytest.raises(InvalidInputError, match=f"unsupported query mode.*{mode.name}"):
        await call(store, "query", q(vec(1), mode=mode))


async def test_mmr_trades_relevance_for_diversity(store, call):
    nodes = [
        node("best", "one", vec(1, 0, 0)),
        node("twin", "two", vec(0.99, 0.14, 0)),
        node("other", "three", vec(0.6, 0, 0.8)),
    ]
    await call(store, "add", nodes)
    plain = await call(store, "query", q(vec(1), k=2))
    assert plain.ids == ["best", "twin"]
    mmr = q(vec(1), k=2, mode=VectorStoreQueryMode.MMR, mmr_threshold=0.3)
    result = await call(store, "query", mmr)
    assert result.ids == ["best", "other"]
    assert result.similarities == pytest.approx([1.0, 0.6], abs=1e-5)
    relevance_only = await call(store, "query", q(vec(1), k=2, mode="mmr"), mmr_threshold=1.0)
    assert relevance_only.ids == ["best", "twin"]
    limited = await call(store, "query", q(vec(1), k=2, mode="mmr"), mmr_prefetch_k=2)
    assert limited.ids == ["best", "twin"]  # "other" was never a candidate


async def test_mmr_respects_filters_and_node_ids(store, call):
    nodes = [
        node("best", "one", vec(1, 0, 0), {"keep": 1}),
        node("twin", "two", vec(0.99, 0.14, 0), {"keep": 1}),
        node("other", "three", vec(0.6, 0, 0.8), {"keep": 0}),
    ]
    await call(store, "add", nodes)
    keep = MetadataFilters(filters=[MetadataFilter(key="keep", value=1)])
    mmr = q(vec(1), k=2, mode="mmr", mmr_threshold=0.3, filters=keep)
    assert (await call(store, "query", mmr)).ids == ["best", "twin"]
    mmr = q(vec(1), k=3, mode="mmr", node_ids=["twin", "other"])
    assert sorted((await call(store, "query", mmr)).ids) == ["other", "twin"]


@pytest.mark.parametrize(
    "query_kwargs, store_kwargs, fragment",
    [
        ({"mmr_threshold": 0.2}, {"mmr_threshold": 0.7}, "mmr_threshold was given two ways"),
        ({"mmr_threshold": 1.5}, {}, "between 0.0 and 1.0"),
        ({}, {"mmr_prefetch_k": 5, "mmr_prefetch_factor": 2}, "not both"),
        ({}, {"mmr_prefetch_k": 0}, "mmr_prefetch_k must be an integer >= 1"),
        ({}, {"mmr_prefetch_factor": 0.5}, r"mmr_prefetch_factor must be a number in \[1.0, inf\]"),
    ],
)
async def test_bad_mmr_settings_are_refused(store, call, query_kwargs, store_kwargs, fragment):
    query = q(vec(1), mode=VectorStoreQueryMode.MMR, **query_kwargs)
    with pytest.raises(InvalidInputError, match=fragment):
        await call(store, "query", query, **store_kwargs)


@pytest.mark.parametrize(
    "make_query, kwargs, error, fragment",
    [
        (lambda: q(vec(1)), {"top_k": 3}, InvalidInputError, "unexpected keyword.*top_k"),
        (lambda: q([1.0, 0.0]), {}, DimensionError, "query vector has dimension 2.*8-d"),
        (lambda: q([0.0] * DIM), {}, InvalidVectorError, "query vector 0 is all zeros"),
        (lambda: q([float("nan")] * DIM), {}, InvalidVectorError, "NaN"),
        (lambda: q([vec(1), vec(0, 1)]), {}, DimensionError, "one query vector, got 2"),
        (lambda: q(vec(1), k=-1), {}, InvalidInputError, "similarity_top_k must be an integer"),
        (lambda: q(vec(1)), {"n_probe": 0}, InvalidInputError, "n_probe must be an integer >= 1"),
        (lambda: VectorStoreQuery(mode="mmr"), {}, InvalidInputError, "MMR query needs"),
        (lambda: q(vec(1), node_ids="a"), {}, InvalidInputError, "list of strings"),
        (lambda: q(vec(1)), {"where": {"n": {"$like": 1}}}, FilterError, "\\$like"),
    ],
)
async def test_bad_queries_are_refused_naming_the_problem(
    store, call, three, make_query, kwargs, error, fragment
):
    await call(store, "add", three)
    with pytest.raises(error, match=fragment):
        await call(store, "query", make_query(), **kwargs)


async def test_bad_nodes_are_refused_and_nothing_is_stored(store, call, three):
    no_embedding = node("x", "text", vec(1))
    no_embedding.embedding = None
    with pytest.raises(InvalidInputError, match="node 'x' has no embedding"):
        await call(store, "add", [*three, no_embedding])
    with pytest.raises(DimensionError, match="node .z. has a 3-d embedding.*8-d"):
        await call(store, "add", [*three, node("z", "short", [1.0, 0.0, 0.0])])
    with pytest.raises(InvalidInputError, match="node 'w': .*reserved prefix"):
        await call(store, "add", [*three, node("w", "meta", vec(1), {"_mag_x": 1})])
    with pytest.raises(InvalidInputError, match="node 'v': .*nan"):
        await call(store, "add", [*three, node("v", "meta", vec(1), {"score": float("nan")})])
    with pytest.raises(InvalidInputError, match="expected LlamaIndex nodes"):
        await call(store, "add", ["just a string"])
    assert store.memory.count() == 0


async def test_unknown_keyword_arguments_are_refused(store, call, three):
    with pytest.raises(InvalidInputError, match="unexpected keyword"):
        await call(store, "add", three, batch=2)
    with pytest.raises(InvalidInputError, match="unexpected keyword"):
        await call(store, "delete", "doc1", everything=True)


def test_a_filter_operator_on_a_missing_key_behaves_like_none(store, three):
    store.add(three)
    missing = MetadataFilters(
        filters=[MetadataFilter(key="absent", value=None, operator=FilterOperator.IS_EMPTY)]
    )
    assert [n.node_id for n in store.get_nodes(filters=missing)] == ["a", "b", "c"]


def test_a_plain_query_reaches_the_engines_plain_vector_path(store, monkeypatch):
    # The engine answers a query vector with every other argument at its default by one
    # compiled call (``plain_search``): a plain VectorStoreQuery must arrive that way, an
    # MMR query with its candidates' count.
    from magnetic_core import memory as memory_module

    asked: list[int] = []
    one_call = memory_module.plain_search

    def counted(*args):  # type: ignore[no-untyped-def]
        asked.append(args[2].k)
        return one_call(*args)

    monkeypatch.setattr(memory_module, "plain_search", counted)
    store.add([node("best", "one", vec(1, 0, 0)), node("other", "two", vec(0, 1, 0))])
    assert store.query(q(vec(1), k=2)).ids == ["best", "other"]
    assert asked == [2]
    mmr = q(vec(1), k=1, mode=VectorStoreQueryMode.MMR, mmr_threshold=0.5)
    assert store.query(mmr).ids == ["best"]
    assert asked == [2]  # MMR goes the staged way
