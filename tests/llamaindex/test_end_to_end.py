"""End to end with the real all-MiniLM-L6-v2: VectorStoreIndex, retrievers, a query engine.

Also: deleting a document through the index, reopening the store from disk, and one memory
serving LangChain and LlamaIndex at once.
"""

from __future__ import annotations

import chromadb
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from magnetic_core import MagneticMemory
from magnetic_llamaindex import (
    GROUP_ID_KEY,
    GROUP_LABEL_KEY,
    MagneticEmbedding,
    MagneticRetriever,
    MagneticVectorStore,
)

pytestmark = pytest.mark.minilm

TOPICS = {
    "photosynthesis": (
        "Photosynthesis lets green plants turn sunlight, water and carbon dioxide into "
        "glucose. Chlorophyll in the leaves absorbs the light energy. Oxygen is released "
        "into the air as a by-product of the process."
    ),
    "volcanoes": (
        "Volcanoes erupt when molten magma rises through cracks in the crust of the Earth. "
        "Lava, ash and hot gases pour out of the vent. Many volcanoes sit along the edges "
        "of tectonic plates."
    ),
    "chess": (
        "In chess each player starts with sixteen pieces on the board. The queen is the "
        "most powerful piece. Checkmate ends the game when the king cannot escape capture."
    ),
    "bread": (
        "Bakers make bread by mixing flour, water, salt and yeast into a dough. The yeast "
        "ferments sugars and releases gas, which makes the dough rise before baking."
    ),
}
QUESTIONS = {
    "photosynthesis": "How do plants make food from sunlight?",
    "volcanoes": "Why does lava come out of a mountain?",
    "chess": "Which piece is the strongest in the board game?",
    "bread": "What makes dough rise?",
}


@pytest.fixture(scope="module")
def embed_model(minilm):
    return MagneticEmbedding(minilm)


def documents():
    return [
        Document(text=text, doc_id=topic, metadata={"topic": topic})
        for topic, text in TOPICS.items()
    ]


def build_index(store, embed_model):
    return VectorStoreIndex.from_documents(
        documents(),
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed_model,
        transformations=[SentenceSplitter(chunk_size=40, chunk_overlap=0)],
    )


@pytest.fixture
def minilm_store(make_store, embed_model):
    return make_store(embed_model=embed_model, dim=None)


def test_the_index_splits_documents_and_stores_every_chunk(minilm_store, embed_model):
    build_index(minilm_store, embed_model)
    nodes = minilm_store.get_nodes()
    assert len(nodes) > len(TOPICS)  # chunks, several per document
    assert {n.ref_doc_id for n in nodes} == set(TOPICS)
    for n in nodes:
        assert n.text in TOPICS[n.ref_doc_id]
        assert n.metadata == {"topic": n.ref_doc_id}


@pytest.mark.parametrize("topic", list(QUESTIONS))
def test_the_index_retriever_finds_the_right_document(minilm_store, embed_model, topic):
    index = build_index(minilm_store, embed_model)
    (best,) = index.as_retriever(similarity_top_k=1).retrieve(QUESTIONS[topic])
    assert best.node.ref_doc_id == topic
    assert 0.2 < best.score <= 1.0


async def test_a_query_engine_answers_from_the_right_nodes(minilm_store, embed_model):
    index = build_index(minilm_store, embed_model)
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=2)
    response = engine.query(QUESTIONS["chess"])
    assert response.source_nodes[0].node.ref_doc_id == "chess"
    # MockLLM echoes its prompt, so the answer shows the context the engine gave it.
    assert response.source_nodes[0].node.get_content() in str(response)
    assert "queen" in str(response) or "Checkmate" in str(response)
    async_response = await engine.aquery(QUESTIONS["bread"])
    assert async_response.source_nodes[0].node.ref_doc_id == "bread"


async def test_filters_and_mmr_through_the_index(minilm_store, embed_model):
    index = build_index(minilm_store, embed_model)
    only_bread = MetadataFilters(filters=[MetadataFilter(key="topic", value="bread")])
    hits = index.as_retriever(similarity_top_k=3, filters=only_bread).retrieve(
        QUESTIONS["volcanoes"]
    )
    assert hits and {h.node.ref_doc_id for h in hits} == {"bread"}
    mmr = index.as_retriever(
        similarity_top_k=3,
        vector_store_query_mode="mmr",
        vector_store_kwargs={"mmr_threshold": 0.5},
    )
    hits = await mmr.aretrieve(QUESTIONS["photosynthesis"])
    assert len(hits) == 3 and hits[0].node.ref_doc_id == "photosynthesis"


async def test_delete_ref_doc_removes_every_chunk_of_that_document(minilm_store, embed_model):
    index = build_index(minilm_store, embed_model)
    before = len(minilm_store.get_nodes())
    chess_chunks = [n for n in minilm_store.get_nodes() if n.ref_doc_id == "chess"]
    index.delete_ref_doc("chess")
    after = minilm_store.get_nodes()
    assert len(after) == before - len(chess_chunks) and "chess" not in {n.ref_doc_id for n in after}
    hits = index.as_retriever(similarity_top_k=3).retrieve(QUESTIONS["chess"])
    assert "chess" not in {h.node.ref_doc_id for h in hits}
    await index.adelete_ref_doc("bread")
    assert {n.ref_doc_id for n in minilm_store.get_nodes()} == {"photosynthesis", "volcanoes"}


def test_the_group_aware_retriever_over_an_index_built_store(minilm_store, embed_model):
    build_index(minilm_store, embed_model)
    retriever = MagneticRetriever(
        minilm_store, embed_model=embed_model, similarity_top_k=1, expand=2
    )
    results = retriever.retrieve(QUESTIONS["volcanoes"])
    assert results[0].node.ref_doc_id == "volcanoes"
    group = minilm_store.memory.group(results[0].node.metadata[GROUP_ID_KEY])
    assert results[0].node.metadata[GROUP_LABEL_KEY] == group.label
    assert [r.node.node_id for r in results[1:]] == [
        c for c in group.cell_ids if c != results[0].node.node_id
    ][:2]


def test_the_store_persists_and_reopens_over_a_new_memory(tmp_path, minilm, embed_model):
    path = str(tmp_path / "persisted")
    first_client = chromadb.PersistentClient(path=path)
    store = MagneticVectorStore(client=first_client, dim=384, embedder_name=embed_model.model_name)
    build_index(store, embed_model)
    saved = {n.node_id: n for n in store.get_nodes()}
    store.close()
    first_client.close()

    # A new memory over the same path, with the real model the stamp names.
    client = chromadb.PersistentClient(path=path)
    memory = MagneticMemory(client=client, embedder=minilm)
    try:
        reopened = MagneticVectorStore(memory)
        back = {n.node_id: n for n in reopened.get_nodes()}
        assert back.keys() == saved.keys()
        for node_id, node in saved.items():
            assert back[node_id].text == node.text and back[node_id].metadata == node.metadata
            assert back[node_id].ref_doc_id == node.ref_doc_id
        index = VectorStoreIndex.from_vector_store(reopened, embed_model=embed_model)
        (best,) = index.as_retriever(similarity_top_k=1).retrieve(QUESTIONS["volcanoes"])
        assert best.node.ref_doc_id == "volcanoes"
        # The memory now embeds text itself: the same question straight through the core.
        assert memory.search(QUESTIONS["volcanoes"], k=1)[0].id == best.node.node_id
    finally:
        memory.close()
        client.close()


def test_one_memory_serves_langchain_and_llamaindex_at_once(client, minilm, embed_model):
    from magnetic_langchain import MagneticVectorStore as LangChainStore

    memory = MagneticMemory(client=client, namespace="both", embedder=minilm)
    try:
        langchain_store = LangChainStore(memory=memory)
        langchain_store.add_texts(
            ["Honeybees dance to tell the hive where flowers are."],
            metadatas=[{"topic": "bees"}],
            ids=["lc-bees"],
        )
        li_store = MagneticVectorStore(memory)
        index = build_index(li_store, embed_model)
        (best,) = index.as_retriever(similarity_top_k=1).retrieve("How do bees communicate?")
        assert best.node.node_id == "lc-bees" and best.node.metadata == {"topic": "bees"}
        (doc,) = langchain_store.similarity_search(QUESTIONS["bread"], k=1)
        assert doc.metadata["topic"] == "bread" and doc.page_content in TOPICS["bread"]
        # LlamaIndex's node serialisation stays out of LangChain documents
        assert "_node_content" not in doc.metadata and "_node_type" not in doc.metadata
    finally:
        memory.close()
