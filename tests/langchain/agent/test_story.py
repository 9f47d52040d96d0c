"""``magnetic story`` through the CLI: consistency checks, supersession, continuous mode."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path

from magnetic_core import HashingEmbedder, MagneticMemory
from tests.fake_ollama import FakeOllama
from tests.langchain.agent.conftest import Magnetic, spawn
from tests.langchain.agent.story_model import StoryModel

GREEN, BLUE = "Mira's eyes are green.", "Mira's eyes are blue."
P1 = "Mira, a cartographer with green eyes, reached the harbour town of Vell."
P2 = "Oren, the lighthouse keeper of Vell, handed Mira an old map."
P3 = "Mira narrowed her blue eyes at the map."
FACTS = {
    P1: [GREEN, "Mira is a cartographer.", "Vell is a harbour town."],
    P2: ["Oren is the lighthouse keeper of Vell.", "Oren gave Mira an old map."],
    P3: [BLUE],
}


def _world(tmp_path: Path, name: str = "default") -> MagneticMemory:
    return MagneticMemory(
        path=str(tmp_path / "store"), namespace=f"story-{name}", embedder=HashingEmbedder()
    )


def test_a_contradicting_passage_is_shown_and_accepting_it_supersedes(
    magnetic: Magnetic, tmp_path: Path
):
    model = StoryModel([P1, P2, P3, P3], FACTS, conflicts=[(GREEN, BLUE)])
    steer = "Mira arrives in Vell\nShe meets the keeper\nShe studies the map\nr\na\n"
    with FakeOllama([model] * 30) as ollama:
        done = magnetic("story", input=steer, host=ollama.host)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    conflict = f'conflict: passage 1 said: "{GREEN}"; this passage says: "{BLUE}"'
    assert out.count(conflict) == 2  # the first draft, then its regeneration
    assert out.index("[passage 3]") < out.index(conflict) < out.index("[r]egenerate")
    assert "stored passage 3: 1 fact, 1 superseded" in out
    assert "3 passages written this run" in out
    # The regeneration was asked to keep the established fact.
    assert f"Keep these established facts unchanged: {GREEN}" in model.writing_prompts[3]
    # The check saw the stored fact the engine retrieved next to the new one.
    assert GREEN in model.checks[-1].values() and BLUE in model.checks[-1].values()

    with _world(tmp_path) as memory:
        passages = memory.get(filter={"kind": "passage"})
        facts = {c.text: c for c in memory.get(filter={"kind": "fact"})}
    assert sorted(c.text for c in passages) == sorted([P1, P2, P3])
    assert facts[GREEN].superseded_by == facts[BLUE].id
    assert facts[BLUE].superseded_by is None
    assert facts[GREEN].metadata["passage"] == 1 and facts[BLUE].metadata["passage"] == 3


def test_continuous_stops_after_turns_regenerates_conflicts_and_resumes(
    magnetic: Magnetic, tmp_path: Path
):
    seven, three = "The caravan has seven camels.", "The caravan has three camels."
    days = [f"Day {n}: the caravan crosses dune {n}." for n in range(1, 8)]
    conflicting = "Day 3: the three camels of the caravan rest."
    facts = {d: [f"The caravan crossed dune {n}."] for n, d in enumerate(days, start=1)}
    facts[days[0]].append(seven)
    facts[conflicting] = [three]
    order = [days[0], days[1], conflicting, *days[2:]]
    model = StoryModel(order, facts, conflicts=[(seven, three)])
    with FakeOllama([model] * 60) as ollama:
        first = magnetic("story", "--continuous", "--turns", "5", host=ollama.host)
        again = magnetic("story", "--continuous", "--turns", "1", host=ollama.host)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("stored passage") == 5 and "[passage 6]" not in first.stdout
    assert "regenerating once to keep the world consistent" in first.stdout
    assert "5 passages written this run" in first.stdout
    assert "resuming after passage 5" in again.stdout and "stored passage 6" in again.stdout

    # The prompt stays bounded: the last passage and retrieved facts, not the whole story.
    fifth = model.writing_prompts[5]  # 0-1 days 1-2, 2-3 the conflict and its retry
    assert days[3] in fifth and days[0] not in fifth and days[1] not in fifth
    assert fifth.count("\n- ") <= 8
    with _world(tmp_path) as memory:
        stored = sorted(c.text for c in memory.get(filter={"kind": "passage"}))
    assert stored == sorted(days[:6]) and conflicting not in stored


def test_ctrl_c_in_continuous_mode_stops_cleanly_after_the_passage(tmp_path: Path):
    model = StoryModel([], {})
    with FakeOllama([model] * 200, delay=0.3) as ollama:
        proc = spawn(tmp_path, ollama.host, "story", "--continuous", stdin=subprocess.DEVNULL)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")))
        reader.start()
        deadline = time.monotonic() + 120
        while not any("stored passage 2" in x for x in lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        reader.join(timeout=10)
        stderr = proc.stderr.read()
    out = "".join(lines)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert "stopping after this passage" in out
    shown = out.count("[passage ")
    assert shown >= 2 and out.count("stored passage") == shown
    assert f"{shown} passages written this run" in out
    with _world(tmp_path) as memory:
        assert len(memory.get(filter={"kind": "passage"})) == shown
