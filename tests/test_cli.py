"""The ``magnetic`` command line, run in-process and as a real console script."""

from __future__ import annotations

import io
import json
import shutil
import subprocess

import pytest

from magnetic_langchain.cli import main, sample_memories


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_sample_corpus_ships_in_the_package():
    rows = sample_memories()
    assert len(rows) >= 40
    assert {"id", "text", "metadata"} <= set(rows[0])


@pytest.mark.minilm
def test_demo_prints_groups_and_answers_from_the_right_concept(tmp_path, minilm):
    code, text = run("--path", str(tmp_path / "demo"), "--embedder", "minilm", "demo")
    assert code == 0
    assert "concept groups over 48 cells" in text
    assert "(calibrated)" in text
    answers = text.split("? ")[1:]
    assert len(answers) == 6
    bread = answers[0].splitlines()[1]
    assert "bread" in bread.lower() and "[" in bread  # answered with its group label
    assert "deploy.sh" in answers[1].splitlines()[1]
    assert "entity" in answers[1].splitlines()[1]


def test_add_search_groups_stats_delete_round_trip(tmp_path):
    base = ("--path", str(tmp_path / "s"), "--embedder", "hashing")
    code, out = run(*base, "add", "the cat sat on the mat", "stocks fell", "--metadata", '{"k": 1}')
    assert code == 0
    ids = out.split()
    assert len(ids) == 2
    code, out = run(*base, "search", "cat on a mat", "-k", "1", "--json")
    hits = json.loads(out)
    assert hits[0]["text"] == "the cat sat on the mat" and hits[0]["metadata"] == {"k": 1}
    code, out = run(*base, "stats")
    assert json.loads(out)["count"] == 2
    code, out = run(*base, "groups")
    assert "over 2 cells" in out
    code, out = run(*base, "delete", ids[0])
    assert out.strip() == "deleted 1"
    code, out = run(*base, "sleep", "--dry-run")
    assert code == 0 and out.startswith("plan: ")


def test_errors_exit_2_with_a_message(tmp_path, capsys):
    code, _ = run(
        "--path",
        str(tmp_path),
        "--embedder",
        "hashing",
        "search",
        "x",
        "--filter",
        '{"a": {"$bad": 1}}',
    )
    assert code == 2
    assert "unknown filter operator '$bad'" in capsys.readouterr().err


def test_console_script_is_installed():
    script = shutil.which("magnetic")
    assert script, "the magnetic console script is missing: pip install -e ."
    result = subprocess.run([script, "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "demo" in result.stdout


def test_store_options_work_before_or_after_the_command(tmp_path):
    path = str(tmp_path / "s")
    assert run("add", "first memory", "--path", path, "--embedder", "hashing")[0] == 0
    assert run("--path", path, "--embedder", "hashing", "add", "second memory")[0] == 0
    code, out = run("--embedder", "hashing", "stats", "--path", path)
    assert json.loads(out)["count"] == 2
