"""Rebuilding a Chroma collection (new HNSW settings, or compaction), safe against a crash midway.

Chroma fixes a collection's HNSW graph settings when it is created. Stores created with the
2-link graph this package once used are rebuilt on open: every row is copied into a new
collection ``<name>-rebuild`` built with the current settings, the old collection is dropped
and the new one renamed. A crash while copying leaves the old collection whole (the copy is
dropped on the next open); a crash between the drop and the rename leaves only the copy,
which the next open renames. Compaction (:mod:`magnetic_core._store.compaction`) copies
and swaps the same way, to drop the deleted vectors Chroma's index keeps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from magnetic_core._store.record import TEXT_KEY, WRITER_KEY

__all__ = [
    "COMPACT_MARK",
    "STALE_AFTER",
    "compaction_running",
    "copy_rows",
    "is_fresh",
    "finish_interrupted",
    "rebuild",
    "swap_in",
]

logger = logging.getLogger(__name__)

SUFFIX = "-rebuild"
# A counter-shaped row in a cells collection that says a compaction of it is running; its
# value is the time (Unix seconds) the compaction last showed it is alive (it refreshes the
# mark after every page it copies). A mark older than STALE_AFTER is a compaction that died:
# it no longer holds writers back; the next open drops it with its copy (a mark left without
# a copy is dropped by the first write that sees it).
COMPACT_MARK = "~mag-compacting"
STALE_AFTER = 30.0


def finish_interrupted(client: Any, names: tuple[str, ...]) -> None:
    """Complete or discard rebuilds of ``names`` that a crash interrupted.

    A copy that a compaction in another process is making right now is left alone.
    """
    existing = {c.name for c in client.list_collections()}
    for name in names:
        copy = name + SUFFIX
        if name not in existing:
            if copy in existing:  # died between the drop and the rename: the copy is whole
                client.get_collection(copy, embedding_function=None).modify(name=name)
            continue
        if copy not in existing:
            # Nothing to finish. A compaction that died before making its copy may have
            # left its mark, but reading the rows for it would make Chroma load the
            # collection's vector index (about 200 MB at 100K cells), which a memory that
            # only searches never needs: the first write drops a dead mark instead
            # (``StoreLifecycle._sync``), and until then it holds nobody back.
            continue
        original = client.get_collection(name, embedding_function=None)
        marked = _mark_time(original)
        if marked is not None and is_fresh(marked):
            continue  # a compaction is running in another process: its copy is its own
        client.delete_collection(copy)  # died while copying: the original is whole
        if marked is not None:
            original.delete(ids=[COMPACT_MARK])


def is_fresh(marked: float) -> bool:
    """Whether a compaction's mark refreshed at ``marked`` (Unix seconds) is still alive."""
    return time.time() - marked < STALE_AFTER


def compaction_running(collection: Any) -> bool:
    """Whether ``collection`` carries the mark of a compaction that is still alive."""
    marked = _mark_time(collection)
    return marked is not None and is_fresh(marked)


def _mark_time(collection: Any) -> float | None:
    got = collection.get(ids=[COMPACT_MARK], include=["metadatas"])
    if not got["ids"]:
        return None
    value = (got["metadatas"][0] or {}).get(WRITER_KEY, 0)
    return float(value) if isinstance(value, int | float) else 0.0


def rebuild(client: Any, old: Any, configuration: Mapping[str, Any], batch: int) -> Any:
    """Copy collection ``old`` into one built with ``configuration``; returns the new one."""
    new, rows = copy_rows(client, old, configuration, batch)
    swap_in(client, old.name, new)
    logger.warning("rebuilt collection %r (%d rows) with Chroma's HNSW settings", old.name, rows)
    return new


def copy_rows(
    client: Any,
    old: Any,
    configuration: Mapping[str, Any],
    batch: int,
    skip: frozenset[str] = frozenset(),
    on_page: Callable[[], None] | None = None,
) -> tuple[Any, int]:
    """Copy every row of ``old`` (but the ids in ``skip``) into a new collection.

    The copy is named ``<name>-rebuild`` (:func:`finish_interrupted` knows it) and built with
    ``configuration``; ``on_page`` is called after every page copied. Returns the copy and
    the number of rows copied.
    """
    new = client.create_collection(
        old.name + SUFFIX,
        embedding_function=None,
        configuration=dict(configuration),
        metadata=dict(old.metadata) if old.metadata else None,
    )
    offset = copied = 0
    while True:
        got = old.get(include=["embeddings", "documents", "metadatas"], limit=batch, offset=offset)
        if not got["ids"]:
            break
        offset += len(got["ids"])
        keep = [i for i, cid in enumerate(got["ids"]) if cid not in skip]
        if not keep:
            continue
        # a document a cell row also holds under TEXT_KEY is a stale schema 3 one: not copied
        docs = [
            None if TEXT_KEY in (got["metadatas"][i] or {}) else got["documents"][i]
            for i in keep
        ] if got["documents"] else []  # fmt: skip
        new.add(
            ids=[got["ids"][i] for i in keep],
            embeddings=[got["embeddings"][i] for i in keep],
            metadatas=[got["metadatas"][i] for i in keep],
            # rows without a document (group rows) get an empty one when others have one
            documents=[d or "" for d in docs] if any(d is not None for d in docs) else None,
        )
        copied += len(keep)
        if on_page is not None:
            on_page()
    return new, copied


def swap_in(client: Any, name: str, new: Any) -> None:
    """Drop collection ``name`` and give its name to ``new`` (a crash between: see above)."""
    client.delete_collection(name)
    try:
        new.modify(name=name)
    except Exception:
        # another client opening meanwhile may have finished the rename itself
        if client.get_collection(name, embedding_function=None).id != new.id:
            raise
