"""The memory's life with its store: open, reload (built aside, swapped whole), close.

:class:`StoreLifecycle` is the part of :class:`~magnetic_core.MagneticMemory` that keeps
memory equal to storage: every write starts in :meth:`~StoreLifecycle._writing` (the write
lock, an open and up-to-date memory) and runs its changes in
:meth:`~StoreLifecycle._guarded` (any failure reloads what is stored, or, when Chroma cannot
be read, every call refuses until it answers again).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from magnetic_core._search.scorer import Scorer
from magnetic_core._sleep.sleeper import finish_recovery, recover
from magnetic_core._sleep.supersession import superseded_by
from magnetic_core._store.allocator import release_freed_memory
from magnetic_core._store.compaction import DELETED_KEY, remove_orphans
from magnetic_core._store.concurrency import RWLock
from magnetic_core._store.exiting import close_when_exiting, forget_at_exit, is_local
from magnetic_core._store.journal import Journal, WriterClock
from magnetic_core._store.persistence import ChromaStore, open_client
from magnetic_core._store.rebuild import is_fresh
from magnetic_core._store.state import load_state, save_snapshot
from magnetic_core.errors import ClosedError, PersistenceError

if TYPE_CHECKING:
    from magnetic_core._index.calibration import Calibration
    from magnetic_core._index.index import HierIndex
    from magnetic_core._sleep.sleeper import Sleeper
    from magnetic_core._store.catalog import Catalog
    from magnetic_core._store.state import MemoryState
    from magnetic_core._store.writeback import WriteBack
    from magnetic_core.config import MemoryConfig
    from magnetic_core.embeddings import Embedder

__all__ = ["StoreLifecycle"]

logger = logging.getLogger(__name__)

_Self = TypeVar("_Self", bound="StoreLifecycle")


class StoreLifecycle:
    """Opening, reloading and closing a memory's store (a base of ``MagneticMemory``)."""

    config: MemoryConfig
    embedder: Embedder
    _sleeper: Sleeper
    _index: HierIndex
    _catalog: Catalog
    _calibration: Calibration
    _writeback: WriteBack
    _journal: Journal
    _clock: WriterClock
    _state: MemoryState

    def _open_store(self, path: str | os.PathLike[str], namespace: str, client: Any) -> None:
        """Open (or create) the namespace, check its stamp, recover, and load the state."""
        self._owns_client = client is None
        self._path = path
        self._client = client if client is not None else open_client(path)
        self._lock = RWLock()
        self._closed = False
        self._stale: PersistenceError | None = None
        self._store = ChromaStore(self._client, namespace)
        self._superseded: set[str] = set()
        try:
            self._store.open()
            self._store.check_stamp(
                self.embedder.name, self.embedder.dim, join_threshold=self.config.join_threshold
            )
            self._journal = Journal(self._store, self.embedder.dim)
            self._clock = WriterClock(self._store)
            # cells deleted since the last compaction: as stored, and by this memory since
            self._deleted_base = int(self._store.settings().get(DELETED_KEY, 0))
            self._deleted_own = 0
            self._reload()
        except BaseException:
            self.close()
            raise
        if self._owns_client or is_local(self._client):
            close_when_exiting(self)

    @property
    def namespace(self) -> str:
        return self._store.namespace

    @property
    def dim(self) -> int:
        return self.embedder.dim

    @property
    def join_threshold(self) -> float:
        """The join threshold in force (configured, calibrated or provisional)."""
        return self._calibration.threshold

    @property
    def client(self) -> Any:
        """The chromadb client underneath."""
        return self._client

    def _reload(self) -> None:
        """Finish or roll back an interrupted write, then swap in the state as stored.

        The new state is built aside and swapped in whole; when reading fails, the state
        in use is left as it was and the error propagates.
        """
        self._journal.recover()
        replay = recover(self)  # type: ignore[arg-type]  # the moves of a sleep pass a crash interrupted
        # The other writers' counters are read before the cells (or come from the snapshot).
        state = self._read_state(replay)
        # The approximate scorer of this index: restored from the snapshot when it holds one,
        # else built by the first search of a large store.
        self._scorer, restored = _scorer_of(state, self.config)
        if restored:  # the scorer copied what it needs: the loaded arrays can go
            state = dataclasses.replace(state, extra={})
        self._state = state
        self._index, self._catalog = state.index, state.catalog
        self._calibration, self._writeback = state.calibration, state.writeback
        self._superseded = {
            c for c, r in self._catalog.records.with_links() if superseded_by(r.contradictions)
        }
        self._clock.seen = state.seen
        self._stale = None
        if replay:
            finish_recovery(self)  # type: ignore[arg-type]
        try:
            state.writeback.repair()
        except PersistenceError as e:
            logger.warning("the group cache was not repaired (retried on next open): %s", e)
        # Reading a state frees what it was built from (the snapshot's strings decoded, the
        # state replaced): about 30 MB of the C heap at 100K cells that glibc would keep.
        release_freed_memory()

    def _read_state(self, replay: Any) -> MemoryState:
        """The state as stored, read from the cells collection now under the namespace's name.

        A read racing another memory's compaction may have read the collection it dropped
        (empty, with no error from Chroma): the collection is looked up after the read, and
        the read made again on the new one.
        """
        for _ in range(3):
            state = load_state(
                self._store, self.embedder.dim, self.config, replay=replay, clock=self._clock
            )
            if self._store.current():
                return state
            self._store.reconnect()
        raise PersistenceError(
            f"the cells of namespace {self.namespace!r} were replaced three times while read",
            hint="another process compacts this store in a loop; stop it, then reopen",
        )

    def _after_failure(self) -> None:
        """After a failed write: reload what is stored, or refuse calls until Chroma answers."""
        try:
            self._reload()
        except PersistenceError as e:
            logger.warning("cannot reload after a failed write; retrying on the next call: %s", e)
            self._stale = e
        except BaseException as e:  # e.g. an interrupt while reloading
            self._stale = PersistenceError(f"reloading after a failed write was interrupted: {e}")
            raise

    def _sync(self) -> bool:
        """Reload when the last write failed or another writer changed the store.

        While another memory compacts the cells (its mark is read with the counters), this
        waits for it to finish: a write into the collection being copied would be lost.
        """
        if self._stale is None:
            counters = self._clock.read()
            if self._clock.compacting is not None:
                counters = self._await_compaction()
            if counters == self._clock.seen:
                return False
        self._reload()
        return True

    def _await_compaction(self) -> dict[str, int]:
        """The other writers' counters once a running compaction is over (or its mark stale)."""
        logger.info("another memory is compacting namespace %r; waiting", self.namespace)
        while True:
            began = self._clock.compacting
            if began is None:
                break
            if not is_fresh(began):
                logger.warning("dropping the mark of a compaction that stopped %d s ago",
                               time.time() - began)  # fmt: skip
                # (an open leaves a mark without a copy for the first write to drop: reading
                # it there would load Chroma's vector index of the cells)
                self._store.drop_compaction_mark()
                break
            time.sleep(0.1)
            self._clock.read()
        return self._clock.read()

    def _renew_client(self) -> float:
        """After a compaction: reopen an owned persistent client, so Chroma lets go of the
        dropped collection's index, then remove its files; returns the megabytes removed.

        A client passed in by the caller is left as it is (its index memory goes when the
        caller closes it; its files stay, chroma-core/chroma#5520).
        """
        if not self._owns_client:
            return 0.0
        try:
            self._client.close()
        except Exception as e:  # noqa: BLE001 - the new client is opened either way
            logger.debug("closing the Chroma client failed: %s", e)
        self._client = open_client(self._path)
        self._store.client = self._client
        self._store.reconnect()
        release_freed_memory()
        return remove_orphans(self._client)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the write lock on an open, up-to-date memory (every write starts here)."""
        with self._lock.write():
            self._check_open()
            self._sync()
            with self._confirmed():
                yield

    @contextmanager
    def _confirmed(self) -> Iterator[None]:
        """Record the cells written and deleted inside, then :meth:`_confirm` them (the
        caller holds the write or the intent lock)."""
        generation, ticks = self._store.generation, self._clock.value
        recording: tuple[list[str], list[str]] = ([], [])
        self._store.recording = recording
        try:
            yield
        finally:
            self._store.recording = None
        self._confirm(generation, recording, ticked=self._clock.value != ticks)

    def _confirm(
        self, generation: int, recording: tuple[list[str], list[str]], *, ticked: bool
    ) -> None:
        """After a write: if a compaction in another process may have copied the collection
        before the write landed in it, write it again to the collection now in place.

        The write read no compaction mark before it began, but one may have gone in since
        (the writer was slow, e.g. compiling kernels on its first write); a mark there now,
        or a collection swapped meanwhile, means the write may be in the dropped copy only.
        So does a read that misses this writer's own counter, just written (``ticked``): it
        raced the drop of the collection and came back empty (Chroma raises no error then).
        """
        written, deleted = recording
        if not written and not deleted:
            return
        self._clock.read()
        landed = self._clock.own == self._clock.value if ticked else self._store.current()
        if landed and self._clock.compacting is None and self._store.generation == generation:
            return
        self._await_compaction()
        self._store.reconnect()
        live = [c for c in dict.fromkeys(written) if c in self._catalog.records]
        if live:
            vectors, texts, rows = self._writeback.rows_of(live)
            counter = (self._clock.row_id, self._clock.value)
            self._store.write_cells(live, vectors, texts, rows, counter=counter)
        gone = [c for c in dict.fromkeys(deleted) if c not in self._catalog.records]
        if gone:
            self._store.delete_cells(gone)
        logger.info("wrote %d cells again after a compaction elsewhere", len(live) + len(gone))

    @contextmanager
    def _guarded(self) -> Iterator[None]:
        """Around the steps that change memory and storage: on any failure, reload."""
        try:
            yield
        except BaseException:
            self._after_failure()
            raise

    def _load(self) -> None:
        """Reload what is stored after a failed write (the name older write paths call)."""
        self._after_failure()

    def refresh(self) -> bool:
        """Reload the store when another process (or client) wrote to it since last seen.

        Writes do this themselves before they act; call it before reading when another
        process may be writing to the same namespace.

        Returns:
            Whether anything was reloaded.

        Raises:
            PersistenceError: Chroma cannot be reached.
        """
        self._check_open()
        with self._lock.write():
            return self._sync()

    def close(self) -> None:
        """Update the stored group cache and release the Chroma client. Idempotent.

        Cells are written by every call that changes them; only the groups collection (a
        cache of centroids and sizes, repaired on open if it is stale) is brought up to date
        here. The client is closed only when this memory opened it.
        """
        if self._closed:
            return
        forget_at_exit(self)
        sleeper = getattr(self, "_sleeper", None)
        if sleeper is not None:
            sleeper.shutdown()  # a background pass finishes first
        with self._lock.write():
            self._closed = True
            writeback = getattr(self, "_writeback", None)  # absent when opening failed
            try:
                if writeback is not None and self._stale is None:
                    writeback.groups()
                if getattr(self, "_deleted_own", 0) and self._stale is None:
                    self._store.add_to_setting(DELETED_KEY, self._deleted_own)
                if getattr(self, "_clock", None) is not None and self._clock.value:
                    self._clock.retire(self.embedder.dim)
                if writeback is not None and self._stale is None:
                    # a fast next open, with the scorer's built state beside the index
                    save_snapshot(self._state, self._clock, self._scorer_arrays)
            except PersistenceError as e:
                logger.warning("the group cache was not updated (repaired on next open): %s", e)
        if self._owns_client and hasattr(self._client, "close"):
            try:
                self._client.close()
            except Exception as e:  # noqa: BLE001 - closing must not mask the real error
                logger.debug("closing the Chroma client failed: %s", e)

    def _scorer_arrays(self) -> dict[str, np.ndarray]:
        """The search scorer's state for the snapshot, built first if no search built it.

        A bulk load followed by close never searched; building here (once, at close) saves
        every later process the build on its first query.
        """
        self._scorer.sync(self._index)
        return self._scorer.export_arrays()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("this MagneticMemory was closed", hint="open a new one")
        if self._stale is not None:
            with self._lock.write():
                if self._stale is None or self._closed:
                    return
                try:
                    self._reload()
                except PersistenceError as e:
                    raise PersistenceError(
                        "a write failed and Chroma cannot be read back, so this memory "
                        f"cannot tell what is stored: {e.message}",
                        hint="every call retries; it works again once the Chroma path or "
                        "server answers",
                    ) from e


def _scorer_of(state: MemoryState, config: MemoryConfig) -> tuple[Scorer, bool]:
    """The scorer saved with the snapshot, when it matches the config; else a new one.

    Returns it and whether it was restored from the snapshot.
    """
    fresh = Scorer(config.sketch_rank, config.list_size)
    if not state.extra:
        return fresh, False
    if "meta" in state.extra and not Scorer.same_codes(state.extra):
        logger.info("the saved search scorer holds codes of an older kind: rebuilt on demand")
        return fresh, False
    try:
        restored = Scorer.from_arrays(state.extra, state.index)
    except Exception as e:  # noqa: BLE001 - a cache: any defect means "build it again"
        logger.warning("the saved search scorer was not usable (rebuilt on demand): %r", e)
        return fresh, False
    if (restored.rank, restored.list_size) != (fresh.rank, fresh.list_size):
        return fresh, False  # the store was reopened with other scorer settings
    return restored, True
