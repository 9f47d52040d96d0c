"""Two processes writing one namespace on one real Chroma server stay correct."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from magnetic_core import HashingEmbedder, MagneticMemory
from tests import invariants

WORKER = textwrap.dedent(
    """
    import json, sys
    import chromadb
    from magnetic_core import HashingEmbedder, MagneticMemory
    client = chromadb.HttpClient(host="127.0.0.1", port=int(sys.argv[1]))
    namespace = sys.argv[2] if len(sys.argv) > 2 else "shared"
    mem = MagneticMemory(namespace=namespace, embedder=HashingEmbedder(64), client=client)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "add":
            out = mem.add(cmd["texts"], ids=cmd["ids"])
        elif op == "delete":
            out = mem.delete(ids=cmd["ids"])
        elif op == "refresh":
            out = mem.refresh()
        elif op == "count":
            out = mem.count()
        elif op == "ids":
            out = sorted(c.id for c in mem.get())
        elif op == "close":
            mem.close()
            out = None
        print(json.dumps({"out": out}), flush=True)
        if op == "close":
            break
    """
)

TOPICS = {
    "a": "cooking recipe oven flour butter sugar dough bake",
    "b": "rocket orbit launch satellite moon booster payload",
}


class Writer:
    """One writer process, driven one command at a time."""

    def __init__(self, port: int, namespace: str = "shared") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(port), namespace],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert json.loads(self._line()) == {"ready": True}

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the writer process died"
        return line

    def __call__(self, op: str, **kwargs):
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **kwargs}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self._line())["out"]

    def add(self, topic: str, start: int, stop: int) -> None:
        words = TOPICS[topic].split()
        texts = [" ".join(words[i % 3 :]) + f" {topic} note {i}" for i in range(start, stop)]
        self("add", texts=texts, ids=[f"{topic}{i}" for i in range(start, stop)])


def test_two_processes_see_each_others_writes(chroma_server):
    a, b = Writer(chroma_server.port), Writer(chroma_server.port)
    try:
        a.add("a", 0, 6)
        b.add("b", 0, 6)
        a.add("a", 6, 11)
        b.add("b", 6, 11)
        # each deletes a cell the other wrote: found, deleted, counted
        assert a("delete", ids=["b3"]) == 1
        assert b("delete", ids=["a2"]) == 1
        expected = sorted(
            [f"a{i}" for i in range(11) if i != 2] + [f"b{i}" for i in range(11) if i != 3]
        )
        assert a("refresh") is True  # b deleted a2 since a last looked
        assert a("ids") == expected
        assert b("refresh") is False  # nothing new since b's own delete
        assert b("ids") == expected
        a("close")
        b("close")
    finally:
        for w in (a, b):
            w.proc.kill()
            w.proc.wait()
    with MagneticMemory(
        namespace="shared", embedder=HashingEmbedder(64), client=chroma_server.client()
    ) as mem:
        assert sorted(c.id for c in mem.get()) == expected
        # no group mixes the two processes' unrelated topics
        for group in mem.groups():
            assert len({cid[0] for cid in group.cell_ids}) == 1, group.cell_ids
        assert len(invariants.hierarchy(mem)) == 20


def test_a_writer_that_wrote_and_closed_is_still_seen(chroma_server):
    # b opens, writes and closes while a stays open: a must still learn of b's writes
    # (b's counter row is gone by then), or a's delete of b's cell would return 0.
    a, b = Writer(chroma_server.port, "closing"), Writer(chroma_server.port, "closing")
    try:
        a.add("a", 0, 4)
        b.add("b", 0, 4)
        b("close")
        assert a("delete", ids=["b1"]) == 1
        assert a("ids") == sorted([f"a{i}" for i in range(4)] + ["b0", "b2", "b3"])
        c = Writer(chroma_server.port, "closing")  # opens after the others and writes nothing
        try:
            assert c("refresh") is False
            a.add("a", 4, 6)
            assert c("refresh") is True
        finally:
            c.proc.kill()
            c.proc.wait()
        a("close")
    finally:
        for w in (a, b):
            w.proc.kill()
            w.proc.wait()
