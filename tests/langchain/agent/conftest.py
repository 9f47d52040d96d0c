"""Running ``magnetic`` as a user does: a subprocess reading stdin, against a fake Ollama."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]

Magnetic = Callable[..., subprocess.CompletedProcess[str]]


def cli_env() -> dict[str, str]:
    """The environment of a CLI subprocess: this tree first, no colour, no real Ollama."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["NO_COLOR"] = "1"
    env["OLLAMA_HOST"] = "127.0.0.1:9"  # never a real server, whatever the machine has
    env.pop("PYTHONWARNINGS", None)
    env.pop("PYTHONUNBUFFERED", None)  # output must reach a pipe because the CLI flushes
    return env


def cli_command(*args: str) -> list[str]:
    """``magnetic ARGS`` as a subprocess argument list."""
    return [sys.executable, "-m", "magnetic_langchain.cli", *args]


def spawn(tmp_path: Path, host: str, *args: str, stdin: int = subprocess.PIPE) -> Any:
    """``magnetic ARGS`` started in the background on a hashing store in ``tmp_path``,
    with text pipes (for tests that read its output as it comes)."""
    store = ["--path", str(tmp_path / "store"), "--embedder", "hashing", "--ollama-host", host]
    return subprocess.Popen(
        cli_command(*args, *store),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
    )


@pytest.fixture
def magnetic(tmp_path: Path) -> Magnetic:
    """Run ``magnetic`` on a store in tmp_path with the hashing embedder."""

    def run(
        *args: str, input: str = "", host: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        store = ["--path", str(tmp_path / "store"), "--embedder", "hashing"]
        extra = ["--ollama-host", host] if host else []
        return subprocess.run(
            cli_command(*args, *store, *extra),
            input=input,
            capture_output=True,
            text=True,
            timeout=180,
            env=cli_env(),
            cwd=tmp_path,
        )

    return run
