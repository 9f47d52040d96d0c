"""Checks and choices made when a LlamaIndex store is built or called with extra arguments."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding

from magnetic_core._store.deferred import DeferredMemory, StoreMemory
from magnetic_core.embeddings import Embedder
from magnetic_core.errors import InvalidInputError
from magnetic_core.memory import MagneticMemory
from magnetic_llamaindex.embeddings import (
    PRECOMPUTED_NAME,
    LlamaIndexEmbedder,
    MagneticEmbedding,
    PrecomputedEmbedder,
)

__all__ = ["engine_embedder", "no_extra_kwargs", "open_store_memory", "refuse_with_memory"]

DEFAULT_PATH = "./magnetic_memory"


def refuse_with_memory(memory: MagneticMemory, settings: Mapping[str, Any]) -> None:
    if not isinstance(memory, MagneticMemory):
        raise InvalidInputError(
            f"memory must be a MagneticMemory, got {type(memory).__name__}",
            hint="or build the store from path=/client= with dim= or embed_model=",
        )
    given = [name for name, value in settings.items() if value is not None]
    if given:
        raise InvalidInputError(
            f"the store was given a memory and also {', '.join(given)}",
            hint="pass either memory, or the settings to open one (the memory has its own)",
        )


def open_store_memory(memory: MagneticMemory | None, settings: Mapping[str, Any]) -> StoreMemory:
    """The memory a store serves.

    A memory passed in (no other setting allowed), a memory opened from the settings
    (``dim`` or ``embed_model`` known), or a :class:`DeferredMemory` that opens once the
    first nodes tell the dimension.
    """
    path, client = settings["path"], settings["client"]
    namespace, config = settings["namespace"] or "default", settings["config"]
    if memory is not None:
        refuse_with_memory(memory, settings)
        return StoreMemory(memory, None, False)
    if path is not None and client is not None:
        raise InvalidInputError(
            "the store was given both path and client", hint="pass only one of them"
        )
    where = os.fspath(path) if path is not None else DEFAULT_PATH
    name = settings["embedder_name"]
    if settings["dim"] is None and settings["embed_model"] is None:
        deferred = DeferredMemory(
            path=where,
            client=client,
            namespace=namespace,
            config=config,
            make_embedder=lambda d, stored: PrecomputedEmbedder(
                d, stored or name or PRECOMPUTED_NAME
            ),
        )
        return StoreMemory(None, deferred, True)
    mem = MagneticMemory(
        path=where,
        namespace=namespace,
        embedder=engine_embedder(settings["dim"], name, settings["embed_model"]),
        config=config,
        client=client,
    )
    return StoreMemory(mem, None, True)


def engine_embedder(
    dim: int | None, embedder_name: str | None, embed_model: BaseEmbedding | None
) -> Embedder:
    """The core embedder of a new memory: the embed model itself, or a named stand-in."""
    if embed_model is None:
        if dim is None:
            raise InvalidInputError(
                "the store needs dim= or embed_model= when it is not built from a memory",
                hint="pass embed_model=your_embed_model, or dim=<its embedding size>",
            )
        return PrecomputedEmbedder(dim, embedder_name or PRECOMPUTED_NAME)
    if dim is not None or embedder_name is not None:
        raise InvalidInputError(
            "the embedding model was given two ways: embed_model and dim/embedder_name",
            hint="pass only embed_model; its name and size are read from it",
        )
    if isinstance(embed_model, MagneticEmbedding):
        return embed_model.embedder
    return LlamaIndexEmbedder(embed_model)


def no_extra_kwargs(method: str, kwargs: Mapping[str, Any]) -> None:
    if kwargs:
        raise InvalidInputError(f"{method}() got unexpected keyword arguments {sorted(kwargs)}")
