"""MagneticRetriever: a group-aware LlamaIndex retriever over a MagneticStorage memory."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilters

from magnetic_core.errors import InvalidInputError
from magnetic_core.memory import MagneticMemory
from magnetic_core.types import EXPANDED_FROM_KEY, GROUP_ID_KEY, GROUP_LABEL_KEY, Hit
from magnetic_core.validators import check_number
from magnetic_llamaindex.embeddings import embed_query_text
from magnetic_llamaindex.filters import to_predicate
from magnetic_llamaindex.nodes import cell_to_node, link_node_metadata
from magnetic_llamaindex.plan import check_count
from magnetic_llamaindex.vector_store import MagneticVectorStore

__all__ = ["EXPANDED_FROM_KEY", "GROUP_ID_KEY", "GROUP_LABEL_KEY", "MagneticRetriever"]

_ADDED_KEYS = (GROUP_ID_KEY, GROUP_LABEL_KEY, EXPANDED_FROM_KEY)


class MagneticRetriever(BaseRetriever):
    """Retrieve nodes through the concept layer, each tagged with its concept group.

    Unlike a plain vector retriever, the query text takes part too: entities in it (file
    names, identifiers, capitalised phrases...) route the search to the groups that hold
    them and boost the cells that contain them, and its words are scored BM25-style and
    fused into the ranking (see ``MemoryConfig.entity_boost`` and ``lexical_weight``).
    Scores stay the cosine similarity; only the order feels the text.

    Every result carries its group's id and label in ``node.metadata``
    (``magnetic_group_id``, ``magnetic_group_label``; both kept out of the text that gets
    embedded). With ``expand=n``, the hits (best first) are
    followed by up to ``n`` other cells of each hit's group, in hit order, those closest
    to the group's centroid first; each is tagged ``magnetic_expanded_from=<hit id>`` and
    scored by its own cosine similarity. A cell is never returned twice.

    Args:
        store: a :class:`MagneticVectorStore` or a :class:`~magnetic_core.MagneticMemory`.
        embed_model: embeds the query. Without one, the memory's own embedder does (a
            store built from ``dim`` has none and says so).
        similarity_top_k: number of hits (before expansion).
        filters: LlamaIndex metadata filters every result (expansions included) passes.
        expand: other cells of each hit's group to add after the hits (0 for none).
        n_probe: groups to probe (default from the memory's config).
        entity_boost: ranking boost of cells naming a query entity (default: config).
        lexical_weight: weight of the query words' BM25 score (default: config; 0 ranks
            by the vector alone, like ``VectorStoreIndex.as_retriever``).
        callback_manager: LlamaIndex callbacks.
        verbose: LlamaIndex verbosity.

    Example:
        .. code-block:: python

            retriever = MagneticRetriever(store, embed_model=embed_model,
                                          similarity_top_k=3, expand=2)
            for hit in retriever.retrieve("How do mitochondria make energy?"):
                print(hit.score, hit.node.metadata["magnetic_group_label"])
    """

    def __init__(
        self,
        store: MagneticVectorStore | MagneticMemory,
        *,
        embed_model: BaseEmbedding | None = None,
        similarity_top_k: int = 4,
        filters: MetadataFilters | None = None,
        expand: int = 0,
        n_probe: int | None = None,
        entity_boost: float | None = None,
        lexical_weight: float | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if isinstance(store, MagneticVectorStore):
            self._memory = store.memory
        elif isinstance(store, MagneticMemory):
            self._memory = store
        else:
            raise InvalidInputError(
                f"store must be a MagneticVectorStore or MagneticMemory, got {type(store).__name__}"
            )
        check_count("similarity_top_k", similarity_top_k, 1)
        check_count("expand", expand, 0)
        if n_probe is not None:
            check_count("n_probe", n_probe, 1)
        self._embed_model = embed_model
        self._k = similarity_top_k
        self._predicate = to_predicate(filters)
        self._expand = expand
        self._n_probe = n_probe
        self._entity_boost = _check_weight("entity_boost", entity_boost)
        self._lexical_weight = _check_weight("lexical_weight", lexical_weight)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        vector = self._query_vector(query_bundle)
        return self._search(query_bundle.query_str, vector)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        vector = query_bundle.embedding
        if vector is None and self._embed_model is not None:
            vector = await self._embed_model.aget_agg_embedding_from_queries(
                query_bundle.embedding_strs
            )
        if vector is None:
            return await asyncio.to_thread(self._retrieve, query_bundle)
        return await asyncio.to_thread(self._search, query_bundle.query_str, vector)

    def _query_vector(self, query_bundle: QueryBundle) -> Any:
        if query_bundle.embedding is not None:
            return query_bundle.embedding
        if self._embed_model is not None:
            return self._embed_model.get_agg_embedding_from_queries(query_bundle.embedding_strs)
        return embed_query_text(self._memory, query_bundle.query_str)

    def _search(self, query_str: str, vector: Any) -> list[NodeWithScore]:
        hits = self._memory.search(
            query=query_str or None,
            vector=vector,
            k=self._k,
            filter=self._predicate,
            expand=self._expand,
            n_probe=self._n_probe,
            entity_boost=self._entity_boost,
            lexical_weight=self._lexical_weight,
        )
        # The engine puts each hit's expansions right after it; LlamaIndex users get the
        # hits first, then the expansions in hit order (a stable sort keeps both orders).
        hits.sort(key=lambda h: h.expanded_from is not None)
        return [_scored(h) for h in hits]


def _check_weight(name: str, value: float | None) -> float | None:
    """Return ``value`` if it is None or a finite number >= 0, else raise naming it."""
    check_number(value, name, low=0.0, high=1e6, optional=True)
    return None if value is None else float(value)


def _scored(hit: Hit) -> NodeWithScore:
    node = cell_to_node(hit.cell)
    node.metadata[GROUP_ID_KEY] = hit.group_id
    node.metadata[GROUP_LABEL_KEY] = hit.group_label
    if hit.expanded_from is not None:
        node.metadata[EXPANDED_FROM_KEY] = hit.expanded_from
    link_node_metadata(node, hit.cell)
    excluded = node.excluded_embed_metadata_keys
    node.excluded_embed_metadata_keys = [*excluded, *(k for k in _ADDED_KEYS if k not in excluded)]
    return NodeWithScore(node=node, score=hit.score)
