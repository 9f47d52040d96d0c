"""The ``embed`` of a LangGraph index config as LangChain ``Embeddings``, checked once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import ensure_embeddings

from magnetic_core.errors import InvalidInputError, MissingDependencyError
from magnetic_core.validators import check_int

__all__ = ["resolve_index"]


def resolve_index(index: Mapping[str, Any]) -> tuple[dict[str, Any], Embeddings, int]:
    """A copy of the index config, its embeddings object and its dimension.

    ``embed`` may be an ``Embeddings``, a sync or async function of a list of texts, or a
    ``"provider:model"`` string. Strings go through LangChain's ``init_embeddings`` when the
    ``langchain`` package is installed; ``"ollama:<model>"`` also works without it.

    Raises:
        InvalidInputError: ``dims`` or ``embed`` missing or malformed.
        MissingDependencyError: a provider string that cannot be resolved here.
    """
    if not isinstance(index, Mapping):
        raise InvalidInputError(f"index must be a dict, got {type(index).__name__}")
    config = dict(index)
    dims = int(check_int(config.get("dims"), "index['dims']", low=1))
    embed = config.get("embed")
    if embed is None:
        raise InvalidInputError(
            "index['embed'] is missing",
            hint='pass an Embeddings object, a function of a list of texts, or "provider:model"',
        )
    fields = config.get("fields")
    if fields is not None and (
        isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields)
    ):
        raise InvalidInputError(
            f"index['fields'] must be a list of JSON paths, got {fields!r}",
            hint='e.g. ["text"] or ["content", "tags[*]"]; "$" is the whole value',
        )
    return config, _embeddings(embed), dims


def _embeddings(embed: Any) -> Embeddings:
    if isinstance(embed, str):
        provider, _, model = embed.partition(":")
        try:
            return ensure_embeddings(embed)
        except (ValueError, ImportError) as e:
            if provider == "ollama" and model:
                from langchain_ollama import OllamaEmbeddings

                return OllamaEmbeddings(model=model)
            raise MissingDependencyError(
                f"cannot resolve the embedding model {embed!r}: {e}",
                hint="pip install langchain (and the provider's package), or pass an "
                "Embeddings object",
            ) from e
    if not isinstance(embed, Embeddings) and not callable(embed):
        raise InvalidInputError(
            f"index['embed'] must be Embeddings, a function or a string, got {type(embed).__name__}"
        )
    return ensure_embeddings(embed)
