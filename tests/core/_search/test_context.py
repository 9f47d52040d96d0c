"""Conversation threads and the lift a hit gains from its neighbouring turns and its session."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetic_core._search.context import Threads, lift, thread_of


@pytest.mark.parametrize(
    ("meta", "want"),
    [
        ({"session_id": "s", "thread_id": "t"}, ("session_id", "s")),
        ({"thread_id": 7}, ("thread_id", 7)),
        ({"conversation_id": "c"}, ("conversation_id", "c")),
        ({"session_id": True, "thread_id": "t"}, ("thread_id", "t")),  # a bool names no thread
        ({"session_id": ["a"]}, None),
        ({"session_id": None}, None),
        ({"other": 1}, None),
    ],
)
def test_the_thread_of_a_cell_comes_from_its_metadata(meta, want):
    assert thread_of(meta) == want


def test_turns_order_a_thread_and_cells_without_a_turn_follow_in_add_order():
    t = Threads()
    t.add("c", {"session_id": "s", "turn": 3}, created_at=1.0)
    t.add("a", {"session_id": "s", "turn": 1}, created_at=2.0)
    t.add("x", {"session_id": "s"}, created_at=0.5)  # no turn: after the numbered ones
    t.add("b", {"session_id": "s", "turn": 2.5}, created_at=3.0)
    t.add("y", {"session_id": "s", "turn": math.nan}, created_at=0.6)  # not a usable turn
    t.add("lonely", {}, created_at=0.0)
    assert [t.neighbours(c) for c in "abcxy"] == [
        ("b",), ("a", "c"), ("b", "x"), ("c", "y"), ("x",),
    ]  # fmt: skip
    assert len(t) == 5 and t.neighbours("lonely") == ()


def test_re_adding_moves_a_cell_and_removing_closes_the_gap():
    t = Threads()
    for i, cid in enumerate("abcd"):
        t.add(cid, {"session_id": "s", "turn": i}, created_at=0.0)
    t.add("b", {"session_id": "other", "turn": 0}, created_at=0.0)
    assert t.neighbours("a") == ("c",) and t.neighbours("b") == ()
    t.remove("c")
    assert t.neighbours("a") == ("d",) and t.neighbours("d") == ("a",)
    t.remove("missing")
    numbers = t.numbers(["a", "d", "b", "zzz"])
    assert numbers[0] == numbers[1] != numbers[2] and numbers[3] == -1


def _reference(threads_of, order, ids, rank, nw, sw, top):
    """Plain lift: session term for every threaded cell, neighbour term for the top rows and
    their neighbours, from positive scores."""
    base = {c: max(float(r), 0.0) for c, r in zip(ids, rank, strict=True)}
    out = {c: float(r) for c, r in zip(ids, rank, strict=True)}
    for c in ids:
        if threads_of.get(c) is not None:
            out[c] += sw * max(base[o] for o in ids if threads_of.get(o) == threads_of[c])
    best = [ids[i] for i in np.argsort(-rank, kind="stable")[:top]]
    touched = set(best) | {nb for c in best for nb in order(c) if nb in base}
    for c in touched:
        near = [base[nb] for nb in order(c) if nb in base]
        if near:
            out[c] += nw * max(near)
    return np.array([out[c] for c in ids])


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(1, 40),
    threads=st.integers(1, 4),
    top=st.integers(1, 10),
    nw=st.sampled_from([0.0, 0.5]),
    sw=st.sampled_from([0.0, 0.8]),
)
def test_lift_matches_the_plain_reference(seed, n, threads, top, nw, sw):
    rng = np.random.default_rng(seed)
    t = Threads()
    threads_of = {}
    ids = [f"c{i}" for i in range(n)]
    for i, cid in enumerate(ids):
        if rng.random() < 0.8:
            thread = f"s{int(rng.integers(0, threads))}"
            threads_of[cid] = thread
            t.add(cid, {"session_id": thread, "turn": int(rng.integers(0, 50))}, created_at=i)
    rank = rng.uniform(-0.5, 1.0, n).astype(np.float32)
    kept = rank.copy()
    # rank scores distinct enough that the top rows do not depend on rounding
    got = lift(t, ids, rank, nw, sw, top)
    np.testing.assert_array_equal(rank, kept)  # a new array; rank untouched
    want = _reference(threads_of, t.neighbours, ids, rank, nw, sw, top)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_no_threads_or_no_rows_lift_nothing():
    rank = np.array([0.3, 0.2], np.float32)
    np.testing.assert_array_equal(lift(Threads(), ["a", "b"], rank, 0.5, 0.5, 5), rank)
    t = Threads()
    t.add("a", {"session_id": "s"}, 0.0)
    assert lift(t, [], np.empty(0, np.float32), 0.5, 0.5, 5).shape == (0,)
