"""The sleep pass's intent log: what a pass will move, written before anything moves.

A pass changes the group of many cells, written to Chroma in several batches, so a crash
could leave some rows moved and others not. Before the first row changes, the pass writes
every move (cell id -> new group) to a small per-namespace journal collection, entries
first and the head record last. Opening a memory replays a journal whose head exists
(the pass was under way: finish it), and discards entries without a head (the pass had
not started writing cells). So a pass killed at any moment reopens to the state after it
or before it, never half. Chroma is reached only through the client's own object here;
embeddings are a constant 1-d placeholder (the journal is never searched).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from magnetic_core.errors import PersistenceError

__all__ = ["SleepJournal"]

logger = logging.getLogger(__name__)

_HEAD = "head"
_ENTRIES_PER_RECORD = 2000


class SleepJournal:
    """One namespace's journal collection.

    Args:
        client: the chromadb client of the memory.
        namespace: the memory's namespace.
    """

    def __init__(self, client: Any, namespace: str) -> None:
        self.name = f"mag-{namespace}-journal"
        self.client = client
        self._collection: Any = None

    def _coll(self) -> Any:
        if self._collection is None:
            self._collection = self._call(
                "open the sleep journal",
                self.client.get_or_create_collection,
                self.name,
                embedding_function=None,
            )
        return self._collection

    def begin(self, moves: Mapping[str, str], pass_id: str) -> None:
        """Record the moves of a pass; the head record, written last, makes it binding."""
        items = list(moves.items())
        chunks = [
            dict(items[i : i + _ENTRIES_PER_RECORD])
            for i in range(0, len(items), _ENTRIES_PER_RECORD)
        ]
        coll = self._coll()
        ids = [f"{pass_id}-{k}" for k in range(len(chunks))]
        for rid, chunk in zip(ids, chunks, strict=True):
            self._call(
                "write the sleep journal",
                coll.upsert,
                ids=[rid],
                embeddings=[[1.0]],
                documents=[json.dumps(chunk, separators=(",", ":"))],
            )
        head = json.dumps({"pass": pass_id, "records": ids})
        self._call(
            "write the sleep journal",
            coll.upsert,
            ids=[_HEAD],
            embeddings=[[1.0]],
            documents=[head],
        )

    def pending(self) -> dict[str, str]:
        """The moves of an unfinished pass (empty when there is none); stray entries dropped."""
        if not self._exists():
            return {}
        coll = self._coll()
        got = self._call("read the sleep journal", coll.get, ids=[_HEAD], include=["documents"])
        if not got["ids"]:
            self.clear()
            return {}
        head = json.loads(got["documents"][0])
        records = self._call(
            "read the sleep journal", coll.get, ids=list(head["records"]), include=["documents"]
        )
        if len(records["ids"]) != len(head["records"]):
            raise PersistenceError(
                f"the sleep journal {self.name!r} lists records that are missing",
                hint="the store was changed outside magnetic-storage; restore it from a copy",
            )
        moves: dict[str, str] = {}
        for doc in records["documents"]:
            moves.update(json.loads(doc))
        logger.warning("finishing an interrupted sleep pass (%d cells)", len(moves))
        return moves

    def clear(self) -> None:
        """Forget the journal (the pass is complete, or never started writing)."""
        if self._exists():
            self._call("clear the sleep journal", self.client.delete_collection, self.name)
        self._collection = None

    def _exists(self) -> bool:
        if self._collection is not None:
            return True
        names = self._call("list collections", self.client.list_collections)
        return any(getattr(c, "name", c) == self.name for c in names)

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except PersistenceError:
            raise
        except Exception as e:
            raise PersistenceError(
                f"Chroma failed to {what} ({self.name!r}): {e}",
                hint="check the Chroma path or server, then reopen the memory",
            ) from e
