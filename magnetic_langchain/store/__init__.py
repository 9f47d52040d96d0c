"""LangGraph's long-term memory store (``BaseStore``) on MagneticStorage's hierarchy."""

from __future__ import annotations

from magnetic_langchain.store.base import MagneticStore
from magnetic_langchain.store.records import MagneticSearchItem

__all__ = ["MagneticSearchItem", "MagneticStore"]
