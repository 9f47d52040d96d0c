"""Gaps a user switching from langchain-chroma hit (issue 16): each test failed before.

3. Scores follow the order (and the exact cosine stays available).
5. langchain-chroma's extra API: ``get(include=, where=, limit=, offset=,
   where_document=)``, ``update_document(s)``, ``delete(where=)``,
   ``similarity_search_with_vectors``, ``similarity_search_by_vector_with_relevance_scores``,
   ``relevance_score_fn=``, ``where_document=``, and a ``SelfQueryRetriever`` translator.
6. ``MagneticVectorStore(client=c)`` without ``embedding=``, fed vectors only.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import chromadb
import numpy as np
import pytest
from langchain_core.documents import Document

from magnetic_core import EmbeddingError, FilterError, InvalidInputError
from magnetic_langchain import MagneticVectorStore
from tests.langchain.fakes import TableEmbeddings


def unit(*v: float) -> list[float]:
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


# The query is closest to "a" by cosine, but "c" names the file the query asks about, and
# the engine's entity and word boosts rank it first.
TABLE = {
    "what broke in server.py deploy": unit(1, 0, 0, 0),
    "a release went out on friday": unit(0.9, 0.3, 0, 0),
    "b rollback steps for the cluster": unit(0.8, 0.55, 0, 0),
    "c server.py crashed during deploy": unit(0.6, 0, 0.8, 0),
    "d lunch menu for the team": unit(0.1, 0, 0, 0.99),
}
DOCS = [t for t in TABLE if not t.startswith("what")]


@pytest.fixture
def ranked(make_store: Any) -> MagneticVectorStore:
    store = make_store(TableEmbeddings(TABLE))
    store.add_texts(
        DOCS, [{"n": i, "kind": "ops" if i < 3 else "misc"} for i in range(4)], ids=list("abcd")
    )
    return store


def test_scores_follow_the_order(ranked: MagneticVectorStore) -> None:
    query = "what broke in server.py deploy"
    scored = ranked.similarity_search_with_score(query, k=4)
    assert scored[0][0].id == "c"  # boosted above "a", whose cosine is higher
    distances = [d for _, d in scored]
    assert distances == sorted(distances) and all(0.0 <= d <= 2.0 for d in distances)
    relevance = [r for _, r in ranked.similarity_search_with_relevance_scores(query, k=4)]
    assert relevance == sorted(relevance, reverse=True)
    assert relevance == pytest.approx([1 - d / 2 for d in distances])
    exact = {h.id: h.score for h in ranked.search_hits(query, k=4)}  # the cosine stays on hits
    q = np.array(TABLE[query])
    assert exact["a"] == pytest.approx(float(q @ np.array(TABLE[DOCS[0]])), abs=1e-6)
    plain = ranked.similarity_search_with_score(query, k=4, entity_boost=0.0, lexical_weight=0.0)
    assert [d.id for d, _ in plain][0] == "a"
    assert [s for _, s in plain] == pytest.approx([1 - exact[d.id] for d, _ in plain], abs=1e-6)


async def test_scores_follow_the_order_async(ranked: MagneticVectorStore) -> None:
    scored = await ranked.asimilarity_search_with_score("what broke in server.py deploy", k=4)
    distances = [d for _, d in scored]
    assert scored[0][0].id == "c" and distances == sorted(distances)


def test_relevance_score_fn_and_vector_relevance(make_store: Any) -> None:
    store = make_store(TableEmbeddings(TABLE), relevance_score_fn=lambda d: 1.0 - d)
    store.add_texts(DOCS, ids=list("abcd"))
    hits = store.similarity_search_with_relevance_scores("what broke in server.py deploy", k=2)
    raw = store.similarity_search_with_score("what broke in server.py deploy", k=2)
    assert [r for _, r in hits] == pytest.approx([1.0 - d for _, d in raw])
    by_vec = store.similarity_search_by_vector_with_relevance_scores(unit(0.9, 0.3, 0, 0), k=2)
    assert by_vec[0][0].id == "a" and by_vec[0][1] == pytest.approx(0.0, abs=1e-6)
    assert by_vec[1][1] > by_vec[0][1]  # a distance, as langchain-chroma returns


def test_where_document_on_searches(ranked: MagneticVectorStore) -> None:
    query = "what broke in server.py deploy"
    found = ranked.similarity_search(query, k=4, where_document={"$contains": "server.py"})
    assert [d.id for d in found] == ["c"]
    others = ranked.similarity_search_with_score(
        query, k=4, where_document={"$not_contains": "server"}, filter={"kind": "ops"}
    )
    assert [d.id for d, _ in others] == ["a", "b"]
    with pytest.raises(FilterError, match=r"\$regex"):
        ranked.similarity_search(query, where_document={"$regex": "x"})


def test_similarity_search_with_vectors(ranked: MagneticVectorStore) -> None:
    pairs = ranked.similarity_search_with_vectors("what broke in server.py deploy", k=2)
    for doc, vec in pairs:
        assert np.allclose(vec, TABLE[doc.page_content], atol=1e-6)


def test_get_like_chroma(ranked: MagneticVectorStore) -> None:
    got = ranked.get()
    assert got["ids"] == list("abcd") and got["documents"] == DOCS and got["embeddings"] is None
    assert got["metadatas"][2] == {"n": 2, "kind": "ops"}
    page = ranked.get(where={"kind": "ops"}, limit=2, offset=1, include=["embeddings"])
    assert page["ids"] == ["b", "c"] and page["documents"] is None and page["metadatas"] is None
    assert np.allclose(page["embeddings"][0], TABLE[DOCS[1]], atol=1e-6)
    assert ranked.get("d")["documents"] == [DOCS[3]]
    assert ranked.get(where_document={"$contains": "lunch"})["ids"] == ["d"]
    with pytest.raises(InvalidInputError, match="uris"):
        ranked.get(include=["uris"])


def test_update_documents_and_delete_where(ranked: MagneticVectorStore, make_store: Any) -> None:
    ranked.update_document("d", Document(page_content=DOCS[0], metadata={"n": 9}))
    assert ranked.get_by_ids(["d"])[0].metadata == {"n": 9}
    assert ranked.similarity_search_by_vector(TABLE[DOCS[0]], k=2)[1].id in {"a", "d"}
    with pytest.raises(InvalidInputError, match="'zz'"):
        ranked.update_documents(["a", "zz"], [Document(page_content=DOCS[1])] * 2)
    assert ranked.get_by_ids(["a"])[0].page_content == DOCS[0]  # nothing was changed
    ranked.delete(where={"kind": "ops"})
    assert ranked.get()["ids"] == ["d"]
    with pytest.raises(ValueError, match="twice"):
        ranked.delete(filter={"n": 1}, where={"n": 1})


def test_self_query_retriever_with_the_translator(make_store: Any) -> None:
    from langchain_classic.chains.query_constructor.schema import AttributeInfo
    from langchain_classic.retrievers.self_query.base import SelfQueryRetriever
    from langchain_core.language_models import FakeListLLM

    from magnetic_core import HashingEmbedder
    from magnetic_langchain import MagneticEmbeddings, MagneticTranslator

    store = make_store(MagneticEmbeddings(HashingEmbedder(dim=128)))
    store.add_texts(
        ["robots take over a city", "a robot learns to love", "dinosaurs return"],
        [
            {"genre": "scifi", "year": 1999},
            {"genre": "scifi", "year": 2008},
            {"genre": "adventure", "year": 2010},
        ],
        ids=["m1", "m2", "m3"],
    )
    structured = {"query": "robot", "filter": 'and(eq("genre", "scifi"), gt("year", 2000))'}
    answer = f"```json\n{json.dumps(structured)}\n```"
    retriever = SelfQueryRetriever.from_llm(
        FakeListLLM(responses=[answer]),
        store,
        "Brief summary of a movie",
        [
            AttributeInfo(name="genre", description="the genre", type="string"),
            AttributeInfo(name="year", description="release year", type="integer"),
        ],
        structured_query_translator=MagneticTranslator(),
    )
    assert [d.id for d in retriever.invoke("scifi robot movies after 2000")] == ["m2"]


def test_a_store_without_embedding_takes_vectors(tmp_path: Path) -> None:
    client = chromadb.PersistentClient(path=str(tmp_path / "vec"))
    try:
        store = MagneticVectorStore(client=client, namespace="v")
        assert store.embeddings is None and store.similarity_search_by_vector(unit(1, 0), k=1) == []
        assert store.get_by_ids(["x"]) == [] and store.delete(ids=["x"])
        ids = store.add_embeddings(
            [("north", unit(1, 0)), ("east", unit(0, 1)), ("", unit(1, 1))],
            [{"d": "n"}, {"d": "e"}, {"d": "ne"}],
            ids=["n", "e", "ne"],
        )
        assert ids == ["n", "e", "ne"] and store.memory.dim == 2
        assert [d.id for d in store.similarity_search_by_vector(unit(1, 0.1), k=2)] == ["n", "ne"]
        assert store.max_marginal_relevance_search_by_vector(unit(1, 0.1), k=2, fetch_k=3)
        with pytest.raises(EmbeddingError, match="add_embeddings"):
            store.add_texts(["needs a model"])
        with pytest.raises(EmbeddingError, match="cannot embed"):
            store.similarity_search("needs a model")
        store.close()
        again = MagneticVectorStore(client=client, namespace="v")  # the stamp gives the dim
        assert again.memory.dim == 2 and len(again.get()["ids"]) == 3
        again.close()
    finally:
        client.close()
