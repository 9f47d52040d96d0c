"""The read half of a store batch: get, search (ranked or listed) and TTL refresh on read."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from langgraph.store.base import GetOp, Item, SearchItem, SearchOp

from magnetic_langchain.store.filters import ValuePredicate, compile_value_filter
from magnetic_langchain.store.records import item_from_cell, search_item
from magnetic_langchain.store.space import Space

if TYPE_CHECKING:
    from magnetic_langchain.store.base import MagneticStore

__all__ = ["Reader"]

# (score, namespace, key, (group id, group label)) of one ranked match.
_Match = tuple[float, tuple[str, ...], str, tuple[str, str]]


class Reader:
    """Answers the reads of one batch at one instant ``now`` and collects TTL refreshes."""

    def __init__(self, store: MagneticStore, now: float) -> None:
        self.store = store
        self.now = now
        self._refresh: dict[tuple[str, ...], list[str]] = defaultdict(list)

    def _live(self, space: Space) -> Callable[[str], bool]:
        if not self.store._omit or not space.expiry:
            return lambda key: True
        return lambda key: space.alive(key, self.now)

    def has_live(self, namespace: tuple[str, ...]) -> bool:
        """Whether the namespace holds an item that has not expired."""
        space = self.store._space(namespace)
        if space is None:
            return False
        if not space.expiry:
            return True
        expired = sum(1 for k in space.expiry if not space.alive(k, self.now))
        return space.size > expired

    def get(self, op: GetOp) -> Item | None:
        """The item, or None when it is missing or expired."""
        space = self.store._space(op.namespace)
        if space is None:
            return None
        cell = space.records([op.key]).get(op.key)
        if cell is None or not self._live(space)(op.key):
            return None
        if op.refresh_ttl:
            self._refresh[op.namespace].append(op.key)
        return item_from_cell(op.namespace, cell)

    def search(self, op: SearchOp, vector: np.ndarray | None) -> list[SearchItem]:
        """Items under the prefix passing the filter: by similarity, else newest first."""
        value_filter = compile_value_filter(op.filter)
        spaces = self.store._spaces_under(tuple(op.namespace_prefix))
        if op.limit <= 0 or not spaces:
            return []
        if vector is not None:
            found = self._ranked(op, spaces, vector, value_filter)
        else:
            found = self._listed(op, spaces, value_filter)
        if op.refresh_ttl:
            for item in found:
                self._refresh[item.namespace].append(item.key)
        return found

    def _ranked(
        self,
        op: SearchOp,
        spaces: list[Space],
        vector: np.ndarray,
        value_filter: ValuePredicate | None,
    ) -> list[SearchItem]:
        query = op.query if self.store.hybrid else None
        matches: list[_Match] = []
        for space in spaces:
            for hit in space.nearest(
                vector, op.offset + op.limit, value_filter, self._live(space), query
            ):
                group = (hit.group_id, hit.group_label)
                matches.append((hit.rank_score, space.namespace, hit.metadata["key"], group))
        matches.sort(key=lambda m: -m[0])
        best: dict[tuple[tuple[str, ...], str], _Match] = {}
        for match in matches:  # an item scores as its best vector
            best.setdefault((match[1], match[2]), match)
        page = list(best.values())[op.offset : op.offset + op.limit]
        ranked = self._items(page, spaces)
        if len(ranked) < op.limit:  # as LangGraph's stores: unindexed items fill the page
            ranked += self._listed(op, spaces, value_filter, unindexed_only=True)[
                : op.limit - len(ranked)
            ]
        return ranked

    def _items(self, page: list[_Match], spaces: list[Space]) -> list[SearchItem]:
        by_ns = {s.namespace: s for s in spaces}
        wanted: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for _, ns, key, _ in page:
            wanted[ns].append(key)
        cells = {ns: by_ns[ns].records(keys) for ns, keys in wanted.items()}
        groups = self.store.include_groups
        return [
            search_item(item_from_cell(ns, cells[ns][key]), score, group if groups else None)
            for score, ns, key, group in page
            if key in cells[ns]
        ]

    def _listed(
        self,
        op: SearchOp,
        spaces: list[Space],
        value_filter: ValuePredicate | None,
        *,
        unindexed_only: bool = False,
    ) -> list[SearchItem]:
        rows: list[tuple[Space, Any]] = []
        for space in spaces:
            cells = space.scan(value_filter, self._live(space), unindexed_only=unindexed_only)
            rows += [(space, c) for c in cells]
        # Newest first, as LangGraph's database stores order a search without a query.
        rows.sort(key=lambda r: (-r[1].metadata["up"], r[0].namespace, r[1].metadata["key"]))
        start = 0 if unindexed_only else op.offset
        out = []
        for space, cell in rows[start : start + op.limit]:
            item = item_from_cell(space.namespace, cell)
            group = None
            if self.store.include_groups:
                group = (cell.group_id, space.memory.group(cell.group_id).label)
            out.append(search_item(item, None, group))
        return out

    def refresh(self) -> None:
        """Restart the TTL clock of every item this batch read."""
        for ns, keys in self._refresh.items():
            space = self.store._space(ns)
            if space is not None and space.expiry:
                space.refresh(list(dict.fromkeys(keys)), self.now)
