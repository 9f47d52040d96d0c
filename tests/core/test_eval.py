"""Evaluation helpers (shared with benchmarks) and the readers-writer lock."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from magnetic_core._store.concurrency import RWLock
from magnetic_core.eval import (
    clustered_data,
    exact_knn,
    ndcg_at_k,
    recall_at_k,
    recall_at_k_tie_aware,
)


def test_clustered_data_is_seeded_unit_and_clustered():
    a, la = clustered_data(500, 16, 5, seed=1)
    b, lb = clustered_data(500, 16, 5, seed=1)
    assert np.array_equal(a, b) and np.array_equal(la, lb)
    assert np.allclose(np.linalg.norm(a, axis=1), 1, atol=1e-5)
    same = a[la == la[0]] @ a[0]
    other = a[la != la[0]] @ a[0]
    assert same.mean() > other.mean() + 0.3


def test_exact_knn_matches_a_full_sort():
    base, _ = clustered_data(300, 8, 3, seed=2)
    queries, _ = clustered_data(20, 8, 3, seed=3)
    idx, scores = exact_knn(base, queries, 5, block=7)
    full = np.argsort(-(queries @ base.T), axis=1)[:, :5]
    assert np.array_equal(idx, full)
    assert np.all(np.diff(scores, axis=1) <= 0)


def test_recall_counts_overlap_and_ties():
    truth = np.array([[1, 2, 3, 4]])
    assert recall_at_k([[1, 2, 9, 8]], truth, 4) == 0.5
    # a duplicate of the 4th-best item (same score) counts as correct when tie-aware
    true_scores = np.array([[0.9, 0.8, 0.7, 0.7]])
    assert recall_at_k_tie_aware([[0.9, 0.8, 0.7, 0.7]], true_scores, 4) == 1.0
    assert recall_at_k_tie_aware([[0.9, 0.8, 0.7, 0.6]], true_scores, 4) == 0.75


def test_ndcg():
    assert ndcg_at_k(["a", "b"], {"a": 1}) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "a"], {"a": 1}) == pytest.approx(1 / np.log2(3))
    assert ndcg_at_k(["x"], {}) == 0.0


def test_rwlock_lets_readers_share_and_writers_exclude():
    lock = RWLock()
    inside: list[str] = []
    overlap = threading.Event()

    def reader():
        with lock.read():
            inside.append("r")
            if inside.count("r") >= 2:
                overlap.set()
            overlap.wait(2)
            inside.remove("r")

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in readers:
        t.start()
    for t in readers:
        t.join()
    assert overlap.is_set()  # two readers were inside at once

    log: list[str] = []

    def writer():
        with lock.write():
            log.append("w-in")
            time.sleep(0.05)
            log.append("w-out")

    def late_reader():
        with lock.read():
            log.append("r")

    w = threading.Thread(target=writer)
    w.start()
    while not log:
        time.sleep(0.001)
    r = threading.Thread(target=late_reader)
    r.start()
    w.join()
    r.join()
    assert log == ["w-in", "w-out", "r"]


def test_rwlock_is_reentrant_for_the_writer():
    lock = RWLock()
    with lock.write(), lock.write(), lock.read():
        pass
    with lock.read():
        pass
