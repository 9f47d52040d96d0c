"""Which memory a LangChain store serves: one passed in, one it opens, or one opened later."""

from __future__ import annotations

import os
from typing import Any

from langchain_core.embeddings import Embeddings

from magnetic_core import InvalidInputError, MagneticMemory, MemoryConfig
from magnetic_core._store.deferred import DeferredMemory, StoreMemory
from magnetic_langchain.embeddings import as_core_embedder

__all__ = ["DEFAULT_PATH", "open_memory"]

DEFAULT_PATH = "./magnetic_memory"


def open_memory(
    embedding: Embeddings | None,
    memory: MagneticMemory | None,
    *,
    path: str | os.PathLike[str] | None,
    namespace: str,
    config: MemoryConfig | None,
    client: Any,
) -> StoreMemory:
    """The store's memory: passed in, opened now, or deferred.

    A memory passed in is wrapped (and not owned: the store does not close it); with an
    embedding model a memory is opened now; without one, a :class:`DeferredMemory` opens
    once the first vectors tell the dimension.

    Raises:
        InvalidInputError: a memory given together with settings that belong to it, or an
            embedding that is not the memory's.
    """
    if memory is not None:
        _check_wrapped(
            memory, embedding, path=path, namespace=namespace, config=config, client=client
        )
        return StoreMemory(memory, None, False)
    where = os.fspath(path) if path is not None else DEFAULT_PATH
    if embedding is None:
        deferred = DeferredMemory(path=where, client=client, namespace=namespace, config=config)
        return StoreMemory(None, deferred, True)
    opened = MagneticMemory(
        path=where,
        namespace=namespace,
        embedder=as_core_embedder(embedding),
        config=config,
        client=client,
    )
    return StoreMemory(opened, None, True)


def _check_wrapped(
    memory: MagneticMemory, embedding: Embeddings | None, *, namespace: str, **settings: Any
) -> None:
    clash = [name for name, value in settings.items() if value is not None]
    clash += ["namespace"] if namespace != "default" else []
    if clash:
        raise InvalidInputError(
            f"pass either memory= or {', '.join(clash)}, not both",
            hint="the wrapped memory already has its own",
        )
    if embedding is not None and as_core_embedder(embedding).name != memory.embedder.name:
        raise InvalidInputError(
            f"the embedding {as_core_embedder(embedding).name!r} is not the memory's "
            f"embedder {memory.embedder.name!r}",
            hint="omit embedding= to use the memory's",
        )
