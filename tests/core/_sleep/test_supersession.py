"""Contradictions end in supersession: both cells kept and linked, the newer current."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from magnetic_core import HashingEmbedder, InvalidInputError, MagneticMemory
from magnetic_core._sleep.review import Fact, plan_calls, plan_chunks


@pytest.fixture
def mem(tmp_path: Path):
    memory = MagneticMemory(path=str(tmp_path / "s"), embedder=HashingEmbedder(dim=64))
    memory.add(["Alice lives in Paris."], ids=["old"])
    time.sleep(0.01)
    memory.add(["Alice lives in Berlin."], ids=["new"])
    memory.add(["Bob likes chess."], ids=["other"])
    yield memory
    memory.close()


def test_a_contradiction_between_different_times_supersedes_the_older(mem: MagneticMemory):
    mem.mark_contradiction("new", "old", "Alice cannot live in both cities.")
    old, new = mem.get(["old", "new"])
    assert old.superseded_by == "new" and old.superseded_at is not None and not old.is_current
    assert new.superseded_by is None and new.is_current
    assert old.contradictions[0]["other"] == "new" and new.contradictions[0]["other"] == "old"
    assert mem.stats().superseded == 1
    everything = {h.id for h in mem.search("where does Alice live", k=3)}
    current = {h.id for h in mem.search("where does Alice live", k=3, current_only=True)}
    assert everything == {"old", "new", "other"}
    assert current == {"new", "other"}
    assert mem.count() == 3  # nothing was deleted


def test_supersession_survives_reopening(mem: MagneticMemory, tmp_path: Path):
    mem.supersede("old", "new")
    mem.close()
    with MagneticMemory(path=str(tmp_path / "s"), embedder=HashingEmbedder(dim=64)) as again:
        (old,) = again.get(["old"])
        assert old.superseded_by == "new"
        assert "old" not in {h.id for h in again.search("Alice", k=3, current_only=True)}


def test_equal_timestamps_link_without_superseding(tmp_path: Path):
    with MagneticMemory(path=str(tmp_path / "t"), embedder=HashingEmbedder(dim=64)) as mem:
        mem.add(["The sky is green.", "The sky is blue."], ids=["a", "b"])
        mem.mark_contradiction("a", "b", "one colour")
        a, b = mem.get(["a", "b"])
        assert a.superseded_by is None and b.superseded_by is None
        assert a.contradictions and b.contradictions


def test_explicit_supersede_overrides_time_order_and_upsert_resets_it(mem: MagneticMemory):
    mem.supersede("new", "old", "the move was cancelled")
    assert mem.get(["new"])[0].superseded_by == "old"
    assert {h.id for h in mem.search("Alice", k=3, current_only=True)} == {"old", "other"}
    mem.add(["Alice lives in Berlin again."], ids=["new"])  # a fresh fact under the same id
    assert mem.get(["new"])[0].superseded_by is None
    assert "new" in {h.id for h in mem.search("Alice", k=3, current_only=True)}
    # Both sides keep the link as a plain contradiction (nothing one-sided).
    new, old = mem.get(["new", "old"])
    assert [x["other"] for x in new.contradictions] == ["old"]
    assert [x["other"] for x in old.contradictions] == ["new"]
    assert all("supersession" not in x for x in (*new.contradictions, *old.contradictions))


def test_upserting_the_same_text_keeps_the_supersession(mem: MagneticMemory):
    mem.supersede("old", "new", "moved")
    (old,) = mem.get(["old"])
    mem.add([old.text], metadatas=[{"checked": True}], ids=["old"])
    assert mem.get(["old"])[0].superseded_by == "new"


def test_bad_links_are_refused_and_change_nothing(mem: MagneticMemory):
    with pytest.raises(InvalidInputError, match="missing"):
        mem.supersede("old", "missing")
    with pytest.raises(InvalidInputError, match="itself"):
        mem.mark_contradiction("old", "old", "x")
    with pytest.raises(InvalidInputError, match="explanation"):
        mem.mark_contradiction("old", "new", "  ")
    assert all(c.contradictions == () for c in mem.get())


def test_current_only_still_returns_k_results_when_k_exist(tmp_path: Path):
    with MagneticMemory(path=str(tmp_path / "k"), embedder=HashingEmbedder(dim=64)) as mem:
        ids = mem.add([f"note {i} about tea" for i in range(12)])
        time.sleep(0.01)
        for i in range(6):
            mem.supersede(ids[i], ids[i + 6])
        hits = mem.search("note about tea", k=6, current_only=True)
        assert {h.id for h in hits} == set(ids[6:])


def test_chunks_cover_every_close_pair_within_the_budget():
    rng = np.random.default_rng(5)
    v = rng.normal(size=(90, 12)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    chunks = plan_chunks(90, 16, v, neighbours=4)
    assert all(len(c) <= 16 for c in chunks)
    sims = v @ v.T
    np.fill_diagonal(sims, -np.inf)
    near = np.argsort(-sims, axis=1)[:, :4]
    together = {frozenset((a, b)) for c in chunks for a in c for b in c if a != b}
    assert all(frozenset((i, int(j))) in together for i in range(90) for j in near[i])
    assert len(chunks) < 90 * 4  # far fewer calls than pairs


def test_without_vectors_every_pair_meets_and_small_groups_take_one_call():
    chunks = plan_chunks(25, 10)
    together = {frozenset((a, b)) for c in chunks for a in c for b in c if a != b}
    assert len(together) == 25 * 24 // 2 and all(len(c) <= 10 for c in chunks)
    facts = [Fact(str(i), f"fact {i}") for i in range(5)]
    (call,) = plan_calls(facts, cells_per_call=24)
    assert call.messages[1][1].splitlines()[1:] == [f"{i + 1}. fact {i}" for i in range(5)]
    with pytest.raises(InvalidInputError, match="cells_per_call"):
        plan_chunks(5, 1)
