"""MagneticMemory: the facade over the hierarchy, its search, and its Chroma persistence."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Literal, overload

import numpy as np

from magnetic_core._index.clustering import normalize
from magnetic_core._search.restricted import search_restricted
from magnetic_core._search.scorer import Scorer
from magnetic_core._search.search import SearchPlan, run_search
from magnetic_core._search.views import cell_view, group_info, hit_view, merge_plan, stats_view
from magnetic_core._sleep.plan import SleepConfig
from magnetic_core._sleep.sleeper import Sleeper, finish_recovery, recover
from magnetic_core._sleep.supersession import (
    link_cells,
    links_kept_by_upsert,
    newer_of,
    superseded_by,
    superseded_ids,
)
from magnetic_core._store.catalog import CellRecord
from magnetic_core._store.concurrency import RWLock
from magnetic_core._store.journal import Journal, WriterClock
from magnetic_core._store.persistence import ChromaStore, open_client
from magnetic_core._store.state import load_state
from magnetic_core._text.entities import extract_entities
from magnetic_core._text.inputs import (
    check_id_list,
    check_k,
    validate_batch,
    validate_batch_vectors,
)
from magnetic_core._text.lexical import LexicalIndex
from magnetic_core.config import MemoryConfig
from magnetic_core.embeddings import Embedder, default_embedder, embed_checked, validate_vectors
from magnetic_core.errors import (
    ClosedError,
    EmptyTextError,
    InvalidInputError,
    PersistenceError,
)
from magnetic_core.filters import Predicate, compile_filter
from magnetic_core.types import Cell, GroupInfo, Hit, MergePlan, SleepReport, Stats

__all__ = ["MagneticMemory"]

logger = logging.getLogger(__name__)


def _now() -> float:
    # Millisecond resolution: finer digits mean nothing for a memory's timestamp.
    return round(time.time(), 3)


class MagneticMemory:
    """A hierarchical memory: cells (text + vector + metadata) nested under concept groups.

    Args:
        path: directory of the embedded Chroma store (ignored when ``client`` is given);
            a relative path is resolved against the current directory when opened.
        namespace: isolated memory inside one store.
        embedder: any :class:`~magnetic_core.embeddings.Embedder`; by default the first of
            Ollama, MiniLM and the (non-semantic) hashing embedder that works.
        config: engine settings.
        client: any chromadb client (``PersistentClient``, ``HttpClient``,
            ``EphemeralClient``). A client passed in is not closed by :meth:`close`.

    Example:
        >>> import tempfile
        >>> from magnetic_core import HashingEmbedder, MagneticMemory
        >>> with MagneticMemory(path=tempfile.mkdtemp(), embedder=HashingEmbedder()) as mem:
        ...     mem.add(["the cat sat on the mat", "stocks fell"], ids=["c1", "c2"])
        ...     hit = mem.search("a cat on a mat", k=1)[0]
        ['c1', 'c2']
        >>> hit.id, hit.text, hit.group_id == hit.cell.group_id
        ('c1', 'the cat sat on the mat', True)
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = "./magnetic_memory",
        namespace: str = "default",
        embedder: Embedder | None = None,
        config: MemoryConfig | None = None,
        *,
        client: Any = None,
    ) -> None:
        self.config = config or MemoryConfig()
        self.embedder: Embedder = embedder if embedder is not None else default_embedder()
        self._owns_client = client is None
        self._client = client if client is not None else open_client(path)
        self._lock = RWLock()
        self._closed = False
        self._stale: PersistenceError | None = None
        self._store = ChromaStore(self._client, namespace)
        self._sleeper = Sleeper(self)
        self._superseded: set[str] = set()
        try:
            self._store.open()
            self._store.check_stamp(
                self.embedder.name, self.embedder.dim, join_threshold=self.config.join_threshold
            )
            self._journal = Journal(self._store, self.embedder.dim)
            self._clock = WriterClock(self._store)
            self._reload()
        except BaseException:
            self.close()
            raise

    # -- properties ------------------------------------------------------------------
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

    # -- lifecycle -------------------------------------------------------------------
    def _reload(self) -> None:
        """Finish or roll back an interrupted write, then swap in the state as stored.

        The new state is built aside and swapped in whole; when reading fails, the state
        in use is left as it was and the error propagates.
        """
        self._journal.recover()
        replay = recover(self)  # the moves of a sleep pass a crash interrupted
        seen = self._clock.read()  # before the load: a write landing during it is seen later
        state = load_state(self._store, self.embedder.dim, self.config, replay=replay)
        self._index, self._catalog = state.index, state.catalog
        # The approximate scorer of this index (built by the first search of a large store).
        self._scorer = Scorer(self.config.sketch_rank, self.config.list_size)
        self._calibration, self._writeback = state.calibration, state.writeback
        self._superseded = {
            c for c, r in self._catalog.records.items() if superseded_by(r.contradictions)
        }
        self._clock.seen = seen
        self._stale = None
        if replay:
            finish_recovery(self)
        try:
            state.writeback.repair()
        except PersistenceError as e:
            logger.warning("the group cache was not repaired (retried on next open): %s", e)

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
        """Reload when the last write failed or another writer changed the store."""
        if self._stale is None and self._clock.read() == self._clock.seen:
            return False
        self._reload()
        return True

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the write lock on an open, up-to-date memory (every write starts here)."""
        with self._lock.write():
            self._check_open()
            self._sync()
            yield

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
        sleeper = getattr(self, "_sleeper", None)
        if sleeper is not None:
            sleeper.shutdown()  # a background pass finishes first
        with self._lock.write():
            self._closed = True
            writeback = getattr(self, "_writeback", None)  # absent when opening failed
            try:
                if writeback is not None and self._stale is None:
                    writeback.groups()
                if getattr(self, "_clock", None) is not None and self._clock.value:
                    self._store.delete_cells([self._clock.row_id])
            except PersistenceError as e:
                logger.warning("the group cache was not updated (repaired on next open): %s", e)
        if self._owns_client and hasattr(self._client, "close"):
            try:
                self._client.close()
            except Exception as e:  # noqa: BLE001 - closing must not mask the real error
                logger.debug("closing the Chroma client failed: %s", e)

    def __enter__(self) -> MagneticMemory:
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

    # -- writing ---------------------------------------------------------------------
    def add(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        ids: Sequence[str] | None = None,
        vectors: Any = None,
    ) -> list[str]:
        """Store texts (upsert by id) and place each in a concept group.

        Args:
            texts: non-empty strings (empty ones are accepted when ``vectors`` are given:
                such a cell is found by its vector and metadata, not by words).
            metadatas: one dict (or None) per text; returned exactly as given.
            ids: one unique id per text; random UUIDs by default. An existing id is updated
                and moved to the group that fits its new vector.
            vectors: precomputed embeddings, one per text; otherwise the embedder is used.

        Returns:
            The ids, in input order.

        Raises:
            InvalidInputError: empty text, duplicate ids, bad metadata or vectors. Nothing
                is stored when any input is invalid.
            EmbeddingError: the embedder failed.
        """
        self._check_open()
        texts, metas, ids = validate_batch(
            texts,
            metadatas,
            ids,
            max_chars=self.config.max_text_chars,
            allow_empty=vectors is not None,
        )
        if not texts:
            return []
        if vectors is not None:
            vecs = validate_batch_vectors(vectors, len(texts), self.dim)
        else:
            vecs = embed_checked(self.embedder, texts)
        vecs = normalize(vecs)
        entities = [tuple(extract_entities(t)) for t in texts]
        with self._writing(), self._guarded():
            self._write(ids, vecs, texts, metas, entities)
        self._sleeper.note_writes(len(ids))
        return list(ids)

    def _write(
        self,
        ids: list[str],
        vecs: np.ndarray,
        texts: list[str],
        metas: list[dict[str, Any]],
        entities: list[tuple[str, ...]],
    ) -> None:
        now = _now()
        records = self._catalog.records
        created = [records[c].created_at if c in records else now for c in ids]
        links, partners = [], set()
        for cid, text in zip(ids, texts, strict=True):
            kept, changed = links_kept_by_upsert(records, cid, text)
            links.append(kept)
            partners |= changed
        partners -= set(ids)
        # A write of more cells than one Chroma batch goes through the journal.
        txn = self._clock.new_txn() if len(ids) + len(partners) > self._store.batch else None
        if txn is not None:
            existing = [c for c in ids if c in records] + sorted(partners)
            self._journal.begin_write(txn, existing, *self._writeback.rows_of(existing))
        self._calibration.assign(self._index, ids, vecs)
        for i, cid in enumerate(ids):
            self._catalog.put(
                cid, CellRecord(texts[i], metas[i], entities[i], created[i], now, links[i])
            )
        self._writeback.cells([*ids, *sorted(partners)], counter=self._clock.tick(), txn=txn)
        if txn is not None:
            self._journal.finish()
        self._calibration.commit(self._store.save_settings)
        self._superseded = set(superseded_ids(records, self._superseded))

    def delete(
        self, ids: Sequence[str] | None = None, filter: Mapping[str, Any] | Predicate | None = None
    ) -> int:
        """Delete cells by ids and/or a metadata filter; missing ids are ignored.

        ``filter`` is a ``where`` dict or a predicate, as in :meth:`search`.

        Returns:
            The number of cells deleted.
        """
        self._check_open()
        if ids is None and filter is None:
            raise InvalidInputError(
                "delete() needs ids or a filter", hint="use clear() to delete everything"
            )
        check_id_list(ids)
        predicate = compile_filter(filter)
        with self._writing():
            records = self._catalog.records
            pool = records if ids is None else ids
            targets = list(dict.fromkeys(c for c in pool if c in records))
            if predicate is not None:
                targets = [c for c in targets if predicate(records[c].metadata)]
            if not targets:
                return 0
            txn = self._clock.new_txn() if len(targets) > self._store.batch else None
            with self._guarded():
                if txn is not None:
                    self._journal.begin_delete(txn, targets)
                self._store.delete_cells(targets)
                for cid in targets:
                    self._index.remove(cid)
                    self._catalog.drop(cid)
                self._writeback.cells(counter=self._clock.tick())
                if txn is not None:
                    self._journal.finish()
            return len(targets)

    def clear(self) -> None:
        """Delete every cell and group of this namespace (the embedder stamp stays)."""
        self._check_open()
        with self._lock.write():
            self._check_open()
            with self._guarded():
                self._store.clear()
                self._reload()

    def mark_contradiction(self, cell_a: str, cell_b: str, explanation: str) -> None:
        """Record that two cells contradict each other; both are kept and linked both ways.

        Where the two were stored at different times, the newer one supersedes the older:
        the older cell's ``superseded_by`` names the newer, with the time it was marked.
        """
        self._link(cell_a, cell_b, explanation, supersede="by-time")

    def supersede(self, old_id: str, new_id: str, explanation: str = "") -> None:
        """Mark ``old_id`` as replaced by ``new_id`` (both kept, linked both ways).

        ``search(..., current_only=True)`` then leaves ``old_id`` out.
        """
        self._link(old_id, new_id, explanation or "superseded by a newer fact", supersede=True)

    def _link(self, a: str, b: str, explanation: str, *, supersede: bool | str) -> None:
        self._check_open()
        if not isinstance(explanation, str) or not explanation.strip():
            raise InvalidInputError("an explanation is required", hint="say why in one sentence")
        with self._writing():
            records = self._catalog.records
            for cid in (a, b):
                if cid not in records:
                    raise InvalidInputError(f"no cell with id {cid!r}")
            order = (a, b) if supersede is True else None
            if supersede == "by-time" and a != b:
                order = newer_of(records, a, b)
            saved = {c: [dict(x) for x in records[c].contradictions] for c in (a, b)}
            try:
                link_cells(records, a, b, explanation.strip(), _now(), supersede=order)
            except InvalidInputError:
                for c, links in saved.items():
                    records[c].contradictions = links
                raise
            with self._guarded():
                self._writeback.cells([a, b], counter=self._clock.tick())
            if order is not None:
                self._superseded.add(order[0])

    # -- reading ---------------------------------------------------------------------
    def embed_query(self, text: str) -> np.ndarray:
        """The embedder's unit query vector for ``text``."""
        if not isinstance(text, str) or not text.strip():
            raise EmptyTextError("the query is empty", hint="pass a non-empty query")
        return normalize(embed_checked(self.embedder, [text], query=True))[0]

    def search(
        self,
        query: str | None = None,
        k: int = 10,
        filter: Mapping[str, Any] | Predicate | None = None,
        explain: bool = False,
        *,
        vector: Any = None,
        n_probe: int | None = None,
        entity_boost: float | None = None,
        lexical_weight: float | None = None,
        current_only: bool = False,
    ) -> list[Hit]:
        """Find the ``k`` cells most similar to a query, through the concept layer.

        Args:
            query: the query text (embedded unless ``vector`` is given; entities are taken
                from it either way).
            k: number of results; ``k`` come back whenever ``k`` cells match the filter.
            filter: Chroma-style ``where`` dict on the user's metadata, or a predicate
                (a callable taking the metadata dict and returning a bool; it must not
                modify the dict).
            explain: attach each hit's route (stages, centroid similarity, boost).
            vector: a query embedding to use instead of embedding ``query``.
            n_probe: groups to probe; given here, exactly this many (default: the config's
                ``n_probe``, widened to hold at least ``probe_cells`` cells).
            entity_boost: boost for cells holding a query entity (default from the config).
            lexical_weight: weight of the BM25 score of the query's words (default from the
                config; needs ``query`` text, 0 turns the lexical stage off).
            current_only: leave out cells superseded by a newer one.

        Returns:
            Hits, best first.
        """
        self._check_open()
        check_k(k)
        if n_probe is not None and (
            not isinstance(n_probe, int) or isinstance(n_probe, bool) or n_probe < 1
        ):
            raise InvalidInputError(f"n_probe must be a positive integer, got {n_probe!r}")
        predicate = compile_filter(filter)
        if vector is not None:
            q = normalize(validate_vectors(vector, self.dim, what="query vector"))[0]
        elif query is None:
            raise InvalidInputError("search() needs a query or a vector")
        else:
            q = self.embed_query(query)
        entities = tuple(extract_entities(query)) if query else ()
        plan = SearchPlan(
            vector=q,
            k=k,
            n_probe=n_probe or self.config.n_probe,
            entities=entities,
            entity_boost=self.config.entity_boost if entity_boost is None else entity_boost,
            predicate=predicate,
            lexical_terms=LexicalIndex.query_terms(query) if query else (),
            lexical_weight=self.config.lexical_weight if lexical_weight is None else lexical_weight,
            sketch_rank=self.config.sketch_rank,
            rerank=self.config.rerank,
            min_cells=self.config.probe_cells if n_probe is None else 0,
            list_size=self.config.list_size,
        )
        with self._lock.read():
            if current_only and self._superseded:
                exclude = superseded_ids(self._catalog.records, self._superseded)
                plan = replace(plan, exclude=exclude)
            found = run_search(self._index, self._catalog, plan, self._scorer)
            return [hit_view(self._index, self._catalog, c, explain) for c in found]

    def search_among(
        self, ids: Sequence[str], query: str | None = None, k: int = 10, *, vector: Any = None
    ) -> list[Hit]:
        """Exact search restricted to the cells ``ids`` (missing ids are skipped).

        For restrictions a metadata filter cannot express (given node ids, a test on the
        text): every named cell is scored by exact cosine, ``rank_score`` equals ``score``.
        """
        self._check_open()
        check_k(k)
        check_id_list(ids)
        if vector is not None:
            q = normalize(validate_vectors(vector, self.dim, what="query vector"))[0]
        elif query is None:
            raise InvalidInputError("search_among() needs a query or a vector")
        else:
            q = self.embed_query(query)
        with self._lock.read():
            found = search_restricted(self._index, ids, q, k)
            return [hit_view(self._index, self._catalog, c, False) for c in found]

    def get(
        self,
        ids: Sequence[str] | None = None,
        filter: Mapping[str, Any] | Predicate | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Cell]:
        """Cells by id (in the order asked, missing ids skipped) or by filter (oldest first).

        ``filter`` is a ``where`` dict or a predicate, as in :meth:`search`.
        """
        self._check_open()
        check_id_list(ids)
        predicate = compile_filter(filter)
        with self._lock.read():
            records = self._catalog.records
            if ids is not None:
                chosen = [c for c in dict.fromkeys(ids) if c in records]
            else:
                chosen = sorted(records, key=self._index.seq.__getitem__)
            if predicate is not None:
                chosen = [c for c in chosen if predicate(records[c].metadata)]
            end = None if limit is None else offset + limit
            return [self._cell(c) for c in chosen[offset:end]]

    def get_vectors(self, ids: Sequence[str]) -> np.ndarray:
        """Unit vectors of existing cells, in order (for MMR and re-ranking)."""
        self._check_open()
        with self._lock.read():
            missing = [c for c in ids if c not in self._index.loc]
            if missing:
                raise InvalidInputError(f"no cell with id {missing[0]!r}")
            if not ids:
                return np.empty((0, self.dim), np.float32)
            return self._index.vectors(ids)

    def count(self) -> int:
        """Number of cells."""
        self._check_open()
        return len(self._index)

    def __len__(self) -> int:
        return self.count()

    def _cell(self, cid: str) -> Cell:
        return cell_view(self._index, self._catalog, cid)

    # -- the hierarchy ---------------------------------------------------------------
    def groups(self) -> list[GroupInfo]:
        """Every group, largest first."""
        self._check_open()
        with self._lock.read():
            infos = [group_info(self._index, self._catalog, g) for g in self._index.slot_groups]
        return sorted(infos, key=lambda g: (-g.size, g.id))

    def group(self, group_id: str) -> GroupInfo:
        """One group by id."""
        self._check_open()
        with self._lock.read():
            group = self._index.groups.get(group_id)
            if group is None:
                raise InvalidInputError(f"no group with id {group_id!r}")
            return group_info(self._index, self._catalog, group)

    def stats(self) -> Stats:
        """Counts and health metrics of the hierarchy."""
        self._check_open()
        with self._lock.read():
            return stats_view(
                self._index,
                self._catalog,
                threshold=self._calibration.threshold,
                threshold_source=self._calibration.source,
                embedder=self.embedder.name,
                namespace=self.namespace,
            )

    def plan_merges(self, threshold: float | None = None) -> MergePlan:
        """Pairs of groups whose centroids converged (sleep mode, numeric half).

        Args:
            threshold: centroid similarity needed (default ``config.merge_threshold``).
        """
        self._check_open()
        threshold = self.config.merge_threshold if threshold is None else threshold
        if not -1.0 <= threshold <= 1.0:
            raise InvalidInputError(f"threshold must be in [-1, 1], got {threshold!r}")
        with self._lock.read():
            return merge_plan(self._index, threshold, self.config.max_group_size)

    def apply_merges(self, plan: MergePlan) -> list[str]:
        """Merge the planned groups (skipping pairs that no longer exist); returns kept ids."""
        self._check_open()
        kept: list[str] = []
        with self._writing(), self._guarded():
            groups = self._index.groups
            for keep, absorb, _ in plan.pairs:
                if keep in groups and absorb in groups and keep != absorb:
                    self._index.merge(groups[keep], groups[absorb])
                    kept.append(keep)
            if kept:
                self._writeback.cells(counter=self._clock.tick())
                self._writeback.groups()
        return kept

    @overload
    def sleep(
        self,
        *,
        dry_run: bool = ...,
        background: Literal[False] = ...,
        config: SleepConfig | None = ...,
        **settings: Any,
    ) -> SleepReport: ...

    @overload
    def sleep(
        self,
        *,
        dry_run: bool = ...,
        background: Literal[True],
        config: SleepConfig | None = ...,
        **settings: Any,
    ) -> Future[SleepReport]: ...

    def sleep(
        self,
        *,
        dry_run: bool = False,
        background: bool = False,
        config: SleepConfig | None = None,
        **settings: Any,
    ) -> SleepReport | Future[SleepReport]:
        """Run one consolidation pass (sleep mode, numeric half) and report it.

        Merges converged groups, absorbs fragments, splits incoherent or oversized groups,
        refiles cells whose nearest centroid changed (one bounded Lloyd step), drops empty
        groups and refreshes labels. Thresholds are fitted to the data unless set. Readers
        are not blocked (they see the state before the pass until it is swapped in); other
        writes wait. A crash at any moment reopens to the state before or after the pass.

        Args:
            dry_run: plan only; the report's ``after`` is the predicted state.
            background: run on the memory's sleep thread and return a ``Future``.
            config: a :class:`~magnetic_core._sleep.plan.SleepConfig`.
            **settings: fields of ``SleepConfig`` (e.g. ``merge_threshold=0.85``).

        Returns:
            A :class:`~magnetic_core.types.SleepReport` (or a future of one).

        Example:
            >>> import tempfile
            >>> from magnetic_core import HashingEmbedder, MagneticMemory
            >>> mem = MagneticMemory(path=tempfile.mkdtemp(), embedder=HashingEmbedder())
            >>> _ = mem.add(["tea with milk", "green tea", "tea without sugar"])
            >>> report = mem.sleep(dry_run=True)
            >>> report.dry_run, report.before.count
            (True, 3)
            >>> mem.close()
        """
        self._check_open()
        cfg = _sleep_config(config, settings)
        if background:
            if dry_run:
                raise InvalidInputError("a dry run cannot run in the background")
            return self._sleeper.submit(cfg)
        return self._sleeper.run(cfg, dry_run)

    def sleep_every(self, writes: int, config: SleepConfig | None = None) -> None:
        """Run a background sleep pass after every ``writes`` cells written (0: never)."""
        self._check_open()
        self._sleeper.schedule(writes, config)

    # -- async twins -----------------------------------------------------------------
    async def aadd(self, *args: Any, **kwargs: Any) -> list[str]:
        """Async :meth:`add` (runs in a worker thread; Chroma's client is synchronous)."""
        return await asyncio.to_thread(self.add, *args, **kwargs)

    async def asearch(self, *args: Any, **kwargs: Any) -> list[Hit]:
        """Async :meth:`search`."""
        return await asyncio.to_thread(self.search, *args, **kwargs)

    async def aget(self, *args: Any, **kwargs: Any) -> list[Cell]:
        """Async :meth:`get`."""
        return await asyncio.to_thread(self.get, *args, **kwargs)

    async def adelete(self, *args: Any, **kwargs: Any) -> int:
        """Async :meth:`delete`."""
        return await asyncio.to_thread(self.delete, *args, **kwargs)

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        await asyncio.to_thread(self.clear)

    async def acount(self) -> int:
        """Async :meth:`count`."""
        return await asyncio.to_thread(self.count)

    async def aapply_merges(self, plan: MergePlan) -> list[str]:
        """Async :meth:`apply_merges`."""
        return await asyncio.to_thread(self.apply_merges, plan)

    async def asleep(self, **kwargs: Any) -> SleepReport:
        """Async :meth:`sleep` (runs in a worker thread)."""
        kwargs.pop("background", None)
        return await asyncio.to_thread(self.sleep, **kwargs)  # type: ignore[arg-type]

    async def asupersede(self, old_id: str, new_id: str, explanation: str = "") -> None:
        """Async :meth:`supersede`."""
        await asyncio.to_thread(self.supersede, old_id, new_id, explanation)

    async def amark_contradiction(self, cell_a: str, cell_b: str, explanation: str) -> None:
        """Async :meth:`mark_contradiction`."""
        await asyncio.to_thread(self.mark_contradiction, cell_a, cell_b, explanation)


def _sleep_config(config: SleepConfig | None, settings: Mapping[str, Any]) -> SleepConfig:
    base = config or SleepConfig()
    if not settings:
        return base
    known = set(SleepConfig.__dataclass_fields__)
    unknown = sorted(set(settings) - known)
    if unknown:
        raise InvalidInputError(
            f"unknown sleep setting(s): {', '.join(unknown)}",
            hint=f"use one of: {', '.join(sorted(known))}",
        )
    return replace(base, **settings)
