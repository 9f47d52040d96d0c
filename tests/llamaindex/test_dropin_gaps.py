"""Gaps a user switching from ChromaVectorStore hit (issue 16): each test failed before.

1. A filter-only query (no embedding, no text) is answered, sync and async.
2. A store built from a path alone learns its dimension from the first nodes.
4. Nodes without text (image nodes, embedding-only nodes) are stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from llama_index.core.schema import ImageNode, TextNode
from llama_index.core.vector_stores import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)
from llama_index.core.vector_stores.types import VectorStoreQueryMode

from magnetic_core.errors import InvalidInputError
from magnetic_llamaindex import MagneticVectorStore


def nodes() -> list[TextNode]:
    return [
        TextNode(id_="a", text="alpha", embedding=[1.0, 0.0, 0.0], metadata={"kind": "x", "n": 1}),
        TextNode(id_="b", text="beta", embedding=[0.0, 1.0, 0.0], metadata={"kind": "y", "n": 2}),
        TextNode(id_="c", text="gamma", embedding=[0.0, 0.0, 1.0], metadata={"kind": "x", "n": 3}),
    ]


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with MagneticVectorStore(path=str(tmp_path / "s"), dim=3) as s:
        s.add(nodes())
        yield s


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_filter_only_query(store: MagneticVectorStore, mode: str) -> None:
    only_x = MetadataFilters(filters=[MetadataFilter(key="kind", value="x")])
    query = VectorStoreQuery(filters=only_x, similarity_top_k=1)
    result = store.query(query) if mode == "sync" else await store.aquery(query)
    assert result.ids == ["a"] and [n.get_content() for n in result.nodes] == ["alpha"]
    query = VectorStoreQuery(filters=only_x, similarity_top_k=5)
    result = store.query(query) if mode == "sync" else await store.aquery(query)
    assert result.ids == ["a", "c"] and not result.similarities
    ge2 = MetadataFilters(filters=[MetadataFilter(key="n", value=2, operator=FilterOperator.GTE)])
    assert store.query(VectorStoreQuery(filters=ge2, similarity_top_k=10)).ids == ["b", "c"]
    with pytest.raises(InvalidInputError, match="MMR"):
        store.query(VectorStoreQuery(filters=only_x, mode=VectorStoreQueryMode.MMR))


def test_a_store_from_a_path_alone_learns_its_dimension(tmp_path: Path) -> None:
    path = str(tmp_path / "plain")
    with MagneticVectorStore(path=path) as store:  # ChromaVectorStore needs no dim either
        assert (
            store.get_nodes() == []
            and store.query(
                VectorStoreQuery(query_embedding=[1.0, 0.0, 0.0], similarity_top_k=2)
            ).ids
            == []
        )
        store.delete_nodes(["nothing"])
        store.add(nodes())
        assert store.memory.dim == 3
        got = store.query(VectorStoreQuery(query_embedding=[0.9, 0.1, 0.0], similarity_top_k=1))
        assert got.ids == ["a"]
    with MagneticVectorStore(path=path) as again:  # the stored namespace says 3-d
        assert again.memory.dim == 3 and len(again.get_nodes()) == 3
        with pytest.raises(InvalidInputError, match="3-d"):
            again.add([TextNode(id_="z", text="z", embedding=[1.0, 0.0])])


def test_vector_store_index_with_the_embed_model_on_the_index(tmp_path: Path) -> None:
    from llama_index.core import Document, StorageContext, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding

    store = MagneticVectorStore(path=str(tmp_path / "index"))
    index = VectorStoreIndex.from_documents(
        [Document(text="the cat sat on the mat"), Document(text="stocks fell on monday")],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=MockEmbedding(embed_dim=8),
    )
    found = index.as_retriever(similarity_top_k=2).retrieve("cat")
    assert sorted(n.get_content() for n in found) == [
        "stocks fell on monday",
        "the cat sat on the mat",
    ]
    store.close()


def test_nodes_without_text_are_stored(store: MagneticVectorStore) -> None:
    image = ImageNode(
        id_="img",
        image_url="http://example.com/cat.png",
        embedding=[0.7, 0.7, 0.0],
        metadata={"kind": "image"},
    )
    bare = TextNode(id_="bare", text="", embedding=[0.0, 0.7, 0.7])
    store.add([image, bare])
    got = {n.node_id: n for n in store.get_nodes(node_ids=["img", "bare"])}
    assert isinstance(got["img"], ImageNode) and got["img"].image_url == image.image_url
    assert got["img"].metadata == {"kind": "image"} and got["bare"].get_content() == ""
    top = store.query(VectorStoreQuery(query_embedding=[0.7, 0.7, 0.0], similarity_top_k=1))
    assert top.ids == ["img"] and top.similarities[0] == pytest.approx(1.0, abs=1e-5)
    assert store.memory.search("alpha", k=1, vector=[1.0, 0.0, 0.0])[0].id == "a"
