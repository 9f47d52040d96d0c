"""``magnetic sleep``: the pass, ``--check`` with ChatOllama (a fake server here), loud failures."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_langchain.cli import main
from tests.fake_ollama import FakeOllama

MONDAY = "the team meeting is on monday at noon in room four"
TUESDAY = "the team meeting is on tuesday at noon in room four"


def _flag_days(body: dict[str, Any]) -> dict[str, Any]:
    # The server is sent the answer's JSON schema in ``format`` and answers to it.
    schema = body["format"]
    assert schema["title"] == "ContradictionReport" and "contradictions" in schema["properties"]
    facts = body["messages"][-1]["content"].split("Facts:\n", 1)[1].splitlines()
    number = {text: int(n) for n, text in (line.split(". ", 1) for line in facts)}
    pair = {"first": number[MONDAY], "second": number[TUESDAY], "explanation": "Two days."}
    return {"content": json.dumps({"contradictions": [pair]})}


@pytest.fixture
def store(tmp_path: Path) -> list[str]:
    common = ["--path", str(tmp_path), "--embedder", "hashing", "--threshold", "0.9"]
    assert main([*common, "add", MONDAY, "my cat likes tuna"], out=io.StringIO()) == 0
    time.sleep(0.01)
    assert main([*common, "add", TUESDAY], out=io.StringIO()) == 0
    return common


def _run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    return main(argv, out=out), out.getvalue()


def test_sleep_prints_the_report_and_dry_run_changes_nothing(store: list[str], tmp_path: Path):
    code, text = _run([*store, "sleep", "--dry-run", "--merge-threshold", "0.5"])
    assert code == 0 and text.startswith("plan: ") and "would move" in text
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder()) as mem:
        assert mem.stats().groups == 3
    code, text = _run([*store, "sleep", "--merge-threshold", "0.5", "--json"])
    report = json.loads(text)
    assert code == 0 and report["dry_run"] is False and report["merges"]
    assert report["sources"]["merge"] == "configured"
    assert report["after"]["groups"] < report["before"]["groups"]


def test_sleep_check_records_a_supersession_users_then_see(store: list[str], tmp_path: Path):
    with FakeOllama([_flag_days]) as ollama:
        code, text = _run(
            [
                *store,
                "sleep",
                "--merge-threshold",
                "0.5",
                "--check",
                "--llm-model",
                "fake-llm",
                "--ollama-host",
                ollama.url,
            ]
        )
    assert code == 0, text
    assert "checked 1 group with fake-llm in 1 call: 1 contradiction recorded" in text
    assert ollama.chat_requests[0]["model"] == "fake-llm"
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder()) as mem:
        cells = {c.text: c for c in mem.get()}
        assert len(cells) == 3
        monday, tuesday = cells[MONDAY], cells[TUESDAY]
        assert monday.superseded_by == tuesday.id and tuesday.superseded_by is None
        assert [x["other"] for x in tuesday.contradictions] == [monday.id]
    code, text = _run([*store, "search", "team meeting", "-k", "2"])
    assert f"superseded by id={tuesday.id}" in text and f"supersedes id={monday.id}" in text
    code, text = _run([*store, "search", "team meeting", "-k", "2", "--json"])
    hits = {h["text"]: h for h in json.loads(text)}
    assert hits[MONDAY]["superseded_by"] == tuesday.id
    assert hits[TUESDAY]["contradictions"][0]["explanation"] == "Two days."


def test_sleep_check_with_ollama_unreachable_fails_and_names_the_fix(
    store: list[str], capsys: pytest.CaptureFixture[str]
):
    code, text = _run(
        [
            *store,
            "sleep",
            "--merge-threshold",
            "0.5",
            "--check",
            "--ollama-host",
            "http://127.0.0.1:9",
        ]
    )
    err = capsys.readouterr().err
    assert code != 0
    assert err.startswith("magnetic: error:") and err.count("\n") == 1 and "Traceback" not in err
    assert "ollama serve" in err and "--ollama-host" in err
    assert "(failed)" in text  # the pass's report and the failure are printed too


def test_in_a_terminal_an_unreachable_model_is_one_error_line(store: list[str]):
    """Run as a user runs it (its own process, the CLI's own logging): stderr holds one line."""
    import os
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    argv = [*store, "sleep", "--merge-threshold", "0.5", "--check", "--ollama-host", "127.0.0.1:9"]
    proc = subprocess.run(
        [sys.executable, "-m", "magnetic_langchain.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("magnetic: error:")
    assert "could not be reached" in proc.stderr and "ollama serve" in proc.stderr
    assert "(failed)" in proc.stdout and "checked 1 group with llama3.2 in 1 call:" in proc.stdout


def test_sleep_check_refuses_dry_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_info:
        main(["--path", str(tmp_path), "sleep", "--check", "--dry-run"])
    assert exit_info.value.code == 2
    assert "drop --dry-run" in capsys.readouterr().err
