"""Embedders: the hashing fallback, MiniLM offline, Ollama against a fake local server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_core.embeddings import (
    Embedder,
    OllamaEmbedder,
    default_embedder,
    embed_checked,
    validate_vectors,
)
from magnetic_core.errors import DimensionError, EmbeddingError, InvalidVectorError


class FakeOllama(BaseHTTPRequestHandler):
    """Answers /api/embed like Ollama: one vector per input, derived from its words."""

    seen: list[list[str]] = []

    def do_POST(self):  # noqa: N802 - http.server naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/api/embed" or body.get("model") != "nomic-embed-text":
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b'{"error": "model not found"}')
            return
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        FakeOllama.seen.append(inputs)
        hasher = HashingEmbedder(768)
        vectors = [hasher.embed_query(t.split(": ", 1)[-1]).tolist() for t in inputs]
        payload = json.dumps({"model": body["model"], "embeddings": vectors}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_ollama():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOllama)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakeOllama.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_hashing_embedder_is_deterministic_and_word_based():
    e = HashingEmbedder(64)
    a, b, c = e.embed_documents(["red apple pie", "red apple pie", "quantum physics"])
    assert np.allclose(a, b)
    assert float(a @ e.embed_query("apple pie")) > float(a @ c)
    assert "not-semantic" in e.name
    assert isinstance(e, Embedder)


def test_ollama_embedder_uses_nomic_task_prefixes(fake_ollama, tmp_path):
    emb = OllamaEmbedder(host=fake_ollama)
    assert emb.dim == 768 and emb.name == "ollama/nomic-embed-text"
    with MagneticMemory(path=str(tmp_path), embedder=emb) as mem:
        mem.add(["the lighthouse keeper logs the storm"])
        hit = mem.search("lighthouse storm", k=1)[0]
    assert hit.text.startswith("the lighthouse")
    flat = [t for batch in FakeOllama.seen for t in batch]
    assert "search_document: the lighthouse keeper logs the storm" in flat
    assert "search_query: lighthouse storm" in flat


def test_default_embedder_prefers_a_live_ollama(fake_ollama):
    emb = default_embedder(ollama_host=fake_ollama)
    assert emb.name == "ollama/nomic-embed-text"


def test_default_embedder_skips_an_absent_ollama_and_logs_choice(caplog):
    caplog.set_level("INFO", logger="magnetic_core.embeddings")
    emb = default_embedder(ollama_host="http://127.0.0.1:9")
    assert emb.name in {"sentence-transformers/all-MiniLM-L6-v2"} or "hashing" in emb.name
    assert "default_embedder: using" in caplog.text or "HashingEmbedder" in caplog.text


def test_ollama_failure_is_an_embedding_error(fake_ollama):
    with pytest.raises(EmbeddingError, match="no-such-model.*not found") as info:
        OllamaEmbedder("no-such-model", host=fake_ollama)
    assert "ollama pull no-such-model" in str(info.value)


def test_validate_vectors_names_the_bad_row():
    with pytest.raises(InvalidVectorError, match="vector 1 contains NaN"):
        validate_vectors([[1.0, 0.0], [np.nan, 1.0]], 2)
    with pytest.raises(DimensionError, match="dimension 3"):
        validate_vectors([[1.0, 0.0, 0.0]], 2)
    assert validate_vectors([1.0, 2.0], 2).dtype == np.float32


def test_embed_checked_rejects_wrong_counts():
    class Short:
        name, dim = "short", 4

        def embed_documents(self, texts):
            return [[1.0, 0, 0, 0]]

        def embed_query(self, text):
            return [1.0, 0, 0, 0]

    with pytest.raises(EmbeddingError, match="1 vectors for 2 texts"):
        embed_checked(Short(), ["a", "b"])


@pytest.mark.minilm
def test_minilm_offline_gives_semantic_unit_vectors(minilm):
    assert minilm.dim == 384 and minilm.name == "sentence-transformers/all-MiniLM-L6-v2"
    v = embed_checked(minilm, ["a dog runs in the park", "a puppy plays outside", "tax law"])
    assert np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_one_query_vector_is_normalised_exactly_as_a_batch_row() -> None:
    # A single vector takes a shorter path; its unit row must be the batch path's, bit for bit.
    rng = np.random.default_rng(7)
    for scale in (1e-30, 1e-3, 1.0, 1e20):
        v = rng.standard_normal(384) * scale
        single = validate_vectors(v, 384)
        batch = validate_vectors(np.stack([v, v]), 384)
        assert single.shape == (1, 384) and single.dtype == np.float32
        np.testing.assert_array_equal(single[0], batch[0])


@pytest.mark.parametrize("bad", [[0.0, 0.0, 0.0], [1.0, float("nan"), 0.0], [float("inf"), 0, 0]])
def test_a_bad_single_query_vector_is_refused_as_in_a_batch(bad) -> None:
    with pytest.raises(InvalidVectorError, match="vector 0"):
        validate_vectors(bad, 3)
