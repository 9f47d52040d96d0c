"""Compaction: the cells collection copied without its dead weight and swapped in.

Chroma's HNSW index keeps every deleted vector, in memory and on disk
(chroma-core/chroma#2594), so a store of steady size under deletes and re-adds grows by
about 1.7 KB per deleted 384-d cell, and Chroma's per-write cost grows with it. A compaction
copies the live rows into a new collection and swaps it in under the old name
(:mod:`magnetic_core._store.rebuild`: a crash at any point reopens to the old or the new
collection, whole).

Other writers, in this process or another, must not write into the old collection while
it is copied (their write would be acknowledged, then dropped with it):

1. a mark row goes into the cells collection. Writers read it with the change counters they
   read before every write anyway, and wait while it is there
   (:meth:`~magnetic_core._store.lifecycle.StoreLifecycle._sync`). The compaction refreshes
   it after every page it copies; a mark not refreshed for ``rebuild.STALE_AFTER`` seconds
   is a compaction that died, which holds nobody back (the next open drops its copy, the
   first write that sees the mark drops the mark).
2. a short settling wait lets writes that read the counters before the mark finish.
3. the counters and the write journal are read; the rows are copied; both are read again.
   Any change (another writer got through) gives up and drops the copy: nothing is lost,
   and a later compaction tries again.
4. the old collection is dropped and the copy renamed; the mark was not copied.

A writer left holding the old collection gets "does not exist" on its next call and makes
it again on the new one (:meth:`~magnetic_core._store.calls.ChromaCalls._call`): the rows
are the same.

Chroma 1.5 leaves a dropped collection's index files on disk (chroma-core/chroma#5520) and
keeps its index in memory until the client closes; :func:`remove_orphans` deletes the files
of segments Chroma no longer knows, once the client that had them open is closed.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from magnetic_core._store.calls import filler
from magnetic_core._store.group_rows import JOURNAL_KEY
from magnetic_core._store.persistence import _COLLECTION_CONFIG, ChromaStore
from magnetic_core._store.rebuild import (
    COMPACT_MARK,
    SUFFIX,
    compaction_running,
    copy_rows,
    swap_in,
)
from magnetic_core._store.record import WRITER_KEY
from magnetic_core.types import CompactionReport

__all__ = [
    "COMPACT_FROM",
    "DELETED_KEY",
    "compact_cells",
    "remove_orphans",
]

logger = logging.getLogger(__name__)

# Setting on the cells collection: cells deleted since the last compaction (every writer
# adds its own deletes when it closes); a compaction is due when they outnumber the live.
DELETED_KEY = "mag_deleted"
# Fewest deleted cells (since the last compaction) that make one due, however small the store.
COMPACT_FROM = 2000
# How long writes that read the counters before the mark went in may take to land.
SETTLE = 1.0


def compact_cells(store: ChromaStore, *, settle: float | None = None) -> CompactionReport:
    """Copy the cells collection without its deleted vectors and swap the copy in.

    The caller holds the memory's lock in intent mode (no writer of this process runs).

    Args:
        store: the namespace's opened store; ``store.cells`` is the new collection after.
        settle: seconds to wait after marking, for other processes' writes in flight
            (default :data:`SETTLE`).
    """
    start = time.perf_counter()
    old = store.cells
    busy = _busy(store, old)
    if busy:
        return CompactionReport(0, time.perf_counter() - start, busy)
    filler_row = _filler_row(store)

    def mark() -> None:  # says a compaction is running and alive (refreshed every page)
        store._call(
            "mark a compaction",
            old.upsert,
            ids=[COMPACT_MARK],
            embeddings=filler_row,
            documents=[""],
            metadatas=[{WRITER_KEY: int(time.time())}],
        )

    mark()
    _drop_leftover(store, old.name + SUFFIX)
    copy: Any = None
    try:
        time.sleep(SETTLE if settle is None else settle)
        before = store.writer_counters()
        copy, rows = store._call(
            "copy the cells",
            copy_rows,
            store.client,
            old,
            _COLLECTION_CONFIG,
            store.batch,
            skip=frozenset({COMPACT_MARK}),
            on_page=mark,
        )
        changed = _changed(store, old, before, rows)
        if changed:
            return CompactionReport(rows, time.perf_counter() - start, changed)
        settings = dict(store._call("read settings", _metadata, store.client, old.name))
        settings[DELETED_KEY] = 0
        store._call("stamp the copy", copy.modify, metadata=settings)
        store._call("swap the copy in", swap_in, store.client, old.name, copy)
        store.cells, copy = copy, None
    finally:
        if copy is not None:  # given up: the original stays, without its mark
            _drop(store, copy.name)
            store._call("unmark a compaction", old.delete, ids=[COMPACT_MARK])
    seconds = time.perf_counter() - start
    logger.info("compacted namespace %r: %d rows in %.1f s", store.namespace, rows, seconds)
    return CompactionReport(rows, seconds)


def _busy(store: ChromaStore, old: Any) -> str:
    """Why a compaction cannot start now ("" when it can)."""
    if _writing(store):
        return "a write of several batches is under way"
    if store._call("read a compaction's mark", compaction_running, old):
        return "another compaction of this store is running"
    return ""


def _changed(store: ChromaStore, old: Any, before: Any, rows: int) -> str:
    """Why a finished copy must not be swapped in ("" when it may)."""
    if store.writer_counters() != before or _writing(store):
        return "another writer wrote meanwhile"
    if rows != store._call("count the cells", old.count) - 1:  # all but the mark
        return "the copy did not hold every row (the collection changed while paged)"
    return ""


def remove_orphans(client: Any) -> float:
    """Delete the index files of segments a persistent Chroma client no longer has.

    Call it with a client opened after the one that dropped the collections was closed (the
    dropped index may be flushed to its files until then). Best effort: any doubt (a server
    client, an unreadable catalogue) removes nothing. Returns the megabytes removed.
    """
    try:
        settings = client.get_settings()
        if not getattr(settings, "is_persistent", False):
            return 0.0
        root = Path(settings.persist_directory)
        uri = f"file:{root / 'chroma.sqlite3'}?mode=ro"
        with sqlite3.connect(uri, uri=True) as db:
            known = {row[0] for row in db.execute("SELECT id FROM segments")}
    except Exception as e:  # noqa: BLE001 - reclaiming disk never blocks the store
        logger.info("dropped index files were not looked for: %s", e)
        return 0.0
    freed = 0
    for entry in root.iterdir():
        if not (entry.is_dir() and _is_uuid(entry.name)) or entry.name in known:
            continue
        if not (entry / "header.bin").exists():
            continue  # not an HNSW segment directory: not ours to judge
        size = sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
        shutil.rmtree(entry, ignore_errors=True)
        freed += size
    return freed / 1e6


def _writing(store: ChromaStore) -> bool:
    """Whether a write journaled over several batches is under way (its marker is stored)."""
    return bool(store.log_read({JOURNAL_KEY: "m"})["ids"])


def _filler_row(store: ChromaStore) -> np.ndarray:
    return filler(int(store.settings().get("mag_dim", 0)) or 1)


def _metadata(client: Any, name: str) -> dict[str, Any]:
    return dict(client.get_collection(name, embedding_function=None).metadata or {})


def _drop_leftover(store: ChromaStore, name: str) -> None:
    """Drop the copy a compaction that died left (no compaction but ours runs now)."""
    names = {c if isinstance(c, str) else c.name for c in store.client.list_collections()}
    if name in names:
        store._call("drop a dead compaction's copy", store.client.delete_collection, name)


def _drop(store: ChromaStore, name: str) -> None:
    try:
        store.client.delete_collection(name)
    except Exception as e:  # noqa: BLE001 - a leftover copy is dropped on the next open
        logger.warning("a compaction's copy %r was not dropped: %s", name, e)


def _is_uuid(name: str) -> bool:
    try:
        uuid.UUID(name)
    except ValueError:
        return False
    return True
