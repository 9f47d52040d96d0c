"""BM25 postings as a snapshot stores them, read in place (no per-term arrays are made).

:class:`FlatPostings` holds the flat arrays :meth:`LexicalIndex.export_arrays
<magnetic_core._text.lexical.LexicalIndex.export_arrays>` writes; :class:`DocTerms` maps a
document to its distinct terms over those arrays, plus documents set since, once the
index has turned its postings back into per-term arrays for a write.
"""

from __future__ import annotations

import functools
from array import array
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass

import numpy as np

__all__ = ["DocTerms", "FlatPostings"]


@dataclass(frozen=True)
class FlatPostings:
    """Postings as :meth:`LexicalIndex.export_arrays` gives them, read in place."""

    terms: list[str]
    vocab: dict[str, int]
    surface: list[str]  # the word shown for each term (a group label shows words)
    starts: np.ndarray  # (V + 1,) offsets into docs / tfs / lens
    docs: np.ndarray
    tfs: np.ndarray
    lens: np.ndarray  # each posting's document length (the kernels read it in order)
    doc_terms: np.ndarray
    doc_term_starts: np.ndarray

    @classmethod
    def of(
        cls, arrays: Mapping[str, np.ndarray], terms: list[str], surface: list[str]
    ) -> FlatPostings:
        """The postings of an export's arrays (``LexicalIndex.export_arrays``)."""
        docs = np.ascontiguousarray(arrays["docs"], np.int64)
        return cls(
            terms=terms,
            vocab=dict(zip(terms, range(len(terms)))),
            # a term shown as itself is one string, not two equal ones
            surface=[t if w == t else w for t, w in zip(terms, surface, strict=True)],
            starts=np.ascontiguousarray(arrays["term_starts"], np.int64),
            docs=docs,
            tfs=np.ascontiguousarray(arrays["tfs"], np.float32),
            lens=np.asarray(arrays["lengths"], np.float32)[docs],
            doc_terms=np.ascontiguousarray(arrays["doc_terms"], np.int64),
            doc_term_starts=np.ascontiguousarray(arrays["doc_term_starts"], np.int64),
        )

    def per_term(self) -> dict[str, tuple[array, array, array]]:
        """Each term's postings as growable ``array`` triples (docs, tfs, lens), for writes."""
        postings: dict[str, tuple[array, array, array]] = {}
        starts = self.starts.tolist()
        for i, term in enumerate(self.terms):
            d, f, n = array("q"), array("f"), array("f")
            d.frombytes(self.docs[starts[i] : starts[i + 1]].tobytes())
            f.frombytes(self.tfs[starts[i] : starts[i + 1]].tobytes())
            n.frombytes(self.lens[starts[i] : starts[i + 1]].tobytes())
            postings[term] = (d, f, n)
        return postings

    def posting_at(self, term: str) -> tuple[int, int, int, int] | None:
        """A term's postings by address: ``(docs', tfs', lengths' addresses, count)``."""
        at = self.vocab.get(term)
        if at is None:
            return None
        lo, hi = int(self.starts[at]), int(self.starts[at + 1])
        docs_at, tfs_at, lens_at = self._addresses
        return docs_at + 8 * lo, tfs_at + 4 * lo, lens_at + 4 * lo, hi - lo

    @functools.cached_property
    def _addresses(self) -> tuple[int, int, int]:
        return self.docs.ctypes.data, self.tfs.ctypes.data, self.lens.ctypes.data

    def posting(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        at = self.vocab.get(term)
        if at is None:
            return None
        lo, hi = int(self.starts[at]), int(self.starts[at + 1])
        return self.docs[lo:hi], self.tfs[lo:hi]


class DocTerms(MutableMapping[int, tuple[str, ...]]):
    """Document -> its distinct terms: the flat arrays' documents, then those set since."""

    def __init__(self, flat: FlatPostings) -> None:
        self._flat = flat
        self._set: dict[int, tuple[str, ...]] = {}
        self._gone: set[int] = set()
        self._n = flat.doc_term_starts.shape[0] - 1

    def _flat_has(self, doc: int) -> bool:
        return 0 <= doc < self._n and doc not in self._gone

    def __getitem__(self, doc: int) -> tuple[str, ...]:
        found = self._set.get(doc)
        if found is not None:
            return found
        if not self._flat_has(doc):
            raise KeyError(doc)
        flat = self._flat
        lo, hi = int(flat.doc_term_starts[doc]), int(flat.doc_term_starts[doc + 1])
        return tuple(flat.terms[t] for t in flat.doc_terms[lo:hi].tolist())

    def __setitem__(self, doc: int, terms: tuple[str, ...]) -> None:
        self._set[doc] = terms

    def __delitem__(self, doc: int) -> None:
        if self._set.pop(doc, None) is None and not self._flat_has(doc):
            raise KeyError(doc)
        if 0 <= doc < self._n:
            self._gone.add(doc)

    def __iter__(self) -> Iterator[int]:
        yield from (d for d in range(self._n) if d not in self._gone and d not in self._set)
        yield from self._set

    def __len__(self) -> int:
        return sum(1 for _ in self)
