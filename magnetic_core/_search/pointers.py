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

__all__ = ["EXACT_FAST", "dot_at", "f32_ptr", "i64_ptr", "prefetch_row", "widened"]

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
