"""LangGraph namespaces (tuples of strings) as isolated engine namespaces, and their registry.

Each LangGraph namespace gets its own engine namespace (its own Chroma collections and its
own concept groups), named by a hash of the tuple: tenants are separated in storage, not by
a filter. A registry namespace maps the hashed names back to the tuples, so
``list_namespaces`` works across restarts and processes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from langgraph.store.base import MatchCondition

from magnetic_core import MagneticMemory
from magnetic_core.embeddings import VectorsOnly
from magnetic_core.errors import InvalidInputError

__all__ = ["NamespaceRegistry", "StampEmbedder", "engine_name", "matches", "select_namespaces"]

_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,19}$")


class StampEmbedder(VectorsOnly):
    """The embedder stamp of a store namespace whose vectors are computed by the store.

    The store embeds item fields itself (so async embedding functions work) and hands the
    engine vectors; this object only names the model and its dimension. It refuses to embed.
    """

    def __init__(self, name: str, dim: int) -> None:
        super().__init__(
            dim,
            name,
            reason="this namespace belongs to a MagneticStore, which embeds item fields itself",
            hint="read and write it through the MagneticStore",
        )


def check_prefix(prefix: str) -> str:
    """``prefix`` if it can start engine namespace names, else an error."""
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise InvalidInputError(
            f"invalid store prefix {prefix!r}",
            hint="use 1-20 letters, digits, '_' or '-', starting alphanumeric",
        )
    return prefix


def engine_name(prefix: str, namespace: tuple[str, ...]) -> str:
    """The engine namespace holding one LangGraph namespace (stable, at most 50 characters).

    >>> engine_name("lg", ("users", "alice"))
    'lg-50b35f9d484fe898438a258b3f03'
    """
    digest = hashlib.sha256(json.dumps(list(namespace)).encode()).hexdigest()
    return f"{prefix}-{digest[:28]}"


def matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` starts (prefix) or ends (suffix) with the condition's path.

    ``"*"`` in the path matches any one label.
    """
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs: Iterable[tuple[str, str]] = zip(namespace, path)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path))
    else:
        raise InvalidInputError(f"unknown namespace match type {condition.match_type!r}")
    return all(p == "*" or n == p for n, p in pairs)


def select_namespaces(
    namespaces: Iterable[tuple[str, ...]],
    conditions: Sequence[MatchCondition] | None,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> list[tuple[str, ...]]:
    """The namespaces a ``ListNamespacesOp`` asks for: matched, truncated, sorted, paged."""
    chosen = [ns for ns in namespaces if all(matches(c, ns) for c in conditions or ())]
    if max_depth is not None:
        chosen = list({ns[:max_depth] for ns in chosen})
    return sorted(chosen)[offset : offset + limit]


class NamespaceRegistry:
    """The LangGraph namespaces that hold items, persisted beside them.

    Args:
        client: the chromadb client of the store.
        prefix: the store's engine-namespace prefix.
    """

    def __init__(self, client: Any, prefix: str) -> None:
        self.prefix = prefix
        self._memory = MagneticMemory(
            client=client,
            namespace=f"{prefix}-registry",
            embedder=StampEmbedder("magnetic-store-registry", 1),
        )
        self._known: dict[tuple[str, ...], str] = {
            tuple(cell.metadata["namespace"]): cell.id for cell in self._memory.get()
        }

    @property
    def namespaces(self) -> list[tuple[str, ...]]:
        """Every registered namespace."""
        return list(self._known)

    def add(self, namespaces: Iterable[tuple[str, ...]]) -> None:
        """Register namespaces (already registered ones are skipped)."""
        new = [ns for ns in dict.fromkeys(namespaces) if ns not in self._known]
        if not new:
            return
        names = [engine_name(self.prefix, ns) for ns in new]
        self._memory.add(
            ["/".join(ns) for ns in new],
            metadatas=[{"namespace": list(ns)} for ns in new],
            ids=names,
            vectors=[[1.0]] * len(new),
        )
        self._known.update(zip(new, names))

    def remove(self, namespaces: Iterable[tuple[str, ...]]) -> None:
        """Unregister namespaces that no longer hold items."""
        gone = [ns for ns in dict.fromkeys(namespaces) if ns in self._known]
        if gone:
            self._memory.delete(ids=[self._known[ns] for ns in gone])
            for ns in gone:
                del self._known[ns]

    def close(self) -> None:
        """Release the registry's engine namespace."""
        self._memory.close()
