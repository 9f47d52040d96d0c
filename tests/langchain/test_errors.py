"""Every user mistake through the LangChain adapter is a MagneticError (so a tool catches it).

Each error is also the stdlib type LangChain code expects (``ValueError`` for a bad value,
``TypeError`` for a bad type or an unknown keyword), as httpx's errors are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from magnetic_core import HashingEmbedder, InvalidInputError, MagneticError, WrongTypeError
from magnetic_langchain import (
    MagneticEmbeddings,
    MagneticRetriever,
    MagneticVectorStore,
    create_memory_tools,
)
from magnetic_langchain.embeddings import LangChainEmbedder

MISTAKES: dict[str, tuple[Callable[[MagneticVectorStore], Any], type[Exception], str]] = {
    "one string for texts": (lambda s: s.add_texts("one text"), TypeError, "one string"),
    "ids and texts differ": (lambda s: s.add_texts(["a"], ids=["1", "2"]), ValueError, "2 ids"),
    "unknown add keyword": (lambda s: s.add_texts(["a"], colour=1), TypeError, "colour"),
    "bad batch size": (lambda s: s.add_texts(["a"], batch_size=0), ValueError, "batch_size"),
    "unknown search keyword": (lambda s: s.similarity_search("a", where={}), TypeError, "where"),
    "filter given twice": (
        lambda s: s.delete(filter={"a": 1}, where={"a": 1}),
        ValueError,
        "twice",
    ),
    "mmr weight": (
        lambda s: s.max_marginal_relevance_search("a", lambda_mult=3),
        ValueError,
        "lambda_mult",
    ),
    "negative expansion": (
        lambda s: MagneticRetriever(store=s).invoke("a", expand=-1),
        ValueError,
        "expand",
    ),
    "retriever k below zero": (
        lambda s: MagneticRetriever(store=s, k=-1),
        ValueError,
        "k must be an integer >= 0, got -1",
    ),
    "retriever k as text": (lambda s: MagneticRetriever(store=s, k="3"), ValueError, "k must"),
    "retriever expand as float": (
        lambda s: MagneticRetriever(store=s, expand=2.0),
        ValueError,
        "expand must be an integer",
    ),
    "retriever over no store": (
        lambda s: MagneticRetriever(store=s.memory),
        TypeError,
        "store=.*MagneticVectorStore",
    ),
    "unknown search_type": (
        lambda s: s.as_retriever(search_type="nearest"),
        ValueError,
        "search_type must be one of similarity, similarity_score_threshold, mmr",
    ),
    "score threshold missing": (
        lambda s: s.as_retriever(search_type="similarity_score_threshold"),
        ValueError,
        "score_threshold",
    ),
    "tools on a memory": (lambda s: create_memory_tools(s.memory), TypeError, "VectorStore"),
    "embeddings of a core embedder": (
        lambda s: LangChainEmbedder(HashingEmbedder()),  # type: ignore[arg-type]
        TypeError,
        "LangChain Embeddings",
    ),
    "zero dimension": (
        lambda s: LangChainEmbedder(DeterministicFakeEmbedding(size=4), dim=0),
        ValueError,
        "dim",
    ),
    "memory and path": (
        lambda s: MagneticVectorStore(memory=s.memory, path="elsewhere"),
        ValueError,
        "not both",
    ),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_user_mistake_is_a_magnetic_error_and_the_stdlib_type(mistake, tmp_path):
    action, stdlib, fragment = MISTAKES[mistake]
    store = MagneticVectorStore(MagneticEmbeddings(HashingEmbedder(dim=32)), path=tmp_path)
    store.add_texts(["kept"], ids=["kept"])
    with pytest.raises(MagneticError, match=fragment) as caught:
        action(store)
    assert isinstance(caught.value, stdlib)
    assert isinstance(caught.value, WrongTypeError if stdlib is TypeError else InvalidInputError)
    assert caught.value.hint  # says how to fix it
    assert [d.id for d in store.get_by_ids(["kept"])] == ["kept"]  # nothing lost
    store.close()
