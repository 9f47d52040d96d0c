"""One consolidation run over a real memory, with a scripted model in place of the LLM."""

from __future__ import annotations

import time

import numpy as np
import pytest

from magnetic_core import MagneticMemory, MemoryConfig
from magnetic_core._sleep.consolidate import (
    Consolidator,
    aask_each,
    as_facts,
    ask_each,
    raise_failures,
)
from magnetic_core._sleep.llm_json import LLMError, LLMUnavailableError
from magnetic_core._sleep.review import Call, ContradictingPair, ContradictionReport, Fact
from magnetic_core.embeddings import VectorsOnly
from magnetic_core.errors import InvalidInputError, WrongTypeError

D = 16
TOPICS = {
    "office": ["The office is in Paris", "The office is in Berlin", "The office opens at 9"],
    "pets": ["Rex is a dog", "Rex likes walks", "Rex is two years old", "Rex sleeps a lot"],
    "food": ["Lunch is at noon", "Lunch is pasta on Fridays"],
}
PARIS, BERLIN = "The office is in Paris", "The office is in Berlin"


@pytest.fixture
def mem(tmp_path):
    rng = np.random.default_rng(0)
    memory = MagneticMemory(
        path=str(tmp_path), embedder=VectorsOnly(D), config=MemoryConfig(join_threshold=0.8)
    )
    ids, texts, vecs = [], [], []
    for topic, facts in TOPICS.items():
        centre = rng.standard_normal(D)
        vecs += list(centre + 0.05 * rng.standard_normal((len(facts), D)))
        ids += [f"{topic}{i}" for i in range(len(facts))]
        texts += facts
    unit = np.stack(vecs) / np.linalg.norm(np.stack(vecs), axis=1, keepdims=True)
    later = ids.index("office1")  # Berlin is stored after the rest: the newer fact
    rest = [i for i in range(len(ids)) if i != later]
    memory.add([texts[i] for i in rest], ids=[ids[i] for i in rest], vectors=unit[rest])
    time.sleep(0.002)  # timestamps have millisecond resolution
    memory.add([texts[later]], ids=[ids[later]], vectors=unit[[later]])
    yield memory
    memory.close()


def paris_vs_berlin(call: Call) -> ContradictionReport:
    """The scripted model: the Paris and Berlin facts contradict, nothing else does."""
    texts = [f.text for f in call.facts]
    pairs = []
    if PARIS in texts and BERLIN in texts:
        pairs.append(ContradictingPair(
            first=texts.index(PARIS) + 1, second=texts.index(BERLIN) + 1,
            explanation="one office, two cities",
        ))  # fmt: skip
    return ContradictionReport(contradictions=pairs)


def test_a_run_records_the_contradiction_and_the_newer_fact_supersedes(mem):
    result = Consolidator(mem, check="all", sleep=False).run(paris_vs_berlin)
    assert result.ok and result.report is None and result.calls == 3
    assert [(c.a, c.b) for c in result.contradictions] == [("office0", "office1")]
    assert result.superseded == (("office0", "office1"),)
    paris, berlin = mem.get(["office0", "office1"])
    assert paris.superseded_by == "office1" and berlin.is_current
    assert {c.id for c in mem.get()} == {
        f"{t}{i}" for t, x in TOPICS.items() for i in range(len(x))
    }


def test_every_fact_of_a_reviewed_group_is_shown(mem):
    seen: dict[str, set[str]] = {}

    def record(call: Call) -> ContradictionReport:
        seen.setdefault(call.group_id or "", set()).update(f.id for f in call.facts)
        assert all(isinstance(f.timestamp, float) for f in call.facts)
        return ContradictionReport()

    result = Consolidator(mem, check="all", sleep=False, cells_per_call=2).run(record)
    groups = {g.id: set(g.cell_ids) for g in mem.groups()}
    assert set(result.checked_groups) == set(seen) == set(groups)
    assert all(seen[g] == groups[g] for g in groups)
    # groups are reviewed largest first
    sizes = [len(groups[g]) for g in result.checked_groups]
    assert sizes == sorted(sizes, reverse=True)


def test_the_group_budget_leaves_the_smaller_groups_for_later(mem):
    result = Consolidator(mem, check="all", sleep=False, max_groups=1).run(paris_vs_berlin)
    biggest = max(mem.groups(), key=lambda g: g.size)
    assert result.checked_groups == (biggest.id,)
    assert len(result.skipped_groups) == 2 and biggest.id not in result.skipped_groups
    assert result.contradictions == ()  # the office group (3 cells) was skipped


def test_an_unreachable_model_stops_the_run_and_is_reported_once(mem):
    asked: list[Call] = []

    def down(call: Call) -> ContradictionReport:
        asked.append(call)
        raise LLMUnavailableError("connection refused", hint="start the server")

    result = Consolidator(mem, check="all", sleep=False).run(down)
    assert len(asked) == 1 and result.calls == 1
    assert (
        not result.ok and len(result.failures) == 1 and "connection refused" in result.failures[0]
    )
    assert all(c.is_current for c in mem.get())


def test_a_failing_call_is_reported_and_the_others_still_run(mem):
    def flaky(call: Call) -> ContradictionReport:
        if any(f.text.startswith("Rex") for f in call.facts):
            raise LLMError("unparseable answer")
        return paris_vs_berlin(call)

    result = Consolidator(mem, check="all", sleep=False).run(flaky)
    assert result.calls == 3 and len(result.failures) == 1
    assert [(c.a, c.b) for c in result.contradictions] == [("office0", "office1")]


def test_numbers_that_do_not_name_two_shown_facts_are_rejected(mem):
    def nonsense(call: Call) -> ContradictionReport:
        return ContradictionReport(
            contradictions=[ContradictingPair(first=1, second=99, explanation="x")]
        )

    result = Consolidator(mem, check="all", sleep=False).run(nonsense)
    assert result.contradictions == () and len(result.rejected) == 3
    assert "99" in result.rejected[0]


def test_with_the_pass_on_only_the_groups_it_changed_are_reviewed(mem):
    asked: list[str] = []

    def note(call: Call) -> ContradictionReport:
        asked.append(call.group_id or "")
        return ContradictionReport()

    result = Consolidator(mem, check="changed").run(note)
    assert result.report is not None and not result.report.dry_run
    assert set(result.checked_groups) <= set(result.report.changed_groups)
    assert set(asked) == set(result.checked_groups)
    merged = Consolidator(mem, check="merged", merge_threshold=-1.0).run(note)
    assert set(merged.checked_groups) <= {keep for keep, _, _ in merged.merges}


async def test_an_async_run_gives_the_same_result(mem):
    async def ask(call: Call) -> ContradictionReport:
        return paris_vs_berlin(call)

    result = await Consolidator(mem, check="all", sleep=False).arun(ask)
    assert result.superseded == (("office0", "office1"),) and result.calls == 3


def test_of_takes_a_memory_or_a_store_holding_one(mem):
    class Store:
        memory = mem

    assert Consolidator.of(Store(), max_groups=3).max_groups == 3
    with pytest.raises(WrongTypeError, match="MagneticMemory"):
        Consolidator.of(object())
    with pytest.raises(WrongTypeError, match="'max_group'"):
        Consolidator.of(mem, max_group=3)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("setting", "value"),
    [("check", "some"), ("max_groups", 0), ("max_groups", True), ("cells_per_call", 1),
     ("cells_per_call", 2.5)],
)  # fmt: skip
def test_bad_settings_are_refused_naming_them(setting, value):
    with pytest.raises(InvalidInputError, match=setting):
        Consolidator(object(), **{setting: value})


def test_facts_from_pairs_and_triples():
    facts = as_facts([("a", "one"), ["b", "two", 3.0], Fact("c", "three")])
    assert facts == [Fact("a", "one"), Fact("b", "two", 3.0), Fact("c", "three")]
    with pytest.raises(WrongTypeError, match="'lonely'"):
        as_facts(["lonely"])


def _calls(n: int) -> list[Call]:
    return [Call(f"g{i}", (Fact("a", "x"), Fact("b", "y"))) for i in range(n)]


async def test_ask_each_stops_after_an_unreachable_model_sync_and_async():
    def ask(call: Call) -> ContradictionReport:
        if call.group_id == "g1":
            raise LLMError("bad json")
        if call.group_id == "g2":
            raise LLMUnavailableError("down")
        return ContradictionReport()

    async def aask(call: Call) -> ContradictionReport:
        return ask(call)

    for answers in (ask_each(_calls(4), ask), await aask_each(_calls(4), aask)):
        kinds = [type(a).__name__ for a in answers]
        assert kinds == ["ContradictionReport", "LLMError", "LLMUnavailableError", "NoneType"]


def test_raise_failures_raises_the_first_failure_of_its_kind():
    calls = _calls(3)
    ok = ContradictionReport()
    assert raise_failures(calls, [ok, ok, ok]).calls == 3
    with pytest.raises(LLMUnavailableError, match="1 of 3") as info:
        raise_failures(calls, [ok, LLMUnavailableError("down", hint="start it"), None])
    assert info.value.hint == "start it"
    with pytest.raises(LLMError, match="2 of 3") as other:
        raise_failures(calls, [RuntimeError("boom"), LLMError("bad"), ok])
    assert not isinstance(other.value, LLMUnavailableError)
    assert isinstance(other.value.__cause__, RuntimeError)
