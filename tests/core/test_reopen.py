"""Persistence across processes and against a real Chroma server process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_core.eval import clustered_data
from tests import invariants

WRITER = textwrap.dedent(
    """
    import json, sys
    from magnetic_core import HashingEmbedder, MagneticMemory
    from magnetic_core.eval import clustered_data
    vecs, _ = clustered_data(400, 32, 8, seed=21)
    with MagneticMemory(path=sys.argv[1], embedder=HashingEmbedder(32)) as mem:
        mem.add([f"cell {i}" for i in range(400)], vectors=vecs,
                ids=[f"c{i}" for i in range(400)],
                metadatas=[{"i": i, "tags": ["a", i], "pair": (i, "x")} for i in range(400)])
        mem.delete(ids=["c0", "c1"])
        hits = mem.search("cell 7", vector=vecs[7], k=10)
        print(json.dumps({
            "groups": sorted(sorted(g.cell_ids) for g in mem.groups()),
            "hits": [h.id for h in hits],
            "threshold": mem.join_threshold,
        }))
    """
)

READER = textwrap.dedent(
    """
    import json, sys
    from magnetic_core import HashingEmbedder, MagneticMemory
    with MagneticMemory(path=sys.argv[1], embedder=HashingEmbedder(32)) as mem:
        print(json.dumps({"count": mem.count(), "meta": mem.get(["m"])[0].metadata}))
    """
)


def test_reopen_in_a_fresh_process_restores_everything(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", WRITER, str(tmp_path)], capture_output=True, text=True, check=True
    )
    before = json.loads(out.stdout.strip().splitlines()[-1])
    vecs, _ = clustered_data(400, 32, 8, seed=21)
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder(32)) as mem:
        assert mem.count() == 398
        assert mem.get(["c5"])[0].metadata == {"i": 5, "tags": ["a", 5], "pair": (5, "x")}
        assert mem.get(["c0"]) == []
        assert sorted(sorted(g.cell_ids) for g in mem.groups()) == before["groups"]
        invariants.hierarchy(mem, cap=mem.config.max_group_size)
        assert [h.id for h in mem.search("cell 7", vector=vecs[7], k=10)] == before["hits"]
        assert mem.join_threshold == pytest.approx(before["threshold"])
        mem.add(["more"], ids=["m"], metadatas=[{"nested": {"deep": [1, 2]}}])
    out = subprocess.run(
        [sys.executable, "-c", READER, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "count": 399,
        "meta": {"nested": {"deep": [1, 2]}},
    }


def test_runs_against_a_real_chroma_server(own_chroma_server):
    emb = HashingEmbedder(32)
    client = own_chroma_server.client()
    mem = MagneticMemory(namespace="remote", embedder=emb, client=client)
    mem.add(
        ["the server holds this memory", "and this one"],
        ids=["a", "b"],
        metadatas=[{"where": "server"}, {}],
    )
    assert mem.search("server memory", k=1)[0].id == "a"
    mem.close()
    # a second client (another machine, in real life) sees the same store
    other = MagneticMemory(
        namespace="remote",
        embedder=emb,
        client=own_chroma_server.client(),
    )
    assert other.count() == 2
    assert other.get(["a"])[0].metadata == {"where": "server"}
    assert {g.id for g in other.groups()} == {c.group_id for c in other.get()}
