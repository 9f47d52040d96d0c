"""ChromaDB as the durable substrate: one cells collection (the truth) and one groups cache.

This is the only module that imports ``chromadb``. Per namespace there are exactly two
collections, ``mag-<namespace>-cells`` and ``mag-<namespace>-groups``; never one per group.
Embeddings are always passed in (Chroma's default embedding function downloads a model).
The cells collection's metadata stamps the embedder, dimension, schema and threshold.
The engine never queries Chroma's own vector index (search runs on the in-memory hierarchy,
rebuilt from the cells on open), so both collections build that index with the cheapest
settings: it is paid for on every write and never used.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from magnetic_core.codec import metadata_from_json, metadata_to_json
from magnetic_core.errors import EmbedderMismatchError, InvalidInputError, PersistenceError

__all__ = ["ChromaStore", "StoredCell", "open_client", "read_settings"]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 3
# Schema 2 rows (long field names, every field present) are still read; a schema 2 store is
# restamped 3 when opened, since the rows written from then on are schema 3.
_READS = (2, 3)
ROW_KEY = "_mag"
# Chroma's HNSW is built on every write but never searched by the engine (search runs on
# the in-memory hierarchy; Chroma is only asked for rows by id or page), so it is built as
# cheaply as hnswlib allows: 2 links per node (hnswlib raises ef_construction to at least
# max_neighbors). Against 16 / 4 this cut Chroma's CPU time per persisted cell by 5-9%.
# Settings apply to collections created from now on; existing ones keep theirs.
_COLLECTION_CONFIG = {"hnsw": {"space": "cosine", "ef_construction": 2, "max_neighbors": 2}}
# Settings that describe how the store was built; clear() keeps them.
_STAMP_KEYS = ("mag_embedder", "mag_dim", "mag_schema", "mag_join_threshold")
_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,48}[A-Za-z0-9]$|^[A-Za-z0-9]$")


@dataclass(frozen=True)
class StoredCell:
    """One row of the cells collection, decoded."""

    id: str
    vector: np.ndarray
    text: str
    metadata: dict[str, Any]
    group_id: str
    entities: tuple[str, ...]
    created_at: float
    updated_at: float
    seq: int
    contradictions: tuple[dict[str, Any], ...]


def open_client(path: str) -> Any:
    """A Chroma PersistentClient at ``path`` (created if missing)."""
    import chromadb

    try:
        return chromadb.PersistentClient(path=path)
    except Exception as e:
        raise PersistenceError(f"cannot open a Chroma store at {path!r}: {e}") from e


def read_settings(client: Any, namespace: str) -> dict[str, Any] | None:
    """Everything stamped on a namespace (embedder, dimension, schema, thresholds), or None
    if the namespace does not exist.

    Read-only: nothing is created, so a caller can choose the embedder before opening.

    Raises:
        InvalidInputError: the namespace is not a valid name.
        PersistenceError: Chroma failed.
    """
    _check_namespace(namespace)
    try:
        names = {getattr(c, "name", c) for c in client.list_collections()}
        if f"mag-{namespace}-cells" not in names:
            return None
        return dict(client.get_collection(f"mag-{namespace}-cells").metadata or {})
    except Exception as e:
        raise PersistenceError(f"cannot read namespace {namespace!r} in Chroma: {e}") from e


def _check_namespace(namespace: object) -> None:
    if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
        raise InvalidInputError(
            f"invalid namespace {namespace!r}",
            hint="use 1-50 letters, digits, '_' or '-', starting and ending alphanumeric",
        )


class ChromaStore:
    """Reads and writes one namespace of cells and groups in a Chroma client.

    Args:
        client: any chromadb client (persistent, HTTP or ephemeral).
        namespace: 1-50 characters of letters, digits, ``_`` and ``-``.
    """

    def __init__(self, client: Any, namespace: str) -> None:
        _check_namespace(namespace)
        self.client = client
        self.namespace = namespace
        try:
            self.cells = client.get_or_create_collection(
                f"mag-{namespace}-cells",
                embedding_function=None,
                configuration=_COLLECTION_CONFIG,
            )
            self.groups = client.get_or_create_collection(
                f"mag-{namespace}-groups",
                embedding_function=None,
                configuration=_COLLECTION_CONFIG,
            )
            self._batch = int(client.get_max_batch_size())
        except Exception as e:
            raise PersistenceError(f"cannot open namespace {namespace!r} in Chroma: {e}") from e

    # -- stamp -----------------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        return dict(self.cells.metadata or {})

    def check_stamp(
        self, embedder_name: str, dim: int, *, join_threshold: float | None = None
    ) -> None:
        """Stamp a new store with the embedder; refuse to open an existing one with another.

        A ``join_threshold`` chosen when the store is created is stamped too, so it is the
        threshold in force when the store is reopened without one.
        """
        meta = self.settings()
        if "mag_embedder" not in meta:
            chosen = {} if join_threshold is None else {"mag_join_threshold": join_threshold}
            self.save_settings(
                mag_embedder=embedder_name, mag_dim=dim, mag_schema=SCHEMA_VERSION, **chosen
            )
            return
        if meta["mag_embedder"] != embedder_name or int(meta["mag_dim"]) != dim:
            raise EmbedderMismatchError(
                f"namespace {self.namespace!r} was created with embedder "
                f"{meta['mag_embedder']!r} ({meta['mag_dim']}-d), not {embedder_name!r} ({dim}-d)",
                hint="open it with the same embedder, or use another namespace or path",
            )
        schema = int(meta.get("mag_schema", 1))
        if schema not in _READS:
            newer = schema > SCHEMA_VERSION
            raise PersistenceError(
                f"namespace {self.namespace!r} has storage schema {schema}; this version of "
                f"magnetic-storage reads schemas {', '.join(map(str, _READS))}",
                hint="upgrade magnetic-storage" if newer else "re-ingest into a new path",
            )
        if schema != SCHEMA_VERSION:
            self.save_settings(mag_schema=SCHEMA_VERSION)

    def save_settings(self, **values: Any) -> None:
        meta = self.settings()
        meta.update(values)
        self._call("save settings", self.cells.modify, metadata=meta)

    # -- cells -----------------------------------------------------------------------
    def load(self, page: int = 5000) -> Iterator[StoredCell]:
        """Every stored cell, page by page, with its vector scaled to unit length."""
        offset = 0
        while True:
            got = self._call(
                "load cells",
                self.cells.get,
                include=["embeddings", "documents", "metadatas"],
                limit=page,
                offset=offset,
            )
            ids = got["ids"]
            if not ids:
                return
            vectors = np.asarray(got["embeddings"], dtype=np.float32)
            # Stored vectors are unit already; this only undoes Chroma's rounding, per page.
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            for i, cid in enumerate(ids):
                yield _decode_row(cid, vectors[i], got["documents"][i], got["metadatas"][i])
            offset += len(ids)

    def write_cells(
        self,
        ids: Sequence[str],
        vectors: np.ndarray,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]],
    ) -> None:
        """Upsert full cell rows (``metadatas`` are already encoded Chroma dicts)."""
        for start in range(0, len(ids), self._batch):
            end = start + self._batch
            self._call(
                "write cells",
                self.cells.upsert,
                ids=list(ids[start:end]),
                embeddings=vectors[start:end],
                documents=list(texts[start:end]),
                metadatas=[dict(m) for m in metadatas[start:end]],
            )

    def relocate_cells(self, ids: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        """Rewrite only the metadata of existing cells (their group changed, not their vector).

        Much cheaper than :meth:`write_cells`: Chroma does not touch its vector index.
        """
        for start in range(0, len(ids), self._batch):
            end = start + self._batch
            self._call(
                "relocate cells",
                self.cells.update,
                ids=list(ids[start:end]),
                metadatas=[dict(m) for m in metadatas[start:end]],
            )

    def delete_cells(self, ids: Sequence[str]) -> None:
        for start in range(0, len(ids), self._batch):
            self._call(
                "delete cells", self.cells.delete, ids=list(ids[start : start + self._batch])
            )

    # -- groups ----------------------------------------------------------------------
    def write_groups(
        self, gids: Sequence[str], centroids: np.ndarray, sizes: Sequence[int]
    ) -> None:
        for start in range(0, len(gids), self._batch):
            end = start + self._batch
            self._call(
                "write groups",
                self.groups.upsert,
                ids=list(gids[start:end]),
                embeddings=centroids[start:end],
                metadatas=[{"size": int(s)} for s in sizes[start:end]],
            )

    def delete_groups(self, gids: Sequence[str]) -> None:
        for start in range(0, len(gids), self._batch):
            self._call(
                "delete groups", self.groups.delete, ids=list(gids[start : start + self._batch])
            )

    def group_cache(self) -> dict[str, tuple[int, np.ndarray]]:
        """Cached ``(size, centroid)`` of each group by id, as stored."""
        got = self._call("list groups", self.groups.get, include=["metadatas", "embeddings"])
        return {
            gid: (int((meta or {}).get("size", -1)), np.asarray(vec, np.float32))
            for gid, meta, vec in zip(got["ids"], got["metadatas"], got["embeddings"], strict=True)
        }

    def clear(self) -> None:
        """Delete both collections' rows, keeping the stamp."""
        meta = self.settings()
        for name in (f"mag-{self.namespace}-cells", f"mag-{self.namespace}-groups"):
            self._call("clear", self.client.delete_collection, name)
        self.__init__(self.client, self.namespace)  # type: ignore[misc]
        keep = {k: v for k, v in meta.items() if k in _STAMP_KEYS}
        if keep:
            self.save_settings(**keep)

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise PersistenceError(
                f"Chroma failed to {what} in namespace {self.namespace!r}: {e}",
                hint="check the Chroma path or server; the in-memory index was left as stored",
            ) from e


def encode_row(
    *,
    group_id: str,
    metadata: Mapping[str, Any],
    entities: Sequence[str],
    created_at: float,
    updated_at: float,
    seq: int,
    contradictions: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The Chroma metadata of one cell: a single reserved key holding one JSON object.

    One key instead of one per field: Chroma stores each metadata key as its own row, and
    packing them made persisted ingest about 11% faster here. JSON also keeps floats exact.
    Field names are one letter and fields holding their default (no metadata, entities or
    links; updated when created) are left out: Chroma's cost per cell grows with the
    bytes of its metadata, and this halves a typical record (about 5% of Chroma's time).
    """
    record: dict[str, Any] = {"g": group_id, "s": int(seq), "c": float(created_at)}
    if updated_at != created_at:
        record["u"] = float(updated_at)
    if entities:
        record["e"] = list(entities)
    if metadata:
        record["m"] = metadata_to_json(metadata)
    if contradictions:
        record["l"] = list(contradictions)
    return {ROW_KEY: json.dumps(record, ensure_ascii=False, separators=(",", ":"))}


def _decode_row(
    cid: str, vector: np.ndarray, text: str | None, meta: Mapping[str, Any] | None
) -> StoredCell:
    raw = (meta or {}).get(ROW_KEY)
    if not isinstance(raw, str):
        raise PersistenceError(
            f"cell {cid!r} has no {ROW_KEY!r} record: the collection was not written by "
            "this version of magnetic-storage",
            hint="re-ingest into a new namespace or path",
        )
    record = json.loads(raw)
    if "group" in record:  # schema 2: long names, every field present
        record = {
            "g": record["group"],
            "s": record["seq"],
            "c": record["created"],
            "u": record["updated"],
            "e": record["entities"],
            "m": record["meta"],
            "l": record["links"],
        }
    created = float(record["c"])
    return StoredCell(
        id=cid,
        vector=vector,
        text=text or "",
        metadata=metadata_from_json(record.get("m", {})),
        group_id=str(record["g"]),
        entities=tuple(record.get("e", ())),
        created_at=created,
        updated_at=float(record.get("u", created)),
        seq=int(record["s"]),
        contradictions=tuple(record.get("l", ())),
    )
