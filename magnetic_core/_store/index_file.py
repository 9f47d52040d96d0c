"""A snapshot of a namespace's in-memory state beside the Chroma data, for a fast cold open.

Rebuilding the state from the cells collection means reading every row back from Chroma
(vectors, texts, records) and re-indexing every text for BM25: about 10 s at 100K cells.
An embedded store (``PersistentClient``) therefore keeps, per namespace, one file
``<path>/magnetic-index/<namespace>.npz`` with the group blocks (ids, sequence numbers,
vectors), the cell records (as columns) and the BM25 postings, so opening is a file read.

The cells collection stays the single source of truth; the file is only trusted when it
provably describes it:

* it is written when a memory closes, from a state that saw every other writer's changes;
* every change to the cells, by any process, first deletes it and stamps a new random epoch
  on the cells collection (``ChromaStore.before_write``, once per process until the next
  snapshot), so a crash between a write and the next snapshot leaves no usable file;
* a memory writes it at close only when the epoch is still its own (or the one it loaded):
  another process that wrote meanwhile, even one that closed since, changed it;
* on open it must carry the collection's epoch, the embedder and the BM25 tokenizer;
  otherwise, or when it cannot be read, it is ignored (with a log line) and the state is
  rebuilt from the cells. The epoch is read from the collection's metadata, not its rows:
  any read of the rows makes Chroma load the collection's own vector index (about 200 MB
  at 100K cells), which a memory that only searches never needs. The writers' change
  counters (``journal.WriterClock``) as they were at the snapshot are kept in it, and are
  what the memory compares with before its first write.

Stores on a Chroma server (``HttpClient``) have no local path and never get a snapshot.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from magnetic_core._index.index import Group, HierIndex
from magnetic_core._store.catalog import Catalog
from magnetic_core._store.columns import BlobStrings, RecordColumns, Records, split_blob
from magnetic_core._store.npz import NpzArrays
from magnetic_core._store.persistence import ChromaStore
from magnetic_core._text.lexical import LexicalIndex, index_terms
from magnetic_core.errors import PersistenceError

__all__ = ["Loaded", "Snapshot", "snapshot_path"]

logger = logging.getLogger(__name__)

FORMAT = 4  # 3: groups' running sums ("totals"), memory-mapped; 4: BM25 terms' words, labels
_EXTRA = "extra_"
_LEX_ARRAYS = ("lengths", "term_starts", "docs", "tfs", "doc_terms", "doc_term_starts")
DIRECTORY = "magnetic-index"
EPOCH_KEY = "mag_epoch"  # on the cells collection's metadata
# Terms the BM25 tokenizer makes of this text are stamped in the file: a snapshot written
# by a version that tokenizes differently is not used.
_PROBE = "Researched paintings of BRCA1 genes: Ann's 2024 reports, e-mail a@b.org, don't."


def snapshot_path(store: ChromaStore) -> Path | None:
    """Where a namespace's snapshot lives; None for clients without a local path."""
    try:
        settings = store.client.get_settings()
    except Exception:  # noqa: BLE001 - a client of another kind simply has no snapshot
        return None
    directory = getattr(settings, "persist_directory", None)
    if not getattr(settings, "is_persistent", False) or not directory:
        return None
    return Path(directory) / DIRECTORY / f"{store.namespace}.npz"


def _tokenizer() -> list[str]:
    # the words as BM25 indexes them (stemmed): a snapshot of other postings is stale
    return index_terms(_PROBE)


@dataclass(frozen=True)
class Loaded:
    """What a usable snapshot holds: the state, the extra arrays, the writers' counters."""

    index: HierIndex
    catalog: Catalog
    extra: dict[str, np.ndarray]
    counters: dict[str, int]


class Snapshot:
    """Reads, writes and invalidates the snapshot of one namespace.

    Args:
        store: the namespace's opened store; its ``before_write`` hook is taken over.
        embedder: the embedder name stamped on the store.
        dim: the embedding dimension.
    """

    def __init__(self, store: ChromaStore, embedder: str, dim: int) -> None:
        self.store, self.embedder, self.dim = store, embedder, dim
        self.path = snapshot_path(store)
        self._present = self.path is not None and self.path.exists()
        # The epoch this memory's state corresponds to; None once another writer's is seen.
        self.epoch: str | None = self._stored_epoch() if self.path is not None else None
        self._dirty = False  # this process wrote since the epoch was last stamped
        store.before_write = self.invalidate

    def _stored_epoch(self) -> str:
        """The epoch on the cells collection, read afresh (another process may have set it)."""
        try:
            meta = self.store.client.get_collection(self.store.cells.name).metadata or {}
        except Exception as e:
            raise PersistenceError(f"cannot read namespace {self.store.namespace!r}: {e}") from e
        return str(meta.get(EPOCH_KEY, ""))

    def loaded(self) -> None:
        """The state was just (re)loaded from the store: it describes the current epoch."""
        if self.path is not None:
            self.epoch, self._dirty = self._stored_epoch(), False

    def invalidate(self) -> None:
        """Before a change to the cells: drop the file and stamp a new epoch (once)."""
        if self.path is None or self._dirty:
            return
        if self._stored_epoch() != self.epoch:
            self.epoch = None  # another writer wrote since this state was read
        try:
            self.path.unlink(missing_ok=True)
        except OSError as e:
            # The write must not go ahead while a file that would outlive it is there.
            raise PersistenceError(
                f"cannot remove the index snapshot {self.path}: {e}",
                hint="check the permissions of the store's directory",
            ) from e
        self._present = False
        mine = uuid.uuid4().hex
        self.store.save_settings(**{EPOCH_KEY: mine})
        self.epoch = mine if self.epoch is not None else None
        self._dirty = True

    # -- reading ---------------------------------------------------------------------
    def load(self, max_group_size: int, writer: str) -> Loaded | None:
        """The state the file holds, if it matches the cells collection; else None."""
        if self.path is None or not self.path.exists():
            return None
        arrays: NpzArrays | None = None
        try:
            arrays = NpzArrays(self.path)
            meta = json.loads(bytes(arrays["meta"]).decode("utf-8"))
            reason = self._mismatch(meta)
            if reason:
                logger.info("index snapshot %s not used: %s", self.path, reason)
                self._drop()
                return None
            extra = {k[len(_EXTRA) :]: arrays[k] for k in arrays if k.startswith(_EXTRA)}
            counters = {str(k): int(v) for k, v in meta["counters"].items()}
            ids = _strings(arrays, "ids")
            index = _index(arrays, ids, max_group_size, writer)
            catalog = _catalog(arrays, ids)
            _restore_labels(arrays, index, catalog)
            return Loaded(index, catalog, extra, counters)
        except Exception as e:  # noqa: BLE001 - any unreadable file is only a cache miss
            logger.warning(
                "index snapshot %s is unreadable (%s: %s); rebuilding from the cells",
                self.path,
                type(e).__name__,
                e,
            )
            self._drop()
            return None
        finally:
            if arrays is not None:
                arrays.close()

    def _drop(self) -> None:
        """Remove a file that was not used (rewritten at close from the rebuilt state)."""
        try:
            if self.path is not None:
                self.path.unlink(missing_ok=True)
            self._present = False
        except OSError as e:
            logger.warning("cannot remove the unused index snapshot %s: %s", self.path, e)

    def _mismatch(self, meta: Mapping[str, Any]) -> str | None:
        if meta.get("format") != FORMAT:
            return f"format {meta.get('format')!r}, this version reads {FORMAT}"
        if meta.get("embedder") != self.embedder or meta.get("dim") != self.dim:
            return "written for another embedder"
        if meta.get("epoch") != self._stored_epoch():
            return "the cells were written since (the store's epoch moved)"
        if meta.get("tokenizer") != _tokenizer():
            return "written by a version that indexes words differently"
        return None

    # -- writing ---------------------------------------------------------------------
    @property
    def current(self) -> bool:
        """Whether the file on disk holds the state as loaded (no write since)."""
        return self._present

    def may_save(self) -> bool:
        """Whether a state of this memory may be saved: no other writer since it was read."""
        return (
            self.path is not None
            and self.epoch is not None
            and (self._stored_epoch() == self.epoch)
        )

    def save(
        self, index: HierIndex, catalog: Catalog, extra: Mapping[str, np.ndarray] | None = None
    ) -> None:
        """Write the state atomically (a temporary file renamed over the old one).

        Args:
            extra: more arrays to keep with it (e.g. the search scorer's built state,
                ``Scorer.export_arrays()``); :meth:`load` returns them as given.
        """
        if self.path is None:
            return
        state = _state_arrays(index, catalog, self.dim)
        epoch = uuid.uuid4().hex
        self.store.save_settings(**{EPOCH_KEY: epoch})  # before the file: a crash leaves none
        self.epoch, self._dirty = epoch, False
        meta = {
            "epoch": epoch,
            "format": FORMAT,
            "embedder": self.embedder,
            "dim": self.dim,
            "tokenizer": _tokenizer(),
            "rows": int(self.store.cells.count()),
            "counters": self.store.writer_counters(),
        }
        arrays = {
            "meta": np.frombuffer(json.dumps(meta).encode("utf-8"), np.uint8),
            **state,
            **{f"{_EXTRA}{k}": np.asarray(v) for k, v in (extra or {}).items()},
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.stem}.{os.getpid()}.tmp.npz")
        try:
            with open(tmp, "wb") as fh:
                np.savez(fh, **arrays)  # type: ignore[arg-type]  # (numpy stubs type **kwds as allow_pickle)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)
        self._present = True
        logger.info("wrote index snapshot %s (%d cells)", self.path, len(index))


# -- arrays <-> state ----------------------------------------------------------------------
def _state_arrays(index: HierIndex, catalog: Catalog, dim: int) -> dict[str, np.ndarray]:
    """The groups (blocks of ids, vectors, sequence numbers), records and BM25 postings."""
    groups = list(index.slot_groups)
    ids = [cid for g in groups for cid in g.ids]
    lex = catalog.lexical.export_arrays()
    lex_cids = lex.pop("cids").tolist()
    lex_terms = lex.pop("terms").tolist()
    lex_surface = lex.pop("surface").tolist()
    return {
        "sizes": np.array([g.n for g in groups], np.int64),
        "totals": index.totals,
        "vectors": np.concatenate([g.view for g in groups])
        if groups
        else np.empty((0, dim), np.float32),
        "seqs": np.array([index.seq[c] for c in ids], np.int64),
        **_blob("gids", [g.gid for g in groups]),
        **_blob("ids", ids),
        **_records(catalog, ids),
        **_blob("lex_cids", lex_cids),
        **_blob("lex_terms", lex_terms),
        **_blob("lex_surface", lex_surface),
        **{f"lex_{k}": v for k, v in lex.items()},
        **_labels(groups, catalog),
    }


def _labels(groups: list[Group], catalog: Catalog) -> dict[str, np.ndarray]:
    """Every group's label and top entities (a search after the open computes none)."""
    labels = catalog.labels_of(groups)
    return {
        **_blob("labels", [label for label, _ in labels]),
        "label_entity_counts": np.array([len(e) for _, e in labels], np.int64),
        **_blob("label_entities", [e for _, entities in labels for e in entities]),
    }


def _restore_labels(arrays: Mapping[str, np.ndarray], index: HierIndex, catalog: Catalog) -> None:
    labels = _strings(arrays, "labels")
    entities = _strings(arrays, "label_entities")
    ends = np.cumsum(arrays["label_entity_counts"], dtype=np.int64).tolist()
    groups = index.slot_groups
    if len(labels) != len(groups) or len(ends) != len(groups):
        raise ValueError("the snapshot's labels and groups disagree")
    starts = [0, *ends][: len(ends)]  # no groups: no starts
    tops = [tuple(entities[a:b]) for a, b in zip(starts, ends, strict=True)]
    catalog.restore_labels(groups, zip(labels, tops, strict=True))


def _blob(name: str, strings: list[str]) -> dict[str, np.ndarray]:
    """Strings as one UTF-8 blob and character offsets (no pickled object arrays)."""
    text = "".join(strings)
    ends = np.cumsum([len(s) for s in strings], dtype=np.int64)
    return {f"{name}_blob": np.frombuffer(text.encode("utf-8"), np.uint8), f"{name}_ends": ends}


def _utf8_blob(name: str, strings: list[str]) -> dict[str, np.ndarray]:
    """:func:`_blob`, with the strings' end offsets in bytes too (``<name>_byte_ends``): a
    reader keeps the UTF-8 bytes and decodes one string when it is read."""
    encoded = [s.encode("utf-8") for s in strings]
    ends = np.cumsum([len(s) for s in strings], dtype=np.int64)
    return {
        f"{name}_blob": np.frombuffer(b"".join(encoded), np.uint8),
        f"{name}_ends": ends,
        f"{name}_byte_ends": np.cumsum([len(e) for e in encoded], dtype=np.int64),
    }


def _utf8(arrays: Mapping[str, np.ndarray], name: str) -> tuple[str | np.ndarray, np.ndarray]:
    """A blob column as its UTF-8 bytes (memory-mapped when large) and their end offsets.

    One decoded string would take 2 or 4 bytes per character as soon as a single text holds
    a character past U+00FF (a curly quote, an emoji). A snapshot without byte offsets
    (written by an earlier version) gives the same when it is ASCII, else one string.
    """
    blob = arrays[f"{name}_blob"]
    if blob.dtype != np.uint8 or blob.ndim != 1:
        raise ValueError(f"the snapshot's {name!r} column is not UTF-8 bytes")
    if f"{name}_byte_ends" in arrays:
        ends = np.asarray(arrays[f"{name}_byte_ends"], np.int64)
    elif not blob.size or int(blob.max()) < 0x80:  # ASCII: characters are bytes
        ends = np.asarray(arrays[f"{name}_ends"], np.int64)
    else:
        return _text(arrays, name)
    if ends.size and (int(ends[-1]) != blob.size or int(np.diff(ends, prepend=0).min()) < 0):
        raise ValueError(f"the snapshot's {name!r} offsets do not fit its bytes")
    return blob, ends


def _strings(arrays: Mapping[str, np.ndarray], name: str) -> list[str]:
    return split_blob(*_text(arrays, name))


def _index(
    arrays: Mapping[str, np.ndarray], ids: list[str], max_group_size: int, writer: str
) -> HierIndex:
    vectors = np.asarray(arrays["vectors"])
    totals = np.asarray(arrays["totals"])
    sizes = arrays["sizes"].tolist()
    gids = _strings(arrays, "gids")
    if (
        vectors.dtype != np.float32
        or not vectors.flags.c_contiguous
        or len(ids) != vectors.shape[0]
        or sum(sizes) != len(ids)
        or len(gids) != len(sizes)
        or totals.shape != (len(gids), vectors.shape[1])
    ):
        raise ValueError("the snapshot's arrays do not agree in length or type")
    index = HierIndex(vectors.shape[1], max_group_size, writer=writer)
    start = 0
    for gid, n in zip(gids, sizes, strict=True):
        group = index._add_group(gid)
        index.note_gid(gid)
        _fill(group, ids[start : start + n], vectors[start : start + n])
        index.loc.update(dict.fromkeys(group.ids, group))
        start += n
    seqs = np.asarray(arrays["seqs"], np.int64)
    if seqs.shape != (len(ids),):
        raise ValueError("the snapshot's sequence numbers and cells disagree")
    index.restore_seqs(ids, seqs)
    # The writer's own running sums, not sums of the vectors again: the centroids are the
    # ones it searched with, and no vector is read before a query needs it.
    index.finish_placing(totals)
    return index


def _fill(group: Group, ids: list[str], vectors: np.ndarray) -> None:
    # The block is the group's rows of the loaded array, not a copy: opening copies no
    # vectors, and a group that grows copies its own rows out (Group.grow) as usual.
    group.vecs, group.ids, group.n = vectors, ids, len(ids)
    group.rows = dict(zip(ids, range(len(ids))))
    group.version = len(ids)


def _records(catalog: Catalog, ids: list[str]) -> dict[str, np.ndarray]:
    """The cell records as columns; metadata and links (mostly absent) as JSON strings.

    Records never read since the last open are copied from the columns they came from.
    """
    stored = [catalog.records.stored(c) for c in ids]
    return {
        **_utf8_blob("texts", [r.text for r in stored]),
        "created": np.array([r.created_at for r in stored], np.float64),
        "updated": np.array([r.updated_at for r in stored], np.float64),
        "entity_counts": np.array([len(r.entities) for r in stored], np.int64),
        **_blob("entities", [e for r in stored for e in r.entities]),
        **_blob("metas", [r.metadata for r in stored]),
        **_blob("links", [r.links for r in stored]),
    }


def _text(arrays: Mapping[str, np.ndarray], name: str) -> tuple[str, np.ndarray]:
    """One blob column as a single string and its end offsets (split on access)."""
    ends = np.asarray(arrays[f"{name}_ends"], np.int64)
    return bytes(arrays[f"{name}_blob"]).decode("utf-8"), ends


def _catalog(arrays: Mapping[str, np.ndarray], ids: list[str]) -> Catalog:
    columns = RecordColumns(
        ids,
        *_utf8(arrays, "texts"),  # each text decoded when read
        *_text(arrays, "metas"),
        *_text(arrays, "links"),
        BlobStrings(*_text(arrays, "entities")),  # each entity made when read
        np.cumsum(arrays["entity_counts"], dtype=np.int64),
        np.asarray(arrays["created"], np.float64),
        np.asarray(arrays["updated"], np.float64),
    )
    records = Records(columns)
    lex_arrays = {k: arrays[f"lex_{k}"] for k in _LEX_ARRAYS}
    # BM25 names the cells with the records' own id strings, not a second copy of each.
    lex_cids = records.shared_ids(_strings(arrays, "lex_cids"))
    lex_terms = _strings(arrays, "lex_terms")
    # The stems BM25 indexes and the word shown for each (group labels show words).
    surface = _strings(arrays, "lex_surface")
    lexical = LexicalIndex.from_arrays(lex_arrays, lex_cids, lex_terms, surface)
    if len(lexical) != len(columns):
        raise ValueError("the snapshot's BM25 postings and cells disagree")
    return Catalog(columns, lexical, records)
