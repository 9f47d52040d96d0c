"""LangChain integration of MagneticStorage: vector store, retriever, LangGraph store, tools.

Names are imported on first use (PEP 562), so ``import magnetic_langchain.cli`` and other
submodules that need no LangChain do not pay for importing it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from magnetic_langchain.consolidation import (
        ConsolidationResult,
        ConsolidationSettings,
        Contradiction,
        create_consolidation_chain,
        find_contradictions,
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
    from magnetic_langchain.structured import invoke_structured
    from magnetic_langchain.tools import (
        ForgetMemoryTool,
        SearchMemoryTool,
        StoreMemoryTool,
        create_memory_tools,
    )
    from magnetic_langchain.vectorstores import MagneticVectorStore

# Where each public name lives.
_SOURCES = {
    "ConsolidationResult": "consolidation",
    "ConsolidationSettings": "consolidation",
    "Contradiction": "consolidation",
    "EXPANDED_FROM_KEY": "documents",
    "ForgetMemoryTool": "tools",
    "GROUP_ID_KEY": "documents",
    "GROUP_LABEL_KEY": "documents",
    "LangChainEmbedder": "embeddings",
    "MagneticEmbeddings": "embeddings",
    "MagneticRetriever": "retrievers",
    "MagneticSearchItem": "store",
    "MagneticStore": "store",
    "MagneticTranslator": "self_query",
    "MagneticVectorStore": "vectorstores",
    "SCORE_KEY": "documents",
    "SearchMemoryTool": "tools",
    "StoreMemoryTool": "tools",
    "create_consolidation_chain": "consolidation",
    "create_memory_tools": "tools",
    "find_contradictions": "consolidation",
    "invoke_structured": "structured",
}

__all__ = [
    "ConsolidationResult",
    "ConsolidationSettings",
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
    "find_contradictions",
    "invoke_structured",
]


def __getattr__(name: str) -> Any:
    module = _SOURCES.get(name)
    if module is None:
        raise AttributeError(f"module 'magnetic_langchain' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"magnetic_langchain.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
