"""Fixtures of the LlamaIndex tests: stores on tmp_path, hand-made nodes, sync or async calls."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

from magnetic_llamaindex import MagneticVectorStore

DIM = 8

ASYNC_TWINS = {
    "add": "async_add",
    "query": "aquery",
    "delete": "adelete",
    "get_nodes": "aget_nodes",
    "delete_nodes": "adelete_nodes",
    "clear": "aclear",
}


def vec(*head: float) -> list[float]:
    """A DIM-d vector starting with ``head`` (zeros after)."""
    return [float(x) for x in head] + [0.0] * (DIM - len(head))


def unit(v: list[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    return a / np.linalg.norm(a)


def node(
    node_id: str,
    text: str,
    embedding: list[float],
    metadata: dict[str, Any] | None = None,
    doc: str | None = None,
) -> TextNode:
    """A TextNode; ``doc`` becomes its source document (ref_doc_id)."""
    relationships = {}
    if doc is not None:
        relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc)
    return TextNode(
        id_=node_id,
        text=text,
        embedding=embedding,
        metadata=metadata or {},
        relationships=relationships,
    )


@pytest.fixture
def client(tmp_path: Path, chroma_backend: Any) -> Iterator[Any]:
    """An embedded client, or on the server run a client of the real Chroma server."""
    c = chroma_backend.client(tmp_path / "chroma")
    yield c
    c.close()


@pytest.fixture
def make_store(client: Any) -> Iterator[Callable[..., MagneticVectorStore]]:
    """Build stores on the test's client (a fresh namespace each); closed at teardown."""
    opened: list[MagneticVectorStore] = []

    def make(**kwargs: Any) -> MagneticVectorStore:
        if "memory" not in kwargs and "path" not in kwargs:
            kwargs.setdefault("client", client)
            kwargs.setdefault("namespace", f"ns{len(opened)}")
            kwargs.setdefault("dim", DIM)
        store = MagneticVectorStore(**kwargs)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: Callable[..., MagneticVectorStore]) -> MagneticVectorStore:
    """An empty store of DIM-d vectors supplied by the test."""
    return make_store()


@pytest.fixture(params=["sync", "async"])
def call(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``await call(store, "add", nodes)`` runs ``add`` or its async twin ``async_add``."""

    async def run(store: MagneticVectorStore, method: str, *args: Any, **kwargs: Any) -> Any:
        if request.param == "sync":
            return getattr(store, method)(*args, **kwargs)
        return await getattr(store, ASYNC_TWINS[method])(*args, **kwargs)

    return run
