"""How the process's C heap is kept from growing under months of writes (glibc only).

Chroma's native code allocates and frees its vector indexes through glibc's ``malloc`` from
several threads. glibc gives each such thread an arena of its own (up to eight per core) and
keeps the memory freed in an arena for that arena's reuse, so a long stream of writes, deletes
and compactions leaves the process holding freed memory in many arenas: in a 12,000-operation
soak the memory glibc held free went 18 -> 200 MB while the memory in use stayed at 110-120 MB.
With two arenas the same stream held 3-58 MB free (``benchmarks/soak.py``).

:func:`limit_arenas` caps the arenas at two, once per process, when a memory opens a Chroma
client of its own. It changes the whole process's allocator, so it leaves the setting alone
when the user chose one (the ``MALLOC_ARENA_MAX`` environment variable, which glibc reads at
start-up) and does nothing where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

__all__ = ["ARENAS", "limit_arenas", "release_freed_memory"]

ARENAS = 2  # the arenas the process may use: one for the main thread, one for all others
_M_ARENA_MAX = -8  # mallopt's parameter number for the arena limit (glibc's malloc.h)
_done = threading.Event()


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt  # noqa: B018 - glibc has mallopt and malloc_trim; musl and macOS do not
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def limit_arenas() -> bool:
    """Cap glibc's malloc arenas at :data:`ARENAS`; True if this call set it.

    Not set where ``MALLOC_ARENA_MAX`` is in the environment (the user's own choice) or the C
    library is not glibc; set once per process.
    """
    if _done.is_set() or "MALLOC_ARENA_MAX" in os.environ:
        return False
    _done.set()
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(_M_ARENA_MAX, ARENAS) == 1)


def release_freed_memory() -> None:
    """Hand the heap memory freed by a closed Chroma client back to the system (glibc only).

    Chroma's native code frees a dropped index when its client closes, but glibc keeps the
    freed pages for reuse, so the process's resident memory would not show it.
    """
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
