"""Helpers of the CLI tests: run `magnetic` in a subprocess as a user would, a real git
repository made by the test, and a real `chroma run` server."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from magnetic_langchain.cli import main

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    """What one `magnetic` run printed and returned."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    @property
    def error_line(self) -> str:
        """The one `magnetic: error:` line; fails the test on a traceback or anything else."""
        assert "Traceback" not in self.err, self.err
        lines = [line for line in self.err.splitlines() if line.strip()]
        assert len(lines) >= 1 and lines[-1].startswith(("magnetic: error:", "magnetic ")), self.err
        return lines[-1]


class Magnetic:
    """Runs `python -m magnetic_langchain.cli` in ``cwd`` with a private TMPDIR."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.tmp = cwd / ".tmp"
        self.tmp.mkdir(exist_ok=True)
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TMPDIR": str(self.tmp),
            "HF_HUB_OFFLINE": "1",
            "ANONYMIZED_TELEMETRY": "False",
            # No Ollama exists here; a closed port makes `auto` fall through quickly.
            "OLLAMA_HOST": "http://127.0.0.1:9",
        }

    def __call__(
        self,
        *argv: str,
        input: str | None = None,
        env: dict[str, str] | None = None,
        python: tuple[str, ...] = (),
    ) -> Result:
        done = subprocess.run(
            [sys.executable, *python, "-m", "magnetic_langchain.cli", *argv],
            cwd=self.cwd,
            env={**self.env, **(env or {})},
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            timeout=300,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    def ok(self, *argv: str, **kwargs: Any) -> Result:
        result = self(*argv, **kwargs)
        assert result.code == 0, (argv, result.out, result.err)
        return result


class InProcess(Magnetic):
    """The same CLI through :func:`main` in this process: for the many checks where a new
    interpreter per call (about 2 s of CPU, mostly importing chromadb) adds nothing."""

    def __init__(self, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__(cwd)
        self.monkeypatch = monkeypatch
        monkeypatch.chdir(cwd)
        monkeypatch.setattr(tempfile, "tempdir", str(self.tmp))
        for name in ("HF_HUB_OFFLINE", "ANONYMIZED_TELEMETRY", "OLLAMA_HOST"):
            monkeypatch.setenv(name, self.env[name])

    def __call__(
        self,
        *argv: str,
        input: str | None = None,
        env: dict[str, str] | None = None,
        python: tuple[str, ...] = (),
    ) -> Result:
        assert not python and not env, "use the subprocess runner for interpreter options"
        out, err = io.StringIO(), io.StringIO()
        self.monkeypatch.setattr(sys, "stdin", io.StringIO(input or ""))
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                code = main(list(argv), out=out)
            except SystemExit as e:  # argparse's own usage errors
                code = int(e.code or 0)
        return Result(code, out.getvalue(), err.getvalue())


@pytest.fixture
def magnetic(tmp_path: Path) -> Magnetic:
    """`magnetic` run in a subprocess with tmp_path as its working directory."""
    return Magnetic(tmp_path)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> InProcess:
    """`magnetic` run in this process with tmp_path as its working directory."""
    return InProcess(tmp_path, monkeypatch)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


APP_PY = '''"""The Atlas web app."""

import os


def main():
    """Start the server."""
    return serve(port=int(os.environ.get("PORT", 8080)))


class Config:
    """Settings read at start."""

    debug = False
    workers = 4
'''

GUIDE_MD = """# Atlas guide

Atlas is the billing web app.

## Deploy

Run scripts/deploy.sh after the build; it copies build/ to the web hosts.

## Monitoring

Dashboards live in Grafana under the Atlas folder.
"""

DEPLOY_SH = """#!/bin/sh
set -eu
rsync -a build/ web:/srv/atlas
systemctl restart atlas
"""

NOTES_TXT = """Meeting notes from Monday.

We agreed to move the billing cron to 02:00 UTC.

Maria will own the migration.
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository with a .gitignore, a binary, a symlink out of it, a large file."""
    root = tmp_path / "atlas"
    (root / "scripts").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "build").mkdir()
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    (root / "app.py").write_text(APP_PY)
    (root / "docs" / "guide.md").write_text(GUIDE_MD)
    (root / "scripts" / "deploy.sh").write_text(DEPLOY_SH)
    (root / "notes.txt").write_text(NOTES_TXT)
    (root / "debug.log").write_text("ignored by .gitignore\n")
    (root / "build" / "bundle.js").write_text("console.log('ignored build output')\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8)
    (root / "data.csv").write_text("id,value\n" + "".join(f"{i},{i * i}\n" for i in range(150_000)))
    secret = tmp_path / "outside-secret.txt"
    secret.write_text("TOPSECRET credentials that live outside the repository\n")
    (root / "secret.txt").symlink_to(secret)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    return root


def no_git_path(tmp_path: Path) -> str:
    """A PATH holding python but not git."""
    bin_dir = tmp_path / "bin-without-git"
    bin_dir.mkdir(exist_ok=True)
    assert shutil.which("git", path=str(bin_dir)) is None
    return str(bin_dir)
