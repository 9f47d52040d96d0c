"""The readers-writer lock (writer preference, intent mode, re-entry) and the async twins."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Iterator

import pytest

from magnetic_core import MagneticMemory
from magnetic_core._store.concurrency import RWLock, async_twin

WAIT = 5.0  # generous bound on a step that must happen (never reached when all is well)
BLOCKED = 0.02  # how long a thread that must wait is watched not to get through


class Worker(threading.Thread):
    """Runs ``body`` under one of the lock's modes, recording when it got in."""

    def __init__(self, mode: Callable[[], object], name: str, log: list[str]) -> None:
        super().__init__(daemon=True)
        self.mode, self.label, self.log = mode, name, log
        self.inside = threading.Event()
        self.release = threading.Event()

    def run(self) -> None:
        with self.mode():  # type: ignore[attr-defined]
            self.log.append(self.label)
            self.inside.set()
            self.release.wait(WAIT)


def _start(lock_mode, name: str, log: list[str]) -> Worker:
    worker = Worker(lock_mode, name, log)
    worker.start()
    return worker


def _wait_until(cond: Callable[[], bool]) -> None:
    done = threading.Event()
    for _ in range(int(WAIT / 0.001)):
        if cond():
            return
        done.wait(0.001)
    pytest.fail("condition never held")


def _finish(*workers: Worker) -> None:
    for w in workers:
        w.release.set()
    for w in workers:
        w.join(WAIT)
        assert not w.is_alive()


def test_readers_share_the_lock():
    lock, log = RWLock(), []
    a, b = _start(lock.read, "a", log), _start(lock.read, "b", log)
    assert a.inside.wait(WAIT) and b.inside.wait(WAIT)  # both inside at once
    _finish(a, b)


def test_a_writer_excludes_readers_and_writers():
    lock, log = RWLock(), []
    w = _start(lock.write, "w", log)
    assert w.inside.wait(WAIT)
    r, w2 = _start(lock.read, "r", log), _start(lock.write, "w2", log)
    assert not r.inside.wait(BLOCKED) and not w2.inside.wait(BLOCKED)
    _finish(w)
    _finish(r, w2)
    assert log[0] == "w" and sorted(log[1:]) == ["r", "w2"]


def test_a_waiting_writer_goes_before_readers_that_came_after_it():
    lock, log = RWLock(), []
    r1 = _start(lock.read, "r1", log)
    assert r1.inside.wait(WAIT)
    w = _start(lock.write, "w", log)
    _wait_until(lambda: lock._writers_waiting == 1)
    r2 = _start(lock.read, "r2", log)
    assert not r2.inside.wait(BLOCKED)  # writer preference: the new reader waits
    _finish(r1)
    assert w.inside.wait(WAIT) and not r2.inside.is_set()
    _finish(w, r2)
    assert log == ["r1", "w", "r2"]


def test_intent_lets_readers_in_but_not_writers_or_other_intents():
    lock, log = RWLock(), []
    holder = _start(lock.intent, "intent", log)
    assert holder.inside.wait(WAIT)
    w, other = _start(lock.write, "w", log), _start(lock.intent, "intent2", log)
    _wait_until(lambda: lock._writers_waiting == 1)
    # a writer queued behind the intent holder does not hold readers back
    r = _start(lock.read, "r", log)
    assert r.inside.wait(WAIT)
    _finish(r)
    assert not w.inside.wait(BLOCKED) and not other.inside.is_set()
    _finish(holder)
    _finish(w, other)
    assert log[:2] == ["intent", "r"]


def test_the_intent_holder_upgrades_to_write_once_readers_leave_and_blocks_new_ones():
    lock, log = RWLock(), []
    r1 = _start(lock.read, "r1", log)
    assert r1.inside.wait(WAIT)
    upgraded = threading.Event()
    go = threading.Event()

    def sleeper() -> None:
        with lock.intent():
            with lock.read():  # the holder may read
                pass
            with lock.write():
                log.append("swap")
                upgraded.set()
                go.wait(WAIT)

    t = threading.Thread(target=sleeper, daemon=True)
    t.start()
    _wait_until(lambda: lock._upgrading)
    assert not upgraded.wait(BLOCKED)  # waits for the reader inside
    r2 = _start(lock.read, "r2", log)
    assert not r2.inside.wait(BLOCKED)  # and new readers wait for the swap
    _finish(r1)
    assert upgraded.wait(WAIT)
    go.set()
    t.join(WAIT)
    _finish(r2)
    assert log == ["r1", "swap", "r2"]


def _in_thread(fn: Callable[[], None]) -> None:
    """Run ``fn`` in a thread and fail (instead of hanging) if it deadlocks."""
    errors: list[BaseException] = []

    def body() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            errors.append(e)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(WAIT)
    assert not t.is_alive(), "deadlock"
    if errors:
        raise errors[0]


def test_write_is_reentrant_and_a_writer_may_read():
    lock = RWLock()
    steps: list[str] = []

    def nested() -> None:
        with lock.write():
            with lock.write(), lock.read():
                steps.append("inner")
            steps.append("outer")  # still the writer after the inner write ended
            assert lock._writer == threading.get_ident()
        assert lock._writer is None

    _in_thread(nested)
    assert steps == ["inner", "outer"]
    _in_thread(nested)  # released whole: the lock is usable again


def test_an_exception_inside_releases_the_lock():
    lock = RWLock()

    def failing(mode: Callable[[], object]) -> Callable[[], None]:
        def body() -> None:
            with pytest.raises(KeyError), mode():  # type: ignore[attr-defined]
                raise KeyError("x")

        return body

    for mode in (lock.read, lock.write, lock.intent):
        _in_thread(failing(mode))
    _in_thread(lambda: lock.write().__enter__())  # nothing left held


class Counter:
    def __init__(self) -> None:
        self.threads: list[int] = []

    def bump(self, by: int, *, twice: bool = False) -> int:
        """Add ``by``."""
        self.threads.append(threading.get_ident())
        if by < 0:
            raise ValueError("negative")
        return by * (2 if twice else 1)

    abump = async_twin(bump)


async def test_async_twin_runs_the_sync_call_in_a_worker_thread():
    c = Counter()
    assert await c.abump(3, twice=True) == 6
    assert c.threads and c.threads[0] != threading.get_ident()
    with pytest.raises(ValueError, match="negative"):
        await c.abump(-1)
    assert Counter.abump.__name__ == "abump" and Counter.abump.__qualname__ == "Counter.abump"
    assert inspect.iscoroutinefunction(Counter.abump)


async def test_async_twins_run_concurrently():
    c = Counter()
    results = await asyncio.gather(*(c.abump(i) for i in range(8)))
    assert results == list(range(8))


# asleep is written by hand: it never runs in the background, so it has no ``background``
HAND_WRITTEN = {"asleep"}


def _public_twins() -> Iterator[tuple[str, str]]:
    for name, member in inspect.getmembers(MagneticMemory):
        twin = name.startswith("a") and hasattr(MagneticMemory, name[1:])
        if twin and inspect.iscoroutinefunction(member) and name not in HAND_WRITTEN:
            yield name, name[1:]


@pytest.mark.parametrize(("twin", "sync"), sorted(_public_twins()))
def test_every_async_twin_of_the_memory_keeps_the_sync_signature(twin: str, sync: str):
    a = inspect.signature(getattr(MagneticMemory, twin))
    s = inspect.signature(getattr(MagneticMemory, sync))
    assert a.parameters == s.parameters


async def test_asleep_takes_the_sync_arguments_but_background(tmp_path, hashing):
    params = inspect.signature(MagneticMemory.asleep).parameters
    assert set(params) == set(inspect.signature(MagneticMemory.sleep).parameters) - {"background"}
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add([f"note {i}" for i in range(20)])
        report = await mem.asleep(dry_run=True, background=True)
        assert type(report).__name__ == "SleepReport"


def test_the_memory_has_the_documented_twins():
    names = {t for t, _ in _public_twins()}
    assert {"aadd", "adelete", "asearch", "aget", "acount", "agroups", "agroup", "astats"} <= names
