"""Writes that span several Chroma batches, made all-or-nothing, and other writers' counters.

Chroma applies one ``upsert`` or ``delete`` call atomically, but a write of more cells than
its batch limit (5461 rows here) takes several calls, and a crash between two would leave
part of it stored. Such writes go through a journal, rows kept beside the group cache:

* a write first copies the stored rows it will overwrite into the journal (undo rows), then
  records a marker, then writes its cells tagged with the transaction id, then removes the
  marker. Opening a store whose marker is still there rolls the write back: the tagged cells
  are deleted and the undo rows restored.
* a delete records the ids first, then the marker, then deletes. Opening a store whose marker
  is still there finishes the delete (it was asked for, and no other row depends on it).

Either way a reopened store holds all of such a write or none of it. Writes within one batch
need no journal: their cells land in one call, which is the last of the write.

Every writer also keeps a change counter row in the cells collection, bumped in the same call
that writes its cells; another process that sees a counter move reloads before it acts.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import uuid
from collections.abc import Sequence

import numpy as np

from magnetic_core._store.persistence import JOURNAL_KEY, TXN_KEY, ChromaStore

__all__ = ["Journal", "WriterClock"]

logger = logging.getLogger(__name__)

KIND = JOURNAL_KEY  # journal row kind: "m" marker, "u" undo row, "d" id to delete
MARKER = "mag-txn"


class Journal:
    """The write-ahead journal of one namespace (rows in its groups collection).

    Args:
        store: the namespace's store (opened).
        dim: the embedding dimension (journal rows carry vectors of it).
    """

    def __init__(self, store: ChromaStore, dim: int) -> None:
        self.store, self.dim = store, dim

    def begin_write(
        self,
        txn: str,
        ids: Sequence[str],
        vectors: np.ndarray,
        texts: Sequence[str],
        rows: Sequence[dict[str, object]],
    ) -> None:
        """Save the stored rows a write will overwrite, then mark the write as begun."""
        if ids:
            metas = [{**row, KIND: "u"} for row in rows]
            self.store.log_write([f"u:{c}" for c in ids], vectors, metas, list(texts), dim=self.dim)
        self._mark(txn, "write")

    def begin_delete(self, txn: str, ids: Sequence[str]) -> None:
        """Save the ids a delete will remove, then mark the delete as begun."""
        self.store.log_write(
            [f"d:{c}" for c in ids], None, [{KIND: "d"} for _ in ids], dim=self.dim
        )
        self._mark(txn, "delete")

    def finish(self) -> None:
        """The write is complete: drop the marker first, then its journal rows."""
        self.store.log_delete({KIND: "m"})
        self.store.log_delete({KIND: {"$in": ["u", "d"]}})

    def recover(self) -> str | None:
        """Roll back an unfinished write or finish an unfinished delete; what was done.

        Journal rows without a marker (a crash before the marker or after it was dropped)
        belong to no write in progress and are dropped.
        """
        marker = self.store.log_read({KIND: "m"})
        if not marker["ids"]:
            self.store.log_delete({KIND: {"$in": ["u", "d"]}})
            return None
        meta = marker["metadatas"][0]
        txn, kind = str(meta["t"]), str(meta["k"])
        if kind == "delete":
            ids = [i[2:] for i in self.store.log_read({KIND: "d"})["ids"]]
            self.store.delete_cells(ids)
            logger.warning("finished an interrupted delete of %d cells", len(ids))
        else:
            self._roll_back(txn)
        self.finish()
        return kind

    def _roll_back(self, txn: str) -> None:
        undo = self.store.log_read({KIND: "u"}, full=True)
        restored = [i[2:] for i in undo["ids"]]
        written = self.store.tagged_cells(txn)
        self.store.delete_cells(sorted(set(written) - set(restored)))
        if restored:
            rows = [
                {k: v for k, v in m.items() if k != KIND} | {TXN_KEY: None}
                for m in undo["metadatas"]
            ]
            self.store.write_cells(
                restored, np.asarray(undo["embeddings"], np.float32), undo["documents"], rows
            )
        logger.warning(
            "rolled back an interrupted write of %d cells (%d restored)",
            len(written),
            len(restored),
        )

    def _mark(self, txn: str, kind: str) -> None:
        self.store.log_write([MARKER], None, [{KIND: "m", "t": txn, "k": kind}], dim=self.dim)


class WriterClock:
    """This process's change counter, and what it last saw of every other writer's.

    Args:
        store: the namespace's store (opened).
    """

    PREFIX = "~mag-writer-"
    # One shared row that a writer closing after writes sets to a fresh random value before
    # its own counter row goes: a memory still open sees that row change even though the
    # closed writer's row is gone (else its writes would stay unseen until a reopen).
    RETIRED = f"{PREFIX}retired"

    def __init__(self, store: ChromaStore) -> None:
        self.store = store
        self.row_id = f"{self.PREFIX}{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.value = 0
        self.seen: dict[str, int] = {}
        # When a compaction of the cells (magnetic_core._store.compaction) that was running at
        # the last read began, in Unix seconds; None when none was.
        self.compacting: int | None = None
        # This writer's own counter as the last read found it (None: not there).
        self.own: int | None = None

    def read(self) -> dict[str, int]:
        """The other writers' counters, as stored now (and whether a compaction runs)."""
        counters, self.compacting = self.store.counters_and_mark()
        self.own = counters.pop(self.row_id, None)
        return counters

    def tick(self) -> tuple[str, int]:
        """The counter row to write with this writer's next change."""
        self.value += 1
        return self.row_id, self.value

    def retire(self, dim: int) -> None:
        """At close, after writes: mark the shared row, then remove this writer's row."""
        clean = self.read() == self.seen  # nothing foreign unseen: stay in step
        mark = random.getrandbits(62)
        self.store.write_counter(self.RETIRED, mark, dim)
        self.store.delete_cells([self.row_id])
        if clean:
            self.seen[self.RETIRED] = mark

    @staticmethod
    def new_txn() -> str:
        """A fresh transaction id."""
        return uuid.uuid4().hex
