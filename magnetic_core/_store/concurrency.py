"""A readers-writer lock: many concurrent searches, one writer at a time.

A long maintenance pass (sleep mode) takes the lock's *intent* mode: other writers wait,
readers do not, and the pass takes :meth:`RWLock.write` only for its short in-memory swap.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["RWLock"]


class RWLock:
    """Writer-preferring readers-writer lock (a waiting writer blocks new readers)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer: int | None = None
        self._writers_waiting = 0
        self._depth = 0
        self._intent: int | None = None
        self._upgrading = False

    @contextmanager
    def read(self) -> Iterator[None]:
        me = threading.get_ident()
        if self._writer == me:  # a writer may read what it is writing
            yield
            return
        with self._cond:
            # Writers queued behind an intent holder do not hold readers back.
            while (
                self._writer is not None
                or self._upgrading
                or (self._writers_waiting and self._intent is None)
            ):
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._writer == me:
                self._depth += 1
            else:
                self._writers_waiting += 1
                self._upgrading = self._upgrading or self._intent == me
                while self._writer is not None or self._readers or self._intent not in (None, me):
                    self._cond.wait()
                self._writers_waiting -= 1
                if self._intent == me:
                    self._upgrading = False
                self._writer = me
                self._depth = 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if not self._depth:
                    self._writer = None
                    self._cond.notify_all()

    @contextmanager
    def intent(self) -> Iterator[None]:
        """Exclude other writers (and intents) without blocking readers.

        The holder may read, and may take :meth:`write` for a short exclusive step.
        """
        me = threading.get_ident()
        with self._cond:
            while self._intent is not None or self._writer is not None:
                self._cond.wait()
            self._intent = me
        try:
            yield
        finally:
            with self._cond:
                self._intent = None
                self._cond.notify_all()
