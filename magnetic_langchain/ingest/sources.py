"""What to ingest: a file, a folder (honouring .gitignore), a local git repository (its
``git ls-files``) or a git URL (cloned shallowly into a temporary directory)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from magnetic_core.errors import InvalidInputError, MagneticError

__all__ = ["GitError", "Source", "SourceError", "describe", "is_git_url", "open_source"]

logger = logging.getLogger(__name__)

_URL = re.compile(r"^(?:https?|ssh|git|file)://\S+$|^[\w.-]+@[\w.-]+:\S+$", re.IGNORECASE)


class SourceError(InvalidInputError):
    """A path that cannot be read or a URL that is not a git repository."""


class GitError(MagneticError):
    """``git`` is missing or failed."""


@dataclass(frozen=True)
class Source:
    """Files to ingest, relative to ``root``.

    Attributes:
        spec: what the caller gave (a path or URL).
        root: the directory the paths are relative to (a repository's top level).
        key: the identity of this root in the store: chunks ingested from it carry it, so
            a later run knows which files it already holds.
        kind: ``"file"``, ``"folder"`` or ``"repository"``.
        files: candidate paths (POSIX, relative to ``root``), sorted.
        scope: the part of ``root`` this run covers: ``""`` (all of it), a folder prefix
            ending in ``/``, or one file's path. ``prune`` only removes files inside it.
        repo: the repository name, for repositories.
        commit: the commit checked out, for repositories with one.
    """

    spec: str
    root: Path
    key: str
    kind: str
    files: tuple[str, ...]
    scope: str = ""
    repo: str | None = None
    commit: str | None = None

    def covers(self, path: str) -> bool:
        """Whether a stored path lies inside this run's scope."""
        if not self.scope or self.scope.endswith("/"):
            return path.startswith(self.scope)
        return path == self.scope


def is_git_url(spec: str) -> bool:
    """Whether ``spec`` looks like a git URL (https, ssh, git, file, or user@host:path)."""
    return bool(_URL.match(spec.strip()))


def _git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("git")
    if exe is None:
        raise GitError("git is not installed", hint="install git to ingest repositories")
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "LC_ALL": "C"}
    return subprocess.run(
        [exe, *args], cwd=cwd, capture_output=True, text=True, env=env, check=False
    )


def _git_out(*args: str, cwd: Path) -> str | None:
    done = _git(*args, cwd=cwd)
    return done.stdout.strip() if done.returncode == 0 else None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1].removeprefix("fatal: ") if lines else "unknown error"


@contextmanager
def open_source(spec: str) -> Iterator[Source]:
    """The files ``spec`` names; a cloned URL is removed when the block ends.

    Raises:
        SourceError: a missing or unreadable path, or a URL that is not a repository.
        GitError: ``git`` is not installed (needed for URLs) or failed.
    """
    if is_git_url(spec):
        with _cloned(spec) as source:
            yield source
        return
    path = Path(spec).expanduser()
    if not os.path.lexists(path):
        raise SourceError(f"cannot read {spec}: no such file or directory")
    if not os.access(path, os.R_OK) or (path.is_dir() and not os.access(path, os.X_OK)):
        raise SourceError(f"cannot read {spec}: permission denied")
    path = path.resolve()
    if path.is_file():
        yield _single_file(spec, path)
    elif path.is_dir():
        yield _directory(spec, path)
    else:
        raise SourceError(f"cannot read {spec}: not a regular file or directory")


@contextmanager
def _cloned(url: str) -> Iterator[Source]:
    workdir = Path(tempfile.mkdtemp(prefix="magnetic-clone-")).resolve()
    try:
        target = workdir / "repo"
        done = _git("clone", "--depth", "1", "--quiet", "--no-tags", url, str(target))
        if done.returncode != 0:
            raise SourceError(
                f"cannot clone {url}: {_last_line(done.stderr)}",
                hint="check that the URL names a git repository you can read",
            )
        name = re.sub(r"\.git$", "", url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1])
        yield _repository(url, target, target, key=url.rstrip("/"), name=name or "repo")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _single_file(spec: str, path: Path) -> Source:
    root = path.parent
    top = _toplevel(root)
    if top is not None:  # a file of a repository: keyed like the repository's other files
        rel = path.relative_to(top).as_posix()
        repo = _repository(spec, top, top, key=str(top), name=top.name, listed=False)
        return Source(spec, top, repo.key, "file", (rel,), rel, repo.repo, repo.commit)
    return Source(spec, root, str(root), "file", (path.name,), path.name)


def _directory(spec: str, path: Path) -> Source:
    top = _toplevel(path)
    if top is not None:
        return _repository(spec, top, path, key=str(top), name=top.name)
    if (path / ".git").exists() and shutil.which("git") is None:
        logger.warning(
            "%s is a git repository but git is not installed: reading it as a "
            "folder (its .gitignore files are honoured)",
            spec,
        )
    from magnetic_langchain.ingest.walk import walk_folder

    return Source(spec, path, str(path), "folder", tuple(walk_folder(path)))


def _toplevel(path: Path) -> Path | None:
    """The top level of the git work tree holding ``path`` (None: not in one, or no git)."""
    if shutil.which("git") is None:
        return None
    top = _git_out("rev-parse", "--show-toplevel", cwd=path)
    return Path(top).resolve() if top else None


def _repository(
    spec: str, top: Path, within: Path, *, key: str, name: str, listed: bool = True
) -> Source:
    """A git work tree: tracked and untracked files that .gitignore does not exclude."""
    commit = _git_out("rev-parse", "HEAD", cwd=top)
    files: tuple[str, ...] = ()
    scope = "" if within == top else within.relative_to(top).as_posix() + "/"
    if listed:
        done = _git(
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            "--full-name",
            cwd=within,
        )
        if done.returncode != 0:
            raise GitError(f"git ls-files failed in {spec}: {_last_line(done.stderr)}")
        # --cached also lists tracked files deleted from the work tree: they are gone.
        names = {n for n in done.stdout.split("\0") if n and os.path.lexists(top / n)}
        files = tuple(sorted(n for n in names if not (top / n).is_dir() or (top / n).is_symlink()))
    return Source(spec, top, key, "repository", files, scope, name, commit)


def describe(source: Source) -> dict[str, Any]:
    """The metadata every chunk of ``source`` carries (besides its own path and lines)."""
    meta: dict[str, Any] = {"ingest_root": source.key}
    if source.repo:
        meta["repo"] = source.repo
    if source.commit:
        meta["commit"] = source.commit
    return meta
