"""Copying a Chroma collection and swapping the copy in, safe against a crash at any point."""

from __future__ import annotations

import time

import chromadb
import pytest

from magnetic_core._store.rebuild import (
    COMPACT_MARK,
    STALE_AFTER,
    SUFFIX,
    compaction_running,
    copy_rows,
    finish_interrupted,
    rebuild,
)
from magnetic_core._store.record import WRITER_KEY

CONFIG = {"hnsw": {"space": "cosine"}}


@pytest.fixture
def client(tmp_path):
    return chromadb.PersistentClient(str(tmp_path / "chroma"))


def _filled(client, name: str, n: int, *, documents: bool = True):
    col = client.create_collection(name, embedding_function=None, metadata={"stamp": "kept"})
    col.add(
        ids=[f"r{i}" for i in range(n)],
        embeddings=[[1.0, float(i), 0.5] for i in range(n)],
        metadatas=[{"i": i} for i in range(n)],
        documents=[f"text {i}" for i in range(n)] if documents else None,
    )
    return col


def _rows(col) -> dict:
    got = col.get(include=["embeddings", "documents", "metadatas"])
    return {
        cid: ([round(float(x), 4) for x in vec], doc, meta)
        for cid, vec, doc, meta in zip(
            got["ids"], got["embeddings"], got["documents"], got["metadatas"], strict=True
        )
    }


def test_copy_rows_copies_every_row_page_by_page_except_the_skipped(client):
    old = _filled(client, "source", 23)
    new, copied = copy_rows(client, old, CONFIG, batch=5, skip=frozenset({"r3", "r17"}))
    assert copied == 21
    assert new.name == "source" + SUFFIX
    assert new.metadata == {"stamp": "kept"}
    expected = {k: v for k, v in _rows(old).items() if k not in {"r3", "r17"}}
    assert _rows(new) == expected


def test_rows_without_documents_are_copied_without_documents(client):
    old = _filled(client, "groups-like", 4, documents=False)
    new, copied = copy_rows(client, old, CONFIG, batch=10)
    assert copied == 4
    assert all(doc is None for _, doc, _ in _rows(new).values())


def test_rebuild_swaps_the_copy_in_under_the_old_name(client):
    old = _filled(client, "cells", 12)
    before = _rows(old)
    new = rebuild(client, old, CONFIG, batch=5)
    assert new.name == "cells"
    assert [c.name for c in client.list_collections()] == ["cells"]
    assert _rows(client.get_collection("cells")) == before


def test_finish_interrupted_drops_a_copy_whose_original_is_whole(client):
    _filled(client, "cells", 5)
    client.create_collection("cells" + SUFFIX, embedding_function=None)
    finish_interrupted(client, ("cells", "groups"))
    assert [c.name for c in client.list_collections()] == ["cells"]


def test_finish_interrupted_renames_a_copy_whose_original_was_dropped(client):
    old = _filled(client, "cells", 5)
    before = _rows(old)
    new, _ = copy_rows(client, old, CONFIG, batch=10)
    client.delete_collection("cells")  # the crash came between the drop and the rename
    finish_interrupted(client, ("cells",))
    assert [c.name for c in client.list_collections()] == ["cells"]
    assert _rows(client.get_collection("cells")) == before


def test_a_running_compaction_keeps_its_copy_and_a_stale_one_does_not(client):
    old = _filled(client, "cells", 5)
    old.upsert(ids=[COMPACT_MARK], embeddings=[[1.0, 0.0, 0.0]],
               metadatas=[{WRITER_KEY: int(time.time())}])  # fmt: skip
    assert compaction_running(old)
    client.create_collection("cells" + SUFFIX, embedding_function=None)
    finish_interrupted(client, ("cells",))
    assert sorted(c.name for c in client.list_collections()) == ["cells", "cells" + SUFFIX]
    # a mark older than STALE_AFTER is a compaction that died: its copy goes
    old.upsert(ids=[COMPACT_MARK], embeddings=[[1.0, 0.0, 0.0]],
               metadatas=[{WRITER_KEY: int(time.time() - STALE_AFTER - 5)}])  # fmt: skip
    assert not compaction_running(old)
    finish_interrupted(client, ("cells",))
    assert [c.name for c in client.list_collections()] == ["cells"]


def test_no_mark_means_no_compaction_running(client):
    assert not compaction_running(_filled(client, "cells", 2))
