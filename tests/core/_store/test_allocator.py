"""The malloc arena cap (glibc): checked in fresh processes, as the setting is process-wide."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from magnetic_core._store import allocator

pytestmark = pytest.mark.skipif(
    allocator._glibc() is None, reason="the arena cap exists only with glibc's malloc"
)

# Counts glibc's arenas (malloc_info), opens a memory (Chroma starts its threads), allocates
# from eight threads of its own, and counts them again: "before after".
_PROBE = textwrap.dedent(
    """
    import ctypes, ctypes.util, os, tempfile, threading
    from magnetic_core import HashingEmbedder, MagneticMemory

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.fopen.restype = ctypes.c_void_p

    def arenas(tmp):
        out = os.path.join(tmp, "malloc.xml")
        fp = libc.fopen(out.encode(), b"w")
        libc.malloc_info(0, ctypes.c_void_p(fp))
        libc.fclose(ctypes.c_void_p(fp))
        with open(out) as f:
            return f.read().count("<heap nr=")

    with tempfile.TemporaryDirectory() as tmp:
        before = arenas(tmp)
        mem = MagneticMemory(path=tmp, embedder=HashingEmbedder())
        mem.add([f"note {i} about rivers and boats" for i in range(50)])
        start = threading.Barrier(8)

        def churn():
            start.wait()
            for _ in range(200):
                blocks = [bytearray(4096) for _ in range(64)]
                del blocks

        threads = [threading.Thread(target=churn) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(before, arenas(tmp))
        mem.close()
    """
)


def _arenas(extra_env: dict[str, str]) -> tuple[int, int]:
    """glibc's arenas in a fresh process before a memory opens, and after it and eight
    threads have allocated."""
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    env.update(extra_env)
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    before, after = done.stdout.split()[-2:]
    return int(before), int(after)


def test_a_memory_caps_the_process_at_two_arenas() -> None:
    # arenas that threads took before the memory opened (numpy's BLAS threads) stay; no more
    before, after = _arenas({})
    assert after <= max(before, allocator.ARENAS)


def test_the_users_own_arena_setting_is_left_alone() -> None:
    # glibc honours MALLOC_ARENA_MAX itself; the memory must not lower it to two
    before, after = _arenas({"MALLOC_ARENA_MAX": "6"})
    assert after > max(before, allocator.ARENAS)


def test_the_cap_is_set_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr(allocator, "_done", type(allocator._done)())
    assert allocator.limit_arenas() is True
    assert allocator.limit_arenas() is False
