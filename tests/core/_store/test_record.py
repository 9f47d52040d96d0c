"""Deeply nested metadata is refused before anything is written, and a store holding a
record it cannot read still opens: the bad row is logged and skipped, never fatal."""

from __future__ import annotations

import json
import logging
import pathlib
import shutil

import chromadb
import numpy as np
import pytest

from magnetic_core import MagneticMemory
from magnetic_core._store.codec import decode_record
from magnetic_core._store.index_file import DIRECTORY
from magnetic_core._store.persistence import ROW_KEY
from magnetic_core.errors import CorruptRecordError, MetadataError
from magnetic_core.validators import MAX_DEPTH


def _nested(depth: int) -> dict:
    """A metadata dict nested ``depth`` levels deep (the dict itself is level 1)."""
    value: object = "leaf"
    for _ in range(depth - 1):
        value = [value]
    return {"deep": value}


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 950, 952, 100_000])
def test_metadata_nested_past_the_limit_is_refused_and_nothing_is_written(tmp_path, hashing, depth):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add(["kept"], ids=["keep"])
        with pytest.raises(MetadataError, match=f"more than {MAX_DEPTH} levels"):
            mem.add(["too deep"], ids=["deep"], metadatas=[_nested(depth)])
        assert mem.get(["deep"]) == [] and mem.count() == 1
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        assert [c.id for c in mem.get()] == ["keep"]


def test_metadata_at_the_limit_round_trips(tmp_path, hashing):
    meta = _nested(MAX_DEPTH)
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add(["deep but allowed"], ids=["d"], metadatas=[meta])
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        assert mem.get(["d"])[0].metadata == meta


def _plant(path, rows: dict[str, object], dim: int) -> None:
    """Write rows straight into the cells collection, as an older version or a bug might.

    Such a writer keeps no index snapshot and moves no epoch, so the snapshot goes: the next
    open reads the rows (a store whose cells carry no entities used to have an unreadable
    snapshot, which hid this from the tests).
    """
    shutil.rmtree(pathlib.Path(path) / DIRECTORY, ignore_errors=True)
    client = chromadb.PersistentClient(path=str(path))
    cells = client.get_collection("mag-default-cells")
    vec = np.ones(dim, np.float32) / np.sqrt(dim)
    for cid, meta in rows.items():
        cells.upsert(ids=[cid], embeddings=[vec], documents=[f"text of {cid}"], metadatas=[meta])


def test_a_store_with_unreadable_rows_opens_and_reports_them(tmp_path, hashing, caplog):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add(["good one", "good two"], ids=["g1", "g2"], metadatas=[{"n": 1}, None])
        good = mem.get()
    record = {"g": "grp", "s": 99, "c": 1.0}
    bad = {
        # metadata nested 5000 levels (JSON the decoder cannot even parse)
        "deep": {
            ROW_KEY: '{"g": "grp", "s": 90, "c": 1.0, "m": {"x": ' + "[" * 5000 + "]" * 5000 + "}}"
        },
        "malformed": {ROW_KEY: '{"g": "grp", "s": '},
        "wrong-types": {ROW_KEY: json.dumps(dict(record, s="nine", c=[1]))},
        "no-record": {"something": "else"},
        "bad-date": {ROW_KEY: json.dumps(dict(record, m={"d": {"__mag_type__": "date"}}))},
    }
    _plant(tmp_path, bad, hashing.dim)
    caplog.set_level(logging.WARNING)
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        assert mem.get() == good
        assert mem.search("good one", k=5)[0].id == "g1"
        mem.add(["still writable"], ids=["g3"])
    skipped = " ".join(r.getMessage() for r in caplog.records)
    for cid in bad:
        assert repr(cid) in skipped
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        assert {c.id for c in mem.get()} == {"g1", "g2", "g3"}


@pytest.mark.parametrize(
    "raw",
    [
        None,
        3,
        "",
        "[1, 2]",
        '{"g": "x"}',
        '{"g": "x", "s": 1, "c": "nan"}',
        '{"g": "x", "s": 1, "c": 1, "e": [1]}',
        '{"g": "x", "s": 1, "c": 1, "l": ["a"]}',
    ],
)
def test_decode_record_names_the_cell_for_any_bad_record(raw):
    with pytest.raises(CorruptRecordError, match="'c9'"):
        decode_record("c9", raw)


def test_decode_record_reads_both_schemas():
    meta = {"m": {"t": {"__mag_type__": "tuple", "items": [1, 2]}}}
    new = decode_record("a", json.dumps({"g": "g1", "s": 3, "c": 1.5, "e": ["x"], **meta}))
    old = decode_record(
        "a",
        json.dumps(
            {
                "group": "g1",
                "seq": 3,
                "created": 1.5,
                "updated": 1.5,
                "entities": ["x"],
                "meta": meta["m"],
                "links": [],
            }
        ),
    )
    assert new == old
    assert new["m"] == {"t": (1, 2)} and new["u"] == 1.5 and new["e"] == ("x",)
