"""Value types returned by the engine: cells, hits and their routes, groups, stats."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

__all__ = [
    "EXPANDED_FROM_KEY",
    "GROUP_ID_KEY",
    "GROUP_LABEL_KEY",
    "Cell",
    "CompactionReport",
    "GroupInfo",
    "Hit",
    "MergePlan",
    "Route",
    "SleepReport",
    "Stats",
]

# The metadata keys both adapters add to a result (a LangChain Document, a LlamaIndex node).
GROUP_ID_KEY = "magnetic_group_id"
"""Metadata key of a result's concept group id."""
GROUP_LABEL_KEY = "magnetic_group_label"
"""Metadata key of a result's concept group label."""
EXPANDED_FROM_KEY = "magnetic_expanded_from"
"""Metadata key of a group expansion: the id of the hit it expands."""


@dataclass(frozen=True)
class Cell:
    """One stored memory: its text, metadata exactly as given, and where it lives.

    Attributes:
        id: the cell id (given by the caller or generated).
        text: the stored text.
        metadata: the caller's metadata, equal to what was added.
        group_id: id of the concept group holding the cell.
        entities: entities extracted from the text (lower-cased).
        created_at: UNIX time the id was first stored.
        updated_at: UNIX time of the last upsert.
        contradictions: links recorded by sleep mode: ``{"other", "explanation", "at"}``,
            plus ``"supersession": "superseded_by" | "supersedes"`` where one replaced the other.
        superseded_by: id of the newer cell that replaced this one (None while current).
        superseded_at: UNIX time it was marked superseded.
    """

    id: str
    text: str
    metadata: dict[str, Any]
    group_id: str
    entities: tuple[str, ...] = ()
    created_at: float = 0.0
    updated_at: float = 0.0
    contradictions: tuple[dict[str, Any], ...] = ()
    superseded_by: str | None = None
    superseded_at: float | None = None

    @property
    def is_current(self) -> bool:
        """Whether no newer cell superseded this one."""
        return self.superseded_by is None


@dataclass(frozen=True)
class Route:
    """How a hit was found (returned with ``explain=True``).

    Attributes:
        stages: the stages that produced it: ``"centroid"``, ``"entity"``, ``"fallback"``,
            ``"restricted"`` (a search among ids), ``"expansion"`` (a group expansion).
        centroid_similarity: cosine of the query with the hit's group centroid.
        boost: entity boost added to its ranking score.
        lexical: lexical (BM25-style) score fused into its ranking score.
        context: what its neighbouring turns in a conversation thread added to its
            ranking score.
        fallback_ran: whether the flat exact fallback ran for this query.
        probed_groups: how many groups were scored for this query.
    """

    stages: tuple[str, ...]
    centroid_similarity: float
    boost: float
    lexical: float
    fallback_ran: bool
    probed_groups: int
    context: float = 0.0


@dataclass(frozen=True)
class Hit:
    """A search result: the cell, its cosine score and its concept group.

    Attributes:
        cell: the matching cell.
        score: exact cosine similarity of the query and the cell.
        rank_score: the score used for ranking (cosine plus boost and lexical terms).
        group_id: the cell's group id.
        group_label: a few characteristic terms or entities of the group (worked out
            the first time it is read: labelling a group the store has not labelled yet
            takes about a millisecond, which a search whose caller never reads labels
            does not pay).
        route: present when the search ran with ``explain=True``.
        expanded_from: for a group expansion (``search(..., expand=n)``), the id of the
            hit it expands; None for a hit of the search itself.
    """

    cell: Cell
    score: float
    rank_score: float
    group_id: str
    group_label: str
    route: Route | None = None
    expanded_from: str | None = None

    @property
    def id(self) -> str:
        """The cell id."""
        return self.cell.id

    @property
    def text(self) -> str:
        """The cell text."""
        return self.cell.text

    @property
    def metadata(self) -> dict[str, Any]:
        """The cell's metadata as the user gave it."""
        return self.cell.metadata

    def __getstate__(self) -> dict[str, Any]:
        # A pickled or copied hit carries its label, not the store that works it out.
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        state.update((k, v) for k, v in self.__dict__.items() if k != _LABEL_OF)
        return state


# Hit.group_label of a hit a search made holds no value until it is first read: the hit
# keeps, under _LABEL_OF, a function of no arguments returning the label. The descriptor
# is set after the dataclass is made (a class attribute named like a field would become
# its default); a value given to the constructor lands in the instance and hides it.
_LABEL_OF = "_label_of"


class _GroupLabel:
    def __get__(self, hit: Hit | None, owner: type | None = None) -> Any:
        if hit is None:
            return self
        state = hit.__dict__
        label_of = state.get(_LABEL_OF)
        if label_of is None:  # another thread read it meanwhile
            return state["group_label"]
        label: str = label_of()
        state["group_label"] = label  # read once: later reads find it in the instance
        state.pop(_LABEL_OF, None)  # and the hit no longer holds on to the store
        return label


setattr(Hit, "group_label", _GroupLabel())  # noqa: B010 - not a field default (see above)


def defer_label(hit: Hit, label_of: Callable[[], str]) -> None:
    """Leave ``hit.group_label`` to ``label_of()``, called the first time the label is read
    (internal; for the hits a search returns, before anyone else sees them)."""
    hit.__dict__[_LABEL_OF] = label_of


@dataclass(frozen=True)
class GroupInfo:
    """A concept group: its label, size and most characteristic content.

    Attributes:
        id: the group id.
        label: a few characteristic terms or entities.
        size: number of cells in the group.
        entities: the group's most frequent entities.
        cell_ids: ids of its cells, closest to the centroid first.
        cohesion: mean cosine similarity of the cells to the centroid.
    """

    id: str
    label: str
    size: int
    entities: tuple[str, ...]
    cell_ids: tuple[str, ...]
    cohesion: float


@dataclass(frozen=True)
class Stats:
    """Health metrics of a memory.

    Attributes:
        count: number of cells.
        groups: number of groups.
        singleton_groups: groups holding one cell.
        largest_group: size of the largest group.
        mean_group_size: average cells per group.
        mean_cohesion: cell-weighted mean similarity of cells to their centroid.
        join_threshold: the threshold in force.
        threshold_source: ``"configured"``, ``"calibrated"`` or ``"provisional"``.
        embedder: the embedder name stamped on the store.
        dim: the embedding dimension.
        namespace: the namespace.
        entities: number of distinct entities indexed.
        singleton_share: share of groups holding one cell.
        imbalance: ``G * sum(size^2) / N^2`` (1.0 when all groups are equally large).
        size_percentiles: group sizes at the 50th, 90th and 99th percentile.
        superseded: cells marked superseded by a newer one.
    """

    count: int
    groups: int
    singleton_groups: int
    largest_group: int
    mean_group_size: float
    mean_cohesion: float
    join_threshold: float
    threshold_source: str
    embedder: str
    dim: int
    namespace: str
    entities: int
    singleton_share: float = 0.0
    imbalance: float = 0.0
    size_percentiles: tuple[float, float, float] = (0.0, 0.0, 0.0)
    superseded: int = 0


@dataclass(frozen=True)
class MergePlan:
    """The numeric half of sleep mode: which groups to merge.

    Attributes:
        pairs: ``(kept_group, absorbed_group, centroid_similarity)``, most similar first.
        threshold: the similarity threshold used.
    """

    pairs: tuple[tuple[str, str, float], ...]
    threshold: float

    def __len__(self) -> int:
        return len(self.pairs)


@dataclass(frozen=True)
class SleepReport:
    """What one sleep pass did (or, with ``dry_run``, would do).

    Attributes:
        dry_run: nothing was changed; ``after`` is the predicted state.
        merges: ``(kept_group, absorbed_group, centroid_similarity)``.
        absorbed: ``(fragment_group, into_group)`` for fragments whose cells were absorbed.
        splits: ``(group, new_group)``.
        moved: cells whose group changed.
        dropped: groups left empty and removed.
        relabelled: ``(group, old_label, new_label)`` of groups whose label changed.
        changed_groups: groups whose membership changed (what the LLM half reviews).
        thresholds: the values used (``join``, ``merge``, ``absorb``, ``split``).
        sources: where each threshold came from (``fitted`` or ``configured``).
        before: ``stats()`` before the pass.
        after: ``stats()`` after it (predicted counts and cohesion for a dry run).
        seconds: wall time of the pass.
    """

    dry_run: bool
    merges: tuple[tuple[str, str, float], ...]
    absorbed: tuple[tuple[str, str], ...]
    splits: tuple[tuple[str, str], ...]
    moved: int
    dropped: tuple[str, ...]
    relabelled: tuple[tuple[str, str, str], ...]
    changed_groups: tuple[str, ...]
    thresholds: dict[str, float]
    sources: dict[str, str]
    before: Stats
    after: Stats
    seconds: float

    def summary(self) -> str:
        """One line for logs and the CLI."""
        verb = "would move" if self.dry_run else "moved"
        return (
            f"{len(self.merges)} merges, {len(self.absorbed)} fragments absorbed, "
            f"{len(self.splits)} splits, {verb} {self.moved} cells, {len(self.dropped)} groups "
            f"dropped; groups {self.before.groups} -> {self.after.groups}, singleton share "
            f"{self.before.singleton_share:.1%} -> {self.after.singleton_share:.1%}, mean "
            f"cohesion {self.before.mean_cohesion:.3f} -> {self.after.mean_cohesion:.3f}"
        )


@dataclass(frozen=True)
class CompactionReport:
    """What one compaction of the cells collection did (:meth:`MagneticMemory.compact`).

    Attributes:
        rows: rows copied into the new collection (cells and counter rows).
        seconds: wall time of the whole compaction.
        skipped: why nothing was swapped in (empty when the compaction happened): another
            writer wrote while the rows were copied, or a long write was under way.
        freed_mb: megabytes of dropped index files removed from disk (0 for a server).
    """

    rows: int
    seconds: float
    skipped: str = ""
    freed_mb: float = 0.0

    @property
    def done(self) -> bool:
        """Whether the compacted collection was swapped in."""
        return not self.skipped
