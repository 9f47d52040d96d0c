"""Listing a plain folder's files the way git would: ``.gitignore`` files honoured (nested
ones too, the deepest opinion winning), ``.git`` left out, symlinks listed but not followed."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pathspec

__all__ = ["walk_folder"]

logger = logging.getLogger(__name__)


def _load_spec(directory: Path) -> pathspec.GitIgnoreSpec | None:
    path = directory / ".gitignore"
    try:
        return pathspec.GitIgnoreSpec.from_lines(path.read_text(encoding="utf-8").splitlines())
    except (OSError, UnicodeDecodeError) as e:
        logger.warning("ignoring unreadable %s: %s", path, e)
        return None


def _ignored(specs: list[tuple[str, pathspec.GitIgnoreSpec]], rel: str, is_dir: bool) -> bool:
    verdict = False
    for prefix, spec in specs:  # root first: a deeper .gitignore overrides
        if prefix and not rel.startswith(prefix):
            continue
        result = spec.check_file(rel[len(prefix) :] + ("/" if is_dir else ""))
        if result.include is not None:
            verdict = result.include
    return verdict


def walk_folder(root: Path) -> list[str]:
    """Paths (POSIX, relative to ``root``) of the files a git repository there would hold.

    Symlinks (to files or directories) are listed, never followed, so the reader can
    skip and count them.
    """
    specs: list[tuple[str, pathspec.GitIgnoreSpec]] = []
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        prefix = here.relative_to(root).as_posix() + "/" if here != root else ""
        if ".gitignore" in filenames and (spec := _load_spec(here)) is not None:
            specs.append((prefix, spec))
        keep = []
        for name in sorted(dirnames):
            rel = prefix + name
            if name == ".git" or _ignored(specs, rel, True):
                continue
            if (here / name).is_symlink():
                found.append(rel)  # listed so it is counted as a symlink; not descended
            else:
                keep.append(name)
        dirnames[:] = keep
        found.extend(
            prefix + name for name in filenames if not _ignored(specs, prefix + name, False)
        )
    return sorted(found)
