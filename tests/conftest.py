"""Fixtures shared by every test package: the real MiniLM model, data paths, a fake embedder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

ROOT = Path(__file__).resolve().parent.parent
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
