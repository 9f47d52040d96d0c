"""SIGKILL during writes: a reopened store holds every acknowledged write and nothing half-done.

The stream includes compactions (a copy of the cells collection swapped in), killed midway too.

Writes larger than one Chroma batch go through the journal; the batch limit is lowered in
the writer processes so that a few hundred cells already span several batches.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from magnetic_core import HashingEmbedder, MagneticMemory
from tests import invariants

EMB = HashingEmbedder(32)

DIE_DURING_BIG_WRITE = textwrap.dedent(
    """
    import os, sys
    from magnetic_core import HashingEmbedder, MagneticMemory
    mem = MagneticMemory(path=sys.argv[1], embedder=HashingEmbedder(32))
    mem.add([f"old cell {i}" for i in range(150)], ids=[f"c{i}" for i in range(150)])
    mem._store.batch = mem._store._batch = 40
    calls = {"n": 0}
    real = mem._store.cells.{method}
    def dying(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            os._exit(9)  # killed between two batches of one write
        return real(*args, **kwargs)
    mem._store.cells.{method} = dying
    {action}
    print("acknowledged")
    """
)


def _run_dying(path, method: str, action: str) -> str:
    code = DIE_DURING_BIG_WRITE.replace("{method}", method).replace("{action}", action)
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
    assert out.returncode == 9, out.stderr
    return out.stdout


def test_a_big_add_killed_between_batches_is_rolled_back_on_open(tmp_path):
    # 100 new cells and 60 updated ones: five batches of 40; killed after the second
    action = (
        'mem.add([f"new cell {i}" for i in range(100)] + [f"updated {i}" for i in range(60)], '
        'ids=[f"n{i}" for i in range(100)] + [f"c{i}" for i in range(60)])'
    )
    assert "acknowledged" not in _run_dying(tmp_path, "upsert", action)
    with MagneticMemory(path=str(tmp_path), embedder=EMB) as mem:
        assert mem.count() == 150
        assert mem.get([f"n{i}" for i in range(100)]) == []
        assert [c.text for c in mem.get(["c0", "c59"])] == ["old cell 0", "old cell 59"]
        assert len(invariants.hierarchy(mem)) == 150
        # the retry lands whole
        mem.add([f"new cell {i}" for i in range(100)], ids=[f"n{i}" for i in range(100)])
        assert mem.count() == 250


def test_a_big_delete_killed_between_batches_is_finished_on_open(tmp_path):
    action = 'mem.delete(ids=[f"c{i}" for i in range(130)])'
    assert "acknowledged" not in _run_dying(tmp_path, "delete", action)
    with MagneticMemory(path=str(tmp_path), embedder=EMB) as mem:
        assert sorted(c.id for c in mem.get()) == sorted(f"c{i}" for i in range(130, 150))
        assert len(invariants.hierarchy(mem)) == 20


STREAM = textwrap.dedent(
    """
    import json, random, sys
    from magnetic_core import HashingEmbedder, MagneticMemory
    rng = random.Random(int(sys.argv[2]))
    mem = MagneticMemory(path=sys.argv[1], embedder=HashingEmbedder(32))
    mem._store.batch = 50  # big writes span several batches (the journal's path)
    import magnetic_core._store.compaction as compaction
    compaction.SETTLE = 0.2  # no other writer to wait for; kills land in copies more often
    live = sorted(c.id for c in mem.get())
    print("ready", flush=True)
    serial = len(live) + 10_000 * int(sys.argv[2])
    def say(**event):
        print(json.dumps(event), flush=True)
    while True:
        kind = rng.choice(["add", "add", "big", "upsert", "delete", "merge", "compact"])
        if kind in ("add", "big"):
            n = rng.randint(1, 6) if kind == "add" else rng.randint(60, 160)
            ids = [f"s{serial + j}" for j in range(n)]
            serial += n
            texts = [f"topic {rng.randint(0, 9)} memory {i}" for i in ids]
            say(op="begin", ids=ids, texts=texts)
            mem.add(texts, ids=ids)
            live += ids
        elif kind == "upsert" and live:
            ids = sorted(set(rng.sample(live, min(len(live), rng.randint(1, 70)))))
            texts = [f"topic {rng.randint(0, 9)} edited {i} {rng.random()}" for i in ids]
            say(op="begin", ids=ids, texts=texts)
            mem.add(texts, ids=ids)
        elif kind == "delete" and len(live) > 20:
            ids = sorted(set(rng.sample(live, rng.randint(1, min(80, len(live) - 10)))))
            say(op="begin", ids=ids, texts=None)
            mem.delete(ids=ids)
            live = [c for c in live if c not in set(ids)]
        elif kind == "merge":
            say(op="begin", ids=[], texts=None)
            mem.apply_merges(mem.plan_merges(0.5))
        elif kind == "compact":  # a kill during a compaction reopens to the old or new copy
            say(op="begin", ids=[], texts=None)
            mem.compact()
        else:
            continue
        say(op="done")
    """
)

CHECK = textwrap.dedent(
    """
    import json, sys
    from magnetic_core import HashingEmbedder, MagneticMemory
    with MagneticMemory(path=sys.argv[1], embedder=HashingEmbedder(32)) as mem:
        cells = mem.get()
        groups = mem.groups()
        print(json.dumps({
            "cells": {c.id: c.text for c in cells},
            "grouped": sorted(c for g in groups for c in g.cell_ids),
            "group_of": {c.id: c.group_id for c in cells},
            "members": {g.id: list(g.cell_ids) for g in groups},
        }))
    """
)


def _expected(events: list[dict]) -> tuple[dict[str, str | None], dict | None]:
    """What acknowledged writes left behind (None: deleted), and the write in flight."""
    state: dict[str, str | None] = {}
    pending = None
    for event in events:
        if event["op"] == "begin":
            pending = event
        elif pending is not None:
            texts = pending["texts"]
            for i, cid in enumerate(pending["ids"]):
                state[cid] = None if texts is None else texts[i]
            pending = None
    return state, pending


@pytest.mark.parametrize("seed", [1, 2])
def test_sigkill_at_random_moments_loses_no_acknowledged_write(tmp_path, seed):
    rng = random.Random(seed)
    with MagneticMemory(path=str(tmp_path), embedder=EMB) as mem:
        mem.add(
            [f"topic {i % 10} seed memory {i}" for i in range(40)], ids=[f"p{i}" for i in range(40)]
        )
    state: dict[str, str | None] = {f"p{i}": f"topic {i % 10} seed memory {i}" for i in range(40)}
    for round_ in range(2):
        proc = subprocess.Popen(
            [sys.executable, "-c", STREAM, str(tmp_path), str(seed * 10 + round_)],
            stdout=subprocess.PIPE,
            text=True,
        )
        lines: list[str] = []
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout))
        reader.start()
        time.sleep(0.3 + rng.random() * 2.0)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reader.join()
        events = [json.loads(line) for line in lines if line.startswith("{")]
        acked, pending = _expected(events)
        assert events, "the writer never started writing"
        state.update(acked)
        got = json.loads(
            subprocess.run(
                [sys.executable, "-c", CHECK, str(tmp_path)],
                capture_output=True,
                text=True,
                check=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        cells = got["cells"]
        if pending and pending["ids"]:
            # the write in flight is all there or not at all
            texts = pending["texts"] or [None] * len(pending["ids"])
            outcome = dict(zip(pending["ids"], texts))
            differs = [c for c, t in outcome.items() if state.get(c) != t]
            landed = {cells.get(c) == outcome[c] for c in differs}
            assert len(landed) <= 1, f"a write in flight landed in part: {pending['ids']}"
            if landed == {True}:
                state.update(outcome)
        for cid, text in state.items():
            if text is None:
                assert cid not in cells, f"deleted {cid} came back"
            else:
                assert cells.get(cid) == text, f"acknowledged {cid} lost or stale"
        assert set(cells) == {c for c, t in state.items() if t is not None}
        # groups are consistent: every cell in exactly one group, that group's members
        assert got["grouped"] == sorted(cells)
        for cid, gid in got["group_of"].items():
            assert cid in got["members"][gid]
