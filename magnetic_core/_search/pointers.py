"""Reading float32 rows by address in compiled code: pointers, prefetches, exact dots.

The exact kernels read cells straight from the index's group blocks by address (see
:mod:`magnetic_core._search.kernels`). The rows they read are scattered over the whole
store, so each one is a cache miss; asking the memory system for the next rows while the
current one is scored (a prefetch, a hint with no effect on results) hides part of that wait.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = [
    "CODE_DOT_WIDTH",
    "EXACT_FAST",
    "code_rows",
    "dot_at",
    "f32_ptr",
    "i64_ptr",
    "kept_reaching",
    "nibble_dot",
    "nibble_rows",
    "prefetch_row",
    "void_ptr",
    "widened",
]

# The float64 sum may be reordered (vectorised): a cosine to float32 precision does not
# depend on the order of float64 additions of 384 products of unit-vector entries.
EXACT_FAST = {"reassoc", "contract", "nsz"}
_LINE = 64  # bytes per cache line


def _pointer_codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
    """An integer address as the signature's pointer type."""
    return builder.inttoptr(args[0], context.get_value_type(signature.return_type))


@intrinsic
def f32_ptr(typingctx, address):  # type: ignore[no-untyped-def]
    """A float32 pointer from an integer address (the address of a live numpy block)."""
    if not isinstance(address, types.Integer):
        return None
    return types.CPointer(types.float32)(address), _pointer_codegen


@intrinsic
def i64_ptr(typingctx, address):  # type: ignore[no-untyped-def]
    """An int64 pointer from an integer address (the address of a live int64 buffer)."""
    if not isinstance(address, types.Integer):
        return None
    return types.CPointer(types.int64)(address), _pointer_codegen


@intrinsic
def void_ptr(typingctx, address):  # type: ignore[no-untyped-def]
    """An untyped pointer from an integer address (for ``numba.carray`` with a dtype)."""
    if not isinstance(address, types.Integer):
        return None
    return types.voidptr(address), _pointer_codegen


@intrinsic
def _prefetch(typingctx, address):  # type: ignore[no-untyped-def]
    """Hint that the cache line at ``address`` is read soon (LLVM's ``prefetch``)."""
    if not isinstance(address, types.Integer):
        return None
    sig = types.void(address)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        # read (0), high locality (3), data cache (1)
        ptr = builder.inttoptr(args[0], byte_ptr)
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


# Entries of a nibble code row that :func:`nibble_dot` multiplies (the scorer's default
# code rank, ``kernels.CODE_RANK``): 64 bytes.
CODE_DOT_WIDTH = 128


def _row_and_query(codes: types.Type, r: types.Type, q: types.Type, q_dtype: types.Type) -> bool:
    """Whether ``(codes, r, q)`` are 2-D C-order code rows (int8, or uint8 nibble pairs),
    an integer row and a 1-D ``q_dtype`` query: the arguments the code products take."""
    return (
        isinstance(codes, types.Array)
        and codes.dtype in (types.int8, types.uint8)
        and codes.ndim == 2
        and codes.layout == "C"
        and isinstance(r, types.Integer)
        and isinstance(q, types.Array)
        and q.dtype == q_dtype
        and q.ndim == 1
    )


def _load_row_and_query(context, builder, signature, args, n, q_n, q_type, q_align):  # type: ignore[no-untyped-def]
    """IR loading ``codes[r, :n]`` as an ``<n x i8>`` vector and ``q[:q_n]`` as a ``<q_n x
    q_type>`` one, aligned to ``q_align`` bytes (``args``: codes, r, q, ...)."""
    codes_type, r_type, query_type = signature.args[:3]
    block = context.make_array(codes_type)(context, builder, args[0])
    query = context.make_array(query_type)(context, builder, args[2])
    row_index = context.cast(builder, args[1], r_type, types.intp)
    zero = context.get_constant(types.intp, 0)
    row_at = cgutils.get_item_pointer(context, builder, codes_type, block, [row_index, zero])
    q_at = cgutils.get_item_pointer(context, builder, query_type, query, [zero])
    row_ptr = builder.bitcast(row_at, ir.VectorType(ir.IntType(8), n).as_pointer())
    q_ptr = builder.bitcast(q_at, ir.VectorType(q_type, q_n).as_pointer())
    row = builder.load(row_ptr, align=1)
    q = builder.load(q_ptr, align=q_align)
    return row, q


@intrinsic
def nibble_dot(typingctx, codes, r, q8):  # type: ignore[no-untyped-def]
    """``sum_j lo(codes[r, j]) q8[j] + hi(codes[r, j]) q8[j + 64]`` over the 64 bytes of
    a nibble code row (uint8, C order; ``lo``/``hi`` its low and high four bits, 0 to 15)
    and an int8 ``q8`` of ``CODE_DOT_WIDTH`` entries, in int32 (at most 15 * 128 * 128 in
    size: no sum wraps).

    The row's nibbles are split by one mask and one shift; with AVX-512 VNNI each half is
    one ``vpdpbusd`` (64 unsigned bytes times 64 signed ones, summed in fours), else one
    product of whole vectors and LLVM's add reduction, from which LLVM picks the CPU's
    widest multiply-add pairs (:func:`_nibble_products`). The caller checks that the row
    holds ``CODE_DOT_WIDTH // 2`` bytes.
    """
    if not _row_and_query(codes, r, q8, types.int8) or codes.dtype != types.uint8:
        return None
    sig = types.int32(codes, r, q8)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        half = CODE_DOT_WIDTH // 2
        i8 = ir.IntType(8)
        row, q = _load_row_and_query(context, builder, signature, args, half, 2 * half, i8, 1)
        q_halves = [_lanes(builder, q, q, range(j, j + half)) for j in (0, half)]
        products = _nibble_products(context, builder, row, q_halves)
        lanes = products.type.count
        fnty = ir.FunctionType(ir.IntType(32), [products.type])
        reduce = cgutils.get_or_insert_function(
            builder.module, fnty, f"llvm.vector.reduce.add.v{lanes}i32"
        )
        return builder.call(reduce, [products])

    return sig, codegen


def _vnni(context) -> bool:  # type: ignore[no-untyped-def]
    """Whether the code being compiled may use AVX-512 VNNI's ``vpdpbusd`` (the features
    numba compiles for: the host's, or ``NUMBA_CPU_FEATURES``; numba's disk cache keeps a
    kernel per CPU and feature set). Read from numba's code generator, or, should a numba
    lack that method, from its setting and the host as that method does."""
    read = getattr(context.codegen(), "_get_host_cpu_features", None)
    if read is not None:
        text = read()
    else:
        from llvmlite import binding
        from numba.core import config

        text = getattr(config, "CPU_FEATURES", None) or binding.get_host_cpu_features().flatten()
    features = text.split(",")
    return "+avx512vnni" in features and "+avx512bw" in features


def _nibble_products(context, builder, row, q_halves):  # type: ignore[no-untyped-def]
    """The products of a nibble code row (``<64 x i8>``, two entries a byte) and an int8
    query (``q_halves``: the low nibbles' 64 entries, then the high ones'), as an int32
    vector whose lanes sum to the row's product: 16 lanes by two ``vpdpbusd`` with VNNI
    (the nibbles, 0 to 15, as the unsigned operand), else 128 lanes of single products,
    which the caller's sums fold in pairs (LLVM's multiply-adds of 16-bit pairs)."""
    half = row.type.count
    i8, i32 = ir.IntType(8), ir.IntType(32)
    bytes_ = ir.VectorType(i8, half)
    low = builder.and_(row, ir.Constant(bytes_, [15] * half))
    high = builder.lshr(row, ir.Constant(bytes_, [4] * half))
    if _vnni(context):
        acc = ir.Constant(ir.VectorType(i32, 16), [0] * 16)
        for nibbles, q in zip((low, high), q_halves, strict=True):
            acc = _vnni_dot(builder, acc, nibbles, q)
        return acc
    wide = ir.VectorType(i32, 2 * half)
    both = builder.zext(_lanes(builder, low, high, range(2 * half)), wide)
    q = builder.sext(_lanes(builder, q_halves[0], q_halves[1], range(2 * half)), wide)
    return builder.mul(both, q)


# Code rows :func:`nibble_rows` and :func:`code_rows` score in one call.
ROW_BATCH = 16


def _array_at(context, builder, array_type, array, index):  # type: ignore[no-untyped-def]
    """IR pointer to ``array[index...]`` (``index``: intp values)."""
    made = context.make_array(array_type)(context, builder, array)
    return cgutils.get_item_pointer(context, builder, array_type, made, index)


def _lanes(builder, a, b, picks):  # type: ignore[no-untyped-def]
    """The lanes ``picks`` of ``a`` followed by ``b`` (one shuffle)."""
    indices = ir.Constant(ir.VectorType(ir.IntType(32), len(picks)), list(picks))
    return builder.shuffle_vector(a, b, indices)


def _splat(builder, value, n):  # type: ignore[no-untyped-def]
    """A vector of ``n`` copies of ``value``."""
    vector = ir.VectorType(value.type, n)
    one = builder.insert_element(ir.Constant(vector, ir.Undefined), value, ir.IntType(32)(0))
    return _lanes(builder, one, one, [0] * n)


def _is_c_array(array: types.Type, dtype: types.Type, ndim: int) -> bool:
    """Whether ``array`` is the numba type of a C-order array of ``dtype`` and ``ndim``."""
    return (
        isinstance(array, types.Array)
        and array.dtype == dtype
        and array.ndim == ndim
        and array.layout == "C"
    )


def _fold_across(builder, folded, lanes):  # type: ignore[no-untyped-def]
    """One vector whose lane ``i`` is the sum of the lanes of ``folded[i]`` (``lanes``
    vectors of ``lanes`` int32 lanes): in rounds, pairs of vectors keep the lower and
    upper halves of each run of lanes side by side and add them (16 vectors, then 8, 4,
    2, 1), rather than a reduction of each vector on its own (five shuffles and adds for
    one number)."""
    run = lanes
    while len(folded) > 1:
        run //= 2
        low_picks = [j for j in range(2 * lanes) if j % (2 * run) < run]
        high_picks = [j for j in range(2 * lanes) if j % (2 * run) >= run]
        folded = [
            builder.add(_lanes(builder, a, b, low_picks), _lanes(builder, a, b, high_picks))
            for a, b in zip(folded[0::2], folded[1::2], strict=True)
        ]
    return folded[0]


def _fold(builder, products, lanes):  # type: ignore[no-untyped-def]
    """An int32 vector of products folded to ``lanes`` lanes: adjacent pairs first (a
    multiply-add of int16 pairs when the products are of 16-bit values), then equal
    slices."""
    n = products.type.count
    pairs = builder.add(
        _lanes(builder, products, products, range(0, n, 2)),
        _lanes(builder, products, products, range(1, n, 2)),
    )
    slices = [_lanes(builder, pairs, pairs, range(j, j + lanes)) for j in range(0, n // 2, lanes)]
    while len(slices) > 1:
        odd = slices[-1:] if len(slices) % 2 else []
        pairs_of = zip(slices[0::2], slices[1::2], strict=False)  # (an odd one out waits)
        slices = [builder.add(a, b) for a, b in pairs_of] + odd
    return slices[0]


@intrinsic
def nibble_rows(typingctx, codes, scales, r, q8, offset, unit, base, rows, approx, at):  # type: ignore[no-untyped-def]
    """Score the ``ROW_BATCH`` consecutive nibble code rows from ``r``, as a scan does
    one by one: ``approx[at + i] = base + float32(nibble_dot(codes, r + i, q8) - offset)
    * (scales[r + i] * unit)`` and ``rows[at + i] = r + i``.

    The same integer products as :func:`nibble_dot`, each row's folded to 16 lanes and
    the rows' lanes summed across (:func:`_fold_across`); the offset and scales are
    applied to the 16 sums as one vector (100K Reuters, the 13,000 cells of a query:
    107 -> 92 us with the codes in cache, 119 -> 105 us read from memory; with VNNI's
    ``vpdpbusd`` and the query in int8 steps, rather than 16-bit multiply-add pairs of an
    int16 query, the whole scan with its selection 85 -> 68 us in a stream of queries).
    The caller checks that rows ``r`` to ``r + 15`` exist (with their scales) and that ``rows`` and
    ``approx`` have room from ``at``; ``codes`` rows hold ``CODE_DOT_WIDTH // 2`` bytes.
    """
    n = ROW_BATCH
    if not (
        _row_and_query(codes, r, q8, types.int8)
        and codes.dtype == types.uint8
        and _is_c_array(scales, types.float32, 1)
        and _is_c_array(rows, types.int64, 1)
        and _is_c_array(approx, types.float32, 1)
        and isinstance(offset, types.Integer)
        and isinstance(unit, types.Float)
        and isinstance(base, types.Float)
        and isinstance(at, types.Integer)
    ):
        return None
    sig = types.void(codes, scales, r, q8, offset, unit, base, rows, approx, at)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        codes_t, scales_t, r_t, q_t, offset_t, unit_t, base_t, rows_t, approx_t, at_t = (
            signature.args
        )
        codes_a, scales_a, r_v, q_a, offset_v, unit_v, base_v, rows_a, approx_a, at_v = args
        i8, i64 = ir.IntType(8), ir.IntType(64)
        half = CODE_DOT_WIDTH // 2
        zero = context.get_constant(types.intp, 0)
        first = context.cast(builder, r_v, r_t, types.intp)
        out_at = context.cast(builder, at_v, at_t, types.intp)
        row0 = _array_at(context, builder, codes_t, codes_a, [first, zero])
        bytes_ = ir.VectorType(i8, half)
        q_ptr = _array_at(context, builder, q_t, q_a, [zero])
        to_bytes = bytes_.as_pointer()
        q_halves = [
            builder.load(builder.bitcast(builder.gep(q_ptr, [i64(j)]), to_bytes), align=1)
            for j in (0, half)
        ]
        folded = []
        for i in range(n):
            at_row = builder.gep(row0, [ir.Constant(i64, i * half)])
            row = builder.load(builder.bitcast(at_row, bytes_.as_pointer()), align=1)
            products = _nibble_products(context, builder, row, q_halves)
            folded.append(products if products.type.count == n else _fold(builder, products, n))
        sums32 = _fold_across(builder, folded, n)
        floats = ir.VectorType(ir.FloatType(), n)
        off = _splat(builder, context.cast(builder, offset_v, offset_t, types.int64), n)
        sums = builder.sitofp(builder.sub(builder.sext(sums32, ir.VectorType(i64, n)), off), floats)
        scale_ptr = _array_at(context, builder, scales_t, scales_a, [first])
        scale = builder.load(builder.bitcast(scale_ptr, floats.as_pointer()), align=4)
        unit32 = _splat(builder, context.cast(builder, unit_v, unit_t, types.float32), n)
        base32 = _splat(builder, context.cast(builder, base_v, base_t, types.float32), n)
        fast = ("reassoc", "contract", "nsz", "arcp")  # as the scan's own (kernels._FAST)
        step = builder.fmul(scale, unit32, flags=fast)
        scores = builder.fadd(base32, builder.fmul(sums, step, flags=fast), flags=fast)
        approx_ptr = _array_at(context, builder, approx_t, approx_a, [out_at])
        builder.store(scores, builder.bitcast(approx_ptr, floats.as_pointer()), align=4)
        numbers = builder.add(
            _splat(builder, first, n), ir.Constant(ir.VectorType(i64, n), list(range(n)))
        )
        rows_ptr = _array_at(context, builder, rows_t, rows_a, [out_at])
        builder.store(
            numbers, builder.bitcast(rows_ptr, ir.VectorType(i64, n).as_pointer()), align=8
        )
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def code_rows(typingctx, codes, picks, t, q8, sums, width):  # type: ignore[no-untyped-def]
    """``sums[t + i] = codes[picks[t + i]] . q8`` for the ``ROW_BATCH`` rows named from
    ``picks[t]``: int8 code rows (C order) and an int8 query, summed in int32 (at most
    128 * 128 * ``width`` in size). ``width``, a literal the caller writes, is the rows'
    length and ``q8``'s (a multiple of 64).

    Each row's products are folded to 16 lanes and the rows' lanes summed across
    (:func:`_fold_across`): integer products rather than every entry converted to float.
    With AVX-512 VNNI each 64 entries are one ``vpdpbusd`` (the codes made unsigned by a
    flip of their top bit, ``code + 128``, and ``128 * sum(q8)`` taken away once), else
    LLVM's multiply-adds of 16-bit pairs: the same sums. The caller checks that ``picks``
    and ``sums`` hold the 16 places from ``t``.
    """
    n = ROW_BATCH
    if not (
        _row_and_query(codes, t, q8, types.int8)
        and codes.dtype == types.int8
        and _is_c_array(picks, types.int64, 1)
        and _is_c_array(sums, types.int32, 1)
        and isinstance(width, types.IntegerLiteral)
        and width.literal_value % 64 == 0
    ):
        return None
    sig = types.void(codes, picks, t, q8, sums, width)
    m = width.literal_value

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        codes_t, picks_t, t_t, q_t, sums_t, _ = signature.args
        codes_a, picks_a, t_v, q_a, sums_a, _ = args
        i8, i32 = ir.IntType(8), ir.IntType(32)
        zero = context.get_constant(types.intp, 0)
        at = context.cast(builder, t_v, t_t, types.intp)
        # Power-of-two pieces of 64 entries: LLVM then finds its multiply-adds of 16-bit
        # pairs, which it did not in one product of 384 (32-bit multiplies instead).
        piece = 64
        row_piece = ir.VectorType(i8, piece)
        q_ptr = _array_at(context, builder, q_t, q_a, [zero])
        q = [
            builder.load(
                builder.bitcast(builder.gep(q_ptr, [ir.IntType(64)(j)]), row_piece.as_pointer()),
                align=1,
            )
            for j in range(0, m, piece)
        ]
        vnni = _vnni(context)
        lanes = ir.VectorType(i32, n)
        if vnni:
            wide = ir.VectorType(i32, piece)
            fnty = ir.FunctionType(i32, [wide])
            reduce = cgutils.get_or_insert_function(
                builder.module, fnty, f"llvm.vector.reduce.add.v{piece}i32"
            )
            q_sum = None
            for q_c in q:
                part = builder.call(reduce, [builder.sext(q_c, wide)])
                q_sum = part if q_sum is None else builder.add(q_sum, part)
            bias = _splat(builder, builder.shl(q_sum, i32(7)), n)  # 128 * sum(q8)
            flip = ir.Constant(row_piece, [0x80] * piece)
        folded = []
        for i in range(n):
            place = builder.add(at, context.get_constant(types.intp, i))
            pick = builder.load(_array_at(context, builder, picks_t, picks_a, [place]))
            row_ptr = _array_at(context, builder, codes_t, codes_a, [pick, zero])
            total = ir.Constant(lanes, [0] * n) if vnni else None
            for c, q_c in enumerate(q):
                at_piece = builder.gep(row_ptr, [ir.IntType(64)(c * piece)])
                row = builder.load(builder.bitcast(at_piece, row_piece.as_pointer()), align=1)
                if vnni:
                    total = _vnni_dot(builder, total, builder.xor(row, flip), q_c)
                    continue
                products = builder.mul(
                    builder.sext(row, ir.VectorType(i32, piece)),
                    builder.sext(q_c, ir.VectorType(i32, piece)),
                )
                part = _fold(builder, products, n)
                total = part if total is None else builder.add(total, part)
            folded.append(total)
        sums16 = _fold_across(builder, folded, n)
        if vnni:
            sums16 = builder.sub(sums16, bias)
        out = _array_at(context, builder, sums_t, sums_a, [at])
        builder.store(sums16, builder.bitcast(out, lanes.as_pointer()), align=4)
        return context.get_dummy_value()

    return sig, codegen


def _vnni_dot(builder, acc, unsigned, signed):  # type: ignore[no-untyped-def]
    """``vpdpbusd``: ``acc`` (16 int32 lanes) plus, in each lane, the sum of four products
    of ``unsigned``'s bytes (0 to 255) and ``signed``'s (-128 to 127); 64-byte vectors."""
    dwords = ir.VectorType(ir.IntType(32), 16)
    fnty = ir.FunctionType(dwords, [dwords, dwords, dwords])
    dot = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.avx512.vpdpbusd.512")
    return builder.call(
        dot, [acc, builder.bitcast(unsigned, dwords), builder.bitcast(signed, dwords)]
    )


# Entries :func:`kept_reaching` looks at in one call.
KEPT_LANES = 16


@intrinsic
def kept_reaching(typingctx, values, i, bar, out, at):  # type: ignore[no-untyped-def]
    """Write the positions of ``values[i : i + KEPT_LANES]`` (float32 or float64, C order)
    that are at least ``bar`` (a NaN never is) to ``out[at:]`` (int64), in order, and
    return ``at`` plus their count: one comparison of the 16 entries and one compressing store
    (``vpcompressq`` with AVX-512; LLVM writes the entries one by one elsewhere). The
    caller checks that the 16 entries exist and that ``out`` has room for 16 from ``at``.
    """
    n = KEPT_LANES
    if not (
        (_is_c_array(values, types.float32, 1) or _is_c_array(values, types.float64, 1))
        and isinstance(i, types.Integer)
        and isinstance(bar, types.Float)
        and _is_c_array(out, types.int64, 1)
        and isinstance(at, types.Integer)
    ):
        return None
    sig = types.int64(values, i, bar, out, at)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        values_t, i_t, bar_t, out_t, at_t = signature.args
        values_a, i_v, bar_v, out_a, at_v = args
        i64 = ir.IntType(64)
        first = context.cast(builder, i_v, i_t, types.intp)
        place = context.cast(builder, at_v, at_t, types.intp)
        dtype = values_t.dtype
        floats = ir.VectorType(context.get_value_type(dtype), n)
        at_values = _array_at(context, builder, values_t, values_a, [first])
        entries = builder.load(builder.bitcast(at_values, floats.as_pointer()), align=4)
        bars = _splat(builder, context.cast(builder, bar_v, bar_t, dtype), n)
        reaching = builder.fcmp_ordered(">=", entries, bars)
        positions = builder.add(
            _splat(builder, first, n), ir.Constant(ir.VectorType(i64, n), list(range(n)))
        )
        at_out = _array_at(context, builder, out_t, out_a, [place])
        fnty = ir.FunctionType(ir.VoidType(), [positions.type, i64.as_pointer(), reaching.type])
        store = cgutils.get_or_insert_function(
            builder.module, fnty, f"llvm.masked.compressstore.v{n}i64"
        )
        builder.call(store, [positions, at_out, reaching])
        mask = builder.bitcast(reaching, ir.IntType(n))
        count = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(mask.type, [mask.type]), f"llvm.ctpop.i{n}"
        )
        return builder.add(place, builder.zext(builder.call(count, [mask]), i64))

    return sig, codegen


@njit(cache=True, nogil=True)
def prefetch_row(address: int, nbytes: int) -> None:
    """Prefetch the ``nbytes`` bytes at ``address``, one hint per cache line."""
    for off in range(0, nbytes, _LINE):
        _prefetch(address + off)  # type: ignore[call-arg]  # numba adds typingctx


@njit(cache=True, nogil=True, fastmath=EXACT_FAST)
def dot_at(address: int, q: np.ndarray) -> np.float32:
    """Exact dot product of ``q`` with the float32 row at ``address`` (float64 sum).

    Pass ``q`` as :func:`widened` gives it: a float32 query is converted again for every
    row, which made the exact scan of 10,000 rows a third slower (436 -> 282 us)."""
    p = f32_ptr(address)  # type: ignore[call-arg,var-annotated]  # numba adds typingctx
    acc = 0.0
    for c in range(q.shape[0]):
        acc += np.float64(p[c]) * np.float64(q[c])
    return np.float32(acc)


@njit(cache=True, nogil=True)
def widened(q: np.ndarray) -> np.ndarray:
    """``q`` as float64, the form the exact kernels multiply rows by (see :func:`dot_at`)."""
    out = np.empty(q.shape[0], np.float64)
    for c in range(q.shape[0]):
        out[c] = q[c]
    return out
