"""The groups collection of a namespace: the group cache (centroids, sizes) and journal rows.

Both kinds of row live in one collection (same dimension), told apart by
:data:`JOURNAL_KEY`: two collections per namespace, whatever happens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from magnetic_core._store.calls import ChromaCalls, filler

__all__ = ["JOURNAL_KEY", "GroupRows"]

# Marks a journal row in the groups collection (see magnetic_core._store.journal).
JOURNAL_KEY = "_mag_j"


class GroupRows(ChromaCalls):
    """Reads and writes the rows of a namespace's groups collection (``groups``/``log``)."""

    def __init__(self, namespace: str) -> None:
        super().__init__(namespace)
        self.groups: Any = None
        self.log: Any = None

    # -- groups ----------------------------------------------------------------------
    def write_groups(
        self, gids: Sequence[str], centroids: np.ndarray, sizes: Sequence[int]
    ) -> None:
        self._batched(
            "write groups",
            self.groups.upsert,
            ids=list(gids),
            embeddings=centroids,
            metadatas=[{"size": int(s)} for s in sizes],
        )

    def delete_groups(self, gids: Sequence[str]) -> None:
        self._batched("delete groups", self.groups.delete, ids=list(gids))

    def group_cache(self) -> dict[str, tuple[int, np.ndarray]]:
        """Cached ``(size, centroid)`` of each group by id, as stored."""
        got = self._call("list groups", self.groups.get, include=["metadatas", "embeddings"])
        return {
            gid: (int((meta or {}).get("size", -1)), np.asarray(vec, np.float32))
            for gid, meta, vec in zip(got["ids"], got["metadatas"], got["embeddings"], strict=True)
            if JOURNAL_KEY not in (meta or {})
        }

    # -- the journal (rows in the groups collection) -------------------------------------
    def log_write(
        self,
        ids: Sequence[str],
        vectors: np.ndarray | None,
        metadatas: Sequence[Mapping[str, Any]],
        documents: Sequence[str] | None = None,
        *,
        dim: int,
    ) -> None:
        """Upsert journal rows (rows without a vector get a filler one)."""
        if vectors is None:
            vectors = np.repeat(filler(dim), len(ids), axis=0)
        self._batched(
            "write the journal",
            self.log.upsert,
            ids=list(ids),
            embeddings=vectors,
            metadatas=[dict(m) for m in metadatas],
            documents=None if documents is None else list(documents),
        )

    def log_read(self, where: Mapping[str, Any], *, full: bool = False) -> dict[str, Any]:
        """Journal rows matching ``where`` (with vectors and documents when ``full``)."""
        include = ["metadatas", "embeddings", "documents"] if full else ["metadatas"]
        got = self._call("read the journal", self.log.get, where=dict(where), include=include)
        return dict(got)

    def log_delete(self, where: Mapping[str, Any]) -> None:
        """Delete the journal rows matching ``where``."""
        self._call("clean the journal", self.log.delete, where=dict(where))
