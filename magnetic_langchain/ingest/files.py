"""Reading one candidate file safely: symlinks, binaries, huge and unreadable files are
skipped with a reason instead of being read."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MISSING", "FileRead", "read_file"]

MISSING = "missing"  # listed but gone (a tracked file deleted from the work tree)
_SNIFF = 8192


@dataclass(frozen=True)
class FileRead:
    """The outcome of reading one file: its bytes and text, or why it was skipped."""

    data: bytes = b""
    text: str = ""
    skipped: str | None = None


def _inside(path: str, root: Path) -> bool:
    try:
        return os.path.commonpath([path, str(root)]) == str(root)
    except ValueError:  # different drives
        return False


def read_file(root: Path, rel: str, max_bytes: int) -> FileRead:
    """Read ``root/rel`` as UTF-8 text, or say why not.

    Reasons: ``symlink outside the root``, ``symlink`` (its target inside the root is
    read under its own path), ``not a regular file``, ``too large``, ``empty``,
    ``unreadable``, ``binary``, ``not UTF-8 text``; :data:`MISSING` for a vanished file.
    """
    path = root / rel
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return FileRead(skipped=MISSING)
    except OSError:
        return FileRead(skipped="unreadable")
    if stat.S_ISLNK(info.st_mode):
        target = os.path.realpath(path)
        return FileRead(skipped="symlink" if _inside(target, root) else "symlink outside the root")
    if not stat.S_ISREG(info.st_mode):
        return FileRead(skipped="not a regular file")
    if info.st_size > max_bytes:
        return FileRead(skipped="too large")
    if info.st_size == 0:
        return FileRead(skipped="empty")
    try:
        # O_NOFOLLOW: a file swapped for a symlink after the check is still not followed.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError:
        return FileRead(skipped="unreadable")
    if len(data) > max_bytes:
        return FileRead(skipped="too large")
    if b"\0" in data[:_SNIFF]:
        return FileRead(skipped="binary")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return FileRead(skipped="not UTF-8 text")
    if not text.strip():
        return FileRead(skipped="empty")
    return FileRead(data=data, text=text)
