"""Records kept as snapshot columns: decoded on first read, and a memory opened from them
behaves like one rebuilt from the cells (entities, threads, links, upserts, deletes)."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_core._store import persistence
from magnetic_core._store.columns import RecordColumns, Records, StoredFields
from magnetic_core._store.record import CellRecord
from magnetic_core._text.lexical import LexicalIndex


def _columns(records: dict[str, CellRecord]) -> RecordColumns:
    stored = [StoredFields.of(r) for r in records.values()]

    def blob(strings: list[str]) -> tuple[str, np.ndarray]:
        return "".join(strings), np.cumsum([len(s) for s in strings], dtype=np.int64)

    return RecordColumns(
        list(records),
        *blob([s.text for s in stored]),
        *blob([s.metadata for s in stored]),
        *blob([s.links for s in stored]),
        [e for s in stored for e in s.entities],
        np.cumsum([len(s.entities) for s in stored], dtype=np.int64),
        np.array([s.created_at for s in stored]),
        np.array([s.updated_at for s in stored]),
    )


ORIGINAL = {
    "a": CellRecord(
        "Ann went to Paris", {"session_id": "s1", "turn": 1}, ("Ann", "Paris"), 1.0, 2.0
    ),
    "b": CellRecord("plain note", {}, (), 3.0, 3.0),
    "c": CellRecord(
        "Zoë wrote ✓ in Köln", {"tags": ("x", "y")}, ("Zoë",), 4.0, 4.5, [{"other": "b"}]
    ),
}


def test_records_read_from_columns_equal_the_originals_and_stay_the_same_object():
    records = Records(_columns(ORIGINAL))
    assert len(records) == 3 and list(records) == ["a", "b", "c"]
    assert {c: records[c] for c in records} == ORIGINAL  # tuples, unicode, links intact
    first = records["c"]
    first.contradictions.append({"other": "a"})  # changed in place, as writes do
    assert records["c"] is first and len(records["c"].contradictions) == 2
    assert records.stored("c") == StoredFields.of(first)  # the snapshot sees the change


def test_records_put_deleted_and_put_again():
    records = Records(_columns(ORIGINAL))
    del records["b"]
    assert "b" not in records and len(records) == 2
    with pytest.raises(KeyError):
        records["b"]
    with pytest.raises(KeyError):
        del records["b"]
    records["b"] = CellRecord("back again", {}, (), 9.0, 9.0)
    records["d"] = CellRecord("new", {}, ("Ann",), 10.0, 10.0)
    assert records["b"].text == "back again" and len(records) == 4
    del records["d"]
    assert len(records) == 3 == len(list(records))
    records["d"] = CellRecord("new", {}, ("Ann",), 10.0, 10.0)
    records["d"] = records["d"]  # an upsert of a new id counts once
    assert len(records) == 4 == len(list(records))
    assert sorted(records) == ["a", "b", "c", "d"]
    assert sorted(c for c, _ in records.entity_pairs()) == ["a", "c", "d"]
    assert [c for c, _ in records.with_links()] == ["c"]
    assert [c for c, _ in records.with_metadata()] == ["a", "c"]
    records.clear()
    assert len(records) == 0 and "a" not in records


def _open(path) -> MagneticMemory:
    return MagneticMemory(path=path, embedder=HashingEmbedder(64))


def _conversation(path) -> None:
    with _open(path) as mem:
        turns = [f"turn {i}: Ann talks about trip {i} to Berlin" for i in range(12)]
        mem.add(
            turns,
            metadatas=[{"session_id": "s1", "turn": i} for i in range(12)],
            ids=[f"t{i}" for i in range(12)],
        )
        mem.add(["Bob fixed deploy.sh on Friday", "the weather was grey"], ids=["x", "y"])
        mem.supersede("t0", "t11", "the plan changed")


def _behaviour(mem: MagneticMemory) -> tuple:
    text = [(h.id, round(h.score, 5)) for h in mem.search("deploy.sh Bob", k=3)]
    current = {h.id for h in mem.search("Ann trip Berlin", k=14, current_only=True)}
    every = {h.id for h in mem.search("Ann trip Berlin", k=14)}
    cells = sorted((c.id, c.text, repr(c.metadata), c.entities) for c in mem.get())
    return text, current, every, cells, mem.stats().superseded, mem.stats().entities


def test_a_memory_opened_from_columns_behaves_as_one_rebuilt(tmp_path, monkeypatch):
    _conversation(tmp_path)
    with _open(tmp_path) as mem:  # from the snapshot
        seen = _behaviour(mem)
    assert "t0" not in seen[1] and "t0" in seen[2] and seen[4] == 1
    assert seen[0][0][0] == "x"  # found by its entity and words
    for f in (tmp_path / "magnetic-index").iterdir():
        f.unlink()
    with _open(tmp_path) as mem:  # rebuilt from the cells
        assert _behaviour(mem) == seen

    def refuse(self, *args, **kwargs):
        raise AssertionError("the cells were read from Chroma")

    monkeypatch.setattr(persistence.ChromaStore, "load", refuse)
    with _open(tmp_path) as mem:  # writes on a memory opened from columns
        mem.add(["turn 12: Ann is back from Berlin"], [{"session_id": "s1", "turn": 12}], ["t12"])
        mem.add(["Bob broke deploy.sh again"], ids=["x"])  # an upsert of a stored row
        mem.delete(["y"])
        assert mem.get(["x"])[0].text == "Bob broke deploy.sh again"
        assert mem.count() == 14 and "y" not in {c.id for c in mem.get()}
        assert "t12" in {h.id for h in mem.search("Ann back from Berlin", k=3)}
    monkeypatch.undo()
    with _open(tmp_path) as mem:  # and what they wrote is what the next open sees
        assert mem.get(["x"])[0].text == "Bob broke deploy.sh again" and mem.count() == 14


def _exported(lexical: LexicalIndex) -> tuple[dict, list[str], list[str], list[str]]:
    arrays = lexical.export_arrays()
    cids, terms, surface = (arrays.pop(k).tolist() for k in ("cids", "terms", "surface"))
    return arrays, cids, terms, surface


def test_labelling_a_group_reads_its_words_without_holding_its_records():
    from magnetic_core._store.catalog import Catalog

    originals = {
        f"b{i}": CellRecord(text, {}, ("Sourdough Club",), float(i), float(i))
        for i, text in enumerate(["sourdough bread rises", "bread dough, sourdough", "bread oven"])
    }
    # As in a snapshot: the BM25 index holds every cell's terms (and the words shown).
    lexical = LexicalIndex()
    for cid, record in originals.items():
        lexical.add(cid, record.text)
    catalog = Catalog(_columns(originals), LexicalIndex.from_arrays(*_exported(lexical)))
    label, entities = catalog.label("g1", 1, list(originals))
    assert "bread" in label and entities == ("Sourdough Club",)
    assert all(catalog.records.decoded(c) is None for c in originals)  # nothing kept
    catalog.records["b0"].metadata["seen"] = True  # a read does decode and keep
    assert catalog.records.decoded("b0") is catalog.records["b0"]
    with pytest.raises(KeyError):
        catalog.records.decoded("missing")


def test_a_snapshot_entity_column_reads_like_the_list_it_holds():
    from magnetic_core._store.columns import BlobStrings

    strings = ["zoë", "", "köln", "config.yaml", "✓ done", "ann"]
    column = BlobStrings("".join(strings), np.cumsum([len(s) for s in strings]))
    assert len(column) == len(strings) and list(column) == strings
    for i in range(-len(strings), len(strings)):
        assert column[i] == strings[i]
    for a in range(-7, 8):
        for b in range(-7, 8):
            assert column[a:b] == strings[a:b]
    assert column[::2] == strings[::2]
    with pytest.raises(IndexError):
        column[len(strings)]
