"""A second core for queries that come in a stream.

A query's one compiled call (``kernels.plain_top``, ``fusion_kernel.text_top``) reads one
to three MB of codes and vectors, about what one core's L2 holds, and the Python that
turns its rows into hits then runs on a core whose caches it has just emptied. Run on a
second core instead (:mod:`magnetic_core._search.helper_kernels`, through numba's thread
pool), the call takes as long, and the Python after it about half as long: at 100K Reuters,
queries in a stream, 0.37 -> 0.25 ms a vector query with the same hits (the results README,
session 45).

The helper is used only when it helps and is safe:

- Queries in a stream: the previous one ended at most :data:`STREAM_GAP` seconds ago. A
  thread pool that has gone to sleep takes longer to wake than the caches save (with 50 ms
  between queries, 1.37 -> 1.89 ms), so the first query after a pause runs on the calling
  thread, as every query did before.
- One query at a time: queries from several threads at once run on their own threads.
- Two cores or more for this process, numba's pool on two threads or more, and a thread
  pool that may be entered from several threads (``omp`` or ``tbb``; numba's own
  ``workqueue`` may not).
- Not in a process forked from one that used the pool: GNU OpenMP aborts a forked child
  that enters it.
- ``MAGNETIC_SEARCH_HELPER=0`` in the environment turns it off.

Results are the same either way (the tests compare them query for query). A kernel that
fails on the helper runs again on the calling thread, where its error is raised as usual.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["STREAM_GAP", "call", "enabled"]

# A query goes to the helper when the one before it ended at most this long ago (seconds).
# With 1 ms and 5 ms pauses the helper still gained (0.42 -> 0.29, 0.51 -> 0.46 ms at 100K);
# with 50 ms it lost.
STREAM_GAP = 0.005
_OFF = {"0", "false", "no", "off"}
_SAFE_LAYERS = {"omp", "tbb"}


class _Helper:
    """Whether the next query goes to the helper, and one query at a time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last = -float("inf")  # when the last query ended (time.perf_counter)
        self.usable: bool | None = None  # decided on first use
        self.forked = False
        self.kernels: ModuleType | None = None
        self.beside = 0  # queries the helper answered (for the tests)

    def decide(self) -> bool:
        """Whether this process may use the helper at all (decided once)."""
        if self.forked:
            return False
        if os.environ.get("MAGNETIC_SEARCH_HELPER", "").strip().lower() in _OFF:
            return False
        if self.usable is None:
            self.usable = _usable()
        return self.usable

    def ended(self) -> None:
        self.last = time.perf_counter()


def _usable() -> bool:
    """Two cores for this process, numba's pool on two threads, a pool safe to enter from
    several threads."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # (not on Linux)
        cores = os.cpu_count() or 1
    if cores < 2:
        return False
    import numba
    from numba.np.ufunc import parallel

    if numba.get_num_threads() < 2:
        return False
    try:
        parallel._launch_threads()
        return parallel.threading_layer() in _SAFE_LAYERS
    except ValueError:  # (numba: "No threading layer could be loaded"; the calling thread works)
        return False


_HELPER = _Helper()


def _after_fork() -> None:
    _HELPER.forked = True
    _HELPER.lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def enabled() -> bool:
    """Whether queries in a stream go to the helper in this process."""
    return _HELPER.decide()


def call(inline: Callable[..., Any], beside: str, *args: Any) -> Any:
    """``inline(*args)``, or, for a query in a stream, the helper kernel named ``beside``
    (in :mod:`helper_kernels`, returning ``inline``'s results and whether it returned)
    on a second core."""
    helper = _HELPER
    if time.perf_counter() - helper.last <= STREAM_GAP and helper.decide():
        lock = helper.lock
        if lock.acquire(blocking=False):
            try:
                kernels = helper.kernels
                if kernels is None:
                    from magnetic_core._search import helper_kernels as kernels

                    helper.kernels = kernels
                found = getattr(kernels, beside)(*args)
            finally:
                lock.release()
            if found[-1]:
                helper.beside += 1
                helper.ended()
                return found[:-1]
    found = inline(*args)
    helper.ended()
    return found
