"""MagneticRetriever: group labels on hits, concept expansion, k and filter per call."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from langchain_core.documents import Document

from magnetic_core import MemoryConfig
from magnetic_langchain import (
    EXPANDED_FROM_KEY,
    GROUP_ID_KEY,
    GROUP_LABEL_KEY,
    SCORE_KEY,
    MagneticRetriever,
    MagneticVectorStore,
)
from tests.langchain.fakes import TableEmbeddings


def _unit(*v: float) -> list[float]:
    arr = np.asarray(v, dtype=float)
    return (arr / np.linalg.norm(arr)).tolist()


# Two concepts: four "a" cells around axis 0, two "b" cells around axis 1.
VECTORS = {
    "a-core": _unit(1, 0.02, 0.02, 0, 0),
    "a-left": _unit(1, 0.25, 0, 0, 0),
    "a-right": _unit(1, 0, 0.3, 0, 0),
    "a-far": _unit(1, -0.2, -0.35, 0, 0),
    "b-one": _unit(0, 1, 0, 0.1, 0),
    "b-two": _unit(0, 1, 0, -0.1, 0),
    "query a-left": _unit(1, 0.3, 0, 0, 0),
    "query between": _unit(1, 0.45, 0, 0, 0),
}
CELLS = ["a-core", "a-left", "a-right", "a-far", "b-one", "b-two"]


@pytest.fixture
def concept_store(make_store: Callable[..., MagneticVectorStore]) -> MagneticVectorStore:
    store = make_store(TableEmbeddings(VECTORS), config=MemoryConfig(join_threshold=0.8))
    store.add_texts(CELLS, [{"name": c, "side": c.split("-")[1]} for c in CELLS], ids=CELLS)
    groups = {store.memory.get([c])[0].group_id for c in CELLS}
    assert len(groups) == 2, "the fixture expects exactly two concepts"
    return store


def _group_order(store: MagneticVectorStore, cell_id: str) -> list[str]:
    gid = store.memory.get([cell_id])[0].group_id
    return list(store.memory.group(gid).cell_ids)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_hits_carry_group_label_and_score(concept_store: MagneticVectorStore, mode: str):
    retriever = MagneticRetriever(store=concept_store, k=2)
    docs = (
        retriever.invoke("query a-left")
        if mode == "sync"
        else await retriever.ainvoke("query a-left")
    )
    assert [d.id for d in docs] == ["a-left", "a-core"]
    gid = concept_store.memory.get(["a-left"])[0].group_id
    top = docs[0].metadata
    assert top[GROUP_ID_KEY] == gid
    assert top[GROUP_LABEL_KEY] == concept_store.memory.group(gid).label
    assert top[SCORE_KEY] == pytest.approx(np.dot(VECTORS["query a-left"], VECTORS["a-left"]))
    assert {k: top[k] for k in ("name", "side")} == {"name": "a-left", "side": "left"}


async def test_k_from_constructor_and_per_call(concept_store: MagneticVectorStore):
    retriever = MagneticRetriever(store=concept_store, k=3)
    assert len(retriever.invoke("query a-left")) == 3
    assert len(retriever.invoke("query a-left", k=1)) == 1
    assert len(await retriever.ainvoke("query a-left", k=5)) == 5
    assert len(retriever.invoke("query a-left")) == 3  # the per-call k did not stick


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_expansion_follows_each_hit_in_centroid_order(
    concept_store: MagneticVectorStore, mode: str
):
    retriever = MagneticRetriever(store=concept_store, k=1, expand=2)
    docs = (
        retriever.invoke("query a-left")
        if mode == "sync"
        else await retriever.ainvoke("query a-left")
    )
    others = [c for c in _group_order(concept_store, "a-left") if c != "a-left"]
    assert [d.id for d in docs] == ["a-left", *others[:2]]
    assert all(d.metadata[EXPANDED_FROM_KEY] == "a-left" for d in docs[1:])
    assert EXPANDED_FROM_KEY not in docs[0].metadata


async def test_expansion_never_repeats_a_document(concept_store: MagneticVectorStore):
    retriever = MagneticRetriever(store=concept_store, k=5, expand=10)
    docs = retriever.invoke("query between")
    assert {d.metadata[GROUP_ID_KEY] for d in docs} == {
        concept_store.memory.get([c])[0].group_id for c in ("a-core", "b-one")
    }
    ids = [d.id for d in docs]
    assert len(ids) == len(set(ids)) == len(CELLS)
    hits = [d.id for d in docs if EXPANDED_FROM_KEY not in d.metadata]
    assert len(hits) == 5
    # Every expansion comes right after the hit it expands (or that hit's other expansions).
    current = None
    for doc in docs:
        if EXPANDED_FROM_KEY in doc.metadata:
            assert doc.metadata[EXPANDED_FROM_KEY] == current
        else:
            current = doc.id


async def test_filter_applies_to_hits_and_expansions(concept_store: MagneticVectorStore):
    retriever = MagneticRetriever(
        store=concept_store, k=1, expand=3, filter={"side": {"$ne": "core"}}
    )
    ids = [d.id for d in retriever.invoke("query a-left")]
    assert ids[0] == "a-left" and "a-core" not in ids and set(ids) == {"a-left", "a-right", "a-far"}
    per_call = retriever.invoke("query a-left", filter={"side": "far"}, expand=0)
    assert [d.id for d in per_call] == ["a-far"]


async def test_without_group_metadata_documents_are_as_stored(concept_store: MagneticVectorStore):
    retriever = MagneticRetriever(store=concept_store, k=1, include_group_metadata=False)
    assert retriever.invoke("query a-left") == [
        Document(id="a-left", page_content="a-left", metadata={"name": "a-left", "side": "left"})
    ]


def test_bad_settings_are_refused(concept_store: MagneticVectorStore):
    with pytest.raises(ValueError, match="expand"):
        MagneticRetriever(store=concept_store, expand=-1)
    with pytest.raises(ValueError, match="expand"):
        MagneticRetriever(store=concept_store).invoke("query a-left", expand=-2)
    with pytest.raises(ValueError, match="k"):
        MagneticRetriever(store=concept_store).invoke("query a-left", k=-1)
