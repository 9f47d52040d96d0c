"""The scorer's arrays: growable columns for blocks, sub-lists and coded cells, by slot.

:class:`ScorerState` is what :class:`magnetic_core._search.scorer.Scorer` builds and swaps
whole (after a rebuild or a compaction); within one state, rows are only ever appended, so
a search reading it while another search appends sees a consistent prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from magnetic_core._search.centroid_tree import CentroidTree
from magnetic_core._search.static_args import TEXT_LAYOUT, StaticArgs
from magnetic_core._search.sublists import quantize, ranges

if TYPE_CHECKING:
    from magnetic_core._index.index import Group, HierIndex
    from magnetic_core._text.lexical import LexicalIndex

__all__ = ["Coded", "ScorerState", "restore"]


class _Arena:
    """Growable column arrays sharing one row count (capacity doubles when full)."""

    def __init__(self, **columns: tuple[tuple[int, ...], type]) -> None:
        self.n = 0
        self.cols: dict[str, np.ndarray] = {
            name: np.empty((16, *shape), dt) for name, (shape, dt) in columns.items()
        }

    def append(self, **values: np.ndarray) -> int:
        """Append rows (every column); returns the first new row number."""
        k = len(next(iter(values.values())))
        start, end = self.n, self.n + k
        cap = next(iter(self.cols.values())).shape[0]
        if end > cap:
            cap = max(2 * cap, end)
            for name, col in self.cols.items():
                grown = np.empty((cap, *col.shape[1:]), col.dtype)
                grown[:start] = col[:start]
                self.cols[name] = grown
        for name, value in values.items():
            self.cols[name][start:end] = value
        self.n = end
        return start

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["cols"][name]
        except KeyError:
            raise AttributeError(name) from None


class ScorerState:
    """The scorer's arrays for one index (swapped whole by a rebuild or a compaction).

    Blocks: one per group version coded (its group, its block kept alive, its lists);
    lists: per sub-list mean (float, and its int8 code and scale, which searches read),
    1 / |mean|, first row and length; rows: per cell its nibble code (two entries a byte,
    ``fit_kernels.encode``), scale, block and row in that block. ``slot_block[s]`` is the
    block describing the group in slot ``s``; ``stale[s]`` says that group changed since
    (it is then scored exactly).
    """

    def __init__(self, dim: int, rank: int) -> None:
        self.block_group: list[Group] = []
        self.block_ref: list[np.ndarray] = []
        self.blocks = _Arena(
            address=((), np.int64),
            count=((), np.int64),
            first=((), np.int64),
            end=((), np.int64),
            slot=((), np.int64),  # the slot the block's group held when it was coded
        )
        self.lists = _Arena(
            mean=((dim,), np.float32),
            code=((dim,), np.int8),
            scale=((), np.float32),
            inv=((), np.float32),
            start=((), np.int64),
            len=((), np.int64),
        )
        self.rows = _Arena(
            code=(((rank + 1) // 2,), np.uint8),  # nibble codes (fit_kernels.encode)
            scale=((), np.float32),
            block=((), np.int32),
            row=((), np.int32),
            doc=((), np.int64),  # the cell's BM25 document number, -1 until a search asks
        )
        # The BM25 numbering ``rows.doc`` holds numbers of (``LexicalIndex.numbering``).
        self.doc_key: int | None = None
        # Document number -> the newest row holding it (-1: none), for rows below
        # ``_doc_rows_n``; a row is used only while its block is current (``rows_of_docs``).
        self._doc_rows = np.empty(0, np.int64)
        self._doc_rows_n = 0
        self.slot_key: list[tuple[Group, int] | None] = []
        self.slot_block = np.empty(0, np.int64)
        self.stale = np.empty(0, bool)
        self.centroid_code = np.empty((0, dim), np.int8)
        self.centroid_scale = np.empty(0, np.float32)
        # Clusters of the centroids, in stores of many groups (replaced whole when changed).
        self.tree: CentroidTree | None = None
        self._probe_args: tuple[np.ndarray, ...] | None = None
        # The arrays a text query's compiled call reads (these and a few of the index's and
        # the scorer's), as one table of addresses kept between calls (``Scorer.text``).
        self.text_args = StaticArgs(TEXT_LAYOUT)

    def probe_args(self) -> tuple[np.ndarray, ...]:
        """The arrays :func:`~magnetic_core._search.kernels.probe_top` reads, from
        ``slot_block`` to ``addresses`` (made once per change of the state, not per query)."""
        args = self._probe_args
        if args is None:
            lists, rows, blocks = self.lists.cols, self.rows.cols, self.blocks.cols
            args = (
                self.slot_block,
                blocks["first"],
                blocks["end"],
                lists["code"],
                lists["scale"],
                lists["inv"],
                lists["start"],
                lists["len"],
                rows["code"],
                rows["scale"],
                rows["block"],
                rows["row"],
                blocks["address"],
            )
            self._probe_args = args
        return args

    def cell_ids(self, rows: np.ndarray) -> list[str]:
        """The ids of the cells of the given rows."""
        return self.cells(rows)[0]

    def cells(self, rows: np.ndarray) -> tuple[list[str], list[Group]]:
        """The ids of the cells of the given rows and the groups that hold them (rows of
        current blocks only: a stale group's rows name the group as it was coded)."""
        groups = self.block_group
        owners = [groups[h] for h in self.rows.cols["block"][rows].tolist()]
        at = self.rows.cols["row"][rows].tolist()
        return [g.ids[r] for g, r in zip(owners, at, strict=True)], owners

    def cell_docs(self, rows: np.ndarray, lexical: LexicalIndex) -> np.ndarray:
        """The BM25 document numbers of the cells of the given rows.

        Every coded cell's number is looked up once, by id, when the first text query
        reads this state (about 30 ms at 100K cells) and kept; rows coded since, and rows
        whose cell has been removed or re-added since (its number is dead), are looked up
        when a search reads them. A compaction of the lexical index renumbers everything,
        and the numbers are looked up again. Searches write the same numbers, so
        concurrent ones may race harmlessly.
        """
        from magnetic_core._search.kernels import row_docs  # numba: loaded by the probe

        # (one compiled pass: as six array operations, 25 us of a text query at 100K cells)
        docs, missing = row_docs(self._doc_column(lexical), lexical.liveness, rows)
        if missing.size:
            found = lexical.numbers(self.cell_ids(rows[missing]))
            docs[missing] = found
            self._note_docs(rows[missing], found)
        return docs

    def _doc_column(self, lexical: LexicalIndex) -> np.ndarray:
        """``rows.doc`` in ``lexical``'s numbering (every row looked up when it changed)."""
        col = self.rows.cols["doc"]
        if self.doc_key != lexical.numbering:
            n = self.rows.n
            self._doc_rows, self._doc_rows_n = np.empty(0, np.int64), 0
            col[:n] = lexical.numbers(self.cell_ids(np.arange(n)))
            self.doc_key = lexical.numbering
        return col

    def _note_docs(self, rows: np.ndarray, docs: np.ndarray) -> None:
        """Record the document numbers of the given rows (found by id)."""
        self.rows.cols["doc"][rows] = docs
        at = rows < self._doc_rows_n
        self._point(docs[at], rows[at])

    def _point(self, docs: np.ndarray, rows: np.ndarray) -> None:
        """``_doc_rows[docs] = rows`` (numbers below 0 skipped), grown as needed."""
        live = docs >= 0
        docs, rows = docs[live], rows[live]
        if not docs.size:
            return
        table = self._doc_rows
        top = int(docs.max())
        if top >= table.shape[0]:
            grown = np.full(max(2 * table.shape[0], top + 1, 1024), -1, np.int64)
            grown[: table.shape[0]] = table
            table = grown
        table[docs] = rows  # rows ascend: the newest row of a number wins
        self._doc_rows = table

    def rows_of_docs(self, docs: np.ndarray, lexical: LexicalIndex) -> np.ndarray:
        """The row of each document's cell in a block that still describes its group, -1
        where there is none (a cell of a stale or uncoded group, a dead number, -1).

        Lets a search score BM25's and the entity stage's cells from the blocks by
        address and find their slots by array operations, with no look-up per cell id.
        """
        from magnetic_core._search.kernels import doc_rows  # numba: loaded by the probe

        return doc_rows(docs, *self.doc_row_args(lexical))

    def doc_row_args(self, lexical: LexicalIndex) -> tuple[np.ndarray, ...]:
        """The arrays after the numbers that ``kernels.doc_rows`` reads (numbers to rows,
        rows to numbers, blocks, slots, staleness, liveness). Rows appended since the last
        call are looked up by id first (at most the cells a few searches coded again)."""
        col = self._doc_column(lexical)
        n = self.rows.n
        if self._doc_rows_n < n:
            new = np.arange(self._doc_rows_n, n)
            unknown = new[col[new] < 0]
            if unknown.size:
                col[unknown] = lexical.numbers(self.cell_ids(unknown))
            self._point(col[new], new)
            self._doc_rows_n = n
        return (
            self._doc_rows,
            col,
            self.rows.cols["block"],
            self.blocks.cols["slot"],
            self.slot_block,
            self.stale,
            lexical.liveness,
        )

    def row_slots(self, rows: np.ndarray) -> np.ndarray:
        """The slot of each (current) row's group."""
        return self.blocks.cols["slot"][self.rows.cols["block"][rows]]

    def resize(self, n_slots: int) -> None:
        """Follow the index's slot count (new slots start stale)."""
        keys = self.slot_key
        del keys[n_slots:]
        keys.extend([None] * (n_slots - len(keys)))
        keep = min(n_slots, self.slot_block.shape[0])
        blocks = np.full(n_slots, -1, np.int64)
        blocks[:keep] = self.slot_block[:keep]
        stale = np.ones(n_slots, bool)
        stale[:keep] = self.stale[:keep]
        self.slot_block, self.stale = blocks, stale
        self._probe_args = None

    def append(self, slot: int, group: Group, coded: Coded) -> None:
        """Add a group's block, lists and rows, then point its slot at them."""
        self.append_groups(np.array([slot]), [group], np.array([len(coded.lens)]), coded)

    def append_groups(
        self, slots: np.ndarray, groups: list[Group], list_counts: np.ndarray, coded: Coded
    ) -> None:
        """:meth:`append` for many groups at once (a restore): the same rows and arrays.

        Group ``i`` owns the next ``list_counts[i]`` sub-lists of ``coded``'s lists, and
        their cells the next ``lens`` of its rows, in order.
        """
        if not groups:
            return
        self._probe_args = None
        h0 = len(self.block_ref)
        blocks = [_contiguous(group) for group in groups]
        self.block_ref.extend(blocks)
        self.block_group.extend(groups)
        handles = h0 + np.arange(len(groups))
        list_first = self._append_lists(handles, list_counts, coded)
        self.blocks.append(
            address=np.fromiter((b.ctypes.data for b in blocks), np.int64, len(blocks)),
            count=np.fromiter((g.n for g in groups), np.int64, len(groups)),
            first=list_first,
            end=list_first + list_counts,
            slot=slots,
        )
        # Readers may be scoring meanwhile: a slot turns clean only once all is written.
        self.slot_block[slots] = handles
        for slot, group in zip(slots.tolist(), groups, strict=True):
            self.slot_key[slot] = (group, group.version)
        self.stale[slots] = False

    def _append_lists(
        self, handles: np.ndarray, list_counts: np.ndarray, coded: Coded
    ) -> np.ndarray:
        """Append the blocks' rows and sub-lists; the first sub-list of each block."""
        lens = coded.lens
        if lens.size:
            cells = np.add.reduceat(lens, np.cumsum(list_counts) - list_counts)
        else:  # groups without sub-lists own no rows
            cells = np.zeros(len(handles), np.int64)
        row0 = self.rows.append(
            code=coded.code,
            scale=coded.scale,
            block=np.repeat(handles, cells).astype(np.int32),
            row=coded.rows,
            doc=np.full(coded.rows.shape[0], -1, np.int64),
        )
        means = coded.means
        norms = np.sqrt(np.einsum("ij,ij->i", means, means))
        mean_code, mean_scale = quantize(means)
        first = self.lists.append(
            mean=means,
            code=mean_code,
            scale=mean_scale,
            inv=1.0 / np.maximum(norms, 1e-12),
            start=row0 + np.cumsum(lens) - lens,
            len=lens,
        )
        return first + np.cumsum(list_counts) - list_counts


@dataclass(frozen=True)
class Coded:
    """Coded sub-lists: per list its mean and length; per cell (list after list) its code,
    scale and row in its group's block."""

    means: np.ndarray
    lens: np.ndarray
    code: np.ndarray
    scale: np.ndarray
    rows: np.ndarray


def _contiguous(group: Group) -> np.ndarray:
    """The group's block as the kernels read it (C-contiguous float32)."""
    block = group.vecs
    if not block.flags.c_contiguous or block.dtype != np.float32:
        block = np.ascontiguousarray(block[: group.n], np.float32)
    return block


def restore(st: ScorerState, arrays: Mapping[str, np.ndarray], index: HierIndex) -> None:
    """Fill ``st`` with the exported groups (``Scorer.export_arrays``) that still hold
    exactly the exported cells."""
    group_lists = np.asarray(arrays["group_lists"], np.int64)
    list_len = np.asarray(arrays["list_len"], np.int64)
    list_at = np.cumsum(group_lists) - group_lists
    row_counts = np.add.reduceat(list_len, list_at) if list_len.size else list_len
    row_at = np.cumsum(row_counts) - row_counts
    ids = arrays["cell_ids"].tolist()
    keep: list[int] = []
    groups: list[Group] = []
    rows: list[int] = []
    for g, gid in enumerate(arrays["gids"].tolist()):
        group = index.groups.get(gid)
        n, r0 = int(row_counts[g]), int(row_at[g])
        if group is None or group.n != n:
            continue
        at = [group.rows.get(cid) for cid in ids[r0 : r0 + n]]
        if None in at:
            continue
        keep.append(g)
        groups.append(group)
        rows.extend(at)  # type: ignore[arg-type]  # no None past the check above
    if not keep:
        return
    kept = np.asarray(keep, np.int64)
    lists = ranges(list_at[kept], group_lists[kept])
    cells = ranges(row_at[kept], row_counts[kept])
    coded = Coded(
        np.ascontiguousarray(arrays["list_mean"][lists], np.float32),
        list_len[lists],
        np.asarray(arrays["code"][cells], np.uint8),
        np.asarray(arrays["scale"][cells], np.float32),
        np.asarray(rows, np.int32),
    )
    slots = np.fromiter((grp.slot for grp in groups), np.int64, len(groups))
    st.append_groups(slots, groups, group_lists[kept], coded)
