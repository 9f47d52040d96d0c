"""Building the store: from an existing memory (shared with other users of it) or from params."""

from __future__ import annotations

import chromadb
import pytest
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_core.errors import (
    ClosedError,
    EmbedderMismatchError,
    EmbeddingError,
    InvalidInputError,
)
from magnetic_llamaindex import MagneticEmbedding, MagneticRetriever, MagneticVectorStore
from tests.llamaindex.conftest import DIM, node, vec


@pytest.fixture
def memory(client):
    mem = MagneticMemory(namespace="shared", embedder=HashingEmbedder(dim=64), client=client)
    yield mem
    mem.close()


def test_one_memory_serves_the_core_and_llamaindex_at_once(memory, make_store):
    store = make_store(memory=memory)
    assert store.memory is memory and store.namespace == "shared"
    memory.add(["the core wrote this about rivers"], metadatas=[{"src": "core"}], ids=["core-1"])
    embedder = memory.embedder
    li_node = TextNode(
        id_="li-1",
        text="llamaindex wrote this about mountains",
        embedding=embedder.embed_query("llamaindex wrote this about mountains").tolist(),
        metadata={"src": "llamaindex"},
    )
    store.add([li_node])

    (from_core,) = store.get_nodes(["core-1"])
    assert isinstance(from_core, TextNode)
    assert from_core.text == "the core wrote this about rivers"
    assert from_core.metadata == {"src": "core"}

    hits = memory.search("mountains", k=1)
    assert hits[0].id == "li-1" and hits[0].text == li_node.text
    # Both kinds of cell answer one query; the memory's own model embeds query_str.
    result = store.query(VectorStoreQuery(query_str="rivers", similarity_top_k=2))
    assert result.ids[0] == "core-1" and set(result.ids) == {"core-1", "li-1"}


def test_closing_a_store_built_on_a_memory_leaves_the_memory_open(memory, make_store):
    store = make_store(memory=memory)
    store.close()
    memory.add(["still open"], ids=["x"])
    assert memory.count() == 1


def test_a_store_built_from_params_owns_and_closes_its_memory(tmp_path):
    with MagneticVectorStore(path=tmp_path / "own", dim=DIM) as store:
        store.add([node("a", "alpha", vec(1))])
        memory = store.memory
    with pytest.raises(ClosedError):
        memory.count()


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"path": "x"}, "given a memory and also path"),
        ({"dim": 8, "config": None}, "given a memory and also dim"),
        ({"namespace": "shared"}, "given a memory and also namespace"),
        ({"embedder_name": "m"}, "given a memory and also embedder_name"),
        ({"embed_model": MockEmbedding(embed_dim=8)}, "given a memory and also embed_model"),
    ],
)
def test_a_memory_given_with_other_settings_is_refused(memory, kwargs, fragment):
    with pytest.raises(InvalidInputError, match=fragment):
        MagneticVectorStore(memory, **kwargs)


def test_bad_construction_is_refused_naming_the_problem(client, tmp_path):
    # MagneticVectorStore(client=client) alone is fine: it learns its dimension from the
    # first nodes (tests/llamaindex/test_dropin_gaps.py).
    with pytest.raises(InvalidInputError, match="given two ways"):
        MagneticVectorStore(client=client, dim=64, embed_model=MockEmbedding(embed_dim=64))
    with pytest.raises(InvalidInputError, match="both path and client"):
        MagneticVectorStore(path=str(tmp_path), client=client, dim=DIM)
    with pytest.raises(InvalidInputError, match="dim must be an integer >= 1"):
        MagneticVectorStore(client=client, dim=0)
    with pytest.raises(InvalidInputError, match="memory must be a MagneticMemory"):
        MagneticVectorStore("./somewhere")  # type: ignore[arg-type]


def test_reopening_with_another_embed_model_is_refused(client, make_store):
    store = make_store(namespace="stamped", embedder_name="model-a")
    store.add([node("a", "alpha", vec(1))])
    with pytest.raises(EmbedderMismatchError, match="model-a"):
        make_store(namespace="stamped", embedder_name="model-b")
    with pytest.raises(EmbedderMismatchError, match="8-d"):
        make_store(namespace="stamped", embedder_name="model-a", dim=16)


def test_a_store_built_with_an_embed_model_embeds_text_itself(make_store):
    embed_model = MagneticEmbedding(HashingEmbedder(dim=64))
    store = make_store(embed_model=embed_model, dim=None)
    assert store.memory.embedder.name == embed_model.model_name and store.memory.dim == 64
    texts = {"a": "red apples and pears", "b": "fast red cars", "c": "slow green boats"}
    store.add([node(i, t, embed_model.get_text_embedding(t)) for i, t in texts.items()])
    assert store.query(VectorStoreQuery(query_str="green boats")).ids == ["c"]
    assert [r.node.node_id for r in MagneticRetriever(store).retrieve("apples")][0] == "a"
    assert store.memory.search("fast cars", k=1)[0].id == "b"


def test_any_llamaindex_embed_model_is_measured_and_named(make_store):
    store = make_store(embed_model=MockEmbedding(embed_dim=12), dim=None)
    assert store.memory.dim == 12
    assert store.memory.embedder.name == MockEmbedding(embed_dim=12).model_name
    store.add([node("a", "alpha", [0.5] * 12)])
    assert store.query(VectorStoreQuery(query_str="anything")).ids == ["a"]


def test_a_store_of_supplied_vectors_refuses_to_embed_text_itself(store):
    store.add([node("a", "alpha", vec(1))])
    with pytest.raises(EmbeddingError, match="vectors come from LlamaIndex") as info:
        store.query(VectorStoreQuery(query_str="alpha"))
    assert "embed_model" in str(info.value)


def test_an_ephemeral_chroma_client_works_too():
    client = chromadb.EphemeralClient()
    try:
        store = MagneticVectorStore(client=client, namespace="ephemeral-li", dim=DIM)
        store.add([node("a", "alpha", vec(1))])
        assert store.client is client
        assert store.query(VectorStoreQuery(query_embedding=vec(1))).ids == ["a"]
        store.clear()
    finally:
        client.close()
