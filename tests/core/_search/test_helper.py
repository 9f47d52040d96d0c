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

    monkeypatch.setenv("MAGNETIC_SEARCH_HELPER", "0")
    monkeypatch.setattr(kernels, "plain_top", capture)
    _hits(mem, queries[0])
    monkeypatch.undo()
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
