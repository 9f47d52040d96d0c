"""Entity extraction: file names, paths, emails, URLs, identifiers and capitalised phrases.

Entities are what an agent asks for by name ("what did we decide about config.yaml?"), and
what dense embeddings blur. They are extracted with regular expressions at ingest and at query
time, lower-cased, and indexed from entity to groups and cells.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Callable

from magnetic_core._text.tokenize import COMMON_WORDS

__all__ = ["extract_entities", "query_entities"]

_URL = re.compile(r"\bhttps?://[^\s<>\"')\]]+", re.IGNORECASE)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_PATH = re.compile(
    r"(?:~|\.{1,2})?(?:/[\w.-]+){2,}/?|\b[A-Za-z]:\\(?:[\w.-]+\\?)+|"
    r"\b[\w.-]+(?:/[\w.-]+){2,}|\b[\w-]+/[\w-]+\.[A-Za-z]{1,5}\b"
)
_FILE = re.compile(
    r"\b[\w-]+(?:\.[\w-]+)*\.(?:py|js|ts|tsx|jsx|json|ya?ml|toml|ini|cfg|conf|md|rst|txt|csv|"
    r"tsv|xml|html?|css|sql|sh|bash|rs|go|java|kt|c|h|cc|cpp|hpp|rb|php|swift|ipynb|pdf|docx?|"
    r"xlsx?|pptx?|png|jpe?g|gif|svg|log|lock|env|zip|gz|tar|parquet|db)\b",
    re.IGNORECASE,
)
# Identifiers: order numbers and codes mixing letters and digits (INV-2024-0042, PR#381, ABC123).
_IDENT = re.compile(
    r"\b(?=[\w#-]*\d)(?=[\w#-]*[A-Za-z])[A-Za-z0-9]+(?:[-_#][A-Za-z0-9]+)+\b|"
    r"\b[A-Z]{2,}[0-9]+[A-Z0-9]*\b|#\d{2,}\b"
)
_CAMEL = re.compile(r"\b[a-z]+(?:[A-Z][a-z0-9]+)+\b|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b")
_SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
_CAPS = re.compile(r"\b[A-Z][\w'&-]*[a-z0-9][\w'&-]*(?:\s+(?:of\s+|de\s+|van\s+)?[A-Z][\w'&-]*)*")
_ACRONYM = re.compile(r"\b[A-Z]{2,6}s?\b")
_ASCII_UPPER = re.compile(r"[A-Z]")  # (every phrase of ``_CAPS`` starts with one)

# Capitalised words that start sentences or are too common to name anything.
_STOP_CAPS = COMMON_WORDS


# Each pattern can match only where a cheaper necessary sign occurs (a file name ends in
# ".ext", a camel-case word has a lower-case letter or digit before a capital, ...): texts
# without that sign skip the pattern. Most texts hold no "/", "@", "_" or file name, and
# one scan for the sign costs far less than running the pattern at every word boundary.
_EXT = re.compile(_FILE.pattern[_FILE.pattern.index(r"\.(?:") :], re.IGNORECASE)
_UPPER_DIGIT = re.compile(r"[A-Z][0-9]")
# ASCII letters and digits by case ("a" lower or digit, "A" upper, " " other): a camel-case
# word needs "aA". Dropping non-ASCII characters first can only join such pairs, not split
# them, so the sign never misses one.
_CASES = bytes.maketrans(
    bytes(range(128)),
    bytes(
        ord("a") if chr(c).islower() or chr(c).isdigit() else ord("A") if chr(c).isupper() else 32
        for c in range(128)
    ),
)


def _camel_sign(text: str) -> bool:
    return b"aA" in text.encode("ascii", "ignore").translate(_CASES)


_SIGNS: tuple[tuple[re.Pattern[str], Callable[[str], bool]], ...] = (
    (_URL, lambda t: "://" in t),
    (_EMAIL, lambda t: "@" in t),
    (_PATH, lambda t: "/" in t or ":\\" in t),
    (_FILE, lambda t: _EXT.search(t) is not None),
    # a separator between letters or digits, a capital before a digit, or "#"
    (_IDENT, lambda t: "-" in t or "_" in t or "#" in t or _UPPER_DIGIT.search(t) is not None),
    (_CAMEL, _camel_sign),
    (_SNAKE, lambda t: "_" in t),
)
# Some sign of the patterns other than camel case's: "/", "@", "#", "_", "-", ":\\" (in
# "://" too), a capital before a digit, a file extension (the signs above, in one search).
_ANY_SIGN = re.compile(r"[/@#_-]|:\\|[A-Z][0-9]|" + _EXT.pattern, re.IGNORECASE)
_CAMEL_ONLY = tuple(s for s in _SIGNS if s[0] is _CAMEL)
# Any sign at all, camel case's too: an ASCII lower-case letter or digit before an ASCII
# capital, which every camel-case match holds (``_CAMEL``'s ranges are ASCII). Most texts
# show none, and then one search, not two, sends them straight to the capitalised
# phrases (the entities of an 8-word query after a probe: 29.6 -> 25.6 us).
_ANY_OR_CAMEL = re.compile(r"(?-i:[a-z0-9][A-Z])|" + _ANY_SIGN.pattern, re.IGNORECASE)
_QUOTES = ".,;:!?'\"()[]{}"
_SENTENCE_END = ".!?:\n\"'"


class _Spans:
    """Spans of the entities kept so far, asking whether a match lies inside one of them.

    Each pattern's matches come in order and never overlap one another, so a match can
    lie only inside a span kept by an earlier pattern. Those spans are frozen at the start
    of each pattern's pass into starts sorted with the running maximum of their ends: a
    match ``[start, end)`` is covered when the spans starting at or before ``start`` reach
    ``end``. One bisection per match keeps extraction linear in the text (a scan of every
    span per match made it quadratic in the number of entities).
    """

    def __init__(self) -> None:
        self.spans: list[tuple[int, int]] = []
        self._starts: list[int] = []
        self._reach: list[int] = []

    def freeze(self) -> None:
        """Index the spans kept so far; call before each pattern's pass."""
        if len(self.spans) == len(self._starts):
            return  # none kept since the last call
        ordered = sorted(self.spans)
        self._starts = [s for s, _ in ordered]
        self._reach = list(itertools.accumulate((e for _, e in ordered), max))

    def covered(self, start: int, end: int) -> bool:
        i = bisect.bisect_right(self._starts, start)
        return i > 0 and self._reach[i - 1] >= end


def extract_entities(text: str) -> list[str]:
    """Return the distinct entities of ``text``, lower-cased, in order of appearance.

    Time grows linearly with the length of the text.

    Example:
        >>> extract_entities("Ask Ada Lovelace about config.yaml at ada@example.org")
        ['ada@example.org', 'config.yaml', 'ask ada lovelace', 'ada lovelace']
    """
    found: dict[str, None] = {}
    # Most texts show no sign at all, or none but camel case's: one search says so. With
    # none, only capitalised phrases are kept, and nothing kept before covers them (no
    # spans or closure made: 8-word queries after a probe 18.0 -> 14.4 us, alternated).
    if _ANY_OR_CAMEL.search(text) is None:
        # With no capital past the first character, the one phrase there can be is a
        # single word starting the text, which names nothing unless it is an acronym (two
        # capitals at least): so nothing is kept. Most queries are such sentences.
        if _ASCII_UPPER.search(text, 1) is not None:
            _capitalised(text, None, found)
        return list(found)
    spans = _Spans()
    signs = _SIGNS if _ANY_SIGN.search(text) is not None else _CAMEL_ONLY
    for pattern, sign in signs:
        if not sign(text):
            continue
        spans.freeze()
        for m in pattern.finditer(text):
            start, end = m.span()
            if spans.covered(start, end):
                continue
            if _kept(found, m.group(0)):
                spans.spans.append((start, end))
            if pattern is _PATH:
                # "where is deploy.sh?" should find ".../bin/deploy.sh" too.
                base = re.split(r"[/\\]", m.group(0).rstrip("/\\"))[-1]
                if "." in base.strip(".") and _kept(found, base):
                    spans.spans.append((start, end))
    spans.freeze()
    _capitalised(text, spans, found)
    return list(found)


def _kept(found: dict[str, None], value: str) -> bool:
    """Keep ``value`` in ``found`` (stripped of quotes and punctuation, lower-cased): False
    when it is shorter than two characters or already there."""
    value = value.strip(_QUOTES).lower()
    if len(value) < 2 or value in found:
        return False
    found[value] = None
    return True


@functools.lru_cache(maxsize=256)
def query_entities(text: str) -> tuple[str, ...]:
    """:func:`extract_entities` of a query, kept for the last few hundred queries: a search
    and its adapter's distance (``rank_ceiling``) both ask for them.

    >>> query_entities("where is config.yaml?")
    ('config.yaml',)
    """
    return tuple(extract_entities(text))


def _capitalised(text: str, spans: _Spans | None, found: dict[str, None]) -> None:
    """Keep the capitalised phrases of ``text`` outside the ``spans`` already kept (names;
    None: nothing kept yet) in ``found``. They are the last entities kept: their spans
    are not recorded."""
    for m in _CAPS.finditer(text):
        start = m.start()
        if spans is not None and spans.covered(start, m.end()):
            continue
        words = m.group(0).split()
        while words and words[0].lower() in _STOP_CAPS:
            words = words[1:]
        if not words:
            continue
        phrase = " ".join(words)
        at_start = _sentence_start(text, start)
        # A lone capitalised word at a sentence start is usually not a name.
        if len(words) == 1 and at_start and not _ACRONYM.fullmatch(phrase):
            continue
        _kept(found, phrase)
        if len(words) > 1 and at_start:
            # "Ask Ada Lovelace": the first word may be capitalised only by position.
            _kept(found, " ".join(words[1:]))


def _sentence_start(text: str, pos: int) -> bool:
    """Whether ``pos`` starts the text or follows sentence punctuation (and spaces).

    Walks back over the spaces instead of copying ``text[:pos]``, which made long texts
    quadratic in their number of capitalised words.
    """
    i = pos - 1
    while i >= 0 and text[i].isspace():
        i -= 1
    return i < 0 or text[i] in _SENTENCE_END
