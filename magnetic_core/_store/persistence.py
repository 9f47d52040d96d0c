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

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from magnetic_core._store.calls import HINT, VANISHED, filler
from magnetic_core._store.client import check_namespace, open_client, read_settings, read_stamp
from magnetic_core._store.group_rows import JOURNAL_KEY, GroupRows
from magnetic_core._store.rebuild import COMPACT_MARK, finish_interrupted, rebuild
from magnetic_core._store.record import (
    ROW_KEY,
    TEXT_KEY,
    WRITER_KEY,
    StoredCell,
    decode_row,
    encode_row,
)
from magnetic_core.errors import (
    CorruptRecordError,
    EmbedderMismatchError,
    PersistenceError,
)

__all__ = [
    "COMPACT_MARK",
    "JOURNAL_KEY",
    "ROW_KEY",
    "SCHEMA_VERSION",
    "ChromaStore",
    "StoredCell",
    "encode_row",
    "open_client",
    "read_settings",
    "read_stamp",
]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 4
# Schema 2 rows (long field names, every field present) and schema 3 rows (the text as
# Chroma's document, not under TEXT_KEY) are still read; an older store is restamped 4 when
# opened, since the rows written from then on are schema 4.
_READS = (2, 3, 4)
# Chroma's HNSW is built on every write but never searched by the engine (search runs on
# the in-memory hierarchy; Chroma is only asked for rows by id or page). It was once built
# with 2 links per node to save 5-9% of Chroma's CPU time per cell, but hnswlib's update
# path (an upsert of an existing id: updatePoint / repairConnectionsForUpdate) is fragile
# on such a sparse, many-layered graph, and sustained mixed writes died with SIGSEGV inside
# Chroma's upsert. The links stay Chroma's default (16), the graph shape Chroma is tested
# with. Only the search breadth while building drops, from Chroma's 100 to 40 (faiss's
# default for HNSW, a setting in wide use): it is most of what building costs, and an index
# nobody searches needs no better neighbours. Chroma's CPU time per add of 1000 MiniLM
# cells (text under TEXT_KEY) fell by a third here, 1779 -> 2576 cells/s (Chroma's own add
# of the same rows with documents and its defaults: 1574/s). Settings apply to collections
# created from now on (older ones keep theirs): a store created with 2 links is rebuilt once
# when opened (magnetic_core._store.rebuild).
_COLLECTION_CONFIG = {"hnsw": {"space": "cosine", "ef_construction": 40}}
_FRAGILE_LINKS = 4
# Chroma persists a collection's HNSW every ``sync_threshold`` writes (1000 by default) and,
# when a client first reads the collection, replays every write since into the index. The
# groups collection is small but rewritten in bulk (the group cache, journal rows), and its
# replays are HNSW updates of existing ids: 612 of them took 1.7 s of a 100K store's cold
# open, for a read that needs no vector index. Persisting it every 100 writes (Chroma's
# batch size; the file is a few MB even at 1M cells) bounds that to about 0.3 s.
_GROUPS_SYNC = 100
# Reserved metadata key beside ROW_KEY and WRITER_KEY (record.py): the
# transaction that wrote a row (only on writes spanning several batches).
TXN_KEY = "_mag_t"
# COMPACT_MARK (magnetic_core._store.rebuild) is a counter-shaped row: it is read with the
# writers' counters, so noticing a running compaction costs no extra call per write.
# Settings that describe how the store was built; clear() keeps them.
_STAMP_KEYS = ("mag_embedder", "mag_dim", "mag_schema", "mag_join_threshold")


class ChromaStore(GroupRows):
    """Reads and writes one namespace of cells and groups in a Chroma client.

    Args:
        client: any chromadb client (persistent, HTTP or ephemeral).
        namespace: 1-50 characters of letters, digits, ``_`` and ``-``.
    """

    def __init__(self, client: Any, namespace: str) -> None:
        check_namespace(namespace)
        super().__init__(namespace)
        self.client = client
        self.cells: Any = None
        # Called before every change to the cells (magnetic_core._store.index_file drops
        # its snapshot there, so a snapshot never outlives a write it does not hold).
        self.before_write: Callable[[], None] | None = None
        # Bumped whenever the collections are taken up again (another client swapped in a
        # compacted copy); and, while a write runs, the ids it wrote and deleted.
        self.generation = 0
        self.recording: tuple[list[str], list[str]] | None = None

    def open(self) -> ChromaStore:
        """Create the namespace's collections if missing and connect to them; returns self."""
        try:
            finish_interrupted(self.client, self._names())
            self.batch = int(self.client.get_max_batch_size())
            self.cells, self.groups = (self._collection(name) for name in self._names())
            self._bound_replay()
            # The journal's rows live beside the group cache (same dimension), told apart
            # by JOURNAL_KEY: two collections per namespace, whatever happens.
            self.log = self.groups
        except Exception as e:
            raise PersistenceError(
                f"cannot open namespace {self.namespace!r} in Chroma: {e}", hint=HINT
            ) from e
        return self

    def _bound_replay(self) -> None:
        """Make Chroma persist the groups collection's HNSW at least every ``_GROUPS_SYNC``
        writes.

        Applied to existing collections too (a configuration update Chroma allows at any
        time); it takes effect from the collection's next write. Only a speed-up: when the
        update fails (after the retries :meth:`_call` makes while another client holds the
        database), the store opens as it is and the next open tries again.
        """
        hnsw = (self.groups.configuration or {}).get("hnsw") or {}
        sync = hnsw.get("sync_threshold")
        if not (isinstance(sync, int) and sync > _GROUPS_SYNC):
            return
        batch = hnsw.get("batch_size")
        update: dict[str, int] = {"sync_threshold": _GROUPS_SYNC}
        if isinstance(batch, int) and batch > _GROUPS_SYNC:
            update["batch_size"] = _GROUPS_SYNC  # Chroma wants batch_size <= sync_threshold
        try:
            self._call(
                "lower the groups collection's sync threshold",
                self.groups.modify,
                configuration={"hnsw": update},
            )
        except PersistenceError as e:  # a setting for speed never blocks an open
            logger.info("the groups collection's sync threshold was not lowered: %s", e)

    def _collection(self, name: str) -> Any:
        found = self.client.get_or_create_collection(
            name, embedding_function=None, configuration=_COLLECTION_CONFIG
        )
        links = ((found.configuration or {}).get("hnsw") or {}).get("max_neighbors")
        if isinstance(links, int) and links < _FRAGILE_LINKS:
            logger.warning(
                "collection %r was built with %d HNSW links per node, which can crash Chroma "
                "under sustained upserts: rebuilding it once",
                name,
                links,
            )
            found = rebuild(self.client, found, _COLLECTION_CONFIG, self.batch)
        return found

    def reconnect(self, wait: float = 5.0) -> None:
        """Take up the collections under this namespace's names again (after a compaction).

        A compaction drops the old cells collection and renames its copy; between the two
        there is no collection under the name, so a missing one is waited for, up to
        ``wait`` seconds.
        """
        deadline = time.monotonic() + wait
        while True:
            try:
                cells, groups = (
                    self.client.get_collection(name, embedding_function=None)
                    for name in self._names()
                )
                break
            except Exception as e:
                if time.monotonic() > deadline:
                    raise PersistenceError(
                        f"cannot reach namespace {self.namespace!r} in Chroma: {e}", hint=HINT
                    ) from e
                time.sleep(0.05)
        self.cells, self.groups = cells, groups
        self.log = self.groups
        self.generation += 1

    def current(self) -> bool:
        """Whether the cells collection held here is still the one under its name.

        A read racing another client's drop of the collection (a compaction swapping in its
        copy) can come back with no rows and no error; the name is gone by the time the read
        returns, so looking it up after a read tells such a read from a true one.
        """
        try:
            now = self.client.get_collection(self._names()[0], embedding_function=None)
        except Exception as e:
            if VANISHED in str(e):
                return False
            raise self._failed("look up the cells collection", e) from e
        return bool(now.id == self.cells.id)

    def _rebind(self, fn: Any) -> Any:
        owner, name = getattr(fn, "__self__", None), getattr(fn, "__name__", "")
        if owner is None or not name or (owner is not self.cells and owner is not self.groups):
            return None
        was_cells = owner is self.cells
        self.reconnect()
        return getattr(self.cells if was_cells else self.groups, name)

    def _names(self) -> tuple[str, str]:
        return f"mag-{self.namespace}-cells", f"mag-{self.namespace}-groups"

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

    def add_to_setting(self, key: str, n: int) -> None:
        """Add ``n`` to an integer setting, as stored now (other writers may have added)."""
        meta = dict(self._call("read settings", self._fresh_settings))
        meta[key] = int(meta.get(key, 0)) + n
        self._call("save settings", self.cells.modify, metadata=meta)

    def _fresh_settings(self) -> dict[str, Any]:
        got = self.client.get_collection(self.cells.name, embedding_function=None)
        return dict(got.metadata or {})

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
                meta = got["metadatas"][i]
                if meta and WRITER_KEY in meta:
                    continue  # another writer's change counter, not a cell
                try:
                    row = decode_row(cid, vectors[i], got["documents"][i], meta)
                except CorruptRecordError as e:  # one bad row must not lock the store
                    logger.warning("skipped a stored cell on load: %s", e)
                    continue
                yield row
            offset += len(ids)

    def write_cells(
        self,
        ids: Sequence[str],
        vectors: np.ndarray,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]],
        *,
        counter: tuple[str, int] | None = None,
        txn: str | None = None,
        fresh: bool = False,
    ) -> None:
        """Upsert full cell rows (``metadatas`` are already encoded Chroma dicts).

        Args:
            counter: ``(row id, value)`` of this writer's change counter, upserted in the
                same Chroma call as the last batch, so it moves exactly when the cells land.
            txn: tag every row with this transaction (a write spanning several batches,
                rolled back on open unless its journal entry was finished).
            fresh: the caller holds none of the ids (all new cells): they are checked
                against the collection and, when none is stored, written with ``add``,
                about a quarter cheaper in Chroma than ``upsert`` (which looks every id up
                while it writes); the counter then follows in its own call, once the cells
                have landed whole. Any id found stored makes it a plain upsert, and so
                does a write under ``_ADD_FROM`` rows or over one batch (two more calls
                would cost a small write more than they save).
        """
        # Long for its docstring (when it adds, when it upserts); the code is two steps.
        self._touch()
        if self.recording is not None:
            self.recording[0].extend(ids)
        tag = {} if txn is None else {TXN_KEY: txn}
        metas = [{**m, TEXT_KEY: t, **tag} for m, t in zip(metadatas, texts, strict=True)]
        ids = list(ids)
        vectors = np.asarray(vectors, np.float32)
        if fresh and _ADD_FROM <= len(ids) <= self.batch and not self._any_stored(ids):
            # One call: the cells land whole or not at all, as with one upsert.
            self._call("write cells", self.cells.add, ids=ids, embeddings=vectors,
                       metadatas=metas)  # fmt: skip
            ids, metas, vectors = [], [], vectors[:0]  # only the counter is left
        if counter is not None:
            ids.append(counter[0])
            vectors = np.vstack([vectors, filler(vectors.shape[1])])
            metas.append({WRITER_KEY: counter[1]})
        # No documents: the text is under TEXT_KEY (record.py says why). A row stored by
        # schema 3 keeps its old document until a compaction copies the row without it.
        self._batched(
            "write cells", self.cells.upsert, ids=ids, embeddings=vectors, metadatas=metas
        )

    def _any_stored(self, ids: Sequence[str]) -> bool:
        """Whether any of the ids has a row (a cheap read: ids only)."""
        got = self._call("read cell ids", self.cells.get, ids=list(ids), include=[])
        return bool(got["ids"])

    def write_counter(self, row_id: str, value: int, dim: int) -> None:
        """Upsert one writer's change counter alone (after a delete or a regrouping)."""
        self.write_cells([], np.empty((0, dim), np.float32), [], [], counter=(row_id, value))

    def writer_counters(self) -> dict[str, int]:
        """Every writer's change counter, by row id."""
        return self.counters_and_mark()[0]

    def counters_and_mark(self) -> tuple[dict[str, int], int | None]:
        """Every writer's change counter, and when a running compaction began (None: none)."""
        got = self._call(
            "read change counters",
            self.cells.get,
            where={WRITER_KEY: {"$gte": 0}},
            include=["metadatas"],
        )
        counters = {
            i: int(m[WRITER_KEY]) for i, m in zip(got["ids"], got["metadatas"], strict=True)
        }
        return counters, counters.pop(COMPACT_MARK, None)

    def drop_compaction_mark(self) -> None:
        """Delete the mark a compaction that died left in the cells (no write of cells)."""
        self._call("drop a dead compaction's mark", self.cells.delete, ids=[COMPACT_MARK])

    def tagged_cells(self, txn: str) -> list[str]:
        """Ids of the cells written by transaction ``txn``."""
        got = self._call("read a transaction", self.cells.get, where={TXN_KEY: txn}, include=[])
        return list(got["ids"])

    def relocate_cells(self, ids: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        """Rewrite only the metadata of existing cells (their group changed, not their vector).

        Much cheaper than :meth:`write_cells`: Chroma does not touch its vector index.
        """
        self._touch()
        if self.recording is not None:
            self.recording[0].extend(ids)
        self._batched(
            "relocate cells",
            self.cells.update,
            ids=list(ids),
            metadatas=[dict(m) for m in metadatas],
        )

    def delete_cells(self, ids: Sequence[str]) -> None:
        """Delete cell rows by id (missing ids are ignored), batch by batch."""
        self._touch()
        if self.recording is not None:
            self.recording[1].extend(ids)
        self._batched("delete cells", self.cells.delete, ids=list(ids))

    def clear(self) -> None:
        """Delete every row of the namespace's collections, keeping the stamp."""
        self._touch()
        meta = self.settings()
        for name in self._names():
            self._call("clear", self.client.delete_collection, name)
        self.open()
        keep = {k: v for k, v in meta.items() if k in _STAMP_KEYS}
        if keep:
            self.save_settings(**keep)

    def _touch(self) -> None:
        if self.before_write is not None:
            self.before_write()


# Fewest new rows for which add + a separate counter call beats one upsert (each Chroma
# write call costs about as much as 60 rows of the difference between the two).
_ADD_FROM = 256
