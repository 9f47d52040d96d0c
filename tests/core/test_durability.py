"""Durability promises of the store: paths, failed writes, big writes, crashes."""

from __future__ import annotations

import os

from magnetic_core import HashingEmbedder, MagneticMemory


def test_relative_paths_from_two_working_directories_are_two_stores(tmp_path, monkeypatch):
    # chromadb caches clients by the path string: "./store" from two directories must not
    # reach the first store.
    emb = HashingEmbedder(32)
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    monkeypatch.chdir(tmp_path / "one")
    first = MagneticMemory(path="./store", embedder=emb)
    first.add(["written from one"], ids=["a"])
    monkeypatch.chdir(tmp_path / "two")
    second = MagneticMemory(path="./store", embedder=emb)
    try:
        assert second.count() == 0
        second.add(["written from two"], ids=["b"])
        assert first.get(["b"]) == []
        assert os.path.isdir(tmp_path / "two" / "store")
    finally:
        second.close()
        first.close()
