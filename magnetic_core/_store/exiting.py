"""Memories still open when the interpreter exits are closed then.

A memory on an embedded store (its own client, or a PersistentClient passed in, as the
LlamaIndex store does) writes its group cache and index snapshot when it closes; a process
that never calls ``close()`` would leave neither, and every later open would read all the
cells from Chroma.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from typing import Any, Protocol

__all__ = ["close_when_exiting", "forget_at_exit", "is_local"]

logger = logging.getLogger(__name__)


class Closable(Protocol):
    """What is closed at exit (a memory)."""

    def close(self) -> None: ...


# Memories that are not closed yet.
_UNCLOSED: weakref.WeakSet[Closable] = weakref.WeakSet()
_AT_EXIT = threading.Lock()
_registered: list[bool] = []  # holds True once _close_at_exit is registered


def _close_at_exit() -> None:
    for memory in list(_UNCLOSED):
        try:
            memory.close()
        except Exception as e:  # noqa: BLE001 - exiting goes on; what is stored stays stored
            logger.warning("closing a memory at exit failed: %s", e)


def is_local(client: Any) -> bool:
    """Whether a client passed in is an embedded (persistent) one: a server is not closed at
    exit, as reaching it then could wait on a server that is gone."""
    try:
        return bool(getattr(client.get_settings(), "is_persistent", False))
    except Exception:  # noqa: BLE001 - an unknown client is treated as a server
        return False


def close_when_exiting(memory: Closable) -> None:
    """Close ``memory`` when the interpreter exits, if it is still open then."""
    with _AT_EXIT:
        if not _registered:
            # registered after chromadb was imported, so it runs before chromadb's own
            atexit.register(_close_at_exit)
            _registered.append(True)
        _UNCLOSED.add(memory)


def forget_at_exit(memory: Closable) -> None:
    """Do not close ``memory`` at exit (it is being closed now)."""
    _UNCLOSED.discard(memory)
