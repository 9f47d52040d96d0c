"""MagneticStore's semantic search against InMemoryStore (the vector tests of LangGraph's
SQLite/Postgres stores, ported), plus the index forms, groups and embedding failures."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from magnetic_core.errors import EmbeddingError, InvalidInputError
from magnetic_langchain.store import MagneticSearchItem, MagneticStore
from tests.langchain.store.helpers import DIMS, CharProfileEmbeddings, Twin


def test_auto_embedding_ranks_by_meaning(vtwin: Twin) -> None:
    for key, value in [
        ("doc1", {"text": "short text"}),
        ("doc2", {"text": "longer text document"}),
        ("doc3", {"text": "longest text document here"}),
        ("doc4", {"description": "text in description field"}),
        ("doc5", {"content": "text in content field"}),
    ]:
        vtwin.put(("test",), key, value)
    found = vtwin.search(("test",), query="long text")
    assert {"doc2", "doc3"} <= {r.key for r in found}
    scores = [r.score for r in found if r.score is not None]
    assert scores == sorted(scores, reverse=True)
    assert [r.score for r in found][-2:] == [None, None]  # not indexed (no "text"): last


def test_update_replaces_the_vector_and_index_false_hides_from_ranking(vtwin: Twin) -> None:
    vtwin.put(("test",), "doc1", {"text": "zany zebra Xerxes"})
    vtwin.put(("test",), "doc2", {"text": "something about dogs"})
    vtwin.put(("test",), "doc3", {"text": "text about birds"})
    before = vtwin.search(("test",), query="Zany Xerxes")
    assert before[0].key == "doc1"
    vtwin.put(("test",), "doc1", {"text": "new text about dogs"})
    after = vtwin.search(("test",), query="Zany Xerxes")
    assert next(r.score for r in after if r.key == "doc1") < before[0].score
    vtwin.put(("test",), "doc4", {"text": "new text about dogs"}, index=False)
    top3 = vtwin.search(("test",), query="new text about dogs", limit=3)
    assert "doc4" not in [r.key for r in top3]
    assert vtwin.get(("test",), "doc4").value["text"] == "new text about dogs"
    assert vtwin.search(("test",), filter={"text": "new text about dogs"})  # still filterable


def test_vector_search_with_filters(vtwin: Twin) -> None:
    for key, value in [
        ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
        ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
        ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
        ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
    ]:
        vtwin.put(("test",), key, value)
    assert [r.key for r in vtwin.search(("test",), query="apple", filter={"color": "red"})][
        0
    ] == "doc1"
    assert vtwin.search(("test",), query="car", filter={"color": "red"})[0].key == "doc2"
    assert len(vtwin.search(("test",), query="bbbbluuu", filter={"score": {"$gt": 3.2}})) == 3
    hit = vtwin.search(("test",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"})
    assert [r.key for r in hit] == ["doc3"]


def test_vector_search_paging(vtwin: Twin) -> None:
    for i in range(5):
        vtwin.put(("test",), f"doc{i}", {"text": f"test document number {i}"})
    page1 = vtwin.search(("test",), query="test", limit=2)
    page2 = vtwin.search(("test",), query="test", limit=2, offset=2)
    whole = vtwin.search(("test",), query="test", limit=10)
    assert [r.key for r in page1 + page2] == [r.key for r in whole[:4]]
    assert len(whole) == 5


def test_queries_at_the_edges(vtwin: Twin) -> None:
    vtwin.put(("test",), "doc1", {"text": "test document"})
    for query in ["", None, "test " * 100, "test!@#$%^&*()"]:
        assert len(vtwin.search(("test",), query=query)) == 1


def test_several_fields_score_by_the_best_one(make: Any, emb: CharProfileEmbeddings) -> None:
    twin = make({"dims": DIMS, "embed": emb, "fields": ["key0", "key1", "key3"]})
    twin.put(("test",), "doc1", {"key1": "xxx", "key2": "yyy", "key3": "zzz"})
    twin.put(("test",), "doc2", {"key0": "uuu", "key1": "vvv", "key2": "www", "key3": "xxx"})
    both = twin.search(("test",), query="xxx")
    assert len(both) == 2 and min(r.score for r in both) > 0.99
    assert twin.search(("test",), query="uuu")[0].key == "doc2"
    assert twin.search(("test",), query="zzz")[0].key == "doc1"
    assert all(r.score < 0.9 for r in twin.search(("test",), query="www"))  # key2 not indexed
    # Fewer vectors now: the stale ones must go. (InMemoryStore keeps the old key3 vector of
    # doc2 and still scores it 1.0 for "xxx", so this part runs on our store alone.)
    twin.store.put(("test",), "doc2", {"key0": "qqq"})
    hits = twin.store.search(("test",), query="xxx")
    assert hits[0].key == "doc1" and hits[1].score < 0.9
    assert twin.store._space(("test",)).memory.count() == 3  # doc1: 2 cells, doc2: 1


def test_per_put_fields_lists_and_index_false(make: Any, emb: CharProfileEmbeddings) -> None:
    twin = make({"dims": DIMS, "embed": emb, "fields": ["key17"]})
    twin.put(
        ("test",), "doc3", {"key0": "aaa", "key1": "bbb", "key2": "ccc"}, index=["key0", "key1"]
    )
    twin.put(
        ("test",), "doc4", {"key0": "eee", "key1": "bbb", "key3": "ggg"}, index=["key1", "key3"]
    )
    twin.put(("test",), "doc6", {"tags": ["kiwi", "lime"]}, index=["tags[*]"])
    assert twin.search(("test",), query="aaa")[0].key == "doc3"
    assert twin.search(("test",), query="ggg")[0].key == "doc4"
    assert twin.search(("test",), query="lime")[0].key == "doc6"
    twin.search(("test",), query="bbb")
    twin.put(("test",), "doc5", {"key0": "hhh"}, index=False)
    assert len(twin.search(("test",), limit=10)) == 4


@pytest.mark.parametrize("query", ["aaa", "abcd", "poisson"])
def test_scores_are_cosine_similarity(make: Any, emb: CharProfileEmbeddings, query: str) -> None:
    twin = make({"dims": DIMS, "embed": emb, "fields": ["key0"]})
    twin.put(("test",), "doc", {"key0": "aaa"}, index=["key0", "key1"])
    (hit,) = twin.search((), query=query)
    a, b = np.array(emb.embed_query("aaa")), np.array(emb.embed_query(query))
    assert hit.score == pytest.approx(
        float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))), abs=1e-4
    )


def test_non_ascii_text(vtwin: Twin) -> None:
    texts = ["这是中文", "これは日本語です", "이건 한국어야", "Это русский", "यह रूसी है"]
    for i, text in enumerate(texts):
        vtwin.put(("user_123", "memories"), str(i), {"text": text})
    for i, text in enumerate(texts):
        assert vtwin.search(("user_123", "memories"), query=text)[0].key == str(i)


def test_search_spans_namespaces_under_the_prefix(vtwin: Twin) -> None:
    vtwin.put(("u", "alice"), "a", {"text": "alice likes tea"})
    vtwin.put(("u", "bob"), "b", {"text": "bob likes coffee"})
    vtwin.put(("v", "carol"), "c", {"text": "carol likes tea"})
    found = vtwin.search(("u",), query="likes tea")
    assert [r.namespace for r in found] == [("u", "alice"), ("u", "bob")]


async def test_async_embedding_function(tmp_path: Any) -> None:
    emb = CharProfileEmbeddings(DIMS)

    async def embed(texts: list[str]) -> list[list[float]]:
        return emb.embed_documents(texts)

    with MagneticStore(
        str(tmp_path), index={"dims": DIMS, "embed": embed, "fields": ["text"]}
    ) as store:
        await store.aput(("n",), "k1", {"text": "green tea"})
        await store.aput(("n",), "k2", {"text": "black coffee"})
        hits = await store.asearch(("n",), query="green tea")
        assert hits[0].key == "k1" and hits[0].score == pytest.approx(1.0, abs=1e-5)


def test_sync_embedding_function(tmp_path: Any) -> None:
    emb = CharProfileEmbeddings(DIMS)
    with MagneticStore(str(tmp_path), index={"dims": DIMS, "embed": emb.embed_documents}) as store:
        store.put(("n",), "k", {"text": "hello"})
        assert store.search(("n",), query='{"text": "hello"}')[0].score == pytest.approx(
            1.0, abs=1e-5
        )


def test_groups_are_opt_in(make: Any, emb: CharProfileEmbeddings) -> None:
    index = {"dims": DIMS, "embed": emb, "fields": ["text"]}
    plain = make(index).store
    grouped = make(index, include_groups=True).store
    for store in (plain, grouped):
        store.put(("g",), "k", {"text": "the red fox"})
    assert not isinstance(plain.search(("g",), query="fox")[0], MagneticSearchItem)
    hit = grouped.search(("g",), query="fox")[0]
    assert isinstance(hit, MagneticSearchItem)
    memory = grouped._space(("g",)).memory
    assert hit.group_id == memory.get(["i:k"])[0].group_id
    assert hit.group_label == memory.group(hit.group_id).label
    assert hit.dict()["group_id"] == hit.group_id


def test_hybrid_scores_follow_the_order(make: Any, emb: CharProfileEmbeddings) -> None:
    store = make({"dims": DIMS, "embed": emb, "fields": ["text"]}, hybrid=True).store
    for i, text in enumerate(["deploy notes for server.py", "tea and biscuits", "server rack"]):
        store.put(("h",), str(i), {"text": text})
    hits = store.search(("h",), query="server.py deploy")
    assert hits[0].key == "0"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_bad_vectors_store_nothing(tmp_path: Any) -> None:
    def broken(texts: list[str]) -> list[list[float]]:
        return [[math.nan] * 4 for _ in texts]

    with MagneticStore(str(tmp_path / "a"), index={"dims": 4, "embed": broken}) as store:
        with pytest.raises(EmbeddingError, match="nothing was stored"):
            store.put(("n",), "k", {"text": "x"})
        assert store.get(("n",), "k") is None and store.list_namespaces() == []
    emb = CharProfileEmbeddings(8)
    store = MagneticStore(str(tmp_path / "b"), index={"dims": 9, "embed": emb})
    with store, pytest.raises(EmbeddingError, match="dims"):
        store.put(("n",), "k", {"text": "x"})


@pytest.mark.parametrize(
    ("index", "match"),
    [
        ({"embed": CharProfileEmbeddings(4)}, "dims"),
        ({"dims": 4}, "embed"),
        ({"dims": 4, "embed": CharProfileEmbeddings(4), "fields": "text"}, "fields"),
        ({"dims": 4, "embed": "nosuchprovider:model"}, "nosuchprovider"),
    ],
)
def test_bad_index_configs(tmp_path: Any, index: dict[str, Any], match: str) -> None:
    with pytest.raises((InvalidInputError, ImportError), match=match):
        MagneticStore(str(tmp_path), index=index)  # type: ignore[arg-type]
