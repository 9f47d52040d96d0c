"""A readers-writer lock: many concurrent searches, one writer at a time."""

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

    @contextmanager
    def read(self) -> Iterator[None]:
        me = threading.get_ident()
        if self._writer == me:  # a writer may read what it is writing
            yield
            return
        with self._cond:
            while self._writer is not None or self._writers_waiting:
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
                while self._writer is not None or self._readers:
                    self._cond.wait()
                self._writers_waiting -= 1
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
