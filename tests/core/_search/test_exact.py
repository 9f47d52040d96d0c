"""Exact scoring of groups and named cells: the blocked product and the candidate pool."""

from __future__ import annotations

import numpy as np

from magnetic_core._index.index import HierIndex
from magnetic_core._search.exact import KERNEL_CELLS, MATVEC_BLOCK, Pool, exact_pool, matvec
from magnetic_core.eval import clustered_data


def test_blocked_matvec_equals_the_plain_product() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2 * MATVEC_BLOCK + 17, 16)).astype(np.float32)
    x = rng.standard_normal(16).astype(np.float32)
    np.testing.assert_allclose(matvec(a, x), a @ x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(matvec(a[:5], x), a[:5] @ x, rtol=1e-5, atol=1e-5)


def _index(n: int) -> tuple[HierIndex, np.ndarray]:
    vecs, _ = clustered_data(n + 1, 24, 12, spread=0.8, decay=1.5, seed=3)
    index = HierIndex(24, 64)
    index.assign([f"c{i}" for i in range(n)], vecs[1:], 0.7)
    return index, vecs[0].astype(np.float32)


def test_exact_pool_scores_every_cell_of_the_slots_like_numpy_small_and_compiled() -> None:
    # Below KERNEL_CELLS one product per group; above, one compiled pass by address.
    for n in (300, 2 * KERNEL_CELLS):
        index, q = _index(n)
        slots = list(range(0, len(index.slot_groups), 2))
        pool = exact_pool(index, None, slots, q)
        want = [c for s in slots for c in index.slot_groups[s].ids]
        assert pool.ids == want
        np.testing.assert_allclose(pool.scores, index.vectors(want) @ q, atol=1e-6)
    assert exact_pool(index, None, [], q).ids == []


def test_exact_pool_keeps_only_the_best_cells_best_first_when_asked() -> None:
    for n in (300, 2 * KERNEL_CELLS):
        index, q = _index(n)
        slots = list(range(1, len(index.slot_groups), 2))
        every = exact_pool(index, None, slots, q)
        pool = exact_pool(index, None, slots, q, keep=25)
        order = np.argsort(-every.scores, kind="stable")[:25]
        assert len(pool) == 25 and set(pool.ids) == {every.ids[i] for i in order}
        assert np.all(np.diff(pool.scores) <= 0)  # best first
        np.testing.assert_allclose(pool.scores, index.vectors(pool.ids) @ q, atol=1e-6)
        assert exact_pool(index, None, slots, q, keep=10 * n).ids == every.ids


def test_pool_extend_adds_only_new_stored_cells_scored_exactly() -> None:
    index, q = _index(200)
    pool = Pool(["c0"], index.vectors(["c0"]) @ q)
    pool.extend(index, ["c1", "c0", "missing", "c1", "c2"], q)
    assert pool.ids == ["c0", "c1", "c2"]  # no repeats, unknown ids skipped
    np.testing.assert_allclose(pool.scores, index.vectors(pool.ids) @ q, atol=1e-6)


def _lexical(index: HierIndex):
    from magnetic_core._text.lexical import LexicalIndex

    lex = LexicalIndex()
    for group in index.slot_groups:
        for cid in group.ids:
            lex.add(cid, f"word{cid}")
    return lex


def test_a_pool_named_by_document_numbers_gives_the_ids_and_extends_like_one_named_by_id():
    index, q = _index(200)
    lex = _lexical(index)
    by_id = Pool(["c3", "c5"], index.vectors(["c3", "c5"]) @ q, lexical=lex)
    by_doc = Pool(None, by_id.scores.copy(), lex.numbers(["c3", "c5"]), lex)
    assert by_doc.has_docs_only() and by_doc.id_at(1) == "c5" and by_doc.has_docs_only()
    for pool in (by_id, by_doc):
        pool.extend(index, ["c5", "c7", "missing", "c7"], q)
        pool.extend_docs(index, lex.numbers(["c9", "c3", "c11"]), q)
    assert by_doc.has_docs_only()  # extended by number, no id made
    assert by_doc.ids == by_id.ids == ["c3", "c5", "c7", "c9", "c11"]
    np.testing.assert_array_equal(by_doc.docs(lex), by_id.docs(lex))
    np.testing.assert_allclose(by_doc.scores, index.vectors(by_id.ids) @ q, atol=1e-6)
    assert len(by_doc) == 5


def test_settling_a_pools_pending_rows_keeps_those_scored_and_drops_the_rest():
    index, q = _index(200)
    lex = _lexical(index)
    ids = ["c1", "c2", "c3", "c4", "c5"]
    exact = index.vectors(ids) @ q
    # The first three wait with approximate cosines; the last two were scored exactly.
    approx = exact.copy()
    approx[:3] -= 0.25
    pool = Pool(None, approx, lex.numbers(ids), lex)
    pool.pending = np.array([10, 11, 12], np.int64)  # their rows in the scorer
    pool.bm25 = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
    pool.settled(np.array([2, 0]), exact[[2, 0]])
    assert pool.pending is None
    assert pool.ids == ["c1", "c3", "c4", "c5"]  # c2 was never read: out of reach
    np.testing.assert_array_equal(pool.scores, exact[[0, 2, 3, 4]])
    np.testing.assert_array_equal(pool.bm25, [1.0, 3.0, 4.0, 5.0])
