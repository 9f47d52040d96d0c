"""Node <-> cell conversion: how a LlamaIndex node is stored as a cell, and rebuilt from one.

A node becomes one cell: its text is the cell text, its embedding the cell vector, and the
cell metadata is the node's own metadata (kept exactly, nested values and datetimes
included, so filters see it) plus LlamaIndex's usual bookkeeping keys: ``_node_content``
(the node as JSON, without text or embedding), ``_node_type``, and the source document id
under ``ref_doc_id``, ``doc_id`` and ``document_id``. Cells written without that
bookkeeping (by the core or the LangChain adapter) come back as plain ``TextNode``s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode, TextNode
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from magnetic_core._sleep.supersession import (
    CONTRADICTIONS_KEY,
    SUPERSEDED_AT_KEY,
    SUPERSEDED_BY_KEY,
    SUPERSEDES_KEY,
    link_metadata,
)
from magnetic_core._store.codec import validate_metadata
from magnetic_core.errors import DimensionError, InvalidInputError, MetadataError
from magnetic_core.types import Cell

__all__ = [
    "BOOKKEEPING_KEYS",
    "LINK_KEYS",
    "NodeRecords",
    "cell_to_node",
    "link_node_metadata",
    "nodes_to_records",
]

NODE_CONTENT = "_node_content"
NODE_TYPE = "_node_type"
REF_DOC_ID = "ref_doc_id"
BOOKKEEPING_KEYS = frozenset({NODE_CONTENT, NODE_TYPE, REF_DOC_ID, "doc_id", "document_id"})


@dataclass
class NodeRecords:
    """Nodes converted to the columns of :meth:`~magnetic_core.MagneticMemory.add`.

    Attributes:
        ids: node ids.
        texts: node texts.
        metadatas: cell metadata (node metadata plus bookkeeping keys).
        vectors: node embeddings.
    """

    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    metadatas: list[dict[str, Any]] = field(default_factory=list)
    vectors: list[list[float]] = field(default_factory=list)


def nodes_to_records(nodes: Sequence[BaseNode], dim: int) -> NodeRecords:
    """Convert nodes to cell columns, or raise naming the first node that cannot be stored.

    Args:
        nodes: LlamaIndex nodes carrying embeddings.
        dim: the store's embedding dimension.

    Raises:
        InvalidInputError: a node without an embedding.
        MetadataError: node metadata that cannot be stored exactly (a set, NaN, ...).
        DimensionError: a node whose embedding does not have ``dim`` entries.

    Example:
        >>> from llama_index.core.schema import TextNode
        >>> rec = nodes_to_records([TextNode(id_="n1", text="hi", embedding=[1.0, 0.0])], 2)
        >>> rec.ids, rec.texts, rec.metadatas[0]["ref_doc_id"]
        (['n1'], ['hi'], 'None')
    """
    records = NodeRecords()
    for node in nodes:
        if not isinstance(node, BaseNode):
            raise InvalidInputError(
                f"expected LlamaIndex nodes, got {type(node).__name__}",
                hint="pass TextNode / Document objects",
            )
        if node.embedding is None:
            raise InvalidInputError(
                f"node {node.node_id!r} has no embedding",
                hint="embed nodes first (VectorStoreIndex does this with its embed_model)",
            )
        if len(node.embedding) != dim:
            raise DimensionError(
                f"node {node.node_id!r} has a {len(node.embedding)}-d embedding, but the "
                f"store holds {dim}-d vectors",
                hint="embed every node with the model the store was created with",
            )
        # A node without text (an image node, a node carrying only an embedding) is stored
        # by its vector and metadata; it gets no lexical entry.
        text = node.get_content(metadata_mode=MetadataMode.NONE) or ""
        records.ids.append(node.node_id)
        records.texts.append(text)
        records.metadatas.append(_cell_metadata(node, len(records.metadatas)))
        records.vectors.append(list(node.embedding))
    return records


def _cell_metadata(node: BaseNode, position: int) -> dict[str, Any]:
    # LlamaIndex's helper gives the bookkeeping keys; the node's own metadata is then laid
    # over them as given (the helper's JSON dump would turn datetimes into strings).
    flat = node_to_metadata_dict(node, remove_text=True, flat_metadata=False)
    meta = {k: flat[k] for k in BOOKKEEPING_KEYS}
    for key, value in node.metadata.items():
        if key not in BOOKKEEPING_KEYS:
            meta[key] = value
    try:
        return validate_metadata(meta, position)
    except MetadataError as e:
        raise MetadataError(f"node {node.node_id!r}: {e.message}", hint=e.hint) from e


def cell_to_node(cell: Cell) -> BaseNode:
    """Rebuild the node stored in ``cell`` (a plain TextNode for cells stored without one).

    Example:
        >>> from magnetic_core.types import Cell
        >>> cell_to_node(Cell(id="c1", text="hi", metadata={"a": 1}, group_id="g")).metadata
        {'a': 1}
    """
    meta = cell.metadata
    if NODE_CONTENT not in meta:
        return TextNode(id_=cell.id, text=cell.text, metadata=dict(meta))
    node = metadata_dict_to_node(meta, text=cell.text)
    # The JSON copy holds the node's metadata keys; take their values from the cell, which
    # kept them exactly, except for keys the bookkeeping overwrote in the cell.
    stored = json.loads(meta[NODE_CONTENT]).get("metadata") or {}
    node.metadata = {k: (v if k in BOOKKEEPING_KEYS else meta.get(k, v)) for k, v in stored.items()}
    return node


LINK_KEYS = (CONTRADICTIONS_KEY, SUPERSEDED_BY_KEY, SUPERSEDED_AT_KEY, SUPERSEDES_KEY)
"""Metadata keys of a cell's contradiction and supersession links on retrieved nodes."""


def link_node_metadata(node: BaseNode, cell: Cell) -> None:
    """Add ``cell``'s links (if any) to ``node.metadata``, kept out of its embedding text.

    They stay in the text an LLM reads, so a superseded fact is seen as such.
    """
    links = link_metadata(cell)
    if not links:
        return
    node.metadata.update(links)
    excluded = node.excluded_embed_metadata_keys
    node.excluded_embed_metadata_keys = [*excluded, *(k for k in links if k not in excluded)]
