"""End to end with the real all-MiniLM-L6-v2 model on a small corpus of four concepts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

from magnetic_core import MemoryConfig
from magnetic_langchain import (
    EXPANDED_FROM_KEY,
    GROUP_LABEL_KEY,
    MagneticEmbeddings,
    MagneticRetriever,
    MagneticVectorStore,
)

pytestmark = pytest.mark.minilm

CORPUS = {
    "baking": [
        "Let bread dough rise until it doubles in size, usually one to two hours.",
        "Knead the dough for ten minutes to develop the gluten.",
        "A sourdough starter needs regular feeding with flour and water.",
        "Bake the loaf at 230 degrees until the crust is deep brown.",
        "Proofing yeast in warm water shows whether it is still active.",
    ],
    "astronomy": [
        "Saturn's rings are made mostly of ice particles.",
        "Jupiter is the largest planet in the solar system.",
        "A light year is the distance light travels in one year.",
        "The Moon's phases come from its position relative to the Sun.",
        "Mars looks red because of iron oxide dust on its surface.",
    ],
    "gardening": [
        "Ladybugs eat the aphids that attack rose bushes.",
        "Water tomato plants deeply at the base in the morning.",
        "Mulch keeps soil moist and suppresses weeds.",
        "Prune roses in late winter before new growth starts.",
        "Compost adds nutrients and structure to garden soil.",
    ],
    "travel": [
        "My flight to Lisbon leaves at 7:40 on Friday from gate B12.",
        "Remember to renew the passport before the trip to Japan.",
        "The hotel in Porto includes breakfast and free cancellation.",
        "Pack a power adapter for European sockets.",
        "The train from Lisbon to Porto takes about three hours.",
    ],
}


@pytest.fixture(scope="module")
def corpus_store(minilm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MagneticVectorStore]:
    store = MagneticVectorStore(
        MagneticEmbeddings(minilm),
        path=tmp_path_factory.mktemp("minilm"),
        # A corpus this small stays under the first calibration checkpoint (32 cells),
        # so the join threshold is set for MiniLM's similarity scale.
        config=MemoryConfig(join_threshold=0.35),
    )
    texts = [t for texts in CORPUS.values() for t in texts]
    metas = [{"concept": c} for c, texts in CORPUS.items() for _ in texts]
    store.add_texts(texts, metas)
    yield store
    store.close()


@pytest.mark.parametrize(
    ("question", "concept"),
    [
        ("How long should I let the bread dough rise?", "baking"),
        ("Which planet has rings of ice?", "astronomy"),
        ("How do I keep aphids off my roses?", "gardening"),
        ("When does my flight to Lisbon leave?", "travel"),
    ],
)
def test_retriever_returns_the_right_concept(
    corpus_store: MagneticVectorStore, question: str, concept: str
):
    docs = MagneticRetriever(store=corpus_store, k=2).invoke(question)
    assert [d.metadata["concept"] for d in docs] == [concept, concept]
    assert all(d.metadata[GROUP_LABEL_KEY] for d in docs)


async def test_expansion_brings_the_rest_of_the_concept(corpus_store: MagneticVectorStore):
    retriever = MagneticRetriever(store=corpus_store, k=1, expand=2)
    docs = await retriever.ainvoke("How long should I let the bread dough rise?")
    assert docs[0].page_content.startswith("Let bread dough rise")
    assert len(docs) == 3
    assert all(d.metadata[EXPANDED_FROM_KEY] == docs[0].id for d in docs[1:])
    assert [d.metadata["concept"] for d in docs] == ["baking"] * 3


def format_docs(docs: list[Document]) -> str:
    return "\n".join(f"- [{d.metadata[GROUP_LABEL_KEY]}] {d.page_content}" for d in docs)


async def test_lcel_rag_pipeline_runs(corpus_store: MagneticVectorStore):
    prompt = ChatPromptTemplate.from_messages(
        [("human", "Answer from these memories:\n{context}\n\nQuestion: {question}")]
    )
    retriever = MagneticRetriever(store=corpus_store, k=2)
    # The parrot model answers with the prompt it was given, so the test sees what the
    # LLM would have seen.
    chain = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | ParrotFakeChatModel()
        | StrOutputParser()
    )
    question = "Which planet has rings of ice?"
    answer = chain.invoke(question)
    assert answer.startswith("Answer from these memories:\n- [")
    assert "Saturn's rings are made mostly of ice particles." in answer
    assert answer.endswith(f"Question: {question}")
    assert await chain.ainvoke(question) == answer

    mmr_chain = corpus_store.as_retriever(search_type="mmr", search_kwargs={"k": 3})
    assert len(await mmr_chain.ainvoke(question)) == 3
