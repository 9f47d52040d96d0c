"""LangChain integration of MagneticStorage: vector store, retriever, LangGraph store, tools."""

from __future__ import annotations

from magnetic_langchain.consolidation import (
    ConsolidationResult,
    Contradiction,
    create_consolidation_chain,
)
from magnetic_langchain.documents import (
    EXPANDED_FROM_KEY,
    GROUP_ID_KEY,
    GROUP_LABEL_KEY,
    SCORE_KEY,
)
from magnetic_langchain.embeddings import LangChainEmbedder, MagneticEmbeddings
from magnetic_langchain.retrievers import MagneticRetriever
from magnetic_langchain.self_query import MagneticTranslator
from magnetic_langchain.store import MagneticSearchItem, MagneticStore
from magnetic_langchain.tools import (
    ForgetMemoryTool,
    SearchMemoryTool,
    StoreMemoryTool,
    create_memory_tools,
)
from magnetic_langchain.vectorstores import MagneticVectorStore

__all__ = [
    "ConsolidationResult",
    "Contradiction",
    "EXPANDED_FROM_KEY",
    "ForgetMemoryTool",
    "GROUP_ID_KEY",
    "GROUP_LABEL_KEY",
    "LangChainEmbedder",
    "MagneticEmbeddings",
    "MagneticRetriever",
    "MagneticSearchItem",
    "MagneticStore",
    "MagneticTranslator",
    "MagneticVectorStore",
    "SCORE_KEY",
    "SearchMemoryTool",
    "StoreMemoryTool",
    "create_consolidation_chain",
    "create_memory_tools",
]
