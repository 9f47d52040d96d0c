"""Turning engine results into LangChain Documents: metadata keys, relevance, MMR.

The group metadata keys (``magnetic_group_id``, ``magnetic_group_label``,
``magnetic_expanded_from``) are the core's (:mod:`magnetic_core.types`), shared with the
LlamaIndex adapter. The one distance-to-relevance mapping of the LangChain integration lives here:
the engine scores by cosine similarity ``s`` in [-1, 1]; LangChain's "score" is the cosine
distance ``d = 1 - s`` in [0, 2]; relevance is ``1 - d / 2`` in [0, 1].
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.documents import Document

from magnetic_core import Cell, Hit
from magnetic_core._search.topk import maximal_marginal_relevance
from magnetic_core._sleep.supersession import (
    CONTRADICTIONS_KEY,
    SUPERSEDED_AT_KEY,
    SUPERSEDED_BY_KEY,
    SUPERSEDES_KEY,
    link_metadata,
)
from magnetic_core.types import EXPANDED_FROM_KEY, GROUP_ID_KEY, GROUP_LABEL_KEY

__all__ = [
    "CONTRADICTIONS_KEY",
    "EXPANDED_FROM_KEY",
    "GROUP_ID_KEY",
    "GROUP_LABEL_KEY",
    "SCORE_KEY",
    "SUPERSEDED_AT_KEY",
    "SUPERSEDED_BY_KEY",
    "SUPERSEDES_KEY",
    "cell_to_document",
    "cosine_distance",
    "hit_to_document",
    "maximal_marginal_relevance",
    "relevance_from_distance",
]

SCORE_KEY = "magnetic_score"
"""Metadata key of a retriever hit's cosine similarity to the query."""


def cosine_distance(similarity: float) -> float:
    """Cosine distance ``1 - similarity``, clipped to [0, 2] against float round-off."""
    return min(2.0, max(0.0, 1.0 - float(similarity)))


def relevance_from_distance(distance: float) -> float:
    """Relevance in [0, 1] from a cosine distance in [0, 2]: 1 is identical, 0 opposite.

    Example:
        >>> relevance_from_distance(0.0), relevance_from_distance(1.0), relevance_from_distance(2.0)
        (1.0, 0.5, 0.0)
    """
    return min(1.0, max(0.0, 1.0 - float(distance) / 2.0))


def cell_to_document(
    cell: Cell, *, group_label: str | None = None, extra: Mapping[str, Any] | None = None
) -> Document:
    """A Document whose metadata is the cell's own, plus group keys when a label is given.

    Cells written through the LlamaIndex store of the same memory carry LlamaIndex's node
    serialisation (``_node_content``, ``_node_type``); those two bookkeeping keys are left
    out so an LLM reading the document does not get the node's JSON a second time.
    With the group keys come the cell's links, where it has any: contradictions
    (``magnetic_contradictions``) and supersession (``magnetic_superseded_by``,
    ``magnetic_superseded_at``, ``magnetic_supersedes``).
    """
    metadata = dict(cell.metadata)
    if isinstance(metadata.get("_node_content"), str) and "_node_type" in metadata:
        del metadata["_node_content"], metadata["_node_type"]
    if group_label is not None:
        metadata[GROUP_ID_KEY] = cell.group_id
        metadata[GROUP_LABEL_KEY] = group_label
        metadata.update(link_metadata(cell))
    if extra:
        metadata.update(extra)
    return Document(page_content=cell.text, metadata=metadata, id=cell.id)


def hit_to_document(hit: Hit, *, with_group: bool = False) -> Document:
    """A Document for a search hit; group id and label are added only with ``with_group``."""
    return cell_to_document(hit.cell, group_label=hit.group_label if with_group else None)
