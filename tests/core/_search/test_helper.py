"""The search helper: one-call queries in a stream run on a second core, with the same hits.

A persisted store of 6,000 cells (past the scorer's size), vector and text queries; the
helper is forced (``STREAM_GAP`` infinite) or left to its own rule, as a user's process has
it.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from magnetic_core import MagneticMemory, MemoryConfig
from magnetic_core._search import helper, kernels
from magnetic_core.embeddings import VectorsOnly
from magnetic_core.eval import clustered_data

N = 6000
WORDS = ("harbour", "lantern", "orchard", "glacier", "copper", "meadow")

if not helper.enabled():  # (decided before any test sets the environment)
    pytest.skip(
        "this process has one core or no thread pool safe for the helper", allow_module_level=True
    )


@pytest.fixture(autouse=True)
def no_stall_before(monkeypatch) -> None:
    """Each test starts with the helper not backing off (a test with four threads on two
    cores may leave it so)."""
    monkeypatch.setattr(helper._HELPER, "off_until", -float("inf"))
    monkeypatch.setattr(helper._HELPER, "stalls", 0)
    # A query sent to the helper after a pause (every one is, here) may really stall (its
    # pool's threads asleep): no backing off but where a test asks for it.
    monkeypatch.setattr(helper, "STALL_MARGIN", float("inf"))


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MagneticMemory, np.ndarray]]:
    vecs, _ = clustered_data(N + 40, 64, 40, spread=0.8, decay=1.5, seed=11)
    texts = [f"{WORDS[i % 6]} {WORDS[(i * 5) % 6]} note {i}" for i in range(N)]
    path = str(tmp_path_factory.mktemp("helper-store"))
    # (1,200 cells a query, codes of rank 16: at the defaults a store this small and narrow
    # is read whole, exactly)
    mem = MagneticMemory(
        path=path, embedder=VectorsOnly(64), config=MemoryConfig(probe_cells=1200, sketch_rank=16)
    )
    mem.add(texts, ids=[f"c{i}" for i in range(N)], vectors=vecs[40:])
    yield mem, vecs[:40]
    mem.close()


def _hits(
    mem: MagneticMemory, q: np.ndarray, text: str | None = None
) -> list[tuple[str, float, float]]:
    return [(h.id, h.score, h.rank_score) for h in mem.search(text, k=10, vector=q)]


def _all(mem: MagneticMemory, queries: np.ndarray) -> list[list[tuple[str, float, float]]]:
    found = [_hits(mem, q) for q in queries]
    found += [
        _hits(mem, q, f"{WORDS[j % 6]} near the {WORDS[(j + 2) % 6]}")
        for j, q in enumerate(queries)
    ]
    return found


@pytest.fixture
def inline(memory, monkeypatch) -> list[list[tuple[str, float, float]]]:
    """Every query's hits with the helper off."""
    mem, queries = memory
    monkeypatch.setenv("MAGNETIC_SEARCH_HELPER", "0")
    before = helper._HELPER.beside
    found = _all(mem, queries)
    assert helper._HELPER.beside == before  # off means off
    monkeypatch.delenv("MAGNETIC_SEARCH_HELPER")
    return found


def test_queries_on_the_helper_find_the_same_hits(memory, inline, monkeypatch) -> None:
    mem, queries = memory
    monkeypatch.setattr(helper, "STREAM_GAP", float("inf"))
    before = helper._HELPER.beside
    assert _all(mem, queries) == inline
    assert helper._HELPER.beside - before == 2 * len(queries)  # vector and text, every one


def test_only_queries_in_a_stream_go_to_the_helper(memory, inline) -> None:
    mem, queries = memory
    # Back to back: after the first, the queries follow each other by far less than the gap.
    before = helper._HELPER.beside
    assert [_hits(mem, q) for q in queries] == inline[: len(queries)]
    assert helper._HELPER.beside - before >= len(queries) // 2
    # After a pause the first query runs on the calling thread (the helper's pool may sleep).
    for q in queries[:3]:
        time.sleep(10 * helper.STREAM_GAP)
        before = helper._HELPER.beside
        _hits(mem, q)
        assert helper._HELPER.beside == before


def test_queries_from_several_threads_find_the_same_hits(memory, inline, monkeypatch) -> None:
    # One query at a time goes to the helper; the others run on their own threads.
    mem, queries = memory
    monkeypatch.setattr(helper, "STREAM_GAP", float("inf"))
    results: dict[int, list[list[tuple[str, float, float]]]] = {}

    def worker(t: int) -> None:
        results[t] = [_all(mem, queries) for _ in range(3)][-1]

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert all(results[t] == inline for t in range(4))


def _child_search(mem: MagneticMemory, queries: np.ndarray, out) -> None:  # type: ignore[no-untyped-def]
    helper.STREAM_GAP = float("inf")  # (would send every query to the helper, were it allowed)
    out.send((_all(mem, queries), helper.enabled()))
    out.close()


def test_a_process_forked_after_the_helper_ran_searches_on_its_own_thread(
    memory, inline, monkeypatch
) -> None:
    # GNU OpenMP aborts a forked child that enters the pool its parent used.
    mem, queries = memory
    monkeypatch.setattr(helper, "STREAM_GAP", float("inf"))
    before = helper._HELPER.beside
    _hits(mem, queries[0])
    assert helper._HELPER.beside > before  # the parent's pool is running
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child_search, args=(mem, queries, send))
    child.start()
    assert receive.poll(120), f"the child never answered (exit code {child.exitcode})"
    found, enabled = receive.recv()
    child.join(60)
    assert child.exitcode == 0
    assert not enabled
    assert found == inline


def test_a_kernel_error_on_the_helper_is_raised_by_the_caller(memory, monkeypatch) -> None:
    # numba drops an exception raised inside its parallel loop: the call runs again inline.
    mem, queries = memory
    captured: list[tuple] = []
    plain_top = kernels.plain_top

    def capture(*args):  # type: ignore[no-untyped-def]
        captured.append(args)
        return plain_top(*args)

    with monkeypatch.context() as m:
        m.setenv("MAGNETIC_SEARCH_HELPER", "0")
        m.setattr(kernels, "plain_top", capture)
        _hits(mem, queries[0])
    monkeypatch.setattr(helper, "STREAM_GAP", float("inf"))
    args = list(captured[0])
    args[11] = np.ones(32, np.float32)  # a query of the wrong width
    before = helper._HELPER.beside
    with pytest.raises(ValueError, match="differ in width"):
        helper.call(plain_top, "plain_top_beside", *args)
    assert helper._HELPER.beside == before
    # The good query still goes to the helper, with the inline result.
    good = tuple(captured[0])
    assert [np.asarray(x).tolist() for x in helper.call(plain_top, "plain_top_beside", *good)] == [
        np.asarray(x).tolist() for x in plain_top(*good)
    ]
    assert helper._HELPER.beside == before + 1


WIDE = r"""
import sys, tempfile
import numba
import numpy as np
from magnetic_core import MagneticMemory, MemoryConfig
from magnetic_core._search import helper
from magnetic_core.embeddings import VectorsOnly
from magnetic_core.eval import clustered_data

vecs, _ = clustered_data(6020, 64, 40, spread=0.8, decay=1.5, seed=5)
config = MemoryConfig(probe_cells=1200, sketch_rank=16)
mem = MagneticMemory(path=tempfile.mkdtemp(), embedder=VectorsOnly(64), config=config)
mem.add([f"n {i}" for i in range(6000)], ids=[f"c{i}" for i in range(6000)], vectors=vecs[20:])
helper.STREAM_GAP = float("inf")
helper.STALL_MARGIN = float("inf")  # (no backing off)
helper.COMPILE_BESIDE = False  # (every query on the helper, the first one too)
def hits():
    return [[(h.id, h.score) for h in mem.search(k=10, vector=q)] for q in vecs[:20]]
runs = [hits(), hits()]
helper.STREAM_GAP = -1.0  # (never: the same queries on the calling thread)
inline = hits()
print(helper._HELPER.wide, helper._HELPER.beside, numba.get_num_threads(), runs == [inline] * 2)
"""


def test_a_pool_of_more_than_two_threads_lends_two_and_keeps_its_count() -> None:
    # numba's pool of four threads (NUMBA_NUM_THREADS): the helper's loop runs on two, the
    # calling thread's count is four again after each query, and the hits are the same.
    import os
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_NUM_THREADS": "4"}
    env.pop("MAGNETIC_SEARCH_HELPER", None)
    done = subprocess.run(
        [sys.executable, "-c", WIDE], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "40", "4", "True"]


def test_a_stalled_helper_is_left_alone_for_a_while(memory, inline, monkeypatch) -> None:
    # STALL_COUNT calls that waited for a core (here: made to sleep 200 ms) turn the helper
    # off for BACKOFF seconds, twice as long the next time; queries meanwhile run inline.
    from magnetic_core._search import helper_kernels

    mem, queries = memory
    monkeypatch.setattr(helper, "STREAM_GAP", float("inf"))
    monkeypatch.setattr(helper, "BACKOFF", 0.2)
    # (a margin of 50 ms: the first call after a pause may really wait some ms for its
    # thread; the stall made here waits 200 ms)
    monkeypatch.setattr(helper, "STALL_MARGIN", 0.05)
    for q in queries[:5]:
        _hits(mem, q)  # (the usual time of a call)
    assert helper._HELPER.off_until < time.perf_counter()
    real = helper_kernels.plain_top_beside

    def stalled(*args):  # type: ignore[no-untyped-def]
        time.sleep(0.2)
        return real(*args)

    for backoff in (0.2, 0.4):
        monkeypatch.setattr(helper_kernels, "plain_top_beside", stalled)
        for _ in range(helper.STALL_COUNT - 1):
            assert _hits(mem, queries[0]) == inline[0]  # fewer stalls: maybe hiccups
        before = helper._HELPER.beside
        assert _hits(mem, queries[0]) == inline[0]  # (answered by the stalled call)
        monkeypatch.setattr(helper_kernels, "plain_top_beside", real)
        start = time.perf_counter()
        assert [_hits(mem, q) for q in queries[1:4]] == inline[1:4]
        assert helper._HELPER.beside == before + 1  # the three after it ran inline
        assert helper._HELPER.off_until - start <= backoff + 0.01
        time.sleep(backoff + 0.05)
        assert _hits(mem, queries[4]) == inline[4]
        assert helper._HELPER.beside == before + 2  # and then the helper again


BACKGROUND = r"""
import tempfile, time
import numba
from magnetic_core import MagneticMemory, MemoryConfig
from magnetic_core._search import helper, helper_kernels
from magnetic_core.embeddings import VectorsOnly
from magnetic_core.eval import clustered_data

vecs, _ = clustered_data(6020, 64, 40, spread=0.8, decay=1.5, seed=5)
config = MemoryConfig(probe_cells=1200, sketch_rank=16)
mem = MagneticMemory(path=tempfile.mkdtemp(), embedder=VectorsOnly(64), config=config)
mem.add([f"n {i}" for i in range(6000)], ids=[f"c{i}" for i in range(6000)], vectors=vecs[20:])
mem.search(k=10, vector=vecs[0])  # (the inline kernels compiled or loaded)
# A helper kernel no cache holds: a fresh dispatcher of the same function.
py_func = helper_kernels.plain_top_beside.py_func
helper_kernels.plain_top_beside = numba.njit(nogil=True, parallel=True)(py_func)
helper.STREAM_GAP = float("inf")
helper.STALL_MARGIN = float("inf")
start, worst, inline = time.perf_counter(), 0.0, 0
while helper._HELPER.beside == 0 and time.perf_counter() - start < 300:
    t = time.perf_counter()
    mem.search(k=10, vector=vecs[inline % 20])
    worst = max(worst, time.perf_counter() - t)
    inline += 1
print(helper._HELPER.beside, inline, round(worst, 3), time.perf_counter() - start)
"""


def test_a_helper_kernel_compiles_on_its_own_thread_while_queries_run_inline() -> None:
    # A fresh process (the tests' own compile on the query thread is off there): the first
    # query in a stream starts the kernel's compile (seconds) and no query waits for it.
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "MAGNETIC_SEARCH_HELPER"}
    done = subprocess.run(
        [sys.executable, "-c", BACKGROUND], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    beside, inline, worst, took = done.stdout.split()
    assert int(beside) >= 1, "the helper was never used"
    assert float(took) > 1.0  # (a compile, not a load: the test tests something)
    assert int(inline) > 100  # queries went on meanwhile
    assert float(worst) < 1.0  # and none of them waited for the compile
