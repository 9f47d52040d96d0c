"""Concurrency: a readers-writer lock, and the one way the facade gets its async twins.

A long maintenance pass (sleep mode) takes the lock's *intent* mode: other writers wait,
readers do not, and the pass takes :meth:`RWLock.write` only for its short in-memory swap.

Every I/O-bound call of :class:`~magnetic_core.MagneticMemory` has an async twin made by
:func:`async_twin`: the sync call in a worker thread (Chroma's client is synchronous), with
the sync call's own typed signature, so editors and mypy see the real parameters.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["RWLock", "async_twin"]

_S = TypeVar("_S")
_P = ParamSpec("_P")
_R = TypeVar("_R")


def async_twin(
    method: Callable[Concatenate[_S, _P], _R],
) -> Callable[Concatenate[_S, _P], Coroutine[Any, Any, _R]]:
    """The async twin of a sync method: the same call, run in a worker thread.

    Example:
        >>> class Store:
        ...     def count(self, plus: int = 0) -> int:
        ...         return 3 + plus
        ...     acount = async_twin(count)
        >>> asyncio.run(Store().acount(plus=1))
        4
    """

    @functools.wraps(method)
    async def twin(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await asyncio.to_thread(method, self, *args, **kwargs)

    twin.__name__ = f"a{method.__name__}"
    twin.__qualname__ = twin.__qualname__.rsplit(".", 1)[0] + f".a{method.__name__}"
    twin.__doc__ = f"Async :meth:`{method.__name__}` (the same call, in a worker thread)."
    return twin


class RWLock:
    """Writer-preferring readers-writer lock (a waiting writer blocks new readers)."""

    def __init__(self) -> None:
        # Readers take the condition's lock itself to count themselves in and out: its
        # C-level ``with`` rather than the condition's Python one (every search does both).
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._readers = 0
        self._writer: int | None = None
        self._writers_waiting = 0
        self._depth = 0
        self._intent: int | None = None
        self._upgrading = False

    def read(self) -> _Reading:
        """Shared access (``with lock.read():``); a writer may read what it is writing."""
        return _Reading(self)

    def _acquire_read(self) -> bool:
        """Wait for shared access; False when this thread holds the write lock (no count)."""
        if self._writer == threading.get_ident():
            return False
        with self._mutex:
            # Writers queued behind an intent holder do not hold readers back.
            while (
                self._writer is not None
                or self._upgrading
                or (self._writers_waiting and self._intent is None)
            ):
                self._cond.wait()
            self._readers += 1
        return True

    def _release_read(self) -> None:
        with self._mutex:
            self._readers -= 1
            # Only a writer waits for the readers to leave.
            if not self._readers and self._writers_waiting:
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


class _Reading:
    """One :meth:`RWLock.read` (a class, not a generator: every search takes it, and a
    generator-based context costs several times more to enter and leave)."""

    __slots__ = ("_held", "_lock")

    def __init__(self, lock: RWLock) -> None:
        self._lock = lock
        self._held = False

    def __enter__(self) -> None:
        self._held = self._lock._acquire_read()

    def __exit__(self, *exc: object) -> None:
        if self._held:
            self._held = False
            self._lock._release_read()
