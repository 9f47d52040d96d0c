"""The memory agent, personas and interactive stories, for the CLI and for library users.

``create_memory_agent(store, llm, persona=...)`` builds a LangGraph tool loop over the
memory tools; :class:`PersonaBook` keeps personas in their own namespace; ``StoryWorld``
writes passages and keeps the story's world consistent. Names are imported on first use,
so ``magnetic persona`` does not load LangGraph.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "BUILTIN_PERSONAS",
    "Conflict",
    "Draft",
    "Persona",
    "PersonaBook",
    "StoryFact",
    "StoryWorld",
    "create_memory_agent",
]

_WHERE = {
    "BUILTIN_PERSONAS": "personas",
    "Conflict": "story",
    "Draft": "story",
    "Persona": "personas",
    "PersonaBook": "personas",
    "StoryFact": "story",
    "StoryWorld": "story",
    "create_memory_agent": "agent",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
