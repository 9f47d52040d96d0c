"""``magnetic sleep --check``: merge, then ChatOllama (a fake server here) flags contradictions."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_langchain.cli import main
from tests.langchain.fakes import FakeOllama

MONDAY = "the team meeting is on monday at noon in room four"
TUESDAY = "the team meeting is on tuesday at noon in room four"


def _flag_days(body: dict[str, Any]) -> dict[str, Any]:
    facts = body["messages"][-1]["content"].splitlines()[1:]
    number = {text: int(n) for n, text in (line.split(". ", 1) for line in facts)}
    pair = {"first": number[MONDAY], "second": number[TUESDAY], "explanation": "Two days."}
    return {"content": json.dumps({"contradictions": [pair]})}


def test_sleep_check_records_contradictions(tmp_path: Path):
    common = ["--path", str(tmp_path), "--embedder", "hashing", "--threshold", "0.9"]
    assert main([*common, "add", MONDAY, TUESDAY, "my cat likes tuna"], out=io.StringIO()) == 0
    out = io.StringIO()
    with FakeOllama([_flag_days]) as ollama:
        code = main(
            [
                *common,
                "sleep",
                "--merge-threshold",
                "0.8",
                "--check",
                "--llm-model",
                "fake-llm",
                "--ollama-host",
                ollama.url,
            ],
            out=out,
        )
    assert code == 0
    text = out.getvalue()
    assert "merged 1 group pairs" in text
    assert "checked 1 groups with fake-llm: 1 contradictions recorded" in text
    assert ollama.chat_requests[0]["model"] == "fake-llm"
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder()) as mem:
        cells = {c.text: c for c in mem.get()}
        assert len(cells) == 3
        assert [x["explanation"] for x in cells[MONDAY].contradictions] == ["Two days."]
        assert [x["other"] for x in cells[TUESDAY].contradictions] == [cells[MONDAY].id]


def test_sleep_check_refuses_dry_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_info:
        main(["--path", str(tmp_path), "sleep", "--check", "--dry-run"])
    assert exit_info.value.code == 2
    assert "drop --dry-run" in capsys.readouterr().err
