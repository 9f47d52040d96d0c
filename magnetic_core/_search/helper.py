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
  thread, as every query did before (with 10 and 20 ms between queries, every query sent
  to the helper took 6.7x and 11x as long).
- One query at a time: queries from several threads at once run on their own threads.
- Two cores or more for this process, numba's pool on two threads or more, and a thread
  pool that may be entered from several threads (``omp`` or ``tbb``; numba's own
  ``workqueue`` may not).
- Not in a process forked from one that used the pool: GNU OpenMP aborts a forked child
  that enters it.
- Not after stalls: a call on the helper that took far longer than usual waited for a
  core (another process held the second one, or the scheduler put both threads on one);
  after three such calls close together the helper is left alone for half a second, then
  longer each time it happens again.
- ``MAGNETIC_SEARCH_HELPER=0`` in the environment turns it off.

Results are the same either way (the tests compare them query for query). A kernel that
fails on the helper runs again on the calling thread, where its error is raised as usual.
A helper kernel is compiled (or loaded from numba's disk cache) on a thread of its own the
first time a stream needs it; its queries run inline meanwhile, so no query waits for it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["STREAM_GAP", "call", "enabled"]

logger = logging.getLogger(__name__)

# A query goes to the helper when the one before it ended at most this long ago (seconds).
# Every query sent to it (helper_gap_s45, 100K): 0.72-0.77x with pauses of 0-2 ms, 0.94x
# with 5 ms, 6.7x with 10 ms, 11x with 20 ms (both threads then shared one core for a time
# slice), 1.8x with 50 ms.
STREAM_GAP = 0.005
# A call on the helper that takes more than STALL_FACTOR times its usual time plus
# STALL_MARGIN (seconds) stalled: its thread waited for a core (another process held it, or
# both threads were put on one). STALL_COUNT stalls within STALL_WINDOW calls (fewer may be
# hiccups of the machine: in a benchmark run two, one of 12.5 ms, turned the helper off for
# its whole timed phase) leave the helper alone for BACKOFF seconds, twice as long each time
# it happens again within BACKOFF_RESET, at most BACKOFF_MAX. With a busy loop on the other
# core, one round of queries 2 ms apart took 12.6 ms each.
STALL_FACTOR = 4.0
STALL_MARGIN = 0.001
STALL_COUNT = 3
STALL_WINDOW = 100
BACKOFF = 0.5
BACKOFF_MAX = 5.0
BACKOFF_RESET = 60.0
# A helper kernel not yet compiled for a query's argument types is compiled on a thread of
# its own while the queries run inline (False: on the query's thread, which waits; the tests
# use that to know which queries the helper answers). With a fresh cache: 8.8 s of compiling,
# 112,916 queries answered inline meanwhile, the slowest in 82 ms (6,000 cells).
COMPILE_BESIDE = True
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
        self.compiling = False  # a helper kernel is being compiled on a thread of its own
        self.beside = 0  # queries the helper answered (for the tests)
        self.wide = False  # numba's pool has more than two threads: use two of them
        self.usual: dict[str, float] = {}  # each helper kernel's usual time (s)
        self.off_until = -float("inf")  # after a stall: no helper before this time
        self.stalls = 0  # stalls in a row (each within BACKOFF_RESET of the one before)
        self.stalled_at = -float("inf")
        self.calls = 0  # calls timed
        self.recent: list[int] = []  # the calls that stalled, not yet acted on

    def decide(self) -> bool:
        """Whether this process may use the helper at all (decided once)."""
        if self.forked:
            return False
        if os.environ.get("MAGNETIC_SEARCH_HELPER", "").strip().lower() in _OFF:
            return False
        if self.usable is None:
            self.usable = _usable()
            if self.usable:
                import numba

                self.wide = numba.get_num_threads() > 2
        return self.usable

    def ended(self) -> None:
        self.last = time.perf_counter()

    def timed(self, took: float, kernel: str) -> None:
        """Take the time of a call on the helper: a stall turns it off for a while."""
        usual = self.usual.get(kernel)
        if usual is None:  # (its first call loads or compiles it)
            self.usual[kernel] = float("inf")
        elif took < usual:
            self.usual[kernel] = took  # (down at once, up slowly: a stall is never usual)
        elif took > STALL_FACTOR * usual + STALL_MARGIN:
            self.calls += 1
            calls = self.calls
            recent = [c for c in self.recent if calls - c < STALL_WINDOW] + [calls]
            if len(recent) < STALL_COUNT:  # (hiccups of the machine, so far)
                self.recent = recent
                return
            self.recent = []
            now = time.perf_counter()
            self.stalls = self.stalls + 1 if now - self.stalled_at <= BACKOFF_RESET else 1
            self.stalled_at = now
            self.off_until = now + min(BACKOFF_MAX, BACKOFF * 2 ** (self.stalls - 1))
            logger.debug(
                "search helper: %s took %.2f ms (usually %.3f): off for %.1f s",
                kernel, took * 1e3, usual * 1e3, self.off_until - now,
            )  # fmt: skip
            return
        else:
            self.usual[kernel] = usual + 0.05 * (took - usual)
        self.calls += 1


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


def _on_two_threads(kernel: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """``kernel(*args)`` with the calling thread's numba thread count at two, then put back
    (about 2 us; a kernel that sets it itself cannot be cached on disk)."""
    import numba

    threads = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        return kernel(*args)
    finally:
        numba.set_num_threads(threads)


def _kernels(helper: _Helper) -> ModuleType:
    """The helper kernels, imported on first use, each set to refuse what it was not
    compiled for: a call with new argument types raises TypeError instead of compiling on
    the query's thread (about 9 s a kernel on a machine whose cache does not hold it yet),
    and :func:`_compile_beside` compiles it on a thread of its own meanwhile."""
    if helper.kernels is None:
        from magnetic_core._search import helper_kernels

        for name in helper_kernels.__all__:
            dispatcher = getattr(helper_kernels, name)
            if hasattr(dispatcher, "_can_compile"):  # (numba's flag; without it, calls compile)
                dispatcher._can_compile = False
        helper.kernels = helper_kernels
    return helper.kernels


def _compile(kernel: Any, args: tuple[Any, ...]) -> None:
    """Compile (or load from numba's disk cache) ``kernel`` for ``args``' types (a kernel
    wrapped by ``functools.wraps``: the one it wraps)."""
    import numba

    if not hasattr(kernel, "compile"):  # (a numba dispatcher's __wrapped__ is its py_func)
        kernel = kernel.__wrapped__
    signature = tuple(numba.typeof(a) for a in args)
    try:
        kernel._can_compile = True
        kernel.compile(signature)
    finally:
        kernel._can_compile = False


def _compile_beside(helper: _Helper, kernel: Any, args: tuple[Any, ...]) -> None:
    """Compile (or load from numba's disk cache) ``kernel`` for ``args``' types on a thread
    of its own; until it is done no query goes to the helper. A kernel that fails to
    compile leaves the helper off in this process (logged)."""
    helper.compiling = True
    logger.debug("search helper: compiling or loading %s for new argument types", kernel)

    def compile_it() -> None:
        try:
            _compile(kernel, args)
            logger.debug("search helper: %s ready", kernel)
        except Exception as e:  # noqa: BLE001 - any failure: the inline kernels answer
            logger.warning("search helper: %s did not compile (%s); queries stay inline", kernel, e)
            helper.usable = False
        finally:
            helper.compiling = False

    threading.Thread(target=compile_it, name="magnetic-helper-compile", daemon=True).start()


def enabled() -> bool:
    """Whether queries in a stream go to the helper in this process."""
    return _HELPER.decide()


def call(inline: Callable[..., Any], beside: str, *args: Any) -> Any:
    """``inline(*args)``, or, for a query in a stream, the helper kernel named ``beside``
    (in :mod:`helper_kernels`, returning ``inline``'s results and whether it returned)
    on a second core."""
    helper = _HELPER
    now = time.perf_counter()
    found: Any = None
    if (
        now - helper.last <= STREAM_GAP
        and now >= helper.off_until
        and not helper.compiling
        and helper.decide()
    ):
        lock = helper.lock
        if lock.acquire(blocking=False):
            try:
                kernel = getattr(_kernels(helper), beside)
                start = time.perf_counter()
                try:  # (a pool wider than two: wake two of its threads, not all of them)
                    found = _on_two_threads(kernel, args) if helper.wide else kernel(*args)
                except TypeError:  # (not compiled for these arguments' types: see _kernels)
                    if COMPILE_BESIDE:
                        _compile_beside(helper, kernel, args)
                    else:
                        _compile(kernel, args)
                        found = kernel(*args)
                else:
                    helper.timed(time.perf_counter() - start, beside)
            finally:
                lock.release()
            if found is not None and found[-1]:
                helper.beside += 1
                helper.ended()
                return found[:-1]
    found = inline(*args)
    helper.ended()
    return found
