"""The value types the engine returns: frozen, with the documented shortcuts and summary."""

from __future__ import annotations

import dataclasses

import pytest

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_core.types import (
    EXPANDED_FROM_KEY,
    GROUP_ID_KEY,
    GROUP_LABEL_KEY,
    Cell,
    GroupInfo,
    Hit,
    MergePlan,
    Route,
    SleepReport,
    Stats,
)


def _stats(groups: int, singles: float, cohesion: float) -> Stats:
    return Stats(
        count=10, groups=groups, singleton_groups=0, largest_group=5, mean_group_size=2.0,
        mean_cohesion=cohesion, join_threshold=0.5, threshold_source="configured",
        embedder="e", dim=4, namespace="n", entities=0, singleton_share=singles,
    )  # fmt: skip


def _report(dry_run: bool) -> SleepReport:
    return SleepReport(
        dry_run=dry_run, merges=(("g1", "g2", 0.9),), absorbed=(("g3", "g1"), ("g4", "g1")),
        splits=(), moved=7, dropped=("g2", "g3", "g4"), relabelled=(), changed_groups=("g1",),
        thresholds={"join": 0.5}, sources={}, before=_stats(5, 0.4, 0.61),
        after=_stats(2, 0.125, 0.7049), seconds=0.01,
    )  # fmt: skip


def test_the_summary_line_says_what_a_pass_did():
    line = _report(dry_run=False).summary()
    assert line == (
        "1 merges, 2 fragments absorbed, 0 splits, moved 7 cells, 3 groups dropped; "
        "groups 5 -> 2, singleton share 40.0% -> 12.5%, mean cohesion 0.610 -> 0.705"
    )
    assert "would move 7 cells" in _report(dry_run=True).summary()
    assert "\n" not in line


def test_cells_are_current_until_superseded():
    cell = Cell(id="a", text="t", metadata={}, group_id="g")
    assert cell.is_current and cell.entities == () and cell.contradictions == ()
    old = dataclasses.replace(cell, superseded_by="b", superseded_at=1.0)
    assert not old.is_current and cell.is_current


@pytest.mark.parametrize(
    "value",
    [
        Cell(id="a", text="t", metadata={}, group_id="g"),
        Route(stages=("centroid",), centroid_similarity=0.5, boost=0.0, lexical=0.0,
              fallback_ran=False, probed_groups=3),
        GroupInfo(id="g", label="l", size=1, entities=(), cell_ids=("a",), cohesion=1.0),
        MergePlan(pairs=(), threshold=0.9),
        _stats(1, 0.0, 1.0),
    ],
)  # fmt: skip
def test_values_are_frozen(value):
    field = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, None)


def test_a_merge_plan_has_the_length_of_its_pairs():
    assert len(MergePlan(pairs=(), threshold=0.9)) == 0
    assert len(MergePlan(pairs=(("a", "b", 0.95), ("c", "d", 0.91)), threshold=0.9)) == 2


def test_hits_of_a_real_search_give_their_cells_id_text_and_metadata(tmp_path):
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder(64)) as mem:
        mem.add(["green tea with mint", "black coffee"], ids=["t", "c"],
                metadatas=[{"kind": "tea"}, {"kind": "coffee"}])  # fmt: skip
        hits = mem.search("green tea", k=2, explain=True)
        report = mem.sleep(dry_run=True)
    assert hits and all(isinstance(h, Hit) for h in hits)
    for hit in hits:
        assert (hit.id, hit.text, hit.metadata) == (hit.cell.id, hit.cell.text, hit.cell.metadata)
        assert hit.group_id == hit.cell.group_id and hit.route is not None
        assert hit.expanded_from is None
    assert hits[0].id == "t" and hits[0].metadata == {"kind": "tea"}
    assert report.summary().startswith("0 merges") and "would move" in report.summary()


def test_the_adapters_metadata_keys_are_distinct_and_namespaced():
    keys = (GROUP_ID_KEY, GROUP_LABEL_KEY, EXPANDED_FROM_KEY)
    assert len(set(keys)) == 3 and all(k.startswith("magnetic_") for k in keys)


def test_the_cells_and_hits_a_search_builds_equal_constructed_ones_and_stay_frozen(tmp_path):
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder()) as mem:
        mem.add(["green tea at noon", "coffee at dawn"], [{"k": 1}, {"k": 2}], ids=["a", "b"])
        hit = mem.search("green tea", k=1)[0]
        cell = hit.cell
        rebuilt = Cell(**{f.name: getattr(cell, f.name) for f in dataclasses.fields(Cell)})
        assert cell == rebuilt and cell == mem.get(["a"])[0]
        assert (cell.id, cell.metadata, cell.contradictions, cell.superseded_by) == (
            "a",
            {"k": 1},
            (),
            None,
        )
        assert hit == Hit(cell, hit.score, hit.rank_score, hit.group_id, hit.group_label)
        assert hit.group_id == cell.group_id and hit.expanded_from is None and hit.route is None
        with pytest.raises(dataclasses.FrozenInstanceError):
            hit.score = 1.0  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            cell.text = "changed"  # type: ignore[misc]
        cell.metadata["k"] = 5  # the hit holds a copy: the stored cell is untouched
        assert mem.get(["a"])[0].metadata == {"k": 1}


def test_a_hits_group_label_is_worked_out_when_first_read_and_travels_with_it(tmp_path):
    import copy
    import pickle

    texts = ["Ada Lovelace wrote notes on the engine", "Babbage built the engine", "cats nap"]
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder()) as mem:
        mem.add(texts)
        first, again = mem.search("engine notes", k=1)[0], mem.search("engine notes", k=1)[0]
        assert "group_label" not in vars(first)  # nothing labelled until asked
        label = mem.group(first.group_id).label
        assert first.group_label == label and first == again
        assert first.group_label is first.group_label  # read once, then kept
        for made in (
            pickle.loads(pickle.dumps(again)),
            copy.deepcopy(mem.search("engine notes", k=1)[0]),
        ):
            assert made.group_label == label and "_label_of" not in vars(made)
        assert (
            dataclasses.replace(mem.search("engine notes", k=1)[0], score=0.5).group_label == label
        )
        assert Hit(first.cell, 1.0, 1.0, "g", "given").group_label == "given"
        with pytest.raises(dataclasses.FrozenInstanceError):
            first.group_label = "other"  # type: ignore[misc]
        unread = mem.search("engine notes", k=1)[0]
    # read after the store was closed: the label is still the group's
    assert unread.group_label == label
