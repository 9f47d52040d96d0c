"""Flat BM25 postings read in place, and the document -> terms map over them."""

from __future__ import annotations

import pytest

from magnetic_core._text.flat_postings import DocTerms
from magnetic_core._text.lexical import LexicalIndex


def _flat(texts: list[str]) -> LexicalIndex:
    built = LexicalIndex()
    for i, text in enumerate(texts):
        built.add(f"c{i}", text)
    arrays = built.export_arrays()
    cids, terms, surface = (arrays.pop(k).tolist() for k in ("cids", "terms", "surface"))
    return LexicalIndex.from_arrays(arrays, cids, terms, surface)


def test_postings_and_document_terms_read_in_place_match_the_texts():
    texts = ["gene BRCA1 mutation", "protein folding gene", "painted walls"]
    flat = _flat(texts)._flat
    assert flat is not None
    docs, tfs = flat.posting("gene")
    assert docs.tolist() == [0, 1] and tfs.tolist() == [1.0, 1.0]
    assert flat.posting("missing") is None
    assert flat.surface[flat.vocab["paint"]] == "painted"  # the word a label shows
    terms = DocTerms(flat)
    assert terms[0] == ("gene", "brca1", "mutat") and len(terms) == 3


def test_document_terms_follow_sets_and_deletes_over_the_flat_arrays():
    flat = _flat(["alpha beta", "gamma", "delta epsilon"])._flat
    assert flat is not None
    terms = DocTerms(flat)
    terms[1] = ("new",)  # a document re-indexed since the snapshot
    terms[3] = ("added",)  # and one added
    del terms[0]
    assert 0 not in terms and terms[1] == ("new",) and terms[3] == ("added",)
    assert sorted(terms) == [1, 2, 3] and len(terms) == 3
    with pytest.raises(KeyError):
        del terms[0]
    with pytest.raises(KeyError):
        terms[7]
