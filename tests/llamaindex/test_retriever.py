"""MagneticRetriever: group id and label on every result, group expansion, entity routing."""

from __future__ import annotations

import pytest
from llama_index.core.schema import MetadataMode, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters, VectorStoreQuery

from magnetic_core import HashingEmbedder, MagneticMemory, MemoryConfig
from magnetic_core.errors import EmbeddingError, InvalidInputError
from magnetic_llamaindex import (
    EXPANDED_FROM_KEY,
    GROUP_ID_KEY,
    GROUP_LABEL_KEY,
    MagneticEmbedding,
    MagneticRetriever,
)
from tests.llamaindex.conftest import node, unit, vec

# Two concepts: cells near axis 0 (rivers) and near axis 2 (mountains), well apart.
CELLS = [
    ("r1", "rivers flow to the sea", vec(1, 0.05, 0), {"part": 1}),
    ("r2", "rivers carry silt downstream", vec(1, 0.2, 0), {"part": 2}),
    ("r3", "a river delta forms at the mouth", vec(1, 0.4, 0), {"part": 1}),
    ("r4", "rivers freeze in hard winters", vec(1, 0.6, 0.1), {"part": 2}),
    ("m1", "mountains rise above the clouds", vec(0, 0.1, 1), {"part": 1}),
    ("m2", "mountain passes close in winter", vec(0, 0.3, 1), {"part": 2}),
]
VECTORS = {cid: v for cid, _, v, _ in CELLS}


@pytest.fixture
def grouped(make_store):
    store = make_store(config=MemoryConfig(join_threshold=0.8))
    store.add([node(i, text, v, meta) for i, text, v, meta in CELLS])
    return store


def bundle(embedding, text="query"):
    return QueryBundle(query_str=text, embedding=embedding)


def ids(results):
    return [r.node.node_id for r in results]


def test_results_carry_their_group_id_and_label_and_cosine_score(grouped):
    results = MagneticRetriever(grouped, similarity_top_k=3).retrieve(bundle(vec(1, 0.1)))
    assert ids(results) == ["r1", "r2", "r3"]
    memory = grouped.memory
    for r in results:
        (cell,) = memory.get([r.node.node_id])
        group = memory.group(cell.group_id)
        assert r.node.metadata[GROUP_ID_KEY] == cell.group_id
        assert r.node.metadata[GROUP_LABEL_KEY] == group.label and group.label
        expected = float(unit(vec(1, 0.1)) @ unit(VECTORS[r.node.node_id]))
        assert r.score == pytest.approx(expected, abs=1e-5)
        # the group tags are kept out of the text that is embedded
        assert GROUP_ID_KEY not in r.node.get_content(metadata_mode=MetadataMode.EMBED)
    assert len({r.node.metadata[GROUP_ID_KEY] for r in results}) == 1


def test_expansion_adds_the_groups_best_other_cells_after_the_hits(grouped):
    retriever = MagneticRetriever(grouped, similarity_top_k=1, expand=2)
    results = retriever.retrieve(bundle(vec(0, 0, 1)))
    hit = results[0]
    assert hit.node.node_id == "m1" and EXPANDED_FROM_KEY not in hit.node.metadata
    group = grouped.memory.group(hit.node.metadata[GROUP_ID_KEY])
    assert ids(results)[1:] == [c for c in group.cell_ids if c != "m1"][:2] == ["m2"]
    assert results[1].node.metadata[EXPANDED_FROM_KEY] == "m1"
    assert results[1].score == pytest.approx(float(unit(vec(0, 0, 1)) @ unit(vec(0, 0.3, 1))))

    rivers = retriever.retrieve(bundle(vec(1, 0.05)))
    group = grouped.memory.group(rivers[0].node.metadata[GROUP_ID_KEY])
    assert ids(rivers) == ["r1", *[c for c in group.cell_ids if c != "r1"][:2]]


def test_expansion_never_repeats_a_cell_and_honours_filters(grouped):
    retriever = MagneticRetriever(grouped, similarity_top_k=2, expand=10)
    results = retriever.retrieve(bundle(vec(1, 0.1)))
    assert ids(results)[:2] == ["r1", "r2"]  # the hits come first, in rank order
    assert sorted(ids(results)[2:]) == ["r3", "r4"]
    assert {r.node.metadata[EXPANDED_FROM_KEY] for r in results[2:]} == {"r1"}
    part2 = MetadataFilters(filters=[MetadataFilter(key="part", value=2)])
    filtered = MagneticRetriever(grouped, similarity_top_k=1, expand=10, filters=part2)
    assert ids(filtered.retrieve(bundle(vec(1, 0.1)))) == ["r2", "r4"]


async def test_async_retrieval_matches_sync(grouped):
    retriever = MagneticRetriever(grouped, similarity_top_k=2, expand=1)
    sync = retriever.retrieve(bundle(vec(1, 0.3)))
    asynchronous = await retriever.aretrieve(bundle(vec(1, 0.3)))
    assert ids(asynchronous) == ids(sync)
    assert [r.score for r in asynchronous] == pytest.approx([r.score for r in sync])


def test_an_entity_in_the_query_text_lifts_the_cell_that_names_it(make_store):
    store = make_store()
    store.add(
        [
            node("x", "quarterly numbers look fine", vec(1, 0, 0)),
            node("y", "the figures are in budget_2024.xlsx", vec(0.95, 0.31, 0)),
        ]
    )
    query = bundle(vec(1), text="where is budget_2024.xlsx")
    top = MagneticRetriever(store, similarity_top_k=1).retrieve(query)
    assert ids(top) == ["y"]
    assert top[0].score == pytest.approx(0.95, abs=0.01)  # the score stays the cosine
    plain = store.query(VectorStoreQuery(query_embedding=vec(1), query_str=query.query_str))
    assert plain.ids == ["x"]  # the vector store itself ranks by cosine alone
    vector_only = MagneticRetriever(store, similarity_top_k=1, entity_boost=0, lexical_weight=0)
    assert ids(vector_only.retrieve(query)) == ["x"]


async def test_the_query_is_embedded_by_the_embed_model_or_the_memorys_own(client):
    memory = MagneticMemory(namespace="words", embedder=HashingEmbedder(dim=64), client=client)
    try:
        memory.add(["red apples and pears", "fast red cars", "slow green boats"], ids=list("abc"))
        by_memory = MagneticRetriever(memory, similarity_top_k=1)
        assert ids(by_memory.retrieve("green boats")) == ["c"]
        assert ids(await by_memory.aretrieve("green boats")) == ["c"]
        by_model = MagneticRetriever(
            memory, embed_model=MagneticEmbedding(memory.embedder), similarity_top_k=1
        )
        assert ids(by_model.retrieve("apples and pears")) == ["a"]
        assert ids(await by_model.aretrieve("apples and pears")) == ["a"]
    finally:
        memory.close()


def test_without_an_embed_model_a_store_of_supplied_vectors_says_what_is_missing(grouped):
    with pytest.raises(EmbeddingError, match="give the retriever an embed_model"):
        MagneticRetriever(grouped).retrieve("rivers")


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"similarity_top_k": 0}, "similarity_top_k must be an integer >= 1"),
        ({"expand": -1}, "expand must be an integer >= 0"),
        ({"n_probe": 0}, "n_probe must be an integer >= 1"),
        ({"entity_boost": -0.1}, r"entity_boost must be a number in \[0.0, 1000000.0\]"),
        ({"lexical_weight": float("nan")}, r"lexical_weight must be a number in \[0.0, 10"),
        (
            {
                "filters": MetadataFilters(
                    filters=[MetadataFilter(key="p", value="x", operator="in")]
                )
            },
            "IN on key 'p'",
        ),
    ],
)
def test_bad_settings_are_refused(grouped, kwargs, fragment):
    with pytest.raises(InvalidInputError, match=fragment):
        MagneticRetriever(grouped, **kwargs)


def test_the_retriever_needs_a_magnetic_store():
    with pytest.raises(InvalidInputError, match="MagneticVectorStore or MagneticMemory, got dict"):
        MagneticRetriever({})  # type: ignore[arg-type]
