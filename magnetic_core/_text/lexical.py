"""BM25 over the cells' words: the lexical stage that search fuses with dense scores.

Dense embeddings blur rare words (gene names, codes, numbers) that a user types on purpose;
BM25 rewards exactly those. Words are indexed by their Snowball (Porter 2) English stem, so
"painted" finds "painting" and "researched" finds "research": people rarely ask in the
inflection they wrote in. Cells get integer document numbers; each term keeps compact
``array`` postings (document numbers, term frequencies and the documents' lengths, read
in the order of the numbers: no random look-up of a length per posting) that a query reads in place
(by address) and scores in one compiled pass (:mod:`magnetic_core._text.bm25`):
a query's cost is the length of its terms' postings, and it keeps no memory.

An index read back from a store's snapshot (:meth:`LexicalIndex.from_arrays`) keeps the
postings as the snapshot's flat arrays and queries them in place; the per-term ``array``
postings are made only when a cell is first added or removed (a store that is opened to
be searched never pays for them).
"""

from __future__ import annotations

import functools
import itertools
import threading
from array import array
from collections import Counter
from collections.abc import Iterable, MutableMapping
from operator import itemgetter

import numpy as np

from magnetic_core._search.sublists import ranges
from magnetic_core._text.bm25_query import BM25Queries
from magnetic_core._text.flat_postings import DocTerms, FlatPostings
from magnetic_core._text.tokenize import distinct_terms, index_terms, stem, terms

__all__ = ["LexicalIndex", "index_terms", "stem"]

# The postings' document numbers: int64 on every platform (the BM25 kernels read them so).
_DOCS = "q"

# Keys of document numberings, unique across indexes: see ``LexicalIndex.numbering``.
_NUMBERINGS = itertools.count()


_query_terms = functools.lru_cache(maxsize=256)(distinct_terms)


class LexicalIndex(BM25Queries):
    """An incremental BM25 index keyed by cell id.

    Args:
        k1: term-frequency saturation.
        b: length normalisation.

    Example:
        >>> lex = LexicalIndex()
        >>> _ = lex.add("a", "gene BRCA1 mutation"), lex.add("b", "protein folding")
        >>> lex.top(lex.query_terms("BRCA1"), 5)[0]
        ['a']
    """

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._thawing = threading.Lock()
        self._local = threading.local()  # each searching thread's BM25 scratch row
        self.clear()

    def clear(self) -> None:
        """Forget every cell."""
        # Document numbers name cells in the search's arrays (the scorer keeps each coded
        # cell's). A removed cell's number is never given again, so a kept number is either
        # still its cell's or dead (:meth:`dead`; a re-added cell has a new one); this key
        # changes when numbers are given anew (a compaction, a clear) and every kept
        # number must be looked up again.
        self.numbering = next(_NUMBERINGS)
        # Moves on with every change of the indexed cells (readers keep what they derived
        # from the numbers, such as an entity's cells, while it stands).
        self.generation = next(_NUMBERINGS)
        self._flat: FlatPostings | None = None
        self._docno: dict[str, int] = {}
        self._cids: list[str | None] = []
        # Whether each number is still its cell's, by number (capacity doubles): a search
        # asks this of hundreds of numbers, and one byte each stays in cache where the
        # list of ids does not (0.12 ms for 256 numbers read through the list at 25K cells).
        self._alive = np.zeros(1024, bool)
        self._length = array("f")
        self._doc_terms: MutableMapping[int, tuple[str, ...]] = {}
        # term -> (document numbers, term frequencies, the documents' lengths)
        self._postings: dict[str, tuple[array, array, array]] = {}
        # Term -> the word that first brought it, when the stem is not that word itself
        # ("paint" -> "painted"): labels show words. Dropped with the term's last posting.
        self._surface: dict[str, str] = {}
        self._total_length = 0.0

    def __len__(self) -> int:
        return len(self._docno)

    def add(self, cid: str, text: str) -> tuple[str, ...]:
        """Index (or re-index) a cell's text; returns its distinct words (unstemmed) in order."""
        self._thaw()
        self.generation = next(_NUMBERINGS)
        if cid in self._docno:
            self.remove(cid)
        words = Counter(terms(text))
        counts: Counter[str] = Counter()
        postings, surface = self._postings, self._surface
        for word, tf in words.items():  # each distinct word stemmed once
            term = stem(word)
            if term != word and term not in counts and term not in postings:
                surface.setdefault(term, word)
            counts[term] += tf
        doc = len(self._cids)
        self._docno[cid] = doc
        self._cids.append(cid)
        if doc >= self._alive.shape[0]:
            grown = np.zeros(2 * self._alive.shape[0], bool)
            grown[:doc] = self._alive[:doc]
            self._alive = grown
        self._alive[doc] = True
        length = float(sum(counts.values()))
        self._length.append(length)
        self._total_length += length
        distinct = tuple(counts)
        self._doc_terms[doc] = distinct
        for term, tf in counts.items():
            post = postings.get(term)
            if post is None:
                postings[term] = (array(_DOCS, (doc,)), array("f", (tf,)), array("f", (length,)))
            else:
                post[0].append(doc)
                post[1].append(tf)
                post[2].append(length)
        return tuple(words)

    def remove(self, cid: str) -> None:
        """Drop a cell (missing ids are ignored)."""
        if cid not in self._docno:
            return
        self._thaw()
        self.generation = next(_NUMBERINGS)
        doc = self._docno.pop(cid)
        self._cids[doc] = None  # numbers are never given again (until a compaction)
        self._alive[doc] = False
        self._total_length -= self._length[doc]
        for term in self._doc_terms.pop(doc):
            docs, tfs, lens = self._postings[term]
            at = docs.index(doc)
            del docs[at]
            del tfs[at]
            del lens[at]
            if not docs:
                del self._postings[term]
                self._surface.pop(term, None)
        if len(self._cids) > 1024 and len(self._docno) < len(self._cids) // 2:
            self._compact()

    def _compact(self) -> None:
        """Renumber live documents so removed ones stop costing memory and time."""
        self.numbering = self.generation = next(_NUMBERINGS)
        old = {cid: doc for cid, doc in self._docno.items()}
        renumber = {doc: new for new, doc in enumerate(sorted(old.values()))}
        self._cids = [None] * len(renumber)
        self._alive = np.zeros(max(1024, 2 * len(renumber)), bool)
        self._alive[: len(renumber)] = True
        length = array("f", [0.0] * len(renumber))
        for cid, doc in old.items():
            new = renumber[doc]
            self._docno[cid] = new
            self._cids[new] = cid
            length[new] = self._length[doc]
        self._length = length
        self._doc_terms = {renumber[d]: t for d, t in self._doc_terms.items()}
        for term, (docs, tfs, lens) in self._postings.items():
            self._postings[term] = (array(_DOCS, (renumber[d] for d in docs)), tfs, lens)

    def df(self, term: str) -> int:
        """Number of cells holding ``term`` (a word, stemmed here, or a stem)."""
        post = self._posting(stem(term))
        return len(post[0]) if post is not None else 0

    def _posting(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """A term's (docs, tfs) as numpy views (released by the caller before a write)."""
        flat = self._flat
        if flat is not None:
            return flat.posting(term)
        post = self._postings.get(term)
        if post is None:
            return None
        return np.frombuffer(post[0], dtype=np.int64), np.frombuffer(post[1], dtype=np.float32)

    def _posting_at(self, term: str) -> tuple[int, int, int, int] | None:
        """A term's postings by address (see ``BM25Queries.kernel_args``)."""
        flat = self._flat
        if flat is not None:
            return flat.posting_at(term)
        post = self._postings.get(term)
        if post is None:
            return None
        docs_at, n = post[0].buffer_info()
        return docs_at, post[1].buffer_info()[0], post[2].buffer_info()[0], n

    def term_counts(self, cids: Iterable[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The terms the given cells hold, as words: ``(words, cells, df)``.

        ``cells[i]`` is how many of the given cells hold term ``i`` and ``df[i]`` how many
        cells of the whole index do; ``words[i]`` is the word that first brought the term
        (its stem when the stem is a word of the texts). Cells not indexed are skipped.
        Array operations over the documents' term lists: no text is tokenized again.
        """
        docno = self._docno
        docs = [docno[c] for c in cids if c in docno]
        flat = self._flat
        if flat is not None:
            at = np.asarray(docs, np.int64)
            starts = flat.doc_term_starts
            held = flat.doc_terms[ranges(starts[at], starts[at + 1] - starts[at])]
            ids, cells = np.unique(held, return_counts=True)
            df = flat.starts[ids + 1] - flat.starts[ids]
            return [flat.surface[i] for i in ids.tolist()], cells, df
        # map() over the containers' own methods: no Python frame per term (a group of
        # a hundred cells holds thousands, and labelling it is part of a search).
        counted = Counter(itertools.chain.from_iterable(map(self._doc_terms.__getitem__, docs)))
        held_terms = list(counted)
        postings, surface = self._postings, self._surface
        n = len(held_terms)
        held_postings = map(itemgetter(0), map(postings.__getitem__, held_terms))
        return (
            list(map(surface.get, held_terms, held_terms)),
            np.fromiter(counted.values(), np.int64, n),
            np.fromiter(map(len, held_postings), np.int64, n),
        )

    @staticmethod
    def query_terms(text: str) -> tuple[str, ...]:
        """The distinct stemmed content words of a query (kept for the last few hundred
        queries, as their entities are)."""
        return _query_terms(text)

    def numbers(self, cids: Iterable[str]) -> np.ndarray:
        """The document number of each cell (-1 for a cell not indexed), int64."""
        cids = cids if isinstance(cids, list) else list(cids)
        # map() over the dict's own get: no Python frame per cell.
        return np.fromiter(
            map(self._docno.get, cids, itertools.repeat(-1)), np.int64, count=len(cids)
        )

    def number_of(self, cid: str) -> int:
        """A cell's document number (-1 for a cell not indexed)."""
        return self._docno.get(cid, -1)

    def cids_of(self, docs: np.ndarray) -> list[str]:
        """The cell ids of live document numbers (from :meth:`numbers` or :meth:`scores`)."""
        cids = self._cids
        return [cids[d] for d in docs.tolist()]  # type: ignore[misc]  # live: never None

    @property
    def liveness(self) -> np.ndarray:
        """Whether each number is still its cell's, by number (False past the last one)."""
        return self._alive

    def cid_of(self, doc: int) -> str:
        """The cell id of a live document number."""
        return self._cids[doc]  # type: ignore[return-value]  # live: never None

    # -- snapshot (magnetic_core._store.index_file) --------------------------------------
    def export_arrays(self) -> dict[str, np.ndarray]:
        """The live postings as flat arrays (removed documents left out, renumbered).

        Returns ``cids`` and ``terms`` (str arrays of objects are avoided: each is one
        UTF-8 blob with offsets, see the caller), plus ``lengths`` (per document),
        ``term_starts`` (CSR offsets into ``docs``/``tfs``) and ``doc_terms`` with
        ``doc_term_starts`` (each document's distinct terms as indices into ``terms``, in
        the order :meth:`add` returned them).
        """
        self._thaw()
        live = sorted(self._docno.values())
        renumber = np.full(len(self._cids), -1, np.int64)
        renumber[live] = np.arange(len(live))
        vocab = list(self._postings)
        position = {t: i for i, t in enumerate(vocab)}
        sizes = np.fromiter((len(p[0]) for p in self._postings.values()), np.int64, len(vocab))
        docs = np.empty(int(sizes.sum()), np.int64)
        tfs = np.empty(docs.shape[0], np.float32)
        at = 0
        for d, f, _ in self._postings.values():
            docs[at : at + len(d)] = np.frombuffer(d, dtype=np.int64)
            tfs[at : at + len(f)] = np.frombuffer(f, dtype=np.float32)
            at += len(d)
        doc_terms = [position[t] for doc in live for t in self._doc_terms[doc]]
        counts = [len(self._doc_terms[doc]) for doc in live]
        surface = self._surface
        return {
            "cids": np.array([self._cids[d] for d in live], dtype=object),
            "terms": np.array(vocab, dtype=object),
            "surface": np.array([surface.get(t, t) for t in vocab], dtype=object),
            "lengths": np.frombuffer(self._length, dtype=np.float32)[live].copy(),
            "term_starts": np.concatenate([[0], np.cumsum(sizes)]),
            "docs": renumber[docs],
            "tfs": tfs,
            "doc_terms": np.asarray(doc_terms, np.int64),
            "doc_term_starts": np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]),
        }

    @classmethod
    def from_arrays(
        cls,
        arrays: dict[str, np.ndarray],
        cids: list[str],
        terms: list[str],
        surface: list[str] | None = None,
    ) -> LexicalIndex:
        """An index over :meth:`export_arrays`' postings, read in place until a write.

        ``surface`` is the export's ``surface`` (the word shown for each term); without
        it, terms are shown as their stems.
        """
        lex = cls()
        lengths = np.asarray(arrays["lengths"], np.float32)
        starts = np.ascontiguousarray(arrays["term_starts"], np.int64)
        surface = list(terms) if surface is None else list(surface)
        if (
            lengths.shape[0] != len(cids)
            or starts.shape[0] != len(terms) + 1
            or len(surface) != len(terms)
        ):
            raise ValueError("the BM25 arrays do not agree in length")
        lex._cids = list(cids)
        lex._alive = np.zeros(max(1024, 2 * len(cids)), bool)
        lex._alive[: len(cids)] = True
        lex._docno = dict(zip(cids, range(len(cids))))
        lex._length = array("f", lengths.tobytes())
        lex._total_length = float(lengths.sum(dtype=np.float64))
        lex._flat = FlatPostings.of(arrays, list(terms), surface)
        return lex

    def _thaw(self) -> None:
        """Turn flat postings into per-term ``array`` postings (before the first change)."""
        if self._flat is None:
            return
        with self._thawing:
            flat = self._flat
            if flat is None:
                return  # another thread thawed meanwhile
            postings = flat.per_term()
            self._doc_terms = DocTerms(flat)  # made per document when it is next needed
            self._surface = {t: w for t, w in zip(flat.terms, flat.surface) if t != w}
            self._postings = postings
            self._flat = None
            self.generation = next(_NUMBERINGS)  # the postings moved
