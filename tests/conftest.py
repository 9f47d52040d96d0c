"""Fixtures shared by every test package: MiniLM, data paths, a fake embedder, a Chroma server."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True, scope="session")
def helper_compiles_on_the_query_thread() -> Iterator[None]:
    """The search helper compiles a kernel it lacks on the query's thread in the tests, so
    that a test knows which queries it answered (users' processes compile it on a thread of
    its own; tests/core/_search/test_helper.py checks that in a process of its own)."""
    from magnetic_core._search import helper

    helper.COMPILE_BESIDE = False
    yield
    helper.COMPILE_BESIDE = True


# The evaluation data sits beside the checkout (CI lays shared/ next to it); elsewhere point
# MAGNETIC_BENCH_DATA at it, the variable the benchmarks read too.
SHARED_DATA = Path(os.environ.get("MAGNETIC_BENCH_DATA", str(ROOT.parent / "shared" / "data")))


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 embedder from the offline package (loaded once)."""
    from magnetic_core.embeddings import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (read by path only; never copied into the repo)."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared data not found at {SHARED_DATA}: set MAGNETIC_BENCH_DATA to its path")
    return SHARED_DATA


@pytest.fixture
def hashing():
    from magnetic_core.embeddings import HashingEmbedder

    return HashingEmbedder(dim=128)


class ChromaServer:
    """A real ``chroma run`` process on 127.0.0.1 that a test can stop and start again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> None:
        """Start the server on the same path and port and wait until it answers."""
        import chromadb

        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from chromadb.cli.cli import app; app()",
                "run",
                "--path",
                str(self.path),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + timeout
        while True:
            try:
                chromadb.HttpClient(host="127.0.0.1", port=self.port).heartbeat()
                return
            except Exception:
                if time.time() > deadline or self.proc.poll() is not None:
                    self.stop()
                    pytest.fail("the chroma server did not start")
                time.sleep(0.2)

    def stop(self) -> None:
        """Kill the server (an outage, not a shutdown)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.proc = None

    def client(self) -> Any:
        """A new ``chromadb.HttpClient`` of this server."""
        import chromadb

        return chromadb.HttpClient(host="127.0.0.1", port=self.port)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    """One real Chroma server for the whole session (namespaces keep tests apart)."""
    server = ChromaServer(tmp_path_factory.mktemp("chroma-server"))
    server.start()
    yield server
    server.stop()


# The main suites of the core and of both adapters run twice: against an embedded
# PersistentClient and against HttpClient on one real `chroma run` server for the session.
SERVER_SUITES = (
    "tests/core/test_memory.py",
    "tests/langchain/test_standard.py",
    "tests/llamaindex/test_vector_store.py",
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "chroma_backend" not in metafunc.fixturenames:
        return
    path = Path(str(metafunc.definition.fspath)).resolve()
    if any(path == ROOT / suite for suite in SERVER_SUITES):
        metafunc.parametrize("chroma_backend", ["local", "server"], indirect=True)


class Backend:
    """Where the stores of one test live: embedded at a path, or on the session's server."""

    def __init__(self, name: str, server: ChromaServer | None) -> None:
        self.name, self.server = name, server

    def client(self, path: str | os.PathLike[str]) -> Any:
        """The client of the store at ``path`` (on the server: one database per path)."""
        import chromadb

        resolved = os.path.abspath(os.fspath(path))
        if self.server is None:
            return chromadb.PersistentClient(path=resolved)
        from chromadb.config import Settings

        database = "db" + hashlib.sha1(resolved.encode()).hexdigest()[:20]
        admin = chromadb.AdminClient(
            Settings(
                chroma_api_impl="chromadb.api.fastapi.FastAPI",
                chroma_server_host="127.0.0.1",
                chroma_server_http_port=self.server.port,
            )
        )
        try:
            admin.get_database(database)
        except Exception:
            admin.create_database(database)
        return chromadb.HttpClient(host="127.0.0.1", port=self.server.port, database=database)


@pytest.fixture(autouse=True)
def chroma_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backend:
    """``local`` everywhere; also ``server`` in SERVER_SUITES, where every store opened by
    path (``MagneticMemory(path=...)``, and so the adapters) goes to the real server."""
    name = getattr(request, "param", "local")
    if name == "local":
        return Backend("local", None)
    backend = Backend("server", request.getfixturevalue("chroma_server"))
    import magnetic_core._store.lifecycle

    monkeypatch.setattr(magnetic_core._store.lifecycle, "open_client", backend.client)
    return backend


@pytest.fixture
def own_chroma_server(tmp_path: Path) -> Iterator[ChromaServer]:
    """A real Chroma server for one test, which it may kill and restart (outages)."""
    server = ChromaServer(tmp_path / "server")
    server.start()
    yield server
    server.stop()
