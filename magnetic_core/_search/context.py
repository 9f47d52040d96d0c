"""Conversation threads: which cells were said next to each other, so a hit can lift its context.

A chat stored turn by turn answers a question across neighbouring turns ("what did Ana
research?" -> "I looked into adoption agencies" -> "which ones?"). Cells form a thread by
the metadata convention a chat app already follows: cells sharing a ``session_id`` (or
``thread_id``, ``conversation_id``) value are one thread, ordered by a numeric ``turn``
metadata value when given, otherwise by the order they were added. Search then lifts a
cell by the best score of its neighbours in the thread and by the best score in its whole
thread (see :func:`lift`): the session where the question's best match was said is where
the rest of the answer most likely is.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from magnetic_core._search.topk import top_indices

__all__ = ["SESSION_KEYS", "TURN_KEY", "Threads", "lift"]

# Metadata keys naming a cell's thread, first present wins: LangChain chat histories say
# ``session_id``, LangGraph ``thread_id``.
SESSION_KEYS = ("session_id", "thread_id", "conversation_id")
# Numeric position of a cell in its thread; without it, the order of adds.
TURN_KEY = "turn"

_Key = tuple[float, float, int]


def thread_of(metadata: Mapping[str, Any]) -> Hashable | None:
    """The thread a cell belongs to by its metadata, or None."""
    for key in SESSION_KEYS:
        value = metadata.get(key)
        if value is not None and not isinstance(value, (list, dict, bool)):
            return (key, value)
    return None


class Threads:
    """Cells grouped by thread, each thread in turn order (incremental, like the catalog).

    Example:
        >>> t = Threads()
        >>> for i, cid in enumerate("abc"):
        ...     t.add(cid, {"session_id": "s1", "turn": i}, created_at=0.0)
        >>> t.neighbours("b")
        ('a', 'c')
    """

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget every cell."""
        self._of: dict[str, tuple[Hashable, _Key]] = {}
        self._members: dict[Hashable, list[tuple[_Key, str]]] = {}
        self._number: dict[str, int] = {}  # cid -> a number per thread, for numpy
        self._numbers: dict[Hashable, int] = {}
        self._near: dict[str, tuple[str, ...]] = {}  # cid -> the turns before and after it
        self._seq = itertools.count()
        self._thread_seq = itertools.count()

    def __len__(self) -> int:
        return len(self._of)

    def add(self, cid: str, metadata: Mapping[str, Any], created_at: float) -> None:
        """Place a cell in its thread (a cell without one is ignored; re-adding moves it)."""
        self.remove(cid)
        thread = thread_of(metadata)
        if thread is None:
            return
        turn = metadata.get(TURN_KEY)
        position = math.inf
        if isinstance(turn, (int, float)) and not isinstance(turn, bool) and math.isfinite(turn):
            position = float(turn)
        key = (position, float(created_at), next(self._seq))
        self._of[cid] = (thread, key)
        number = self._numbers.get(thread)
        if number is None:
            number = self._numbers[thread] = next(self._thread_seq)
        self._number[cid] = number
        members = self._members.setdefault(thread, [])
        at = bisect.bisect_left(members, (key, cid))
        members.insert(at, (key, cid))
        for j in (at - 1, at, at + 1):
            self._refresh(members, j)

    def remove(self, cid: str) -> None:
        """Take a cell out of its thread (missing ids are ignored)."""
        found = self._of.pop(cid, None)
        if found is None:
            return
        thread, key = found
        del self._number[cid]
        del self._near[cid]
        members = self._members[thread]
        at = bisect.bisect_left(members, (key, cid))
        del members[at]
        for j in (at - 1, at):
            self._refresh(members, j)
        if not members:
            del self._members[thread]
            del self._numbers[thread]

    def _refresh(self, members: list[tuple[_Key, str]], j: int) -> None:
        """Recompute the neighbours of the cell at position ``j`` (if there is one)."""
        if 0 <= j < len(members):
            self._near[members[j][1]] = tuple(
                members[i][1] for i in (j - 1, j + 1) if 0 <= i < len(members)
            )

    def numbers(self, ids: list[str]) -> np.ndarray:
        """A number per cell naming its thread (the same for one thread), -1 for none."""
        return np.fromiter(
            map(self._number.get, ids, itertools.repeat(-1)), dtype=np.int64, count=len(ids)
        )

    def neighbours(self, cid: str) -> tuple[str, ...]:
        """The cells of the turns just before and after ``cid`` in its thread."""
        return self._near.get(cid, ())


def lift(
    threads: Threads,
    ids: list[str],
    rank: np.ndarray,
    neighbour_weight: float,
    session_weight: float,
    top: int,
) -> np.ndarray:
    """Ranking scores with what each cell's thread adds to it.

    A cell in a thread gains ``session_weight`` times the best (positive) score of its
    thread among ``ids``; each of the best ``top`` cells, and every neighbour of them,
    gains ``neighbour_weight`` times the best score among its neighbouring turns. Both are
    computed from ``rank`` as given. Only the best ``top`` cells and their neighbours get the
    neighbour term (a cell far below every candidate is not lifted into the top by a
    neighbour far below too), so the cost is bounded whatever the pool size; ``ids`` must
    hold the neighbours to lift (the caller adds them to the pool first).

    Returns:
        A new array; ``rank`` is left as it was.
    """
    out = rank.copy()
    if not len(threads) or rank.shape[0] == 0:
        return out
    base = np.maximum(rank, 0.0)
    if session_weight > 0.0:
        numbers = threads.numbers(ids)
        inside = np.flatnonzero(numbers >= 0)
        if inside.size:
            _, which = np.unique(numbers[inside], return_inverse=True)
            best = np.zeros(int(which.max()) + 1, base.dtype)
            np.maximum.at(best, which, base[inside])
            out[inside] += np.asarray(session_weight * best[which], out.dtype)
    if neighbour_weight > 0.0:
        out += neighbour_weight * _best_neighbours(threads, ids, rank, base, top)
    return out


def _best_neighbours(
    threads: Threads, ids: list[str], rank: np.ndarray, base: np.ndarray, top: int
) -> np.ndarray:
    """Per row, the best ``base`` score among its neighbours, for the best ``top`` rows by
    ``rank`` and their neighbours (0 elsewhere); one gather, no per-cell numpy call."""
    pos = {cid: i for i, cid in enumerate(ids)}
    near: dict[int, list[int]] = {}

    def near_of(i: int) -> list[int]:
        found = near.get(i)
        if found is None:
            found = near[i] = [pos[nb] for nb in threads.neighbours(ids[i]) if nb in pos]
        return found

    best = top_indices(rank, top).tolist()
    touched = dict.fromkeys(best)
    for i in best:
        touched.update(dict.fromkeys(near_of(i)))
    rows: list[int] = []
    nbrs: list[int] = []
    for i in touched:
        for j in near_of(i):
            rows.append(i)
            nbrs.append(j)
    gain = np.zeros(rank.shape[0], base.dtype)
    if rows:
        np.maximum.at(gain, np.asarray(rows, np.int64), base[np.asarray(nbrs, np.int64)])
    return gain
