"""MagneticStore: LangGraph's ``BaseStore`` (long-term memory of agents) on the hierarchy."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from magnetic_core import MagneticMemory
from magnetic_core._store.persistence import open_client
from magnetic_core.config import MemoryConfig
from magnetic_core.embeddings import validate_vectors
from magnetic_core.errors import (
    ClosedError,
    EmbedderMismatchError,
    EmbeddingError,
    InvalidInputError,
)
from magnetic_langchain.embeddings import embedder_name
from magnetic_langchain.store.embedding import resolve_index
from magnetic_langchain.store.namespaces import (
    NamespaceRegistry,
    StampEmbedder,
    check_prefix,
    engine_name,
    select_namespaces,
)
from magnetic_langchain.store.reads import Reader
from magnetic_langchain.store.records import (
    CellBatch,
    field_paths,
    placeholder_vector,
    texts_to_index,
)
from magnetic_langchain.store.space import Space
from magnetic_langchain.store.sweeper import Sweeper

__all__ = ["MagneticStore"]


class MagneticStore(BaseStore):
    """LangGraph's long-term memory store on MagneticStorage's concept hierarchy.

    Each LangGraph namespace (a tuple of strings) is its own engine namespace: its own Chroma
    collections and concept groups, so tenants are isolated in storage. Items are JSON dicts
    found by key, by filter (exact values, nested keys, ``$eq $ne $gt $gte $lt $lte``), and,
    with an ``index``, by meaning. Items can expire (``ttl`` in minutes).

    Args:
        path: directory of the embedded Chroma store (ignored when ``client`` is given).
        client: any chromadb client (persistent, HTTP, ephemeral); not closed by
            :meth:`close`.
        index: LangGraph's ``IndexConfig``: ``dims``, ``embed`` (an ``Embeddings``, a sync or
            async function of a list of texts, or ``"provider:model"``) and ``fields`` (JSON
            paths to embed, default ``["$"]``, the whole value). Without it, ``search`` lists
            and filters only.
        ttl: LangGraph's ``TTLConfig`` (``default_ttl``, ``refresh_on_read``,
            ``sweep_interval_minutes``, ``omit_expired``). Unlike LangGraph's default,
            ``omit_expired`` defaults to True: an expired item is never returned, even
            before a sweep deletes it.
        prefix: prefix of this store's engine namespaces (several stores can share one
            Chroma database under different prefixes).
        config: engine settings for every namespace.
        include_groups: return :class:`MagneticSearchItem` results that name the concept
            group (``group_id``, ``group_label``) of each match.
        hybrid: rank by the engine's fused score (cosine plus entity and word matches of
            the query) instead of the cosine alone. ``score`` is the ranking score either
            way, so it always decreases down the list.
        clock: the time source of TTLs (UNIX seconds), replaceable in tests.

    Example:
        >>> import tempfile
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> embed = DeterministicFakeEmbedding(size=16)
        >>> store = MagneticStore(
        ...     tempfile.mkdtemp(), index={"dims": 16, "embed": embed, "fields": ["text"]}
        ... )
        >>> store.put(("users", "alice"), "food", {"text": "likes ramen", "kind": "fact"})
        >>> store.get(("users", "alice"), "food").value
        {'text': 'likes ramen', 'kind': 'fact'}
        >>> [i.key for i in store.search(("users",), query="likes ramen", filter={"kind": "fact"})]
        ['food']
        >>> store.list_namespaces(prefix=("users",))
        [('users', 'alice')]
        >>> store.close()
    """

    supports_ttl: bool = True

    def __init__(
        self,
        path: str = "./magnetic_store",
        *,
        client: Any = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        prefix: str = "lg",
        config: MemoryConfig | None = None,
        include_groups: bool = False,
        hybrid: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.index_config: dict[str, Any] | None = None
        self.embeddings = None
        dims = 1
        if index is not None:
            self.index_config, self.embeddings, dims = resolve_index(index)
        self._fields = field_paths(self.index_config.get("fields")) if self.index_config else None
        self._dims = dims
        self._stamp = (
            f"langgraph-store/{embedder_name(self.embeddings)}"
            if self.embeddings is not None
            else "langgraph-store/unindexed"
        )
        self._placeholder = placeholder_vector(dims).astype(np.float32)
        self.ttl_config: TTLConfig | None = dict(ttl) if ttl else None  # type: ignore[assignment]
        self._omit = bool((ttl or {}).get("omit_expired", True))
        self._prefix = check_prefix(prefix)
        self._config = config
        self.include_groups = include_groups
        self.hybrid = hybrid
        self._clock = clock
        self._owns_client = client is None
        self._client = client if client is not None else open_client(path)
        self._lock = threading.RLock()
        self._spaces: dict[tuple[str, ...], Space] = {}
        self._closed = False
        self._registry = NamespaceRegistry(self._client, self._prefix)
        self._sweeper = Sweeper(self.sweep_ttl)
        interval = (ttl or {}).get("sweep_interval_minutes")
        if interval:
            self.start_ttl_sweeper(interval)

    # -- lifecycle -------------------------------------------------------------------
    def close(self) -> None:
        """Stop the TTL sweeper and release every namespace (and the client it opened)."""
        self._sweeper.stop()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for space in self._spaces.values():
                space.memory.close()
            self._registry.close()
        if self._owns_client and hasattr(self._client, "close"):
            self._client.close()

    def __enter__(self) -> MagneticStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> None:
        """Delete expired items every ``sweep_interval_minutes`` in a background thread."""
        minutes = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes")
        if not minutes or minutes <= 0:
            raise InvalidInputError(
                f"the sweep interval must be a positive number of minutes, got {minutes!r}"
            )
        self._sweeper.start(60.0 * float(minutes))

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the background sweeper; True once it has stopped."""
        return self._sweeper.stop(timeout)

    def sweep_ttl(self) -> int:
        """Delete every expired item now; returns how many were deleted."""
        with self._lock:
            self._check_open()
            now = self._clock()
            deleted = 0
            for ns in self._registry.namespaces:
                space = self._space(ns)
                if space is not None and space.expiry:
                    deleted += space.sweep(now)
                    self._forget_if_empty(space)
            return deleted

    async def asweep_ttl(self) -> int:
        """Async :meth:`sweep_ttl`."""
        return await asyncio.to_thread(self.sweep_ttl)

    # -- batches ---------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` (get, search, list namespaces, put/delete); results in order.

        Reads see the store as it was before the batch; puts are applied after them, the
        last put of a key winning, as in LangGraph's stores.
        """
        ops, puts, texts, queries = self._prepare(ops)
        docs = self.embeddings.embed_documents(texts) if texts else []  # type: ignore[union-attr]
        vectors = {q: self.embeddings.embed_query(q) for q in queries}  # type: ignore[union-attr]
        return self._run(ops, puts, docs, vectors)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch`: embeds with the model's async methods, stores in a thread."""
        ops, puts, texts, queries = self._prepare(ops)
        emb = self.embeddings
        docs = await emb.aembed_documents(texts) if texts else []  # type: ignore[union-attr]
        found = await asyncio.gather(*(emb.aembed_query(q) for q in queries))  # type: ignore[union-attr]
        return await asyncio.to_thread(self._run, ops, puts, docs, dict(zip(queries, found)))

    def _prepare(
        self, ops: Iterable[Op]
    ) -> tuple[list[Op], dict[tuple[tuple[str, ...], str], PutOp], list[str], list[str]]:
        ops = list(ops)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, PutOp):
                self._check_put(op)
                puts[(op.namespace, op.key)] = op
            elif not isinstance(op, (GetOp, SearchOp, ListNamespacesOp)):
                raise InvalidInputError(f"unknown store operation {type(op).__name__}")
        texts = [t for op in puts.values() for _, t in texts_to_index(op, self._fields)]
        queries: list[str] = []
        if self.embeddings is not None:
            queries = list(
                dict.fromkeys(op.query for op in ops if isinstance(op, SearchOp) and op.query)
            )
        return ops, puts, texts, queries

    @staticmethod
    def _check_put(op: PutOp) -> None:
        if not op.namespace:
            raise InvalidInputError("a put needs a non-empty namespace", hint='e.g. ("memories",)')
        if not isinstance(op.key, str) or not op.key:
            raise InvalidInputError(f"item keys must be non-empty strings, got {op.key!r}")
        if op.value is not None and not isinstance(op.value, Mapping):
            raise InvalidInputError(
                f"item values must be dicts, got {type(op.value).__name__}",
                hint='wrap it: {"text": ...}',
            )
        if op.ttl is not None and (isinstance(op.ttl, bool) or not op.ttl > 0):
            raise InvalidInputError(f"ttl must be a positive number of minutes, got {op.ttl!r}")

    def _run(
        self,
        ops: list[Op],
        puts: dict[tuple[tuple[str, ...], str], PutOp],
        docs: list[list[float]],
        queries: dict[str, list[float]],
    ) -> list[Result]:
        doc_vecs = self._checked_vectors(docs, "documents")
        query_vecs = {q: self._checked_vectors([v], "query")[0] for q, v in queries.items()}
        with self._lock:
            self._check_open()
            reader = Reader(self, self._clock())
            results: list[Result] = []
            for op in ops:
                results.append(self._read(reader, op, query_vecs))
            reader.refresh()
            if puts:
                self._write(puts, doc_vecs)
            return results

    def _checked_vectors(self, vectors: list[list[float]], what: str) -> np.ndarray:
        if not len(vectors):
            return np.empty((0, self._dims), np.float32)
        try:
            return validate_vectors(vectors, self._dims, what=f"{what} vector")
        except InvalidInputError as e:
            raise EmbeddingError(
                f"the index's embedding model returned unusable {what} vectors: {e.message}",
                hint="check index['dims'] and the model; nothing was stored",
            ) from e

    def _read(self, reader: Reader, op: Op, query_vecs: dict[str, np.ndarray]) -> Result:
        if isinstance(op, GetOp):
            return reader.get(op)
        if isinstance(op, SearchOp):
            return reader.search(op, query_vecs.get(op.query) if op.query else None)
        if isinstance(op, ListNamespacesOp):
            namespaces = self._registry.namespaces
            if self._omit:
                namespaces = [ns for ns in namespaces if reader.has_live(ns)]
            return select_namespaces(
                namespaces, op.match_conditions, op.max_depth, op.limit, op.offset
            )
        return None

    def _write(self, puts: dict[tuple[tuple[str, ...], str], PutOp], vectors: np.ndarray) -> None:
        now = round(self._clock(), 6)
        by_space: dict[tuple[str, ...], tuple[CellBatch, list[str]]] = defaultdict(
            lambda: (CellBatch.empty(), [])
        )
        row = 0
        for (ns, key), op in puts.items():
            batch, deleted = by_space[ns]
            if op.value is None:
                deleted.append(key)
                continue
            texts = texts_to_index(op, self._fields)
            vecs = list(vectors[row : row + len(texts)])
            row += len(texts)
            exp = None if op.ttl is None else now + 60.0 * float(op.ttl)
            batch.add_item(op, texts, vecs, self._placeholder, now=now, expires_at=exp)
        self._registry.add(ns for ns, (batch, _) in by_space.items() if batch.ids)
        for ns, (batch, deleted) in by_space.items():
            space = self._space(ns)
            if space is not None:
                space.write(batch, deleted)
                self._forget_if_empty(space)

    # -- namespaces ------------------------------------------------------------------
    def _space(self, namespace: tuple[str, ...]) -> Space | None:
        """The open namespace, opened on first use; None when it holds no items."""
        space = self._spaces.get(namespace)
        if space is None and namespace in self._registry.namespaces:
            try:
                memory = MagneticMemory(
                    client=self._client,
                    namespace=engine_name(self._prefix, namespace),
                    embedder=StampEmbedder(self._stamp, self._dims),
                    config=self._config,
                )
            except EmbedderMismatchError as e:
                raise EmbedderMismatchError(
                    f"namespace {namespace!r} was stored with another index: {e.message}",
                    hint="open the MagneticStore with the index config it was written with",
                ) from e
            space = self._spaces[namespace] = Space(namespace, memory)
        return space

    def _spaces_under(self, prefix: tuple[str, ...]) -> list[Space]:
        n = len(prefix)
        found = (self._space(ns) for ns in self._registry.namespaces if ns[:n] == prefix)
        return [s for s in found if s is not None]

    def _forget_if_empty(self, space: Space) -> None:
        if space.size == 0:
            self._registry.remove([space.namespace])
            self._spaces.pop(space.namespace, None)
            space.memory.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("this MagneticStore was closed", hint="open a new one")
