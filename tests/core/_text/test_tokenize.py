"""The one tokenizer: words for BM25 and labels, and their stems."""

from __future__ import annotations

import random

from magnetic_core._text.lexical import LexicalIndex
from magnetic_core._text.tokenize import STOPWORDS, distinct_terms, index_terms, stem, terms


def test_terms_are_lower_cased_content_words_in_order():
    assert terms("The Cat sat ON the mat, and the cat's hat!") == [
        "cat",
        "sat",
        "mat",
        "cat's",
        "hat",
    ]


def test_stop_words_digits_and_single_letters():
    assert terms("a b c 42 x7 about the i") == ["42", "x7"]
    assert "the" in STOPWORDS and "said" in STOPWORDS and "gene" not in STOPWORDS


def test_inflections_share_a_stem_so_a_query_finds_another_form():
    assert stem("painted") == stem("painting") == stem("paints")
    assert index_terms("Studies show studying helps") == [
        stem("studies"),
        "show",
        stem("studying"),
        "help",
    ]
    assert LexicalIndex.query_terms("painting painted lakes") == (stem("painting"), stem("lakes"))


def test_words_with_digits_are_stemmed_but_never_cached():
    """A long-lived memory sees endless ids and numbers; the stem cache must not keep them."""
    from magnetic_core._text import tokenize

    before = len(tokenize._STEMS)
    numbered = [f"note{i}" for i in range(5000)] + [str(10**9 + i) for i in range(5000)]
    assert [tokenize.stem(w) for w in numbered] == numbered
    assert tokenize.stem("ticket42s") == tokenize.stem("ticket42s")
    assert len(tokenize._STEMS) == before
    assert tokenize.stem("painted") == "paint" and "painted" in tokenize._STEMS


def test_a_word_ending_in_a_digit_is_its_own_stem_as_snowball_says():
    """The shortcut that skips the stemmer for such words must agree with the stemmer."""
    import random
    import string

    import snowballstemmer

    from magnetic_core._text.tokenize import _WORD, stem

    snowball = snowballstemmer.stemmer("english")
    rng = random.Random(3)
    letters = string.ascii_lowercase
    words = ["flies9", "running7", "sses3", "yay8", "studies2024", "don't1"]
    words += [
        "".join(rng.choice(letters) for _ in range(rng.randint(1, 12))) + str(rng.randint(0, 999))
        for _ in range(20000)
    ]
    for word in words:
        for token in _WORD.findall(word):  # as the tokenizer cuts them
            assert stem(token) == snowball.stemWord(token), token


def test_a_querys_distinct_terms_are_its_indexed_terms_without_repeats():
    """``distinct_terms`` (a query's BM25 terms, one pass) is ``index_terms`` with each
    term kept at its first appearance, for texts of every kind of word."""
    rng = random.Random(5)
    words = ["Painted", "painting", "the", "a", "x", "don't", "ABC123", "v2", "2024",
             "Researchers", "researched", "Q4", "walls", "wall", "café", "naïve", "s",
             "mln", "deploy.sh", "INV-2024-0042", "it's", "'quoted'", "STUDIES"]  # fmt: skip
    texts = ["", "the a x", *words]
    texts += [" ".join(rng.choice(words) for _ in range(rng.randint(1, 25))) for _ in range(300)]
    for text in texts:
        assert distinct_terms(text) == tuple(dict.fromkeys(index_terms(text)))
    assert distinct_terms("Painted paintings, painted walls") == ("paint", "wall")
