"""The compiled BM25 accumulation against the formula written in numpy."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core._text.bm25 import bm25_pool, bm25_scores

from .._search.postings import terms_table


def _reference(postings, weights, lengths, avgdl, k1, b):
    """Per document: the sum over query terms of ``w * tf / (tf + k1 (1 - b + b len / avg))``."""
    acc: dict[int, float] = {}
    for (docs, tfs), w in zip(postings, weights, strict=True):
        for d, tf in zip(docs.tolist(), tfs.tolist(), strict=True):
            norm = k1 * (1.0 - b + b * lengths[d] / avgdl)
            acc[d] = acc.get(d, 0.0) + w * tf / (tf + norm)
    docs = np.array(sorted(acc), np.int64)
    return docs, np.array([acc[d] for d in docs.tolist()], np.float64)


def _with_lengths(postings, lengths):
    """(docs, tfs) postings as the index keeps them: (docs, tfs, each document's length)."""
    return [
        (np.asarray(d, np.int64), np.asarray(f, np.float32), lengths[np.asarray(d, np.int64)])
        for d, f in postings
    ]


def _addresses(postings, weights):
    """The kernels' ``terms`` for (docs, tfs, lens) arrays and their weights (the caller
    keeps the arrays alive)."""
    return terms_table(postings, weights)


def _call(postings, weights, lengths, avgdl, k1=1.2, b=0.75):
    postings = _with_lengths(postings, lengths)
    acc = np.zeros(len(lengths) + 3, np.float32)  # as the index keeps it
    found = bm25_scores(
        _addresses(postings, weights),
        avgdl,
        k1,
        b,
        len(lengths),
        acc,
    )
    assert not acc.any()  # the scratch row is left zeroed for the next query
    return found


@pytest.mark.parametrize("n_docs,n_terms,density", [(50, 1, 0.5), (3000, 13, 0.2), (400, 4, 1.0)])
def test_bm25_scores_match_the_formula_on_random_postings(n_docs, n_terms, density):
    rng = np.random.default_rng(n_docs + n_terms)
    lengths = rng.integers(1, 60, n_docs).astype(np.float32)
    postings = []
    for _ in range(n_terms):
        docs = np.flatnonzero(rng.random(n_docs) < density).astype(np.int64)
        postings.append((docs, rng.integers(1, 5, docs.shape[0]).astype(np.float32)))
    weights = rng.uniform(0.1, 5.0, n_terms)
    avgdl = float(lengths.mean())
    got_docs, got = _call(postings, weights, lengths, avgdl)
    want_docs, want = _reference(postings, weights, lengths, avgdl, 1.2, 0.75)
    assert got_docs.tolist() == want_docs.tolist()  # every touched document, ascending
    np.testing.assert_allclose(got, want, rtol=2e-6)


def test_bm25_scores_of_no_postings_is_empty_and_one_document_is_found():
    lengths = np.array([3.0, 5.0, 7.0], np.float32)
    docs, vals = _call([(np.empty(0, np.int64), np.empty(0, np.float32))], [1.0], lengths, 5.0)
    assert docs.shape == (0,) and vals.shape == (0,)
    docs, vals = _call(
        [(np.array([2], np.int64), np.array([2.0], np.float32))], [1.0], lengths, 5.0
    )
    assert docs.tolist() == [2]
    norm = 1.2 * (0.25 + 0.75 * 7.0 / 5.0)
    assert vals[0] == pytest.approx(2.0 / (2.0 + norm), rel=1e-6)


def test_one_scratch_row_serves_queries_of_different_stores_in_turn():
    """The row the kernel leaves zeroed gives the next query, larger or smaller, its own
    scores (nothing of the previous query leaks into it)."""
    rng = np.random.default_rng(7)
    acc = np.zeros(500, np.float32)
    for n_docs in (500, 40, 300):
        lengths = rng.integers(1, 30, n_docs).astype(np.float32)
        docs = np.sort(rng.choice(n_docs, n_docs // 2, replace=False)).astype(np.int64)
        tfs = rng.integers(1, 4, docs.shape[0]).astype(np.float32)
        w = np.array([2.0], np.float32)
        kept = _with_lengths([(docs, tfs)], lengths)
        got_docs, got = bm25_scores(_addresses(kept, w), 10.0, 1.2, 0.75, n_docs, acc)
        want_docs, want = _reference([(docs, tfs)], [2.0], lengths, 10.0, 1.2, 0.75)
        assert got_docs.tolist() == want_docs.tolist()
        np.testing.assert_allclose(got, want, rtol=2e-6)
        assert not acc.any()


@pytest.mark.parametrize(
    "n_docs,n_terms,density,n_top,seed",
    [
        (300, 5, 0.2, 50, 0),
        (40, 2, 0.3, 100, 1),
        (200, 1, 0.0, 5, 2),
        (500, 8, 0.5, 1, 3),
        (6000, 3, 0.4, 10, 4),  # the best kept while thousands of matches pass (many cuts)
        (3000, 2, 0.5, 0, 5),
    ],
)
def test_bm25_pool_gives_the_best_and_the_pools_scores_of_the_same_pass(
    n_docs, n_terms, density, n_top, seed
):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 5, n_docs).astype(np.float32)  # few lengths: real ties
    postings = []
    for _ in range(n_terms):
        docs = np.flatnonzero(rng.random(n_docs) < density).astype(np.int64)
        postings.append((docs, rng.integers(1, 3, docs.shape[0]).astype(np.float32)))
    weights = np.asarray(rng.choice([1.0, 2.0], n_terms), np.float32)
    pool = rng.integers(-3, n_docs + 5, 60)  # absent, negative and too large numbers too
    acc = np.zeros(n_docs + 1, np.float32)
    kept = _with_lengths(postings, lengths)
    args = (_addresses(kept, weights), 4.0, 1.2, 0.75, n_docs, acc)
    top, top_vals, at_pool = bm25_pool(*args, pool, n_top)
    assert not acc.any()
    all_docs, all_vals = bm25_scores(*args)
    best = np.argsort(-all_vals, kind="stable")[:n_top]  # ties: the lower number first
    assert top.tolist() == all_docs[best].tolist()
    np.testing.assert_array_equal(top_vals, all_vals[best])
    want = dict(zip(all_docs.tolist(), all_vals.tolist(), strict=True))
    np.testing.assert_array_equal(at_pool, [want.get(d, 0.0) for d in pool.tolist()])


def test_postings_across_many_blocks_and_out_of_order_are_all_added():
    """The accumulation walks the documents block by block; postings spanning many blocks,
    and a posting list out of order, still give every document's full score."""
    rng = np.random.default_rng(11)
    n_docs = 20000  # several accumulation blocks
    lengths = rng.integers(1, 60, n_docs).astype(np.float32)
    postings = []
    for density in (0.3, 0.01, 0.6):
        docs = np.flatnonzero(rng.random(n_docs) < density).astype(np.int64)
        postings.append((docs, rng.integers(1, 5, docs.shape[0]).astype(np.float32)))
    shuffled = rng.permutation(postings[1][0].shape[0])
    postings[1] = (postings[1][0][shuffled], postings[1][1][shuffled])
    weights = [1.5, 4.0, 0.7]
    avgdl = float(lengths.mean())
    got_docs, got = _call(postings, weights, lengths, avgdl)
    want_docs, want = _reference(postings, weights, lengths, avgdl, 1.2, 0.75)
    assert got_docs.tolist() == want_docs.tolist()
    np.testing.assert_allclose(got, want, rtol=2e-6)
