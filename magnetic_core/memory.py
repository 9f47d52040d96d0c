"""MagneticMemory: the facade over the hierarchy, its search, and its Chroma persistence.

The facade validates and delegates. Its parts read as the pipeline:

- this module: the read path (``search``, ``get``, the hierarchy's views); a search is one
  :class:`~magnetic_core._search.search.SearchPlan` run by
  :func:`~magnetic_core._search.selection.select_hits` (a query vector and nothing else:
  by :func:`~magnetic_core._search.search.plain_search` when it can; a text query with
  nothing but its vector and ``k``: by :func:`~magnetic_core._search.search.text_search`);
- :mod:`magnetic_core._store.writes`: the write path (``add``, ``delete``, links);
- :mod:`magnetic_core._store.lifecycle`: opening, reloading and closing the store;
- :mod:`magnetic_core._sleep.mode`: merges and sleep passes.

Every I/O-bound call has a typed async twin (``aadd``, ``asearch``, ...), made one way
(:func:`~magnetic_core._store.concurrency.async_twin`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from magnetic_core._search.search import SearchPlan, plain_search, text_search
from magnetic_core._search.selection import Selection, select_hits
from magnetic_core._search.views import cell_view, group_info, plain_hits, stats_view
from magnetic_core._sleep.mode import SleepMode
from magnetic_core._sleep.sleeper import Sleeper
from magnetic_core._sleep.supersession import superseded_ids
from magnetic_core._store.concurrency import async_twin
from magnetic_core._store.writes import WritePath
from magnetic_core._text.entities import query_entities
from magnetic_core._text.inputs import check_id_list, check_k
from magnetic_core._text.lexical import LexicalIndex
from magnetic_core.config import MemoryConfig
from magnetic_core.embeddings import Embedder, default_embedder, embed_checked, validate_vectors
from magnetic_core.errors import DimensionError, EmptyTextError, InvalidInputError
from magnetic_core.filters import Predicate, compile_filter
from magnetic_core.types import Cell, GroupInfo, Hit, Stats
from magnetic_core.validators import check_int, check_number

__all__ = ["MagneticMemory"]


class MagneticMemory(WritePath, SleepMode):
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
        self.embedder = embedder if embedder is not None else default_embedder()
        # The plan of the last plain vector query: (config, k, plan), for the next one; and
        # of the last plain text query, its text's entities and words left out.
        self._vector_plan: tuple[MemoryConfig, int, SearchPlan] | None = None
        self._text_plan: tuple[MemoryConfig, int, SearchPlan] | None = None
        self._sleeper = Sleeper(self)
        self._open_store(path, namespace, client)

    # -- reading ---------------------------------------------------------------------
    def embed_query(self, text: str) -> np.ndarray:
        """The embedder's unit query vector for ``text``."""
        if not isinstance(text, str) or not text.strip():
            raise EmptyTextError("the query is empty", hint="pass a non-empty query")
        return embed_checked(self.embedder, [text], query=True)[0]  # unit rows already

    def search(
        self,
        query: str | None = None,
        k: int = 10,
        filter: Mapping[str, Any] | Predicate | None = None,
        explain: bool = False,
        *,
        vector: Any = None,
        ids: Sequence[str] | None = None,
        expand: int = 0,
        mmr_lambda: float | None = None,
        fetch_k: int | None = None,
        n_probe: int | None = None,
        entity_boost: float | None = None,
        lexical_weight: float | None = None,
        context_weight: float | None = None,
        session_weight: float | None = None,
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
            ids: search only among these cells, scored by exact cosine (missing ids are
                skipped; ``rank_score`` equals ``score``): for restrictions a ``where``
                cannot express, such as given node ids or a test on the text.
            expand: after each hit, up to this many other cells of its group that pass
                the filter, closest to the group centroid first, each scored by its own
                cosine and marked with ``Hit.expanded_from``; no cell comes twice.
            mmr_lambda: re-rank by maximal marginal relevance with this relevance weight
                in ``[0, 1]`` (1: relevance only, 0: diversity only); the ``k`` hits are
                picked from the best ``fetch_k`` candidates, in pick order.
            fetch_k: candidates MMR picks from (default ``4 * k``; at least ``k``).
            n_probe: groups to probe; given here, exactly this many (default: the config's
                ``n_probe``, widened to hold at least ``probe_cells`` cells).
            entity_boost: boost for cells holding a query entity (default from the config).
            lexical_weight: weight of the BM25 score of the query's words (default from the
                config; needs ``query`` text, 0 turns the lexical stage off).
            context_weight: share of the best neighbouring turn's score a cell gains when
                its cells form conversation threads (metadata ``session_id``, ordered by
                ``turn`` or by the order of adds; default from the config; needs ``query``
                text, 0 turns it off).
            session_weight: share of the best score in its thread a cell gains (same
                conditions as ``context_weight``).
            current_only: leave out cells superseded by a newer one.

        Returns:
            Hits, best first.
        """
        # Long for its documented keyword arguments only; the body is a plain vector or
        # text query's own path, then three steps.
        self._check_open()
        check_k(k)
        if _only_k(
            filter, explain, ids, expand, mmr_lambda, fetch_k, n_probe, entity_boost,
            lexical_weight, context_weight, session_weight, current_only,
        ):  # fmt: skip
            if query is None and vector is not None:
                hits = self._vector_hits(self._query_vector(None, vector), k)
                if hits is not None:
                    return hits
            elif query and isinstance(query, str):
                return self._text_hits(query, self._query_vector(query, vector), k)
        check_int(n_probe, "n_probe", low=1, optional=True)
        selection = _selection(k, ids, expand, mmr_lambda, fetch_k)
        predicate = compile_filter(filter)  # every argument checked before anything embeds
        plan = self._plan(
            query,
            self._query_vector(query, vector),
            k,
            predicate,
            n_probe=n_probe,
            entity_boost=entity_boost,
            lexical_weight=lexical_weight,
            context_weight=_thread_weight(query, "context_weight", context_weight, self.config),
            session_weight=_thread_weight(query, "session_weight", session_weight, self.config),
            routes=explain,
        )
        with self._lock.read():
            if current_only and self._superseded:
                exclude = superseded_ids(self._catalog.records, self._superseded)
                plan = replace(plan, exclude=exclude)
            return select_hits(
                self._index,
                self._catalog,
                plan,
                selection,
                explain,
                self._scorer,
                self._group_label,
            )

    def _vector_hits(self, q: np.ndarray, k: int) -> list[Hit] | None:
        """The hits of a query vector and nothing else, when one compiled call finds them
        (:func:`~magnetic_core._search.search.plain_search`); None leaves the query to the
        staged search."""
        last = self._vector_plan
        if last is not None and last[0] is self.config and last[1] == k:
            plan = last[2].for_vector(q)
        else:
            plan = self._plan(
                None, q, k, None, n_probe=None, entity_boost=None, lexical_weight=None,
                context_weight=0.0, session_weight=0.0, routes=False,
            )  # fmt: skip
            self._vector_plan = (self.config, k, plan)
        with self._lock.read():
            found = plain_search(self._index, self._catalog, plan, self._scorer)
            if found is None:
                return None
            ids, groups, scores, _ = found
            return plain_hits(self._catalog, ids, groups, scores, self._group_label)

    def _text_hits(self, query: str, q: np.ndarray, k: int) -> list[Hit]:
        """The hits of a query text (with its vector) and ``k``, nothing else: by one
        compiled call after the entity stage when it can
        (:func:`~magnetic_core._search.search.text_search`), else by the staged search."""
        last = self._text_plan
        if last is not None and last[0] is self.config and last[1] == k:
            template = last[2]
        else:
            config = self.config
            template = self._plan(
                None, q, k, None, n_probe=None, entity_boost=None, lexical_weight=None,
                context_weight=float(config.context_weight),
                session_weight=float(config.session_weight), routes=False,
            )  # fmt: skip
            self._text_plan = (config, k, template)
        plan = template.for_text(q, query_entities(query), LexicalIndex.query_terms(query))
        with self._lock.read():
            found = text_search(self._index, self._catalog, plan, self._scorer)
            if found is not None:
                ids, groups, scores, ranked = found
                return plain_hits(self._catalog, ids, groups, scores, self._group_label, ranked)
            return select_hits(
                self._index, self._catalog, plan, _selection(k, None, 0, None, None), False,
                self._scorer, self._group_label,
            )  # fmt: skip

    def _group_label(self, gid: str, version: int, member_ids: list[str]) -> str:
        """A group's label, for a hit whose label is read after its search returned."""
        with self._lock.read():
            return self._catalog.label(gid, version, member_ids)[0]

    def _query_vector(self, query: str | None, vector: Any) -> np.ndarray:
        """The unit query vector: ``vector`` checked (once, here), else ``query`` embedded."""
        if vector is None:
            if query is None:
                raise InvalidInputError(
                    "search() needs a query or a vector", hint="pass query= or vector="
                )
            return self.embed_query(query)
        rows = validate_vectors(vector, self.dim, what="query vector")  # unit rows
        if rows.shape[0] != 1:
            raise DimensionError(
                f"search() takes one query vector, got {rows.shape[0]}",
                hint="search once per vector",
            )
        return rows[0]

    def _plan(
        self,
        query: str | None,
        q: np.ndarray,
        k: int,
        predicate: Predicate | None,
        *,
        n_probe: int | None,
        entity_boost: float | None,
        lexical_weight: float | None,
        context_weight: float,
        session_weight: float,
        routes: bool = True,
    ) -> SearchPlan:
        """The search's stages and weights: what is given, else the config's."""
        config = self.config
        return SearchPlan(
            vector=q,
            k=k,
            n_probe=n_probe or config.n_probe,
            entities=query_entities(query) if query else (),
            entity_boost=config.entity_boost if entity_boost is None else entity_boost,
            predicate=predicate,
            lexical_terms=LexicalIndex.query_terms(query) if query else (),
            lexical_weight=config.lexical_weight if lexical_weight is None else lexical_weight,
            context_weight=context_weight,
            session_weight=session_weight,
            sketch_rank=config.sketch_rank,
            rerank=config.rerank,
            min_cells=config.probe_cells if n_probe is None else 0,
            list_size=config.list_size,
            routes=routes,
        )

    def search_among(
        self, ids: Sequence[str], query: str | None = None, k: int = 10, *, vector: Any = None
    ) -> list[Hit]:
        """Exact search restricted to the cells ``ids`` (missing ids are skipped).

        For restrictions a metadata filter cannot express (given node ids, a test on the
        text): every named cell is scored by exact cosine, ``rank_score`` equals ``score``.
        """
        check_id_list(ids)
        if vector is None and query is None:
            raise InvalidInputError("search_among() needs a query or a vector")
        return self.search(query, k, vector=vector, ids=ids)

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

    # -- async twins -----------------------------------------------------------------
    asearch = async_twin(search)
    asearch_among = async_twin(search_among)
    aget = async_twin(get)
    aget_vectors = async_twin(get_vectors)
    acount = async_twin(count)
    agroups = async_twin(groups)
    agroup = async_twin(group)
    astats = async_twin(stats)
    arefresh = async_twin(WritePath.refresh)


# The selection of a search with none of ids, expand, MMR or fetch_k, by k (k up to this).
_PLAIN_SELECTIONS: dict[int, Selection] = {}
_PLAIN_SELECTIONS_K = 1024


def _selection(
    k: int,
    ids: Sequence[str] | None,
    expand: Any,
    mmr_lambda: Any,
    fetch_k: Any,
) -> Selection:
    """The validated shape of a search's result (restriction, MMR, expansion)."""
    plain_shape = ids is None and mmr_lambda is None and fetch_k is None
    if plain_shape and type(expand) is int and expand == 0 and k <= _PLAIN_SELECTIONS_K:
        # Most searches: their selection made once per k (about 3 us each time).
        plain = _PLAIN_SELECTIONS.get(k)
        if plain is None:
            plain = _PLAIN_SELECTIONS.setdefault(k, Selection(fetch_k=4 * k))
        return plain
    check_id_list(ids)
    check_int(expand, "expand")
    check_number(mmr_lambda, "mmr_lambda", low=0.0, high=1.0, optional=True)
    check_int(fetch_k, "fetch_k", low=1, optional=True)
    return Selection(
        ids=None if ids is None else tuple(ids),
        expand=expand,
        mmr_lambda=None if mmr_lambda is None else float(mmr_lambda),
        fetch_k=4 * k if fetch_k is None else fetch_k,
    )


def _only_k(
    filter: Any,
    explain: Any,
    ids: Any,
    expand: Any,
    mmr_lambda: Any,
    fetch_k: Any,
    n_probe: Any,
    entity_boost: Any,
    lexical_weight: Any,
    context_weight: Any,
    session_weight: Any,
    current_only: Any,
) -> bool:
    """Whether a search's arguments besides its query, vector and ``k`` are all left at
    their defaults (a value of another type, such as ``expand=0.0``, takes the general
    path and its checks)."""
    return (
        filter is None
        and explain is False
        and ids is None
        and type(expand) is int
        and expand == 0
        and mmr_lambda is None
        and fetch_k is None
        and n_probe is None
        and entity_boost is None
        and lexical_weight is None
        and context_weight is None
        and session_weight is None
        and current_only is False
    )


def _thread_weight(
    query: str | None, name: str, given: float | None, config: MemoryConfig
) -> float:
    """A conversation-thread weight of a search: text queries only (a vector query ranks
    exactly as it did), validated when given."""
    if given is not None:
        check_number(given, name, low=0.0, high=10.0)
    if not query:
        return 0.0
    return float(getattr(config, name) if given is None else given)
