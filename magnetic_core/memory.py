"""MagneticMemory: the facade over the hierarchy, its search, and its Chroma persistence."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from magnetic_core.catalog import Catalog, CellRecord
from magnetic_core.clustering import calibrate_threshold, normalize, plan_merge_pairs
from magnetic_core.codec import validate_metadata
from magnetic_core.concurrency import RWLock
from magnetic_core.config import MemoryConfig
from magnetic_core.embeddings import Embedder, default_embedder, embed_checked, validate_vectors
from magnetic_core.entities import extract_entities
from magnetic_core.errors import (
    ClosedError,
    DuplicateIdError,
    EmptyTextError,
    InvalidInputError,
    PersistenceError,
)
from magnetic_core.filters import Predicate, compile_filter
from magnetic_core.index import Group, HierIndex
from magnetic_core.lexical import LexicalIndex
from magnetic_core.persistence import ChromaStore, encode_row, open_client
from magnetic_core.search import SearchPlan, run_search
from magnetic_core.types import Cell, GroupInfo, Hit, MergePlan, Route, Stats

__all__ = ["MagneticMemory"]

logger = logging.getLogger(__name__)


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
        return self._threshold

    @property
    def client(self) -> Any:
        """The chromadb client underneath."""
        return self._client

    # -- lifecycle -------------------------------------------------------------------
    def _load(self) -> None:
        self._index = HierIndex(self.embedder.dim, self.config.max_group_size)
        self._catalog = Catalog()
        for row in self._store.load():
            self._index.place(row.id, normalize(row.vector[None, :])[0], row.group_id, row.seq)
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
        settings = self._store.settings()
        self._calibrated_n = int(settings.get("mag_calibrated_n", 0))
        if self.config.join_threshold is not None:
            self._threshold, self._threshold_source = self.config.join_threshold, "configured"
        elif "mag_threshold" in settings:
            self._threshold, self._threshold_source = float(settings["mag_threshold"]), "calibrated"
        else:
            self._threshold = self.config.provisional_threshold
            self._threshold_source = "provisional"
        # The groups collection is only a cache: rewrite entries that disagree with the cells.
        stored = self._store.group_sizes()
        self._persisted: dict[str, int] = {
            gid: g.version for gid, g in self._index.groups.items() if stored.get(gid) == g.n
        }
        self._persisted.update({gid: -1 for gid in stored.keys() - self._index.groups.keys()})
        self._sync_groups()

    def close(self) -> None:
        """Release the Chroma client (only when this memory opened it). Idempotent."""
        if self._closed:
            return
        self._closed = True
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
            texts: non-empty strings.
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
        texts, metas, ids = self._validate_batch(texts, metadatas, ids)
        if not texts:
            return []
        if vectors is not None:
            vecs = validate_vectors(vectors, self.dim)
            if vecs.shape[0] != len(texts):
                raise InvalidInputError(
                    f"got {vecs.shape[0]} vectors for {len(texts)} texts",
                    hint="pass one vector per text",
                )
        else:
            vecs = embed_checked(self.embedder, texts)
        vecs = normalize(vecs)
        entities = [tuple(extract_entities(t)) for t in texts]
        with self._lock.write():
            self._check_open()
            self._write(ids, vecs, texts, metas, entities)
        return list(ids)

    def _validate_batch(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any] | None] | None,
        ids: Sequence[str] | None,
    ) -> tuple[list[str], list[dict[str, Any]], list[str]]:
        if isinstance(texts, str):
            raise InvalidInputError(
                "texts must be a list of strings, got one string", hint="wrap it: [text]"
            )
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InvalidInputError(f"text {i} is {type(text).__name__}, not str")
            if not text.strip():
                raise EmptyTextError(f"text {i} is empty", hint="store only non-empty texts")
        if metadatas is not None and len(metadatas) != len(texts):
            raise InvalidInputError(f"got {len(metadatas)} metadatas for {len(texts)} texts")
        metas = [validate_metadata(m, i) for i, m in enumerate(metadatas or [None] * len(texts))]
        if ids is None:
            ids = [str(uuid.uuid4()) for _ in texts]
        ids = list(ids)
        if len(ids) != len(texts):
            raise InvalidInputError(f"got {len(ids)} ids for {len(texts)} texts")
        for i, cid in enumerate(ids):
            if not isinstance(cid, str) or not cid:
                raise InvalidInputError(f"id {i} must be a non-empty string, got {cid!r}")
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            dup = next(c for c in ids if c in seen or seen.add(c))  # type: ignore[func-returns-value]
            raise DuplicateIdError(f"id {dup!r} appears twice", hint="give each text its own id")
        return texts, metas, ids

    def _write(
        self,
        ids: list[str],
        vecs: np.ndarray,
        texts: list[str],
        metas: list[dict[str, Any]],
        entities: list[tuple[str, ...]],
    ) -> None:
        now = time.time()
        records = self._catalog.records
        created = [records[c].created_at if c in records else now for c in ids]
        try:
            self._assign(ids, vecs)
            for i, cid in enumerate(ids):
                self._catalog.put(cid, CellRecord(texts[i], metas[i], entities[i], created[i], now))
            self._persist_cells(set(ids))
        except PersistenceError:
            self._load()
            raise

    def _assign(self, ids: list[str], vecs: np.ndarray) -> None:
        """Assign in order, recalibrating at each checkpoint the count reaches on the way.

        Checkpoints are fixed counts (32, 64, ... up to ``calibration_size``), so adding a
        batch gives the same hierarchy as adding its cells one at a time.
        """
        index, cfg = self._index, self.config
        while ids:
            target = self._next_checkpoint()
            if target is None:
                index.assign(ids, vecs, self._threshold, cfg.chunk_size)
                return
            new = np.fromiter((c not in index.loc for c in ids), dtype=bool, count=len(ids))
            at = np.flatnonzero(len(index) + np.cumsum(new) >= target)
            if not at.size:
                index.assign(ids, vecs, self._threshold, cfg.chunk_size)
                return
            cut = int(at[0]) + 1
            index.assign(ids[:cut], vecs[:cut], self._threshold, cfg.chunk_size)
            self._calibrate()
            ids, vecs = ids[cut:], vecs[cut:]

    def _next_checkpoint(self) -> int | None:
        if self._threshold_source == "configured":
            return None
        size, point = self.config.calibration_size, min(32, self.config.calibration_size)
        while point <= self._calibrated_n and point < size:
            point = min(point * 2, size)
        return point if point > self._calibrated_n else None

    def _calibrate(self) -> None:
        order = list(self._index.loc)
        sample = np.stack([self._index.vector(c) for c in order])
        threshold = calibrate_threshold(sample, self.config.calibration_percentile)
        logger.info("calibrated join threshold %.3f from %d cells", threshold, len(order))
        self._store.save_settings(mag_threshold=threshold, mag_calibrated_n=len(order))
        self._threshold, self._threshold_source = threshold, "calibrated"
        self._calibrated_n = len(order)
        self._index.regroup(threshold, self.config.chunk_size)

    def _persist_cells(self, ids: set[str]) -> None:
        """Write the given cells, the group id of every cell that moved, then the group cache.

        Cells that only changed group (splits, merges, regrouping) get a metadata-only update,
        which does not make Chroma re-index their unchanged vectors.
        """
        live = self._index.loc.keys()
        moved = (self._index.take_moved() - ids) & live
        ids = ids & live
        for chosen, full in ((ids, True), (moved, False)):
            order = sorted(chosen, key=self._index.seq.__getitem__)
            if not order:
                continue
            records = self._catalog.records
            rows = []
            for cid in order:
                r = records[cid]
                rows.append(
                    encode_row(
                        group_id=self._index.loc[cid].gid,
                        metadata=r.metadata,
                        entities=r.entities,
                        created_at=r.created_at,
                        updated_at=r.updated_at,
                        seq=self._index.seq[cid],
                        contradictions=r.contradictions,
                    )
                )
            if full:
                vectors = np.stack([self._index.vector(c) for c in order])
                self._store.write_cells(order, vectors, [records[c].text for c in order], rows)
            else:
                self._store.relocate_cells(order, rows)
        self._sync_groups()

    def _sync_groups(self) -> None:
        groups = self._index.groups
        changed = [g for gid, g in groups.items() if self._persisted.get(gid) != g.version]
        gone = [gid for gid in self._persisted if gid not in groups]
        if changed:
            self._store.write_groups(
                [g.gid for g in changed],
                np.stack([self._index.centroids[g.slot] for g in changed]),
                [g.n for g in changed],
            )
        if gone:
            self._store.delete_groups(gone)
        for gid in gone:
            del self._persisted[gid]
            self._catalog.forget_label(gid)
        for g in changed:
            self._persisted[g.gid] = g.version

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
        if isinstance(ids, str):
            raise InvalidInputError("ids must be a list of strings", hint="wrap it: [id]")
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
                self._persist_cells(set())
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
            now = time.time()
            for me, other in ((cell_a, cell_b), (cell_b, cell_a)):
                links = records[me].contradictions
                if not any(link["other"] == other for link in links):
                    links.append({"other": other, "explanation": explanation, "at": now})
            try:
                self._persist_cells({cell_a, cell_b})
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
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise InvalidInputError(f"k must be a non-negative integer, got {k!r}")
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
        )
        with self._lock.read():
            found = run_search(self._index, self._catalog, plan)
            return [
                Hit(
                    cell=self._cell(c.id),
                    score=c.score,
                    rank_score=c.rank_score,
                    group_id=c.group.gid,
                    group_label=self._label(c.group)[0],
                    route=Route(
                        stages=c.stages,
                        centroid_similarity=c.centroid_similarity,
                        boost=c.boost,
                        lexical=c.lexical,
                        fallback_ran=c.fallback_ran,
                        probed_groups=c.probed_groups,
                    )
                    if explain
                    else None,
                )
                for c in found
            ]

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
        if isinstance(ids, str):
            raise InvalidInputError("ids must be a list of strings", hint="wrap it: [id]")
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
            return np.stack([self._index.vector(c) for c in ids])

    def count(self) -> int:
        """Number of cells."""
        self._check_open()
        return len(self._index)

    def __len__(self) -> int:
        return self.count()

    def _cell(self, cid: str) -> Cell:
        r = self._catalog.records[cid]
        return Cell(
            id=cid,
            text=r.text,
            metadata=dict(r.metadata),
            group_id=self._index.loc[cid].gid,
            entities=r.entities,
            created_at=r.created_at,
            updated_at=r.updated_at,
            contradictions=tuple(dict(link) for link in r.contradictions),
        )

    def _label(self, group: Group) -> tuple[str, tuple[str, ...]]:
        return self._catalog.label(group.gid, group.version, group.ids)

    # -- the hierarchy ---------------------------------------------------------------
    def groups(self) -> list[GroupInfo]:
        """Every group, largest first."""
        self._check_open()
        with self._lock.read():
            infos = [self._group_info(g) for g in self._index.slot_groups]
        return sorted(infos, key=lambda g: (-g.size, g.id))

    def group(self, group_id: str) -> GroupInfo:
        """One group by id."""
        self._check_open()
        with self._lock.read():
            group = self._index.groups.get(group_id)
            if group is None:
                raise InvalidInputError(f"no group with id {group_id!r}")
            return self._group_info(group)

    def _group_info(self, group: Group) -> GroupInfo:
        sims = group.view @ self._index.centroids[group.slot]
        order = np.argsort(-sims, kind="stable")
        label, entities = self._label(group)
        return GroupInfo(
            id=group.gid,
            label=label,
            size=group.n,
            entities=entities,
            cell_ids=tuple(group.ids[i] for i in order),
            cohesion=float(sims.mean()),
        )

    def stats(self) -> Stats:
        """Counts and health metrics of the hierarchy."""
        self._check_open()
        with self._lock.read():
            groups = self._index.slot_groups
            sizes = np.array([g.n for g in groups]) if groups else np.zeros(0)
            cohesion = sum(float((g.view @ self._index.centroids[g.slot]).sum()) for g in groups)
            n = len(self._index)
            return Stats(
                count=n,
                groups=len(groups),
                singleton_groups=int((sizes == 1).sum()),
                largest_group=int(sizes.max()) if groups else 0,
                mean_group_size=float(sizes.mean()) if groups else 0.0,
                mean_cohesion=cohesion / n if n else 0.0,
                join_threshold=self._threshold,
                threshold_source=self._threshold_source,
                embedder=self.embedder.name,
                dim=self.dim,
                namespace=self.namespace,
                entities=len(self._catalog.entity_cells),
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
            groups = self._index.slot_groups
            sizes = np.array([g.n for g in groups])
            pairs = plan_merge_pairs(
                self._index.centroids, threshold, sizes, self.config.max_group_size
            )
            named = tuple(
                (groups[i].gid, groups[j].gid, sim)
                if groups[i].n >= groups[j].n
                else (groups[j].gid, groups[i].gid, sim)
                for i, j, sim in pairs
            )
        return MergePlan(pairs=named, threshold=threshold)

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
                self._persist_cells(set())
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
