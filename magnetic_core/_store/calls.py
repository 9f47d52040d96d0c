"""Calls into Chroma: every failure becomes a PersistenceError, and racy reads are retried.

A call on a collection that another client replaced (a compaction swaps in a copy of the
cells collection) fails with "does not exist"; it is made again once on the collection now
under that name (:meth:`ChromaCalls._rebind`), which holds the same rows.

:class:`ChromaCalls` is the base of the store's classes (:class:`~magnetic_core._store.
persistence.ChromaStore` and its group rows): one namespace, one batch size, one way of
calling Chroma.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from magnetic_core.errors import PersistenceError

__all__ = ["HINT", "VANISHED", "ChromaCalls", "filler"]

logger = logging.getLogger(__name__)

HINT = "check the Chroma path or server; the memory reloads what is stored once Chroma answers"
_READ_CALLS = frozenset({"get", "count", "query", "peek"})
_READ_RETRIES = (0.05, 0.2, 0.5, 1.0)
_TRANSIENT = ("Nothing found on disk", "Error finding id")
# How Chroma's SQLite says another connection holds its write lock (another client, or
# Chroma's own background work, in this process or another): the call did nothing and the
# same call succeeds once the lock is released. Every call the store makes (get, add,
# upsert, delete, modify) is idempotent, so writes are tried again on it too.
_LOCKED = "database is locked"
# How Chroma says a collection is gone (dropped, or replaced by a compaction).
VANISHED = "does not exist"
# How Chroma 1.5 can fail a call on a collection while another client drops it (seen in
# threaded trials: 7 of 100 reads racing a drop, beside "does not exist"): the call is made
# again on the collection now under the name, as for VANISHED.
_DROPPING = (VANISHED, "Missing metadata segment", "Error sending backfill request")


def _replaced(e: Exception) -> bool:
    """Whether a call failed because its collection was dropped (or was being dropped)."""
    return any(text in str(e) for text in _DROPPING)


def filler(dim: int) -> np.ndarray:
    """A unit vector for rows that are not cells (Chroma wants an embedding on every row)."""
    row = np.zeros((1, dim), np.float32)
    row[0, 0] = 1.0
    return row


class ChromaCalls:
    """Chroma calls on behalf of one namespace.

    Args:
        namespace: the namespace named in error messages.
    """

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.batch = 1  # Chroma's largest batch, known once the client is open

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        # A Chroma server can fail a read of a segment another client is writing with
        # "Nothing found on disk" (chroma-core/chroma#4212); the same read succeeds a moment
        # later, so reads (never writes) are tried again a few times before giving up. Under
        # load the same race also surfaces as "Error finding id" (seen in a two-writer test).
        # A locked database is tried again for every call (see _LOCKED).
        read = getattr(fn, "__name__", "") in _READ_CALLS
        for wait in _READ_RETRIES:
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                if _replaced(e):
                    break  # the collection was replaced: made again on the new one below
                text = str(e)
                if _LOCKED not in text and not (read and any(t in text for t in _TRANSIENT)):
                    raise self._failed(what, e) from e
                logger.info("Chroma call %r failed transiently, retrying: %s", what, e)
                time.sleep(wait)
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            fresh = self._rebind(fn) if _replaced(e) else None
            if fresh is None:
                raise self._failed(what, e) from e
        logger.info("Chroma collection was replaced (compacted); %r goes to the new one", what)
        try:
            return fresh(*args, **kwargs)
        except Exception as e:
            raise self._failed(what, e) from e

    def _batched(self, what: str, fn: Any, **columns: Any) -> None:
        """Call ``fn`` once per Chroma batch, with every column (a list or an array; None
        passes through as None) cut to the same rows; the first column gives the length."""
        rows = len(next(iter(columns.values())))
        for start in range(0, rows, self.batch):
            end = start + self.batch
            part = {k: None if v is None else v[start:end] for k, v in columns.items()}
            self._call(what, fn, **part)

    def _rebind(self, fn: Any) -> Any:
        """The same call on the collection now under the name ``fn``'s collection had.

        None when ``fn`` is not a call on one of this namespace's collections (subclasses
        that hold collections override this).
        """
        return None

    def _failed(self, what: str, e: Exception) -> PersistenceError:
        return PersistenceError(
            f"Chroma failed to {what} in namespace {self.namespace!r}: {e}",
            hint=HINT,
        )
