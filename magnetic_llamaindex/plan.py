"""Validate a LlamaIndex ``VectorStoreQuery`` (and its keyword arguments) into a query plan."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode

from magnetic_core.errors import FilterError, InvalidInputError
from magnetic_core.filters import Predicate, compile_filter
from magnetic_core.validators import check_int, check_number
from magnetic_llamaindex.filters import to_where
from magnetic_llamaindex.nodes import REF_DOC_ID
from magnetic_llamaindex.ranking import DEFAULT_MMR_THRESHOLD, check_mmr_threshold

__all__ = ["QUERY_KWARGS", "QueryPlan", "check_count", "id_list", "plan_query"]

DEFAULT_MMR_PREFETCH_FACTOR = 4.0
SUPPORTED_MODES = (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.MMR)
QUERY_KWARGS = frozenset(
    {"where", "n_probe", "mmr_threshold", "mmr_prefetch_k", "mmr_prefetch_factor"}
)
"""Keyword arguments ``MagneticVectorStore.query`` accepts beside the query."""


@dataclass(frozen=True)
class QueryPlan:
    """One validated query.

    Attributes:
        vector: the query embedding (checked and normalised by the core's search); None
            for a filter-only query (no embedding and no text: the first ``k`` matching
            nodes, oldest first, as Chroma answers it).
        k: how many results to return.
        predicate: the metadata test every result passes (filters, ``where``, ``doc_ids``).
        node_ids: restrict the search to these nodes (exact scoring), or None for all.
        mmr: whether to re-rank by maximal marginal relevance.
        mmr_threshold: relevance weight of MMR in ``[0, 1]``.
        fetch_k: candidates fetched before MMR (``k`` without MMR).
        n_probe: groups the engine probes (None for its default).
    """

    vector: Any
    k: int
    predicate: Predicate | None
    node_ids: list[str] | None
    mmr: bool
    mmr_threshold: float
    fetch_k: int
    n_probe: int | None


def plan_query(
    query: VectorStoreQuery,
    kwargs: Mapping[str, Any],
    *,
    embed_query: Callable[[str], np.ndarray],
) -> QueryPlan:
    """Validate ``query`` and the keyword arguments of ``query()``.

    An empty ``node_ids`` or ``doc_ids`` list restricts nothing, as in LlamaIndex's Chroma
    and Qdrant stores: ``VectorStoreIndex.as_retriever`` passes ``node_ids=[]`` to a store
    that keeps the text itself.

    Args:
        query: the LlamaIndex query.
        kwargs: extra keyword arguments (see :data:`QUERY_KWARGS`).
        embed_query: embeds ``query.query_str`` when the query has no embedding.

    Raises:
        InvalidInputError: an unknown keyword argument, an unsupported mode or filter, a
            filter or MMR setting given two ways, or a bad query embedding.
    """
    _check_call(query, kwargs)
    k = check_count("similarity_top_k", query.similarity_top_k, 0)
    n_probe = check_int(kwargs.get("n_probe"), "n_probe", low=1, optional=True)
    mmr = query.mode == VectorStoreQueryMode.MMR
    predicate = _predicate(query, kwargs.get("where"))
    threshold = _mmr_threshold(query, kwargs)
    fetch_k = _fetch_k(k, kwargs) if mmr else k
    vector = _query_vector(query, embed_query)  # last: every argument is checked first
    if vector is None and mmr:
        raise InvalidInputError(
            "an MMR query needs query_embedding or query_str",
            hint="MMR trades relevance to a query against diversity; without a query, "
            "use the default mode with filters",
        )
    node_ids = id_list(query.node_ids) or None
    return QueryPlan(vector, k, predicate, node_ids, mmr, threshold, fetch_k, n_probe)


def _check_call(query: VectorStoreQuery, kwargs: Mapping[str, Any]) -> None:
    """Refuse keyword arguments and query modes the store does not know."""
    unknown = sorted(set(kwargs) - QUERY_KWARGS)
    if unknown:
        raise InvalidInputError(
            f"query() got unexpected keyword arguments {unknown}",
            hint="supported: " + ", ".join(sorted(QUERY_KWARGS)),
        )
    if query.mode not in SUPPORTED_MODES:
        raise InvalidInputError(
            f"unsupported query mode {query.mode!r}",
            hint="MagneticVectorStore supports VectorStoreQueryMode.DEFAULT and MMR",
        )


def check_count(name: str, value: Any, low: int) -> int:
    """Return ``value`` if it is an integer >= ``low`` (not a bool), else raise naming it."""
    return int(check_int(value, name, low=low))


def id_list(node_ids: Sequence[str] | None) -> list[str] | None:
    """``node_ids`` as a list, refusing a lone string (which would read as characters)."""
    if node_ids is None:
        return None
    if isinstance(node_ids, str):
        raise InvalidInputError("node_ids must be a list of strings", hint="wrap it: [node_id]")
    return list(node_ids)


def _predicate(query: VectorStoreQuery, where: Any) -> Predicate | None:
    """One compiled filter: the query's filters (or ``where``) and its ``doc_ids``."""
    if query.filters is not None and where is not None:
        raise FilterError(
            "the filter was given two ways: query.filters and where=",
            hint="pass only one of them",
        )
    doc_ids = sorted(set(id_list(query.doc_ids) or ()))
    parts = [
        w
        for w in (
            to_where(query.filters),
            where,
            {REF_DOC_ID: {"$in": doc_ids}} if doc_ids else None,
        )
        if w
    ]
    if len(parts) > 1 and any(not isinstance(w, Mapping) for w in parts):
        raise FilterError(
            "where= must be a dict when the query also has doc_ids",
            hint='use the Chroma syntax, e.g. where={"year": {"$gte": 2020}}',
        )
    if not parts:
        return None
    return compile_filter(parts[0] if len(parts) == 1 else {"$and": parts})


def _query_vector(query: VectorStoreQuery, embed_query: Callable[[str], np.ndarray]) -> Any:
    """The query's embedding as given (the core's search checks and normalises it, once),
    the embedded ``query_str``, or None for a filter-only query."""
    if query.query_embedding is not None:
        return query.query_embedding
    if query.query_str:
        return embed_query(query.query_str)
    return None


def _mmr_threshold(query: VectorStoreQuery, kwargs: Mapping[str, Any]) -> float:
    given = [v for v in (query.mmr_threshold, kwargs.get("mmr_threshold")) if v is not None]
    if len(given) == 2 and given[0] != given[1]:
        raise InvalidInputError(
            f"mmr_threshold was given two ways: {given[0]!r} on the query and {given[1]!r} "
            "as a keyword argument",
            hint="pass only one",
        )
    return check_mmr_threshold(given[0]) if given else DEFAULT_MMR_THRESHOLD


def _fetch_k(k: int, kwargs: Mapping[str, Any]) -> int:
    prefetch_k, factor = kwargs.get("mmr_prefetch_k"), kwargs.get("mmr_prefetch_factor")
    if prefetch_k is not None and factor is not None:
        raise InvalidInputError(
            "pass mmr_prefetch_k or mmr_prefetch_factor, not both",
            hint="mmr_prefetch_k is a count; mmr_prefetch_factor multiplies similarity_top_k",
        )
    if prefetch_k is not None:
        return max(check_count("mmr_prefetch_k", prefetch_k, 1), k)
    factor = DEFAULT_MMR_PREFETCH_FACTOR if factor is None else factor
    check_number(factor, "mmr_prefetch_factor", low=1.0)
    return math.ceil(k * factor)
