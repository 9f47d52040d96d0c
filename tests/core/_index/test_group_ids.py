"""Group ids stay unique across processes writing one namespace at the same time (issue 10)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_core._index.index import HierIndex

# Each batch is a topic of its own (words no other batch uses), so most batches found a new
# group; both processes write as fast as they can, so a write often lands between the other
# one's check for foreign writes and its own write, where they could mint the same id.
WORKER = textwrap.dedent(
    """
    import sys
    import chromadb
    from magnetic_core import HashingEmbedder, MagneticMemory
    port, name, batches = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    client = chromadb.HttpClient(host="127.0.0.1", port=port)
    mem = MagneticMemory(namespace="ids", embedder=HashingEmbedder(64), client=client)
    print("ready", flush=True)
    sys.stdin.readline()
    for b in range(batches):
        words = " ".join(f"{name}{b}w{j}" for j in range(6))
        mem.add([f"{words} {i}" for i in range(3)], ids=[f"{name}-{b}-{i}" for i in range(3)])
    mem.close()
    print("done", flush=True)
    """
)


def test_concurrent_writers_never_share_a_group(chroma_server):
    batches = 25
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(chroma_server.port), name, str(batches)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:  # start both at once
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            out, _ = p.communicate(timeout=300)
            assert p.returncode == 0 and out.strip() == "done"
    finally:
        for p in procs:
            p.kill()
            p.wait()
    with MagneticMemory(
        namespace="ids", embedder=HashingEmbedder(64), client=chroma_server.client()
    ) as mem:
        assert mem.count() == 2 * batches * 3
        for group in mem.groups():
            writers = {cid.split("-")[0] for cid in group.cell_ids}
            assert len(writers) == 1, f"group {group.id} mixes writers: {group.cell_ids}"


def test_ids_carry_the_writer_and_stay_above_stored_numbers():
    index = HierIndex(4, 8, writer="beef")
    assert index.new_gid() == "g0-beef"
    index.note_gid("g41")  # an id of a store written before writer tokens
    index.note_gid("g7-cafe")
    index.note_gid("misc")  # ids of another form are left alone
    assert index.new_gid() == "g42-beef"
    assert HierIndex(4, 8).new_gid() == "g0"


def test_a_store_with_old_ids_keeps_them(tmp_path):
    with MagneticMemory(path=tmp_path, embedder=HashingEmbedder(64)) as mem:
        mem._index.writer = ""  # as written before writer tokens: plain g<n> ids
        mem.add(["alpha beta gamma", "delta epsilon zeta"], ids=["x", "y"])
        old = {c.id: c.group_id for c in mem.get()}
    assert all(g.startswith("g") and g[1:].isdigit() for g in old.values())
    with MagneticMemory(path=tmp_path, embedder=HashingEmbedder(64)) as mem:
        assert {c.id: c.group_id for c in mem.get()} == old
        mem.add(["eta theta iota kappa lambda"], ids=["z"])
        new = mem.get(["z"])[0].group_id
        assert new not in old.values() and "-" in new
