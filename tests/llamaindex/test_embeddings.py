"""MagneticEmbedding (core models for LlamaIndex) and PrecomputedEmbedder (LlamaIndex vectors)."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding

from magnetic_core import HashingEmbedder
from magnetic_core.errors import EmbeddingError, InvalidInputError
from magnetic_llamaindex import LlamaIndexEmbedder, MagneticEmbedding, PrecomputedEmbedder


def test_magnetic_embedding_gives_the_core_models_vectors():
    core = HashingEmbedder(dim=32)
    embed_model = MagneticEmbedding(core)
    assert embed_model.model_name == core.name and embed_model.dim == 32
    texts = ["the cat sat", "dogs bark loudly", "the cat sat"]
    got = np.array(embed_model.get_text_embedding_batch(texts))
    np.testing.assert_allclose(got, core.embed_documents(texts), atol=1e-6)
    np.testing.assert_allclose(
        embed_model.get_query_embedding("cat"), core.embed_query("cat"), atol=1e-6
    )


async def test_magnetic_embedding_async_matches_sync():
    embed_model = MagneticEmbedding(HashingEmbedder(dim=32))
    assert await embed_model.aget_query_embedding("x y") == embed_model.get_query_embedding("x y")
    batch = await embed_model.aget_text_embedding_batch(["a b", "c d"])
    assert batch == embed_model.get_text_embedding_batch(["a b", "c d"])


def test_magnetic_embedding_refuses_what_is_not_an_embedder():
    with pytest.raises(InvalidInputError, match="Embedder protocol, got str"):
        MagneticEmbedding("all-MiniLM-L6-v2")  # type: ignore[arg-type]


def test_precomputed_embedder_names_its_model_and_refuses_to_embed():
    e = PrecomputedEmbedder(384, "sentence-transformers/all-MiniLM-L6-v2")
    assert (e.name, e.dim) == ("sentence-transformers/all-MiniLM-L6-v2", 384)
    for attempt in (lambda: e.embed_query("hi"), lambda: e.embed_documents(["hi"])):
        with pytest.raises(EmbeddingError, match="cannot embed text itself"):
            attempt()


@pytest.mark.parametrize("dim", [0, -3, 2.5, True, "384"])
def test_precomputed_embedder_needs_a_positive_integer_dim(dim):
    with pytest.raises(InvalidInputError, match="dim must be an integer >= 1"):
        PrecomputedEmbedder(dim)


def test_precomputed_embedder_needs_a_name():
    with pytest.raises(InvalidInputError, match="name must be a non-empty string"):
        PrecomputedEmbedder(8, " ")


class OfflineModel(BaseEmbedding):
    """An embed model whose server is down."""

    def _get_query_embedding(self, query):
        raise ConnectionError("model server offline")

    async def _aget_query_embedding(self, query):
        raise ConnectionError("model server offline")

    def _get_text_embedding(self, text):
        raise ConnectionError("model server offline")


def test_llamaindex_embedder_gives_the_models_vectors_to_the_core():
    embed_model = MagneticEmbedding(HashingEmbedder(dim=16))
    core = LlamaIndexEmbedder(embed_model)
    assert (core.name, core.dim) == (embed_model.model_name, 16)
    np.testing.assert_allclose(
        core.embed_documents(["a b", "c"]), embed_model.get_text_embedding_batch(["a b", "c"])
    )
    np.testing.assert_allclose(core.embed_query("a b"), embed_model.get_query_embedding("a b"))


def test_llamaindex_embedder_reports_a_model_that_cannot_embed():
    with pytest.raises(EmbeddingError, match="failed to embed a probe text: model server offline"):
        LlamaIndexEmbedder(OfflineModel(model_name="offline"))
    assert LlamaIndexEmbedder(OfflineModel(model_name="offline"), dim=8).dim == 8
    with pytest.raises(InvalidInputError, match="BaseEmbedding, got HashingEmbedder"):
        LlamaIndexEmbedder(HashingEmbedder(dim=8))  # type: ignore[arg-type]


def test_a_bad_batch_size_is_a_magnetic_error_naming_it():
    with pytest.raises(InvalidInputError, match="embed_batch_size=0") as caught:
        MagneticEmbedding(HashingEmbedder(dim=8), embed_batch_size=0)
    assert caught.value.hint == "pass embed_batch_size=<a value > 0>"
