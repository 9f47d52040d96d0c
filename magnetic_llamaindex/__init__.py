"""LlamaIndex integration of MagneticStorage: vector store, group-aware retriever, memory block.

Example:
    .. code-block:: python

        from llama_index.core import StorageContext, VectorStoreIndex
        from magnetic_core import SentenceTransformerEmbedder
        from magnetic_llamaindex import MagneticEmbedding, MagneticRetriever, MagneticVectorStore

        embed_model = MagneticEmbedding(SentenceTransformerEmbedder())
        store = MagneticVectorStore(path="./memory", embed_model=embed_model)
        index = VectorStoreIndex.from_documents(
            documents, storage_context=StorageContext.from_defaults(vector_store=store),
            embed_model=embed_model)
        MagneticRetriever(store, embed_model=embed_model, expand=2).retrieve("...")
"""

from __future__ import annotations

from magnetic_llamaindex.consolidation import consolidate
from magnetic_llamaindex.embeddings import (
    LlamaIndexEmbedder,
    MagneticEmbedding,
    PrecomputedEmbedder,
)
from magnetic_llamaindex.filters import to_predicate
from magnetic_llamaindex.memory_block import MagneticMemoryBlock
from magnetic_llamaindex.retriever import (
    EXPANDED_FROM_KEY,
    GROUP_ID_KEY,
    GROUP_LABEL_KEY,
    MagneticRetriever,
)
from magnetic_llamaindex.vector_store import MagneticVectorStore

__all__ = [
    "EXPANDED_FROM_KEY",
    "GROUP_ID_KEY",
    "GROUP_LABEL_KEY",
    "LlamaIndexEmbedder",
    "MagneticEmbedding",
    "MagneticMemoryBlock",
    "MagneticRetriever",
    "MagneticVectorStore",
    "PrecomputedEmbedder",
    "consolidate",
    "to_predicate",
]
