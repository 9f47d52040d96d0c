"""The stamp a store carries: read without opening it, and a join threshold chosen at
creation that stays in force when the store is reopened."""

from __future__ import annotations

from pathlib import Path

import chromadb
import pytest

from magnetic_core import HashingEmbedder, InvalidInputError, MagneticMemory, MemoryConfig
from magnetic_core._store.persistence import read_settings


def test_read_settings_reads_without_creating(tmp_path: Path):
    client = chromadb.PersistentClient(path=str(tmp_path / "s"))
    assert read_settings(client, "default") is None
    assert client.list_collections() == []  # nothing was created
    with pytest.raises(InvalidInputError, match="invalid namespace"):
        read_settings(client, "bad name")
    with MagneticMemory(client=client, embedder=HashingEmbedder(64)) as mem:
        mem.add(["x"])
    stamp = read_settings(client, "default")
    assert stamp is not None
    assert (stamp["mag_embedder"], stamp["mag_dim"]) == ("hashing-64(not-semantic)", 64)


def test_a_threshold_chosen_at_creation_survives_reopen_and_clear(tmp_path: Path):
    path = str(tmp_path / "s")
    config = MemoryConfig(join_threshold=0.97)
    with MagneticMemory(path=path, embedder=HashingEmbedder(), config=config) as mem:
        mem.add(["red apples", "green apples"])
    with MagneticMemory(path=path, embedder=HashingEmbedder()) as mem:
        assert (mem.join_threshold, mem.stats().threshold_source) == (0.97, "configured")
        mem.clear()
    with MagneticMemory(path=path, embedder=HashingEmbedder()) as mem:
        assert mem.join_threshold == 0.97
    # An explicit setting on reopen still wins for that session.
    with MagneticMemory(
        path=path, embedder=HashingEmbedder(), config=MemoryConfig(join_threshold=0.6)
    ) as mem:
        assert mem.join_threshold == 0.6
