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
        ['a', 'c']
    """

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget every cell."""
        self._of: dict[str, tuple[Hashable, _Key]] = {}
        self._members: dict[Hashable, list[tuple[_Key, str]]] = {}
        self._number: dict[str, int] = {}  # cid -> a number per thread, for numpy
        self._numbers: dict[Hashable, int] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._of)

    def add(self, cid: str, metadata: Mapping[str, Any], created_at: float) -> None:
        """Place a cell in its thread (a cell without one is ignored; re-adding moves it)."""
        self.remove(cid)
        thread = thread_of(metadata)
        if thread is None:
            return
        turn = metadata.get(TURN_KEY)
        numeric = isinstance(turn, (int, float)) and not isinstance(turn, bool)
        position = float(turn) if numeric and math.isfinite(turn) else math.inf
        key = (position, float(created_at), next(self._seq))
        self._of[cid] = (thread, key)
        self._number[cid] = self._numbers.setdefault(thread, len(self._numbers))
        bisect.insort(self._members.setdefault(thread, []), (key, cid))

    def remove(self, cid: str) -> None:
        """Take a cell out of its thread (missing ids are ignored)."""
        found = self._of.pop(cid, None)
        if found is None:
            return
        thread, key = found
        del self._number[cid]
        members = self._members[thread]
        del members[bisect.bisect_left(members, (key, cid))]
        if not members:
            del self._members[thread]
            del self._numbers[thread]

    def numbers(self, ids: list[str]) -> np.ndarray:
        """A number per cell naming its thread (the same for one thread), -1 for none."""
        get = self._number.get
        return np.fromiter((get(c, -1) for c in ids), dtype=np.int64, count=len(ids))

    def neighbours(self, cid: str, width: int = 1) -> list[str]:
        """The cells up to ``width`` turns before and after ``cid`` in its thread."""
        found = self._of.get(cid)
        if found is None:
            return []
        thread, key = found
        members = self._members[thread]
        at = bisect.bisect_left(members, (key, cid))
        lo, hi = max(at - width, 0), min(at + width + 1, len(members))
        return [members[j][1] for j in range(lo, hi) if j != at]


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
        pos = {cid: i for i, cid in enumerate(ids)}
        touched = dict.fromkeys(np.argsort(-rank, kind="stable")[:top].tolist())
        for i in list(touched):
            touched.update((pos[nb], None) for nb in threads.neighbours(ids[i]) if nb in pos)
        for i in touched:
            near = [pos[nb] for nb in threads.neighbours(ids[i]) if nb in pos]
            if near:
                out[i] += neighbour_weight * float(base[near].max())
    return out
