"""The scorer's arrays: appended per group, each slot pointing at the block that describes it."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core._index.group import Group
from magnetic_core._index.index import HierIndex
from magnetic_core._search.scorer import Scorer
from magnetic_core._search.scorer_state import Coded, ScorerState
from magnetic_core._search.sublists import quantize, split_lists

D, RANK = 8, 4


def _group(rng, gid: str, n: int) -> Group:
    g = Group(gid, D)
    v = rng.standard_normal((n, D)).astype(np.float32)
    g.extend([f"{gid}-{i}" for i in range(n)], v / np.linalg.norm(v, axis=1, keepdims=True))
    return g


def _add(state: ScorerState, slot: int, group: Group, list_size: int = 4) -> None:
    lists = split_lists(group.view, list_size)
    code = np.full((group.n, (RANK + 1) // 2), 0x88, np.uint8)  # nibble codes of zeros
    scale = np.ones(group.n, np.float32)
    state.append(slot, group, Coded(lists.means, lists.lengths, code, scale, lists.order))


def test_new_slots_are_stale_until_a_block_describes_them():
    state = ScorerState(D, RANK)
    state.resize(3)
    assert state.stale.tolist() == [True, True, True] and state.slot_block.tolist() == [-1] * 3
    group = _group(np.random.default_rng(0), "g", 10)
    _add(state, 1, group)
    assert state.stale.tolist() == [True, False, True]
    assert state.slot_block[1] == 0 and state.slot_key[1] == (group, group.version)
    state.resize(5)  # growing keeps what was there; the new slots are stale
    assert state.stale.tolist() == [True, False, True, True, True] and state.slot_block[1] == 0
    state.resize(1)
    assert state.stale.tolist() == [True] and len(state.slot_key) == 1


def test_a_blocks_lists_and_rows_describe_its_group():
    rng = np.random.default_rng(1)
    state = ScorerState(D, RANK)
    state.resize(2)
    groups = [_group(rng, "a", 13), _group(rng, "b", 30)]
    for slot, g in enumerate(groups):
        _add(state, slot, g)
    for slot, g in enumerate(groups):
        h = int(state.slot_block[slot])
        first, end = int(state.blocks.first[h]), int(state.blocks.end[h])
        assert state.blocks.count[h] == g.n and state.block_group[h] is g
        assert state.blocks.address[h] == state.block_ref[h].ctypes.data
        rows = []
        for li in range(first, end):
            start, length = int(state.lists.start[li]), int(state.lists.len[li])
            rows += state.rows.row[start : start + length].tolist()
            assert (state.rows.block[start : start + length] == h).all()
            mean = state.lists.mean[li]
            assert state.lists.inv[li] == pytest.approx(1.0 / np.linalg.norm(mean), rel=1e-6)
            codes, scale = quantize(mean[None, :])
            np.testing.assert_array_equal(state.lists.code[li], codes[0])
        assert sorted(rows) == list(range(g.n))  # every member once


def test_columns_grow_past_their_capacity_keeping_earlier_rows():
    rng = np.random.default_rng(2)
    state = ScorerState(D, RANK)
    state.resize(12)
    groups = [_group(rng, f"g{i}", 9) for i in range(12)]  # 108 rows, 36 lists: several grows
    for slot, g in enumerate(groups):
        _add(state, slot, g)
    assert state.rows.n == 108 and state.blocks.n == 12
    for slot, g in enumerate(groups):
        h = int(state.slot_block[slot])
        start = int(state.lists.start[int(state.blocks.first[h])])
        assert (state.rows.block[start : start + 3] == h).all()


def test_the_probe_arrays_are_made_once_per_change():
    rng = np.random.default_rng(3)
    state = ScorerState(D, RANK)
    state.resize(2)
    _add(state, 0, _group(rng, "a", 5))
    args = state.probe_args()
    assert state.probe_args() is args
    _add(state, 1, _group(rng, "b", 5))
    again = state.probe_args()
    assert again is not args and again[0] is state.slot_block
    state.resize(3)
    assert state.probe_args() is not again


def test_a_synced_scorer_points_every_clean_slot_at_its_groups_current_version():
    rng = np.random.default_rng(4)
    dim = 16
    centres = rng.standard_normal((40, dim))
    x = centres[rng.integers(0, 40, 4200)] + 0.4 * rng.standard_normal((4200, dim))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    index = HierIndex(dim, max_group_size=256)
    index.assign([f"c{i}" for i in range(4100)], x[:4100], 0.7)
    scorer = Scorer(rank=8, list_size=32)
    scorer.sync(index)

    def check() -> None:
        state = scorer._state
        assert len(state.slot_key) == len(index.slot_groups)
        for s, g in enumerate(index.slot_groups):
            if not state.stale[s]:
                assert state.slot_key[s] == (g, g.version)
                assert state.block_group[int(state.slot_block[s])] is g

    check()
    assert not scorer._state.stale.any()
    index.assign([f"c{i}" for i in range(4100, 4200)], x[4100:], 0.7)  # groups change
    scorer.sync(index)
    check()


def test_cell_docs_are_looked_up_once_and_again_after_the_lexical_index_renumbers():
    from magnetic_core._text.lexical import LexicalIndex
    from magnetic_core.eval import clustered_data

    vecs, _ = clustered_data(5000, 32, 20, spread=0.8, decay=1.5, seed=4)
    ids = [f"c{i}" for i in range(len(vecs))]
    index = HierIndex(32, 256)
    index.assign(ids, vecs, 0.6)
    scorer = Scorer(8, 32)
    scorer.sync(index)
    assert scorer._state.rows.n == len(ids)  # every cell coded
    lex = LexicalIndex()
    for cid in reversed(ids):  # numbers unlike the index's order
        lex.add(cid, cid)
    st = scorer._state
    rows = np.arange(st.rows.n)
    want = lex.numbers(st.cell_ids(rows))
    np.testing.assert_array_equal(st.cell_docs(rows, lex), want)
    assert (st.rows.cols["doc"][: st.rows.n] == want).all()  # kept for the next search
    lex.add(ids[0], "new text")  # a re-add gives that cell a new number
    again = st.cell_docs(rows, lex)
    np.testing.assert_array_equal(again, lex.numbers(st.cell_ids(rows)))
    assert (again != want).sum() == 1
    for cid in ids[:3000]:
        lex.remove(cid)  # past half removed: the lexical index compacts and renumbers
    alive = np.flatnonzero(lex.numbers(st.cell_ids(rows)) >= 0)
    np.testing.assert_array_equal(
        st.cell_docs(rows[alive], lex), lex.numbers(st.cell_ids(rows[alive]))
    )


def test_document_numbers_lead_to_the_rows_of_current_blocks_only():
    from magnetic_core._text.lexical import LexicalIndex
    from magnetic_core.eval import clustered_data

    vecs, _ = clustered_data(5000, 32, 20, spread=0.8, decay=1.5, seed=5)
    ids = [f"c{i}" for i in range(len(vecs))]
    index = HierIndex(32, 256)
    index.assign(ids, vecs, 0.6)
    scorer = Scorer(8, 32)
    scorer.sync(index)
    lex = LexicalIndex()
    for cid in reversed(ids):
        lex.add(cid, cid)
    st = scorer._state
    docs = lex.numbers(ids)
    rows = scorer.doc_rows(docs, lex)
    assert (rows >= 0).all()  # every cell is coded in a current block
    assert st.cell_ids(rows) == ids  # each number leads to its own cell's row
    np.testing.assert_array_equal(scorer.row_slots(rows), [index.loc[c].slot for c in ids])
    q = vecs[7]
    np.testing.assert_allclose(scorer.row_cosines(rows, q), vecs @ q, atol=2e-6)
    # No row for -1, a number past the index, or a dead number (a cell indexed again).
    lex.add(ids[3], "new text")
    odd = np.array([-1, 10**6, docs[3], lex.numbers([ids[3]])[0]])
    assert scorer.doc_rows(odd, lex).tolist()[:3] == [-1, -1, -1]
    # A changed group's cells have no row until it is coded again, then its new ones.
    moved = index.loc[ids[0]]
    index.remove(ids[0])
    mates = [c for c in moved.ids]
    scorer._find_stale(index)
    assert (scorer.doc_rows(lex.numbers(mates), lex) == -1).all()
    scorer._recode(index, 10**6)
    again = scorer.doc_rows(lex.numbers(mates), lex)
    assert (again >= 0).all() and st.cell_ids(again) == mates
    assert (again >= rows.max()).all()  # rows appended since, looked up then
