"""A small store for the search tests: clustered vectors with texts, entities, metadata."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from magnetic_core import MagneticMemory, MemoryConfig
from magnetic_core.embeddings import VectorsOnly

DIM = 16
TOPICS = ("Paris", "Berlin", "Lisbon", "Oslo", "Vienna", "Dublin", "Madrid", "Prague")
RARE = (3, 50, 97, 140)  # the cells that name a rare entity, "Ada Lovelace"
WORDS = ("trains", "museums", "rivers", "bakeries", "bridges", "markets", "parks", "castles")


@dataclass
class Store:
    """The open memory and what was put in it (unit vectors, by id)."""

    mem: MagneticMemory
    ids: list[str]
    vectors: np.ndarray

    def exact(self, q: np.ndarray, k: int, among: list[str] | None = None) -> list[str]:
        """The reference: the ``k`` best ids by exact cosine (ties by insertion order)."""
        rows = range(len(self.ids)) if among is None else [self.ids.index(c) for c in among]
        rows = list(rows)
        scores = self.vectors[rows] @ q
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.ids[rows[i]] for i in order]


def build(path: str, n: int = 160, seed: int = 0) -> Store:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((len(TOPICS), DIM))
    topic = rng.integers(0, len(TOPICS), n)
    vecs = centres[topic] + 0.35 * rng.standard_normal((n, DIM))
    vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
    ids = [f"c{i}" for i in range(n)]
    texts = [
        f"note {i}: a trip to {TOPICS[t]} for its {WORDS[(t + i) % len(WORDS)]}"
        + (" with Ada Lovelace" if i in RARE else "")
        for i, t in enumerate(topic)
    ]
    metas = [{"n": i, "topic": TOPICS[t], "even": i % 2 == 0} for i, t in enumerate(topic)]
    config = MemoryConfig(join_threshold=0.75, max_group_size=24, lexical_weight=0.3)
    mem = MagneticMemory(path=path, embedder=VectorsOnly(DIM), config=config)
    mem.add(texts, ids=ids, metadatas=metas, vectors=vecs)
    return Store(mem, ids, mem.get_vectors(ids))


def unit(rng: np.random.Generator, dim: int = DIM) -> np.ndarray:
    v = rng.standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)
