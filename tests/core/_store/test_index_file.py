"""The index snapshot beside an embedded store: a fast open that never shows stale cells."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import chromadb
import numpy as np
import pytest

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_core._store import persistence
from magnetic_core._store.index_file import DIRECTORY, snapshot_path
from magnetic_core._store.persistence import ChromaStore

WORDS = ["cats", "dogs", "stocks", "bonds", "rain", "snow", "Paris", "Berlin"]
TEXTS = [f"note {i} about {w} and more {w}, seen by Ann" for i, w in enumerate(WORDS * 40)]


def _open(path) -> MagneticMemory:
    return MagneticMemory(path=path, embedder=HashingEmbedder(64))


def _view(mem: MagneticMemory) -> tuple:
    cells = sorted((c.id, c.text, repr(c.metadata), c.group_id) for c in mem.get())
    groups = sorted((g.id, g.size) for g in mem.groups())
    hits = [(h.id, round(h.score, 5), h.group_id) for h in mem.search("cats in Paris", k=8)]
    return cells, groups, hits, mem.join_threshold


@pytest.fixture
def store(tmp_path):
    with _open(tmp_path) as mem:
        mem.add(
            TEXTS,
            metadatas=[{"i": i} for i in range(len(TEXTS))],
            ids=[f"c{i}" for i in range(len(TEXTS))],
        )
        view = _view(mem)
    return tmp_path, view


def _no_cell_reads(monkeypatch) -> None:
    def refuse(self, *args, **kwargs):
        raise AssertionError("the cells were read from Chroma")

    monkeypatch.setattr(persistence.ChromaStore, "load", refuse)


def test_reopening_uses_the_snapshot_and_sees_the_same_memory(store, monkeypatch):
    path, view = store
    assert (path / DIRECTORY / "default.npz").is_file()
    _no_cell_reads(monkeypatch)
    with _open(path) as mem:
        assert _view(mem) == view  # cells, groups, text+vector search, threshold
        mem.add(["fresh note about cats in Paris"], ids=["new"])
        assert not (path / DIRECTORY / "default.npz").exists()  # a write drops it first
    with _open(path) as mem:
        assert mem.get(["new"])[0].text == "fresh note about cats in Paris"
        assert mem.count() == len(TEXTS) + 1


def test_a_snapshot_open_labels_groups_with_words_not_stems(tmp_path, monkeypatch):
    texts = ["Alice moved to Berlin in May", "The deploy script lives in ops/deploy.sh"]
    with _open(tmp_path) as mem:
        mem.add(texts, ids=["a", "b"])
        before = sorted(g.label for g in mem.groups())
    _no_cell_reads(monkeypatch)
    with _open(tmp_path) as mem:
        after = sorted(g.label for g in mem.groups())
    assert after == before and any("moved" in label for label in after)


def test_a_snapshot_open_searches_with_the_saved_labels_and_computes_none(store, monkeypatch):
    """Labels are kept in the snapshot: the first searches of a fresh open show the labels
    the store had at close and label nothing (a group changed since is labelled anew)."""
    from magnetic_core._text.lexical import LexicalIndex

    path, _ = store
    with _open(path) as mem:
        labels = {g.id: g.label for g in mem.groups()}
    computed: list[int] = []
    real = LexicalIndex.term_counts

    def counting(self, cids):
        computed.append(1)
        return real(self, cids)

    monkeypatch.setattr(LexicalIndex, "term_counts", counting)
    _no_cell_reads(monkeypatch)
    with _open(path) as mem:
        hits = mem.search("cats in Paris", k=20) + mem.search("bonds and snow", k=20)
        assert {h.group_label for h in hits} <= set(labels.values())
        assert all(h.group_label == labels[h.group_id] for h in hits)
        assert {g.id: g.label for g in mem.groups()} == labels
        assert computed == []
        mem.add(["zebra quantum xylophone"], ids=["new"])
        (hit,) = [h for h in mem.search("zebra quantum xylophone", k=5) if h.id == "new"]
        assert computed == []  # a hit's label is worked out when it is read
        assert hit.group_label and computed  # a group changed since is labelled anew


def test_a_memory_that_only_reads_never_reads_the_cells_rows_from_chroma(store, monkeypatch):
    """Any read of the cells collection's rows makes Chroma load its own vector index of
    them (about 200 MB at 100K cells) that the engine never queries: an open from the
    snapshot, searches, gets and counts read none."""
    from chromadb.api.models.Collection import Collection

    path, view = store
    reads: list[tuple[str, str]] = []
    for method in ("get", "count", "query", "peek"):
        real = getattr(Collection, method)

        def spy(self, *args, _real=real, _method=method, **kwargs):
            reads.append((self.name, _method))
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(Collection, method, spy)
    with _open(path) as mem:
        assert _view(mem) == view
        assert mem.get(["c3"])[0].text == TEXTS[3]
        assert mem.count() == len(TEXTS)
        assert mem.search(vector=np.ones(64, np.float32), k=3)
    assert [r for r in reads if r[0].endswith("-cells")] == []


def test_a_reopened_store_keeps_texts_entities_and_insertion_order(tmp_path, monkeypatch):
    texts = [
        "Zoë Müller sent config.yaml to Ann",
        "plain ascii note about Paris",
        "emoji ✓ and 😀 from Köln, with “quotes”",
        "ORD-2024-0042 shipped to Berlin",
        "Zoë Müller again, now about Berlin",
    ]
    ids = ["z", "a", "e", "o", "y"]
    with _open(tmp_path) as mem:
        mem.add(texts, ids=ids)
        before = [(c.id, c.text, c.entities) for c in mem.get()]
        found = [h.id for h in mem.search("Zoë Müller", k=5)]
    assert [b[0] for b in before] == ids  # oldest first
    _no_cell_reads(monkeypatch)
    with _open(tmp_path) as mem:
        assert [(c.id, c.text, c.entities) for c in mem.get()] == before
        assert [h.id for h in mem.search("Zoë Müller", k=5)] == found
        assert [c.text for c in mem.get(["e", "z"])] == [texts[2], texts[0]]
        monkeypatch.undo()
        mem.add(["a later note"], ids=["late"])
        assert [c.id for c in mem.get()] == [*ids, "late"]  # the order goes on


@pytest.mark.parametrize("texts", [["plain note one", "plain note two"], ["Zoë ✓ 😀", "“x”"]])
def test_a_snapshot_an_earlier_version_wrote_reads_back_the_same_texts(
    tmp_path, monkeypatch, texts
):
    """Snapshots written before texts had byte offsets are read as they are, not rebuilt."""
    from magnetic_core._store import index_file

    with monkeypatch.context() as earlier:
        earlier.setattr(index_file, "_utf8_blob", index_file._blob)  # no byte offsets
        with _open(tmp_path) as mem:
            mem.add(texts, ids=["a", "b"])
    _no_cell_reads(monkeypatch)
    with _open(tmp_path) as mem:
        assert [c.text for c in mem.get(["b", "a"])] == texts[::-1]
        assert [h.text for h in mem.search(texts[1], k=2)][0] == texts[1]


def test_a_write_by_another_memory_that_closed_first_is_not_lost(store):
    path, _ = store
    a = _open(path)
    try:
        with _open(path) as b:  # b upserts (the row count does not move) and closes first
            b.add(["rewritten by b"], ids=["c3"])
    finally:
        a.close()  # a's state predates b's write: it must not become the snapshot
    with _open(path) as mem:
        assert mem.get(["c3"])[0].text == "rewritten by b"


CRASH = textwrap.dedent(
    """
    import os, sys
    from magnetic_core import HashingEmbedder, MagneticMemory
    mem = MagneticMemory(path=sys.argv[1], embedder=HashingEmbedder(64))
    mem.add(["written just before a crash"], ids=["c5"])
    os._exit(0)  # no close: no new snapshot
    """
)


def test_a_crash_between_a_write_and_the_snapshot(store):
    path, _ = store
    subprocess.run([sys.executable, "-c", CRASH, str(path)], check=True, timeout=120)
    with _open(path) as mem:
        assert mem.get(["c5"])[0].text == "written just before a crash"
        assert mem.count() == len(TEXTS)


def test_a_corrupt_snapshot_is_ignored_with_a_log_line(store, caplog):
    path, view = store
    (path / DIRECTORY / "default.npz").write_bytes(b"PK\x03\x04 not a real archive")
    with (
        caplog.at_level(logging.WARNING, logger="magnetic_core._store.index_file"),
        _open(path) as mem,
    ):
        assert _view(mem) == view
    assert any("unreadable" in r.getMessage() for r in caplog.records)
    with _open(path) as mem:  # the close wrote a good one again
        assert _view(mem) == view
    assert not any(path.glob(f"{DIRECTORY}/*.tmp.npz"))


def test_a_store_without_a_snapshot_opens_as_before(store, monkeypatch):
    path, view = store
    for f in (path / DIRECTORY).iterdir():
        f.unlink()
    with _open(path) as mem:  # an older store: read from the cells
        assert _view(mem) == view
    _no_cell_reads(monkeypatch)
    with _open(path) as mem:  # and from then on fast
        assert _view(mem) == view


def test_stores_without_a_local_path_have_no_snapshot(chroma_server):
    for client in (chromadb.EphemeralClient(), chroma_server.client()):
        assert snapshot_path(ChromaStore(client, "default")) is None


def test_bm25_postings_round_trip_through_the_snapshot_arrays():
    from magnetic_core._store.index_file import _blob, _strings
    from magnetic_core._text.lexical import LexicalIndex

    lex = LexicalIndex()
    for i, text in enumerate(TEXTS[:60]):
        lex.add(f"c{i}", text + (" extra words" if i % 3 else ""))
    for i in range(0, 60, 7):
        lex.remove(f"c{i}")  # removed documents leave holes that the export closes
    lex.add("c14", "re-added with new words about Berlin")
    arrays = lex.export_arrays()
    cids = _strings(_blob("x", arrays.pop("cids").tolist()), "x")
    terms = _strings(_blob("x", arrays.pop("terms").tolist()), "x")
    again = LexicalIndex.from_arrays(arrays, cids, terms)
    assert len(again) == len(lex)
    for query in ("cats Paris", "Berlin words", "note 13 about snow", "missing"):
        q = lex.query_terms(query)
        assert lex.top(q, 10)[0] == again.top(q, 10)[0]  # read from the flat arrays
        assert [round(float(s), 5) for s in lex.top(q, 10)[1]] == [
            round(float(s), 5) for s in again.top(q, 10)[1]
        ]
        assert [again.df(t) for t in q] == [lex.df(t) for t in q]
    q = lex.query_terms("cats Berlin")
    assert np.allclose(again.lookup(cids, *again.scores(q)), lex.lookup(cids, *lex.scores(q)))
    again._thaw()  # what the first write does
    assert {c: again._doc_terms[again._docno[c]] for c in cids} == {
        c: lex._doc_terms[lex._docno[c]] for c in cids
    }
    again.remove("c14")  # the rebuilt index keeps working incrementally
    again.add("c99", "cats again")
    assert "c99" in again.top(again.query_terms("cats again"), 3)[0]


def test_arrays_saved_beside_the_index_come_back(store):
    import numpy as np

    path, view = store
    with _open(path) as mem:  # opened from the snapshot and not written: the file stays
        state = mem._state
        state.snapshot.save(state.index, state.catalog, {"basis": np.eye(3, dtype=np.float32)})
    with _open(path) as mem:
        assert np.array_equal(mem._state.extra["basis"], np.eye(3))
        assert _view(mem) == view


def test_the_search_scorer_comes_back_with_the_snapshot(tmp_path, monkeypatch):
    # Past the size searched exactly (the budget covers less than EXACT_SHARE of the store)
    # a search builds the scorer; the snapshot carries it to the next open, which then
    # answers the same query the same way without rebuilding it.
    import math

    from magnetic_core._search import scorer as scorer_module
    from magnetic_core._search.search import EXACT_SHARE, PROBE_FLOOR

    n = max(scorer_module.MIN_CELLS, math.ceil(PROBE_FLOOR / EXACT_SHARE)) + 200
    texts = [f"record {i} on {WORDS[i % len(WORDS)]} number {i % 97}" for i in range(n)]

    def big():
        return MagneticMemory(path=tmp_path, embedder=HashingEmbedder(384))

    with big() as mem:
        mem.add(texts, ids=[f"r{i}" for i in range(n)])
        first = [(h.id, round(h.score, 5)) for h in mem.search("record on rain", k=10)]
        assert mem._scorer.export_arrays()  # built by that search
    rebuilt = []
    monkeypatch.setattr(scorer_module.Scorer, "_rebuild", lambda self, index: rebuilt.append(index))
    with big() as mem:
        again = [(h.id, round(h.score, 5)) for h in mem.search("record on rain", k=10)]
    assert again == first and not rebuilt


def test_a_scorer_saved_with_eight_bit_codes_is_built_again(tmp_path, monkeypatch, caplog):
    # A snapshot written before the codes took four bits (three meta entries, int8 codes a
    # rank wide) is not read as nibble codes: the first search builds the scorer again
    # and answers as the store did, without a warning.
    import math

    import numpy as np

    from magnetic_core._search import scorer as scorer_module
    from magnetic_core._search.search import EXACT_SHARE, PROBE_FLOOR

    n = max(scorer_module.MIN_CELLS, math.ceil(PROBE_FLOOR / EXACT_SHARE)) + 200
    texts = [f"note {i} about {WORDS[i % len(WORDS)]} number {i % 91}" for i in range(n)]

    def big():
        return MagneticMemory(path=tmp_path, embedder=HashingEmbedder(384))

    export = scorer_module.Scorer.export_arrays

    def as_before(self):  # what the snapshot held then
        arrays = export(self)
        rank = int(arrays["meta"][0])
        eight_bit = np.ones((arrays["code"].shape[0], rank), np.int8)
        return {**arrays, "meta": arrays["meta"][:3], "code": eight_bit}

    monkeypatch.setattr(scorer_module.Scorer, "export_arrays", as_before)
    with big() as mem:
        mem.add(texts, ids=[f"n{i}" for i in range(n)])
        first = [h.id for h in mem.search("note about rain", k=10)]
    monkeypatch.setattr(scorer_module.Scorer, "export_arrays", export)
    rebuilt = []
    build = scorer_module.Scorer._rebuild

    def counted(self, index):
        rebuilt.append(index)
        build(self, index)

    monkeypatch.setattr(scorer_module.Scorer, "_rebuild", counted)
    with caplog.at_level(logging.WARNING), big() as mem:
        assert not scorer_module.Scorer.same_codes(mem._state.extra)
        again = [h.id for h in mem.search("note about rain", k=10)]
    assert rebuilt and again == first
    assert "not usable" not in caplog.text


def test_a_bulk_load_never_searched_still_saves_the_scorer(tmp_path, monkeypatch):
    # The scorer is built at close when no search built it, so the first query of the
    # next process does not pay for building it.
    from magnetic_core._search import scorer as scorer_module

    n = scorer_module.MIN_CELLS + 200
    texts = [f"entry {i} on {WORDS[i % len(WORDS)]} number {i % 89}" for i in range(n)]
    with MagneticMemory(path=tmp_path, embedder=HashingEmbedder(384)) as mem:
        mem.add(texts, ids=[f"e{i}" for i in range(n)])
        assert not mem._scorer.export_arrays()  # nothing searched yet
    rebuilt = []
    monkeypatch.setattr(scorer_module.Scorer, "_rebuild", lambda self, index: rebuilt.append(index))
    _no_cell_reads(monkeypatch)
    with MagneticMemory(path=tmp_path, embedder=HashingEmbedder(384)) as mem:
        hits = mem.search("entry on snow", k=5)
    assert len(hits) == 5 and not rebuilt


def test_a_store_whose_cells_name_no_entity_reopens_from_the_snapshot(
    tmp_path, monkeypatch, caplog
):
    with _open(tmp_path) as mem:
        mem.add(["the cat sleeps", "stocks fell"], ids=["a", "b"])
        assert all(not c.entities for c in mem.get())
    _no_cell_reads(monkeypatch)
    with caplog.at_level(logging.WARNING), _open(tmp_path) as mem:
        assert sorted(c.text for c in mem.get()) == ["stocks fell", "the cat sleeps"]
    assert "unreadable" not in caplog.text


def test_an_empty_store_reopens_from_its_snapshot_without_a_warning(tmp_path, caplog):
    # A CLI session's namespaces are often empty: their snapshot was read as broken.
    with _open(tmp_path) as mem:
        assert mem.count() == 0
    assert (tmp_path / DIRECTORY / "default.npz").is_file()
    with caplog.at_level(logging.WARNING), _open(tmp_path) as mem:
        assert mem.count() == 0 and mem.search("cats", k=3) == []
        mem.add(["the cat sleeps"], ids=["a"])
    assert "unreadable" not in caplog.text
    with _open(tmp_path) as mem:
        assert [h.id for h in mem.search("cat", k=3)] == ["a"]


def test_a_snapshot_of_an_older_format_is_rebuilt_never_misread(store, caplog):
    import json

    from magnetic_core._store.index_file import FORMAT

    path, view = store
    file = path / DIRECTORY / "default.npz"
    with np.load(file) as f:
        arrays = {k: f[k] for k in f.files}
    meta = json.loads(bytes(arrays["meta"]).decode())
    assert meta["format"] == FORMAT
    meta["format"] = 2  # before the groups' sums were kept: its centroids would be summed
    del arrays["totals"]
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    with open(file, "wb") as fh:
        np.savez(fh, **arrays)
    with (
        caplog.at_level(logging.INFO, logger="magnetic_core._store.index_file"),
        _open(path) as mem,
    ):
        assert _view(mem) == view
    assert any("format 2" in r.getMessage() for r in caplog.records)
    with np.load(file) as f:  # the close wrote the current format
        assert json.loads(bytes(f["meta"]).decode())["format"] == FORMAT


def test_a_store_that_shrank_below_the_scorers_size_still_writes_its_snapshot(
    tmp_path, caplog, monkeypatch
):
    # A search built the scorer; deleting most cells leaves a store too small to sync it
    # (under MIN_CELLS, scored exactly), and its state no longer matches the groups. The
    # snapshot at close must still be written (without the scorer), and the next open
    # read from it.
    import math

    from magnetic_core._search import scorer as scorer_module
    from magnetic_core._search.search import EXACT_SHARE, PROBE_FLOOR

    n = max(scorer_module.MIN_CELLS, math.ceil(PROBE_FLOOR / EXACT_SHARE)) + 200
    texts = [f"record {i} on {WORDS[i % len(WORDS)]} number {i % 97}" for i in range(n)]
    ids = [f"r{i}" for i in range(n)]

    def big():
        return MagneticMemory(path=tmp_path, embedder=HashingEmbedder(384))

    with caplog.at_level(logging.WARNING), big() as mem:
        mem.add(texts, ids=ids)
        mem.search("record on rain", k=10)
        assert mem._scorer.export_arrays()  # built by that search
        mem.delete(ids[: n - scorer_module.MIN_CELLS + 100])
        kept = [(h.id, round(h.score, 5)) for h in mem.search("record on rain", k=10)]
    assert "snapshot was not written" not in caplog.text
    assert (tmp_path / DIRECTORY / "default.npz").is_file()
    _no_cell_reads(monkeypatch)  # the next open reads the snapshot, not the cells
    with big() as mem:
        assert [(h.id, round(h.score, 5)) for h in mem.search("record on rain", k=10)] == kept
