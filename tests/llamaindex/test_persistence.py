"""Nodes written by one process are read back whole by another (the store lives on disk)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from llama_index.core.vector_stores.types import VectorStoreQuery

from magnetic_llamaindex import MagneticVectorStore

ROOT = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent(
    """
    import datetime as dt, sys
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
    from magnetic_llamaindex import MagneticVectorStore

    with MagneticVectorStore(path=sys.argv[1], dim=4, embedder_name="hand-made-4d") as store:
        store.add([
            TextNode(
                id_=f"n{i}",
                text=f"node number {i}",
                embedding=[1.0, float(i), 0.0, 0.0],
                metadata={"i": i, "when": dt.date(2024, 1, i + 1), "tags": ("x", i)},
                relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"doc{i % 2}")},
            )
            for i in range(6)
        ])
        store.delete("doc1")
    """
)


def test_nodes_written_in_another_process_come_back_whole(tmp_path):
    path = str(tmp_path / "disk")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", WRITER, path], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr

    with MagneticVectorStore(path=path, dim=4, embedder_name="hand-made-4d") as store:
        nodes = store.get_nodes()
        assert [n.node_id for n in nodes] == ["n0", "n2", "n4"]
        for n in nodes:
            i = int(n.node_id[1:])
            assert n.text == f"node number {i}" and n.ref_doc_id == "doc0"
            assert n.metadata == {"i": i, "when": dt.date(2024, 1, i + 1), "tags": ("x", i)}
        result = store.query(VectorStoreQuery(query_embedding=[0.0, 1.0, 0.0, 0.0]))
        assert result.ids == ["n4"]
