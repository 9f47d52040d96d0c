"""MagneticVectorStore behaviour beyond the standard suite, each test run sync and async."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from magnetic_core import (
    ClosedError,
    EmbedderMismatchError,
    EmbeddingError,
    HashingEmbedder,
    MagneticMemory,
)
from magnetic_langchain import (
    GROUP_ID_KEY,
    GROUP_LABEL_KEY,
    LangChainEmbedder,
    MagneticEmbeddings,
    MagneticVectorStore,
)
from tests.langchain.fakes import TableEmbeddings

MakeStore = Callable[..., MagneticVectorStore]


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


async def call(target: Any, name: str, mode: str, *args: Any, **kwargs: Any) -> Any:
    """``target.name(...)`` in sync mode, ``await target.aname(...)`` in async mode."""
    if mode == "async":
        return await getattr(target, "a" + name)(*args, **kwargs)
    return getattr(target, name)(*args, **kwargs)


def _unit(v: list[float]) -> list[float]:
    arr = np.asarray(v, dtype=float)
    return (arr / np.linalg.norm(arr)).tolist()


# q is the query; "near" and "near twin" are almost the same vector; "aside" is less
# similar to q but points elsewhere: similarity ranks near, near twin; MMR picks near, aside.
GEOMETRY = {
    "q": _unit([1, 0, 0, 0]),
    "near": _unit([1, 0.2, 0, 0]),
    "near twin": _unit([1, 0.25, 0, 0]),
    "aside": _unit([1, -0.3, 0.5, 0]),
    "orthogonal": _unit([0, 1, 0, 0]),
    "opposite": _unit([-1, 0, 0, 0]),
}


@pytest.fixture
def table_store(make_store: MakeStore) -> MagneticVectorStore:
    store = make_store(TableEmbeddings(GEOMETRY))
    names = ["near", "near twin", "aside", "orthogonal", "opposite"]
    store.add_texts(names, [{"name": n} for n in names], ids=names)
    return store


async def test_metadata_round_trips_exactly_with_ids(store: MagneticVectorStore, mode: str):
    meta = {
        "n": 1,
        "ratio": 0.25,
        "flag": True,
        "tags": ["a", "b"],
        "pair": (1, 2),
        "nested": {"x": [1, {"y": None}]},
        "day": dt.date(2024, 5, 17),
    }
    ids = await call(store, "add_texts", mode, ["the cat sat on the mat"], [meta], ids=["c1"])
    assert ids == ["c1"]
    (doc,) = await call(store, "similarity_search", mode, "cat on the mat", k=5)
    assert doc == Document(id="c1", page_content="the cat sat on the mat", metadata=meta)
    assert await call(store, "get_by_ids", mode, ["c1"]) == [doc]


async def test_group_context_only_when_asked(make_store: MakeStore, mode: str):
    plain = make_store()
    await call(plain, "add_texts", mode, ["apples are red", "pears are green"], ids=["a", "p"])
    docs = await call(plain, "similarity_search", mode, "red apples", k=2)
    assert all(set(d.metadata) == set() for d in docs)

    asked = await call(
        plain, "similarity_search", mode, "red apples", k=1, include_group_metadata=True
    )
    group_id = plain.memory.get(["a"])[0].group_id
    assert asked[0].metadata[GROUP_ID_KEY] == group_id
    assert asked[0].metadata[GROUP_LABEL_KEY] == plain.memory.group(group_id).label

    grouped = make_store(include_group_metadata=True)
    await call(grouped, "add_texts", mode, ["apples are red"], [{"kind": "fruit"}], ids=["a"])
    for doc in [
        *await call(grouped, "similarity_search", mode, "apples", k=1),
        *await call(grouped, "get_by_ids", mode, ["a"]),
    ]:
        assert doc.metadata["kind"] == "fruit"
        assert doc.metadata[GROUP_ID_KEY] == grouped.memory.get(["a"])[0].group_id
        assert isinstance(doc.metadata[GROUP_LABEL_KEY], str)


async def test_scores_are_cosine_distances_and_relevance_is_in_unit_range(
    table_store: MagneticVectorStore, mode: str
):
    scored = await call(table_store, "similarity_search_with_score", mode, "q", k=5)
    by_id = {doc.id: score for doc, score in scored}
    assert [doc.id for doc, _ in scored][:2] == ["near", "near twin"]
    assert by_id["orthogonal"] == pytest.approx(1.0, abs=1e-6)
    assert by_id["opposite"] == pytest.approx(2.0, abs=1e-6)
    assert by_id["near"] == pytest.approx(1 - np.dot(GEOMETRY["q"], GEOMETRY["near"]), abs=1e-6)
    assert [s for _, s in scored] == sorted(s for _, s in scored)

    relevant = await call(table_store, "similarity_search_with_relevance_scores", mode, "q", k=5)
    rel = {doc.id: r for doc, r in relevant}
    assert rel["opposite"] == pytest.approx(0.0, abs=1e-6)
    assert rel["orthogonal"] == pytest.approx(0.5, abs=1e-6)
    assert all(0.0 <= r <= 1.0 for r in rel.values())
    for doc_id, distance in by_id.items():
        assert rel[doc_id] == pytest.approx(1 - distance / 2, abs=1e-6)

    kept = await call(
        table_store, "similarity_search_with_relevance_scores", mode, "q", k=5, score_threshold=0.9
    )
    assert {doc.id for doc, _ in kept} == {"near", "near twin", "aside"}


async def test_search_by_vector(table_store: MagneticVectorStore, mode: str):
    docs = await call(table_store, "similarity_search_by_vector", mode, [0.0, 3.0, 0.0, 0.0], k=2)
    assert docs[0].id == "orthogonal"
    assert docs[0].metadata == {"name": "orthogonal"}


async def test_mmr_trades_relevance_for_diversity(table_store: MagneticVectorStore, mode: str):
    similar = await call(table_store, "similarity_search", mode, "q", k=2)
    assert [d.id for d in similar] == ["near", "near twin"]
    diverse = await call(
        table_store, "max_marginal_relevance_search", mode, "q", k=2, fetch_k=4, lambda_mult=0.5
    )
    assert [d.id for d in diverse] == ["near", "aside"]
    relevance_only = await call(
        table_store, "max_marginal_relevance_search", mode, "q", k=2, lambda_mult=1.0
    )
    assert [d.id for d in relevance_only] == ["near", "near twin"]
    by_vector = await call(
        table_store, "max_marginal_relevance_search_by_vector", mode, GEOMETRY["q"], k=2
    )
    assert [d.id for d in by_vector] == ["near", "aside"]
    filtered = await call(
        table_store,
        "max_marginal_relevance_search",
        mode,
        "q",
        k=3,
        filter={"name": {"$in": ["near twin", "opposite"]}},
    )
    assert [d.id for d in filtered] == ["near twin", "opposite"]


async def test_chroma_style_filters(store: MagneticVectorStore, mode: str):
    rows = [
        ("a", "neural networks learn features", {"topic": "ai", "year": 2019}),
        ("b", "transformers replaced recurrent networks", {"topic": "ai", "year": 2021}),
        ("c", "sourdough needs a long proof", {"topic": "baking", "year": 2022}),
        ("d", "diffusion models generate images", {"topic": "ai", "year": 2023}),
    ]
    await call(
        store,
        "add_texts",
        mode,
        [r[1] for r in rows],
        [r[2] for r in rows],
        ids=[r[0] for r in rows],
    )

    async def ids(where: dict[str, Any], k: int = 10) -> set[str]:
        docs = await call(store, "similarity_search", mode, "networks", k=k, filter=where)
        return {d.id for d in docs}

    assert await ids({"$and": [{"topic": "ai"}, {"year": {"$gte": 2020}}]}) == {"b", "d"}
    assert await ids({"topic": {"$in": ["baking"]}}) == {"c"}
    assert await ids({"$or": [{"year": 2019}, {"topic": {"$ne": "ai"}}]}) == {"a", "c"}
    assert len(await ids({"topic": "ai"}, k=2)) == 2
    assert await ids({"topic": "poetry"}) == set()


async def test_bad_filter_is_a_clear_error(store: MagneticVectorStore, mode: str):
    await call(store, "add_texts", mode, ["something"], ids=["s"])
    with pytest.raises(ValueError, match=r"\$regex"):
        await call(store, "similarity_search", mode, "x", filter={"topic": {"$regex": "a.*"}})


async def test_upsert_by_id_and_document_id(store: MagneticVectorStore, mode: str):
    await call(store, "add_texts", mode, ["old text about cats"], [{"v": 1}], ids=["x"])
    await call(store, "add_texts", mode, ["new text about dogs"], [{"v": 2}], ids=["x"])
    assert store.memory.count() == 1
    assert await call(store, "get_by_ids", mode, ["x"]) == [
        Document(id="x", page_content="new text about dogs", metadata={"v": 2})
    ]
    docs = [Document(id="given", page_content="kept id"), Document(page_content="fresh id")]
    ids = await call(store, "add_documents", mode, docs)
    assert ids[0] == "given" and ids[1] and ids[1] != "given"
    assert docs[0].metadata == {} and docs[1].id is None  # inputs are not mutated


async def test_delete(store: MagneticVectorStore, mode: str):
    await call(
        store,
        "add_texts",
        mode,
        ["one", "two", "three"],
        [{"n": 1}, {"n": 2}, {"n": 3}],
        ids=["1", "2", "3"],
    )
    assert await call(store, "delete", mode, ["missing", "1"]) is True
    assert await call(store, "delete", mode, ["missing"]) is True
    assert await call(store, "delete", mode, []) is True  # names nothing, deletes nothing
    assert await call(store, "delete", mode, [], filter={"n": 2}) is True
    assert store.memory.count() == 2
    assert await call(store, "delete", mode, filter={"n": {"$gte": 3}}) is True
    assert [d.id for d in await call(store, "get_by_ids", mode, ["1", "2", "3"])] == ["2"]
    with pytest.raises(ValueError, match="ids or a filter"):
        await call(store, "delete", mode)


async def test_get_by_ids_keeps_order_and_skips_missing(store: MagneticVectorStore, mode: str):
    await call(store, "add_texts", mode, ["alpha", "beta", "gamma"], ids=["a", "b", "c"])
    docs = await call(store, "get_by_ids", mode, ["c", "nope", "a"])
    assert [d.id for d in docs] == ["c", "a"]


async def test_results_are_exact_when_every_item_founds_its_own_group(
    make_store: MakeStore, mode: str
):
    """Random 6-d vectors defeat clustering; the fallback must still give exact top-k."""
    embedding = DeterministicFakeEmbedding(size=6)
    store = make_store(embedding)
    texts = [f"item {i}" for i in range(300)]
    metas = [{"bucket": i % 10} for i in range(300)]
    await call(store, "add_texts", mode, texts, metas, ids=texts)
    assert store.memory.stats().groups > 30  # the hierarchy is no help here

    matrix = np.asarray(embedding.embed_documents(texts))
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    query = np.asarray(embedding.embed_query("some query"))
    sims = matrix @ (query / np.linalg.norm(query))
    expected = [texts[i] for i in np.argsort(-sims)[:10]]
    docs = await call(store, "similarity_search_by_vector", mode, query.tolist(), k=10)
    assert [d.id for d in docs] == expected

    in_bucket = [i for i in np.argsort(-sims) if i % 10 == 3][:5]
    filtered = await call(
        store, "similarity_search_by_vector", mode, query.tolist(), k=5, filter={"bucket": 3}
    )
    assert [d.id for d in filtered] == [texts[i] for i in in_bucket]


async def test_from_texts_and_from_documents(tmp_path: Path, mode: str):
    embedding = MagneticEmbeddings(HashingEmbedder(dim=64))
    store = await call(
        MagneticVectorStore,
        "from_texts",
        mode,
        ["red apple", "green pear"],
        embedding,
        [{"c": "red"}, {"c": "green"}],
        ids=["a", "p"],
        path=tmp_path / "t",
    )
    try:
        assert [d.id for d in await call(store, "similarity_search", mode, "apple", k=1)] == ["a"]
    finally:
        store.close()
    docs = [Document(id="d1", page_content="blue sky", metadata={"c": "blue"})]
    store = await call(
        MagneticVectorStore, "from_documents", mode, docs, embedding, path=tmp_path / "d"
    )
    try:
        assert await call(store, "get_by_ids", mode, ["d1"]) == docs
    finally:
        store.close()


def test_reopening_a_store_keeps_its_documents(tmp_path: Path):
    embedding = MagneticEmbeddings(HashingEmbedder(dim=64))
    with MagneticVectorStore(embedding, path=tmp_path, namespace="notes") as store:
        store.add_texts(["remember the milk"], [{"day": "monday"}], ids=["m"])
    with MagneticVectorStore(embedding, path=tmp_path, namespace="notes") as store:
        assert store.similarity_search("milk", k=1) == [
            Document(id="m", page_content="remember the milk", metadata={"day": "monday"})
        ]
    with pytest.raises(EmbedderMismatchError):
        MagneticVectorStore(DeterministicFakeEmbedding(size=64), path=tmp_path, namespace="notes")


def test_wrapping_an_existing_memory(tmp_path: Path):
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder(dim=64)) as memory:
        memory.add(["written by the core"], [{"src": "core"}], ids=["c"])
        store = MagneticVectorStore(memory=memory)
        assert store.similarity_search("core", k=1)[0].metadata == {"src": "core"}
        assert len(store.embeddings.embed_query("anything")) == 64
        store.close()
        assert memory.count() == 1  # the wrapped memory stays open
        with pytest.raises(ValueError, match="not both"):
            MagneticVectorStore(memory=memory, path=tmp_path)
        with pytest.raises(ValueError, match="not the memory's embedder"):
            MagneticVectorStore(DeterministicFakeEmbedding(size=64), memory=memory)


async def test_bad_input_is_refused_clearly(store: MagneticVectorStore, mode: str):
    with pytest.raises(TypeError, match="one string"):
        await call(store, "add_texts", mode, "not a list")
    with pytest.raises(ValueError, match="empty"):
        await call(store, "add_texts", mode, ["fine", "  "])
    with pytest.raises(ValueError, match="2 metadatas for 1 texts"):
        await call(store, "add_texts", mode, ["fine"], [{}, {}])
    with pytest.raises(ValueError, match="appears twice"):
        await call(store, "add_texts", mode, ["a", "b"], ids=["same", "same"])
    with pytest.raises(ValueError, match="cannot be stored"):
        await call(store, "add_texts", mode, ["a"], [{"s": {1, 2}}])
    with pytest.raises(TypeError, match="where"):
        await call(store, "similarity_search", mode, "x", where={"a": 1})
    with pytest.raises(ValueError, match="lambda_mult"):
        await call(store, "max_marginal_relevance_search", mode, "x", lambda_mult=2.0)
    assert store.memory.count() == 0
    # Without embedding= the store takes vectors only (tests/langchain/test_dropin_gaps.py).


async def test_batch_size(store: MagneticVectorStore, mode: str):
    ids = await call(store, "add_texts", mode, [f"note {i}" for i in range(5)], batch_size=2)
    assert len(set(ids)) == 5 and store.memory.count() == 5


def test_embedder_adapter_names_and_probes_once():
    calls: list[str] = []

    class Counting(DeterministicFakeEmbedding):
        def embed_query(self, text: str) -> list[float]:
            calls.append(text)
            return super().embed_query(text)

    adapter = LangChainEmbedder(Counting(size=6))
    assert adapter.name == "langchain/Counting/6"
    assert adapter.dim == 6 and adapter.dim == 6
    assert len(calls) == 1
    assert LangChainEmbedder(Counting(size=6), dim=6).dim == 6 and len(calls) == 1
    with pytest.raises(TypeError, match="LangChain Embeddings"):
        LangChainEmbedder(HashingEmbedder())  # type: ignore[arg-type]


async def test_as_retriever_search_types(table_store: MagneticVectorStore, mode: str):
    async def ids(retriever: Any, **kwargs: Any) -> list[str | None]:
        docs = (
            retriever.invoke("q", **kwargs)
            if mode == "sync"
            else await retriever.ainvoke("q", **kwargs)
        )
        return [d.id for d in docs]

    similarity = table_store.as_retriever(search_kwargs={"k": 2})
    assert await ids(similarity) == ["near", "near twin"]
    assert await ids(similarity, k=1, filter={"name": "aside"}) == ["aside"]
    mmr = table_store.as_retriever(search_type="mmr", search_kwargs={"k": 2, "fetch_k": 5})
    assert await ids(mmr) == ["near", "aside"]
    threshold = table_store.as_retriever(
        search_type="similarity_score_threshold", search_kwargs={"k": 5, "score_threshold": 0.9}
    )
    assert await ids(threshold) == ["near", "near twin", "aside"]
    grouped = table_store.as_retriever(search_kwargs={"k": 1, "include_group_metadata": True})
    (doc,) = grouped.invoke("q")
    assert doc.metadata[GROUP_ID_KEY] == table_store.memory.get(["near"])[0].group_id


def test_any_chromadb_client_with_isolated_namespaces(make_store: MakeStore):
    import chromadb

    client = chromadb.EphemeralClient()
    try:
        first = make_store(client=client, path=None, namespace="first-ns")
        second = make_store(client=client, path=None, namespace="second-ns")
        first.add_texts(["only in the first namespace"], ids=["x"])
        assert second.get_by_ids(["x"]) == [] and second.similarity_search("first", k=3) == []
        assert [d.id for d in first.similarity_search("first namespace", k=3)] == ["x"]
    finally:
        first.memory.clear()
        close = getattr(client, "close", None)
        if close:
            close()


class _Flaky(DeterministicFakeEmbedding):
    """Fails on any text containing "boom", as a model server might on bad input."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if any("boom" in t for t in texts):
            raise RuntimeError("model server returned 500")
        return super().embed_documents(texts)


async def test_embedding_failures_are_clear_and_store_nothing(make_store: MakeStore, mode: str):
    store = make_store(_Flaky(size=8))
    with pytest.raises(EmbeddingError, match="model server returned 500"):
        await call(store, "add_texts", mode, ["fine", "boom"], ids=["a", "b"])
    assert store.memory.count() == 0


def test_a_closed_store_says_so(make_store: MakeStore):
    store = make_store()
    store.add_texts(["hello"], ids=["h"])
    store.close()
    store.close()  # idempotent
    with pytest.raises(ClosedError):
        store.similarity_search("hello")


def test_opens_a_store_written_by_the_core(tmp_path: Path):
    """MagneticEmbeddings unwraps to the core embedder, so the stamps match."""
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder(dim=64)) as memory:
        memory.add(["written without LangChain"], [{"by": "core"}], ids=["w"])
    with MagneticVectorStore(MagneticEmbeddings(HashingEmbedder(dim=64)), path=tmp_path) as store:
        assert store.get_by_ids(["w"])[0].metadata == {"by": "core"}
        assert store.memory.stats().embedder == HashingEmbedder(dim=64).name


async def test_a_bad_item_late_in_a_batched_add_stores_nothing(
    store: MagneticVectorStore, mode: str
):
    texts = [f"memory {i}" for i in range(10)]
    metas = [{"i": i} for i in range(9)] + [{"bad": {1, 2}}]
    with pytest.raises(ValueError, match="metadata 9"):
        await call(store, "add_texts", mode, texts, metas, batch_size=3)
    assert store.memory.count() == 0
