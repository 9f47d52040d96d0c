"""The query side of BM25: a query's scores, its best documents and a pool's scores.

:class:`BM25Queries` is a base of :class:`~magnetic_core._text.lexical.LexicalIndex`: it
reads the index's postings (by address) and runs the compiled passes of
:mod:`magnetic_core._text.bm25`, each thread with its own zeroed scratch row.
"""

from __future__ import annotations

import math
import struct
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["BM25Queries"]


# What a term's part of the kernels' arguments is, per index generation, for this many
# terms at most (then forgotten all at once): a query's terms are mostly ones asked for
# before, and a term's postings looked up again cost a text query about 8 us at 100K
# cells with the caches cold. Every change of the postings moves the generation (a write
# may move them in memory), so the addresses kept are those of the current postings.
_TERMS_KEPT = 1 << 16
_UNKNOWN: Any = object()  # (a term not looked up yet)
# A term's row of the kernels' ``terms`` (``bm25.bm25_pool``): the addresses of its
# postings' numbers, term frequencies and lengths, their count, and its weight's float64
# bits, in native order.
_TERM_ROW = struct.Struct("=4qd")


class BM25Queries:
    """BM25 scoring over an index's postings (see :class:`LexicalIndex`)."""

    max_df_share = 0.5
    k1: float
    b: float
    generation: int
    # (generation, term -> its part of ``kernel_args`` or None), replaced as a whole.
    _term_args: tuple[int, dict[str, bytes | None]] = (-1, {})
    _docno: dict[str, int]
    _cids: list[str | None]
    _total_length: float
    _local: threading.local

    # Provided by the index.
    def _posting(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        raise NotImplementedError

    def _posting_at(self, term: str) -> tuple[int, int, int, int] | None:
        """A term's postings by address: ``(docs', tfs', lengths' addresses, count)``."""
        raise NotImplementedError

    def cids_of(self, docs: np.ndarray) -> list[str]:
        raise NotImplementedError

    def numbers(self, cids: Iterable[str]) -> np.ndarray:
        raise NotImplementedError

    def scores(self, query: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """BM25 of every cell sharing a term with the query.

        Terms held by more than ``max_df_share`` of the cells (in stores of at least 20
        cells) are skipped: their IDF is below log 2, so they barely move a ranking, yet
        scoring them touches most of the store (a word in every cell of a 1M store cost
        30 ms per query).

        Returns:
            ``(docs, scores)``: document numbers (ascending) and their BM25 scores.
        """
        return self.scores_of(self.kernel_args(query))

    @staticmethod
    def scores_of(args: tuple[Any, ...] | None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`scores` of a query whose :meth:`kernel_args` are at hand (None: no term
        scored)."""
        if args is None:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        from magnetic_core._text.bm25 import bm25_scores  # numba: imported on first use

        return bm25_scores(*args)

    def kernel_args(self, query: Iterable[str]) -> tuple[Any, ...] | None:
        """The BM25 kernels' arguments for ``query`` (None when no term is scored: no cell
        holds a word of it, or only words held by more than ``max_df_share`` of them).

        The postings are passed by address: they must not change until the kernel has
        returned (writes and searches of a store's index are ordered by the store's lock).
        """
        n = len(self._docno)
        if n == 0:
            return None
        kept = self._term_args
        if kept[0] != self.generation or len(kept[1]) >= _TERMS_KEPT:
            kept = self._term_args = (self.generation, {})
        args = kept[1]
        packed: list[bytes] = []
        for term in dict.fromkeys(query):
            got = args.get(term, _UNKNOWN)
            if got is _UNKNOWN:
                got = args[term] = self._term_arg(term, n)
            if got is not None:
                packed.append(got)
        if not packed:
            return None
        # (the terms' rows packed once each and joined: an array built from the terms'
        # numbers cost an 8-word query 7 us at 100K cells with the caches cold)
        terms = np.frombuffer(b"".join(packed), np.int64).reshape(len(packed), 5)
        avgdl = max(self._total_length / n, 1e-9)
        n_slots = len(self._cids)
        return terms, avgdl, self.k1, self.b, n_slots, self._scratch(n_slots)

    def _term_arg(self, term: str, n: int) -> bytes | None:
        """A term's row of :meth:`kernel_args`' ``terms`` in an index of ``n`` documents,
        packed: its postings' addresses, their count and its weight (None when the term is
        not scored)."""
        post = self._posting_at(term)
        most = self.max_df_share * n if n >= 20 else n
        if post is None or post[3] > most:
            return None
        df = post[3]
        weight = math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * (self.k1 + 1.0)
        return _TERM_ROW.pack(post[0], post[1], post[2], df, weight)

    def _scratch(self, n: int) -> np.ndarray:
        """This thread's zeroed float32 row of at least ``n`` entries (kept between queries:
        the kernel leaves it zeroed)."""
        acc = getattr(self._local, "acc", None)
        if acc is None or acc.shape[0] < n:
            acc = np.zeros(max(n, 1024, 0 if acc is None else 2 * acc.shape[0]), np.float32)
            self._local.acc = acc
        return acc

    def top(self, query: Iterable[str], n: int) -> tuple[list[str], np.ndarray]:
        """The ``n`` best cells by BM25: ``(ids, scores)``, best first."""
        return self.top_of(*self.scores(query), n)

    def top_of(self, docs: np.ndarray, vals: np.ndarray, n: int) -> tuple[list[str], np.ndarray]:
        """The ``n`` best of a :meth:`scores` result: ``(ids, scores)``, best first."""
        docs, vals = self.top_docs(docs, vals, n)
        return self.cids_of(docs), vals

    @staticmethod
    def top_docs(docs: np.ndarray, vals: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`top_of` by document number: ``(docs, scores)``, best first (ties: the
        lower number first). One compiled pass (a partition, then a sort of the best,
        cost a text query 0.2 ms at 25K cells)."""
        from magnetic_core._search.kernels import top_k  # numba: loaded by the scores

        order = top_k(vals, n)
        return docs[order], vals[order]

    def lookup(self, cids: Iterable[str], docs: np.ndarray, vals: np.ndarray) -> np.ndarray:
        """BM25 of the given cells from a :meth:`scores` result (0 where absent)."""
        return self.scores_at(self.numbers(cids), docs, vals)

    @staticmethod
    def scores_at(numbers: np.ndarray, docs: np.ndarray, vals: np.ndarray) -> np.ndarray:
        """BM25 of the given document numbers from a :meth:`scores` result (0 where absent)."""
        out = np.zeros(numbers.shape[0], np.float32)
        if docs.shape[0] == 0 or numbers.shape[0] == 0:
            return out
        at = np.searchsorted(docs, numbers)
        at = np.minimum(at, docs.shape[0] - 1)
        hit = docs[at] == numbers
        out[hit] = vals[at[hit]]
        return out
