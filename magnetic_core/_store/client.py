"""Reaching Chroma before a namespace is opened: the client, and what a namespace is stamped with.

Read-only helpers, so a caller (the CLI, the deferred store) can choose the embedder before
it opens a memory; :class:`~magnetic_core._store.persistence.ChromaStore` does the rest.
"""

from __future__ import annotations

import os
import re
from typing import Any

from magnetic_core._store.allocator import limit_arenas
from magnetic_core.errors import InvalidInputError, PersistenceError

__all__ = ["check_namespace", "open_client", "read_settings", "read_stamp"]

_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,48}[A-Za-z0-9]$|^[A-Za-z0-9]$")


def open_client(path: str | os.PathLike[str]) -> Any:
    """A Chroma PersistentClient at ``path`` (created if missing).

    The path is made absolute first: chromadb caches its clients by the path string, so
    ``./store`` opened from two working directories would otherwise reach one store. The
    process's malloc arenas are capped first (:mod:`~magnetic_core._store.allocator`), before
    Chroma starts the threads that would each take one.
    """
    limit_arenas()  # before chromadb is imported: importing it starts threads
    import chromadb

    path = os.path.abspath(os.path.expanduser(os.fspath(path)))
    try:
        return chromadb.PersistentClient(path=path)
    except Exception as e:
        raise PersistenceError(f"cannot open a Chroma store at {path!r}: {e}") from e


def read_stamp(client: Any, namespace: str) -> tuple[str, int] | None:
    """The embedder name and dimension a namespace was created with; None if it is new."""
    try:
        names = {c if isinstance(c, str) else c.name for c in client.list_collections()}
        if f"mag-{namespace}-cells" not in names:
            return None
        meta = client.get_collection(f"mag-{namespace}-cells").metadata or {}
    except Exception as e:
        raise PersistenceError(f"cannot read namespace {namespace!r} in Chroma: {e}") from e
    if "mag_embedder" not in meta:
        return None
    return str(meta["mag_embedder"]), int(meta["mag_dim"])


def read_settings(client: Any, namespace: str) -> dict[str, Any] | None:
    """Everything stamped on a namespace (embedder, dimension, schema, thresholds), or None
    if the namespace does not exist.

    Read-only: nothing is created, so a caller can choose the embedder before opening.

    Raises:
        InvalidInputError: the namespace is not a valid name.
        PersistenceError: Chroma failed.
    """
    check_namespace(namespace)
    try:
        names = {getattr(c, "name", c) for c in client.list_collections()}
        if f"mag-{namespace}-cells" not in names:
            return None
        return dict(client.get_collection(f"mag-{namespace}-cells").metadata or {})
    except Exception as e:
        raise PersistenceError(f"cannot read namespace {namespace!r} in Chroma: {e}") from e


def check_namespace(namespace: object) -> None:
    """Refuse a namespace Chroma cannot hold as part of a collection name."""
    if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
        raise InvalidInputError(
            f"invalid namespace {namespace!r}",
            hint="use 1-50 letters, digits, '_' or '-', starting and ending alphanumeric",
        )
