"""Tuning knobs of the engine as one keyword-only, validated, frozen value."""

from __future__ import annotations

from dataclasses import dataclass, replace

from magnetic_core.validators import check_int, check_number

__all__ = ["MemoryConfig"]


@dataclass(frozen=True, kw_only=True)
class MemoryConfig:
    """Settings of a :class:`~magnetic_core.MagneticMemory`.

    Args:
        join_threshold: cosine similarity to a group's centroid at or above which a new
            cell joins that group. ``None`` (the default) calibrates it from the data: each
            time the store first reaches 32, 64, ... up to ``calibration_size`` cells, the
            threshold becomes the ``calibration_percentile`` of the cells' nearest-neighbour
            similarities and the cells seen so far are regrouped with it.
        provisional_threshold: threshold used before the first calibration (under 32 cells).
        calibration_size: cell count of the last calibration checkpoint.
        calibration_percentile: percentile (0-100) of nearest-neighbour similarity used.
        max_group_size: a group that grows past this many cells is split in two (2-means).
        n_probe: number of groups, best by centroid similarity, whose cells are scored.
        probe_cells: cells scored per query. Groups are added in centroid order until they
            hold this many cells (twice as many in large stores, where the best sub-lists of
            those groups fill the budget), so the work per query does not depend on group
            sizes. ``None`` (the default) scales it to the store: 42 times the square root
            of its size, between 4,096 and 13,000 cells (6,641 at 25K cells, 13,000 from
            96K on), which keeps recall@10 near 0.98 or above on real sentence embeddings
            while the latency stays flat past 100K cells. 0 probes exactly ``n_probe``
            groups.
        entity_boost: added to the ranking score of cells that contain an entity of the query.
        lexical_weight: weight of the BM25 lexical score fused with the cosine score: each
            candidate gains ``lexical_weight`` times its BM25 over the query's best BM25, and
            the best BM25 cells join the candidates (0 disables the lexical stage).
        context_weight: in stores of conversation turns (cells whose metadata names a
            ``session_id``, ``thread_id`` or ``conversation_id``, in the order of a numeric
            ``turn`` value or else of their adds), each of the best candidates and its
            neighbouring turns gain this share of the best neighbour's ranking score, so
            an answer split over two turns comes back whole (0 disables it; text queries
            only). Fitted with ``session_weight`` on a training split of LoCoMo
            conversations (``benchmarks/locomo.py``).
        session_weight: in such stores, each candidate in a thread also gains this share
            of the best ranking score in its thread: the session where the best match was
            said is where the rest of the answer most likely is (0 disables it).
        sketch_rank: dimension of the low-rank sketches that pre-score large probes before
            exact re-ranking (0 scores every probed cell exactly).
        rerank: cells kept from the sketch pre-score and scored exactly (at most: a query
            stops once the rest are out of reach of its best ``k``).
        list_size: in large stores each group's cells are split into tight sub-lists of
            about this many cells, so a query scores the parts of a group near it.
        merge_threshold: centroid similarity at which sleep mode merges two groups.
        chunk_size: cells assigned per vectorised block at ingest.
        max_text_chars: longest text ``add`` accepts, in characters (4 million, about
            4 MB of ASCII, by default). A longer text is refused with an error naming this
            limit: split it first (a text splitter, or ``magnetic ingest``, which chunks
            files). An embedding model reads only the start of a text anyway, so one cell
            per chunk is what retrieval needs. ``None`` removes the limit.

    Example:
        >>> MemoryConfig(n_probe=16).n_probe
        16
    """

    join_threshold: float | None = None
    provisional_threshold: float = 0.5
    calibration_size: int = 256
    calibration_percentile: float = 5.0
    max_group_size: int = 256
    n_probe: int = 32
    probe_cells: int | None = None
    entity_boost: float = 0.1
    lexical_weight: float = 0.3
    context_weight: float = 0.7
    session_weight: float = 0.8
    sketch_rank: int = 128
    rerank: int = 256
    list_size: int = 32
    merge_threshold: float = 0.85
    chunk_size: int = 256
    max_text_chars: int | None = 4_000_000

    def __post_init__(self) -> None:
        for name, low, high, optional in _NUMBERS:
            check_number(
                getattr(self, name), f"MemoryConfig.{name}", low=low, high=high, optional=optional
            )
        for name, low, optional in _INTEGERS:
            check_int(getattr(self, name), f"MemoryConfig.{name}", low=low, optional=optional)

    def with_changes(self, **changes: object) -> MemoryConfig:
        """Return a copy with some fields replaced (validated again)."""
        return replace(self, **changes)  # type: ignore[arg-type]


# (field, low, high, None allowed) of the float settings and (field, low, None allowed)
# of the integer ones, checked by the core's shared validators.
_NUMBERS = (
    ("join_threshold", -1.0, 1.0, True),
    ("provisional_threshold", -1.0, 1.0, False),
    ("calibration_percentile", 0.0, 100.0, False),
    ("merge_threshold", -1.0, 1.0, False),
    ("entity_boost", 0.0, 10.0, False),
    ("lexical_weight", 0.0, 10.0, False),
    ("context_weight", 0.0, 10.0, False),
    ("session_weight", 0.0, 10.0, False),
)
_INTEGERS = (
    ("calibration_size", 2, False),
    ("max_group_size", 2, False),
    ("n_probe", 1, False),
    ("probe_cells", 0, True),
    ("chunk_size", 1, False),
    ("sketch_rank", 0, False),
    ("rerank", 1, False),
    ("list_size", 1, False),
    ("max_text_chars", 1, True),
)
