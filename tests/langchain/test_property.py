"""Property test: the vector store against a plain dict reference model.

Random batches of upserts and deletes on a small id pool; after each step the store must
hold exactly the reference's documents, and a search must return the exact top-k cosine
distances over them (random 8-d vectors, so groups are no help: fallback and re-rank are).
"""

from __future__ import annotations

import itertools

import chromadb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from magnetic_langchain import MagneticVectorStore

IDS = [f"id{i}" for i in range(8)]
WORDS = ["apple", "river", "stone", "cloud", "ember", "frost"]
EMBEDDING = DeterministicFakeEmbedding(size=8)

upsert = st.lists(
    st.tuples(st.sampled_from(IDS), st.sampled_from(WORDS), st.integers(0, 3)),
    min_size=1,
    max_size=6,
    unique_by=lambda row: row[0],
).map(lambda rows: ("upsert", rows))
delete = st.lists(st.sampled_from(IDS), max_size=4).map(lambda ids: ("delete", ids))
steps = st.lists(st.one_of(upsert, delete), min_size=1, max_size=6)

_namespaces = itertools.count()


@pytest.fixture(scope="module")
def client():
    client = chromadb.EphemeralClient()
    yield client
    close = getattr(client, "close", None)
    if close:
        close()


def _unit(v: list[float]) -> np.ndarray:
    arr = np.asarray(v, dtype=float)
    return arr / np.linalg.norm(arr)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=steps, query=st.sampled_from(WORDS), k=st.integers(1, 5))
def test_store_matches_reference(client, steps, query, k):
    store = MagneticVectorStore(EMBEDDING, client=client, namespace=f"prop{next(_namespaces)}")
    reference: dict[str, Document] = {}
    try:
        for kind, payload in steps:
            if kind == "upsert":
                docs = [
                    Document(id=i, page_content=f"{w} {n}", metadata={"n": n})
                    for i, w, n in payload
                ]
                store.add_documents(docs)
                reference.update({d.id: d for d in docs})
            else:
                store.delete(payload)
                for i in payload:
                    reference.pop(i, None)

            assert store.get_by_ids(IDS) == [reference[i] for i in IDS if i in reference]
            assert store.memory.count() == len(reference)

        q = _unit(EMBEDDING.embed_query(query))
        expected = sorted(
            1 - float(_unit(EMBEDDING.embed_query(d.page_content)) @ q) for d in reference.values()
        )[:k]
        got = store.similarity_search_with_score(query, k=k, entity_boost=0.0, lexical_weight=0.0)
        assert [s for _, s in got] == pytest.approx(expected, abs=1e-5)
        assert all(reference[d.id] == d for d, _ in got)
    finally:
        store.memory.clear()
        store.close()
