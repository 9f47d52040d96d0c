"""Planning the LLM's review of a group: every close pair of facts meets in some call."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetic_core._sleep.review import (
    ContradictingPair,
    ContradictionReport,
    Fact,
    conclude,
    plan_calls,
    plan_chunks,
)
from magnetic_core.errors import InvalidInputError


def _close_pairs(vectors: np.ndarray, neighbours: int) -> set[tuple[int, int]]:
    """The reference: each fact and its ``neighbours`` most similar facts, by brute force."""
    n = len(vectors)
    sims = vectors @ vectors.T
    pairs = set()
    for i in range(n):
        order = sorted((j for j in range(n) if j != i), key=lambda j: (-sims[i, j], j))
        pairs |= {(min(i, j), max(i, j)) for j in order[:neighbours]}
    return pairs


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 70),
    size=st.integers(2, 12),
    neighbours=st.integers(1, 5),
    seed=st.integers(0, 2**16),
)
def test_every_close_pair_meets_in_a_call_of_at_most_size_facts(n, size, neighbours, seed):
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-12
    chunks = plan_chunks(n, size, vectors, neighbours)
    assert all(2 <= len(c) <= size and len(set(c)) == len(c) for c in chunks)
    shown = {p for c in chunks for p in itertools.combinations(sorted(c), 2)}
    if n <= size:
        assert chunks == ([list(range(n))] if n >= 2 else [])
    else:
        assert _close_pairs(vectors, min(neighbours, n - 1)) <= shown


@pytest.mark.parametrize("n", [3, 25, 40])
def test_without_vectors_every_pair_is_shown(n: int):
    chunks = plan_chunks(n, 8)
    shown = {p for c in chunks for p in itertools.combinations(sorted(c), 2)}
    assert shown >= set(itertools.combinations(range(n), 2))
    assert all(len(c) <= 8 for c in chunks)


def test_a_contradiction_between_the_first_and_the_last_of_40_facts_is_not_cut_off():
    facts = [Fact(f"c{i}", f"fact number {i}") for i in range(40)]
    calls = plan_calls(facts, cells_per_call=10)
    assert any({"c2", "c38"} <= {f.id for f in call.facts} for call in calls)


@pytest.mark.parametrize("size", [1, 0, True, 2.5])
def test_a_call_size_under_two_is_refused(size):
    with pytest.raises(InvalidInputError, match="cells_per_call"):
        plan_chunks(10, size)


def test_answers_become_contradictions_once_across_calls_and_bad_numbers_are_rejected():
    facts = [Fact("a", "The meeting is on Monday."), Fact("b", "The meeting is on Tuesday.")]
    calls = plan_calls(facts, cells_per_call=2) * 3  # the same pair reviewed three times
    said = ContradictionReport(
        contradictions=[ContradictingPair(first=2, second=1, explanation=" Two days. ")]
    )
    wrong = ContradictionReport(
        contradictions=[ContradictingPair(first=1, second=3, explanation="no third fact")]
    )
    review = conclude(calls, [said, said, wrong])
    assert [(c.a, c.b, c.explanation) for c in review.contradictions] == [("b", "a", "Two days.")]
    assert review.rejected == ["facts: pair (1, 3) is not two of the 2 facts"]
    assert review.calls == 3 and not review.failures


def test_a_failed_call_is_reported_and_a_call_not_made_is_not_counted():
    facts = [Fact(f"c{i}", f"fact {i}") for i in range(30)]
    calls = plan_calls(facts, cells_per_call=10, group_id="g1")
    answers = [ConnectionRefusedError("refused")] + [None] * (len(calls) - 1)
    review = conclude(calls, answers)
    assert review.calls == 1 and review.failures == ["g1: refused"]
    assert not review.contradictions
