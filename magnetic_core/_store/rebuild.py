"""Rebuilding a Chroma collection under new HNSW settings, safe against a crash midway.

Chroma fixes a collection's HNSW graph settings when it is created. Stores created with the
2-link graph this package once used are rebuilt on open: every row is copied into a new
collection ``<name>-rebuild`` built with the current settings, the old collection is dropped
and the new one renamed. A crash while copying leaves the old collection whole (the copy is
dropped on the next open); a crash between the drop and the rename leaves only the copy,
which the next open renames.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

__all__ = ["finish_interrupted", "rebuild"]

logger = logging.getLogger(__name__)

SUFFIX = "-rebuild"


def finish_interrupted(client: Any, names: tuple[str, ...]) -> None:
    """Complete or discard rebuilds of ``names`` that a crash interrupted."""
    existing = {c.name for c in client.list_collections()}
    for name in names:
        copy = name + SUFFIX
        if copy not in existing:
            continue
        if name in existing:
            client.delete_collection(copy)  # died while copying: the original is whole
        else:
            client.get_collection(copy, embedding_function=None).modify(name=name)


def rebuild(client: Any, old: Any, configuration: Mapping[str, Any], batch: int) -> Any:
    """Copy collection ``old`` into one built with ``configuration``; returns the new one."""
    name = old.name
    new = client.create_collection(
        name + SUFFIX,
        embedding_function=None,
        configuration=dict(configuration),
        metadata=dict(old.metadata) if old.metadata else None,
    )
    offset = 0
    while True:
        got = old.get(include=["embeddings", "documents", "metadatas"], limit=batch, offset=offset)
        if not got["ids"]:
            break
        docs = got["documents"] or []
        new.add(
            ids=got["ids"],
            embeddings=got["embeddings"],
            metadatas=got["metadatas"],
            # rows without a document (group rows) get an empty one when others have one
            documents=[d or "" for d in docs] if any(d is not None for d in docs) else None,
        )
        offset += len(got["ids"])
    client.delete_collection(name)
    new.modify(name=name)
    logger.warning("rebuilt collection %r (%d rows) with Chroma's HNSW settings", name, offset)
    return new
