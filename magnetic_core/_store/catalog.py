"""Everything about cells that is not a vector: records, the entity index, group labels."""

from __future__ import annotations

import re
import threading
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from magnetic_core._search.context import Threads
from magnetic_core._store.columns import RecordColumns, Records
from magnetic_core._store.record import CellRecord
from magnetic_core._text.lexical import LexicalIndex

if TYPE_CHECKING:
    from magnetic_core._index.group import Group

__all__ = ["CellRecord", "Catalog"]

# Words that are frequent in conversation but name no concept; with contractions
# ("i'm", "don't") they never label a group.
_LABEL_STOPWORDS = frozenset(
    """like really just get got go going know think want well yeah yes sure oh lot much
    good great nice love time thing things way make made see pretty maybe still even back
    right actually kind sort mean say told tell getting lot lots always never ever sometimes
    something anything everything nothing someone anyone people day days week weeks""".split()
)


_CONTRACTION = re.compile(
    r"^(i|you|we|they|he|she|it|that|there|here|what|who|where|how|let)'(m|ve|re|ll|d|s)$"
    r"|^[a-z]+n't$"
)


def _labels_concept(term: str) -> bool:
    return "'" not in term and term not in _LABEL_STOPWORDS and not any(c.isdigit() for c in term)


def _entity_labels(entity: str) -> bool:
    word = entity.lower().replace("\u2019", "'")
    return not _CONTRACTION.match(word) and word not in _LABEL_STOPWORDS


def _label_words(
    words: list[str], counts: np.ndarray, df: np.ndarray, n: int, first: list[str]
) -> list[str]:
    """Up to three words naming a group: ``first`` (its shared entities), then its terms
    by frequency in the group times inverse document frequency in the store (ties: the
    word first in alphabetical order), leaving out numbers, contractions, chit-chat words
    and words already contained in one taken."""
    # A concept's words are shared by several members: one-off words only name a
    # single-cell group.
    shared = np.flatnonzero(counts > 1)
    at = shared if shared.size else np.arange(counts.shape[0])
    weight = counts[at] * np.log1p(max(n, 1) / (1.0 + df[at]))
    # The best few by weight are enough: most terms are never looked at.
    if at.shape[0] > 64:
        best = np.argpartition(-weight, 63)[:64]
        cutoff = weight[best].min()
        best = np.flatnonzero(weight >= cutoff)  # every tie at the cut-off
        at, weight = at[best], weight[best]
    order = sorted(range(at.shape[0]), key=lambda i: (-float(weight[i]), words[at[i]]))
    taken = list(first)
    for i in order:
        if len(taken) >= 3:
            break
        term = words[int(at[i])]
        if _labels_concept(term) and not any(term in w for w in taken):
            taken.append(term)
    return taken


class Catalog:
    """Cell records, an inverted index entity -> cells, the BM25 index of their words, and
    the conversation threads they belong to.

    Args:
        columns: records read back from a snapshot, decoded as they are read; the entity
            index and the threads over them are built the first time they are needed.
        lexical: the BM25 index over ``columns``' texts (from the same snapshot).
        records: ``Records(columns)``, when the caller made it already.
    """

    def __init__(
        self,
        columns: RecordColumns | None = None,
        lexical: LexicalIndex | None = None,
        records: Records | None = None,
    ) -> None:
        self.records = records if records is not None else Records(columns)
        self.lexical = lexical if lexical is not None else LexicalIndex()
        lazy = columns is not None and len(columns) > 0
        self._entity_cells: dict[str, set[str]] | None = None if lazy else defaultdict(set)
        # Entity -> its cells' BM25 document numbers, ascending, made from the entity index
        # when first asked for and kept with it from then on (a new cell's number is the
        # largest yet: appended, they stay in order), until the lexical index numbers its
        # cells anew (its ``numbering``). Looked up by id for each query, the numbers of a
        # text query's entities cost it a median of 46 us at 100K cells (up to 1.6 ms).
        self._entity_docs: dict[str, array[int]] | None = None
        self._docs_numbering = -1
        self._threads: Threads | None = None if lazy else Threads()
        self._building = threading.Lock()  # searches build the lazy parts under a read lock
        self._labels: dict[str, tuple[int, str, tuple[str, ...], list[str]]] = {}

    def __len__(self) -> int:
        return len(self.records)

    @property
    def entity_cells(self) -> dict[str, set[str]]:
        """Entity -> the cells holding it."""
        if self._entity_cells is None:
            with self._building:
                if self._entity_cells is None:
                    cells: defaultdict[str, set[str]] = defaultdict(set)
                    for cid, entities in self.records.entity_pairs():
                        for entity in entities:
                            cells[entity].add(cid)
                    self._entity_cells = cells
        return self._entity_cells

    @property
    def threads(self) -> Threads:
        """The conversation threads of the cells that have one."""
        if self._threads is None:
            with self._building:
                if self._threads is None:
                    threads = Threads()
                    for cid, record in self.records.with_metadata():
                        threads.add(cid, record.metadata, record.created_at)
                    self._threads = threads
        return self._threads

    def entity_docs(self, entity: str) -> np.ndarray:
        """The BM25 document numbers of the cells holding ``entity``, ascending (int64, the
        caller's own copy; empty when no cell holds it)."""
        held = self._docs_by_entity().get(entity)
        if held is None:
            return np.empty(0, np.int64)
        return np.frombuffer(held, np.int64).copy()  # (a view would pin the array's size)

    def _docs_by_entity(self) -> dict[str, array[int]]:
        """:meth:`entity_docs`' arrays, made from the entity index when missing or when the
        lexical index has numbered its cells anew since."""
        lexical = self.lexical
        docs = self._entity_docs
        if docs is not None and self._docs_numbering == lexical.numbering:
            return docs
        entity_cells = self.entity_cells
        with self._building:
            docs = self._entity_docs
            if docs is None or self._docs_numbering != lexical.numbering:
                number = lexical.number_of
                docs = {}
                for entity, cells in entity_cells.items():
                    found = sorted(d for d in map(number, cells) if d >= 0)
                    if found:
                        docs[entity] = array("q", found)
                self._docs_numbering = lexical.numbering
                self._entity_docs = docs
        return docs

    def put(self, cid: str, record: CellRecord) -> None:
        entity_cells, threads = self.entity_cells, self.threads  # built before any change
        if cid in self.records:
            self.drop(cid)
        distinct = self.lexical.add(cid, record.text)
        if not record.terms:
            record.terms = distinct
        self.records[cid] = record
        threads.add(cid, record.metadata, record.created_at)
        for entity in record.entities:
            entity_cells[entity].add(cid)
        docs = self._kept_docs()
        if docs is not None and record.entities:
            doc = self.lexical.number_of(cid)
            for entity in dict.fromkeys(record.entities):
                held = docs.get(entity)
                if held is None:
                    docs[entity] = array("q", (doc,))
                else:
                    held.append(doc)  # the largest number yet

    def drop(self, cid: str) -> CellRecord | None:
        entity_cells, threads = self.entity_cells, self.threads
        record = self.records.pop(cid, None)
        if record is None:
            return None
        doc = self.lexical.number_of(cid)
        self.lexical.remove(cid)
        threads.remove(cid)
        for entity in record.entities:
            cells = entity_cells.get(entity)
            if cells is not None:
                cells.discard(cid)
                if not cells:
                    del entity_cells[entity]
        docs = self._kept_docs()
        if docs is not None and doc >= 0:
            for entity in record.entities:
                held = docs.get(entity)
                if held is not None and doc in held:
                    held.remove(doc)
                    if not held:
                        del docs[entity]
        return record

    def _kept_docs(self) -> dict[str, array[int]] | None:
        """The entity numbers to keep up to date after a change of the lexical index: None
        when none are made, or when the change numbered the cells anew (they are then
        made again when next asked for)."""
        docs = self._entity_docs
        if docs is not None and self._docs_numbering != self.lexical.numbering:
            self._entity_docs = docs = None
        return docs

    def clear(self) -> None:
        self.records.clear()
        self._entity_cells = defaultdict(set)
        self._entity_docs = None
        self.lexical.clear()
        self._threads = Threads()
        self._labels.clear()

    def cells_with(self, entities: Iterable[str], max_share: float) -> set[str]:
        """Cells holding any of ``entities``, skipping entities too common to discriminate."""
        limit = max(10, int(max_share * len(self.records)))
        found: set[str] = set()
        for entity in entities:
            cells = self.entity_cells.get(entity)
            if cells and len(cells) <= limit:
                found |= cells
        return found

    def label(self, gid: str, version: int, member_ids: list[str]) -> tuple[str, tuple[str, ...]]:
        """A short label (characteristic terms or entities) and top entities of a group.

        Terms are ranked by frequency in the group times inverse document frequency in
        the whole store, so words every memory shares do not name a concept. Cached per
        group version; a group's label is kept while fewer than an eighth of its members
        changed since it was computed (a few new cells do not rename a concept, and a
        search under steady writes would otherwise relabel every hit's group).
        """
        cached = self._labels.get(gid)
        if cached is not None and (
            cached[0] == version
            or (cached[3] is member_ids and 0 < version - cached[0] <= len(member_ids) // 8)
        ):
            return cached[1], cached[2]
        sample = member_ids[:100]
        words, counts, df = self.lexical.term_counts(sample)
        entity_counts: Counter[str] = Counter()
        for cid in sample:
            entity_counts.update(self.records.entities_of(cid))
        top_entities = tuple(e for e, _ in entity_counts.most_common(5))
        shared_entities = [
            e
            for e, c in entity_counts.most_common(4)
            if (c > 1 or len(sample) == 1) and _entity_labels(e)
        ][:2]
        label = " / ".join(_label_words(words, counts, df, len(self.records), shared_entities))
        label = label or gid
        # The member list is kept so that its identity marks the same group.
        self._labels[gid] = (version, label, top_entities, member_ids)
        return label, top_entities

    def labels_of(self, groups: Iterable[Group]) -> list[tuple[str, tuple[str, ...]]]:
        """``(label, top entities)`` of each group, computed where not cached (a snapshot
        keeps them, so a store that was just opened labels its hits without work)."""
        return [self.label(g.gid, g.version, g.ids) for g in groups]

    def restore_labels(
        self, groups: Iterable[Group], labels: Iterable[tuple[str, tuple[str, ...]]]
    ) -> None:
        """Take the labels :meth:`labels_of` gave for these groups, as they are now."""
        for group, (label, entities) in zip(groups, labels, strict=True):
            self._labels[group.gid] = (group.version, label, entities, group.ids)

    def forget_label(self, gid: str) -> None:
        self._labels.pop(gid, None)
