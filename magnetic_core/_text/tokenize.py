"""The words of a text as the lexical stage and group labels see them.

One tokenizer for every place that counts words: BM25 indexing and queries
(:mod:`magnetic_core._text.lexical`), group labels (:mod:`magnetic_core._store.catalog`)
and the stored terms of a cell. Words are lower-cased runs of letters and digits (with an
English contraction kept whole: "don't"), stop words and one-letter words dropped; BM25
then indexes each word by its Snowball (Porter 2) English stem, so "painted" finds
"painting".
"""

from __future__ import annotations

import re
import threading

import snowballstemmer

__all__ = ["COMMON_WORDS", "STOPWORDS", "distinct_terms", "index_terms", "stem", "terms"]

# Words too common to name anything; capitalised, they also start sentences (the entity
# extractor skips them at the start of a capitalised phrase).
COMMON_WORDS = frozenset(
    """a an and are as at be but by can could did do does for from had has have he her his how
    i if in is it its let may me might my no not of on or our she should so that the their them
    then there these they this those to was we were what when where which who why will with
    would yes you your after before also all any because both each few more most other some
    such than too very just please thanks thank hi hello ok okay today yesterday tomorrow
    mr mrs ms dr monday tuesday wednesday thursday friday saturday sunday""".split()
)
STOPWORDS = COMMON_WORDS | frozenset(
    """about above again against am being below between during down further here into off
    once only out over own same through under until up while whom s t don now said says
    around within without across along among upon via per onto
    mln pct one two three four five six seven eight nine ten new year last first""".split()
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

_STEMMER = snowballstemmer.stemmer("english")
_STEM_LOCK = threading.Lock()  # a Snowball stemmer object keeps state while it stems
# Stems of the words seen so far: vocabularies repeat, and a dict read needs no lock. Words
# with a digit (ids, numbers, dates) do not repeat: a memory written to for months would fill
# the cache with them, so they are never kept. Those ending in a digit are their own stem
# (Snowball strips only letter suffixes), so only the rare others are stemmed each time.
# The cap bounds the rest (about 50 MB at most).
_STEMS: dict[str, str] = {}
_MAX_STEMS = 1 << 18
_DIGIT = re.compile(r"[0-9]")


def terms(text: str) -> list[str]:
    """Lower-cased content words of ``text`` (stop words dropped), for labels and BM25.

    >>> terms("The cat and the hat don't sit")
    ['cat', 'hat', "don't", 'sit']
    """
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 1]


def stem(word: str) -> str:
    """The Snowball English stem of a lower-cased word (cached: vocabularies repeat).

    >>> stem("painted"), stem("painting"), stem("studies")
    ('paint', 'paint', 'studi')
    """
    found = _STEMS.get(word)
    if found is None:
        if word[-1:].isdigit() and word[0] != "'":
            return word  # no English suffix ends in a digit: the stem is the word itself
        with _STEM_LOCK:
            found = str(_STEMMER.stemWord(word))
        if len(_STEMS) < _MAX_STEMS and _DIGIT.search(word) is None:
            _STEMS[word] = found
    return found


def index_terms(text: str) -> list[str]:
    """The stemmed content words of ``text``, in order, as BM25 indexes them.

    >>> index_terms("Researchers researched the research")
    ['research', 'research', 'research']
    """
    stems = _STEMS  # (the cached stems read here: a call per word costs a query ~2 us)
    return [s if (s := stems.get(w)) is not None else stem(w) for w in terms(text)]


def distinct_terms(text: str) -> tuple[str, ...]:
    """The distinct stemmed content words of ``text``, in order of first appearance: a
    query's BM25 terms (:func:`index_terms` without repeats, in one pass: a query runs it
    with its caches cold from the previous query's probe, where each call and list costs
    several times its warm time).

    >>> distinct_terms("Painted paintings, painted walls")
    ('paint', 'wall')
    """
    stems, stop = _STEMS, STOPWORDS
    found: dict[str, None] = {}
    for w in _WORD.findall(text.lower()):
        if len(w) > 1 and w not in stop:
            s = stems.get(w)
            found[s if s is not None else stem(w)] = None
    return tuple(found)
