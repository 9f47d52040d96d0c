"""MagneticMemory: the facade over the hierarchy, its search, and its Chroma persistence."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from magnetic_core.calibration import Calibration
from magnetic_core.catalog import Catalog, CellRecord
from magnetic_core.clustering import normalize
from magnetic_core.concurrency import RWLock
from magnetic_core.config import MemoryConfig
from magnetic_core.embeddings import Embedder, default_embedder, embed_checked, validate_vectors
from magnetic_core.entities import extract_entities
from magnetic_core.errors import (
    ClosedError,
    EmptyTextError,
    InvalidInputError,
    PersistenceError,
)
from magnetic_core.filters import Predicate, compile_filter
from magnetic_core.hierarchy import cell_view, group_info, hit_view, merge_plan, stats_view
from magnetic_core.index import HierIndex
from magnetic_core.inputs import check_id_list, check_k, validate_batch, validate_batch_vectors
from magnetic_core.lexical import LexicalIndex
from magnetic_core.persistence import ChromaStore, open_client
from magnetic_core.restricted import search_restricted
from magnetic_core.search import SearchPlan, run_search
from magnetic_core.types import Cell, GroupInfo, Hit, MergePlan, Stats
from magnetic_core.writeback import WriteBack

__all__ = ["MagneticMemory"]

logger = logging.getLogger(__name__)


def _now() -> float:
    # Millisecond resolution: finer digits mean nothing for a memory's timestamp.
    return round(time.time(), 3)


class MagneticMemory:
    """A hierarchical memory: cells (text + vector + metadata) nested under concept groups.

    Args:
        path: directory of the embedded Chroma store (ignored when ``client`` is given).
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
        path: str = "./magnetic_memory",
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
        try:
            self._store = ChromaStore(self._client, namespace)
            self._store.check_stamp(self.embedder.name, self.embedder.dim)
            self._load()
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
    def _load(self) -> None:
        """Rebuild the in-memory index from the cells collection (the source of truth)."""
        self._index = HierIndex(self.embedder.dim, self.config.max_group_size)
        self._catalog = Catalog()
        for row in self._store.load():
            self._index.place(row.id, row.vector, row.group_id, row.seq)
            self._catalog.put(
                row.id,
                CellRecord(
                    text=row.text,
                    metadata=row.metadata,
                    entities=row.entities,
                    created_at=row.created_at,
                    updated_at=row.updated_at,
                    contradictions=list(row.contradictions),
                ),
            )
        self._index.finish_placing()
        self._calibration = Calibration(self.config, self._store.settings())
        self._writeback = WriteBack(self._store, self._index, self._catalog)

    def close(self) -> None:
        """Update the stored group cache and release the Chroma client. Idempotent.

        Cells are written by every call that changes them; only the groups collection (a
        cache of centroids and sizes, repaired on open if it is stale) is brought up to date
        here. The client is closed only when this memory opened it.
        """
        if self._closed:
            return
        with self._lock.write():
            self._closed = True
            writeback = getattr(self, "_writeback", None)  # absent when opening failed
            try:
                if writeback is not None:
                    writeback.groups()
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
        texts, metas, ids = validate_batch(texts, metadatas, ids, allow_empty=vectors is not None)
        if not texts:
            return []
        if vectors is not None:
            vecs = validate_batch_vectors(vectors, len(texts), self.dim)
        else:
            vecs = embed_checked(self.embedder, texts)
        vecs = normalize(vecs)
        entities = [tuple(extract_entities(t)) for t in texts]
        with self._lock.write():
            self._check_open()
            self._write(ids, vecs, texts, metas, entities)
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
        try:
            self._calibration.assign(self._index, ids, vecs, self._store.save_settings)
            for i, cid in enumerate(ids):
                self._catalog.put(cid, CellRecord(texts[i], metas[i], entities[i], created[i], now))
            self._writeback.cells(ids)
        except PersistenceError:
            self._load()
            raise

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
        with self._lock.write():
            records = self._catalog.records
            pool = records if ids is None else ids
            targets = list(dict.fromkeys(c for c in pool if c in records))
            if predicate is not None:
                targets = [c for c in targets if predicate(records[c].metadata)]
            if not targets:
                return 0
            try:
                self._store.delete_cells(targets)
                for cid in targets:
                    self._index.remove(cid)
                    self._catalog.drop(cid)
                self._writeback.cells()
            except PersistenceError:
                self._load()
                raise
            return len(targets)

    def clear(self) -> None:
        """Delete every cell and group of this namespace (the embedder stamp stays)."""
        self._check_open()
        with self._lock.write():
            try:
                self._store.clear()
            finally:
                self._load()

    def mark_contradiction(self, cell_a: str, cell_b: str, explanation: str) -> None:
        """Record that two cells contradict each other; both are kept and linked."""
        self._check_open()
        if cell_a == cell_b:
            raise InvalidInputError("a cell cannot contradict itself")
        if not explanation or not explanation.strip():
            raise InvalidInputError("an explanation is required")
        with self._lock.write():
            records = self._catalog.records
            for cid in (cell_a, cell_b):
                if cid not in records:
                    raise InvalidInputError(f"no cell with id {cid!r}")
            now = _now()
            for me, other in ((cell_a, cell_b), (cell_b, cell_a)):
                links = records[me].contradictions
                if not any(link["other"] == other for link in links):
                    links.append({"other": other, "explanation": explanation, "at": now})
            try:
                self._writeback.cells([cell_a, cell_b])
            except PersistenceError:
                self._load()
                raise

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
            found = run_search(self._index, self._catalog, plan)
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
        with self._lock.write():
            groups = self._index.groups
            try:
                for keep, absorb, _ in plan.pairs:
                    if keep in groups and absorb in groups and keep != absorb:
                        self._index.merge(groups[keep], groups[absorb])
                        kept.append(keep)
                self._writeback.cells()
                self._writeback.groups()
            except PersistenceError:
                self._load()
                raise
        return kept

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

    async def amark_contradiction(self, cell_a: str, cell_b: str, explanation: str) -> None:
        """Async :meth:`mark_contradiction`."""
        await asyncio.to_thread(self.mark_contradiction, cell_a, cell_b, explanation)
