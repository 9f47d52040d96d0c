"""The sleep pass's intent log: what a pass will move, written before anything moves.

A pass changes the group of many cells, written to Chroma in several batches, so a crash
could leave some rows moved and others not. Before the first row changes, the pass writes
every move (cell id -> new group) to the namespace's journal, entries first and the head
record last. Opening a memory replays a journal whose head exists (the pass was under way:
finish it), and discards entries without a head (the pass had not started writing cells).
So a pass killed at any moment reopens to the state after it or before it, never half.

It is the same journal as the write path's (:mod:`magnetic_core._store.journal`): rows in
the groups collection, told apart by their kind (``"s"`` entries, ``"sh"`` the head), so a
namespace keeps two collections. Stores written before keep their pass in a collection of
its own, ``mag-<ns>-journal``; an unfinished pass there is still replayed, and the
collection dropped once it is done.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from magnetic_core._store.persistence import JOURNAL_KEY, ChromaStore
from magnetic_core.errors import PersistenceError

__all__ = ["SleepJournal"]

logger = logging.getLogger(__name__)

_HEAD = "mag-sleep"
_ENTRY, _HEAD_KIND = "s", "sh"
_ENTRIES_PER_RECORD = 2000


class SleepJournal:
    """One namespace's sleep intent log (rows in its groups collection).

    Args:
        store: the namespace's store (opened).
        dim: the embedding dimension (journal rows carry a filler vector of it).
    """

    def __init__(self, store: ChromaStore, dim: int) -> None:
        self.store, self.dim = store, dim
        self.legacy = f"mag-{store.namespace}-journal"

    def begin(self, moves: Mapping[str, str], pass_id: str) -> None:
        """Record the moves of a pass; the head record, written last, makes it binding."""
        items = list(moves.items())
        chunks = [
            json.dumps(dict(items[i : i + _ENTRIES_PER_RECORD]), separators=(",", ":"))
            for i in range(0, len(items), _ENTRIES_PER_RECORD)
        ]
        ids = [f"s:{pass_id}-{k}" for k in range(len(chunks))]
        entry = {JOURNAL_KEY: _ENTRY, "p": pass_id}
        self.store.log_write(ids, None, [entry] * len(ids), chunks, dim=self.dim)
        head = {JOURNAL_KEY: _HEAD_KIND, "p": pass_id, "n": len(ids)}
        self.store.log_write([_HEAD], None, [head], dim=self.dim)

    def pending(self) -> dict[str, str]:
        """The moves of an unfinished pass (empty when there is none); stray entries dropped."""
        head = self.store.log_read({JOURNAL_KEY: _HEAD_KIND})
        if not head["ids"]:
            self.store.log_delete({JOURNAL_KEY: _ENTRY})
            return self._legacy_pending()
        meta = head["metadatas"][0]
        entries = self.store.log_read(
            {"$and": [{JOURNAL_KEY: _ENTRY}, {"p": meta["p"]}]}, full=True
        )
        return _moves(entries["documents"], int(meta["n"]), self.store.namespace)

    def clear(self) -> None:
        """Forget the journal (the pass is complete, or never started writing): head first."""
        self.store.log_delete({JOURNAL_KEY: _HEAD_KIND})
        self.store.log_delete({JOURNAL_KEY: _ENTRY})
        if self._legacy_exists():
            self._call(
                "clear the old sleep journal", self.store.client.delete_collection, self.legacy
            )

    # -- stores written before the journals were one ------------------------------------
    def _legacy_exists(self) -> bool:
        names = self._call("list collections", self.store.client.list_collections)
        return any(getattr(c, "name", c) == self.legacy for c in names)

    def _legacy_pending(self) -> dict[str, str]:
        """An unfinished pass recorded in the old ``mag-<ns>-journal`` collection."""
        if not self._legacy_exists():
            return {}
        coll = self._call(
            "open the old sleep journal", self.store.client.get_collection, self.legacy
        )
        got = self._call(
            "read the old sleep journal", coll.get, ids=["head"], include=["documents"]
        )
        if not got["ids"]:
            self.clear()
            return {}
        records = json.loads(got["documents"][0])["records"]
        entries = self._call(
            "read the old sleep journal", coll.get, ids=list(records), include=["documents"]
        )
        return _moves(entries["documents"], len(records), self.legacy)

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise PersistenceError(
                f"Chroma failed to {what} ({self.legacy!r}): {e}",
                hint="check the Chroma path or server, then reopen the memory",
            ) from e


def _moves(documents: list[str], expected: int, where: str) -> dict[str, str]:
    """The moves recorded in a pass's entries: all of them, or an error naming the journal."""
    if len(documents) != expected:
        raise PersistenceError(
            f"the sleep journal of {where!r} lists records that are missing",
            hint="the store was changed outside magnetic-storage; restore it from a copy",
        )
    moves: dict[str, str] = {}
    for doc in documents:
        moves.update(json.loads(doc))
    logger.warning("finishing an interrupted sleep pass (%d cells)", len(moves))
    return moves
